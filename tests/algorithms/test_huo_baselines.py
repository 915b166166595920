"""Paper 001's baselines: DPDO (Huang et al. 2015), DP-DDA (Liu et al. 2024) and CPGT (stochastic
PGTC with Top-k) against their per-agent loops, and their accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpnet
from dpnet import graphs
from dpnet.algorithms import DPDDA, DPDO, PGTC
from dpnet.compression import TopK
from dpnet.errors import ParameterError
from dpnet.problems import LogisticRegression

import reference

N, D, M = 5, 6, 12


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((N, M, D))
    b = rng.choice([-1.0, 1.0], (N, M))
    problem = LogisticRegression(A, b, reg="1/m")
    graph = graphs.circulant(N, offsets=(1,), weights="laplacian", iota=3)
    return problem, graph, rng.standard_normal((N, D))


def _xs(alg, problem, graph, x0, T, seed=0, key="x"):
    out = []
    dpnet.run(alg, problem, graph, T, x0=x0, seed=seed, reference=None,
              callback=lambda k, s: out.append(s[key].numpy().copy()))
    return np.stack(out)


def _grads(problem, batch=None, clip=None, kind="l2", seed=0, poisson=False):
    A, b = problem.A.numpy(), problem.b.numpy()
    if batch is None:
        return [reference.logistic_grad(A[i], b[i], problem.reg) for i in range(N)]
    return [reference.clipped_logistic_grad(A[i], b[i], problem.reg, i, batch, clip, kind, seed,
                                            poisson=poisson) for i in range(N)]


def test_dpdo_equals_loop_and_accounting(setup):
    problem, graph, x0 = setup
    alg = DPDO(c=0.3, p=0.95, q=0.98, M=0.05, radius=1.5)
    xs = _xs(alg, problem, graph, x0, 20, seed=2)
    ref = reference.dpdo(graph.W, _grads(problem), x0, 0.3, 0.95, 0.98, 0.05, 20, 1.5, seed=2)
    np.testing.assert_allclose(xs, ref[1:], rtol=1e-10, atol=1e-12)
    # eps = sum_{k<K} c p^k Delta_g / (M q^{k+1}), Delta_g = 2 sqrt(d) G
    G, K = 2.0, 50
    by_hand = sum(0.3 * 0.95 ** k * 2 * math.sqrt(D) * G / (0.05 * 0.98 ** (k + 1))
                  for k in range(K))
    g = alg.privacy(problem, graph, iterations=K, gradient_bound=G)
    assert g.epsilon == pytest.approx(by_hand, rel=1e-12) and len(g.per_agent) == N
    inf = alg.privacy(problem, graph, iterations=None, gradient_bound=G).epsilon
    assert inf == pytest.approx(2 * math.sqrt(D) * G * 0.3 / (0.05 * (0.98 - 0.95)), rel=1e-12)
    rec = alg.privacy(problem, graph, iterations=K, gradient_bound=G, adjacency="record")
    assert rec.epsilon == pytest.approx(by_hand / M, rel=1e-12)
    cal = alg.calibrate(0.5, problem, graph, K, gradient_bound=G)
    assert cal.privacy(problem, graph, iterations=K, gradient_bound=G).epsilon == \
        pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ParameterError):
        DPDO(c=0.3, p=0.99, q=0.98)
    with pytest.raises(ParameterError, match="gradient"):
        alg.privacy(problem, graph, iterations=K)


def test_dpdda_equals_loop_and_accounting(setup):
    problem, graph, x0 = setup
    alg = DPDDA(beta0=2.0, sigma=0.3, p=0.6, clip=1.0, radius=3.0)
    xs = _xs(alg, problem, graph, x0, 25, seed=4)
    avg = _xs(alg, problem, graph, x0, 25, seed=4, key="x_avg")
    ref = reference.dp_dda(graph.W, _grads(problem, 1, 1.0, "l2", seed=4), x0, 2.0, 0.3, 0.6,
                           25, 3.0, seed=4)
    np.testing.assert_allclose(xs, ref["x"][1:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(avg, ref["x_avg"][1:], rtol=1e-10, atol=1e-12)
    # the account is DO-ADP's mechanism with k = d: same numbers as huo with k = d
    from dpnet.privacy import huo

    g = alg.privacy(problem, graph, iterations=100, accountant="rdp", delta=1e-5)
    mech = huo.DOADPStep(G=1.0, k=D, d=D, p=0.6, q=M, T=100)
    assert g.epsilon == pytest.approx(huo.dp_accounting_epsilon(0.3, 1e-5, mech, "rdp"))
    assert "DP-DDA" in g.theorem
    # without noise it optimises: the averaged iterate approaches the optimum
    res = dpnet.run(DPDDA(beta0=1.0, clip=10.0), problem, graph, 400, x0=np.zeros((N, D)),
                    reference=None)
    f_star = problem.loss(problem.optimum())
    assert res.history["objective"][-1] - f_star < 0.3 * (res.history["objective"][0] - f_star)


def test_dpdda_poisson_sampling_equals_loop(setup):
    problem, graph, x0 = setup
    alg = DPDDA(beta0=2.0, sigma=0.3, p=0.6, clip=1.0, radius=3.0, batch_size=3,
                sampling="poisson")
    ref = reference.dp_dda(graph.W, _grads(problem, 3, 1.0, "l2", seed=4, poisson=True), x0,
                           2.0, 0.3, 0.6, 25, 3.0, seed=4)
    np.testing.assert_allclose(_xs(alg, problem, graph, x0, 25, seed=4), ref["x"][1:],
                               rtol=1e-10, atol=1e-12)
    assert alg.default_accountant == "pld"
    with pytest.raises(ParameterError, match="sampling='poisson'"):
        alg.privacy(problem, graph, 25, accountant="proof", delta=1e-5)


def test_cpgt_is_stochastic_pgtc_with_topk(setup):
    problem, graph, x0 = setup
    alg = PGTC(eta=0.05, gamma=0.5, alpha_x=0.5, alpha_y=0.5, compressor=TopK(2),
               noise_x=0.01, noise_y=0.01, q=0.99, batch_size=2, clip=1.5)
    xs = _xs(alg, problem, graph, x0, 15, seed=6)
    ref = reference.pgtc(graph.W, _grads(problem, 2, 1.5, "l2", seed=6), x0, 0.05, 0.5, 0.5, 0.5,
                         reference.compressor("topk", k=2), 15,
                         reference.geometric_scale(0.01, 0.99),
                         reference.geometric_scale(0.01, 0.99), seed=6)
    np.testing.assert_allclose(xs, ref["x"][1:], rtol=1e-9, atol=1e-11)
    # paper 000's Theorem 3 with the clipping bound as M
    g = alg.privacy(problem, graph, iterations=15, gradient_bound=1.5)
    assert math.isfinite(g.epsilon) and g.epsilon > 0
