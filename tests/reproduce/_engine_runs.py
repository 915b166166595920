"""Module-level run functions for the engine tests (worker processes import them by name)."""

import os
from pathlib import Path


def square(x: float, calls: str) -> dict:
    """x^2, counting its calls in a file (to see the cache at work across processes)."""
    with Path(calls).open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    return {"value": x * x, "curve": [x, 2 * x, 3 * x]}


def cleared_midway(x: float) -> dict:
    """Writes a snapshot, then clears the whole cache (as ``dpnet cache --clear`` in another
    shell would) before returning: its own snapshot and lock must survive that."""
    from dpnet.lab import store as engine

    snapshot = engine.run_folder() / "snapshot.pt"
    snapshot.write_bytes(b"0" * 10)
    removed = engine.prune(None)
    return {"value": x, "removed_midway": removed, "snapshot_kept": snapshot.is_file()}
