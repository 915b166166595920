"""Paper 002 (Chen & Wang): local-DP accounting of Algorithm 1, and the baselines' own budgets.

**Algorithm 1: Lemma 1 + Theorem 5(1)** (finite horizon T, pure epsilon, local DP per agent).
Adjacency (Definition 1): agent i's data stream differs in one time-indexed sample (batch)
``xi_k^i``. Assumption 5: ``||grad l(theta, xi)||_1 <= d`` (an **l1** bound; a required input,
never guessed). With ``wbar = min_i |w_ii|`` and ``lambda_t = lambda0/(t+1)^v``:

    rho_t     = sum_{p=1}^{t-1} (1 - wbar)^{t-p} lambda_{p-1} + lambda_{t-1}
              = (1 - wbar) rho_{t-1} + lambda_{t-1},  rho_0 = 0
    Delta_t^i <= 2 d rho_t                                              ((22))
    nu_t^i    = sigma0_i / (sqrt(2) (t+1)^{varsigma_i})                 (Theorem 5)
    eps^i(T)  = sum_{t=1}^T Delta_t^i / nu_t^i
              = sum_{t=1}^T 2 sqrt(2) d rho_t (t+1)^{varsigma_i} / sigma0_i   (Lemma 1, Thm 5(1))

Agents may have their own ``sigma0_i`` and ``varsigma_i``; ``wbar`` is the paper's network-wide
minimum (using agent i's own |w_ii| would be smaller than the theorem's figure, which this
library never reports). The factor ``1 - wbar`` bounds ``|1 + w_ii|`` only when every
``|w_ii| <= 1``; that is required (it holds under Assumption 3, whose eigenvalue bounds contain the
diagonal). The sum covers messages y_1..y_T (y_0 carries no data: Delta_0 = 0). The bound grows
like T^{1 - v + varsigma_i}.

**Theorem 5(2) is not computed.** Its infinite-horizon bound
``eps^i <= 2 sqrt(2) lambda0 C3 d / (sigma0_i (v - varsigma_i))`` needs the constant C3 of (27),
which depends on constants C2 and T0 that (25) only asserts to exist; the paper gives no values,
so no number follows. Only the finite-horizon figure is reported, and every guarantee says so.

**Baselines' own budgets** (for the comparison "each baseline gets the largest budget among
Algorithm 1's agents"):

* DOLA (Li, Zhou, Xiong, Wang & Wang, TKDE 2018) and DMOD (Yuan, Lei & Hong 2023): Laplace
  noise ``Lap(mu_t)`` on the broadcast state with ``mu_t = Delta_t / eps``,
  ``Delta_t = 2 alpha_t sqrt(n) L`` (l2 gradient bound L, dimension n: the l1 sensitivity of one
  projected gradient step whose gradient changes by at most 2L). Their theorem makes every
  iteration eps-DP and the whole run eps-DP, each sample being used in one iteration only
  (parallel composition): ``eps = 2 alpha0 sqrt(n) L / b`` for ``mu_t = b alpha_t / alpha0``
  (``variant="published"``). Paper 002 lets them use the all-data gradient, where sample
  xi_k enters every later gradient with weight 1/(t+1); basic composition over those iterations
  gives ``eps = (2 alpha0 sqrt(n) L / b) sum_{t=1}^T 1/t`` (``variant="all-data"``). Both
  ignore the propagation of a sample's influence through the state, as the original proofs do.
* PDOP (Huang, Mitra & Vaidya 2015): its own accountant lives with the shared DPDO
  implementation.
* LDOL (eq. (17), [47]): :func:`ldol_epsilons` applies Theorem 5(1)'s argument to (17)
  (``[DERIVED]``; [47]'s own theorem was not available): the coupling is ``gamma_t w_ij``, so
  ``rho_t = max_i |1 - gamma_{t-1} |w_ii|| rho_{t-1} + lambda_{t-1}``, the projection onto a box is
  l1-nonexpansive, and the (increasing) noise has ``nu_t = sigma0_i (t+1)^{varsigma_i}/sqrt(2)``.

**Mechanisms** (:func:`ldp_online_mechanism`, :func:`ldol_mechanism`, :func:`dola_mechanism`):
the same Laplace releases with their l1 sensitivities as :mod:`dpnet.privacy.mechanism` events,
which the generic accountants (``laplace``, ``rdp``, ``pld``) compose: basic composition gives
back Theorem 5(1), LDOL's derived budget and DOLA's ``"all-data"`` variant exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError, positive, positive_int, require
from ..graphs import spectral
from .guarantee import PrivacyGuarantee
from .mechanism import Mechanism, Releases

PerAgent = float | Sequence[float] | np.ndarray

THEOREM5 = ("Chen & Wang (paper 002), Lemma 1 + Theorem 5(1): eps_i(T) = sum_{t=1}^T "
            "2 sqrt(2) d rho_t (t+1)^varsigma_i / sigma0_i (finite horizon)")
NO_C3 = ("Theorem 5(2) (finite budget as T -> inf) is not computed: its constant C3 depends on "
         "the free constants C2 and T0 of (25), for which the paper gives no values")


# ---- graph quantities --------------------------------------------------------------------------

def assumption3(graph) -> dict[str, Any]:
    """Eigenvalues of paper 002's Laplacian-like W (``graph.laplacian_like``) and whether
    Assumption 3 holds: symmetric, ``W1 = 0``, ``-1 < delta_m <= ... <= delta_2 < delta_1 = 0``.
    Also ``mixing_radius``: the spectral radius of ``I + W`` on the disagreement space (< 1 is
    what consensus needs), and ``wbar = min_i |w_ii|``.

    Sparse, O(edges) apart from the spectrum: every eigenvalue (LAPACK) up to
    :data:`dpnet.graphs.spectral.DENSE_SPECTRAL_MAX` agents, above it only the three the
    assumption names, by shift-invert Lanczos on ``L = -W`` (``eigenvalues`` is then None)."""
    W = graph.sparse("laplacian_like")
    sym = graph.is_symmetric()
    diag = W.diagonal().copy()
    zero_rows = bool(np.abs(np.asarray(W.sum(axis=1)).ravel()).max() <= 1e-10)
    if graph.n <= spectral.DENSE_SPECTRAL_MAX or not sym:
        Wd = W.toarray()
        ev = np.sort(np.linalg.eigvalsh(0.5 * (Wd + Wd.T)))[::-1]     # delta_1 >= delta_2 >= ...
        d1, d2, dm = float(ev[0]), float(ev[1]) if ev.size > 1 else 0.0, float(ev[-1])
        rest = ev[1:] if ev.size > 1 else np.zeros(1)
        radius = float(np.max(np.abs(1.0 + rest)))
    else:  # W1 = 0 was checked: delta_1 = 0 belongs to the constant vector
        L = -W
        lo, dm_neg = spectral.symmetric_extremes(L, 0.0, float(abs(L).sum(axis=1).max()))
        ev, d1, d2, dm = None, -lo, -spectral.laplacian_second_smallest(L), -dm_neg
        radius = max(abs(1.0 + d2), abs(1.0 + dm))
    holds = sym and zero_rows and dm > -1.0 and d2 < -1e-12 and abs(d1) <= 1e-10
    return {"eigenvalues": ev, "delta_1": d1, "delta_2": d2, "delta_m": dm, "holds": holds,
            "mixing_radius": radius, "wbar": float(np.min(np.abs(diag))), "diag": diag}


def wbar(graph) -> float:
    """``min_i |w_ii|`` of the Laplacian-like W; requires every ``|w_ii| <= 1`` (see module)."""
    d = np.abs(graph.sparse("laplacian_like").diagonal())
    require(bool(np.all(d <= 1.0 + 1e-12)), "graph", f"{graph.name} (max |w_ii| = {d.max():.4g})",
            "every |w_ii| = sum_j w_ij <= 1, so that |1 + w_ii| <= 1 - wbar (Theorem 5's proof)")
    return float(d.min())


# ---- Algorithm 1 -------------------------------------------------------------------------------

def step_sizes(lambda0: float, v: float, T: int) -> np.ndarray:
    """``lambda_t = lambda0/(t+1)^v`` for t = 0..T-1."""
    return lambda0 / np.arange(1, T + 1, dtype=np.float64) ** v


def sensitivity_factors(lambda0: float, v: float, wbar: float, T: int) -> np.ndarray:
    """``rho_1..rho_T`` (length T) by the recursion ``rho_t = (1 - wbar) rho_{t-1} +
    lambda_{t-1}``, ``rho_0 = 0`` (equal to Theorem 5's closed sum)."""
    T = positive_int("iterations", T)
    require(0 <= wbar <= 1, "wbar", wbar, "0 <= wbar <= 1")
    lam = step_sizes(lambda0, v, T)
    rho = np.empty(T)
    r = 0.0
    for t in range(T):                      # rho_{t+1} = (1 - wbar) rho_t + lambda_t
        r = (1.0 - wbar) * r + lam[t]
        rho[t] = r
    return rho


def ldp_online_epsilons(lambda0: float, v: float, sigma0: PerAgent, varsigma: PerAgent,
                        wbar: float, l1_gradient_bound: float, T: int,
                        n_agents: int | None = None) -> np.ndarray:
    """Per-agent ``eps^i(T)`` of Theorem 5(1) (see the module docstring)."""
    d = positive("l1_gradient_bound", l1_gradient_bound)
    positive("lambda0", lambda0)
    s0 = np.atleast_1d(np.asarray(sigma0, dtype=np.float64))
    vs = np.atleast_1d(np.asarray(varsigma, dtype=np.float64))
    n = n_agents or max(s0.size, vs.size)
    for name, arr in (("sigma0", s0), ("varsigma", vs)):
        require(arr.size in (1, n), name, arr.tolist(), f"a scalar or one entry per agent ({n})")
    s0, vs = np.broadcast_to(s0, (n,)), np.broadcast_to(vs, (n,))
    require(bool(np.all(s0 >= 0)), "sigma0", s0.tolist(), "sigma0_i >= 0")
    rho = sensitivity_factors(lambda0, v, wbar, T)
    tt = np.arange(2, T + 2, dtype=np.float64)                        # t + 1 for t = 1..T
    sums = np.array([float(np.sum(rho * tt ** c)) for c in vs])
    with np.errstate(divide="ignore"):
        return np.where(s0 > 0, 2.0 * math.sqrt(2.0) * d * sums / np.where(s0 > 0, s0, 1.0),
                        math.inf)


def ldp_online_guarantee(graph, iterations: int | None, lambda0: float, v: float,
                         sigma0: PerAgent, varsigma: PerAgent,
                         l1_gradient_bound: float | None) -> PrivacyGuarantee:
    """The :class:`PrivacyGuarantee` of Algorithm 1 over ``iterations`` = T."""
    if iterations is None:
        raise ParameterError("iterations", None, "a finite horizon T", NO_C3)
    if l1_gradient_bound is None:
        raise ParameterError("l1_gradient_bound", None,
                             "the l1 gradient bound d of Assumption 5 (||grad l||_1 <= d) must be "
                             "given: it depends on the data and the domain, and is not guessed")
    info = assumption3(graph)
    wb = wbar(graph)
    eps = ldp_online_epsilons(lambda0, v, sigma0, varsigma, wb, l1_gradient_bound, iterations,
                              graph.n)
    assumptions = (f"Assumption 5: ||grad l(theta, xi)||_1 <= d = {l1_gradient_bound:g} for every "
                   "theta reached and every sample (batch)",
                   f"wbar = min_i |w_ii| = {wb:g}",
                   "Laplace noise on the transmitted message only, nu_t^i = sigma0_i/(sqrt(2) "
                   "(t+1)^varsigma_i)",
                   "Assumption 3 " + ("holds" if info["holds"] else
                                      f"does NOT hold (delta_m = {info['delta_m']:.4g}, "
                                      f"delta_2 = {info['delta_2']:.4g}); the privacy bound does "
                                      "not use it, the convergence theorems do"))
    notes = (NO_C3, "local DP per agent: a neighbour's messages are external information "
             "(Remark 1); epsilon is the worst agent's, per_agent lists all",
             "sum over messages y_1..y_T: Algorithm 1 also sends y_T at its last iteration")
    return PrivacyGuarantee.from_per_agent(eps, delta=0.0, horizon=int(iterations),
                                           theorem=THEOREM5, assumptions=assumptions, notes=notes)


# ---- baselines ---------------------------------------------------------------------------------

def ldol_sensitivity_factors(lambda0: float, v: float, gamma0: float, u: float,
                             degrees: np.ndarray, T: int) -> np.ndarray:
    """``rho_1..rho_T`` of LDOL (17): ``rho_t = max_i |1 - gamma_{t-1} deg_i| rho_{t-1} +
    lambda_{t-1}``, ``rho_0 = 0`` (the l1 sensitivity of message t is ``2 d rho_t``)."""
    deg = np.asarray(degrees, dtype=np.float64)
    lam = step_sizes(lambda0, v, T)
    gam = step_sizes(gamma0, u, T)
    rho = np.empty(T)
    r = 0.0
    for t in range(T):
        r = float(np.max(np.abs(1.0 - gam[t] * deg))) * r + lam[t]
        rho[t] = r
    return rho


def ldol_epsilons(lambda0: float, v: float, gamma0: float, u: float, sigma0: PerAgent,
                  varsigma: PerAgent, degrees: np.ndarray, l1_gradient_bound: float,
                  T: int) -> np.ndarray:
    """``[DERIVED]`` per-agent budget of LDOL (17) over T iterations (see the module docstring):
    ``rho_t = max_i |1 - gamma_{t-1} deg_i| rho_{t-1} + lambda_{t-1}``,
    ``eps^i = sum_{t=1}^T 2 d rho_t sqrt(2) / (sigma0_i (t+1)^varsigma_i)``."""
    d = positive("l1_gradient_bound", l1_gradient_bound)
    T = positive_int("iterations", T)
    deg = np.asarray(degrees, dtype=np.float64)
    n = deg.size
    s0 = np.broadcast_to(np.atleast_1d(np.asarray(sigma0, dtype=np.float64)), (n,))
    vs = np.broadcast_to(np.atleast_1d(np.asarray(varsigma, dtype=np.float64)), (n,))
    rho = ldol_sensitivity_factors(lambda0, v, gamma0, u, deg, T)
    tt = np.arange(2, T + 2, dtype=np.float64)
    sums = np.array([float(np.sum(rho * tt ** (-c))) for c in vs])
    with np.errstate(divide="ignore"):
        return np.where(s0 > 0, 2.0 * math.sqrt(2.0) * d * sums / np.where(s0 > 0, s0, 1.0),
                        math.inf)


def dola_epsilon(alpha0: float, noise_scale: float, lipschitz: float, dim: int,
                 iterations: int | None = None, variant: str = "published") -> float:
    """DOLA's / DMOD's budget for noise ``mu_t = noise_scale * alpha_t / alpha0`` (the step-size
    decay): ``2 alpha0 sqrt(n) L / b`` (``"published"``), times ``H_T = sum_{t=1}^T 1/t``
    (``"all-data"``)."""
    require(variant in ("published", "all-data"), "variant", variant, "'published' or 'all-data'")
    positive("alpha0", alpha0)
    L = positive("lipschitz", lipschitz)
    if noise_scale == 0:
        return math.inf
    per = 2.0 * alpha0 * math.sqrt(dim) * L / positive("noise_scale", noise_scale)
    if variant == "published":
        return per
    T = positive_int("iterations", iterations)
    return per * float(np.sum(1.0 / np.arange(1, T + 1)))


def dola_noise_scale(alpha0: float, epsilon: float, lipschitz: float, dim: int,
                     iterations: int | None = None, variant: str = "published") -> float:
    """The ``b`` with :func:`dola_epsilon` = ``epsilon`` (closed form)."""
    positive("epsilon", epsilon)
    return dola_epsilon(alpha0, 1.0, lipschitz, dim, iterations, variant) / epsilon


def dola_guarantee(name: str, alpha0: float, noise_scale: float, lipschitz: float | None,
                   dim: int, iterations: int | None, variant: str, reference: str,
                   n_agents: int) -> PrivacyGuarantee:
    """The guarantee of DOLA or DMOD (``name``; the theorem line cites ``reference``) from
    :func:`dola_epsilon`: the same pure epsilon for each of the ``n_agents`` agents, over any number of
    iterations for ``variant="published"`` (every iteration eps-DP, parallel composition over the
    samples), over ``iterations`` for ``"all-data"``. ``lipschitz`` is the l2 gradient bound L (the
    ``gradient_bound`` assumption); None raises :class:`~dpnet.errors.ParameterError`."""
    if lipschitz is None:
        raise ParameterError("gradient_bound", None, f"the l2 gradient bound L of {name}'s "
                             "sensitivity 2 alpha_t sqrt(n) L must be given")
    eps = dola_epsilon(alpha0, noise_scale, lipschitz, dim, iterations, variant)
    hz = None if variant == "published" else iterations
    return PrivacyGuarantee.from_per_agent(
        [eps] * n_agents, delta=0.0, horizon=hz,
        theorem=f"{reference}: Lap(mu_t), mu_t = 2 alpha_t sqrt(n) L / eps "
                + ("(every iteration eps-DP; parallel composition over the samples)"
                   if variant == "published" else
                   "(all-data gradient: basic composition over the iterations a sample enters)"),
        assumptions=(f"||grad l||_2 <= L = {lipschitz:g} on the projection set",),
        notes=("ignores how a sample's influence propagates through the state, as the original "
               "proof does",))


# ---- mechanisms (the releases the generic accountants compose) ---------------------------------

def _agent_groups(n: int, *columns) -> list[tuple[np.ndarray, tuple[float, ...]]]:
    """Agents grouped by their (per-agent or shared) parameters: ``[(agents, values)]``."""
    cols = np.stack([np.broadcast_to(np.atleast_1d(np.asarray(c, dtype=np.float64)), (n,))
                     for c in columns], axis=1)
    rows, inverse = np.unique(cols, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(np.flatnonzero(inverse == g), tuple(float(x) for x in rows[g]))
            for g in range(rows.shape[0])]


def streaming_mechanism(n: int, T: int, rho: np.ndarray, l1_gradient_bound: float,
                        sigma0: PerAgent, varsigma: PerAgent, sign: float, source: str,
                        message: str) -> list:
    """Per agent group: the messages t = 1..T, Laplace of per-coordinate scale
    ``sigma0_i (t+1)^{sign varsigma_i} / sqrt(2)``, l1 sensitivity ``2 d rho_t`` (sign -1:
    Algorithm 1's decreasing noise, +1: LDOL's increasing noise)."""
    d = positive("l1_gradient_bound", l1_gradient_bound)
    tt = np.arange(2, T + 2, dtype=np.float64)
    out = []
    for agents, (s0, vs) in _agent_groups(n, sigma0, varsigma):
        scale = s0 * tt ** (sign * vs) / math.sqrt(2.0)
        out.append((agents, Mechanism((Releases(message, "laplace", 2.0 * d * rho, scale),),
                                      "record", T, source, relation="replace_one")))
    return out


def ldp_online_mechanism(graph, T: int | None, lambda0: float, v: float, sigma0: PerAgent,
                         varsigma: PerAgent, l1_gradient_bound: float | None) -> list:
    """Algorithm 1's releases y_1..y_T (Lemma 1's sensitivity (22), Theorem 5's noise): their
    basic composition is Theorem 5(1)."""
    if T is None:
        raise ParameterError("iterations", None, "a finite horizon T", NO_C3)
    if l1_gradient_bound is None:
        raise ParameterError("l1_gradient_bound", None, "the l1 gradient bound d of Assumption 5")
    rho = sensitivity_factors(lambda0, v, wbar(graph), int(T))
    return streaming_mechanism(graph.n, int(T), rho, l1_gradient_bound, sigma0, varsigma, -1.0,
                               "paper 002, (22): Delta_t = 2 d rho_t", "y_t = theta_t + Lap")


def ldol_mechanism(graph, T: int | None, lambda0: float, v: float, gamma0: float, u: float,
                   sigma0: PerAgent, varsigma: PerAgent, l1_gradient_bound: float | None) -> list:
    """LDOL's releases theta_t + varthetachk_t, t = 1..T (``[DERIVED]`` sensitivity, see
    :func:`ldol_epsilons`)."""
    if T is None or l1_gradient_bound is None:
        raise ParameterError("iterations/l1_gradient_bound", (T, l1_gradient_bound),
                             "a finite horizon and the l1 gradient bound d")
    deg = np.abs(graph.sparse("laplacian_like").diagonal())
    rho = ldol_sensitivity_factors(lambda0, v, gamma0, u, deg, int(T))
    return streaming_mechanism(graph.n, int(T), rho, l1_gradient_bound, sigma0, varsigma, 1.0,
                               "[DERIVED] Theorem 5(1)'s argument on (17): Delta_t = 2 d rho_t",
                               "theta_t + Lap (17)")


def dola_mechanism(n_agents: int, alpha0: float, power: float, noise_scale: float,
                   lipschitz: float | None, dim: int, T: int | None, name: str = "DOLA") -> list:
    """DOLA's / DMOD's broadcasts w_t + Lap(mu_t), t = 1..T, for a sample drawn at the first
    iteration, which enters every later all-data gradient with weight 1/t: l1 sensitivity
    ``2 alpha_t sqrt(n) L / t`` (``alpha_t = alpha0 / t^p``) under ``mu_t = b t^{-p}``; their
    basic composition is ``variant="all-data"`` of :func:`dola_epsilon` (the published account
    charges one release). Like both accounts, it ignores how a sample's influence propagates
    through the state."""
    if lipschitz is None:
        raise ParameterError("gradient_bound", None, f"the l2 gradient bound L of {name}'s "
                             "sensitivity 2 alpha_t sqrt(n) L must be given")
    L = positive("gradient_bound", lipschitz)
    T = positive_int("iterations", T)
    t = np.arange(1, T + 1, dtype=np.float64)
    alpha = alpha0 / t ** power
    release = Releases("w_t + Lap(mu_t)", "laplace", 2.0 * alpha * math.sqrt(dim) * L / t,
                       noise_scale * t ** (-power))
    return [(np.arange(n_agents), Mechanism(
        (release,), "record", T, f"{name}: Delta_t = 2 alpha_t sqrt(n) L / t (all-data gradient)",
        ("ignores how a sample's influence propagates through the state, as the original "
         "proof does",), relation="replace_one"))]
