"""Generic composition and calibration helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from ..errors import ParameterError, require


def laplace_composition(sensitivities: Iterable[float], scales: Iterable[float]) -> float:
    """Basic composition of Laplace mechanisms: ``sum_k Delta_k / b_k`` (l1 sensitivities,
    Laplace scales); a zero scale with positive sensitivity gives ``inf``."""
    total = 0.0
    for delta, b in zip(sensitivities, scales, strict=True):
        require(delta >= 0, "sensitivity", delta, ">= 0")
        require(b >= 0, "scale", b, ">= 0")
        if delta == 0:
            continue
        total += math.inf if b == 0 else delta / b
    return total


def inverse_geometric_sum(q: float, first: int, last: int) -> float:
    """``sum_{k=first}^{last} q^{-k}`` for 0 < q <= 1, without forming huge intermediates when
    possible (returns ``inf`` on overflow)."""
    require(0 < q <= 1, "q", q, "0 < q <= 1")
    if last < first:
        return 0.0
    if q == 1.0:
        return float(last - first + 1)
    try:
        # q^{-first} * (q^{-(last-first+1)} - 1) / (q^{-1} - 1)
        count = last - first + 1
        return q ** (-first) * math.expm1(-count * math.log(q)) / math.expm1(-math.log(q))
    except OverflowError:
        return math.inf


def calibrate(epsilon_of: Callable[[float], float], target: float, lo: float = 1e-12,
              hi: float = 1.0, rel_tol: float = 1e-10, max_iter: int = 400) -> float:
    """Smallest ``t`` (to ``rel_tol``) with ``epsilon_of(t) <= target``, for an ``epsilon_of``
    that is non-increasing in t (a noise scale or a scale multiplier).

    The returned value is always feasible: ``epsilon_of(result) <= target`` (never overshoots)."""
    require(target > 0 and math.isfinite(target), "target", target, "0 < target < inf")
    while epsilon_of(hi) > target:
        hi *= 2.0
        if hi > 1e300:
            raise ParameterError("target", target, "reachable by some noise scale",
                                 "epsilon does not fall below the target as the noise grows")
    while lo > 0 and epsilon_of(lo) <= target:
        lo /= 2.0
        if lo < 1e-300:
            return lo
    for _ in range(max_iter):
        if hi - lo <= rel_tol * hi:
            break
        # sqrt(lo) * sqrt(hi): the product itself can overflow for huge scales
        mid = math.sqrt(lo) * math.sqrt(hi) if lo > 0 and hi / lo > 4 else 0.5 * (lo + hi)
        if epsilon_of(mid) <= target:
            hi = mid
        else:
            lo = mid
    assert epsilon_of(hi) <= target
    return hi
