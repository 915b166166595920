"""DPP2 (paper 004, Algorithm 1) against the per-agent loop and the compact recursion (20)-(21);
eta-invariance of the x-trajectory; the dual invariants; the G check; parameter guards."""

import numpy as np
import pytest

import dpnet
from dpnet import graphs, noise, problems
from dpnet.algorithms import DPP2
from dpnet.errors import ParameterError
from dpnet.rng import Streams

import reference

N, D = 8, 4
GRAPH = graphs.geometric(N, 0.5, seed=3)
PROBLEM = problems.NonconvexLogistic.random(N, 20, D, seed=1, lam=0.05, convention="sum")
ALPHA, BETA, RHO = 0.1, 0.05, 10.0


def _x0(seed=5):
    return np.random.default_rng(seed).standard_normal((N, D))


def _run(alg, K, x0, seed=0, graph=GRAPH, problem=PROBLEM):
    """Trajectories of x, d, q at k = 0..K and the transcript of a run."""
    xs, ds, qs = [x0], [np.zeros_like(x0)], [np.zeros_like(x0)]

    def keep(k, s):
        xs.append(s["x"].numpy().copy())
        ds.append(s["d"].numpy().copy())
        qs.append(s["q"].numpy().copy())

    res = dpnet.run(alg, problem, graph, K, x0=x0, seed=seed, callback=keep, record=True)
    return res, np.stack(xs), np.stack(ds), np.stack(qs)


def _random_etas(seed, K):
    return [float(Streams(seed).uniform("eta", k, [0], 1)[0, 0]) for k in range(K)]


def _noises(u_w, u_e, r):
    return noise.Laplace(u_w, decay=r), noise.Laplace(u_e, decay=r)


@pytest.mark.parametrize("with_noise", [False, True])
def test_equals_the_per_agent_loop_and_the_compact_recursion(with_noise):
    K, seed, x0 = 40, 7, _x0()
    r = np.linspace(0.8, 0.95, N)
    u_w, u_e = np.linspace(0.1, 0.5, N), np.linspace(0.6, 0.2, N)
    kw = dict(zip(("noise_w", "noise_e"), _noises(u_w, u_e, r))) if with_noise else {}
    res, xs, ds, qs = _run(DPP2(ALPHA, BETA, RHO, **kw), K, x0, seed)
    grads = reference.local_gradients(PROBLEM)
    sw = reference.geometric_scale(u_w, r) if with_noise else None
    se = reference.geometric_scale(u_e, r) if with_noise else None
    ref = reference.dpp2(GRAPH.laplacian, grads, x0, ALPHA, BETA, RHO, _random_etas(seed, K), K,
                         sw, se, seed=seed)
    for got, want in ((xs, ref["x"]), (ds, ref["d"]), (qs, ref["q"])):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    # what went on the wire: y then z, once per iteration each
    assert [e.name for e in res.transcript.entries[:4]] == ["y", "z", "y", "z"]
    np.testing.assert_allclose(res.transcript.stacked("y"), ref["y"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.transcript.stacked("z"), ref["z"], rtol=0, atol=1e-10)
    assert bool(np.any(ref["w"])) == with_noise and bool(np.any(ref["e"])) == with_noise
    compact = reference.dpp2_compact(GRAPH.laplacian, grads, x0, ALPHA, BETA, RHO, ref["w"],
                                     ref["e"])
    np.testing.assert_allclose(xs, compact["x"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(qs, compact["q"], rtol=0, atol=1e-10)
    # bits: two float64 broadcasts of d coordinates per agent and iteration, to every neighbour
    assert res.bits["total"] == 2 * K * 64 * D * int(GRAPH.degrees.sum())


def test_x_trajectory_does_not_depend_on_the_eta_sequence():
    K, seed, x0 = 60, 3, _x0(1)
    w, e = _noises(0.3, 0.4, 0.9)
    runs = [_run(DPP2(ALPHA, BETA, RHO, eta=eta, noise_w=w, noise_e=e), K, x0, seed)
            for eta in ("random", 0.5, 0.01, np.random.default_rng(0).uniform(0.05, 0.95, K))]
    base = runs[0]
    for res, xs, ds, qs in runs[1:]:
        np.testing.assert_allclose(xs, base[1], rtol=0, atol=1e-10)
        # d^{k+1} = eta d + x + (1-eta) d + w = d + x + w and q = rho P d: eta-free as well, and
        # so is z = grad f + eta rho P d + rho P (x + (1-eta) d + w) + e
        #         = grad f + rho P (x + d + w) + e. Only y = x + (1-eta) d + w carries eta^k.
        np.testing.assert_allclose(ds, base[2], rtol=0, atol=1e-9)
        np.testing.assert_allclose(qs, base[3], rtol=0, atol=1e-9)
        y, y0 = res.transcript.stacked("y"), base[0].transcript.stacked("y")
        assert np.abs(y[1:] - y0[1:]).max() > 1e-2
        np.testing.assert_allclose(res.transcript.stacked("z"), base[0].transcript.stacked("z"),
                                   rtol=0, atol=1e-9)


@pytest.mark.parametrize("eta", ["random", 0.3])
def test_dual_invariants_q_equals_rho_P_d_and_sums_to_zero(eta):
    K, x0 = 50, _x0(2)
    w, e = _noises(0.5, 0.5, 0.9)
    _, _, ds, qs = _run(DPP2(ALPHA, BETA, RHO, eta=eta, noise_w=w, noise_e=e), K, x0, seed=4)
    P = GRAPH.laplacian
    for k in range(K + 1):
        np.testing.assert_allclose(qs[k], RHO * P @ ds[k], rtol=0, atol=1e-9)
        np.testing.assert_allclose(qs[k].sum(axis=0), 0.0, rtol=0, atol=1e-9)
    assert np.abs(qs[-1]).max() > 1e-3


def test_default_P_is_I_minus_W_and_unweighted_and_explicit_options_agree():
    K, x0 = 20, _x0(3)
    lmax_u = np.linalg.eigvalsh(GRAPH.unweighted_laplacian).max()
    beta_u = 0.5 * ALPHA / lmax_u
    _, xu, _, _ = _run(DPP2(ALPHA, beta_u, RHO, eta=0.5, P="unweighted"), K, x0)
    _, xe, _, _ = _run(DPP2(ALPHA, beta_u, RHO, eta=0.5, P=GRAPH.unweighted_laplacian), K, x0)
    np.testing.assert_allclose(xu, xe, rtol=0, atol=1e-12)
    ref = reference.dpp2(GRAPH.unweighted_laplacian, reference.local_gradients(PROBLEM), x0,
                         ALPHA, beta_u, RHO, [0.5] * K, K)
    np.testing.assert_allclose(xu, ref["x"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(GRAPH.laplacian, np.eye(N) - GRAPH.W, atol=1e-15)


def test_G_check_names_alpha_beta_and_lambda_max():
    lmax = float(np.linalg.eigvalsh(GRAPH.laplacian).max())
    ok = DPP2(ALPHA, 0.99 * ALPHA / lmax, RHO)
    dpnet.run(ok, PROBLEM, GRAPH, 2)
    for beta in (ALPHA / lmax, 1.5 * ALPHA / lmax):
        with pytest.raises(ParameterError) as err:
            dpnet.run(DPP2(ALPHA, beta, RHO), PROBLEM, GRAPH, 2)
        msg = str(err.value)
        assert err.value.name == "beta" and f"{ALPHA:g}" in msg and f"{lmax:.6g}" in msg
        assert f"{beta!r}"[:8] in msg and "positive definite" in msg
    # and G = alpha I - beta P really is PD exactly when beta < alpha/lambda_max
    P = GRAPH.laplacian
    assert np.linalg.eigvalsh(ALPHA * np.eye(N) - 0.99 * ALPHA / lmax * P).min() > 0
    assert np.linalg.eigvalsh(ALPHA * np.eye(N) - 1.01 * ALPHA / lmax * P).min() < 0
    # the unweighted Laplacian of such a graph has lambda_max >> 2: the paper's beta fails there
    with pytest.raises(ParameterError, match="lambda_max"):
        dpnet.run(DPP2(0.1, 0.05, 10, P="unweighted"), PROBLEM, GRAPH, 1)


@pytest.mark.parametrize("kwargs, name", [
    (dict(alpha=0.0, beta=0.05, rho=1), "alpha"),
    (dict(alpha=0.1, beta=-1, rho=1), "beta"),
    (dict(alpha=0.1, beta=0.05, rho=0), "rho"),
    (dict(alpha=0.1, beta=0.05, rho=1, eta=1.0), "eta"),
    (dict(alpha=0.1, beta=0.05, rho=1, eta=0.0), "eta"),
    (dict(alpha=0.1, beta=0.05, rho=1, eta=[0.5, 1.2]), "eta"),
    (dict(alpha=0.1, beta=0.05, rho=1, eta="sometimes"), "eta"),
    (dict(alpha=0.1, beta=0.05, rho=1, noise_w=1.0, noise_e=1.0, r=1.0), "r"),
    (dict(alpha=0.1, beta=0.05, rho=1, noise_w=1.0, noise_e=1.0, r=0.0), "r"),
    (dict(alpha=0.1, beta=0.05, rho=1, noise_w=1.0, noise_e=1.0), "r"),
    (dict(alpha=0.1, beta=0.05, rho=1, noise_w=-1.0, r=0.5), "scale"),
    (dict(alpha=0.1, beta=0.05, rho=1, P="normalized"), "P"),
])
def test_bad_parameters_raise(kwargs, name):
    with pytest.raises(ParameterError) as err:
        DPP2(**kwargs)
    assert err.value.name == name


def test_eta_sequence_too_short_and_bad_P_raise_at_run():
    with pytest.raises(ParameterError, match="eta"):
        dpnet.run(DPP2(ALPHA, BETA, RHO, eta=[0.5] * 3), PROBLEM, GRAPH, 5)
    W = GRAPH.W.copy()
    with pytest.raises(ParameterError, match="Assumption 3"):
        dpnet.run(DPP2(ALPHA, BETA, RHO, P=W), PROBLEM, GRAPH, 1)          # W is not PSD-null-1
    full = np.ones((N, N)) - N * np.eye(N)                                    # not neighbour-sparse
    with pytest.raises(ParameterError, match="neighbour-sparse"):
        dpnet.run(DPP2(ALPHA, BETA, RHO, P=-full), PROBLEM, GRAPH, 1)


def test_plain_floats_build_the_same_noise_as_noise_objects():
    a = DPP2(ALPHA, BETA, RHO, noise_w=0.3, noise_e=[0.5] * N, r=0.9)
    b = DPP2(ALPHA, BETA, RHO, noise_w=noise.Laplace(0.3, decay=0.9),
             noise_e=noise.Laplace([0.5] * N, decay=0.9))
    x0 = _x0()
    np.testing.assert_array_equal(_run(a, 10, x0)[1], _run(b, 10, x0)[1])
    with pytest.raises(ParameterError, match="plain scale"):
        DPP2(ALPHA, BETA, RHO, noise_w=noise.Laplace(0.3, decay=0.9), r=0.9)


def test_exact_convergence_with_decaying_noise():
    """With r < 1 the metric ||x - 1 xbar||^2 + (1/N)||sum_i grad f_i(x_i)||^2 keeps falling
    linearly: no noise floor (the fixed points satisfy sum_i grad f_i(x*) = 0 exactly)."""
    w, e = _noises(1.0, 1.0, 0.8)

    def metric(s, k):
        x = s["x"]
        return float(((x - x.mean(0)) ** 2).sum() + (PROBLEM.grad(x).sum(0) ** 2).sum() / N)

    res = dpnet.run(DPP2(ALPHA, BETA, RHO, noise_w=w, noise_e=e), PROBLEM, GRAPH, 1500,
                    x0=_x0(), metrics={"m": metric}, log_every=500)
    m = res.history["m"]                                   # k = 0, 500, 1000, 1500
    assert np.all(m[2:] < 0.1 * m[1:-1]), m               # >= 10x per 500 iterations, no floor
    assert m[-1] < 1e-7 * m.max()


def test_privacy_method_uses_theorem_3():
    w, e = _noises(0.5, 2.0, 0.9)
    alg = DPP2(ALPHA, BETA, RHO, noise_w=w, noise_e=e)
    g = alg.privacy(PROBLEM, GRAPH, iterations=30, adjacency_radius=0.2)
    M = PROBLEM.smoothness
    c = np.sqrt(D) * (1 / 2.0 + ALPHA / 0.5) * 0.2 / (1 - ALPHA * M)
    assert g.epsilon == pytest.approx(c * sum(0.9 ** -k for k in range(31)), rel=1e-12)
    assert "Theorem 3" in g.theorem and len(g.per_agent) == N
    printed = alg.privacy(PROBLEM, GRAPH, iterations=30, adjacency_radius=0.2, variant="printed")
    assert printed.epsilon == pytest.approx(c * sum(0.9 ** -k for k in range(1, 31)), rel=1e-12)
    with pytest.raises(ParameterError, match="adjacency"):
        alg.privacy(PROBLEM, GRAPH, iterations=30)
    with pytest.raises(ParameterError, match="alpha"):
        alg.privacy(PROBLEM, GRAPH, iterations=30, adjacency_radius=0.2, smoothness=1 / ALPHA)
    assert not DPP2(ALPHA, BETA, RHO).privacy(PROBLEM, GRAPH, 30, adjacency_radius=0.2).is_private
    res = dpnet.run(alg, PROBLEM, GRAPH, 30, privacy={"adjacency_radius": 0.2})
    assert res.privacy.epsilon == g.epsilon
