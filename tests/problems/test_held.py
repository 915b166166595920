"""Problems holding a subset of the agents (one rank's data): same numbers as the full problem
for the held agents, global constants kept, clear errors for everything else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import dpnet
from dpnet import data, graphs, models
from dpnet.errors import ParameterError
from dpnet.problems import LogisticRegression, NeuralProblem, NonconvexLogistic, Quadratic, SinCos
from dpnet.rng import Streams

FIX = Path(__file__).parents[1] / "data"
torch.set_num_threads(1)
AGENTS = np.array([2, 3, 5])


def _logistic():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((70, 6))
    return X, np.sign(X[:, 0] + 0.2 * rng.standard_normal(70))


PROBLEMS = {
    "nonconvex_logistic": lambda: NonconvexLogistic.random(n_agents=7, samples=9, dim=4, seed=2),
    "sincos": lambda: SinCos.random(n_agents=7, dim=4, seed=2),
    "quadratic": lambda: Quadratic.random(n_agents=7, dim=4, seed=2),
    "logistic_regression": lambda: LogisticRegression.partition(*_logistic(), 7, seed=1,
                                                                reg="1/m"),
}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_held_agents_answer_exactly_as_in_the_full_problem(name):
    full = PROBLEMS[name]()
    part = full.restrict(AGENTS)
    X = torch.from_numpy(np.random.default_rng(0).standard_normal((7, full.dim)))
    assert part.n_agents == 7 and part.held.tolist() == AGENTS.tolist()
    for agents in (AGENTS, AGENTS[[2, 0]], AGENTS[1:2]):
        rows = X[torch.from_numpy(agents)]
        torch.testing.assert_close(part.grad(rows, agents), full.grad(rows, agents), rtol=0, atol=0)
        torch.testing.assert_close(part.local_loss(rows, agents), full.local_loss(rows, agents),
                                   rtol=0, atol=0)
    if name == "logistic_regression":  # minibatches keyed by the global agent index
        rows = X[torch.from_numpy(AGENTS)]
        for clip in (None, 0.5):
            torch.testing.assert_close(part.stochastic_grad(rows, Streams(3), 4, 3, AGENTS,
                                                            clip=clip),
                                       full.stochastic_grad(rows, Streams(3), 4, 3, AGENTS,
                                                            clip=clip), rtol=0, atol=0)
    # constants that depend on every agent's data are those of the full problem
    assert part.smoothness == full.smoothness
    assert part.gradient_bound() == full.gradient_bound()
    opt = part.optimum()
    if name in ("quadratic", "sincos"):
        torch.testing.assert_close(opt, full.optimum())
    else:  # needs an L-BFGS solve over all data: unknown unless solved before restrict()
        assert opt is None
        full.optimum()
        torch.testing.assert_close(full.restrict(AGENTS).optimum(), full.optimum())


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_held_problem_refuses_what_needs_other_agents_data(name):
    part = PROBLEMS[name]().restrict(AGENTS)
    x = torch.zeros(part.dim, dtype=torch.float64)
    with pytest.raises(ParameterError, match=r"agents.*\[4\].*held: \[2\.\.3, 5\] of 7"):
        part.grad(x.reshape(1, -1), np.array([4]))
    with pytest.raises(ParameterError, match=r"problem.*holding agents \[2\.\.3, 5\] of 7.*"
                       r"global objective"):
        part.loss(x)
    with pytest.raises(ParameterError, match="global gradient"):
        part.global_grad(x)
    with pytest.raises(ParameterError, match=r"agents.*increasing agent indices in \[0, 7\)"):
        part.restrict([3, 2])
    with pytest.raises(ParameterError, match=r"agents.*\[4\]"):  # not held: cannot be restored
        part.restrict([3, 4])
    assert part.restrict([3]).held.tolist() == [3]


def test_partition_with_agents_holds_only_those_samples():
    X, y = _logistic()
    full = LogisticRegression.partition(X, y, 7, seed=1, reg="1/m")
    mine = LogisticRegression.partition(X, y, 7, seed=1, reg="1/m", agents=AGENTS)
    assert tuple(mine.A.shape) == (3, 10, 6) and mine.n_agents == 7
    np.testing.assert_array_equal(mine.A.numpy(), full.A[torch.from_numpy(AGENTS)].numpy())
    assert mine.smoothness == pytest.approx(full.smoothness, rel=1e-13)
    assert mine.reg == full.reg == 0.1
    rows = torch.ones(3, 6, dtype=torch.float64)
    torch.testing.assert_close(mine.grad(rows, AGENTS), full.grad(rows, AGENTS), rtol=0, atol=0)


def test_neural_problem_keeps_only_the_held_agents_samples():
    train = data.load_mnist("train", root=FIX, verify=False, download=False)
    kw = dict(transform=models.mnist_transform, chunk=5)
    full = NeuralProblem.from_dataset(models.mnist_cnn(seed=1), train, 5, **kw)
    mine = NeuralProblem.from_dataset(models.mnist_cnn(seed=1), train, 5, agents=[1, 3], **kw)
    assert mine.features.shape[0] == 2 * full.m < full.features.shape[0]
    X = full.default_x0()[:2] + 0.01
    a = np.array([1, 3])
    torch.testing.assert_close(mine.grad(X, a), full.grad(X, a))
    torch.testing.assert_close(mine.local_loss(X, a), full.local_loss(X, a))
    torch.testing.assert_close(mine.stochastic_grad(X, Streams(1), 2, 4, a),
                               full.stochastic_grad(X, Streams(1), 2, 4, a))
    with pytest.raises(ParameterError, match="training-union metrics"):
        mine.evaluate(X, which=("train",))


def test_a_run_needs_the_data_of_every_agent_of_its_process():
    problem = NonconvexLogistic.random(n_agents=6, samples=9, dim=4, seed=2)
    with pytest.raises(ParameterError, match=r"problem.held.*\[0\.\.2\].*every agent of this "
                       r"process \(\[0\.\.5\]\)"):
        dpnet.run(dpnet.algorithms.DGD(eta=0.1), problem.restrict([0, 1, 2]), graphs.ring(6), 3)


def test_config_tables_build_a_rank_s_share_of_a_dataset(monkeypatch):
    monkeypatch.setenv("DPNET_DATA", str(FIX))
    spec = {"name": "logistic_regression", "dataset": "a9a", "n_agents": 4, "reg": "1/m",
            "verify": False, "seed": 3}
    full = dpnet.problems.from_spec(spec)
    mine = dpnet.problems.from_spec(spec, agents=[1, 2])
    assert mine.held.tolist() == [1, 2] and mine.A.shape[0] == 2 and full.A.shape[0] == 4
    np.testing.assert_array_equal(mine.A.numpy(), full.A[1:3].numpy())
    assert mine.smoothness == pytest.approx(full.smoothness, rel=1e-13)
    synthetic = dpnet.problems.from_spec({"name": "quadratic", "n_agents": 5, "dim": 3}, agents=[4])
    assert synthetic.held.tolist() == [4]
    with pytest.raises(ParameterError, match="problem.dataset"):
        dpnet.problems.from_spec({"name": "logistic_regression", "n_agents": 4})
