"""Theorem 3 of Ou et al. (paper 004): hand-computed values, the two variants, monotonicity,
guards, calibration over u and over r (never overshoots), and the Corollary 1 counterexample."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpnet import graphs, noise, problems
from dpnet.algorithms import DPP2
from dpnet.errors import ParameterError
from dpnet.privacy import ou


def test_hand_computed_values():
    # d=4, alpha=0.1, Mbar=2, delta=0.5, u_e=1, u_w=0.5, r=0.5, K=3:
    # c~ = 2 (1/1 + 0.1/0.5) 0.5 / (1 - 0.2) = 1.5 = 2 (1/(0.1*1) + 1/0.5) 0.1*0.5 / 0.8
    assert ou.c_tilde(4, 0.1, 2.0, 0.5, 1.0, 0.5) == pytest.approx(1.5, rel=1e-15)
    # printed: 1.5 (2 + 4 + 8) = 21; conservative adds the k = 0 term: 1.5 * 15 = 22.5
    assert ou.theorem3_epsilon(4, 0.1, 2.0, 0.5, 1.0, 0.5, 0.5, 3, "printed") == pytest.approx(21.0)
    assert ou.theorem3_epsilon(4, 0.1, 2.0, 0.5, 1.0, 0.5, 0.5, 3) == pytest.approx(22.5)
    assert ou.theorem3_epsilon(4, 0.1, 2.0, 0.5, 1.0, 0.5, 0.5, 0, "printed") == 0.0
    assert ou.theorem3_epsilon(4, 0.1, 2.0, 0.5, 1.0, 0.5, 0.5, 0) == pytest.approx(1.5)
    # zero noise: no guarantee
    assert ou.theorem3_epsilon(4, 0.1, 2.0, 0.5, 0.0, 0.5, 0.5, 3) == math.inf


@pytest.mark.parametrize("r", [0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("K", [1, 7, 100])
def test_closed_form_equals_the_printed_loop_sum(r, K):
    d, a, M, dl, ue, uw = 10, 0.0994, 5.03, 0.7, 1.0, 0.994
    loop = sum(math.sqrt(d) * (1 / (a * ue) + 1 / uw) * a * dl / (r ** k * (1 - a * M))
               for k in range(1, K + 1))
    printed = ou.theorem3_epsilon(d, a, M, dl, ue, uw, r, K, "printed")
    assert printed == pytest.approx(loop, rel=1e-11)
    cons = ou.theorem3_epsilon(d, a, M, dl, ue, uw, r, K)
    assert cons == pytest.approx(loop + ou.c_tilde(d, a, M, dl, ue, uw), rel=1e-11)


@settings(max_examples=60, deadline=None)
@given(u_e=st.floats(0.01, 10), u_w=st.floats(0.01, 10), r=st.floats(0.05, 0.98),
       delta=st.floats(0.01, 10), alpha=st.floats(0.001, 0.5), M=st.floats(0.0, 1.9),
       K=st.integers(1, 200), variant=st.sampled_from(ou.VARIANTS))
def test_monotonicity(u_e, u_w, r, delta, alpha, M, K, variant):
    def eps(**kw):
        args = dict(d=10, alpha=alpha, smoothness=M, adjacency=delta, u_e=u_e, u_w=u_w, r=r, K=K,
                    variant=variant)
        args.update(kw)
        return ou.theorem3_epsilon(**args)

    e0 = eps()
    assume(math.isfinite(e0))
    assert eps(u_e=1.1 * u_e) < e0 and eps(u_w=1.1 * u_w) < e0        # more noise, less eps
    assert eps(r=r + 0.5 * (1 - r)) < e0                                 # slower decay, less eps
    assert eps(adjacency=1.1 * delta) > e0 and eps(K=K + 1) > e0
    assert eps(alpha=1.05 * alpha) > e0 and eps(d=11) > e0
    assert eps(smoothness=M + 0.01) >= e0
    assert ou.theorem3_epsilon(10, alpha, M, delta, u_e, u_w, r, K, "printed") <= \
        ou.theorem3_epsilon(10, alpha, M, delta, u_e, u_w, r, K, "conservative")


def test_guards():
    ok = dict(d=10, alpha=0.1, smoothness=5.0, adjacency=1.0, u_e=1.0, u_w=1.0, r=0.9, K=10)
    for bad, name in ((dict(smoothness=10.0), "alpha*Mbar"), (dict(smoothness=20.0), "alpha*Mbar"),
                      (dict(adjacency=None), "adjacency_radius"), (dict(adjacency=0.0), "adjacency_radius"),
                      (dict(r=1.0), "r"), (dict(r=0.0), "r"), (dict(K=None), "iterations"),
                      (dict(variant="tight"), "variant"), (dict(alpha=0.0), "alpha")):
        with pytest.raises(ParameterError) as err:
            ou.theorem3_epsilon(**{**ok, **bad})
        assert err.value.name == name
    with pytest.raises(ParameterError, match=r"alpha = 0.1, Mbar = 10"):
        ou.theorem3_epsilon(**{**ok, "smoothness": 10.0})
    with pytest.raises(ParameterError, match="give smoothness"):
        ou.theorem3_epsilon(**{**ok, "smoothness": math.inf})


@settings(max_examples=60, deadline=None)
@given(target=st.floats(1e-2, 1e6), r=st.floats(0.05, 0.99), K=st.integers(0, 300),
       alpha=st.floats(0.001, 0.5), ratio=st.floats(0.1, 10), variant=st.sampled_from(ou.VARIANTS))
def test_calibrate_scale_never_overshoots_and_is_tight(target, r, K, alpha, ratio, variant):
    assume(not (K == 0 and variant == "printed"))              # eps = 0 for every u
    args = dict(d=10, alpha=alpha, smoothness=1.0, adjacency=0.5, r=r, K=K, variant=variant)
    assume(ou.iteration_sum(r, K, variant) < 1e250)
    u = ou.calibrate_scale(target, w_ratio=ratio, **args)
    eps = ou.theorem3_epsilon(u_e=u, u_w=ratio * u, **args)
    assert eps <= target
    assert ou.theorem3_epsilon(u_e=u * (1 - 1e-8), u_w=ratio * u * (1 - 1e-8), **args) > target


@settings(max_examples=60, deadline=None)
@given(slack=st.floats(1.001, 1e6), K=st.integers(1, 400), u_e=st.floats(0.1, 10),
       u_w=st.floats(0.1, 10), variant=st.sampled_from(ou.VARIANTS))
def test_calibrate_decay_never_overshoots_and_is_tight(slack, K, u_e, u_w, variant):
    args = dict(d=10, alpha=0.1, smoothness=1.0, adjacency=0.5, u_e=u_e, u_w=u_w, K=K,
                variant=variant)
    c = ou.c_tilde(10, 0.1, 1.0, 0.5, u_e, u_w)
    target = slack * c * (K + 1 if variant == "conservative" else K)
    try:
        r = ou.calibrate_decay(target, **args)
    except ParameterError as err:                 # only when the target is within rounding of
        assert slack < 1 + 1e-9, err              # the r -> 1 limit
        return
    assert 0 < r < 1
    assert ou.theorem3_epsilon(r=r, **args) <= target
    lower = r - 1e-9
    assert lower <= 0 or ou.theorem3_epsilon(r=lower, **args) > target


def test_calibrate_decay_refuses_unreachable_targets_with_the_numbers():
    c = ou.c_tilde(10, 0.1, 1.0, 0.5, 1.0, 1.0)
    with pytest.raises(ParameterError, match="no decay rate") as err:
        ou.calibrate_decay(c * 50, 10, 0.1, 1.0, 0.5, 1.0, 1.0, K=100)     # needs > 101 c~
    assert f"{c * 101:.6g}" in str(err.value)


def corollary1_recipe(eps, d, M, delta, K, u_e, u_w, alpha_frac=0.5, r_frac=0.5):
    """Corollary 1 of paper 004, followed literally (for the regression test only, never as a
    library recipe): u_e > sqrt(d) Mbar / eps, u_w > 0,
    alpha < min{1/M, (eps - sqrt(d) Mbar/u_e) / (delta (sqrt(d)/u_w + eps))}, and
    r in ((c~/eps)^(1/(K-1)), 1). Returns (alpha, r, c~)."""
    assert u_e > math.sqrt(d) * M / eps and u_w > 0
    a_max = min(1 / M, (eps - math.sqrt(d) * M / u_e) / (delta * (math.sqrt(d) / u_w + eps)))
    alpha = alpha_frac * a_max
    c = ou.c_tilde(d, alpha, M, delta, u_e, u_w)
    r_min = (c / eps) ** (1 / (K - 1))
    return alpha, r_min + r_frac * (1 - r_min), c


def test_corollary1_recipe_can_exceed_target():
    """Corollary 1 is not sufficient: sum_{k=1}^{K} r^-k >= K for every r < 1, so Theorem 3
    needs K c~ <= eps, but the corollary only ensures c~ < eps (and its proof drops a power when
    bounding the geometric sum). Following it yields Theorem 3's eps far above the target."""
    eps, d, M, delta, K = 10.0, 1, 1.0, 1.0, 100
    for alpha_frac, r_frac in ((0.5, 0.5), (0.1, 0.01), (0.9, 0.99)):
        alpha, r, c = corollary1_recipe(eps, d, M, delta, K, u_e=1.0, u_w=1.0,
                                        alpha_frac=alpha_frac, r_frac=r_frac)
        assert 0 < alpha < 1 / M and 0 < r < 1 and c < eps           # every premise holds
        got = ou.theorem3_epsilon(d, alpha, M, delta, 1.0, 1.0, r, K, "printed")
        assert got > eps and got >= K * c                             # ... and the target fails
    # the first case in numbers: alpha = 0.409, c~ = 2.385, r = 0.9928 (the corollary's interval
    # is (0.9856, 1)), and Theorem 3 gives eps = 350.8 for the target 10
    alpha, r, c = corollary1_recipe(eps, d, M, delta, K, 1.0, 1.0)
    assert (alpha, c, r) == pytest.approx((0.40909, 2.38462, 0.99281), rel=1e-4)
    assert ou.theorem3_epsilon(d, alpha, M, delta, 1.0, 1.0, r, K, "printed") == \
        pytest.approx(350.759, rel=1e-5)


N, D = 6, 3
GRAPH = graphs.ring(N)
PROBLEM = problems.NonconvexLogistic.random(N, 10, D, seed=0, convention="sum")


@pytest.mark.parametrize("over", ["u", "r"])
@pytest.mark.parametrize("variant", ou.VARIANTS)
def test_dpp2_calibrated_meets_the_target(over, variant):
    u_w, u_e = np.linspace(0.5, 1.0, N), np.linspace(2.0, 1.0, N)
    alg = DPP2(0.1, 0.05, 10, noise_w=noise.Laplace(u_w, decay=0.9),
               noise_e=noise.Laplace(u_e, decay=0.9))
    K, delta = 50, 0.3
    base = alg.privacy(PROBLEM, GRAPH, K, adjacency_radius=delta, variant=variant).epsilon
    target = base / 3 if over == "u" else base * 0.8
    cal = alg.calibrated(PROBLEM, GRAPH, target, K, delta, over=over, variant=variant)
    g = cal.privacy(PROBLEM, GRAPH, K, adjacency_radius=delta, variant=variant)
    assert g.epsilon <= target and g.epsilon == pytest.approx(target, rel=1e-6)
    assert (cal.alpha, cal.beta, cal.rho, cal.eta) == (alg.alpha, alg.beta, alg.rho, alg.eta)
    if over == "u":
        np.testing.assert_allclose(cal.noise_w.schedule.scale / u_w, 3.0, rtol=1e-6)
    else:
        assert 0.9 < float(cal.noise_w.schedule.decay[0]) < 1
        np.testing.assert_array_equal(cal.noise_e.schedule.scale, u_e)


def test_guarantee_refuses_mixed_decays_and_non_geometric_noise():
    mixed = DPP2(0.1, 0.05, 10, noise_w=noise.Laplace(1.0, decay=0.9),
                 noise_e=noise.Laplace(1.0, decay=0.8))
    with pytest.raises(ParameterError, match="one decay"):
        mixed.privacy(PROBLEM, GRAPH, 10, adjacency_radius=1.0)
    const = DPP2(0.1, 0.05, 10, noise_w=noise.Laplace(1.0), noise_e=noise.Laplace(1.0))
    with pytest.raises(ParameterError, match="geometric"):
        const.privacy(PROBLEM, GRAPH, 10, adjacency_radius=1.0)
    with pytest.raises(ParameterError, match="finite-horizon"):
        DPP2(0.1, 0.05, 10, noise_w=1.0, noise_e=1.0, r=0.9).privacy(PROBLEM, GRAPH, None,
                                                                     adjacency_radius=1.0)


def test_privacy_from_constants_only():
    """What ``dpnet privacy dpp2`` does: no data, only d, Mbar and delta."""
    const = problems.ProblemConstants(n_agents=50, dim=10, smoothness=5.03)
    alg = DPP2(0.0994, 0.05, 10, noise_w=0.994, noise_e=1.0, r=0.9)
    g = alg.privacy(const, None, iterations=20, adjacency_radius=1.0)
    c = math.sqrt(10) * (1 / 1.0 + 0.0994 / 0.994) / (1 - 0.0994 * 5.03)
    assert g.epsilon == pytest.approx(c * sum(0.9 ** -k for k in range(21)), rel=1e-12)
    assert len(g.per_agent) == 50


@pytest.mark.parametrize("r, K", [(0.5, 10), (0.9, 100), (0.3, 3), (0.99, 1), (0.1, 250)])
@pytest.mark.parametrize("variant", ou.VARIANTS)
def test_log10_sum_matches_and_survives_overflow(r, K, variant):
    assert ou.log10_iteration_sum(r, K, variant) == pytest.approx(
        math.log10(ou.iteration_sum(r, K, variant)), rel=1e-12)
    # r = 0.1, K = 500: 10^500 overflows a float, its logarithm does not
    assert ou.log10_iteration_sum(0.1, 500, variant) == pytest.approx(
        500 + math.log10((1 - 0.1 ** (501 if variant == "conservative" else 500)) / 0.9))
    assert ou.iteration_sum(0.1, 500, variant) == math.inf
