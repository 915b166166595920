"""Unequal local sizes m_i: every quantity against a per-agent reference (agent i alone with its
own m_i records), the samplers' draws against each agent's own draw, DP-SGD's run against the
per-agent loop of its equations, and each agent's epsilon against the account at its own rate."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import dpnet
from dpnet import graphs, partitions
from dpnet.algorithms import DPSGD
from dpnet.errors import ParameterError
from dpnet.privacy import dp_sgd
from dpnet.problems import LogisticRegression, NeuralProblem, NonconvexLogistic
from dpnet.problems.stochastic import poisson_indices, sample_indices
from dpnet.rng import Streams

import reference

SIZES = np.array([12, 3, 7, 20, 5])
N, D = len(SIZES), 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = 1.5 * rng.standard_normal((int(SIZES.sum()) + 9, D))
    y = rng.choice([-1.0, 1.0], X.shape[0])
    parts = partitions.given_sizes(X.shape[0], N, seed=1, sizes=SIZES)
    return X, y, parts


def _alone(X, y, idx, reg):
    return LogisticRegression(X[idx][None], y[idx][None], reg=reg)


def test_logistic_quantities_are_each_agents_own(data):
    X, y, parts = data
    p = LogisticRegression.from_parts(X, y, parts, reg=0.05)
    assert p.local_sizes().tolist() == SIZES.tolist() and p.m is None
    W = torch.as_tensor(np.random.default_rng(0).standard_normal((N, D)))
    alone = [_alone(X, y, parts[i], 0.05) for i in range(N)]
    want_g = torch.cat([a.grad(W[i:i + 1]) for i, a in enumerate(alone)])
    want_f = torch.cat([a.local_loss(W[i:i + 1]) for i, a in enumerate(alone)])
    torch.testing.assert_close(p.grad(W), want_g, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(p.local_loss(W), want_f, rtol=1e-12, atol=1e-13)
    # the global objective (1/n) sum_i f_i and its gradient, in one pass
    x = W[0]
    f, g = p.loss_and_grad(x)
    assert f == pytest.approx(float(np.mean([a.local_loss(x[None])[0] for a in alone])), rel=1e-12)
    torch.testing.assert_close(g, torch.stack([a.grad(x[None])[0] for a in alone]).mean(0),
                               rtol=1e-12, atol=1e-13)
    # smoothness: the largest agent's own (its curvature over its own m_i)
    assert p.smoothness == pytest.approx(max(a.smoothness for a in alone), rel=1e-12)
    # one agent's rows, restricted, keep their own sizes and gradients
    held = p.restrict([1, 3])
    torch.testing.assert_close(held.grad(W[[1, 3]], agents=np.array([1, 3])), want_g[[1, 3]],
                               rtol=1e-12, atol=1e-13)
    assert held.local_sizes().tolist() == SIZES.tolist()


def test_reg_one_over_m_needs_equal_sizes(data):
    X, y, parts = data
    with pytest.raises(ParameterError, match="unequal local sizes"):
        LogisticRegression.from_parts(X, y, parts, reg="1/m")


def test_nonconvex_with_unequal_samples_is_each_agent_with_its_first_rows():
    p = NonconvexLogistic.random(N, samples=SIZES, dim=D, seed=2)
    W = torch.as_tensor(np.random.default_rng(1).standard_normal((N, D)))
    for i, m in enumerate(SIZES):
        one = NonconvexLogistic(p.V[i:i + 1, :m], p.u[i:i + 1, :m], lam=p.lam, alpha=p.alpha)
        torch.testing.assert_close(p.grad(W)[i], one.grad(W[i:i + 1])[0], rtol=1e-12,
                                   atol=1e-13)
        torch.testing.assert_close(p.local_loss(W)[i], one.local_loss(W[i:i + 1])[0],
                                   rtol=1e-12, atol=1e-13)


def test_samplers_draw_each_agents_own_batch():
    rng, agents = Streams(5), np.arange(N)
    for k in range(20):
        idx = sample_indices(rng, k, agents, SIZES, 3).numpy()
        for i in range(N):
            assert np.array_equal(np.sort(idx[i]),
                                  reference.minibatch(rng, "sample", k, i, int(SIZES[i]), 3))
        got, inside = poisson_indices(rng, k, agents, SIZES, 0.3)
        for i in range(N):
            own = np.flatnonzero(rng.uniform("sample", k, [i], int(SIZES[i]))[0] < 0.3)
            assert np.array_equal(np.sort(got[i][inside[i]].numpy()), own)
    # equal sizes given per agent draw exactly what one size draws
    same = np.full(N, 9)
    assert torch.equal(sample_indices(rng, 4, agents, same, 4),
                       sample_indices(rng, 4, agents, 9, 4))
    with pytest.raises(ParameterError, match="smallest local size m_i = 3"):
        sample_indices(rng, 0, agents, SIZES, 4)


def test_poisson_inclusion_rate_on_unequal_sets():
    rng, agents, q = Streams(9), np.arange(N), 0.25
    hits = np.zeros((N, SIZES.max()))
    for k in range(4000):
        idx, inside = poisson_indices(rng, k, agents, SIZES, q)
        np.add.at(hits, (np.repeat(agents, idx.shape[1])[inside.numpy().ravel()],
                         idx.numpy().ravel()[inside.numpy().ravel()]), 1)
    for i, m in enumerate(SIZES):
        assert hits[i, m:].sum() == 0                                  # padding never drawn
        np.testing.assert_allclose(hits[i, :m] / 4000, q, atol=4 * np.sqrt(q * (1 - q) / 4000))


@pytest.mark.parametrize("kw", [{"sampling": "poisson", "rate": 0.3},
                                {"sampling": "fixed", "batch_size": 2}])
def test_dp_sgd_run_is_the_per_agent_loop_with_own_sizes(data, kw):
    X, y, parts = data
    p = LogisticRegression.from_parts(X, y, parts, reg=0.01)
    graph = graphs.ring(N)
    x0 = np.random.default_rng(2).standard_normal((N, D))
    alg = DPSGD(0.3, 1.1, clip=0.5, **kw)
    got = dpnet.run(alg, p, graph, 5, x0=x0, seed=4, log_every=5, progress=False).x
    want = reference.dp_sgd(graph.W, p.A.numpy(), p.b.numpy(), p.reg, x0, 0.3, 1.1, 0.5, 5,
                            seed=4, rate=kw.get("rate"), batch_size=kw.get("batch_size"),
                            sizes=SIZES)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_dp_sgd_accounts_each_agent_at_its_own_rate(data):
    X, y, parts = data
    p = LogisticRegression.from_parts(X, y, parts, reg=0.01)
    graph = graphs.ring(N)
    fixed = DPSGD(0.3, 1.5, clip=0.5, sampling="fixed", batch_size=2)
    g = fixed.privacy(p, graph, 50, delta=1e-5)
    want = [dp_sgd.epsilon(1.5, "fixed", 2 / m, 50, 1e-5, "pld") for m in SIZES]
    np.testing.assert_allclose(g.per_agent, want, rtol=1e-12)
    assert g.epsilon == pytest.approx(max(want), rel=1e-12)
    assert np.argmax(g.per_agent) == np.argmin(SIZES)        # the smallest set: the largest rate
    poisson = DPSGD(0.3, 1.5, clip=0.5, sampling="poisson", rate=0.2)
    gp = poisson.privacy(p, graph, 50, delta=1e-5)
    np.testing.assert_allclose(gp.per_agent, dp_sgd.epsilon(1.5, "poisson", 0.2, 50, 1e-5, "pld"),
                               rtol=1e-12)
    with pytest.raises(ParameterError, match="smallest local size m_i = 3"):
        DPSGD(0.3, 1.5, sampling="fixed", batch_size=4).privacy(p, graph, 50, delta=1e-5)


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(x)


def test_neural_problem_with_ragged_parts_is_each_agent_alone():
    rng = np.random.default_rng(4)
    feats = rng.standard_normal((60, 6)).astype(np.float32)
    labels = rng.integers(0, 3, 60)
    parts = partitions.dirichlet(labels, 4, seed=0, alpha=0.5, min_size=3)
    assert len(set(parts.sizes.tolist())) > 1
    p = NeuralProblem(_Tiny(), feats, labels, parts, chunk=4, metric_samples=None)
    W = p.default_x0() + 0.1 * torch.as_tensor(rng.standard_normal((4, p.dim)),
                                               dtype=torch.float32)
    for i, idx in enumerate(parts):
        one = NeuralProblem(_Tiny(), feats, labels, [idx], chunk=4)
        torch.testing.assert_close(p.grad(W)[i], one.grad(W[i:i + 1])[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(p.local_loss(W)[i], one.local_loss(W[i:i + 1])[0],
                                   rtol=1e-6, atol=1e-7)
    # the training-union metrics are (1/n) sum_i f_i, not the record-weighted mean
    x = W[1]
    assert p.loss(x) == pytest.approx(float(p.local_loss(x.repeat(4, 1)).mean()), rel=1e-5)
    torch.testing.assert_close(p.global_grad(x), p.grad(x.repeat(4, 1)).mean(0), rtol=1e-5,
                               atol=1e-6)
    ev = p.evaluate(W, which=("train",))
    acc = [float((one_logits.argmax(-1) == torch.as_tensor(labels[idx])).double().mean())
           for idx, one_logits in ((idx, p._flat.logits(W.mean(0), torch.as_tensor(feats[idx])))
                                   for idx in parts)]
    assert ev["train_accuracy"] == pytest.approx(np.mean(acc), rel=1e-6)
    # DP-SGD runs on it and accounts each agent at its own rate
    alg = DPSGD(0.1, 1.0, clip=1.0, sampling="fixed", batch_size=2)
    res = dpnet.run(alg, p, graphs.ring(4), 3, seed=1, progress=False)
    assert np.isfinite(res.x).all()
    np.testing.assert_allclose(
        alg.privacy(p, graphs.ring(4), 3, delta=1e-5).per_agent,
        [dp_sgd.epsilon(1.0, "fixed", 2 / m, 3, 1e-5, "pld") for m in parts.sizes], rtol=1e-12)


def test_decor_accounts_each_agent_at_its_own_multiplier_and_rate(data):
    from dpnet.algorithms import DECOR
    from dpnet.privacy import decor

    X, y, parts = data
    p = LogisticRegression.from_parts(X, y, parts, reg=0.01)
    graph = graphs.ring(N)
    alg = DECOR(0.3, 1.5, 0.8, clip=0.5, sampling="fixed", batch_size=2)
    z = decor.effective_multipliers(1.5, 0.8, graph.sparse("unweighted_laplacian"))
    want = [dp_sgd.epsilon(float(z[i]), "fixed", 2 / m, 40, 1e-5, "pld")
            for i, m in enumerate(SIZES)]
    np.testing.assert_allclose(alg.privacy(p, graph, 40, delta=1e-5).per_agent, want,
                               rtol=1e-12)
