"""Pure epsilon-DP accounting of paper 004 (Ou, Wang, Liu & Lu): DPP2, Theorem 3.

Adjacency (Definition 1): the two function sets differ only in ``f_{i0}`` and
``sup_x ||grad f_i0^(1)(x) - grad f_i0^(2)(x)|| <= delta`` (the *adjacency radius*, an input the
user must supply; unrelated to the delta of (eps, delta)-DP). Observations: every ``y^k`` and
``z^k`` on the wire; the eta^k sequence is public. Noises ``w ~ Lap(u_w r^k)``,
``e ~ Lap(u_e r^k)``.

Theorem 3, with ``Mbar`` the smoothness of the local objectives and ``alpha * Mbar < 1``::

    c_tilde = sqrt(d) (1/(alpha u_e) + 1/u_w) alpha delta / (1 - alpha Mbar)
            = sqrt(d) (1/u_e + alpha/u_w) delta / (1 - alpha Mbar)
    eps(K)  = c_tilde * sum_{k=1}^{K} r^{-k}                            ("printed")
    eps(K)  = c_tilde * sum_{k=0}^{K} r^{-k}                            ("conservative", default)

Why two variants: Algorithm 1 loops over k = 0..K, so K+1 pairs (y^k, z^k) are observed, but the
printed sum starts at k = 1 because (64) shifts the exponent and bounds ``||Delta e^0||`` by 0,
whereas ``Delta e^0 = -(grad f^(1)(x^0) - grad f^(2)(x^0))`` can have norm delta. The
conservative sum adds the k = 0 term (bounded by c_tilde, as every other term). For the runner's
``iterations=K`` (steps k = 0..K-1, K observations) the conservative sum covers one observation
more than happened, so it is an upper bound either way.

Corollary 1 of the paper is *not* implemented: its recipe for r does not guarantee Theorem 3's
condition. ``sum_{k=1}^{K} r^{-k} >= K`` for every r < 1, so Theorem 3 needs ``K c_tilde <= eps``,
which the corollary never ensures (it only asks ``c_tilde < eps`` and
``r > (c_tilde/eps)^{1/(K-1)}``; its proof drops a power when bounding the geometric sum). The
regression test ``test_corollary1_recipe_can_exceed_target`` shows a case. Use
:func:`calibrate_decay` / :func:`calibrate_scale`, which always satisfy Theorem 3.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError, require
from ..noise import Laplace
from .composition import calibrate, inverse_geometric_sum
from .guarantee import PrivacyGuarantee, per_agent_unique
from .mechanism import Mechanism, Releases

VARIANTS = ("conservative", "printed")


def _check(d: int, alpha: float, smoothness: float, adjacency: float | None, K: int | None) -> None:
    require(isinstance(d, int) and d >= 1, "d", d, "an integer d >= 1")
    require(alpha > 0 and math.isfinite(alpha), "alpha", alpha, "0 < alpha < inf")
    if adjacency is None:
        raise ParameterError("adjacency_radius", None, "Theorem 3 of Ou et al. needs the "
                             "adjacency radius (the paper's delta) >= sup_x ||grad f_i0^(1)(x) "
                             "- grad f_i0^(2)(x)|| (Definition 1)")
    require(adjacency > 0 and math.isfinite(adjacency), "adjacency_radius", adjacency,
            "0 < adjacency_radius < inf (Definition 1's delta)")
    require(smoothness >= 0, "smoothness", smoothness, "Mbar >= 0 (Assumption 1)")
    if not alpha * smoothness < 1:
        raise ParameterError("alpha*Mbar", alpha * smoothness,
                             f"alpha * Mbar < 1 (Theorem 3 of Ou et al.; alpha = {alpha:g}, "
                             f"Mbar = {smoothness:.6g})",
                             "no finite smoothness known: give smoothness=Mbar"
                             if math.isinf(smoothness) else "")
    if K is None:
        raise ParameterError("iterations", None, "Theorem 3 of Ou et al. is a finite-horizon "
                             "bound: give the number of iterations K")
    require(isinstance(K, int) and K >= 0, "iterations", K, "an integer K >= 0")


def c_tilde(d: int, alpha: float, smoothness: float, adjacency: float, u_e: float,
            u_w: float) -> float:
    """Theorem 3's per-iteration factor ``sqrt(d) (1/u_e + alpha/u_w) delta / (1 - alpha Mbar)``;
    ``inf`` when a noise scale is 0."""
    _check(d, alpha, smoothness, adjacency, 0)
    require(u_e >= 0 and u_w >= 0, "u", (u_e, u_w), "noise scales u_e, u_w >= 0")
    if u_e == 0 or u_w == 0:
        return math.inf
    return math.sqrt(d) * (1.0 / u_e + alpha / u_w) * adjacency / (1.0 - alpha * smoothness)


def iteration_sum(r: float, K: int, variant: str = "conservative") -> float:
    """``sum_{k=1}^{K} r^{-k}`` (printed) or ``sum_{k=0}^{K} r^{-k}`` (conservative)."""
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    require(0 < r < 1, "r", r, "0 < r < 1 (noise decay rate of Section III-B)")
    printed = inverse_geometric_sum(r, 1, K)
    # the k = 0 term is r^0 = 1; adding it (rather than summing from 0 in closed form) keeps
    # conservative >= printed under rounding
    return 1.0 + printed if variant == "conservative" else printed


def theorem3_epsilon(d: int, alpha: float, smoothness: float, adjacency: float, u_e: float,
                     u_w: float, r: float, K: int, variant: str = "conservative") -> float:
    """Theorem 3 of Ou et al. for one agent (see module docstring)."""
    _check(d, alpha, smoothness, adjacency, K)
    c = c_tilde(d, alpha, smoothness, adjacency, u_e, u_w)
    s = iteration_sum(r, K, variant)
    if s == 0.0:                  # printed sum with K = 0: no term
        return 0.0
    return math.inf if math.isinf(c) else c * s


def _smallest_multiplier(eps, target: float) -> float:
    """Smallest t with ``eps(t) <= target`` for ``eps`` proportional to 1/t (Theorem 3 in the
    scales): bisection around the analytic answer ``eps(1)/target``, so that huge sums cannot
    push the search to overflow; feasibility is checked on the exact product returned."""
    e1 = eps(1.0)
    require(e1 > 0, "iterations", 0, "K >= 1 (the printed sum over k = 1..K is empty for K = 0)")
    if not math.isfinite(e1):
        raise ParameterError("iterations", "horizon", "a finite Theorem 3 sum at unit scale",
                             "sum_k r^-k overflows a float: shorten K or raise r")
    t0 = e1 / target
    s = calibrate(lambda s: eps(s * t0), target, lo=0.5, hi=2.0)
    return s * t0


def log10_iteration_sum(r: float, K: int, variant: str = "conservative") -> float:
    """``log10`` of :func:`iteration_sum`, finite where the sum itself overflows a float (r = 0.1
    and K = 500 give 10^500): ``-K log10 r + log10((1 - r^n) / (1 - r))`` for the n terms."""
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    require(0 < r < 1, "r", r, "0 < r < 1 (noise decay rate of Section III-B)")
    n = K + 1 if variant == "conservative" else K
    if n <= 0:
        return -math.inf
    return -K * math.log10(r) + math.log10(-math.expm1(n * math.log(r)) / (1.0 - r))


def calibrate_scale(target: float, d: int, alpha: float, smoothness: float, adjacency: float,
                    r: float, K: int, variant: str = "conservative", w_ratio: float = 1.0) -> float:
    """Smallest u with ``theorem3_epsilon(u_e=u, u_w=w_ratio*u) <= target`` (never overshoots)."""
    require(w_ratio > 0, "w_ratio", w_ratio, "u_w/u_e > 0")
    require(target > 0 and math.isfinite(target), "target", target, "0 < target < inf")
    return _smallest_multiplier(lambda u: theorem3_epsilon(d, alpha, smoothness, adjacency, u,
                                                           w_ratio * u, r, K, variant), target)


def calibrate_decay(target: float, d: int, alpha: float, smoothness: float, adjacency: float,
                    u_e: float, u_w: float, K: int, variant: str = "conservative",
                    rel_tol: float = 1e-12) -> float:
    """Smallest decay r in (0, 1) with ``theorem3_epsilon(r) <= target`` (never overshoots).

    As r -> 1 the sum tends to K (printed) or K+1 (conservative) terms, so a target at or below
    ``c_tilde * K`` (resp. ``(K+1)``) is unreachable by any r: that is raised, with the numbers."""
    require(target > 0 and math.isfinite(target), "target", target, "0 < target < inf")
    _check(d, alpha, smoothness, adjacency, K)
    c = c_tilde(d, alpha, smoothness, adjacency, u_e, u_w)
    terms = K + 1 if variant == "conservative" else K
    if not c * terms < target:
        raise ParameterError("target", target, f"target > c_tilde * {terms} = {c * terms:.6g}: "
                             f"sum_k r^-k >= {terms} for every r < 1, so no decay rate reaches it",
                             "increase u_e/u_w, reduce alpha or the horizon")

    def eps(r: float) -> float:
        return theorem3_epsilon(d, alpha, smoothness, adjacency, u_e, u_w, r, K, variant)

    lo, hi = 0.0, 1.0    # eps(lo) > target always (eps -> inf as r -> 0); hi: feasible limit
    while hi - lo > rel_tol:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if eps(mid) <= target:
            hi = mid
        else:
            lo = mid
    if not (hi < 1.0 and eps(hi) <= target):
        raise ParameterError("target", target, "a decay rate r < 1 found by bisection",
                             f"the target is within rounding of c_tilde * {terms}")
    return hi


def _geometric(noise, label: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-agent ``(u, r)`` arrays of a ``Laplace(u, decay=r)`` noise (scale 0: ``(0, nan)``)."""
    if noise.is_zero:
        return np.zeros(n), np.full(n, math.nan)
    if not isinstance(noise, Laplace) or noise.schedule.decay is None:
        raise ParameterError(label, repr(noise), "Theorem 3 of Ou et al. needs Laplace noise with "
                             "a geometric decay u*r^k (Laplace(u, decay=r))")
    noise.schedule.check(n)
    return (np.broadcast_to(noise.schedule.scale, (n,)).astype(np.float64),
            np.broadcast_to(noise.schedule.decay, (n,)).astype(np.float64))


def dpp2_guarantee(name: str, problem, graph, iterations: int | None, alpha: float, noise_w,
                   noise_e, adjacency: float | None = None, variant: str = "conservative",
                   smoothness: float | None = None):
    """Per-agent Theorem 3 guarantee of DPP2 (``smoothness`` overrides the problem's Mbar)."""
    require(variant in VARIANTS, "variant", variant, f"one of {VARIANTS}")
    n = graph.n if graph is not None else problem.n_agents
    M = float(problem.smoothness if smoothness is None else smoothness)
    _check(int(problem.dim), alpha, M, adjacency, iterations)
    assert adjacency is not None and iterations is not None     # _check raised otherwise
    pw, pe = _geometric(noise_w, "noise_w", n), _geometric(noise_e, "noise_e", n)
    if noise_w.is_zero or noise_e.is_zero:
        return PrivacyGuarantee.none(f"{name} needs both noises w and e for Theorem 3 (a zero "
                                     "scale leaves the state difference unmasked)", iterations)
    (u_w, r_w), (u_e, r_e) = pw, pe
    differ = np.abs(r_w - r_e) > 1e-15
    if differ.any():
        i = int(np.argmax(differ))
        raise ParameterError("r", (float(r_w[i]), float(r_e[i])), "Theorem 3 uses one decay r_i "
                             f"per agent for both noises w and e (agent {i})")
    per = per_agent_unique(lambda ue, uw, r: theorem3_epsilon(
        int(problem.dim), alpha, M, adjacency, ue, uw, r, iterations, variant), u_e, u_w, r_w)
    terms = "k = 0..K (conservative: includes the k = 0 noise)" if variant == "conservative" \
        else "k = 1..K (as printed; omits the k = 0 term)"
    src = "user-supplied" if smoothness is not None else "from the problem"
    return PrivacyGuarantee.from_per_agent(
        per, horizon=iterations, theorem=f"Theorem 3 of Ou et al. (paper 004), applied to {name}",
        assumptions=(f"adjacency_radius = {adjacency:g} (Definition 1's delta)",
                     f"Mbar = {M:.6g} ({src}); alpha*Mbar = {alpha * M:.4g} < 1",
                     f"sum over {terms}"))


def calibrate_noises(problem, graph, target: float, iterations: int, alpha: float, noise_w,
                     noise_e, adjacency: float, over: str = "u", variant: str = "conservative",
                     smoothness: float | None = None):
    """New ``(noise_w, noise_e)`` meeting ``target`` by Theorem 3: ``over="u"`` multiplies every
    scale by the smallest common factor, ``over="r"`` sets the smallest common decay rate."""
    require(over in ("u", "r"), "over", over, "'u' (noise scales) or 'r' (decay rate)")
    n = graph.n if graph is not None else problem.n_agents
    M = float(problem.smoothness if smoothness is None else smoothness)
    d = int(problem.dim)
    pw, pe = _geometric(noise_w, "noise_w", n), _geometric(noise_e, "noise_e", n)
    require(not (noise_w.is_zero or noise_e.is_zero), "noise", (noise_w, noise_e),
            "both noises w and e nonzero (their scales are what gets calibrated)")
    (u_w, r), (u_e, _) = pw, pe
    if over == "u":
        def eps(t: float) -> float:
            return float(per_agent_unique(lambda ue, uw, q: theorem3_epsilon(
                d, alpha, M, adjacency, t * ue, t * uw, q, iterations, variant),
                u_e, u_w, r).max())

        t = _smallest_multiplier(eps, target)
        return (Laplace((t * u_w).tolist(), decay=r.tolist()),
                Laplace((t * u_e).tolist(), decay=r.tolist()))
    c = per_agent_unique(lambda ue, uw: c_tilde(d, alpha, M, adjacency, ue, uw), u_e, u_w)
    worst = int(np.argmax(c))
    rate = calibrate_decay(target, d, alpha, M, adjacency, u_e[worst], u_w[worst], iterations,
                           variant)
    return Laplace(u_w, decay=rate), Laplace(u_e, decay=rate)


def dpp2_mechanism(problem, graph, iterations: int, alpha: float, noise_w, noise_e,
                   adjacency: float | None, smoothness: float | None = None):
    """DPP2's releases per group of agents sharing ``(u_w, u_e, r)``: at k = 0..K the message
    masked by ``e`` (l1 sensitivity ``sqrt(d) delta / (1 - alpha Mbar)``, scale ``u_e r^k``) and
    the one masked by ``w`` (``sqrt(d) alpha delta / (1 - alpha Mbar)``, ``u_w r^k``): their basic
    composition is Theorem 3's conservative sum ``c_tilde sum_{k=0}^{K} r^{-k}``."""
    n = graph.n if graph is not None else problem.n_agents
    M = float(problem.smoothness if smoothness is None else smoothness)
    d = int(problem.dim)
    _check(d, alpha, M, adjacency, iterations)
    assert adjacency is not None                        # _check raised otherwise
    require(not (noise_w.is_zero or noise_e.is_zero), "noise", (noise_w, noise_e),
            "both noises w and e nonzero (Theorem 3: a zero scale leaves the state unmasked)")
    (u_w, r_w), (u_e, _) = _geometric(noise_w, "noise_w", n), _geometric(noise_e, "noise_e", n)
    base = math.sqrt(d) * adjacency / (1.0 - alpha * M)
    rows, inverse = np.unique(np.column_stack([u_w, u_e, r_w]), axis=0, return_inverse=True)
    k = np.arange(iterations + 1)
    groups = []
    for g, (uw, ue, r) in enumerate(rows.tolist()):
        decay = r ** k
        groups.append((np.flatnonzero(inverse.reshape(-1) == g), Mechanism(
            (Releases("e-masked", "laplace", np.asarray(base), ue * decay),
             Releases("w-masked", "laplace", np.asarray(alpha * base), uw * decay)),
            adjacency=f"function (Definition 1, adjacency_radius = {adjacency:g})",
            horizon=iterations,
            source=f"paper 004 Theorem 3's sensitivities, Mbar = {M:.6g}, d = {d}",
            relation="replace_one")))
    return groups
