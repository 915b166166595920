"""Auditing estimators as small pure functions of counts and score arrays (as jax_privacy's
``auditing`` module): when each is valid is explained in ``docs/auditing.md``.

* :func:`epsilon_bound`: a **lower bound** with confidence ``1 - alpha`` from one event's hit
  counts in the two worlds (one-sided Clopper-Pearson bounds at ``alpha/2`` each; Kairouz et al.
  2015, Jagielski et al. 2020). Valid for any mechanism; needs many runs per world (at 95 % the
  largest certifiable epsilon is about 4.9 with 500 runs per world, 7.9 with 10,000).
* :func:`gdp_fit_epsilon`: an **estimate**, not a bound: the two worlds' scores are fitted by two
  Gaussians of a common spread, ``mu = |mean_A - mean_B| / sd``, and mu-GDP (Dong, Roth & Su
  2022) is converted to epsilon at delta (:func:`gdp_epsilon`). Near-tight from few runs where
  the scores are Gaussian (a Gaussian mechanism's log-likelihood ratio, Nasr et al. 2023); it can
  over- or under-state the truth where they are not.
* :func:`one_run_epsilon`: a **lower bound** from one run with m canaries, each included with
  probability 1/2 (Steinke, Nasr & Jagielski 2023, Theorem 3.1 and its delta term): the
  auditor guesses ``n_guess`` of them and ``n_correct`` guesses are right; an (epsilon, delta)
  mechanism makes more than that unlikely. :func:`one_run_from_scores` reads independent runs
  as one run with m canaries.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import require


def clopper_pearson(k, n, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds at level ``alpha`` each: ``P(p < lower) <= alpha`` and
    ``P(p > upper) <= alpha`` for ``k`` successes in ``n`` trials (vectorised)."""
    from scipy.special import betaincinv  # at first use: `dpnet --help` does not pay for it

    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, betaincinv(np.maximum(k, 1), n - k + 1, alpha), 0.0)
        upper = np.where(k < n, betaincinv(k + 1, np.maximum(n - k, 1), 1.0 - alpha), 1.0)
    return lower, upper


def epsilon_bound(hits_a, n_a, hits_b, n_b, alpha: float, delta: float = 0.0) -> np.ndarray:
    """``log((p_A_lower - delta) / p_B_upper)`` (0 when not positive) with one-sided CP bounds at
    ``alpha/2`` each, so the bound holds with probability ``>= 1 - alpha``."""
    lo, _ = clopper_pearson(hits_a, n_a, alpha / 2)
    _, up = clopper_pearson(hits_b, n_b, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.maximum(lo - delta, 0.0) / up)
    return np.where(np.isfinite(eps) & (eps > 0), eps, 0.0)


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP: ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, in the log
    domain (Dong, Roth & Su 2022, Corollary 2.13)."""
    from scipy.stats import norm

    a = norm.logcdf(-epsilon / mu + mu / 2)
    b = epsilon + norm.logcdf(-epsilon / mu - mu / 2)
    return math.exp(a) * -math.expm1(b - a) if b < a else 0.0


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta`` (0 when even epsilon 0 meets delta)."""
    from scipy.optimize import brentq

    require(mu >= 0 and math.isfinite(mu), "mu", mu, "0 <= mu < inf")
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    if mu == 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(mu, hi) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-10))


def gdp_fit_epsilon(scores_a, scores_b, delta: float) -> dict[str, float]:
    """An estimate (not a bound) of epsilon at ``delta`` from the two worlds' score arrays, by a
    Gaussian-DP fit: ``mu = |mean_a - mean_b| / sqrt((var_a + var_b) / 2)``."""
    a, b = np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)
    require(a.size >= 2 and b.size >= 2, "scores", (a.size, b.size), "at least 2 per world")
    sd = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    require(sd > 0, "scores", "constant", "scores that vary within a world")
    mu = abs(a.mean() - b.mean()) / sd
    return {"mu": mu, "epsilon": gdp_epsilon(mu, delta)}


def one_run_p_value(m: int, n_guess: int, n_correct: int, epsilon: float,
                    delta: float = 0.0) -> float:
    """P-value of ``n_correct`` right guesses among ``n_guess`` under an (epsilon, delta) claim
    with m canaries (Steinke et al. 2023, Theorem 3.1 / Proposition 5.7 for delta): the
    Binomial(n_guess, e^eps / (1 + e^eps)) tail, plus the delta term."""
    from scipy.stats import binom

    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(binom.sf(n_correct - 1, n_guess, q))
    if delta == 0 or n_correct == 0:
        return beta
    i = np.arange(1, n_correct + 1)
    alpha = float(np.max((binom.sf(n_correct - i - 1, n_guess, q) - beta) / i, initial=0.0))
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_epsilon(m: int, n_guess: int, n_correct: int, significance: float = 0.05,
                    delta: float = 0.0) -> float:
    """The largest epsilon whose (epsilon, delta) claim the guesses reject at ``significance``
    (0 where none is): a lower bound from one run with m canaries."""
    from scipy.optimize import brentq

    require(0 <= n_correct <= n_guess <= m, "n_correct", (n_correct, n_guess, m),
            "0 <= n_correct <= n_guess <= m")
    require(0 < significance < 1, "significance", significance, "0 < significance < 1")

    def rejects(e: float) -> float:
        return significance - one_run_p_value(m, n_guess, n_correct, e, delta)

    if n_guess == 0 or rejects(0.0) <= 0:
        return 0.0
    hi = 1.0
    while rejects(hi) > 0:
        hi *= 2
        if hi > 1e3:
            return math.inf
    return float(brentq(rejects, 0.0, hi, xtol=1e-10))


#: guesses per side the one-run audit may make, as fractions of its canaries (chosen on half)
ONE_RUN_FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def one_run_from_scores(score_in: np.ndarray, score_out: np.ndarray, delta: float = 0.0,
                        significance: float = 0.05, seed: int = 0) -> dict[str, float]:
    """:func:`one_run_epsilon` on independent runs, read as one run with m canaries: canary i
    is included (its score from ``score_in[i]``) or not (``score_out[i]``) by an independent fair
    coin, so the inclusions are i.i.d. Bernoulli(1/2) as the theorem requires. The auditor
    guesses "in" for the k highest scores and "out" for the k lowest; k (a fraction of
    :data:`ONE_RUN_FRACTIONS`) is chosen on the first half of the canaries and the bound is
    computed on the second half. Returns ``epsilon``, ``m``, ``n_guess``, ``n_correct``."""
    score_in, score_out = np.asarray(score_in, float), np.asarray(score_out, float)
    require(score_in.shape == score_out.shape and score_in.ndim == 1, "scores",
            (score_in.shape, score_out.shape), "two equal 1-d arrays (one score per canary)")
    included = np.random.default_rng(seed).random(score_in.size) < 0.5
    score = np.where(included, score_in, score_out)
    half = score.size // 2

    def guesses(s, inc, frac):
        k = max(1, int(frac * s.size))
        order = np.argsort(s, kind="stable")
        right = int(inc[order[-k:]].sum() + (~inc[order[:k]]).sum())
        return s.size, 2 * k, right

    def bound(s, inc, frac):
        return one_run_epsilon(*guesses(s, inc, frac), significance, delta)

    best = max(ONE_RUN_FRACTIONS, key=lambda f: bound(score[:half], included[:half], f))
    m, n_guess, n_correct = guesses(score[half:], included[half:], best)
    return {"epsilon": one_run_epsilon(m, n_guess, n_correct, significance, delta), "m": m,
            "n_guess": n_guess, "n_correct": n_correct}
