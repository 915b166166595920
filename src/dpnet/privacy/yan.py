"""(epsilon, delta) accounting of baseline [37] of paper 003: Yan, Li, Wu & Song (2024),
"Killing two birds with one stone: quantization achieves privacy in distributed learning":
stochastic uniform quantization of the gradient to k levels plus binomial noise.

Per iteration and party: the gradient (coordinates clipped to ``[-X, X]``) is quantized to level
indices ``U in {0..k-1}`` with unbiased stochastic rounding (step ``s = 2X/(k-1)``) and
``Z ~ Bin(N, p)`` is added to each index; the receiver decodes ``-X + s (U + Z - N p)``.

* Sensitivity of the integer vector U under paper 003's adjacency (``||Delta g||_2 <= C/m`` for an
  m-sample average), coupling the rounding draws of the two runs: every coordinate moves by at
  most ``C/(m s) + 1`` levels, so ``Delta_inf = C/(m s) + 1``, ``Delta_2 = C/(m s) + sqrt(d)``,
  ``Delta_1 = sqrt(d) C/(m s) + d`` [DERIVED]. When C bounds the l1 norm instead (``norm="l1"``,
  the assumption ``l1_gradient_bound``), ``Delta_1 = C/(m s) + d`` and the other two are as above
  (both norms dominate the l_inf and l2 ones).
* One iteration: the binomial mechanism bound of Agarwal, Suresh, Yu, Kumar & McMahan (2018,
  cpSGD, Theorem 1) with scale 1 (integer units), valid when ``N p (1-p) >= max(23 log(10 d /
  delta), 2 Delta_inf)`` (otherwise no guarantee: ``inf``) [EXTERNAL, recalled, not checked
  against the text].
* T iterations: [37] states per-iteration budgets only; they are composed here by the advanced
  composition theorem (Dwork, Rothblum & Vadhan 2010) with slack ``delta'``, or basic composition
  when that is smaller: ``eps = min(T e0, sqrt(2 T ln(1/delta')) e0 + T e0 (e^e0 - 1))``,
  ``delta = T delta0 + delta'``.

Gap: [37]'s own privacy theorem and its constants were not available offline; the mechanism
above is the one its abstract describes (binomial noise added to uniformly quantized gradients).
"""

from __future__ import annotations

import math

from ..errors import positive, positive_int, require


def binomial_constants(p: float) -> tuple[float, float, float]:
    """``(b_p, c_p, d_p)`` of cpSGD's Theorem 1."""
    q = 1.0 - p
    b = 2.0 / 3.0 * (p**2 + q**2) + (1.0 - 2.0 * p)
    c = math.sqrt(2.0) * (3 * p**3 + 3 * q**3 + 2 * p**2 + 2 * q**2)
    d = 4.0 / 3.0 * (p**2 + q**2)
    return b, c, d


def sensitivities(C: float, m: int, s: float, d: int,
                  norm: str = "l2") -> tuple[float, float, float]:
    """``(Delta_inf, Delta_1, Delta_2)`` of the level indices (see the module docstring); C
    bounds the ``norm`` ("l2" or "l1") of one sampled gradient's change."""
    positive("C", C)
    positive("s", s)
    require(norm in ("l2", "l1"), "norm", norm, "'l2' or 'l1' (the norm C bounds)")
    m, d = positive_int("m", m), positive_int("d", d)
    r = C / (m * s)
    return r + 1.0, (math.sqrt(d) * r if norm == "l2" else r) + d, r + math.sqrt(d)


def binomial_epsilon(delta: float, N: int, p: float, d: int, D_inf: float, D1: float,
                     D2: float, s: float = 1.0) -> float:
    """cpSGD Theorem 1: epsilon of ``f(D) + s (Bin(N, p) - N p)`` for one release; ``inf`` when its
    variance condition fails."""
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    require(0 < p < 1, "p", p, "0 < p < 1")
    N = positive_int("N", N)
    var = N * p * (1 - p)
    if var < max(23.0 * math.log(10.0 * d / delta), 2.0 * D_inf / s):
        return math.inf
    b, c, dp = binomial_constants(p)
    sd = math.sqrt(var)
    return (D2 * math.sqrt(2.0 * math.log(1.25 / delta)) / (s * sd)
            + (D2 * c * math.sqrt(math.log(10.0 / delta)) + D1 * b) / (s * var * (1 - delta / 10))
            + (2.0 / 3.0 * D_inf * math.log(1.25 / delta)
               + D_inf * dp * math.log(20.0 * d / delta) * math.log(10.0 / delta)) / (s * var))


def min_trials(p: float, d: int, delta: float, D_inf: float) -> int:
    """Smallest N meeting Theorem 1's variance condition."""
    need = max(23.0 * math.log(10.0 * d / delta), 2.0 * D_inf)
    return math.ceil(need / (p * (1 - p)))


def compose(eps0: float, delta0: float, T: int, delta_prime: float) -> tuple[float, float]:
    """T-fold composition of an (eps0, delta0) mechanism: the smaller of basic and advanced."""
    T = positive_int("T", T)
    require(0 < delta_prime < 1, "delta_prime", delta_prime, "0 < delta' < 1")
    if math.isinf(eps0):
        return math.inf, min(1.0, T * delta0 + delta_prime)
    adv = math.sqrt(2.0 * T * math.log(1.0 / delta_prime)) * eps0 + T * eps0 * math.expm1(eps0)
    if T * eps0 <= adv:
        return T * eps0, min(1.0, T * delta0)
    return adv, min(1.0, T * delta0 + delta_prime)
