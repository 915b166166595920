"""Paper 002's accountant: Lemma 1 + Theorem 5(1) by hand, the catalogue's numbers, monotonicity,
per-agent heterogeneity, Assumption 3 of the experiments' ring, no Theorem 5(2) number."""

import math

import numpy as np
import pytest

from dpnet import graphs
from dpnet.errors import ParameterError
from dpnet.privacy import chen_wang as cw

S0 = 0.1 * math.sqrt(2)          # the mushrooms experiment: nu_t = 0.1/(t+1)^varsigma


def test_first_two_terms_by_hand():
    lam0, v, wb, d, s0, vs = 0.7, 0.6, 0.25, 3.0, 0.4, 0.55
    e1 = cw.ldp_online_epsilons(lam0, v, s0, vs, wb, d, 1)[0]
    assert e1 == pytest.approx(2 * math.sqrt(2) * d * lam0 * 2 ** vs / s0, rel=1e-14)
    rho2 = (1 - wb) * lam0 + lam0 / 2 ** v
    e2 = cw.ldp_online_epsilons(lam0, v, s0, vs, wb, d, 2)[0]
    assert e2 == pytest.approx(e1 + 2 * math.sqrt(2) * d * rho2 * 3 ** vs / s0, rel=1e-14)


def test_recursion_equals_theorem_5s_closed_sum():
    lam0, v, wb, T = 1.3, 0.8, 0.45, 40
    lam = lam0 / np.arange(1, T + 1) ** v                                   # lambda_0..lambda_{T-1}
    closed = [sum((1 - wb) ** (t - p) * lam[p - 1] for p in range(1, t)) + lam[t - 1]
              for t in range(1, T + 1)]
    np.testing.assert_allclose(cw.sensitivity_factors(lam0, v, wb, T), closed, rtol=1e-13)


@pytest.mark.parametrize("T, expected", [(10, 290), (100, 1.7e3), (1000, 1.06e4)])
def test_catalogue_values_for_the_mushrooms_settings(T, expected):
    """eps/d for lambda0 = 1, v = 0.71, wbar = 0.6, varsigma = 0.51, sigma0 = 0.1 sqrt 2."""
    eps = cw.ldp_online_epsilons(1.0, 0.71, S0, 0.51, 0.6, 1.0, T)[0]
    assert eps == pytest.approx(expected, rel=0.02)


def test_exact_values_pinned():
    e = [cw.ldp_online_epsilons(1.0, 0.71, S0, 0.51, 0.6, 1.0, T)[0] for T in (10, 100, 1000)]
    np.testing.assert_allclose(e, [289.64502181, 1720.92615848, 10550.02169861], rtol=1e-9)


def test_monotone_in_T_and_inverse_in_sigma0():
    T = np.array([1, 2, 5, 20, 100, 500])
    e = np.array([cw.ldp_online_epsilons(1.0, 0.71, S0, 0.55, 0.6, 2.0, int(t))[0] for t in T])
    assert np.all(np.diff(e) > 0)
    s = np.array([0.05, 0.1, 0.5, 2.0])
    es = np.array([cw.ldp_online_epsilons(1.0, 0.71, x, 0.55, 0.6, 2.0, 50)[0] for x in s])
    assert np.all(np.diff(es) < 0)
    np.testing.assert_allclose(es * s, es[0] * s[0], rtol=1e-13)              # exactly 1/sigma0
    # growth like T^{1 - v + varsigma}
    a, b = (cw.ldp_online_epsilons(1.0, 0.71, S0, 0.55, 0.6, 1.0, t)[0] for t in (4000, 8000))
    assert math.log2(b / a) == pytest.approx(1 - 0.71 + 0.55, abs=0.02)


def test_heterogeneous_agents():
    vs = 0.5 + 0.01 * np.arange(1, 11)
    s0 = np.full(10, S0)
    s0[3] = 2 * S0
    e = cw.ldp_online_epsilons(1.0, 0.71, s0, vs, 0.6, 1.0, 100)
    assert np.all(np.diff(np.delete(e, 3)) > 0)                   # larger varsigma_i, larger eps
    single = cw.ldp_online_epsilons(1.0, 0.71, 2 * S0, vs[3], 0.6, 1.0, 100)[0]
    assert e[3] == pytest.approx(single)
    assert cw.ldp_online_epsilons(1.0, 0.71, [0.0, S0], 0.55, 0.6, 1.0, 5)[0] == math.inf


def test_assumption_3_on_the_experiments_ring_and_a_compliant_one():
    info = cw.assumption3(graphs.ring(10, weight=0.3))
    assert info["delta_m"] == pytest.approx(-1.2)
    assert info["delta_2"] == pytest.approx(-0.6 + 0.6 * math.cos(2 * math.pi / 10))
    assert not info["holds"] and info["wbar"] == pytest.approx(0.6)
    assert info["mixing_radius"] == pytest.approx(0.8854101966249684)
    ok = cw.assumption3(graphs.ring(10, weight=0.2))
    assert ok["holds"] and ok["delta_m"] == pytest.approx(-0.8)


def test_guarantee_object_and_requirements():
    g = graphs.ring(10, weight=0.3)
    vs = 0.5 + 0.01 * np.arange(1, 11)
    G = cw.ldp_online_guarantee(g, 100, 1.0, 0.71, S0, vs, 21.0)
    assert len(G.per_agent) == 10 and G.epsilon == G.per_agent[-1] and G.horizon == 100
    worst = cw.ldp_online_epsilons(1.0, 0.71, S0, 0.6, 0.6, 1.0, 100)[0]
    assert G.epsilon == pytest.approx(21.0 * worst)
    assert any("C3" in n and "not computed" in n for n in G.notes)
    assert any("does NOT hold" in a for a in G.assumptions)
    with pytest.raises(ParameterError, match="C3"):
        cw.ldp_online_guarantee(g, None, 1.0, 0.71, S0, vs, 21.0)
    with pytest.raises(ParameterError, match="l1_gradient_bound"):
        cw.ldp_online_guarantee(g, 10, 1.0, 0.71, S0, vs, None)
    with pytest.raises(ParameterError, match="w_ii"):
        cw.wbar(graphs.complete(6, weights=0.3))                 # |w_ii| = 1.5 > 1
    with pytest.raises(ParameterError, match="sigma0"):
        cw.ldp_online_epsilons(1.0, 0.71, [S0] * 3, vs, 0.6, 1.0, 10)
