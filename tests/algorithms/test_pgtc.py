"""PGTC (paper 000, Algorithm 1): equality to the per-agent loop of eqs. (8)-(17) for every
compressor (noise off and on), DiaDSP as the gamma = 1 / identity case, the tracking identity
(51), the fixed point of a long run, bits per iteration, construction checks and privacy."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet import compression, graphs, noise, problems
from dpnet.algorithms import PGTC, DiaDSP
from dpnet.errors import ParameterError
from dpnet.rng import Streams

import reference

N, D = 6, 10
DITHER = np.linspace(0.05, 0.95, D)


# conftest's fixtures: one_thread (6 x 10 tensors: intra-op threads only add contention),
# prism (paper 000's 6-agent prism graph, Metropolis weights: self-weights 1/4)
pytestmark = pytest.mark.usefixtures("one_thread")


def _zero_diagonal(prism):
    """The prism with the paper's w_ii = 0 (weights 1/3, doubly stochastic)."""
    return graphs.from_edges(N, prism.edges, weights=1 / 3)


def _logistic():
    return problems.NonconvexLogistic.random(N, 30, D, seed=1)


def _x0(seed=4):
    return np.random.default_rng(seed).uniform(0, 1, (N, D))


COMPRESSORS = {
    "identity": (compression.Identity(), {}),
    "topk": (compression.TopK(2), {"k": 2}),
    "normsign": (compression.NormSign(), {}),
    "quantizer": (compression.BiasedQuantizer(2, dither=DITHER), {"dither": DITHER}),
    "quantizer-streams": (compression.BiasedQuantizer(2), {}),
}


def _trajectory(alg, p, graph, K, x0, seed=0, keys=("x", "y"), record=False):
    states = []
    res = dpnet.run(alg, p, graph, K, x0=x0, seed=seed, log_every=K, reference=None,
                    record=record, callback=lambda k, s: states.append(
                        {key: s[key].numpy().copy() for key in keys}))
    return res, {key: np.stack([s[key] for s in states]) for key in keys}


@pytest.mark.parametrize("noisy", [False, True])
@pytest.mark.parametrize("name", list(COMPRESSORS))
def test_equals_the_per_agent_loop(name, noisy, prism):
    comp, kw = COMPRESSORS[name]
    kind = name.split("-")[0]
    p, x0, K, seed = _logistic(), _x0(), 40, 7
    s, q = (0.3, 0.8) if noisy else (0.0, 0.8)
    alg = PGTC(eta=0.1, gamma=0.2, alpha_x=0.5, alpha_y=0.4, compressor=comp, noise_x=s,
               noise_y=0.5 * s, q=q, check_theory=False)
    res, traj = _trajectory(alg, p, prism, K, x0, seed, record=True)
    scale = reference.geometric_scale(s, q) if noisy else None
    scale_y = reference.geometric_scale(0.5 * s, q) if noisy else None
    ref = reference.pgtc(prism.W, reference.local_gradients(p), x0, 0.1, 0.2, 0.5, 0.4,
                         reference.compressor(kind, seed=seed, **kw), K, scale, scale_y, seed)
    np.testing.assert_allclose(traj["x"], ref["x"][1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj["y"], ref["y"][1:], rtol=0, atol=1e-12)
    # what crossed the network is exactly C(x^a - x^c) and C(y^a - y^c)
    np.testing.assert_allclose(res.transcript.stacked("x"), ref["cx"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.transcript.stacked("y"), ref["cy"], rtol=0, atol=1e-12)
    assert res.transcript.names() == ["x", "y"]
    assert np.abs(ref["x"][-1] - x0).max() > 0.05        # the run moved
    if noisy:
        assert np.abs(ref["xi_x"][0]).max() > 0.01


@pytest.mark.parametrize("zero_diagonal", [False, True], ids=["metropolis", "zero-diagonal"])
@pytest.mark.parametrize("noisy", [False, True])
def test_gamma_one_identity_is_diadsp(zero_diagonal, noisy, prism):
    graph = _zero_diagonal(prism) if zero_diagonal else prism
    p, x0, K = _logistic(), _x0(), 60
    nx_, ny_ = ((noise.Laplace(0.2, decay=0.9), noise.Laplace(0.1, decay=0.9)) if noisy
                else (None, None))
    pgtc = PGTC(eta=0.15, gamma=1.0, alpha_x=0.5, alpha_y=0.5, noise_x=nx_, noise_y=ny_)
    _, a = _trajectory(pgtc, p, graph, K, x0, seed=3)
    _, b = _trajectory(DiaDSP(eta=0.15, noise_x=nx_, noise_y=ny_), p, graph, K, x0, seed=3)
    np.testing.assert_allclose(a["x"], b["x"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(a["y"], b["y"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["identity", "topk", "normsign", "quantizer-streams"])
def test_tracking_identity_51_with_noise(name, prism):
    comp, _ = COMPRESSORS[name]
    p, x0, K, seed = _logistic(), _x0(), 80, 2
    alg = PGTC(0.1, 0.2, 0.5, 0.5, comp, noise_x=0.5, noise_y=0.5, q=0.95, check_theory=False)
    _, traj = _trajectory(alg, p, prism, K, x0, seed, keys=("x", "y", "g"))
    rng, agents = Streams(seed), np.arange(N)
    xi_y = np.stack([alg.noise_y.sample(rng, "noise_y", t, agents, N, D).numpy()
                     for t in range(K)])
    for k in range(1, K + 1):
        lhs = traj["y"][k - 1].sum(0)
        rhs = traj["g"][k - 1].sum(0) + xi_y[:k].sum((0, 1))
        np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-10)
    assert np.abs(xi_y[:K].sum((0, 1))).max() > 0.1      # the noise is not negligible


@pytest.mark.parametrize("name", ["topk", "quantizer-streams", "normsign"])
def test_fixed_point_identity_after_a_long_run(name, prism):
    # catalogue 1.D.5: sum_i grad f_i(x_inf) = -sum_t sum_i xi_{y_i,t}, at consensus
    comp, _ = COMPRESSORS[name]
    p = problems.Quadratic.random(N, D, seed=5, mu=0.5, L=2.0)
    K, seed = 700, 1
    alg = PGTC(0.2, 0.3, 0.5, 0.5, comp, noise_x=0.3, noise_y=0.3, q=0.7, check_theory=False)
    res = dpnet.run(alg, p, prism, K, x0=_x0(), seed=seed, log_every=K, reference=None)
    x = torch.as_tensor(res.x)
    xi_y = sum(alg.noise_y.sample(Streams(seed), "noise_y", t, np.arange(N), N, D)
               for t in range(K))
    gap = p.grad(x).sum(0) + xi_y.sum(0)
    assert float(gap.norm()) < 1e-10
    assert float(((x - x.mean(0)) ** 2).sum()) < 1e-20
    assert float(xi_y.sum(0).norm()) > 0.1               # the fixed point really moved
    np.testing.assert_allclose(res.state["y"], 0.0, atol=1e-10)


# d = 10, float_bits 64 / 32, written out by hand:
#   identity 10 floats; Top-2: 2 x (float + ceil(log2 10) = 4 index bits);
#   2-bit quantizer: one float (norm) + 10 x 3 bits (5 symbols: sign and level 0..2);
#   norm-sign: one float + 10 sign bits; Rand-2 (indices sent): as Top-2.
HAND_BITS = {"identity": (640, 320), "topk": (136, 72), "quantizer": (94, 62),
             "normsign": (74, 42), "randk": (136, 72)}


@pytest.mark.parametrize("name", list(HAND_BITS))
@pytest.mark.parametrize("float_bits", [64, 32])
def test_bits_per_iteration_equal_hand_counts(name, float_bits, prism):
    comp = {"identity": compression.Identity(), "topk": compression.TopK(2),
            "quantizer": compression.BiasedQuantizer(2), "normsign": compression.NormSign(),
            "randk": compression.RandK(2)}[name]
    K = 5
    res = dpnet.run(PGTC(0.1, 0.2, 0.1, 0.1, comp, 0.1, 0.1, q=0.5), _logistic(), prism,
                    K, x0=_x0(), log_every=K, reference=None, float_bits=float_bits)
    per_message = HAND_BITS[name][0 if float_bits == 64 else 1]
    links = 2 * 9            # the prism's 9 edges, both ways; each broadcast reaches 3
    np.testing.assert_array_equal(res.ledger.per_iteration(K), 2 * per_message * links)
    assert res.ledger.per_name == {"x": K * per_message * links, "y": K * per_message * links}
    np.testing.assert_array_equal(res.ledger.per_agent, 2 * K * per_message * 3)


def test_construction_and_graph_checks(prism):
    p, x0 = _logistic(), _x0()
    ok = dict(eta=0.1, gamma=0.2, alpha_x=0.5, alpha_y=0.5)
    for key, bad in [("eta", 0.0), ("gamma", -1.0), ("alpha_x", 0.0), ("alpha_y", math.nan)]:
        with pytest.raises(ParameterError) as err:
            PGTC(**{**ok, key: bad})
        assert err.value.name == key
    for q in (0.0, 1.0, 1.5, [0.5, 1.2]):
        with pytest.raises(ParameterError, match="q"):
            PGTC(**ok, noise_x=1.0, q=q)
    with pytest.raises(ParameterError, match="decay"):
        PGTC(**ok, noise_x=noise.Laplace(1.0, decay=-0.2))
    with pytest.raises(ParameterError, match="noise_x"):
        PGTC(**ok, noise_x=noise.Laplace(1.0, decay=0.3), q=0.5)
    # numbers and scale-only noise objects take the common q; per-agent scales are kept
    alg = PGTC(**ok, noise_x=[1, 2, 3, 4, 5, 6], noise_y=noise.Laplace(2.0), q=0.5)
    assert alg.noise_x.scale_at(2, N).tolist() == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    assert alg.noise_y.scale_at(3, N).tolist() == [0.25] * N
    assert PGTC(**ok).noise_x.is_zero and PGTC(**ok, compressor={"name": "topk", "k": 2})
    # alpha in (0, 1/r): norm-sign has r = d/2 = 5, so Table I's alpha = 0.5 needs the opt-out
    ns = PGTC(0.15, 0.1, 0.5, 0.5, compression.NormSign(), 1.0, 1.0, q=0.1)
    with pytest.raises(ParameterError, match=r"alpha_x < 1/r = 0\.2"):
        dpnet.run(ns, p, prism, 2, x0=x0)
    PGTC(0.15, 0.1, 0.5, 0.5, compression.NormSign(), check_theory=False).check_problem(p)
    PGTC(0.1, 0.2, 0.19, 0.19, compression.NormSign()).check_problem(p)
    with pytest.raises(ParameterError, match="alpha_y"):
        PGTC(0.1, 0.2, 0.5, 1.0, compression.TopK(2)).check_problem(p)   # r = 1
    with pytest.raises(ParameterError, match="k"):
        PGTC(**ok, compressor=compression.TopK(11)).check_problem(p)
    # W: doubly stochastic, connected, rho > 0 (zero-diagonal W on a bipartite ring: rho = 0)
    alg = PGTC(**ok)
    with pytest.raises(ParameterError, match="rho"):
        alg.check_graph(graphs.ring(N, weight=0.5))
    with pytest.raises(ParameterError, match="doubly stochastic"):
        alg.check_graph(graphs.path(N, weights="uniform"))       # row-stochastic only
    with pytest.raises(ParameterError, match="connected"):
        alg.check_graph(graphs.from_edges(N, [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]))
    alg.check_graph(_zero_diagonal(prism))  # the paper's zero diagonal is fine off bipartite graphs


def test_privacy_theorem3_and_proposition1_through_the_algorithm(prism):
    p = _logistic()
    alg = PGTC(0.1, 0.2, 0.5, 0.5, compression.TopK(2), noise_x=100, noise_y=100, q=0.1)
    g = alg.privacy(p, prism, iterations=10, gradient_bound=1.0)
    # 4 sqrt(10) (sqrt(0.1)/100 + 1/100) = 0.04 (1 + sqrt(10)); sum_{k=0}^{10} 10^k
    hand = 0.04 * (1 + math.sqrt(10)) * (10**11 - 1) / 9
    assert g.epsilon == pytest.approx(hand, rel=1e-12) and g.per_agent == (g.epsilon,) * N
    assert "Theorem 3" in g.theorem and g.horizon == 10 and g.delta == 0
    derived = alg.privacy(p, prism, iterations=10, gradient_bound=1.0, variant="derived")
    assert derived.epsilon == pytest.approx(0.04 * (0.1 * math.sqrt(10) + math.sqrt(10))
                                            * (10**11 - 1) / 9, rel=1e-12)
    # the gradient bound defaults to the problem's own
    auto = alg.privacy(p, prism, iterations=3)
    assert auto.epsilon == pytest.approx(g.epsilon / ((10**11 - 1) / 9) * 1111
                                         * p.gradient_bound(), rel=1e-12)
    # Proposition 1 needs eta < 1/(2 L) and q in its interval: eta = 0.01, q = 0.9
    slow = PGTC(0.01, 0.2, 0.5, 0.5, noise_x=1.0, noise_y=2.0, q=0.9)
    L = p.smoothness
    prop = slow.privacy(p, prism, iterations=None, adjacency_radius=0.5, variant="printed")
    tau = 0.01 / 1.0 + 1 / 2.0
    assert prop.epsilon == pytest.approx(tau * 0.81 * 0.5 / (0.81 - 0.01 * L - 0.9 * 0.01 * L))
    sound = slow.privacy(p, prism, iterations=None, adjacency_radius=0.5)  # the default: derived
    tau = 0.01 / (1.0 * 0.9) + 1 / 2.0
    assert sound.epsilon == pytest.approx(tau * 0.81 * 0.5 / (0.81 - 0.01 * L - 0.9 * 0.01 * L))
    assert "Proposition 1" in prop.theorem and prop.horizon is None
    with pytest.raises(ParameterError, match="adjacency"):
        slow.privacy(p, prism, iterations=None)
    with pytest.raises(ParameterError, match="q"):
        alg.privacy(p, prism, iterations=None, adjacency_radius=0.5)     # q = 0.1 too small
    with pytest.raises(ParameterError, match="gradient_bound"):
        alg.privacy(problems.SinCos.random(N, D), prism, iterations=3)
    assert not PGTC(0.1, 0.2, 0.5, 0.5).privacy(p, prism, iterations=3).is_private
    # the same guarantee through run(); per-agent noise gives per-agent budgets
    res = dpnet.run(alg, p, prism, 10, log_every=10, privacy={"gradient_bound": 1.0})
    assert res.privacy.epsilon == pytest.approx(hand, rel=1e-12)
    per = PGTC(0.1, 0.2, 0.5, 0.5, noise_x=100, noise_y=[100, 100, 100, 100, 100, 50], q=0.1)
    eps = per.privacy(p, prism, iterations=10, gradient_bound=1.0).per_agent
    assert eps[:5] == pytest.approx((hand,) * 5) and eps[5] > hand


def test_calibrate_reaches_the_target_without_overshooting(prism):
    p = _logistic()
    alg = PGTC(0.1, 0.2, 0.5, 0.5, compression.TopK(2), noise_x=1.0, noise_y=3.0, q=0.9)
    tuned = alg.calibrate(5.0, p, prism, iterations=20, gradient_bound=1.0)
    eps = tuned.privacy(p, prism, iterations=20, gradient_bound=1.0).epsilon
    assert eps <= 5.0 and eps == pytest.approx(5.0, rel=1e-8)
    t = tuned.noise_x.scale_at(0, N)[0]
    assert tuned.noise_y.scale_at(0, N)[0] == pytest.approx(3 * t)   # the ratio is kept
    assert tuned.noise_x.schedule.decay[0] == 0.9 and alg.noise_x.scale_at(0, N)[0] == 1.0
    with pytest.raises(ParameterError, match="scale"):
        PGTC(0.1, 0.2, 0.5, 0.5).calibrate(5.0, p, prism, iterations=20)
