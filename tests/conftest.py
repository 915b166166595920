"""Fixtures shared by the whole suite.

* every test runs with the experiment engine's run cache in a fresh session folder, so nothing is
  read from (or written to) a user's ``~/.cache/dpnet/runs``;
* ``one_thread``: torch's intra-op threads at 1 for the test (small tensors; 2-core machines);
* ``prism``: paper 000's 6-agent prism graph with Metropolis weights;
* ``nonconvex6``: paper 000's problem (37) over those 6 agents (m = 200, d = 10, seed 0).

This folder is on ``sys.path`` (pytest's rootdir conftest), so tests and benchmarks import the
per-agent reference oracle as ``reference``.
"""

import os

import pytest

PRISM_EDGES = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (0, 3), (1, 4), (2, 5)]


@pytest.fixture(autouse=True, scope="session")
def _run_cache(tmp_path_factory):
    before = os.environ.get("DPNET_RUNS")
    os.environ["DPNET_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    yield
    if before is None:
        os.environ.pop("DPNET_RUNS", None)
    else:
        os.environ["DPNET_RUNS"] = before


@pytest.fixture
def one_thread():
    from dpnet.threads import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture
def prism():
    from dpnet import graphs

    return graphs.from_edges(6, PRISM_EDGES)


@pytest.fixture
def nonconvex6():
    from dpnet import problems

    return problems.NonconvexLogistic.random(n_agents=6, samples=200, dim=10, seed=0)


@pytest.fixture
def small_data():
    """The tiny dataset fixtures under tests/data in place of the real ones."""
    from pathlib import Path

    from dpnet.lab import source as common

    with common.use_data(Path(__file__).resolve().parent / "data"):
        yield
