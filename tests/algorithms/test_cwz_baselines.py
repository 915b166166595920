"""Baselines of paper 003's Figs. 5-6: [33] KangWDDP, [36] WangBasarTernary, [37] YanBinomial,
[41] CWZQuantized. Per-agent loops, the mechanisms' statistics and their accountants by hand."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet import graphs, problems
from dpnet.algorithms import CWZQuantized, KangWDDP, WangBasarTernary, YanBinomial
from dpnet.algorithms.cwz_quantized import ProbabilisticRounding
from dpnet.algorithms.kang_wddp import server_graph
from dpnet.algorithms.wang_basar_ternary import TernaryDP
from dpnet.algorithms.yan_binomial import BinomialQuantizer
from dpnet.errors import ParameterError
from dpnet.privacy import chen_wang_zhang as cwz
from dpnet.privacy import kang, wang_basar, yan
from dpnet.rng import Streams

import reference


def _logistic(n=4, m=30, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return problems.LogisticRegression(rng.standard_normal((n, m, d)),
                                       rng.choice([-1.0, 1.0], size=(n, m)), reg=0.1)


def _states(alg, problem, graph, K, x0, seed):
    out = []
    dpnet.run(alg, problem, graph, K, x0=x0, seed=seed, reference=None,
              callback=lambda k, s: out.append(s["x"].clone()))
    return torch.stack(out).numpy()


def _undirected(n=4):
    return graphs.ring(n)


def test_kang_equals_server_loop():
    problem, seed, K, sigma = _logistic(), 3, 6, 0.2
    x0 = np.tile(problem.default_x0(0).numpy()[0], (4, 1))
    traj = _states(KangWDDP(0.3, sigma, batch=5, power=0.5), problem, server_graph(4), K, x0,
                   seed)
    grads = reference.local_gradients(problem, batch_size=5, seed=seed)
    rng = Streams(seed)

    def msg(i, k, g):
        return g + sigma * rng.gaussian("noise", k, [i], 3)[0]

    ref = reference.server_sgd([0.25] * 4, grads, x0[0], lambda k: 0.3 / (k + 1) ** 0.5, msg, K)
    for k in range(K):
        for i in range(4):
            np.testing.assert_allclose(traj[k, i], ref[k + 1], rtol=1e-11, atol=1e-12)


def test_yan_equals_server_loop_and_quantizer_is_unbiased():
    problem, seed, K = _logistic(), 1, 4
    x0 = np.tile(problem.default_x0(0).numpy()[0], (4, 1))
    alg = YanBinomial(0.2, batch=5, levels=16, quantizer_range=1.0, trials=40)
    traj = _states(alg, problem, server_graph(4), K, x0, seed)
    grads = reference.local_gradients(problem, batch_size=5, seed=seed)
    rng = Streams(seed)

    def msg(i, k, g):
        return alg.quantizer.compress(torch.from_numpy(g[None]), rng, "compress/g", k, [i])[0].numpy()

    ref = reference.server_sgd([0.25] * 4, grads, x0[0], lambda k: 0.2, msg, K)
    np.testing.assert_allclose(traj[-1, 2], ref[-1], rtol=1e-11, atol=1e-12)
    q = BinomialQuantizer(8, 1.0, 20)
    x = torch.tensor([[-2.0, -0.3, 0.0, 0.55, 1.0]])
    draws = torch.cat([q.compress(x, Streams(s), "t", 0, [0]) for s in range(4000)]).numpy()
    se = draws.std(0) / math.sqrt(4000)
    assert np.all(np.abs(draws.mean(0) - x.clamp(-1, 1).numpy()[0]) < 5 * se)
    assert q.bits(10) == 10 * 5                       # levels + trials = 28 values: 5 bits


def test_ternary_quantizer_probabilities_and_ratio_bound():
    a, b = 1.0, 1.5
    q = TernaryDP(a, b)
    x = torch.full((1, 60_000), 0.4)
    y = q.compress(x, Streams(0), "t", 0, [0]).numpy()[0]
    assert set(np.unique(y)) <= {-2 * b, 0.0, 2 * b}
    for sym, prob in ((2 * b, (b + 0.4) / (4 * b)), (0.0, 0.5), (-2 * b, (b - 0.4) / (4 * b))):
        assert abs(np.mean(y == sym) - prob) < 0.01
    assert abs(y.mean() - 0.4) < 0.03                 # unbiased for the clamped value
    # the likelihood ratio of every symbol for |x - x'| <= D is at most 1 + D/(b - a)
    D = 0.2
    for xv in np.linspace(-a, a - D, 11):
        probs = lambda v: np.array([(b + v) / (4 * b), 0.5, (b - v) / (4 * b)])   # noqa: E731
        ratio = np.max(probs(xv + D) / probs(xv))
        assert ratio <= 1 + D / (b - a) + 1e-12
    assert wang_basar.release_epsilon(np.array([0.3]), a, b)[0] == pytest.approx(0.6)
    with pytest.raises(ParameterError, match="b > a"):
        TernaryDP(1.0, 1.0)


@pytest.mark.parametrize("which", ["wang_basar", "cwz41"])
def test_coupled_dsgd_baselines_equal_per_agent_loop(which):
    problem, seed, K = _logistic(), 2, 5
    g = _undirected()
    x0 = problem.default_x0(0).numpy()
    rng = Streams(seed)
    if which == "wang_basar":
        alg = WangBasarTernary(0.2, 0.6, 0.8, 0.1, batch=4, a=1.0, b=1.3)

        def msg(j, k, x):
            return alg.quantizer.compress(torch.from_numpy(x[None]), rng, "compress/x", k,
                                          [j])[0].numpy()

        coupling, step = alg.coupling, alg.step_size
    else:
        alg = CWZQuantized(0.7, 0.2, 0.3, 0.5, batch=4, sigma0=0.1, p_sigma=0.1)

        def msg(j, k, x):
            z = 0.1 * (k + 1) ** 0.1 * rng.laplace("noise_x", k, [j], 3)[0]
            return alg.quantizer.compress(torch.from_numpy((x + z)[None]), rng, "compress/x", k,
                                          [j])[0].numpy()

        def coupling(k):
            return 0.7 / (k + 1) ** 0.2

        def step(k):
            return 0.3 / (k + 1) ** 0.5
    traj = _states(alg, problem, g, K, x0, seed)
    grads = reference.local_gradients(problem, batch_size=4, seed=seed)
    ref = reference.coupled_dsgd(g.W, grads, x0, coupling, step, msg, K)
    np.testing.assert_allclose(traj, ref[1:], rtol=1e-10, atol=1e-12)


def test_cwz41_without_noise_and_fine_grid_is_dgd():
    problem = _logistic()
    g = graphs.ring(4)                           # Metropolis: w_ii = 1 - sum_j w_ij
    x0 = problem.default_x0(0).numpy()
    alg = CWZQuantized(1.0, 0.0, 0.2, 0.0, batch=30, sigma0=0.0, resolution=2.0 ** -45)
    traj = _states(alg, problem, g, 8, x0, 0)
    ref = reference.dgd(g.W, reference.local_gradients(problem), x0, 0.2, 8)
    np.testing.assert_allclose(traj[-1], ref[-1], atol=1e-11)
    r = ProbabilisticRounding(0.25)
    y = r.compress(torch.full((1, 40_000), 0.1), Streams(0), "t", 0, [0]).numpy()[0]
    assert set(np.unique(y)) == {0.0, 0.25} and abs(y.mean() - 0.1) < 0.005


def test_graph_requirements():
    p = _logistic()
    with pytest.raises(ParameterError, match="server"):
        dpnet.run(KangWDDP(0.1, 0.1, 5), p, graphs.ring(4), 1)
    with pytest.raises(ParameterError, match="undirected"):
        dpnet.run(CWZQuantized(0.5, 0.1, 0.1, 0.5, 5, 0.1), p, graphs.directed_ring(4), 1)


# ---- accountants ---------------------------------------------------------------------------------

def test_dsgd_state_sensitivity_by_hand():
    D = cwz.dsgd_state_sensitivity([0.5, 0.25], [0.1, 0.2], 1.0, 2.0)
    # Delta_1 = 0.1*2 = 0.2; Delta_2 = |1 - 0.25| 0.2 + 0.2*2 = 0.55
    np.testing.assert_allclose(D, [0.0, 0.2, 0.55])


def test_kang_epsilon_properties():
    e = kang.epsilon(0.5, 1.0, 10, 10, 1, 1e-5, subsampled=False)       # z = 5, one release
    classical = math.sqrt(2 * math.log(1.25 / 1e-5)) / 5                 # Dwork-Roth bound
    assert 0 < e <= classical
    assert kang.epsilon(0.5, 1.0, 10, 1000, 50, 1e-5) < kang.epsilon(0.5, 1.0, 10, 1000, 50, 1e-5,
                                                                     subsampled=False)
    assert kang.epsilon(0.5, 1.0, 10, 1000, 100, 1e-5) > kang.epsilon(0.5, 1.0, 10, 1000, 50, 1e-5)
    alg = KangWDDP(0.1, 0.5, 10)
    pg = alg.privacy(_logistic(m=40), server_graph(4), iterations=20, gradient_bound=1.0,
                     delta=1e-5)
    assert pg.epsilon == pytest.approx(kang.epsilon(0.5, 2.0, 10, 40, 20, 1e-5))   # C = 2G
    assert pg.delta == 1e-5


def test_yan_constants_and_composition_by_hand():
    b, c, d = yan.binomial_constants(0.5)
    assert b == pytest.approx(1 / 3) and d == pytest.approx(2 / 3)
    assert c == pytest.approx(math.sqrt(2) * 1.75)
    assert yan.sensitivities(1.0, 10, 0.05, 4) == pytest.approx((3.0, 2 * 2.0 + 4, 2.0 + 2.0))
    assert math.isinf(yan.binomial_epsilon(1e-5, 10, 0.5, 4, 3.0, 8.0, 4.0))
    N = yan.min_trials(0.5, 4, 1e-5, 3.0)
    assert math.isfinite(yan.binomial_epsilon(1e-5, N, 0.5, 4, 3.0, 8.0, 4.0))
    # basic composition when it is smaller, advanced otherwise
    assert yan.compose(0.5, 1e-6, 4, 1e-5) == pytest.approx((2.0, 4e-6))
    e, dl = yan.compose(0.01, 1e-7, 10_000, 1e-5)
    adv = math.sqrt(2 * 10_000 * math.log(1e5)) * 0.01 + 10_000 * 0.01 * math.expm1(0.01)
    assert e == pytest.approx(adv) and dl == pytest.approx(1e-3 + 1e-5)


def test_coupled_baselines_privacy_by_hand():
    p = _logistic(d=4)
    g = graphs.ring(4)                             # Metropolis: every off-diagonal row sums 2/3
    alg = WangBasarTernary(0.2, 0.0, 0.5, 0.0, batch=4, a=1.0, b=1.5)
    pg = alg.privacy(p, g, iterations=3, gradient_bound=1.0)
    c1m = 2.0 * 2.0 / 4                            # sqrt(4) * C / m, C = 2G = 2
    d1 = 0.2 * c1m
    d2 = (1 - 0.5 * 2 / 3) * d1 + 0.2 * c1m
    assert pg.epsilon == pytest.approx((0 + d1 + d2) / 0.5)
    alg = CWZQuantized(0.5, 0.0, 0.2, 0.0, batch=4, sigma0=2.0, p_sigma=0.0)
    assert alg.privacy(p, g, iterations=3, gradient_bound=1.0).epsilon == \
        pytest.approx((d1 + d2) / 2.0)
