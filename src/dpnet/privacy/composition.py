"""Generic composition and calibration helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from ..errors import require
from .calibration import calibrate as _calibrate


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


def calibrate(epsilon_of: Callable[[float], float], target: float, lo: float | None = None,
              hi: float = 1.0, rel_tol: float = 1e-10) -> float:
    """Smallest ``t`` with ``epsilon_of(t) <= target`` for a non-increasing ``epsilon_of``: the
    one calibration of :mod:`dpnet.privacy.calibration` started at ``hi`` (``lo`` is accepted
    for the callers that bracket themselves; the bracket is found again either way)."""
    return _calibrate(epsilon_of, target, start=hi, rel_tol=rel_tol)
