"""The core library type-checks (issue 39 item 6): ``mypy`` on every module below the
application layer (``dpnet.lab`` and ``dpnet.cli`` are not yet clean) reports nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPLICATION = ("src/dpnet/lab/", "src/dpnet/cli.py")


def test_mypy_finds_nothing_in_the_core_library(tmp_path):
    pytest.importorskip("mypy")                 # a dev dependency: make setup installs it
    done = subprocess.run([sys.executable, "-m", "mypy", "src/dpnet", "--ignore-missing-imports",
                           "--no-error-summary", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, cwd=ROOT)
    found = [line for line in done.stdout.splitlines()
             if line.startswith("src/") and not line.startswith(APPLICATION)]
    assert not found, f"{len(found)} mypy lines in the core library:\n" + "\n".join(found[:40])
    assert done.returncode in (0, 1), done.stderr[-2000:]     # 1: the application layer's
