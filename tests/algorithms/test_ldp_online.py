"""LDPOnline (paper 002, Algorithm 1): equality to the per-agent loop with and without noise,
noise on the message only (mean-dynamics identity), reduction to DSGD, parameter checks."""

import math

import numpy as np
import pytest

import dpnet
from dpnet import graphs
from dpnet.algorithms import DSGD, LDPOnline
from dpnet.errors import ParameterError
from dpnet.problems.online import LogisticSamples, OnlineProblem

import reference

n, N, D = 6, 48, 4
VS = 0.5 + 0.01 * np.arange(1, n + 1)


def _setup(seed=0, batch=2):
    rng = np.random.default_rng(seed)
    A = (rng.random((N, D)) < 0.5).astype(float)
    b = rng.choice([-1.0, 1.0], N)
    p = OnlineProblem(LogisticSamples(A, b, reg=0.05), n, batch=batch)
    x0 = rng.standard_normal((n, D))
    return A, b, p, x0


def _grads(A, b, p, seed):
    pool = np.arange(N)
    return [reference.online_gradient(reference.logistic_sample_grad(A, b, 0.05), pool,
                                      p.batch, i, seed) for i in range(n)]


def _trajectory(alg, p, g, K, x0, seed, **kw):
    traj = [np.asarray(x0, dtype=float)]
    res = dpnet.run(alg, p, g, K, x0=x0, seed=seed,
                    callback=lambda k, s: traj.append(s["x"].numpy().copy()), **kw)
    return np.stack(traj), res


@pytest.mark.parametrize("sigma0", [0.0, 0.3])
def test_equals_the_per_agent_loop_of_algorithm_1(sigma0):
    A, b, p, x0 = _setup()
    g = graphs.ring(n, weight=0.3)
    K, seed = 25, 3
    traj, _ = _trajectory(LDPOnline(0.8, 0.71, sigma0, VS), p, g, K, x0, seed)
    ref = reference.ldp_online(g.laplacian_like, _grads(A, b, p, seed), x0, 0.8, 0.71, sigma0,
                               VS, K, seed=seed)
    np.testing.assert_allclose(traj, ref["x"], rtol=0, atol=1e-12)
    assert np.abs(ref["x"][-1] - x0).max() > 0.1


def test_per_agent_sigma0_and_a_weighted_graph():
    A, b, p, x0 = _setup(1)
    g = graphs.erdos_renyi(n, 0.6, seed=4)          # Metropolis off-diagonal weights
    s0 = np.linspace(0.1, 0.6, n)
    traj, res = _trajectory(LDPOnline(0.5, 0.8, s0, VS), p, g, 15, x0, 9, record=True)
    ref = reference.ldp_online(g.laplacian_like, _grads(A, b, p, 9), x0, 0.5, 0.8, s0, VS, 15,
                               seed=9)
    np.testing.assert_allclose(traj, ref["x"], rtol=0, atol=1e-12)
    # the wire carries y_t = theta_t + vartheta_t, nothing else
    np.testing.assert_allclose(res.transcript.stacked("y"), ref["y"], rtol=0, atol=1e-12)
    assert res.transcript.names() == ["y"]


def test_mean_dynamics_identity_with_noise():
    """thetabar_{t+1} = thetabar_t + (1/m) sum_i sum_{j in N_i} w_ij vartheta_t^j
    - (lambda_t/m) sum_i grad f_t^i(theta_t^i): the clean consensus part cancels, the noise
    enters only through the neighbours' messages."""
    A, b, p, x0 = _setup(2)
    g = graphs.ring(n, weight=0.3)
    alg = LDPOnline(1.0, 0.71, 0.5, VS)
    K, seed = 20, 5
    traj, res = _trajectory(alg, p, g, K, x0, seed, record=True)
    noise = res.transcript.stacked("y") - traj[:-1]                       # vartheta_t
    Woff = g.laplacian_like - np.diag(np.diag(g.laplacian_like))
    grads = _grads(A, b, p, seed)
    for t in range(K):
        gsum = sum(grads[i](traj[t][i], t) for i in range(n))
        expected = traj[t].mean(0) + (Woff @ noise[t]).sum(0) / n - alg.step_size(t) * gsum / n
        np.testing.assert_allclose(traj[t + 1].mean(0), expected, rtol=0, atol=1e-12)
    # the noise does not cancel: with the same data, the noise-free mean differs
    clean, _ = _trajectory(LDPOnline(1.0, 0.71, 0.0, VS), p, g, K, x0, seed)
    assert np.abs(clean[-1].mean(0) - traj[-1].mean(0)).max() > 1e-3
    # the noise has the scheduled Laplace scale nu_t = sigma0/(sqrt 2 (t+1)^varsigma_i)
    nu = 0.5 / (math.sqrt(2) * (np.arange(K)[:, None] + 1.0) ** VS[None, :])
    z = noise / nu[:, :, None]
    assert abs(np.mean(np.abs(z)) - 1.0) < 0.15                          # E|Lap(1)| = 1


def test_noise_free_algorithm_1_is_dsgd_with_mixing_matrix_I_plus_W():
    _, _, p, x0 = _setup(3)
    g = graphs.ring(n, weight=0.3)                   # g.W = I + laplacian_like
    np.testing.assert_allclose(g.W, np.eye(n) + g.laplacian_like, atol=1e-15)
    a, _ = _trajectory(LDPOnline(1.0, 0.71, 0.0, VS), p, g, 20, x0, 1)
    d, _ = _trajectory(DSGD(1.0, batch_size=2, power=0.71), p, g, 20, x0, 1)
    np.testing.assert_allclose(a, d, rtol=0, atol=1e-12)


def test_the_ring_of_the_experiments_is_accepted_although_outside_assumption_3():
    from dpnet.privacy.chen_wang import assumption3

    g = graphs.ring(10, weight=0.3)
    info = assumption3(g)
    assert info["delta_m"] == pytest.approx(-1.2) and not info["holds"]
    assert info["mixing_radius"] == pytest.approx(0.8854101966, abs=1e-9)
    LDPOnline(1.0, 0.71, 0.1, 0.51).check_graph(g)
    with pytest.raises(ParameterError, match="mix"):
        LDPOnline(1.0, 0.71, 0.1, 0.51).check_graph(graphs.ring(10, weight=0.6))


@pytest.mark.parametrize("kw, name", [
    (dict(v=0.5), "v"), (dict(v=1.0), "v"), (dict(varsigma=0.5), "varsigma"),
    (dict(varsigma=1.0), "varsigma"), (dict(varsigma=[0.6, 0.75]), "varsigma"),
    (dict(v=0.6, varsigma=0.6), "varsigma"), (dict(sigma0=-0.1), "sigma0"),
    (dict(lambda0=0.0), "lambda0"),
])
def test_parameter_checks_raise(kw, name):
    args = dict(lambda0=1.0, v=0.71, sigma0=0.1, varsigma=0.55) | kw
    with pytest.raises(ParameterError, match=name):
        LDPOnline(**args)


def test_graph_checks():
    alg = LDPOnline(1.0, 0.71, 0.1, 0.55)
    W = np.array([[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]])
    with pytest.raises(ParameterError, match="undirected"):
        alg.check_graph(graphs.from_weights(W))
    with pytest.raises(ParameterError, match="agent"):
        LDPOnline(1.0, 0.71, 0.1, [0.55, 0.56]).check_graph(graphs.ring(5, weight=0.3))


def test_privacy_is_theorem_5_and_needs_the_l1_bound():
    _, _, p, _ = _setup()
    g = graphs.ring(n, weight=0.3)
    alg = LDPOnline(1.0, 0.71, 0.2, VS)
    with pytest.raises(ParameterError, match="l1_gradient_bound"):
        alg.privacy(p, g, iterations=10)
    with pytest.raises(ParameterError, match="C3"):
        alg.privacy(p, g, iterations=None, l1_gradient_bound=2.0)
    G = alg.privacy(p, g, iterations=10, l1_gradient_bound=2.0)
    from dpnet.privacy.chen_wang import ldp_online_epsilons
    np.testing.assert_allclose(G.per_agent, ldp_online_epsilons(1.0, 0.71, 0.2, VS, 0.6, 2.0, 10))
    assert G.epsilon == max(G.per_agent) and G.delta == 0 and "Theorem 5(1)" in G.theorem
    assert any("not computed" in s for s in G.notes)
    res = dpnet.run(alg, p, g, 10, seed=0, privacy={"l1_gradient_bound": 2.0})
    assert res.privacy.epsilon == G.epsilon
    assert not dpnet.run(alg, p, g, 3, seed=0).privacy.is_private   # no d: no guarantee claimed
