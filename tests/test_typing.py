"""The package type-checks (issue 39 item 6): ``mypy`` on every module of ``src/dpnet``, the
application layer included, reports nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_nothing_in_the_package(tmp_path):
    pytest.importorskip("mypy")                 # a dev dependency: make setup installs it
    done = subprocess.run([sys.executable, "-m", "mypy", "src/dpnet", "--ignore-missing-imports",
                           "--no-error-summary", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, cwd=ROOT)
    found = [line for line in done.stdout.splitlines() if line.startswith("src/")]
    assert not found, f"{len(found)} mypy lines:\n" + "\n".join(found[:40])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
