"""DO-ADP (paper 001) against the per-agent loop of eq. (5), its reduction to momentum DSGD, the
mean-state invariant, bits of active agents only, and its privacy guarantees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dpnet
from dpnet import graphs
from dpnet.algorithms import DOADP, MomentumDSGD
from dpnet.compression import TopK
from dpnet.errors import ParameterError
from dpnet.problems import LogisticRegression

import reference

N, D, M = 6, 8, 15


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((N, M, D))
    b = rng.choice([-1.0, 1.0], (N, M))
    problem = LogisticRegression(A, b, reg="1/m")
    graph = graphs.circulant(N, offsets=(1, 2), weights="laplacian", iota=5)
    x0 = rng.standard_normal((N, D))
    return problem, graph, x0


def _grads(problem, batch, clip=None, kind="coordinate", seed=0, poisson=False):
    A, b = problem.A.numpy(), problem.b.numpy()
    return [reference.clipped_logistic_grad(A[i], b[i], problem.reg, i, batch, clip, kind, seed,
                                            poisson=poisson) for i in range(N)]


def _trajectory(alg, problem, graph, x0, T, seed=0, record=False):
    states = []
    res = dpnet.run(alg, problem, graph, T, x0=x0, seed=seed, reference=None, record=record,
                    callback=lambda k, s: states.append({n: v.clone() for n, v in s.items()}))
    return res, states


def test_equals_per_agent_loop(setup):
    problem, graph, x0 = setup
    alg = DOADP(alpha=0.05, gamma=0.4, beta=0.3, sigma=0.2, p=0.7, k=3, coordinate_clip=2.0,
                batch_size=2)
    res, states = _trajectory(alg, problem, graph, x0, 25, seed=3, record=True)
    ref = reference.doadp(graph.W, _grads(problem, 2, 2.0, seed=3), x0, 0.05, 0.4, 0.3, 0.2,
                          0.7, 3, 25, seed=3)
    xs = np.stack([s["x"].numpy() for s in states])
    np.testing.assert_allclose(xs, ref["x"][1:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.stack([s["m"].numpy() for s in states]), ref["m"][1:],
                               rtol=1e-10, atol=1e-12)
    active = np.stack([s["active"].numpy() for s in states])
    assert np.array_equal(active, ref["active"]) and 0 < active.mean() < 1
    # bits: k values + k indices per active sender, once per receiving neighbour
    per_msg = TopK(3).bits(D, 64)
    deg = graph.out_degrees()
    assert res.ledger.total == int(sum(per_msg * deg[active[t]].sum() for t in range(25)))
    # the transcript holds exactly the active agents' Top-k messages
    msgs = res.transcript.stacked("s", N)
    assert np.array_equal(~np.isnan(msgs[:, :, 0]), active)
    np.testing.assert_allclose(np.nan_to_num(msgs), ref["s"], rtol=1e-10, atol=1e-12)
    assert np.all((np.nan_to_num(msgs) != 0).sum(axis=2) <= 3)


def test_poisson_sampling_equals_per_agent_loop(setup):
    problem, graph, x0 = setup
    alg = DOADP(alpha=0.05, gamma=0.4, beta=0.3, sigma=0.2, p=0.7, k=3, clip=2.0,
                batch_size=4, sampling="poisson")
    _, states = _trajectory(alg, problem, graph, x0, 25, seed=3)
    ref = reference.doadp(graph.W, _grads(problem, 4, 2.0, "l2", seed=3, poisson=True), x0,
                          0.05, 0.4, 0.3, 0.2, 0.7, 3, 25, seed=3)
    np.testing.assert_allclose(np.stack([s["x"].numpy() for s in states]), ref["x"][1:],
                               rtol=1e-10, atol=1e-12)
    # the batch's size varies from step to step (it would not with a fixed batch)
    u = dpnet.rng.Streams(3).uniform("sample", 0, np.arange(N), M)
    assert len(set((u < 4 / M).sum(axis=1).tolist())) > 1


def test_reduces_to_momentum_dsgd(setup):
    problem, graph, x0 = setup
    kw = dict(alpha=0.05, gamma=0.4, beta=0.3)
    doadp = DOADP(sigma=0.0, p=1.0, k=None, **kw)
    # a common start: identical from t = 0 (the consensus term vanishes at t = 0 for both)
    common = np.tile(x0[0], (N, 1))
    _, s1 = _trajectory(doadp, problem, graph, common, 20)
    _, s2 = _trajectory(MomentumDSGD(**kw), problem, graph, common, 20)
    for a, b in zip(s1, s2):
        torch.testing.assert_close(a["x"], b["x"], rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(a["x_hat"], a["x"], rtol=1e-12, atol=1e-13)
    # different starts: DO-ADP's t = 0 has no consensus term (x_hat = 0); from its (x_1, m_1),
    # eq. (2) reproduces every later iterate
    _, s = _trajectory(doadp, problem, graph, x0, 20)
    ref = reference.momentum_dsgd(graph.W, _grads(problem, 1), s[0]["x"].numpy(), 0.05, 0.4, 0.3,
                                  19, m0=s[0]["m"].numpy(), t0=1)
    np.testing.assert_allclose(np.stack([st["x"].numpy() for st in s]), ref, rtol=1e-10,
                               atol=1e-12)
    # MomentumDSGD itself is eq. (2)
    _, sm = _trajectory(MomentumDSGD(**kw), problem, graph, x0, 10)
    np.testing.assert_allclose(np.stack([st["x"].numpy() for st in sm]),
                               reference.momentum_dsgd(graph.W, _grads(problem, 1), x0, 0.05, 0.4,
                                                       0.3, 10)[1:], rtol=1e-10, atol=1e-12)


def test_mean_state_invariant(setup):
    problem, graph, x0 = setup
    alg = DOADP(alpha=0.1, gamma=0.5, beta=0.15, sigma=0.5, p=0.6, k=3, coordinate_clip=1.0)
    _, states = _trajectory(alg, problem, graph, x0, 30, seed=7)
    prev = torch.as_tensor(x0).mean(0)
    for s in states:
        step = (s["active"][:, None].double() * s["m"]).sum(0) * (0.1 / N)
        torch.testing.assert_close(s["x"].mean(0), prev - step, rtol=1e-12, atol=1e-12)
        prev = s["x"].mean(0)


def test_learns_without_noise(setup):
    problem, graph, x0 = setup
    res = dpnet.run(DOADP(alpha=0.05, gamma=0.3, beta=0.15, p=0.8, k=4), problem, graph, 300,
                    x0=np.zeros((N, D)), reference=None)
    f_star = problem.loss(problem.optimum())
    gap = res.history["objective"] - f_star
    assert gap[-1] < 0.2 * gap[0]


def test_parameter_checks(setup):
    problem, graph, _ = setup
    for bad in (dict(p=0.0), dict(p=1.5), dict(beta=1.0), dict(sigma=-1.0), dict(k=0)):
        kw = dict(alpha=0.1, gamma=0.1, beta=0.1) | bad
        with pytest.raises(ParameterError):
            DOADP(**kw)
    with pytest.raises(ParameterError, match="k"):
        dpnet.run(DOADP(0.1, 0.1, 0.1, k=D + 1), problem, graph, 1, reference=None)
    directed = graphs.from_weights(np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]))
    with pytest.raises(ParameterError):
        DOADP(0.1, 0.1, 0.1).check_graph(directed)


def test_privacy_guarantees(setup):
    problem, graph, _ = setup
    alg = DOADP(alpha=0.1, gamma=0.1, beta=0.1, sigma=20.0, p=0.8, k=4, coordinate_clip=1.0)
    # Theorem 1 needs T >= q^2 eps^2 / (4 p^2); with q = 15 a short run is fine
    g = alg.privacy(problem, graph, iterations=200, accountant="proof")
    assert g.is_private and len(g.per_agent) == N and g.horizon == 200
    assert 0 < g.delta < 1
    rdp = alg.privacy(problem, graph, iterations=200, accountant="rdp", delta=1e-5)
    assert rdp.delta == 1e-5 and rdp.epsilon > 0
    with pytest.raises(ParameterError, match="Theorem 1"):
        alg.privacy(problem, graph, iterations=200, accountant="theorem1")
    with pytest.raises(ParameterError, match="clipping bound"):
        DOADP(0.1, 0.1, 0.1, sigma=1.0).privacy(problem, graph, iterations=10)
    assert not DOADP(0.1, 0.1, 0.1).privacy(problem, graph, iterations=10).is_private


def test_privacy_charges_all_coordinates_unless_asked_for_eq6(setup):
    """Default sensitivity 'full' (2G/B): the account of the same run without sparsification;
    'topk' is eq. (6)'s 2G sqrt(k/d)/B, which the audit doadp-top1 finds exceeded."""
    problem, graph, _ = setup
    kw = dict(iterations=200, accountant="rdp", delta=1e-5)
    sparse = DOADP(alpha=0.1, gamma=0.1, beta=0.1, sigma=20.0, p=0.8, k=4, coordinate_clip=1.0)
    dense = DOADP(alpha=0.1, gamma=0.1, beta=0.1, sigma=20.0, p=0.8, coordinate_clip=1.0)
    full, topk = sparse.privacy(problem, graph, **kw), sparse.privacy(problem, graph,
                                                                     sensitivity="topk", **kw)
    assert full.epsilon == dense.privacy(problem, graph, **kw).epsilon
    assert topk.epsilon < full.epsilon
    assert "sensitivity full" in full.theorem and "sensitivity topk" in topk.theorem
    assert any("all d coordinates" in n for n in full.notes)
    assert any("doadp-top1" in n for n in topk.notes)
    assert not dense.privacy(problem, graph, **kw).notes
    # the proof accountant: the noise multiplier sigma/Delta shrinks by sqrt(k/d) under 'full'
    p_full = sparse.privacy(problem, graph, iterations=200, accountant="proof")
    p_topk = sparse.privacy(problem, graph, iterations=200, accountant="proof", sensitivity="topk")
    assert p_full.epsilon > p_topk.epsilon
    with pytest.raises(ParameterError, match="sensitivity"):
        sparse.privacy(problem, graph, sensitivity="half", **kw)
