"""The auditing estimators against independent computations: mu-GDP's epsilon against
dp-accounting's Gaussian mechanism, the GDP fit on Gaussian scores of known separation, and the
one-run bound against its closed form when every guess is right."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpnet.errors import ParameterError
from dpnet.lab.audit import estimators as E


@pytest.mark.parametrize("mu, delta", [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-3), (4.0, 1e-6)])
def test_gdp_epsilon_is_the_gaussian_mechanisms(mu, delta):
    import dp_accounting

    # mu-GDP is the Gaussian mechanism with sensitivity 1 and noise sigma = 1/mu
    want = dp_accounting.get_epsilon_gaussian(1.0 / mu, delta)
    assert E.gdp_epsilon(mu, delta) == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert E.gdp_delta(mu, E.gdp_epsilon(mu, delta)) == pytest.approx(delta, rel=1e-6)


def test_the_gdp_fit_recovers_a_known_separation_and_is_an_estimate():
    rng = np.random.default_rng(0)
    mu = 1.5
    a, b = rng.normal(mu, 2.0, 20000), rng.normal(0.0, 2.0, 20000)
    fit = E.gdp_fit_epsilon(a * 2.0, b * 2.0, 1e-5)        # scale-free
    assert fit["mu"] == pytest.approx(mu / 2.0, rel=0.03)
    assert fit["epsilon"] == pytest.approx(E.gdp_epsilon(mu / 2.0, 1e-5), rel=0.05)
    assert E.gdp_fit_epsilon(b, b + 0.0, 1e-5)["epsilon"] == 0.0
    with pytest.raises(ParameterError, match="scores"):
        E.gdp_fit_epsilon([1.0], [2.0, 3.0], 1e-5)


def test_one_run_bound_all_guesses_right_is_the_closed_form():
    # delta = 0, every one of n guesses right: p = q^n with q = e^eps/(1+e^eps), so the bound at
    # significance s is logit(s^(1/n))
    for n, s in ((100, 0.05), (20, 0.05), (500, 0.01)):
        q = s ** (1.0 / n)
        assert E.one_run_epsilon(1000, n, n, s) == pytest.approx(math.log(q / (1 - q)), rel=1e-6)


def test_one_run_bound_is_monotone_and_delta_costs():
    base = E.one_run_epsilon(1000, 200, 170, 0.05)
    assert 0 < base < E.one_run_epsilon(1000, 200, 190, 0.05)
    assert E.one_run_epsilon(1000, 200, 170, 0.05, delta=1e-5) < base
    assert E.one_run_epsilon(1000, 200, 100, 0.05) == 0.0      # chance: nothing rejected
    with pytest.raises(ParameterError, match="n_correct"):
        E.one_run_epsilon(10, 20, 5)


def test_one_run_from_scores_separable_scores_reach_the_closed_form_and_noise_gives_nothing():
    """Perfectly separated scores: every guess right, so the bound is the closed form for the
    chosen number of guesses on the held-out half; identical distributions: no evidence."""
    rng = np.random.default_rng(0)
    r = E.one_run_from_scores(np.full(4000, 1.0) + rng.random(4000) * 1e-3,
                              np.zeros(4000) + rng.random(4000) * 1e-3, significance=0.05)
    assert r["n_correct"] == r["n_guess"] and r["m"] == 2000
    q = 0.05 ** (1 / r["n_guess"])
    assert r["epsilon"] == pytest.approx(math.log(q / (1 - q)), rel=1e-6)
    same = E.one_run_from_scores(rng.normal(size=4000), rng.normal(size=4000))
    assert same["epsilon"] < 0.2


def test_one_run_from_scores_agrees_with_the_gaussian_truth_from_below():
    """Gaussian scores at separation mu (a mu-GDP mechanism): the one-run bound at delta = 0
    stays below the mechanism's pure-epsilon-free truth at small delta and grows with mu."""
    rng = np.random.default_rng(1)
    bounds = [E.one_run_from_scores(rng.normal(mu, 1, 20000), rng.normal(0, 1, 20000),
                                    delta=1e-5)["epsilon"] for mu in (0.5, 1.0, 2.0)]
    assert bounds[0] < bounds[1] < bounds[2]
    assert all(b < E.gdp_epsilon(mu, 1e-5) for b, mu in zip(bounds, (0.5, 1.0, 2.0)))
