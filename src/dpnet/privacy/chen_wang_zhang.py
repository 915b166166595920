"""Pure epsilon-DP accounting of paper 003 (Chen, Wang & Zhang): Lemmas 4 and 5, Theorems 3 and 4.

Adjacency (Definition 3): the datasets differ in one sample ``(i0, l0)`` of agent i0 and
``||g_i0(x, xi) - g_i0(x, xi')|| <= C`` for every x. Observations: every ``x_k + zeta_k`` and
``y_k + eta_k``, k = 0..K (Algorithm 1 loops k = 0..K). Laplace noise ``Lap(sigma_k)`` per
coordinate.

Lemma 4 is garbled in the main text; Appendix F's (73), (77), (80), (81), (83), (86), (87) give,
with ``a = |1 - alpha sum_{j in N^-_{R,i0}} R_{i0 j}|`` and ``b = |1 - beta sum_{j in N^-_{C,i0}}
C_{i0 j}|`` (row sums of agent i0)::

    Dy[0] = C1/m,   Dy[k] = b Dy[k-1] + 2 C1/m            = (C1/m)(b^k + 2 (1-b^k)/(1-b))
    Dx[0] = 0,      Dx[k] = a Dx[k-1] + gamma Dy[k-1]     = gamma sum_{t=1}^{k} a^{k-t} Dy[t-1]
    eps(i0) = sum_{k=0}^{K} Dx[k]/sigma^zeta_k + Dy[k]/sigma^eta_k                   (Lemma 5)

and the network-level guarantee is the maximum over i0. ``C1`` is an l1 bound on the change of
one sampled gradient: Appendix F uses ``||g - g'||_1 <= C`` although Definition 3 bounds the l2
norm, so ``norm="l2"`` (default, rigorous) uses ``C1 = sqrt(d) C`` and ``norm="l1"`` reads C as
an l1 bound (the paper's literal computation). Through the privacy API the norm is the assumption
given (:func:`definition3`): ``gradient_bound`` (G bounds every gradient's l2 norm) or
``l1_gradient_bound`` (its l1 norm), exactly one of them, and ``C = 2G``.

The bound is basic composition of Laplace releases (agent i0's two messages at every k, with l1
sensitivities ``Dx[k]``, ``Dy[k]`` and scales ``sigma^zeta_k``, ``sigma^eta_k``):
:func:`mechanism` describes them, so the generic accountants (``laplace`` = Lemma 5 exactly,
``rdp``, ``pld``) apply.

Which form the bound applies to: Appendix F analyses the per-agent rules (4)/(6), where agent
i0 mixes its own *clean* state, hence the contraction factors a, b above (``form="per-agent"``).
In the compact forms (7)/(8), the default of :class:`~dpnet.algorithms.DirectedDPGT`, agent i0
mixes its own *perturbed* state, which the observation fixes; the same argument then gives
``a = b = 1`` (``form="compact"``) [DERIVED], so Dy grows linearly and Dx quadratically in k.

Noise vs epsilon: Remark 13 and Section IV-A say smaller noise gives smaller epsilon. Lemma 5
says the opposite (eps is proportional to 1/sigma); this module follows the lemma.

Subsampling enters only through the 1/m factor (the probability that the differing sample is
drawn is not used), exactly as in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError, require
from .guarantee import PrivacyGuarantee
from .mechanism import Mechanism, Releases

FORMS = ("compact", "per-agent")
NORMS = ("l2", "l1")
THEOREM = "Chen, Wang & Zhang (paper 003), Lemma 4 (Appendix F recursions) and Lemma 5"
#: the assumption that carries paper 003's C, by the norm C bounds
BOUND_OF_NORM = {"l2": "gradient_bound", "l1": "l1_gradient_bound"}


def definition3(assumptions, who: str = "Lemma 4 of Chen, Wang & Zhang") -> tuple[float, str]:
    """``(C, norm)`` of Definition 3, C bounding the change ``||g_i0(x, xi) - g_i0(x, xi')||`` of
    one sampled gradient when one record is replaced. dpnet's ``gradient_bound`` bounds the l2
    norm of *every* gradient (and ``l1_gradient_bound`` its l1 norm), one meaning across the
    library (papers 000 and 001 double it too), so ``C = 2 G``: the two records' gradients may
    be ``+G`` and ``-G``. Exactly one of them must be given (both or neither is an error)."""
    l2, l1 = assumptions.gradient_bound, assumptions.l1_gradient_bound
    if l2 is not None and l1 is not None:
        raise ParameterError("gradient_bound, l1_gradient_bound", (l2, l1),
                             f"{who} reads G from exactly one of gradient_bound (G bounds every "
                             "gradient's l2 norm) and l1_gradient_bound (its l1 norm), not both")
    if l2 is None and l1 is None:
        raise ParameterError("gradient_bound | l1_gradient_bound", None,
                             f"{who} needs a bound G on every sampled gradient, C = 2G >= "
                             "||g_i0(x, xi) - g_i0(x, xi')|| (Definition 3): give gradient_bound "
                             "(G bounds the l2 norm) or l1_gradient_bound (G bounds the l1 norm)")
    return (2.0 * float(l2), "l2") if l2 is not None else (2.0 * float(l1), "l1")


# ---- Lemma 4 ----------------------------------------------------------------------------------

def _check(a: float, b: float, gamma: float, C: float, m: int, K: int) -> None:
    require(a >= 0 and b >= 0, "(a, b)", (a, b), "contraction factors a, b >= 0")
    require(gamma > 0, "gamma", gamma, "gamma > 0")
    require(C > 0 and math.isfinite(C), "C", C, "0 < C < inf (Definition 3)")
    require(isinstance(m, int | np.integer) and m >= 1, "m", m, "an integer sampling number m >= 1")
    require(isinstance(K, int | np.integer) and K >= 0, "K", K, "an integer K >= 0")


def sensitivities(a: float, b: float, gamma: float, C: float, m: int, K: int,
                  lipschitz: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(Dx, Dy)``, arrays of length K+1, by Appendix F's recursions (C is the l1 constant).

    ``lipschitz=L1`` adds what Appendix F leaves out: ``g_{i0,k}`` is evaluated at
    ``x_{i0,k} != x'_{i0,k}``, so with sample gradients L1-Lipschitz from l1 to l1 (``sqrt(d) L``
    for an l2 smoothness L) ``Dy[k] = b Dy[k-1] + 2 C/m + L1 (Dx[k] + Dx[k-1])`` [DERIVED]."""
    _check(a, b, gamma, C, m, K)
    Lc = 0.0 if lipschitz is None else float(lipschitz)
    require(Lc >= 0 and math.isfinite(Lc), "lipschitz", lipschitz, "0 <= L1 < inf")
    Dx, Dy = np.zeros(K + 1), np.zeros(K + 1)
    Dy[0] = C / m
    for k in range(1, K + 1):
        Dx[k] = a * Dx[k - 1] + gamma * Dy[k - 1]
        Dy[k] = b * Dy[k - 1] + 2.0 * C / m + Lc * (Dx[k] + Dx[k - 1])
    return Dx, Dy


def _geometric(r: float, k: np.ndarray) -> np.ndarray:
    """``sum_{s=0}^{k-1} r^s`` elementwise."""
    return k.astype(np.float64) if r == 1.0 else (1.0 - r ** k) / (1.0 - r)


def sensitivities_closed_form(a: float, b: float, gamma: float, C: float, m: int,
                              K: int) -> tuple[np.ndarray, np.ndarray]:
    """The same as :func:`sensitivities` from the closed forms (81) and (87) summed:
    ``Dy[k] = (C/m)(b^k + 2 S_b(k))`` with ``S_r(k) = sum_{s<k} r^s``, and
    ``Dx[k] = gamma (C/m) [(1 - 2/(1-b)) P(k) + 2/(1-b) S_a(k)]`` with
    ``P(k) = sum_{t=1}^{k} a^{k-t} b^{t-1}`` (for b = 1: ``Dx[k] = gamma (C/m) (2 Q(k) + P(k))``
    with ``Q(k) = sum_{t=1}^{k} a^{k-t} (t-1)``)."""
    _check(a, b, gamma, C, m, K)
    k = np.arange(K + 1)
    c = C / m
    Dy = c * (b ** k + 2.0 * _geometric(b, k))
    if a == b:
        P = k * a ** np.maximum(k - 1, 0)
    else:
        P = (a ** k - b ** k) / (a - b)
    if b != 1.0:
        Dx = gamma * c * ((1.0 - 2.0 / (1.0 - b)) * P + 2.0 / (1.0 - b) * _geometric(a, k))
    else:
        if a == 1.0:
            Q = k * (k - 1) / 2.0
        else:  # (k-1) S_a(k) - sum_{j<k} j a^j
            Q = (k - 1) * _geometric(a, k) - a * (1.0 - k * a ** np.maximum(k - 1, 0)
                                                   + (k - 1) * a ** k) / (1.0 - a) ** 2
        Dx = gamma * c * (2.0 * Q + P)
    Dx[0] = 0.0
    return Dx, Dy


# ---- Lemma 5 ----------------------------------------------------------------------------------

def epsilon_terms(Dx: np.ndarray, Dy: np.ndarray, sigma_zeta: Sequence[float],
                  sigma_eta: Sequence[float]) -> np.ndarray:
    """Per-iteration terms ``Dx[k]/sigma^zeta_k + Dy[k]/sigma^eta_k`` (inf where a scale is 0)."""
    sz, se = np.asarray(sigma_zeta, dtype=np.float64), np.asarray(sigma_eta, dtype=np.float64)
    require(sz.shape == Dx.shape and se.shape == Dy.shape, "sigma", (sz.shape, se.shape),
            f"one noise scale per observed iteration k = 0..{len(Dx) - 1}")
    require(bool(np.all(sz >= 0) and np.all(se >= 0)), "sigma", "scales", "noise scales >= 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(Dx > 0, Dx / sz, 0.0)
        ty = np.where(Dy > 0, Dy / se, 0.0)
    return tx + ty


def contraction_factors(graph, alpha: float, beta: float, i0: int,
                        form: str = "compact") -> tuple[float, float]:
    """``(a, b)`` for protected agent i0: Appendix F's row-sum factors for ``"per-agent"``, 1 and
    1 for ``"compact"`` (see the module docstring)."""
    a, b = all_contraction_factors(graph, alpha, beta, form)
    return float(a[i0]), float(b[i0])


def all_contraction_factors(graph, alpha: float, beta: float,
                            form: str = "compact") -> tuple[np.ndarray, np.ndarray]:
    """:func:`contraction_factors` of every agent at once, two ``(n,)`` arrays (one pass over the
    sparse row sums, not one per agent)."""
    require(form in FORMS, "form", form, f"one of {FORMS}")
    if form == "compact":
        return np.ones(graph.n), np.ones(graph.n)
    return (np.abs(1.0 - alpha * graph.row_sums("R")), np.abs(1.0 - beta * graph.row_sums("C")))


def l1_constant(C: float, d: int, norm: str = "l2") -> float:
    """The l1 sensitivity constant Appendix F needs: ``sqrt(d) C`` when C bounds the l2 norm
    (Definition 3), C itself when C is an l1 bound."""
    require(norm in NORMS, "norm", norm, f"one of {NORMS} (the norm in which C bounds ||g - g'||)")
    require(isinstance(d, int | np.integer) and d >= 1, "d", d, "an integer dimension d >= 1")
    return math.sqrt(d) * C if norm == "l2" else C


def cumulative_epsilon(graph, alpha: float, beta: float, gamma: float, m: int, C: float, d: int,
                       sigma_zeta: Callable[[int], np.ndarray | float],
                       sigma_eta: Callable[[int], np.ndarray | float], K: int, form: str = "compact",
                       norm: str = "l2", smoothness: float | None = None) -> np.ndarray:
    """``(K+1, n)`` array: ``eps_k(i0)``, Lemma 5's sum up to iteration k, for every agent i0.

    ``sigma_zeta(k)``, ``sigma_eta(k)`` return the per-agent noise scales (length n) at k.
    ``smoothness=L`` (l2 smoothness of one sample's gradient) adds the term Lemma 4 omits (see
    :func:`sensitivities`); None follows the paper."""
    n = graph.n
    C1 = l1_constant(C, d, norm)
    L1 = None if smoothness is None else l1_constant(smoothness, d, norm)
    sz, se = _scales(sigma_zeta, K, n), _scales(sigma_eta, K, n)
    # agents sharing their contraction factors and noise scales share their epsilon: one
    # evaluation per distinct column, not one per agent
    columns, inverse = np.unique(np.vstack([*all_contraction_factors(graph, alpha, beta, form),
                                            sz, se]), axis=1, return_inverse=True)
    out = np.zeros((K + 1, columns.shape[1]))
    for g, col in enumerate(columns.T):
        Dx, Dy = sensitivities(float(col[0]), float(col[1]), gamma, C1, m, K, L1)
        out[:, g] = np.cumsum(epsilon_terms(Dx, Dy, col[2:K + 3], col[K + 3:]))
    return out[:, inverse.reshape(-1)]


def _scales(sigma: Callable[[int], np.ndarray | float], K: int, n: int) -> np.ndarray:
    """``(K+1, n)``: per-agent noise scales at k = 0..K."""
    return np.stack([np.broadcast_to(np.asarray(sigma(k), dtype=np.float64), (n,))
                     for k in range(K + 1)])


def mechanism(graph, alpha: float, beta: float, gamma: float, m: int, C: float, d: int,
              sigma_zeta: Callable[[int], np.ndarray | float], sigma_eta: Callable[[int], np.ndarray | float],
              K: int, form: str = "compact", norm: str = "l2",
              smoothness: float | None = None) -> list:
    """Lemma 5's releases as ``(agents, Mechanism)`` groups: for protected agent i0, the messages
    ``x_k + zeta_k`` and ``y_k + eta_k`` at k = 0..K, Laplace, with the l1 sensitivities
    ``Dx[k]``, ``Dy[k]`` of :func:`sensitivities` (same arguments as :func:`cumulative_epsilon`).
    Their basic composition is Lemma 5's sum. Agents sharing their contraction factors and
    noise scales share a description."""
    n = graph.n
    C1 = l1_constant(C, d, norm)
    L1 = None if smoothness is None else l1_constant(smoothness, d, norm)
    sz, se = _scales(sigma_zeta, K, n), _scales(sigma_eta, K, n)
    rows, inverse = np.unique(np.vstack([*all_contraction_factors(graph, alpha, beta, form),
                                         sz, se]), axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    source = (f"paper 003, Appendix F recursions, form={form!r}, C = {C:g} bounding the {norm} "
              f"norm (l1 constant {C1:.6g}), m = {m}, d = {d}"
              + ("" if smoothness is None else f", smoothness term L = {smoothness:g}"))
    groups = []
    for g in range(rows.shape[1]):
        a, b = rows[0, g], rows[1, g]
        Dx, Dy = sensitivities(float(a), float(b), gamma, C1, m, K, L1)
        groups.append((np.flatnonzero(inverse == g), Mechanism(
            (Releases("x", "laplace", Dx, rows[2:K + 3, g]),
             Releases("y", "laplace", Dy, rows[K + 3:, g])),
            adjacency="record (Definition 3: one sample of agent i0 replaced)", horizon=K + 1,
            source=source, relation="replace_one")))
    return groups


def guarantee(graph, alpha: float, beta: float, gamma: float, m: int, C: float | None, d: int,
              sigma_zeta, sigma_eta, K: int, form: str = "compact", norm: str = "l2",
              smoothness: float | None = None) -> PrivacyGuarantee:
    """Lemma 5's epsilon for observations k = 0..K, per protected agent and its maximum."""
    if C is None:
        raise ParameterError("gradient_bound | l1_gradient_bound", None,
                             "Lemma 4 of Chen, Wang & Zhang needs C >= ||g_i0(x, xi) - g_i0(x, "
                             "xi')|| (Definition 3): give gradient_bound (C bounds the l2 norm) "
                             "or l1_gradient_bound (C bounds the l1 norm)")
    per = cumulative_epsilon(graph, alpha, beta, gamma, m, C, d, sigma_zeta, sigma_eta, K,
                             form, norm, smoothness)[-1]
    assumptions = [f"Definition 3 adjacency with C = {C:g} bounding the {norm} norm of one "
                   "sampled gradient's change" + (f" (l1 constant sqrt(d) C, d = {d})"
                                                  if norm == "l2" else ""),
                   "Assumption 1 (checked by the algorithm)",
                   f"observations x_k + zeta_k and y_k + eta_k for k = 0..{K}"]
    notes = [f"form={form!r}: " + ("Appendix F's contraction factors of the per-agent rules "
                                   "(4)/(6)" if form == "per-agent" else
                                   "compact forms (7)/(8): own perturbed state mixed, factors "
                                   "a = b = 1 [derived]"),
             "smaller noise gives larger epsilon (Lemma 5); the paper's Remark 13 says otherwise",
             "Lemma 4 as printed omits the change of g_i0 through x_i0 != x'_i0" if smoothness is
             None else f"with the smoothness term (L = {smoothness:g}) Lemma 4 omits"]
    return PrivacyGuarantee.from_per_agent(per, delta=0.0, horizon=K + 1, theorem=THEOREM,
                                           assumptions=tuple(assumptions), notes=tuple(notes))


# ---- Theorems 3 and 4: finiteness conditions ---------------------------------------------------

@dataclass(frozen=True)
class Condition:
    """One checked hypothesis: the quantity ``name`` (a formula in the paper's symbols), its ``value``,
    whether it ``holds``, and the ``source`` that states the requirement (printed as
    ``name = value: holds (source)``)."""
    name: str
    value: float
    holds: bool
    source: str

    def __str__(self) -> str:
        verdict = "holds" if self.holds else "FAILS"
        return f"{self.name} = {self.value:.6g}: {verdict} ({self.source})"


def theorem3_conditions(graph, a1: float, a2: float, K: int, p_alpha: float, p_beta: float,
                        p_gamma: float, p_m: float, p_zeta: float, p_eta: float,
                        i0: int | None = None) -> list[Condition]:
    """Theorem 3 (S1): finite epsilon as K -> infinity. The printed weight conditions
    ``0 < a1 sum_j R_i0j < 1`` and ``0 < a2 sum_j C_i0j < 1`` are reported next to the ones the
    proof uses, ``0 < alpha sum_j R_i0j < 1`` and ``0 < beta sum_j C_i0j < 1``. ``i0=None``: the
    worst agent."""
    agents = slice(None) if i0 is None else [i0]
    sR, sC = graph.row_sums("R"), graph.row_sums("C")
    alpha, beta = a1 / K ** p_alpha, a2 / K ** p_beta
    out = []
    for label, coef, s, src in (("a1*sum_j R_i0j", a1, sR, "Theorem 3 as printed"),
                                ("a2*sum_j C_i0j", a2, sC, "Theorem 3 as printed"),
                                ("alpha*sum_j R_i0j", alpha, sR, "what Theorem 3's proof uses"),
                                ("beta*sum_j C_i0j", beta, sC, "what Theorem 3's proof uses")):
        vals = coef * s[agents]
        worst = vals.max() if vals.max() >= 1 else vals.min()
        out.append(Condition(label, float(worst), bool(np.all((vals > 0) & (vals < 1))), src))
    e1 = p_m - p_beta - max(0.0, 1.0 - p_eta)
    e2 = p_m + min(0.0, p_gamma - p_alpha - p_beta) - max(0.0, 1.0 - p_zeta)
    out.append(Condition("p_m - p_beta - max(0, 1 - p_eta)", e1, e1 > 0, "Theorem 3"))
    out.append(Condition("p_m + min(0, p_gamma - p_alpha - p_beta) - max(0, 1 - p_zeta)", e2,
                         e2 > 0, "Theorem 3"))
    return out


def theorem4_conditions(graph, alpha: float, beta: float, p_m: float, p_zeta: float,
                        p_eta: float, i0: int | None = None) -> list[Condition]:
    """Theorem 4 (S2): ``0 < alpha sum_j R_i0j < 1``, ``0 < beta sum_j C_i0j < 1``,
    ``0 < p_zeta, p_eta < 1`` and ``1/p_m < min(p_zeta, p_eta)``."""
    agents = slice(None) if i0 is None else [i0]
    sR, sC = graph.row_sums("R"), graph.row_sums("C")
    out = []
    for label, coef, s in (("alpha*sum_j R_i0j", alpha, sR), ("beta*sum_j C_i0j", beta, sC)):
        vals = coef * s[agents]
        worst = vals.max() if vals.max() >= 1 else vals.min()
        out.append(Condition(label, float(worst), bool(np.all((vals > 0) & (vals < 1))),
                             "Theorem 4"))
    out.append(Condition("min(p_zeta, p_eta)", min(p_zeta, p_eta),
                         0 < min(p_zeta, p_eta) and max(p_zeta, p_eta) < 1, "Theorem 4"))
    gap = min(p_zeta, p_eta) - 1.0 / p_m
    out.append(Condition("min(p_zeta, p_eta) - 1/p_m", gap, gap > 0, "Theorem 4"))
    return out


# ---- shared by the DSGD-type baselines of Figs. 5-6 ([36], [41]) -------------------------------

def dsgd_state_sensitivity(coupling: Sequence[float], step: Sequence[float], row_sum: float,
                           C1_over_m: float) -> np.ndarray:
    """``Delta_k`` of a protected agent's state in ``x_{k+1} = x_k + c_k sum_j w_ij (psi_j -
    x_k) - lambda_k g_k`` when every message psi is fixed by the observation (the argument of
    Appendix F): ``Delta_0 = 0``, ``Delta_{k+1} = |1 - c_k sum_j w_ij| Delta_k + lambda_k C1/m``.
    ``coupling``, ``step``: ``c_k``, ``lambda_k`` for k = 0..K-1; returns ``Delta_0..Delta_K``."""
    c, lam = np.asarray(coupling, dtype=np.float64), np.asarray(step, dtype=np.float64)
    require(c.shape == lam.shape, "coupling/step", (c.shape, lam.shape), "equal lengths")
    out = np.zeros(len(c) + 1)
    for k in range(len(c)):
        out[k + 1] = abs(1.0 - c[k] * row_sum) * out[k] + lam[k] * C1_over_m
    return out
