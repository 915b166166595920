"""Gradient tracking and DiaDSP (paper 000 eqs. (8)-(11)) against the per-agent reference loop;
the tracking invariant (51) with noise on; linear convergence; paper 000's privacy formulas."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet import graphs, noise, problems
from dpnet.algorithms import DiaDSP, GradientTracking
from dpnet.errors import ParameterError
from dpnet.rng import Streams

import reference

N, D = 10, 6
GRAPH = graphs.erdos_renyi(N, 0.35, seed=11)


def _problem(name):
    if name == "nonconvex_logistic":
        return problems.NonconvexLogistic.random(N, 30, D, seed=2, lam=0.05)
    return problems.Quadratic.random(N, D, seed=3)


def _x0(seed=5):
    return np.random.default_rng(seed).standard_normal((N, D))


def _trajectory(alg, p, K, x0, seed=0, graph=GRAPH):
    """(x, y) at k = 0..K from a run, through the runner's callback."""
    xs, ys = [], []

    def keep(k, s):
        xs.append(s["x"].numpy().copy())
        ys.append(s["y"].numpy().copy())

    res = dpnet.run(alg, p, graph, K, x0=x0, seed=seed, callback=keep, reference=None)
    g0 = p.grad(torch.as_tensor(x0)).numpy()
    return res, np.stack([x0] + xs), np.stack([g0] + ys)


@pytest.mark.parametrize("name", ["nonconvex_logistic", "quadratic"])
def test_gradient_tracking_equals_the_reference_loop(name):
    p, x0, K = _problem(name), _x0(), 60
    _, xs, ys = _trajectory(GradientTracking(eta=0.1), p, K, x0)
    ref = reference.gradient_tracking(GRAPH.W, reference.local_gradients(p), x0, 0.1, K)
    np.testing.assert_allclose(xs, ref["x"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ys, ref["y"], rtol=0, atol=1e-12)
    assert np.abs(ref["x"][-1] - x0).max() > 0.1


@pytest.mark.parametrize("name", ["nonconvex_logistic", "quadratic"])
def test_diadsp_with_noise_scale_zero_is_gradient_tracking(name):
    p, x0, K = _problem(name), _x0(), 60
    zero = noise.Laplace(0.0, decay=0.5)
    res0, xs, ys = _trajectory(DiaDSP(eta=0.1, noise_x=zero, noise_y=zero), p, K, x0, seed=3)
    resg, xg, yg = _trajectory(GradientTracking(eta=0.1), p, K, x0, seed=3)
    assert np.array_equal(xs, xg) and np.array_equal(ys, yg)     # exactly, bit for bit
    ref = reference.diadsp(GRAPH.W, reference.local_gradients(p), x0, 0.1, K)
    np.testing.assert_allclose(xs, ref["x"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ys, ref["y"], rtol=0, atol=1e-12)
    assert not np.any(ref["xi_x"]) and not np.any(ref["xi_y"])
    assert not res0.privacy.is_private


@pytest.mark.parametrize("name", ["nonconvex_logistic", "quadratic"])
def test_diadsp_with_noise_equals_the_reference_loop(name):
    p, x0, K, seed = _problem(name), _x0(), 40, 21
    sx, sy = np.linspace(0.2, 1.0, N), np.linspace(0.5, 0.1, N)
    q = np.linspace(0.8, 0.95, N)
    alg = DiaDSP(eta=0.05, noise_x=noise.Laplace(sx, decay=q), noise_y=noise.Laplace(sy, decay=q))
    _, xs, ys = _trajectory(alg, p, K, x0, seed=seed)
    ref = reference.diadsp(GRAPH.W, reference.local_gradients(p), x0, 0.05, K,
                           reference.geometric_scale(sx, q), reference.geometric_scale(sy, q),
                           seed=seed)
    np.testing.assert_allclose(xs, ref["x"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ys, ref["y"], rtol=0, atol=1e-12)
    # the noise was real: the noise-free loop ends elsewhere
    clean = reference.diadsp(GRAPH.W, reference.local_gradients(p), x0, 0.05, K)
    assert np.abs(clean["x"][-1] - xs[-1]).max() > 1e-3
    assert np.abs(ref["xi_x"][0]).mean() == pytest.approx(sx.mean(), rel=0.5)


def test_diadsp_with_gaussian_noise_equals_the_reference_loop():
    p, x0, K = _problem("quadratic"), _x0(), 25
    alg = DiaDSP(eta=0.1, noise_x=noise.Gaussian(0.3, power=1.0), noise_y=noise.Gaussian(0.1))
    res = dpnet.run(alg, p, GRAPH, K, x0=x0, seed=4)
    ref = reference.diadsp(GRAPH.W, reference.local_gradients(p), x0, 0.1, K,
                           lambda i, k: 0.3 / (k + 1), lambda i, k: 0.1, seed=4, kind="gaussian")
    np.testing.assert_allclose(res.x, ref["x"][-1], rtol=0, atol=1e-12)


def test_tracking_invariant_with_noise_at_every_iteration():
    p, x0, K, seed = _problem("nonconvex_logistic"), _x0(), 80, 9
    nx_, ny = noise.Laplace(0.5, decay=0.97), noise.Laplace(0.8, decay=0.97)
    alg = DiaDSP(eta=0.1, noise_x=nx_, noise_y=ny)
    _, xs, ys = _trajectory(alg, p, K, x0, seed=seed)
    rng = Streams(seed)
    noise_sum = np.zeros(D)
    for k in range(K + 1):
        lhs = ys[k].sum(0)
        rhs = p.grad(torch.from_numpy(xs[k])).numpy().sum(0) + noise_sum
        assert np.abs(lhs - rhs).max() < 1e-10, k
        noise_sum += ny.sample(rng, "noise_y", k, np.arange(N), N, D).numpy().sum(0)
    assert np.abs(noise_sum).max() > 1.0      # the invariant is not trivially about zeros


def test_tracking_invariant_driving_init_and_step_directly():
    p, K, seed = _problem("quadratic"), 30, 2
    ny = noise.Laplace(1.0, decay=0.9)
    alg = DiaDSP(eta=0.1, noise_x=noise.Laplace(1.0, decay=0.9), noise_y=ny)
    rng = Streams(seed)
    net = dpnet.Network(GRAPH, rng=rng)
    ctx = dpnet.algorithms.Context(p, net, rng)
    state = alg.init(ctx, torch.from_numpy(_x0()))
    acc = torch.zeros(D, dtype=torch.float64)
    for k in range(K):
        net.set_iteration(k)
        acc += ny.sample(rng, "noise_y", k, np.arange(N), N, D).sum(0)
        state = alg.step(ctx, state, k)
        gap = state["y"].sum(0) - p.grad(state["x"]).sum(0) - acc
        assert float(gap.abs().max()) < 1e-10


def test_gradient_tracking_converges_linearly_at_the_predicted_rate():
    p = problems.Quadratic.random(N, 3, seed=7, mu=0.5, L=2.0)
    eta, K, d = 0.15, 400, 3
    res = dpnet.run(GradientTracking(eta=eta), p, GRAPH, K, x0=np.zeros(d), log_every=1)
    dist = res.history["distance"]          # ||x_k - 1 x*||^2
    assert dist[-1] < 1e-24
    window = slice(50, 250)
    k = res.history["iteration"][window]
    slope, intercept = np.polyfit(k, 0.5 * np.log(dist[window]), 1)
    fitted = math.exp(slope)
    resid = 0.5 * np.log(dist[window]) - (slope * k + intercept)
    assert np.abs(resid).max() < 0.5        # a straight line in log scale: linear convergence
    # prediction: the linear map (x, y) -> (W x - eta y, W y + A((W - I) x - eta y)) restricted
    # off its d unit eigenvalues (the conserved sum_i y_i - A_i x_i)
    n = N
    A = np.zeros((n * d, n * d))
    for i in range(n):
        A[i * d:(i + 1) * d, i * d:(i + 1) * d] = p.A[i].numpy()
    Wk, I = np.kron(GRAPH.W, np.eye(d)), np.eye(n * d)
    M = np.block([[Wk, -eta * I], [A @ (Wk - I), Wk - eta * A]])
    ev = np.sort(np.abs(np.linalg.eigvals(M)))[::-1]
    assert np.allclose(ev[:d], 1.0, atol=1e-8)
    predicted = ev[d]
    assert predicted < 1
    assert fitted == pytest.approx(predicted, rel=0.02)


# ---- privacy (paper 000) -----------------------------------------------------------------------

def _theorem3(d, M, eta, s_x, s_y, q, K, c=None):
    c = math.sqrt(eta) if c is None else c
    return 4 * math.sqrt(d) * M * (c / s_x + 1 / s_y) * sum(q ** (-k) for k in range(K + 1))


def test_theorem3_numbers():
    p = problems.NonconvexLogistic.random(6, 20, 10, seed=0)
    g = graphs.ring(6)
    alg = DiaDSP(eta=0.1, noise_x=noise.Laplace(100.0, decay=0.1),
                 noise_y=noise.Laplace(100.0, decay=0.1))
    pg = alg.privacy(p, g, iterations=10, gradient_bound=1.0)
    # the catalogue's scale warning: about 1.8e9 for s = 100, M = 1, d = 10, K = 10, q = 0.1
    hand = 4 * math.sqrt(10) * (math.sqrt(0.1) / 100 + 1 / 100) * 11111111111
    assert pg.epsilon == pytest.approx(hand, rel=1e-12)
    assert pg.epsilon == pytest.approx(1.85e9, rel=0.01)
    assert pg.per_agent == (pg.epsilon,) * 6 and pg.delta == 0.0 and pg.horizon == 10
    assert "Theorem 3" in pg.theorem and pg.is_private
    derived = alg.privacy(p, g, iterations=10, gradient_bound=1.0, variant="derived")
    assert derived.epsilon == pytest.approx(_theorem3(10, 1.0, 0.1, 100, 100, 0.1, 10, c=0.1))
    # M from the problem's data when not given
    M = p.gradient_bound()
    assert alg.privacy(p, g, iterations=3).epsilon == pytest.approx(
        _theorem3(10, M, 0.1, 100, 100, 0.1, 3), rel=1e-12)


def test_theorem3_per_agent_and_through_run():
    p = problems.NonconvexLogistic.random(4, 20, 5, seed=0)
    g = graphs.ring(4)
    sx, sy, q = [1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 1.0, 1.0], [0.9, 0.95, 0.99, 0.999]
    alg = DiaDSP(eta=0.04, noise_x=noise.Laplace(sx, decay=q), noise_y=noise.Laplace(sy, decay=q))
    K = 25
    res = dpnet.run(alg, p, g, K, privacy={"gradient_bound": 2.5})
    hand = [_theorem3(5, 2.5, 0.04, sx[i], sy[i], q[i], K) for i in range(4)]
    np.testing.assert_allclose(res.privacy.per_agent, hand, rtol=1e-12)
    assert res.privacy.epsilon == pytest.approx(max(hand), rel=1e-12)
    # only the y noise: epsilon is infinite (1/s_x with s_x = 0), never silently finite
    only_y = DiaDSP(eta=0.04, noise_y=noise.Laplace(1.0, decay=0.9))
    assert only_y.privacy(p, g, iterations=K, gradient_bound=1.0).epsilon == math.inf


def test_proposition1_numbers():
    p = problems.Quadratic.random(5, 3, seed=1, mu=0.5, L=2.0)
    g = graphs.ring(5)
    L, eta, q, s_x, s_y, delta = p.smoothness, 0.05, 0.8, 2.0, 3.0, 0.7
    alg = DiaDSP(eta=eta, noise_x=noise.Laplace(s_x, decay=q), noise_y=noise.Laplace(s_y, decay=q))
    pg = alg.privacy(p, g, iterations=None, adjacency_radius=delta, variant="printed")
    tau = eta / s_x + 1 / s_y
    hand = tau * q**2 * delta / (q**2 - eta * L - q * eta * L)
    assert pg.epsilon == pytest.approx(hand, rel=1e-13)
    sound = alg.privacy(p, g, iterations=None, adjacency_radius=delta)   # default: x term eta/(s_x q)
    tau = eta / (s_x * q) + 1 / s_y
    assert sound.epsilon == pytest.approx(tau * q**2 * delta / (q**2 - eta * L - q * eta * L),
                                          rel=1e-13)
    assert pg.horizon is None and "Proposition 1" in pg.theorem
    qmin = (eta * L + math.sqrt((eta * L) ** 2 + 4 * eta * L)) / 2
    assert dpnet.privacy.xie.proposition_q_min(eta, L) == pytest.approx(qmin)


def test_privacy_guards_raise():
    p = problems.Quadratic.random(5, 3, seed=1, mu=0.5, L=2.0)
    g = graphs.ring(5)
    L = p.smoothness

    def alg(eta=0.05, q=0.8, qy=None, kind=noise.Laplace, **kw):
        return DiaDSP(eta=eta, noise_x=kind(1.0, decay=q, **kw),
                      noise_y=kind(1.0, decay=q if qy is None else qy, **kw))

    cases = [
        (lambda: alg().privacy(p, g, iterations=None), "adjacency_radius", "adjacency radius"),
        (lambda: alg(q=0.3).privacy(p, g, iterations=None, adjacency_radius=1.0), "q", "< q < 1"),
        (lambda: alg(eta=1 / (2 * L)).privacy(p, g, iterations=None, adjacency_radius=1.0), "eta",
         "eta < 1/(2 L_f)"),
        (lambda: alg(q=0.8, qy=0.9).privacy(p, g, iterations=5, gradient_bound=1.0), "decay",
         "one decay q_i"),
        (lambda: alg().privacy(p, g, iterations=5), "gradient_bound", "Assumption 7"),
        (lambda: alg(kind=noise.Gaussian).privacy(p, g, iterations=5, gradient_bound=1.0),
         "noise_x", "Laplace"),
        (lambda: DiaDSP(0.1, noise.Laplace(1.0, power=1.0), noise.Laplace(1.0, power=1.0))
         .privacy(p, g, iterations=5, gradient_bound=1.0), "noise_x", "geometric decay"),
        (lambda: alg().privacy(p, g, iterations=5, gradient_bound=-1.0), "gradient_bound", "0 < M"),
        (lambda: alg().privacy(p, g, iterations=5, gradient_bound=1.0, variant="x"), "variant",
         "printed"),
    ]
    for call, name, condition in cases:
        with pytest.raises(ParameterError) as err:
            call()
        assert err.value.name == name, (name, str(err.value))
        assert condition in str(err.value)
    # SinCos has unbounded gradients: Theorem 3 needs a user-supplied M
    s = problems.SinCos.random(5, 3)
    with pytest.raises(ParameterError, match="gradient_bound"):
        alg().privacy(s, g, iterations=5)
    assert alg().privacy(s, g, iterations=5, gradient_bound=3.0).is_private


def test_non_private_variants_and_validation():
    p, g = _problem("quadratic"), GRAPH
    assert not GradientTracking(0.1).privacy(p, g, iterations=5).is_private
    assert not DiaDSP(0.1).privacy(p, g, iterations=5).is_private
    with pytest.raises(ParameterError) as err:
        DiaDSP(eta=0.0)
    assert err.value.name == "eta"
    # DiaDSP needs a doubly stochastic W with a spectral gap
    row_only = graphs.from_edges(N, [(i, i + 1) for i in range(N - 1)], weights="uniform")
    with pytest.raises(ParameterError, match="doubly stochastic"):
        dpnet.run(DiaDSP(0.1), p, row_only, 3)
    W = 0.5 * (np.roll(np.eye(N), 1, 1) + np.roll(np.eye(N), -1, 1))   # bipartite, w_ii = 0
    with pytest.raises(ParameterError, match="rho"):
        dpnet.run(GradientTracking(0.1), p, graphs.from_weights(W), 3)
    assert dpnet.algorithms.get("diadsp") is DiaDSP
    assert dpnet.algorithms.get("gradient-tracking") is GradientTracking


def test_diadsp_bits_two_broadcasts_per_iteration():
    p = _problem("quadratic")
    res = dpnet.run(DiaDSP(0.1, noise.Laplace(1.0, decay=0.9), noise.Laplace(1.0, decay=0.9)),
                    p, GRAPH, 7, record=True)
    per_iter = 2 * D * 64 * 2 * len(GRAPH.edges)
    assert res.bits["total"] == 7 * per_iter
    assert res.bits["per_name"] == {"x": 7 * per_iter // 2, "y": 7 * per_iter // 2}
    # what an eavesdropper sees is x^a = x + xi_x: the noisy state, never the clean one
    xa = res.transcript.stacked("x")
    assert xa.shape == (7, N, D)
    x0 = p.default_x0(0).numpy()
    xi0 = noise.Laplace(1.0, decay=0.9).sample(Streams(0), "noise_x", 0, np.arange(N), N, D)
    np.testing.assert_allclose(xa[0], x0 + xi0.numpy(), atol=1e-15)


def test_calibrate_hits_the_target_from_below():
    """Theorem 3's epsilon is proportional to 1/scale: calibration scales both noises by
    eps_before/target and never overshoots."""
    p = problems.Quadratic.random(5, 3, seed=1, mu=0.5, L=2.0)
    g = graphs.ring(5)
    alg = DiaDSP(eta=0.1, noise_x=noise.Laplace(1.0, decay=0.9), noise_y=noise.Laplace(2.0, decay=0.9))
    before = alg.privacy(p, g, iterations=20, gradient_bound=1.0).epsilon
    for target in (0.5, 3.0, 1e3):
        tuned = alg.calibrate(target, p, g, iterations=20, gradient_bound=1.0)
        eps = tuned.privacy(p, g, iterations=20, gradient_bound=1.0).epsilon
        assert eps <= target and eps == pytest.approx(target, rel=1e-8)
        factor = before / target
        assert tuned.noise_x.scale_at(0, 5)[0] == pytest.approx(1.0 * factor, rel=1e-8)
        assert tuned.noise_y.scale_at(0, 5)[0] == pytest.approx(2.0 * factor, rel=1e-8)
    assert alg.noise_x.scale_at(0, 5)[0] == 1.0   # the original is untouched
