"""Paper 003's accountant: Appendix F's recursions by hand, their closed forms, Lemma 5's sum, the
l1/l2 constant, forms, Theorems 3 and 4, and the direction of noise vs epsilon."""

import math

import numpy as np
import pytest

from dpnet import graphs, noise, problems
from dpnet.algorithms import DirectedDPGT
from dpnet.algorithms.cwz_schemes import scheme_s1, scheme_s2
from dpnet.errors import ParameterError
from dpnet.privacy import chen_wang_zhang as cwz


def test_recursion_by_hand():
    # a = 0.5, b = 0.8, gamma = 0.1, C = 1, m = 2 -> C/m = 0.5, 2C/m = 1
    Dx, Dy = cwz.sensitivities(0.5, 0.8, 0.1, 1.0, 2, 3)
    np.testing.assert_allclose(Dy, [0.5, 1.4, 2.12, 2.696])
    np.testing.assert_allclose(Dx, [0.0, 0.05, 0.165, 0.2945])


def test_lemma4_first_cases():
    a, b, g, C, m = 0.3, 0.7, 0.2, 3.0, 5
    Dx, Dy = cwz.sensitivities(a, b, g, C, m, 2)
    assert Dy[0] == pytest.approx(C / m) and Dx[0] == 0
    assert Dx[1] == pytest.approx(g * C / m)                    # (83)
    assert Dy[1] == pytest.approx(b * C / m + 2 * C / m)        # (77)
    # (81) and (87) at k = 2
    assert Dy[2] == pytest.approx(b * 2 * C / m + b**2 * C / m + 2 * C / m)
    assert Dx[2] == pytest.approx(a * g * Dy[0] + g * Dy[1])


@pytest.mark.parametrize("a, b", [(0.9, 0.8), (0.8, 0.8), (1.0, 1.0), (0.7, 1.0), (1.0, 0.5),
                                  (0.0, 0.3), (0.96, 0.995)])
def test_closed_forms_equal_recursion(a, b):
    r = cwz.sensitivities(a, b, 0.05, 2.0, 7, 60)
    c = cwz.sensitivities_closed_form(a, b, 0.05, 2.0, 7, 60)
    np.testing.assert_allclose(c[0], r[0], rtol=1e-11)
    np.testing.assert_allclose(c[1], r[1], rtol=1e-12)


def test_compact_form_factors_give_polynomial_growth():
    g = graphs.cwz_fig1()
    assert cwz.contraction_factors(g, 0.1, 0.01, 2, "compact") == (1.0, 1.0)
    Dx, Dy = cwz.sensitivities(1.0, 1.0, 0.1, 1.0, 4, 10)
    k = np.arange(11)
    np.testing.assert_allclose(Dy, (1 + 2 * k) / 4)
    np.testing.assert_allclose(Dx, 0.1 * k**2 / 4)


def test_per_agent_factors_are_row_sums():
    g = graphs.cwz_fig1()              # C row sums (1, 1, .5, 1.5, 1), R row sums all 1
    a, b = cwz.contraction_factors(g, 0.1, 0.01, 2, "per-agent")
    assert a == pytest.approx(0.9) and b == pytest.approx(1 - 0.005)
    assert cwz.contraction_factors(g, 0.1, 0.01, 3, "per-agent")[1] == pytest.approx(0.985)


def test_lemma5_sum_by_hand_and_l1_l2_constant():
    g = graphs.directed_ring(3, r_weights=0.5, c_weights=0.5)
    alpha, beta, gamma, m, C, d, K = 0.4, 0.2, 0.1, 2, 1.0, 9, 2
    eps = cwz.cumulative_epsilon(g, alpha, beta, gamma, m, C, d, lambda k: 2.0,
                                 lambda k: 4.0, K, form="per-agent", norm="l1")
    a, b = 1 - 0.4 * 0.5, 1 - 0.2 * 0.5
    Dy = [0.5, b * 0.5 + 1, b * (b * 0.5 + 1) + 1]
    Dx = [0, 0.1 * 0.5, a * 0.05 + 0.1 * Dy[1]]
    by_hand = np.cumsum([Dx[k] / 2.0 + Dy[k] / 4.0 for k in range(3)])
    np.testing.assert_allclose(eps[:, 0], by_hand)
    np.testing.assert_allclose(eps, np.repeat(by_hand[:, None], 3, axis=1))   # symmetric ring
    l2 = cwz.cumulative_epsilon(g, alpha, beta, gamma, m, C, d, lambda k: 2.0, lambda k: 4.0, K,
                                form="per-agent", norm="l2")
    np.testing.assert_allclose(l2, 3.0 * eps)            # sqrt(d) = 3


def test_guarantee_max_over_agents_and_algorithm_privacy():
    g = graphs.cwz_fig1()
    problem = problems.Quadratic.random(n_agents=5, dim=4, seed=0)
    alg = DirectedDPGT(0.1, 0.01, 0.1, batch=55, noise_x=noise.Laplace(0.45),
                       noise_y=noise.Laplace(0.3), form="per-agent")
    pg = alg.privacy(problem, g, iterations=101, gradient_bound=1.0)     # C = 2G = 2
    table = cwz.cumulative_epsilon(g, 0.1, 0.01, 0.1, 55, 2.0, 4, lambda k: 0.45, lambda k: 0.3,
                                   100, form="per-agent")
    np.testing.assert_allclose(pg.per_agent, table[-1])
    assert pg.epsilon == pytest.approx(table[-1].max()) and pg.delta == 0.0
    # C row sum 0.5 at agent 2 is the least contractive: the worst agent
    assert int(np.argmax(pg.per_agent)) == 2
    assert any("per-agent" in n for n in pg.notes)
    compact = DirectedDPGT(0.1, 0.01, 0.1, batch=55, noise_x=noise.Laplace(0.45),
                           noise_y=noise.Laplace(0.3)).privacy(problem, g, iterations=101,
                                                               gradient_bound=1.0)
    assert compact.epsilon > pg.epsilon            # factors 1: no contraction
    with pytest.raises(ParameterError, match="C = 2G >="):
        alg.privacy(problem, g, iterations=10)
    with pytest.raises(ParameterError, match="Laplace"):
        DirectedDPGT(0.1, 0.1, 0.1, noise_x=noise.Gaussian(1.0)).privacy(problem, g, 10,
                                                                         gradient_bound=1.0)


def test_linear_in_C_and_inverse_in_sigma():
    g = graphs.cwz_fig1()

    def eps(C, s):
        return cwz.cumulative_epsilon(g, 0.1, 0.01, 0.1, 55, C, 10, lambda k: s, lambda k: s, 50,
                                      "per-agent")[-1]

    np.testing.assert_allclose(eps(3.0, 0.5), 3 * eps(1.0, 0.5))
    np.testing.assert_allclose(eps(1.0, 0.25), 2 * eps(1.0, 0.5))


@pytest.mark.parametrize("form", ["compact", "per-agent"])
def test_smaller_noise_gives_larger_epsilon_for_both_schemes(form):
    """Lemma 5 (the paper's Remark 13 claims the opposite)."""
    g = graphs.cwz_fig1()
    s2 = [scheme_s2(2000, 0.1, 0.01, 0.1, 1.002, p, p).cumulative_epsilon(g, 1.0, 1, form)[-1]
          for p in (0.9994, 0.9996, 0.9998)]
    assert np.all(s2[0] > s2[1]) and np.all(s2[1] > s2[2])
    s1 = [scheme_s1(300, 80, 0.75, 100, 3e-5, 1, 0.66, 1, 1.9, p, p).cumulative_epsilon(
        g, 1.0, 1, form)[-1] for p in (-0.1, 0.1, 0.2)]
    assert np.all(s1[0] > s1[1]) and np.all(s1[1] > s1[2])


def test_theorem4_finite_epsilon_as_K_grows():
    g = graphs.cwz_fig1()
    conds = cwz.theorem4_conditions(g, 0.1, 0.01, 1.002, 0.9996, 0.9996)
    assert all(c.holds for c in conds)
    eps = [scheme_s2(K, 0.1, 0.01, 0.1, 1.002, 0.9996, 0.9996).cumulative_epsilon(
        g, 1.0, 1, "per-agent")[-1].max() for K in (4000, 8000, 16000)]
    assert eps[0] > eps[1] > eps[2]
    bad = cwz.theorem4_conditions(g, 0.1, 0.01, 1.0001, 0.9996, 0.9996)
    assert not bad[-1].holds and bad[-1].value == pytest.approx(0.9996 - 1 / 1.0001)


def test_theorem3_conditions_for_the_paper_s1():
    g = graphs.cwz_fig1()
    for p, margin in ((-0.1, 0.14), (0.1, 0.34), (0.2, 0.44)):
        conds = {c.name: c for c in cwz.theorem3_conditions(g, 80, 0.75, 2000, 1, 0.66, 1, 1.9,
                                                            p, p)}
        assert conds["p_m - p_beta - max(0, 1 - p_eta)"].value == pytest.approx(margin)
        e2 = "p_m + min(0, p_gamma - p_alpha - p_beta) - max(0, 1 - p_zeta)"
        assert conds[e2].value == pytest.approx(margin)
        # the printed weight condition a1 sum_j R_i0j < 1 fails with a1 = 80 and row sums 1 ...
        assert not conds["a1*sum_j R_i0j"].holds and conds["a1*sum_j R_i0j"].value == 80
        # ... while the one the proof uses, alpha sum_j R_i0j < 1, holds
        assert conds["alpha*sum_j R_i0j"].holds


def test_theorem3_epsilon_decreases_with_K_under_its_conditions():
    g = graphs.cwz_fig1()
    eps = []
    for K in (500, 2000, 8000):
        s = scheme_s1(K, 0.5, 0.75, 100, 3e-5, 1, 0.66, 1, 1.9, 0.1, 0.1)
        eps.append(s.cumulative_epsilon(g, 1.0, 1, "per-agent")[-1].max())
    assert eps[0] > eps[1] > eps[2]
    assert math.isfinite(eps[-1])


def test_bad_inputs():
    with pytest.raises(ParameterError, match="norm"):
        cwz.l1_constant(1.0, 4, "linf")
    with pytest.raises(ParameterError, match="C"):
        cwz.sensitivities(0.5, 0.5, 0.1, -1.0, 2, 3)
    with pytest.raises(ParameterError, match="m"):
        cwz.sensitivities(0.5, 0.5, 0.1, 1.0, 0, 3)


def test_smoothness_term_lemma4_omits():
    # a = 0.5, b = 0.8, gamma = 0.1, C/m = 0.5, L1 = 2: Dx1 = 0.05, Dy1 = 0.8*0.5 + 1 + 2*0.05
    Dx, Dy = cwz.sensitivities(0.5, 0.8, 0.1, 1.0, 2, 2, lipschitz=2.0)
    assert Dx[1] == pytest.approx(0.05) and Dy[1] == pytest.approx(1.5)
    assert Dx[2] == pytest.approx(0.5 * 0.05 + 0.1 * 1.5)
    assert Dy[2] == pytest.approx(0.8 * 1.5 + 1 + 2 * (Dx[2] + Dx[1]))
    np.testing.assert_allclose(cwz.sensitivities(0.5, 0.8, 0.1, 1.0, 2, 5, 0.0),
                               cwz.sensitivities(0.5, 0.8, 0.1, 1.0, 2, 5))
    g = graphs.cwz_fig1()
    problem = problems.Quadratic.random(n_agents=5, dim=4, seed=0)
    alg = DirectedDPGT(0.1, 0.01, 0.1, batch=55, noise_x=noise.Laplace(0.45),
                       noise_y=noise.Laplace(0.45), form="per-agent")
    plain = alg.privacy(problem, g, iterations=50, gradient_bound=1.0)
    drift = alg.privacy(problem, g, iterations=50, gradient_bound=1.0, smoothness=0.5)
    assert drift.epsilon > plain.epsilon
    assert any("omits" in n for n in plain.notes)


def test_every_agent_at_once_equals_agent_by_agent():
    g = graphs.random_digraph(9, 0.3, seed=4)
    a, b = cwz.all_contraction_factors(g, 0.1, 0.01, "per-agent")
    for i0 in range(g.n):
        assert (a[i0], b[i0]) == cwz.contraction_factors(g, 0.1, 0.01, i0, "per-agent")
    sigma = np.linspace(1.0, 2.0, g.n)                    # distinct per agent: 9 groups
    eps = cwz.cumulative_epsilon(g, 0.1, 0.01, 0.05, 20, 1.0, 4, lambda k: sigma,
                                 lambda k: 2 * sigma, 6, form="per-agent")
    for i0 in range(g.n):
        Dx, Dy = cwz.sensitivities(a[i0], b[i0], 0.05, 2.0, 20, 6, None)
        by_hand = np.cumsum(cwz.epsilon_terms(Dx, Dy, np.full(7, sigma[i0]),
                                              np.full(7, 2 * sigma[i0])))
        np.testing.assert_allclose(eps[:, i0], by_hand, rtol=1e-14)
