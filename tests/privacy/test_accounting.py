"""Generic accounting: Laplace composition, the inverse geometric sum, calibration, guarantees."""

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpnet.errors import ParameterError
from dpnet.privacy import (
    PrivacyGuarantee,
    calibrate,
    inverse_geometric_sum,
    laplace_composition,
    xie,
)


def test_laplace_composition_is_the_sum_of_sensitivity_over_scale():
    assert laplace_composition([1.0, 2.0, 0.5], [2.0, 4.0, 0.25]) == pytest.approx(0.5 + 0.5 + 2)
    # geometric schedule: Delta / (s q^k) summed = (Delta / s) sum q^{-k}
    s, q, delta, K = 3.0, 0.8, 0.6, 12
    eps = laplace_composition([delta] * (K + 1), [s * q**k for k in range(K + 1)])
    assert eps == pytest.approx(delta / s * inverse_geometric_sum(q, 0, K), rel=1e-13)
    assert laplace_composition([0.0, 1.0], [0.0, 1.0]) == 1.0      # no sensitivity, no cost
    assert laplace_composition([1.0], [0.0]) == math.inf            # no noise: no privacy
    assert laplace_composition([], []) == 0.0
    with pytest.raises(ParameterError, match="sensitivity"):
        laplace_composition([-1.0], [1.0])
    with pytest.raises(ParameterError, match="scale"):
        laplace_composition([1.0], [-1.0])
    with pytest.raises(ValueError):
        laplace_composition([1.0, 2.0], [1.0])


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9, 0.999, 1.0])
@pytest.mark.parametrize("first, last", [(0, 0), (0, 10), (3, 17), (0, 200)])
def test_inverse_geometric_sum_closed_form_equals_the_loop(q, first, last):
    loop = sum(q ** (-k) for k in range(first, last + 1))
    assert inverse_geometric_sum(q, first, last) == pytest.approx(loop, rel=1e-12)


def test_inverse_geometric_sum_edges():
    assert inverse_geometric_sum(0.5, 4, 3) == 0.0
    assert inverse_geometric_sum(0.1, 0, 10) == pytest.approx(11111111111.0, rel=1e-14)
    assert inverse_geometric_sum(1e-3, 0, 500) == math.inf
    for q in (0.0, -0.5, 1.5):
        with pytest.raises(ParameterError) as err:
            inverse_geometric_sum(q, 0, 3)
        assert err.value.name == "q" and "0 < q <= 1" in str(err.value)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(c=st.floats(1e-3, 1e3), p=st.floats(0.25, 3.0), floor=st.floats(0.0, 1.0),
       target=st.floats(1e-2, 1e2))
def test_calibrate_never_overshoots_and_is_tight(c, p, floor, target):
    # a typical epsilon(noise scale): c / t^p plus a part no noise removes
    def eps(t):
        return floor + c * t ** (-p)      # underflows to 0 instead of overflowing

    # at floor == target only a scale so large that c / t^p rounds away would "reach" it
    assume(abs(floor - target) > 1e-6 * target)
    if floor > target:
        with pytest.raises(ParameterError, match="reachable"):
            calibrate(eps, target)
        return
    t = calibrate(eps, target)
    assert eps(t) <= target
    assert eps(t * (1 - 1e-9)) > target
    exact = (c / (target - floor)) ** (1 / p)
    assert t == pytest.approx(exact, rel=1e-8)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(s=st.floats(0.1, 10.0), target=st.floats(0.5, 1e4), K=st.integers(0, 40))
def test_calibrate_theorem3_scale(s, target, K):
    # the smallest common scale multiplier t for DiaDSP's Theorem 3 at a target epsilon
    def eps(t):
        return xie.pgtc_finite_horizon(10, 1.0, 0.1, s * t, 2 * s * t, 0.9, K)

    t = calibrate(eps, target)
    assert eps(t) <= target < eps(t * (1 - 1e-9))
    assert eps(t) == pytest.approx(target, rel=1e-8)


def test_calibrate_step_function_and_bad_target():
    # a non-increasing step function: the answer is the step's left edge, from the right
    t = calibrate(lambda t: 2.0 if t < 0.37 else 1.0, 1.5)
    assert 0.37 <= t <= 0.37 * (1 + 1e-9)
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ParameterError) as err:
            calibrate(lambda t: 1 / t, bad)
        assert err.value.name == "target"


def test_privacy_guarantee():
    g = PrivacyGuarantee.from_per_agent([0.5, 2.0, 1.0], horizon=10, theorem="T",
                                        assumptions=("A",))
    assert g.epsilon == 2.0 and g.is_private and g.per_agent == (0.5, 2.0, 1.0)
    d = g.as_dict()
    assert d["epsilon"] == 2.0 and d["per_agent"] == [0.5, 2.0, 1.0] and d["assumptions"] == ["A"]
    text = str(g)
    assert "epsilon=2" in text and "10 iterations" in text and "pure DP" in text
    none = PrivacyGuarantee.none("no noise", 5)
    assert not none.is_private and none.epsilon == math.inf
    assert "no differential privacy guarantee" in str(none)
