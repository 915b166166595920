"""epsilon accounting of baseline [36] of paper 003: Wang & Basar (2023), quantization-enabled
privacy in decentralized stochastic optimization (stochastic ternary quantization).

Mechanism (:class:`~dpnet.algorithms.wang_basar_ternary.TernaryDP`, [RECONSTRUCTED]: [36]'s
quantizer and theorem were not available offline): each coordinate of the shared state, clamped
to ``[-a, a]``, is sent as ``+b`` with probability ``(b + x)/(4b)``, ``-b`` with probability
``(b - x)/(4b)`` and ``0`` with probability 1/2 (b > a); the receiver decodes twice the symbol
(unbiased). For two inputs ``|x - x'| <= Delta`` the probability ratio of every symbol is at most
``1 + Delta/(b - a)``, so one release of a d-vector is ``sum_j ln(1 + Delta_j/(b - a)) <=
||Delta||_1/(b - a)``-DP (pure) [DERIVED].

The state sensitivity follows Appendix F's argument for DSGD (messages fixed by the
observation): :func:`dpnet.privacy.chen_wang_zhang.dsgd_state_sensitivity`. [36] gives
per-iteration budgets only; they are composed by basic composition (delta = 0).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import require


def release_epsilon(delta_l1: np.ndarray, a: float, b: float) -> np.ndarray:
    """Per-release epsilon ``Delta_1/(b - a)`` (the log-ratio bound summed over coordinates)."""
    require(b > a > 0, "(a, b)", (a, b), "b > a > 0 (quantizer range beyond the clamp)")
    return np.asarray(delta_l1, dtype=np.float64) / (b - a)


def per_release_exact(delta_per_coord: float, d: int, a: float, b: float) -> float:
    """``d ln(1 + Delta/(b - a))`` when every coordinate may move by Delta (the exact ratio)."""
    return d * math.log1p(delta_per_coord / (b - a))
