"""Paper 000's accounting (privacy/xie.py): Theorems 3 and 6 (printed and derived), Propositions
1 and 2 with their guards, Remark 7, monotonicity, closed form against the literal sum,
hand-computed values, and calibration of PGTC / PPDC that never overshoots."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpnet import graphs, problems
from dpnet.algorithms import PGTC, PPDC
from dpnet.errors import ParameterError
from dpnet.privacy import xie

scales = st.floats(1e-2, 1e3)
decays = st.floats(0.05, 0.99)
horizons = st.integers(0, 60)
etas = st.floats(1e-3, 1.0)
variants = st.sampled_from(xie.VARIANTS)


def _loop_pgtc(d, M, eta, s_x, s_y, q, K, variant):
    c = {"printed": math.sqrt(eta), "derived": eta, "sound": max(math.sqrt(eta), eta)}[variant]
    return sum(4 * math.sqrt(d) * M * (c / (s_x * q**k) + 1 / (s_y * q**k))
               for k in range(K + 1))


def _loop_ppdc(d, M, eta, omega, s_x, s_v, q, K, variant):
    if variant == "sound":
        return max(_loop_ppdc(d, M, eta, omega, s_x, s_v, q, K, v) for v in ("printed", "derived"))
    if variant == "printed":
        return sum(2 * math.sqrt(d) * M * (math.sqrt(eta) / (s_x * q**k)
                                           + 2 / (omega * s_v * q**k)) for k in range(K + 1))
    return sum(4 * math.sqrt(d) * M * (eta / (s_x * q**k) + 1 / (omega * s_v * q**k))
               for k in range(K + 1))


def test_hand_computed_values():
    # d = 10, M = 1, eta = 0.1, s = 100, q = 0.1, K = 10 (Table I's PGTC-C1 noise):
    # 4 sqrt(10) (sqrt(0.1) + 1)/100 = 0.04 (1 + sqrt(10)), sum_{k=0}^{10} 10^k = (10^11 - 1)/9
    S = (10**11 - 1) / 9
    assert xie.pgtc_finite_horizon(10, 1.0, 0.1, 100, 100, 0.1, 10) == pytest.approx(
        0.04 * (1 + math.sqrt(10)) * S, rel=1e-13)          # = 1.8499e9, the catalogue's 1.8e9
    assert xie.pgtc_finite_horizon(10, 1.0, 0.1, 100, 100, 0.1, 10, "derived") == pytest.approx(
        0.04 * math.sqrt(10) * 1.1 * S, rel=1e-13)
    # K = 0 is one term: 2 sqrt(4) * 3 * (sqrt(0.25)/1 + 2/(2 * 1)) = 12 * 1.5 = 18
    assert xie.ppdc_finite_horizon(4, 3.0, 0.25, 2.0, 1.0, 1.0, 0.5, 0) == pytest.approx(18.0)
    assert xie.ppdc_finite_horizon(4, 3.0, 0.25, 2.0, 1.0, 1.0, 0.5, 0, "derived") == \
        pytest.approx(4 * 2 * 3 * (0.25 + 0.5))
    # K = 2, q = 0.5: sum = 1 + 2 + 4 = 7; 4 sqrt(1) * 1 * (sqrt(0.04)/2 + 1/4) = 1.4
    assert xie.pgtc_finite_horizon(1, 1.0, 0.04, 2.0, 4.0, 0.5, 2) == pytest.approx(1.4 * 7)
    # Propositions: eta = 0.01, L = 1, q = 0.5, delta = 1, s_x = s_y = s_v = 1
    assert xie.proposition_q_min(0.01, 1.0) == pytest.approx((0.01 + math.sqrt(0.0401)) / 2)
    assert xie.pgtc_infinite_horizon(0.01, 1.0, 1.0, 1.0, 0.5, 1.0) == pytest.approx(
        1.01 * 0.25 / 0.235)
    assert xie.ppdc_infinite_horizon(0.01, 1.0, 1.0, 1.0, 0.5, 1.0) == pytest.approx(
        101 * 0.25 / 0.235)


@settings(max_examples=80, deadline=None)
@given(d=st.integers(1, 50), M=st.floats(0.1, 10), eta=etas, s_x=scales, s_y=scales, q=decays,
       K=horizons, omega=st.floats(0.1, 20), variant=variants)
def test_closed_form_equals_the_literal_sum_with_k_plus_one_terms(d, M, eta, s_x, s_y, q, K,
                                                                  omega, variant):
    assert xie.pgtc_finite_horizon(d, M, eta, s_x, s_y, q, K, variant) == pytest.approx(
        _loop_pgtc(d, M, eta, s_x, s_y, q, K, variant), rel=1e-10)
    assert xie.ppdc_finite_horizon(d, M, eta, omega, s_x, s_y, q, K, variant) == pytest.approx(
        _loop_ppdc(d, M, eta, omega, s_x, s_y, q, K, variant), rel=1e-10)


@settings(max_examples=80, deadline=None)
@given(d=st.integers(1, 50), eta=etas, s_x=scales, s=scales, q=decays, K=horizons,
       omega=st.floats(1.0, 50), variant=variants)
def test_remark7_ppdc_never_above_pgtc_for_omega_at_least_one(d, eta, s_x, s, q, K, omega,
                                                              variant):
    pgtc = xie.pgtc_finite_horizon(d, 1.0, eta, s_x, s, q, K, variant)
    ppdc = xie.ppdc_finite_horizon(d, 1.0, eta, omega, s_x, s, q, K, variant)
    assert ppdc <= pgtc * (1 + 1e-12)


def test_remark7_can_fail_below_omega_one():
    # printed: 2(sqrt(eta)/s + 2/(omega s)) > 4(sqrt(eta)/s + 1/s) once omega < 1/(1 + sqrt(eta))
    assert xie.ppdc_finite_horizon(10, 1, 0.01, 0.5, 1, 1, 0.5, 3) > \
        xie.pgtc_finite_horizon(10, 1, 0.01, 1, 1, 0.5, 3)


@settings(max_examples=60, deadline=None)
@given(eta=etas, s_x=scales, s_y=scales, q=st.floats(0.05, 0.9), K=horizons, variant=variants,
       factor=st.floats(1.01, 10))
def test_finite_horizon_monotone_in_s_q_and_K(eta, s_x, s_y, q, K, variant, factor):
    for fn, args in ((xie.pgtc_finite_horizon, (10, 1.0, eta)),
                     (xie.ppdc_finite_horizon, (10, 1.0, eta, 5.0))):
        base = fn(*args, s_x, s_y, q, K, variant)
        assert fn(*args, s_x * factor, s_y, q, K, variant) < base          # more noise
        assert fn(*args, s_x, s_y * factor, q, K, variant) < base
        assert fn(*args, s_x * factor, s_y * factor, q, K, variant) == pytest.approx(
            base / factor, rel=1e-12)                                       # eps ~ 1/s
        assert fn(*args, s_x, s_y, q, K + 1, variant) > base                # longer horizon
        q2 = min(0.999, q * factor)
        if K > 0:
            assert fn(*args, s_x, s_y, q2, K, variant) < base               # slower decay
        else:
            assert fn(*args, s_x, s_y, q2, K, variant) == pytest.approx(base)


@settings(max_examples=60, deadline=None)
@given(eta=st.floats(1e-4, 0.49), L=st.floats(0.1, 1.0), s_x=scales, s_y=scales,
       u=st.floats(0.01, 0.99), delta=st.floats(0.01, 10), factor=st.floats(1.01, 10))
def test_propositions_positive_and_monotone(eta, L, s_x, s_y, u, delta, factor):
    qmin = xie.proposition_q_min(eta, L)
    if qmin >= 0.999:
        return
    q = qmin + u * (1 - qmin)
    for fn in (xie.pgtc_infinite_horizon, xie.ppdc_infinite_horizon):
        eps = fn(eta, L, s_x, s_y, q, delta)
        assert eps > 0 and math.isfinite(eps)
        assert fn(eta, L, s_x * factor, s_y * factor, q, delta) == pytest.approx(eps / factor)
        assert fn(eta, L, s_x * factor, s_y, q, delta) < eps
        assert fn(eta, L, s_x, s_y, q, delta * factor) == pytest.approx(eps * factor)
        q2 = q + 0.5 * (1 - q)
        assert fn(eta, L, s_x, s_y, q2, delta) < eps                        # decreasing in q


def test_proposition_guards():
    for fn in (xie.pgtc_infinite_horizon, xie.ppdc_infinite_horizon):
        with pytest.raises(ParameterError, match=r"eta < 1/\(2 L_f\)"):
            fn(0.5, 1.0, 1, 1, 0.99, 1.0)                     # eta = 1/(2L) exactly
        qmin = xie.proposition_q_min(0.1, 1.0)
        for q in (qmin, 0.5 * qmin, 1.0, 1.2):
            with pytest.raises(ParameterError) as err:
                fn(0.1, 1.0, 1, 1, q, 1.0)
            assert err.value.name == "q"
        fn(0.1, 1.0, 1, 1, qmin + 1e-6, 1.0)
        for delta in (0.0, -1.0, math.inf):
            with pytest.raises(ParameterError, match="adjacency"):
                fn(0.1, 1.0, 1, 1, 0.9, delta)
        with pytest.raises(ParameterError, match="smoothness"):
            fn(0.1, math.inf, 1, 1, 0.9, 1.0)
    assert xie.pgtc_infinite_horizon(0.1, 1.0, 0.0, 1.0, 0.9, 1.0) == math.inf   # no x noise


def test_finite_horizon_guards():
    with pytest.raises(ParameterError, match="gradient_bound"):
        xie.pgtc_finite_horizon(10, 0.0, 0.1, 1, 1, 0.5, 3)
    with pytest.raises(ParameterError, match="q"):
        xie.ppdc_finite_horizon(10, 1.0, 0.1, 5, 1, 1, 1.0, 3)
    with pytest.raises(ParameterError, match="iterations"):
        xie.pgtc_finite_horizon(10, 1.0, 0.1, 1, 1, 0.5, -1)
    with pytest.raises(ParameterError, match="variant"):
        xie.pgtc_finite_horizon(10, 1.0, 0.1, 1, 1, 0.5, 3, "tight")
    with pytest.raises(ParameterError, match="omega"):
        xie.ppdc_finite_horizon(10, 1.0, 0.1, 0.0, 1, 1, 0.5, 3)
    assert xie.pgtc_finite_horizon(10, 1.0, 0.1, 1, 1, 1e-3, 500) == math.inf    # overflow


CONSTANTS = problems.ProblemConstants(6, 10, smoothness=1.0)
GRAPH = graphs.ring(6)


@settings(max_examples=40, deadline=None)
@given(which=st.sampled_from(["pgtc", "ppdc"]), s=scales, ratio=st.floats(0.1, 10), q=decays,
       K=st.integers(0, 30), target=st.floats(1e-2, 1e6), variant=variants,
       M=st.floats(0.1, 10))
def test_calibrate_never_overshoots_theorems(which, s, ratio, q, K, target, variant, M):
    if which == "pgtc":
        alg = PGTC(0.1, 0.2, 0.5, 0.5, noise_x=s, noise_y=s * ratio, q=q)
    else:
        alg = PPDC(0.015, 45, 5, 0.2, noise_x=s, noise_v=s * ratio, q=q)
    kw = dict(iterations=K, gradient_bound=M, variant=variant)
    tuned = alg.calibrate(target, CONSTANTS, GRAPH, **kw)
    eps = tuned.privacy(CONSTANTS, GRAPH, **kw).epsilon
    assert eps <= target
    assert eps == pytest.approx(target, rel=1e-8)            # and the smallest such noise
    # eps is exactly proportional to 1/scale, so the factor is eps_before / target
    before = alg.privacy(CONSTANTS, GRAPH, **kw).epsilon
    factor = tuned.noise_x.scale_at(0, 6)[0] / s
    assert factor == pytest.approx(before / target, rel=1e-8)


@settings(max_examples=30, deadline=None)
@given(which=st.sampled_from(["pgtc", "ppdc"]), s=scales, u=st.floats(0.05, 0.95),
       target=st.floats(1e-2, 1e4), delta=st.floats(0.01, 10))
def test_calibrate_never_overshoots_propositions(which, s, u, target, delta):
    eta = 0.05
    q = xie.proposition_q_min(eta, 1.0) + u * (1 - xie.proposition_q_min(eta, 1.0))
    alg = (PGTC(eta, 0.2, 0.5, 0.5, noise_x=s, noise_y=s, q=q) if which == "pgtc"
           else PPDC(eta, 45, 5, 0.2, noise_x=s, noise_v=s, q=q))
    kw = dict(iterations=None, adjacency_radius=delta,
              variant="derived" if which == "pgtc" else "printed")  # Prop 2: printed only
    tuned = alg.calibrate(target, CONSTANTS, GRAPH, **kw)
    eps = tuned.privacy(CONSTANTS, GRAPH, **kw).epsilon
    assert eps <= target and eps == pytest.approx(target, rel=1e-8)


def test_per_agent_unique_evaluates_once_per_distinct_row_and_maps_back():
    import numpy as np

    from dpnet.privacy.guarantee import per_agent_unique

    calls = []

    def fn(a, b):
        calls.append((a, b))
        return 10 * a + b

    a = np.array([1.0, 2.0, 1.0, 3.0, 2.0, 1.0])
    b = np.array([0.5, 0.5, 0.5, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(per_agent_unique(fn, a, b), 10 * a + b)
    assert sorted(calls) == [(1.0, 0.5), (1.0, 0.75), (2.0, 0.5), (3.0, 0.25)]
    calls.clear()
    np.testing.assert_array_equal(per_agent_unique(fn, 2.0, np.full(5, 0.5)), np.full(5, 20.5))
    assert calls == [(2.0, 0.5)]
