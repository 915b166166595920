"""Module-level run functions for the engine tests (worker processes import them by name)."""

import os
from pathlib import Path


def square(x: float, calls: str) -> dict:
    """x^2, counting its calls in a file (to see the cache at work across processes)."""
    with Path(calls).open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    return {"value": x * x, "curve": [x, 2 * x, 3 * x]}
