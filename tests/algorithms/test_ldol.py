"""LDOL (paper 002's eq. (17)): equality to the per-agent loop, increasing noise, projection,
parameter checks, its [DERIVED] accountant."""

import numpy as np
import pytest

import dpnet
from dpnet import graphs
from dpnet.algorithms import LDOL
from dpnet.errors import ParameterError
from dpnet.problems.online import LogisticSamples, OnlineProblem

import reference

n, N, D = 5, 40, 4
VS = 0.01 * np.arange(1, n + 1)


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.random((N, D)) < 0.5).astype(float)
    b = rng.choice([-1.0, 1.0], N)
    return A, b, OnlineProblem(LogisticSamples(A, b, reg=0.05), n, batch=2), \
        3 * rng.standard_normal((n, D))


@pytest.mark.parametrize("sigma0, radius", [(0.0, None), (0.4, 1.5)])
def test_equals_the_per_agent_loop_of_17(sigma0, radius):
    A, b, p, x0 = _setup()
    g = graphs.ring(n, weight=0.3)
    K, seed = 20, 2
    traj = [np.clip(x0, -radius, radius) if radius else x0]
    dpnet.run(LDOL(1.0, 0.71, 1.0, 0.7, sigma0, VS, radius=radius), p, g, K, x0=x0, seed=seed,
              callback=lambda k, s: traj.append(s["x"].numpy().copy()))
    grads = [reference.online_gradient(reference.logistic_sample_grad(A, b, 0.05), np.arange(N),
                                       2, i, seed) for i in range(n)]
    ref = reference.ldol(g.laplacian_like, grads, x0, 1.0, 0.71, 1.0, 0.7, sigma0, VS, K,
                         radius=radius, seed=seed)
    np.testing.assert_allclose(np.stack(traj), ref, rtol=0, atol=1e-12)
    if radius:
        assert np.abs(ref).max() <= radius


def test_noise_level_increases():
    alg = LDOL(1.0, 0.71, 1.0, 0.7, 0.2, VS)
    s = np.stack([alg.noise.scale_at(k, n) for k in (0, 10, 100)])
    np.testing.assert_allclose(s[:, 0], 0.2 / np.sqrt(2) * np.array([1, 11, 101]) ** VS[0])
    assert np.all(np.diff(s, axis=0) > 0)


@pytest.mark.parametrize("kw, name", [
    (dict(u=0.75), "u"), (dict(u=0.5), "u"), (dict(varsigma=0.5), "varsigma"),
    (dict(varsigma=0.25), "u"), (dict(gamma0=0), "gamma0"), (dict(radius=-1.0), "radius"),
    (dict(sigma0=-1.0), "sigma0"),
])
def test_parameter_checks(kw, name):
    args = dict(lambda0=1.0, v=0.71, gamma0=1.0, u=0.7, sigma0=0.1, varsigma=0.1) | kw
    with pytest.raises(ParameterError, match=name):
        LDOL(**args)


def test_derived_accountant_by_hand():
    _, _, p, _ = _setup()
    g = graphs.ring(n, weight=0.3)
    alg = LDOL(1.0, 0.71, 1.0, 0.7, 0.2, 0.1)
    G = alg.privacy(p, g, iterations=2, l1_gradient_bound=3.0)
    # rho_1 = lambda_0 = 1; rho_2 = |1 - gamma_1 0.6| rho_1 + lambda_1
    rho2 = (1 - 0.6 / 2 ** 0.7) + 2 ** -0.71
    nu = [0.2 * 2 ** 0.1 / np.sqrt(2), 0.2 * 3 ** 0.1 / np.sqrt(2)]
    assert G.epsilon == pytest.approx(2 * 3.0 * (1 / nu[0] + rho2 / nu[1]), rel=1e-12)
    assert "[DERIVED]" in G.theorem
    e10 = alg.privacy(p, g, iterations=10, l1_gradient_bound=3.0).epsilon
    assert e10 > G.epsilon
