"""DOLA (Li et al. 2018) and DMOD (Yuan, Lei & Hong 2023, Euclidean mirror map): equality to the
per-agent loop, noise tied to the step size, their own budgets and calibration."""

import numpy as np
import pytest

import dpnet
from dpnet import graphs
from dpnet.algorithms import DMOD, DOLA
from dpnet.errors import ParameterError
from dpnet.privacy import chen_wang
from dpnet.problems.online import LogisticSamples, OnlineProblem

import reference

n, N, D = 5, 40, 4


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.random((N, D)) < 0.5).astype(float)
    b = rng.choice([-1.0, 1.0], N)
    return A, b, OnlineProblem(LogisticSamples(A, b, reg=0.05), n, batch=2), \
        rng.standard_normal((n, D))


@pytest.mark.parametrize("cls, at", [(DOLA, "mixed"), (DMOD, "own")])
@pytest.mark.parametrize("scale, radius", [(0.0, None), (0.3, 1.0)])
def test_equals_the_per_agent_loop(cls, at, scale, radius):
    A, b, p, x0 = _setup()
    g = graphs.ring(n, weight=0.3)
    K, seed = 20, 4
    traj = [np.clip(x0, -radius, radius) if radius else x0]
    dpnet.run(cls(0.7, 0.5, scale, radius=radius), p, g, K, x0=x0, seed=seed,
              callback=lambda k, s: traj.append(s["x"].numpy().copy()))
    grads = [reference.online_gradient(reference.logistic_sample_grad(A, b, 0.05), np.arange(N),
                                       2, i, seed) for i in range(n)]
    ref = reference.dola(g.W, grads, x0, 0.7, 0.5, scale, K, radius=radius, seed=seed, at=at)
    np.testing.assert_allclose(np.stack(traj), ref, rtol=0, atol=1e-12)


def test_dola_and_dmod_differ_only_in_the_gradient_point():
    _, _, p, x0 = _setup()
    g = graphs.ring(n, weight=0.3)
    a = dpnet.run(DOLA(0.7, 0.5, 0.0), p, g, 10, x0=x0).x
    b = dpnet.run(DMOD(0.7, 0.5, 0.0), p, g, 10, x0=x0).x
    assert 1e-6 < np.abs(a - b).max() < 1.0


def test_noise_decays_with_the_step_size():
    alg = DOLA(2.0, 0.5, 0.4)
    k = np.array([0, 1, 4, 100])
    scales = np.array([alg.noise.scale_at(int(j), n)[0] for j in k])
    steps = np.array([alg.step_size(int(j)) for j in k])
    np.testing.assert_allclose(scales / steps, 0.4 / 2.0)


def test_own_budgets_and_calibration():
    _, _, p, _ = _setup()
    g = graphs.ring(n, weight=0.3)
    alg = DOLA(0.5, 0.5, 0.25)
    G = alg.privacy(p, g, iterations=100, gradient_bound=2.0)
    assert G.epsilon == pytest.approx(2 * 0.5 * np.sqrt(D) * 2.0 / 0.25)
    H = alg.privacy(p, g, iterations=100, gradient_bound=2.0, variant="all-data")
    assert H.epsilon == pytest.approx(G.epsilon * np.sum(1 / np.arange(1, 101)))
    for variant in ("published", "all-data"):
        c = alg.calibrate(123.0, p, g, 100, gradient_bound=2.0, variant=variant)
        assert c.privacy(p, g, iterations=100, gradient_bound=2.0,
                         variant=variant).epsilon == pytest.approx(123.0, rel=1e-12)
        assert isinstance(DMOD(0.5, 0.5, 1.0).calibrate(1.0, p, g, 100, gradient_bound=2.0,
                                                        variant=variant), DMOD)
    with pytest.raises(ParameterError, match="gradient_bound"):
        alg.privacy(p, g, iterations=10)
    assert chen_wang.dola_epsilon(0.5, 0.0, 2.0, D) == np.inf


def test_checks():
    with pytest.raises(ParameterError, match="alpha0"):
        DOLA(0.0)
    with pytest.raises(ParameterError, match="noise_scale"):
        DMOD(1.0, 0.5, -1.0)
    with pytest.raises(ParameterError, match="doubly stochastic"):
        DOLA(1.0).check_graph(graphs.from_weights(np.array([[0.5, 0.5], [0.2, 0.8]])))
