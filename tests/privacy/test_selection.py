"""Papernot & Steinke's private selection: the law of K, its mean, the charge by hand."""

import math

import numpy as np
import pytest

from dpnet.errors import DPNetError
from dpnet.privacy import dp_accounting_bridge as bridge
from dpnet.privacy import selection
from dpnet.privacy.selection import TruncatedNegativeBinomial


@pytest.mark.parametrize("eta", [-0.5, 0.0, 0.5, 1.0, 3.0])
def test_the_law_sums_to_one_and_has_its_stated_mean(eta):
    law = TruncatedNegativeBinomial(eta, 0.05)
    k = np.arange(1, 20001)
    p = law.pmf(k)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    assert (k * p).sum() == pytest.approx(law.mean, rel=1e-9)


def test_eta_one_is_geometric_and_eta_zero_logarithmic():
    k = np.arange(1, 50)
    g = 0.2
    assert np.allclose(TruncatedNegativeBinomial(1.0, g).pmf(k), g * (1 - g) ** (k - 1))
    assert np.allclose(TruncatedNegativeBinomial(0.0, g).pmf(k),
                       (1 - g) ** k / (k * math.log(1 / g)))
    assert TruncatedNegativeBinomial(1.0, g).mean == pytest.approx(1 / g)


@pytest.mark.parametrize("eta", selection.ETAS)
def test_with_mean_solves_for_gamma_and_the_sampler_draws_from_the_law(eta):
    law = selection.with_mean(eta, 8.0)
    assert law.mean == pytest.approx(8.0, rel=1e-9)
    rng = np.random.default_rng(1)
    draws = np.array([law.sample(rng) for _ in range(20000)])
    assert draws.min() >= 1
    # the sample mean within 5 standard errors of 8
    sd = math.sqrt(float((np.arange(1, 5001) ** 2 * law.pmf(np.arange(1, 5001))).sum()) - 64)
    assert abs(draws.mean() - 8.0) < 5 * sd / math.sqrt(draws.size)
    # P[K = 1] as the law says (binomial standard error)
    p1 = float(law.pmf(np.array([1]))[0])
    assert abs(np.mean(draws == 1) - p1) < 5 * math.sqrt(p1 * (1 - p1) / draws.size)


def test_the_selection_rdp_is_theorem_2_by_hand():
    # a Gaussian trial of rho-zCDP: eps(a) = a rho
    rho, orders = 0.02, np.arange(2, 65, dtype=float)
    law = selection.with_mean(1.0, 8.0)           # geometric, gamma = 1/8
    got = selection.selection_rdp(orders, rho * orders, law)
    hat = min(2 * (1 - 1 / b) * b * rho + 2 * math.log(8) / b for b in orders)
    for a, g in zip(orders, got):
        assert g == pytest.approx(a * rho + hat + math.log(8) / (a - 1), rel=1e-12)
    # the charge exceeds one run's at every order, and K = 1 always (gamma -> 1) costs no more
    # than the trial's own divergence plus the lambda^ term
    assert np.all(got > rho * orders)


def test_pure_trials_cost_two_plus_eta_times_epsilon():
    assert selection.pure_selection_epsilon(0.5, selection.with_mean(0.0, 8)) == 1.0
    assert selection.pure_selection_epsilon(0.5, selection.with_mean(1.0, 8)) == 1.5


def test_a_search_of_mean_eight_costs_more_than_one_run_and_less_than_releasing_eight():
    # a Gaussian run calibrated to epsilon 1 at delta 1e-5 (rho found by bisection), searched
    # with E[K] = 8: 1.72, against 3.15 for the eight runs composed
    orders = np.arange(2, 257, dtype=float)
    lo, hi = 1e-4, 1.0
    for _ in range(60):
        rho = (lo + hi) / 2
        lo, hi = (rho, hi) if bridge.epsilon_of_rdp(orders, rho * orders, 1e-5) < 1 else (lo, rho)
    best = min(bridge.epsilon_of_rdp(orders, selection.selection_rdp(
        orders, lo * orders, selection.with_mean(eta, 8.0)), 1e-5) for eta in selection.ETAS)
    eight = bridge.epsilon_of_rdp(orders, 8 * lo * orders, 1e-5)
    assert 1.0 < best == pytest.approx(1.7239, rel=1e-3)
    assert eight == pytest.approx(3.1513, rel=1e-3) and best < eight


def test_bad_parameters_name_themselves():
    with pytest.raises(DPNetError, match="eta"):
        TruncatedNegativeBinomial(-1.0, 0.5)
    with pytest.raises(DPNetError, match="gamma"):
        TruncatedNegativeBinomial(0.0, 1.0)
    with pytest.raises(DPNetError, match="mean"):
        selection.with_mean(0.0, 1.0)
    with pytest.raises(DPNetError, match="orders"):
        selection.selection_rdp([1.0, 2.0], [0.1, 0.2], selection.with_mean(0.0, 4))
