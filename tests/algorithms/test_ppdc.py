"""PPDC (paper 000, Algorithm 2): equality to the per-agent loop of eqs. (14), (16), (31)-(32)
for every compressor (noise off and on), the primal-dual method (27)-(28) / (29)-(30) as the
identity case, the dual invariant (79), the fixed point of a long run, bits, checks, privacy."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet import compression, graphs, noise, problems
from dpnet.algorithms import PGTC, PPDC
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


def _trajectory(alg, p, graph, K, x0, seed=0, keys=("x", "v"), record=False):
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
    alg = PPDC(eta=0.015, gamma=45, omega=5, alpha_x=0.2, compressor=comp, noise_x=s,
               noise_v=0.5 * s, q=q, check_theory=False)
    res, traj = _trajectory(alg, p, prism, K, x0, seed, record=True)
    scale = reference.geometric_scale(s, q) if noisy else None
    scale_v = reference.geometric_scale(0.5 * s, q) if noisy else None
    ref = reference.ppdc(prism.W, reference.local_gradients(p), x0, 0.015, 45, 5, 0.2,
                         reference.compressor(kind, seed=seed, **kw), K, scale, scale_v, seed)
    np.testing.assert_allclose(traj["x"], ref["x"][1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj["v"], ref["v"][1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.transcript.stacked("x"), ref["cx"], rtol=0, atol=1e-12)
    assert res.transcript.names() == ["x"]                 # v never crosses the network
    assert np.abs(ref["x"][-1] - x0).max() > 0.05


@pytest.mark.parametrize("zero_diagonal", [False, True], ids=["metropolis", "zero-diagonal"])
@pytest.mark.parametrize("noisy", [False, True])
def test_identity_compressor_is_the_primal_dual_method(zero_diagonal, noisy, prism):
    graph = _zero_diagonal(prism) if zero_diagonal else prism
    # noise off: (27)-(28) of Yi et al.; noise on: (29)-(30)
    p, x0, K, seed = _logistic(), _x0(), 60, 5
    s = 0.2 if noisy else 0.0
    alg = PPDC(0.015, 45, 5, 0.5, noise_x=s, noise_v=s, q=0.9)
    _, traj = _trajectory(alg, p, graph, K, x0, seed)
    scale = reference.geometric_scale(s, 0.9) if noisy else None
    ref = reference.primal_dual(graph.W, reference.local_gradients(p), x0, 0.015, 45, 5, K,
                                scale, scale, seed)
    np.testing.assert_allclose(traj["x"], ref["x"][1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj["v"], ref["v"][1:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["identity", "topk", "normsign", "quantizer-streams"])
def test_dual_invariant_79_with_noise(name, prism):
    comp, _ = COMPRESSORS[name]
    p, x0, K, seed = _logistic(), _x0(), 80, 2
    alg = PPDC(0.015, 45, 5, 0.2, comp, noise_x=0.5, noise_v=0.5, q=0.95, check_theory=False)
    _, traj = _trajectory(alg, p, prism, K, x0, seed)
    xi_v = np.stack([alg.noise_v.sample(Streams(seed), "noise_v", t, np.arange(N), N, D).numpy()
                     for t in range(K)])
    for k in range(1, K + 1):
        np.testing.assert_allclose(traj["v"][k - 1].sum(0), xi_v[:k].sum((0, 1)), rtol=0,
                                   atol=1e-10)
    assert np.abs(xi_v.sum((0, 1))).max() > 0.1


@pytest.mark.parametrize("name", ["topk", "quantizer-streams", "normsign"])
def test_fixed_point_identity_after_a_long_run(name, prism):
    # catalogue 1.D.6: sum_i grad f_i(x_inf) = -omega sum_t sum_i xi_{v_i,t}, at consensus
    comp, _ = COMPRESSORS[name]
    p = problems.Quadratic.random(N, D, seed=5, mu=0.5, L=2.0)
    K, seed, omega = 1000, 1, 5.0
    alg = PPDC(0.05, 10, omega, 0.2, comp, noise_x=0.3, noise_v=0.3, q=0.7, check_theory=False)
    res = dpnet.run(alg, p, prism, K, x0=_x0(), seed=seed, log_every=K, reference=None)
    x = torch.as_tensor(res.x)
    xi_v = sum(alg.noise_v.sample(Streams(seed), "noise_v", t, np.arange(N), N, D)
               for t in range(K))
    gap = p.grad(x).sum(0) + omega * xi_v.sum(0)
    assert float(gap.norm()) < 1e-9
    assert float(((x - x.mean(0)) ** 2).sum()) < 1e-20
    assert float(xi_v.sum(0).norm()) > 0.1


# d = 10: hand counts as in test_pgtc (one message per agent and iteration here)
HAND_BITS = {"identity": (640, 320), "topk": (136, 72), "quantizer": (94, 62),
             "normsign": (74, 42), "randk-shared-seed": (128, 64)}


@pytest.mark.parametrize("name", list(HAND_BITS))
@pytest.mark.parametrize("float_bits", [64, 32])
def test_bits_per_iteration_equal_hand_counts(name, float_bits, prism):
    comp = {"identity": compression.Identity(), "topk": compression.TopK(2),
            "quantizer": compression.BiasedQuantizer(2), "normsign": compression.NormSign(),
            "randk-shared-seed": compression.RandK(2, shared_seed=True)}[name]
    K = 5
    res = dpnet.run(PPDC(0.015, 45, 5, 0.1, comp, 0.1, 0.1, q=0.5), _logistic(), prism, K,
                    x0=_x0(), log_every=K, reference=None, float_bits=float_bits)
    per_message = HAND_BITS[name][0 if float_bits == 64 else 1]
    links = 2 * 9            # the prism's 9 edges, both ways; each broadcast reaches 3
    np.testing.assert_array_equal(res.ledger.per_iteration(K), per_message * links)
    assert res.ledger.per_name == {"x": K * per_message * links}
    np.testing.assert_array_equal(res.ledger.per_agent, K * per_message * 3)


def test_construction_and_graph_checks():
    p = _logistic()
    ok = dict(eta=0.015, gamma=45, omega=5, alpha_x=0.2)
    for key, bad in [("eta", -0.1), ("gamma", 0), ("omega", 0.0), ("alpha_x", math.inf)]:
        with pytest.raises(ParameterError) as err:
            PPDC(**{**ok, key: bad})
        assert err.value.name == key
    for q in (0.0, 1.0, -0.3):
        with pytest.raises(ParameterError, match="q"):
            PPDC(**ok, noise_v=1.0, q=q)
    with pytest.raises(ParameterError, match="noise_v"):
        PPDC(**ok, noise_v=noise.Laplace(1.0, decay=0.2), q=0.1)
    assert PPDC(**ok, noise_x=2, q=0.5).noise_x.scale_at(1, N).tolist() == [1.0] * N
    # Table I's norm-sign row: alpha_x = 0.2 = 1/r is outside the open interval (0, 1/r)
    with pytest.raises(ParameterError, match="alpha_x"):
        PPDC(0.01, 25, 5, 0.2, compression.NormSign()).check_problem(p)
    PPDC(0.01, 25, 5, 0.2, compression.NormSign(), check_theory=False).check_problem(p)
    PPDC(0.01, 25, 5, 0.2, compression.TopK(2)).check_problem(p)
    alg = PPDC(**ok)
    with pytest.raises(ParameterError, match="rho"):
        alg.check_graph(graphs.ring(N, weight=0.5))
    with pytest.raises(ParameterError, match="doubly stochastic"):
        alg.check_graph(graphs.path(N, weights="uniform"))
    with pytest.raises(ParameterError, match="rho"):
        dpnet.run(alg, p, graphs.ring(N, weight=0.5), 2)


def test_privacy_theorem6_proposition2_and_remark7(prism):
    p = _logistic()
    alg = PPDC(0.015, 45, 5, 0.2, compression.TopK(2), noise_x=100, noise_v=100, q=0.1)
    g = alg.privacy(p, prism, iterations=10, gradient_bound=1.0)
    S = (10**11 - 1) / 9
    # 2 sqrt(10) (sqrt(0.015)/100 + 2/(5 * 100)) sum_{k=0}^{10} 10^k
    hand = 2 * math.sqrt(10) * (math.sqrt(0.015) / 100 + 2 / 500) * S
    assert g.epsilon == pytest.approx(hand, rel=1e-12) and "Theorem 6" in g.theorem
    derived = alg.privacy(p, prism, iterations=10, gradient_bound=1.0, variant="derived")
    assert derived.epsilon == pytest.approx(4 * math.sqrt(10) * (0.015 / 100 + 1 / 500) * S)
    # Remark 7: s_v = s_y, same s_x, q, eta, omega >= 1 => eps_PPDC <= eps_PGTC
    pgtc = PGTC(0.015, 0.2, 0.5, 0.5, noise_x=100, noise_y=100, q=0.1)
    assert g.epsilon <= pgtc.privacy(p, prism, iterations=10, gradient_bound=1.0).epsilon
    # Proposition 2: tau = 1/s_x + 1/(eta s_v)
    slow = PPDC(0.01, 45, 5, 0.2, noise_x=1.0, noise_v=2.0, q=0.9)
    L = p.smoothness
    with pytest.raises(ParameterError, match="variant.*no corrected form"):
        slow.privacy(p, prism, iterations=None, adjacency_radius=0.5)   # the default is sound
    prop = slow.privacy(p, prism, iterations=None, adjacency_radius=0.5, variant="printed")
    tau = 1 / 1.0 + 1 / (0.01 * 2.0)
    assert prop.epsilon == pytest.approx(tau * 0.81 * 0.5 / (0.81 - 0.01 * L - 0.9 * 0.01 * L))
    assert "Proposition 2" in prop.theorem
    with pytest.raises(ParameterError, match="eta"):
        PPDC(1.0, 45, 5, 0.2, noise_x=1.0, noise_v=1.0, q=0.99).privacy(
            p, prism, iterations=None, adjacency_radius=0.5, variant="printed")
    with pytest.raises(ParameterError, match="decay"):
        PPDC(0.01, 45, 5, 0.2, noise_x=noise.Laplace(1.0, decay=0.5),
             noise_v=noise.Laplace(1.0, decay=0.6)).privacy(p, prism, iterations=3,
                                                            gradient_bound=1.0)
    tuned = alg.calibrate(1e12, p, prism, iterations=10, gradient_bound=1.0)
    eps = tuned.privacy(p, prism, iterations=10, gradient_bound=1.0).epsilon
    assert eps <= 1e12 and eps == pytest.approx(1e12, rel=1e-8)
