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
``variant="sound"`` (the default of every algorithm's ``privacy()``) takes the larger of the
printed and derived per-step terms: the paper's own number wherever the two agree in order
(``eta <= 1`` for Theorem 3), never below the proof's steps, and never exceeded by an audit.

* Proposition 1 (PGTC) / 2 (PPDC), infinite horizon under Assumption 6 (the gradient difference of
  the two versions of ``f_{i0}`` is constant, bounded by the adjacency radius ``delta``):
  ``eps = tau q^2 delta / (q^2 - eta L - q eta L)`` with ``tau = eta/s_x + 1/s_y`` (PGTC) or
  ``tau = 1/s_x + 1/(eta s_v)`` (PPDC); requires ``eta < 1/(2L)`` and
  ``q in ((eta L + sqrt(eta^2 L^2 + 4 eta L))/2, 1)``.

Audit findings (``dpnet audit``, docs/auditing.md), reported in every guarantee they affect:

* Proposition 1 charges the x-noise ``eta delta / s_x``, but ``x^a_1`` carries the shift
  ``eta delta`` under noise of scale ``s_x q``. Redoing the proof's recursion
  (``b_k = ||Delta y_k|| / q^k``, ``b_k <= (eta L/q) b_{k-1} + (eta L/q^2) b_{k-2}``) gives the
  same series with ``tau = eta/(s_x q) + 1/s_y``: ``variant="derived"`` for the propositions.
  Proposition 2 has the same first-message gap when ``eta > q``; no derived form is offered,
  so ``variant="sound"`` refuses Proposition 2 (the finite-horizon Theorem 6 applies to any run)
  and ``variant="derived"`` is the sound form of Proposition 1.
* Theorem 3 as printed (``sqrt(eta)``) is below the appendix's own step (``eta``) when
  ``eta > 1``, and is then not a bound.

:func:`xie_guarantee` turns an algorithm's noise objects into the per-agent guarantee (DiaDSP,
PGTC, PPDC) and :func:`xie_mechanism` describes their releases for the generic accountants;
calibration is the algorithms' own (``Algorithm.calibrate``, :mod:`dpnet.privacy.calibration`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError, require
from ..noise import Laplace, Noise
from .composition import inverse_geometric_sum
from .guarantee import PrivacyGuarantee, per_agent_unique
from .mechanism import Mechanism, Releases

VARIANTS = ("sound", "printed", "derived")


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
    c = {"printed": math.sqrt(eta), "derived": eta, "sound": max(math.sqrt(eta), eta)}[variant]
    per_step = 4.0 * math.sqrt(d) * M * (c * _inv(s_x) + _inv(s_y))
    return per_step * inverse_geometric_sum(q, 0, K)


def ppdc_finite_horizon(d: int, M: float, eta: float, omega: float, s_x: float, s_v: float,
                        q: float, K: int, variant: str = "printed") -> float:
    """Theorem 6 of paper 000 (see module docstring)."""
    _check_common(d, M, eta, q, K)
    require(omega > 0, "omega", omega, "omega > 0")
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    printed = 2.0 * math.sqrt(d) * M * (math.sqrt(eta) * _inv(s_x) + 2.0 * _inv(s_v) / omega)
    derived = 4.0 * math.sqrt(d) * M * (eta * _inv(s_x) + _inv(s_v) / omega)
    per_step = {"printed": printed, "derived": derived, "sound": max(printed, derived)}[variant]
    return per_step * inverse_geometric_sum(q, 0, K)


def proposition_q_min(eta: float, L: float) -> float:
    """Lower end of the q-interval of Propositions 1 and 2."""
    a = eta * L
    return (a + math.sqrt(a * a + 4 * a)) / 2


def _infinite(tau: float, eta: float, L: float, q: float, delta: float) -> float:
    require(delta > 0 and math.isfinite(delta), "adjacency_radius", delta,
            "0 < adjacency_radius < inf (bound on ||grad f_i0^(1) - grad f_i0^(2)||, the "
            "paper's delta)")
    require(L > 0 and math.isfinite(L), "smoothness", L,
            "a finite Lipschitz constant L_f of the local gradients")
    require(eta < 1 / (2 * L), "eta", eta, f"eta < 1/(2 L_f) = {1 / (2 * L):.6g}")
    qmin = proposition_q_min(eta, L)
    if not qmin < q < 1:
        raise ParameterError("q", q, f"{qmin:.6g} < q < 1 ((eta L + sqrt(eta^2 L^2 + 4 eta L))/2 "
                             "< q < 1, Propositions 1-2 of paper 000)")
    return tau * q * q * delta / (q * q - eta * L - q * eta * L)


def pgtc_infinite_horizon(eta: float, L: float, s_x: float, s_y: float, q: float,
                          delta: float, variant: str = "printed") -> float:
    """Proposition 1 of paper 000; ``variant="derived"`` (also ``"sound"``) charges the first
    x-message at its actual noise scale ``s_x q`` (see the module docstring)."""
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    x_term = eta * _inv(s_x) / (1.0 if variant == "printed" else q)
    return _infinite(x_term + _inv(s_y), eta, L, q, delta)


def ppdc_infinite_horizon(eta: float, L: float, s_x: float, s_v: float, q: float,
                          delta: float, variant: str = "printed") -> float:
    """Proposition 2 of paper 000 (printed form only: see the module docstring)."""
    require(variant == "printed", "variant", variant,
            "'printed' (Proposition 2 has no corrected form and an audit finds the printed one "
            "violated when eta > q: give a finite horizon for Theorem 6, or variant='printed' "
            "for the paper's statement)")
    return _infinite(_inv(s_x) + _inv(s_v) / eta, eta, L, q, delta)


_C_TEXT = {"printed": "sqrt(eta)", "derived": "eta",
           "sound": "max(printed, derived) per step"}


def _geometric_laplace(noise: Noise, label: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-agent ``(scales, decays)``, each ``(n,)``."""
    if noise.is_zero:
        return np.zeros(n), np.full(n, 0.5)
    if not isinstance(noise, Laplace) or noise.schedule.decay is None:
        raise ParameterError(label, repr(noise), "paper 000's accounting needs Laplace noise with "
                             "a geometric decay s*q^k (Laplace(scale, decay=q))")
    noise.schedule.check(n)
    return (np.broadcast_to(noise.schedule.scale, (n,)).astype(np.float64),
            np.broadcast_to(noise.schedule.decay, (n,)).astype(np.float64))


def xie_guarantee(name: str, which: str, problem, graph, iterations, eta: float, noise_x: Noise,
                  noise_2: Noise, gradient_bound=None, adjacency=None, variant="sound",
                  omega: float = 1.0) -> PrivacyGuarantee:
    """Per-agent guarantee by paper 000's formulas; ``which`` is "pgtc" (noise_2 = y noise) or
    "ppdc" (noise_2 = v noise). The q of agent i must be the same for both of its noises."""
    n, d = graph.n, problem.dim
    label_2 = "noise_y" if which == "pgtc" else "noise_v"
    px, p2 = _geometric_laplace(noise_x, "noise_x", n), _geometric_laplace(noise_2, label_2, n)
    if noise_x.is_zero and noise_2.is_zero:
        return PrivacyGuarantee.none(f"{name} with noise scale 0 is not private", iterations)
    (sx, qx), (s2, q2) = px, p2
    if not (noise_x.is_zero or noise_2.is_zero):
        differ = np.abs(qx - q2) > 1e-15
        if differ.any():
            i = int(np.argmax(differ))
            raise ParameterError("decay", (float(qx[i]), float(q2[i])), "paper 000 uses one decay "
                                 f"q_i per agent for both noises (agent {i})")
    qs = q2 if noise_x.is_zero else qx
    label = "Theorem 3" if which == "pgtc" else "Theorem 6"
    notes: tuple[str, ...] = ()
    if iterations is None:
        label = "Proposition 1" if which == "pgtc" else "Proposition 2"
        if adjacency is None:
            raise ParameterError("adjacency_radius", None, f"{label} of paper 000 needs the "
                                 "adjacency radius (the paper's delta: bound on the gradient "
                                 "difference of f_i0's two versions, constant under Assumption "
                                 "6)")
        L = problem.smoothness
        fn = pgtc_infinite_horizon if which == "pgtc" else ppdc_infinite_horizon
        per = per_agent_unique(lambda a, b, q: fn(eta, L, a, b, q, adjacency, variant), sx, s2, qs)
        assumptions: tuple[str, ...] = ("Assumption 6: grad f_i0^(1) - grad f_i0^(2) is constant",
                       f"adjacency_radius = {adjacency:g} (the paper's delta)",
                       f"L_f = {L:.6g}",
                       f"eta < 1/(2 L_f) and q in the interval of {label}",
                       f"variant: {variant}")
        if variant == "printed":
            notes = (f"an empirical audit finds {label} as printed violated when the x-noise "
                     "dominates (the first x message costs eta*delta/(s_x q), not eta*delta/s_x)"
                     + ("; variant='derived' corrects it" if which == "pgtc" else
                        " whenever eta > q; prefer the finite-horizon Theorem 6"),)
    else:
        M = gradient_bound if gradient_bound is not None else problem.gradient_bound()
        if M is None:
            raise ParameterError("gradient_bound", None, f"{label} of paper 000 needs M with "
                                 "||grad f_i(x)|| <= M for all x (Assumption 7); this problem "
                                 "has no global bound, give one")
        if which == "pgtc":
            per = per_agent_unique(lambda a, b, q: pgtc_finite_horizon(
                d, M, eta, a, b, q, iterations, variant), sx, s2, qs)
        else:
            per = per_agent_unique(lambda a, b, q: ppdc_finite_horizon(
                d, M, eta, omega, a, b, q, iterations, variant), sx, s2, qs)
        if variant == "printed" and eta > 1:
            notes = (f"eta = {eta:g} > 1: the printed sqrt(eta) form is below the appendix's own "
                     "derivation (eta) and an audit finds it violated; use variant='derived'",)
        src = "user-supplied" if gradient_bound is not None else "computed from the problem's data"
        assumptions = (f"Assumption 7: ||grad f_i|| <= M = {M:.6g} ({src})",
                       f"sum over k = 0..K ({iterations + 1} terms)",
                       f"variant: {variant} ({_C_TEXT[variant]})")
    return PrivacyGuarantee.from_per_agent(
        per, horizon=iterations, theorem=f"{label} of Xie et al. (paper 000), applied to {name}",
        assumptions=assumptions, notes=notes)


def xie_mechanism(which: str, problem, graph, iterations: int, eta: float, noise_x: Noise,
                  noise_2: Noise, gradient_bound: float | None, omega: float = 1.0):
    """What PGTC/DiaDSP (``which="pgtc"``) or PPDC (``"ppdc"``) release, per group of agents
    sharing their noise parameters: at every k = 0..K two Laplace releases, the x message and the
    y (v) message, with the l1 sensitivities of the appendices' steps under Assumption 7, each the
    larger of the printed and the derived form as ``variant="sound"`` takes them: PGTC
    ``4 max(sqrt(eta), eta) sqrt(d) M`` and ``4 sqrt(d) M``; PPDC ``max(2 sqrt(eta), 4 eta)
    sqrt(d) M`` and ``4 sqrt(d) M / omega``. Their basic composition is Theorem 3 exactly (sound
    form) and bounds Theorem 6's sound form from above."""
    n, d = graph.n, problem.dim
    M = gradient_bound if gradient_bound is not None else problem.gradient_bound()
    if M is None:
        raise ParameterError("gradient_bound", None, "paper 000's releases have sensitivities "
                             "in M with ||grad f_i(x)|| <= M for all x (Assumption 7); this "
                             "problem has no global bound, give one")
    label_2 = "y" if which == "pgtc" else "v"
    (sx, qx), (s2, q2) = (_geometric_laplace(noise_x, "noise_x", n),
                          _geometric_laplace(noise_2, f"noise_{label_2}", n))
    q = q2 if noise_x.is_zero else qx
    root = math.sqrt(d) * M
    if which == "pgtc":
        sens = (4.0 * max(math.sqrt(eta), eta) * root, 4.0 * root)
    else:
        sens = (max(2.0 * math.sqrt(eta), 4.0 * eta) * root, 4.0 * root / omega)
    table = np.column_stack([sx, s2, q])
    rows, inverse = np.unique(table, axis=0, return_inverse=True)
    k = np.arange(iterations + 1)
    groups = []
    for g, (a, b, qq) in enumerate(rows.tolist()):
        decay = qq ** k
        groups.append((np.flatnonzero(inverse.reshape(-1) == g), Mechanism(
            (Releases("x", "laplace", np.asarray(sens[0]), a * decay),
             Releases(label_2, "laplace", np.asarray(sens[1]), b * decay)),
            adjacency="function (f_i0 replaced, Assumption 7: ||grad f_i|| <= M)",
            horizon=iterations,
            source=f"paper 000 appendix sensitivities with M = {M:.6g}, d = {d}, eta = {eta:g}",
            relation="replace_one")))
    return groups
