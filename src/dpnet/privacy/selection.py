"""The privacy cost of tuning: Papernot & Steinke's private selection (ICLR 2022).

A search runs a randomized trial ``Q`` (a configuration drawn uniformly from a fixed grid, then
one private training run with it) ``K`` times, ``K`` drawn from the truncated negative binomial
``D_{eta,gamma}``, and publishes only the best trial by a score read on data outside the private
sets. If ``Q`` is ``(lambda, eps(lambda))``-RDP at every order, the search is
``(lambda, eps'(lambda))``-RDP with (Papernot & Steinke 2022, Theorem 2)

    eps'(lambda) = eps(lambda) + (1 + eta) (1 - 1/lambda^) eps(lambda^)
                   + (1 + eta) log(1/gamma) / lambda^ + log E[K] / (lambda - 1)

for every ``lambda^ >= 1`` (here: the best of the given orders). A trial drawn from a grid is a
mixture of the configurations' runs with data-independent weights, so its Renyi divergence is at
most the largest of theirs (joint quasi-convexity): ``eps`` is the pointwise maximum over the
grid. With pure epsilon-DP trials the limit of the theorem gives ``(2 + eta) eps`` (pure).

``K`` must stay secret: the guarantee covers the published best, not the number of trials nor
the other trials' results (conditioning on ``K`` gives a fixed-count search, which can cost as
much as composing every trial).

* :class:`TruncatedNegativeBinomial` -- ``D_{eta,gamma}``: its law, mean and a sampler;
* :func:`with_mean` -- the distribution of a given ``eta`` and mean;
* :func:`selection_rdp` -- ``eps'`` at each order;
* :func:`pure_selection_epsilon` -- the pure-DP limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import require

#: the eta values a search may use (eta < 0 gives a heavy-tailed K: a rare search of thousands
#: of trials; eta = 1 is the geometric law of Liu & Talwar 2019)
ETAS = (0.0, 0.5, 1.0)
#: no draw of K beyond this (a law whose mass there is below 1e-12 is never truncated in effect)
MAX_TRIALS = 100_000


@dataclass(frozen=True)
class TruncatedNegativeBinomial:
    """``P[K = k] = (1-gamma)^k / (gamma^-eta - 1) prod_{l<k} (l + eta)/(l + 1)``, k >= 1
    (eta = 0: the logarithmic law ``(1-gamma)^k / (k log(1/gamma))``)."""

    eta: float
    gamma: float

    def __post_init__(self) -> None:
        require(self.eta > -1, "eta", self.eta, "eta > -1")
        require(0 < self.gamma < 1, "gamma", self.gamma, "0 < gamma < 1")

    @property
    def mean(self) -> float:
        """The expected number of trials ``E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta))`` (eta = 0:
        ``(1/gamma - 1) / log(1/gamma)``)."""
        e, g = self.eta, self.gamma
        if e == 0:
            return (1 / g - 1) / math.log(1 / g)
        return e * (1 - g) / (g * (1 - g ** e))

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """``P[K = k]`` at each k >= 1."""
        k = np.asarray(k, dtype=float)
        e, g = self.eta, self.gamma
        if e == 0:
            return np.exp(k * math.log1p(-g) - np.log(k) - math.log(math.log(1 / g)))
        from scipy.special import gammaln
        # prod_{l<k} (l+eta)/(l+1) = Gamma(k+eta) / (Gamma(eta) Gamma(k+1)); for -1 < eta < 0
        # Gamma(eta) = Gamma(eta+1)/eta < 0, and gamma^-eta - 1 < 0 too: the ratio of moduli
        log_prod = gammaln(k + e) - gammaln(k + 1) + (
            -gammaln(e) if e > 0 else math.log(-e) - gammaln(e + 1))
        return np.exp(k * math.log1p(-g) + log_prod - math.log(abs(g ** -e - 1)))

    def sample(self, generator: np.random.Generator) -> int:
        """One draw of K by inverting the distribution function."""
        u = generator.random()
        k, p, cdf = 1, float(self.pmf(np.array([1.0]))[0]), 0.0
        while k <= MAX_TRIALS:
            cdf += p
            if u < cdf:
                return k
            p *= (1 - self.gamma) * (k + self.eta) / (k + 1)
            k += 1
        return MAX_TRIALS


def with_mean(eta: float, mean: float) -> TruncatedNegativeBinomial:
    """``D_{eta,gamma}`` with ``E[K] = mean`` (gamma solved for; the mean falls as gamma rises)."""
    from scipy.optimize import brentq

    require(mean > 1, "mean", mean, "an expected number of trials > 1")
    gamma = brentq(lambda g: math.log(TruncatedNegativeBinomial(eta, g).mean) - math.log(mean),
                   1e-15, 1 - 1e-12, xtol=1e-15, rtol=1e-13)
    return TruncatedNegativeBinomial(eta, gamma)


def selection_rdp(orders, trial_rdp, law: TruncatedNegativeBinomial) -> np.ndarray:
    """The search's RDP at ``orders`` (each > 1) from the trial's RDP at the same orders
    (module docstring; ``lambda^`` ranges over the orders)."""
    a = np.asarray(orders, dtype=float)
    r = np.asarray(trial_rdp, dtype=float)
    require(bool(np.all(a > 1)), "orders", a.min(), "Renyi orders > 1")
    require(a.shape == r.shape, "trial_rdp", r.shape, f"one value per order {a.shape}")
    c = 1 + law.eta
    with np.errstate(invalid="ignore"):
        hat = np.min(c * (1 - 1 / a) * r + c * math.log(1 / law.gamma) / a)
    return r + hat + math.log(law.mean) / (a - 1)


def pure_selection_epsilon(trial_epsilon: float, law: TruncatedNegativeBinomial) -> float:
    """Pure epsilon of the search whose trial is ``trial_epsilon``-DP: ``(2 + eta) eps``."""
    return (2 + law.eta) * float(trial_epsilon)
