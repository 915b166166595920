"""A neural problem from a configuration: a user's .npz and model by import path, a partitioner
with its parameters, and the Dirichlet MNIST example with per-agent epsilons."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpnet import problems
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.lab import config

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dirichlet_mnist.toml"
MNIST = Path(os.environ.get("DPNET_DATA", "/nonexistent")) / "mnist"


@pytest.fixture
def npz(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.npz"
    np.savez(path, X=rng.standard_normal((400, 6)).astype(np.float32), y=rng.integers(0, 3, 400))
    return path


def _cfg(npz, **problem):
    return {"iterations": 3, "graph": {"name": "watts_strogatz", "n": 6, "k": 2, "p": 0.3},
            "problem": {"name": "neural", "dataset": str(npz), "model": "user_models:tiny_mlp",
                        "model_kw": {"width": 5}, "n_agents": 6, "how": "dirichlet",
                        "alpha": 0.3, "min_size": 5, **problem},
            "algorithm": {"name": "dp_sgd", "lr": 0.1, "noise_multiplier": 2.0,
                          "sampling": "fixed", "batch_size": 4},
            "privacy": {"delta": 1e-5}}


def test_a_users_data_and_model_by_import_path(npz):
    cfg = config.validate(_cfg(npz))
    graph, problem, alg = config.build(cfg)
    assert problem.dim == 6 * 5 + 5 + 5 * 3 + 3              # the user's MLP at width 5
    sizes = problem.local_sizes()
    assert sizes.sum() == 400 and len(set(sizes.tolist())) > 1
    g = alg.privacy(problem, graph, 3, delta=1e-5)
    assert np.argmax(g.per_agent) == np.argmin(sizes)


def test_misspelled_keys_and_paths_are_named_errors(npz):
    with pytest.raises(UnknownNameError, match="alpha"):          # lists the partitioner's keys
        config.validate(_cfg(npz, alhpa=0.1))
    with pytest.raises(UnknownNameError, match="problem.how"):
        config.validate(_cfg(npz, how="dirichet"))
    with pytest.raises(UnknownNameError, match="user_models:tiny_mpl"):
        config.build(config.validate(_cfg(npz, model="user_models:tiny_mpl")))
    with pytest.raises(ParameterError, match="importable module"):
        config.build(config.validate(_cfg(npz, model="no_such_package:f")))
    with pytest.raises(UnknownNameError, match="mnist_cnn"):
        config.build(config.validate(_cfg(npz, model="mnist_cn")))
    with pytest.raises(ParameterError, match="npz"):
        problems.from_spec({"name": "neural", "dataset": str(npz) + ".missing", "n_agents": 2})


@pytest.mark.skipif(not (MNIST / "train-labels-idx1-ubyte.gz").is_file(),
                    reason="MNIST ($DPNET_DATA) absent")
def test_the_dirichlet_mnist_example_accounts_each_agent_at_its_rate():
    cfg = config.validate(config.apply_overrides(config.load(EXAMPLE),
                                                 ["problem.records=3000"]))
    graph, problem, alg = config.build(cfg)
    assert graph.n == 10 and problem.local_sizes().sum() == 3000
    g = alg.privacy(problem, graph, cfg["iterations"], **cfg["privacy"])
    sizes = problem.local_sizes()
    want = [alg.privacy(problems.ProblemConstants(1, problem.dim, records_per_agent=int(m)),
                        None, cfg["iterations"], **cfg["privacy"]).epsilon for m in sizes]
    np.testing.assert_allclose(g.per_agent, want, rtol=1e-12)


@pytest.mark.skipif(not (MNIST / "train-labels-idx1-ubyte.gz").is_file(),
                    reason="MNIST ($DPNET_DATA) absent")
def test_the_example_states_its_epsilons():
    from dpnet import partitions
    from dpnet.data import load_mnist

    cfg = config.validate(config.load(EXAMPLE))
    p = cfg["problem"]
    sizes = partitions.partition(load_mnist("train").y[: p["records"]], p["n_agents"],
                                 how=p["how"], seed=p.get("seed", 0), alpha=p["alpha"]).sizes
    _, _, alg = config.build({**cfg, "problem": {"name": "nonconvex_logistic", "n_agents": 10}})
    g = alg.privacy(problems.ProblemConstants(10, 7194, records_per_agent=sizes), None,
                    cfg["iterations"], **cfg["privacy"])
    text = EXAMPLE.read_text()
    assert f"{min(g.per_agent):.2f} for the largest" in text
    assert f"to {g.epsilon:.2f} for the smallest, {sizes.min()} records" in text
