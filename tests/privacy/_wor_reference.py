"""An independent computation of the replace-one account of a Gaussian step on a batch drawn
without replacement: the symmetrised pair of Dong, Roth & Su's subsampling theorem, built here
from a fine grid in the *output* x (not from the inverse of the privacy loss, as the library
does) and composed by plain convolution, rounded up and rounded down: a bracket of the truth.

Pair per step (mu = 1/z at the replace-one sensitivity): R = (1-g) N(0,1) + g N(mu,1) against
P = N(0,1); the symmetrised privacy loss law keeps R's law of L = log dR/dP on L > 0, mirrors
P's law of L on L > 0 to -L, and puts the rest at 0."""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.stats import norm


def step_losses(mu: float, g: float, dx: float = 2e-4) -> tuple[np.ndarray, np.ndarray]:
    """(losses, masses) of the symmetrised pair, one point per output cell."""
    x = np.arange(mu / 2 - 1e-12, mu + 12.0, dx) + dx / 2       # L > 0 exactly where x > mu/2
    cdf = norm.cdf(np.concatenate([x - dx / 2, [x[-1] + dx / 2]]))
    cdf_mu = norm.cdf(np.concatenate([x - dx / 2 - mu, [x[-1] + dx / 2 - mu]]))
    p_mass = np.diff(cdf)
    r_mass = (1 - g) * p_mass + g * np.diff(cdf_mu)
    loss = np.log1p(g * np.expm1(mu * x - mu * mu / 2))
    zero = 1.0 - r_mass.sum() - p_mass.sum()
    return (np.concatenate([loss, -loss, [0.0]]),
            np.concatenate([r_mass, p_mass, [max(zero, 0.0)]]))


def _grid(losses, masses, h, up: bool):
    idx = np.ceil(losses / h) if up else np.floor(losses / h)
    idx = idx.astype(np.int64)
    lo = idx.min()
    pmf = np.bincount(idx - lo, weights=masses)
    return lo, pmf


def epsilon(mu: float, g: float, steps: int, delta: float, h: float = 2e-3,
            up: bool = True) -> float:
    """Epsilon at delta of ``steps`` compositions: rounded up (``up``, an upper bound up to the
    cell integration) or down (a lower bound)."""
    lo, pmf = _grid(*step_losses(mu, g), h, up)
    total, start = np.array([1.0]), 0
    for _ in range(steps):
        total, start = np.convolve(total, pmf), start + lo
        keep = total > 1e-30
        first = int(np.argmax(keep))
        total, start = total[first:len(total) - int(np.argmax(keep[::-1]))], start + first
    losses = h * (start + np.arange(len(total)))

    def excess(eps):
        return np.sum(total * np.clip(1 - np.exp(eps - losses), 0, None)) - delta

    if excess(0.0) <= 0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, losses.max()))
