"""Pure epsilon-DP accounting of paper 000 (Xie et al.): PGTC, PPDC and DiaDSP.

Adjacency: two function sets differing only in agent ``i0``'s objective. Observations: every
transmitted message. Both finite-horizon theorems hold for any compressor (equal noisy states give
equal compressor inputs).

* Theorem 3 (PGTC; DiaDSP is PGTC with C = I, gamma = 1), Assumption 7 ``||grad f_i|| <= M``:
  ``eps = 4 sqrt(d) M (c/s_x + 1/s_y) sum_{k=0}^{K} q^{-k}``.
* Theorem 6 (PPDC): ``eps = 2 sqrt(d) M (c/s_x + 2/(omega s_v)) sum_{k=0}^{K} q^{-k}``.

``c = sqrt(eta)`` as printed. ``variant="derived"`` uses what the appendices' own steps give:
``||Delta xi_x||_1 <= 4 eta sqrt(d) M`` so ``c = eta`` for PGTC, and for PPDC
``4 sqrt(d) M (eta/s_x + 1/(omega s_v))`` (Appendix G's map B). The sum has K+1 terms (k = 0..K).

* Proposition 1 (PGTC) / 2 (PPDC), infinite horizon under Assumption 6 (the gradient difference of
  the two versions of ``f_{i0}`` is constant, bounded by the adjacency radius ``delta``):
  ``eps = tau q^2 delta / (q^2 - eta L - q eta L)`` with ``tau = eta/s_x + 1/s_y`` (PGTC) or
  ``tau = 1/s_x + 1/(eta s_v)`` (PPDC); requires ``eta < 1/(2L)`` and
  ``q in ((eta L + sqrt(eta^2 L^2 + 4 eta L))/2, 1)``.
"""

from __future__ import annotations

import math

from ..errors import ParameterError, require
from .composition import inverse_geometric_sum

VARIANTS = ("printed", "derived")


def _check_common(d: int, M: float, eta: float, q: float, K: int) -> None:
    require(d >= 1, "d", d, "d >= 1")
    require(M > 0 and math.isfinite(M), "gradient_bound", M, "0 < M < inf (Assumption 7)")
    require(eta > 0, "eta", eta, "eta > 0")
    require(0 < q < 1, "q", q, "0 < q < 1")
    require(isinstance(K, int) and K >= 0, "iterations", K, "an integer K >= 0")


def _inv(s: float) -> float:
    require(s >= 0, "noise scale", s, "scale >= 0")
    return math.inf if s == 0 else 1.0 / s


def pgtc_finite_horizon(d: int, M: float, eta: float, s_x: float, s_y: float, q: float, K: int,
                        variant: str = "printed") -> float:
    """Theorem 3 of paper 000 (see module docstring)."""
    _check_common(d, M, eta, q, K)
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    c = math.sqrt(eta) if variant == "printed" else eta
    per_step = 4.0 * math.sqrt(d) * M * (c * _inv(s_x) + _inv(s_y))
    return per_step * inverse_geometric_sum(q, 0, K)


def ppdc_finite_horizon(d: int, M: float, eta: float, omega: float, s_x: float, s_v: float,
                        q: float, K: int, variant: str = "printed") -> float:
    """Theorem 6 of paper 000 (see module docstring)."""
    _check_common(d, M, eta, q, K)
    require(omega > 0, "omega", omega, "omega > 0")
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    if variant == "printed":
        per_step = 2.0 * math.sqrt(d) * M * (math.sqrt(eta) * _inv(s_x) + 2.0 * _inv(s_v) / omega)
    else:
        per_step = 4.0 * math.sqrt(d) * M * (eta * _inv(s_x) + _inv(s_v) / omega)
    return per_step * inverse_geometric_sum(q, 0, K)


def proposition_q_min(eta: float, L: float) -> float:
    """Lower end of the q-interval of Propositions 1 and 2."""
    a = eta * L
    return (a + math.sqrt(a * a + 4 * a)) / 2


def _infinite(tau: float, eta: float, L: float, q: float, delta: float) -> float:
    require(delta > 0 and math.isfinite(delta), "adjacency", delta,
            "0 < delta < inf (bound on ||grad f_i0^(1) - grad f_i0^(2)||)")
    require(L > 0 and math.isfinite(L), "smoothness", L,
            "a finite Lipschitz constant L_f of the local gradients")
    require(eta < 1 / (2 * L), "eta", eta, f"eta < 1/(2 L_f) = {1 / (2 * L):.6g}")
    qmin = proposition_q_min(eta, L)
    if not qmin < q < 1:
        raise ParameterError("q", q, f"{qmin:.6g} < q < 1 ((eta L + sqrt(eta^2 L^2 + 4 eta L))/2 < q "
                             "< 1, Propositions 1-2 of paper 000)")
    return tau * q * q * delta / (q * q - eta * L - q * eta * L)


def pgtc_infinite_horizon(eta: float, L: float, s_x: float, s_y: float, q: float,
                          delta: float) -> float:
    """Proposition 1 of paper 000."""
    return _infinite(eta * _inv(s_x) + _inv(s_y), eta, L, q, delta)


def ppdc_infinite_horizon(eta: float, L: float, s_x: float, s_v: float, q: float,
                          delta: float) -> float:
    """Proposition 2 of paper 000."""
    return _infinite(_inv(s_x) + _inv(s_v) / eta, eta, L, q, delta)
