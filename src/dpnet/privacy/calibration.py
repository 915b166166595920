"""One calibration for any scalar: bracket, root-find, re-check; never overshoots.

``calibrate(epsilon_of, target)`` returns the smallest ``t`` whose ``epsilon_of(t) <= target`` for
an epsilon that falls as t grows (a noise scale, a common factor of several scales), or with
``increasing=True`` the largest t whose epsilon stays within the target (a horizon, a step size).
It brackets the crossing geometrically, finds it with Brent's method on ``log t``, and returns the
best *evaluated* feasible point: the answer is never a value whose epsilon was not computed and
found within the target (the property Opacus and jax_privacy test their calibrations for).
``integer=True`` searches integers (a horizon).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import ParameterError, require

_BIG = 1e300


def calibrate(epsilon_of: Callable[[float], float], target: float, start: float = 1.0,
              increasing: bool = False, rel_tol: float = 1e-10, integer: bool = False,
              lower: float = 0.0, upper: float = math.inf) -> float:
    """See the module docstring. ``start``: a first guess (> 0); ``lower``/``upper``: the
    domain of t (exclusive/inclusive bounds the search never leaves)."""
    require(target > 0 and math.isfinite(target), "target", target, "0 < target < inf")
    require(start > 0 and math.isfinite(start), "start", start, "0 < start < inf")
    seen: dict[float, float] = {}

    def eps(t: float) -> float:
        if t not in seen:
            value = float(epsilon_of(int(t) if integer else t))
            seen[t] = math.inf if math.isnan(value) else value
        return seen[t]

    def ok(t: float) -> bool:
        return eps(t) <= target

    grow, shrink = (lambda t: t * 2.0), (lambda t: t / 2.0)
    if increasing:  # feasible below, infeasible above: search for the last feasible t
        grow, shrink = shrink, grow
    # bracket: a feasible point f and an infeasible point g next to each other (factor 2)
    t = min(max(start, lower * 2 if lower > 0 else start), upper)
    f = g = None
    for _ in range(2100):
        t = float(math.floor(t) if integer and increasing else math.ceil(t) if integer else t)
        if t <= lower or t > upper or not (1e-300 < t < _BIG):
            break
        if ok(t):
            f = t
            if g is not None:
                break
            t = shrink(t)
        else:
            g = t
            if f is not None:
                break
            t = grow(t)
    if f is None:
        raise ParameterError("target", target, "reachable within the search range",
                             f"epsilon stays above the target for every value tried "
                             f"(smallest epsilon seen {min(seen.values()):.6g})")
    if g is None:
        return f   # feasible down to the domain's end
    if integer:  # keep f feasible and g infeasible while they are more than 1 apart
        while abs(f - g) > 1:
            mid = float(math.floor((f + g) / 2))
            f, g = (mid, g) if ok(mid) else (f, mid)
        return f
    from scipy.optimize import brentq  # ~0.4 s to import: only when a calibration solves

    try:
        brentq(lambda s: math.log(max(eps(math.exp(s)), 1e-300)) - math.log(target),
               math.log(min(f, g)), math.log(max(f, g)), xtol=rel_tol / 4, rtol=rel_tol / 4,
               maxiter=200)
    except ValueError:  # a flat or discontinuous epsilon: bisection on the bracket
        a, b = f, g
        for _ in range(200):
            if abs(a - b) <= rel_tol * max(a, b):
                break
            mid = math.sqrt(a * b)
            a, b = (mid, b) if ok(mid) else (a, mid)
    # re-check: the root itself may sit a rounding on the wrong side, so walk from the nearest
    # infeasible point toward the nearest feasible one with growing steps until they are within
    # rel_tol; only evaluated feasible points are ever returned
    inside = [s for s in seen if lower < s <= upper]
    good = [s for s in inside if seen[s] <= target]
    bad = [s for s in inside if seen[s] > target]
    f = max(good) if increasing else min(good)
    g = (min(s for s in bad if s > f) if increasing else max(s for s in bad if s < f))
    step = rel_tol / 8
    while abs(math.log(f) - math.log(g)) > rel_tol:
        x = math.exp(math.log(g) + math.copysign(min(step, abs(math.log(f / g)) / 2),
                                                 math.log(f / g)))
        f, g = (x, g) if ok(x) else (f, x)
        step *= 4
    return f
