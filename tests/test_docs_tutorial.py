"""docs/your-own-problem.md runs: its python blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "your-own-problem.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_tutorial_has_blocks():
    assert len(BLOCKS) >= 3


def test_every_block_runs_in_order(capsys, tmp_path, monkeypatch):
    from dpnet.algorithms.base import REGISTRY as ALGORITHMS
    from dpnet.lab.compare.entries import ENTRIES

    # the leaderboard section's runs go to a fresh cache; what the page registers is gone after
    monkeypatch.setenv("DPNET_RUNS", str(tmp_path / "runs"))
    namespace: dict = {}
    with ALGORITHMS.restoring(), ENTRIES.restoring():
        for i, block in enumerate(BLOCKS):
            try:
                exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)
            except Exception as err:                     # name the block that failed
                pytest.fail(f"{DOC.name} block {i + 1} failed: {type(err).__name__}: {err}")
