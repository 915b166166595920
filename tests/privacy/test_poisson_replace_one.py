"""The Poisson replace-one pair's Renyi divergence: an upper bound, within 0.5 % of the exact
integral (mpmath quadrature at 40 digits), exact at rate 1, between the add-or-remove curve and
the group-of-two bound."""

import mpmath as mp
import numpy as np
import pytest

from dpnet.errors import DPNetError
from dpnet.privacy import dp_accounting_bridge as bridge
from dpnet.privacy import dp_sgd, poisson_replace_one


def _exact(z: float, q: float, a: float) -> float:
    """D_a(P || Q), P = (1-q) N(0) + q N(1/z), Q = (1-q) N(0) + q N(-1/z), by quadrature."""
    mp.mp.dps = 40
    mu, q = mp.mpf(1) / z, mp.mpf(q)

    def phi(x):
        return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)

    def integrand(x):
        return (((1 - q) * phi(x) + q * phi(x - mu)) ** a
                * ((1 - q) * phi(x) + q * phi(x + mu)) ** (1 - a))

    v = mp.quad(integrand, [-mp.inf, -5, 0, 5, a * mu, 2 * a * mu, 2 * a * mu + 10, mp.inf])
    return float(mp.log(v) / (a - 1))


@pytest.mark.parametrize("z, q, a", [(2.0, 0.05, 4), (0.86, 16 / 1953, 8), (5.0, 0.2, 2),
                                     (0.52, 16 / 1953, 16), (0.52, 16 / 1953, 3),
                                     (1.0, 0.01, 1.5)])
def test_the_bound_is_above_the_exact_divergence_and_within_half_a_percent(z, q, a):
    exact = _exact(z, q, a)
    got = float(poisson_replace_one.rdp_curve(z, q, [a])[0])
    assert exact <= got <= exact * 1.005


def test_rate_one_is_the_gaussian_at_twice_the_distance():
    orders = np.array([1.5, 2.0, 7.0, 64.0])
    assert np.allclose(poisson_replace_one.rdp_curve(0.8, 1.0, orders), 2 * orders / 0.64)


def test_between_the_add_or_remove_curve_and_the_group_of_two_bound():
    orders = np.arange(2, 40)
    for z, q in ((0.65, 16 / 1953), (2.0, 0.05), (5.0, 0.2)):
        step = dp_sgd.step_event(z, q)
        pair = poisson_replace_one.rdp_curve(z, q, orders)
        finite = np.isfinite(pair)
        assert finite[:5].all()
        assert np.all(pair[finite] >= bridge.rdp_curve(step, orders)[finite])
        group = dp_sgd.replace_one_rdp(step, orders)
        assert np.all(dp_sgd.poisson_step_rdp(z, q, orders) <= group)
        assert np.all(np.isinf(pair[~finite]))      # beyond a mu = 60: not computed


def test_the_rdp_account_is_above_the_pld_and_far_below_the_group_of_two_alone():
    q = 16 / 1953
    pld = dp_sgd.epsilon(0.65, "poisson", q, 400, 1e-5)
    rdp = dp_sgd.epsilon(0.65, "poisson", q, 400, 1e-5, "rdp")
    step = dp_sgd.step_event(0.65, q)
    group = bridge.rdp_epsilon_of_curve(lambda o: 400 * dp_sgd.replace_one_rdp(step, o), 1e-5)
    assert pld == pytest.approx(4.0319, rel=1e-3)
    assert pld < rdp == pytest.approx(4.9074, rel=1e-4)
    assert group == pytest.approx(13.247, rel=1e-4)


def test_bad_input_names_its_parameter():
    with pytest.raises(DPNetError, match="orders"):
        poisson_replace_one.rdp_curve(1.0, 0.1, [1.0])
    with pytest.raises(DPNetError, match="rate"):
        poisson_replace_one.rdp_curve(1.0, 0.0, [2.0])
