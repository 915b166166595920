"""White-box canary audits of Gaussian minibatch algorithms: DP-SGD and DECOR
(:class:`~dpnet.algorithms.DPSGD`, :class:`~dpnet.algorithms.DECOR`), DO-ADP and DP-DDA
(:class:`~dpnet.algorithms.DOADP`, :class:`~dpnet.algorithms.DPDDA`) and paper 003's federated
baseline :class:`~dpnet.algorithms.kang_wddp.KangWDDP`: can the audit of a calibrated
configuration fail?

**Canary pair** (Nasr et al., S&P 2021 and USENIX Security 2023): the adversary chooses the
replaced record. Its gradient is a Dirac canary ``+C e_1`` in world A and ``-C e_1`` in world B
(the antipodal worst case of the replace-one pair, C the clipping bound); every other record's
gradient is zero, which the guarantee must survive as it survives any dataset. The problem has
one coordinate: the noise is isotropic and every operation of these algorithms is linear and
coordinate-wise (DO-ADP's Top-k only with k = d, which is required), so the canary's coordinate
carries the whole pair. Sampling, noise, clipping and horizon are the audited configuration's.

**Runs as agents.** ``R`` runs per world are ``2R`` copies in one run. DP-SGD's per-record
guarantee does not depend on the graph: its copies are single agents on the identity. DECOR's
does: copies of the task's graph. DO-ADP and DP-DDA send every noisy gradient through a public
function of the messages, so the eavesdropper recovers agent 0's ``g + theta`` exactly on any
graph: copies of the two-agent complete graph (KangWDDP: of its two-party server). Their fixed
batch of B of the task's m records holds the canary with probability B/m at each step
(:class:`~.engine.RecordPair` draws that inclusion, the exact law of what the batch mean shows),
and the batch's other records sit at ``+C e_1``: the canary's inclusion decides how many of
them are drawn, and this is the fixed batch's worst case (the add-or-remove pair at ``2C/B``).
Their Poisson batch (rate B/m, the clipped sum over the public B) has the other records at zero,
its replace-one worst case: the canary shows ``+-C/B`` with probability B/m, a mixture against a
mixture, which is what their PLD account of the Poisson pair charges.

**Score** (what the eavesdropper of every message computes): the canary agent's noisy clipped
gradient at each step, recovered from the messages,

- DP-SGD: ``y_t = S_t + xi_t`` from the broadcast half-step and the state (a gossip average of
  messages); DECOR's correlated noise whitened for the canary agent,
  ``s_t = (M^{-1} y_t)_0 / (M^{-1})_00``, which is ``S + N(0, z_eff^2 C^2)``;
- DO-ADP: ``g + theta = m_{t+1} - beta m_t``, with ``alpha m_{t+1} = x_t - gamma [L x^_t]_0 -
  x_{t+1}`` from the public copies ``x^`` (an active agent's new state is its copy); an inactive
  step shows nothing and scores 0 (who is active is seen);
- DP-DDA: the innovation ``z_{t+1} - [W z_t]_0`` (0 when inactive); the last step's is never
  sent, so T - 1 steps are scored.

Standardised, ``u_t = y_t / sigma`` with the canary's shift ``a = C / (B sigma)``, the exact
log-likelihood ratio of the sampled mixture,
``sum_t log((1-q) phi(u_t) + q phi(u_t - a)) - log((1-q) phi(u_t) + q phi(u_t + a))``, is the
Neyman-Pearson score.

**Estimators** (:mod:`.estimators`): the Clopper-Pearson lower bound (threshold chosen on half
the runs, bound on the other half) at the claim's delta and, given the account's privacy
profile, at the larger deltas of :data:`PROFILE_DELTAS` (every point of the profile is claimed;
Bonferroni over the points), and the Gaussian-DP fit of the scores (an estimate); the **power**
is the smallest silent noise reduction (x0.9, 0.7, 0.5, 0.3) whose runs exceed a claimed point.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from ... import graphs
from ...algorithms.decor import DECOR
from ...algorithms.doadp import DOADP
from ...algorithms.dp_sgd import DPSGD
from ...algorithms.dpdda import DPDDA
from ...algorithms.kang_wddp import KangWDDP, server_graph
from ...errors import ParameterError, require
from ...runner import RunDiagnosis, run
from ...threads import torch_threads
from . import estimators
from .engine import LinearRecords, RecordPair, run_copies, silently_scaled, threshold_test

#: silent noise reductions the power column tries, mildest first
REDUCTIONS = (0.9, 0.7, 0.5, 0.3)
#: the deltas besides the claim's at which a profile is audited (``audit(profile=...)``)
PROFILE_DELTAS = (1e-4, 1e-3, 1e-2)
#: copies per batch of a DO-ADP / DP-DDA canary audit (bounds the transcript's memory)
CHUNK = 20_000
#: records per agent in the audit problem (only the canary's inclusion matters)
RECORDS = 32


#: the algorithms :func:`scores` recovers a canary statistic for (named in its error)
AUDITED = ("dp_sgd", "decor", "doadp", "dp_dda", "kang_wddp")


def covers(alg) -> bool:
    """Whether a canary audit reproduces ``alg``'s configuration exactly: DP-SGD or DECOR with
    Poisson sampling, DO-ADP (k = d) or DP-DDA with a clipped batch (fixed or Poisson)."""
    if isinstance(alg, DPSGD):
        return alg.sampling == "poisson"
    return (isinstance(alg, DOADP | DPDDA) and getattr(alg, "k", None) is None
            and alg.clip is not None)


def _copies(graph, copies: int, decor: bool):
    """``copies`` disjoint copies of ``graph`` (DECOR) or of one agent (DP-SGD)."""
    if not decor:
        return graphs.from_weights(sp.identity(copies, format="csr"), name="audit copies"), 1
    W = sp.block_diag([sp.csr_matrix(graph.sparse("W"))] * copies, format="csr")
    return graphs.from_weights(W, name=f"{copies} copies of {graph.name}"), graph.n


def _dp_sgd_sums(alg: DPSGD, graph, iterations: int, runs: int, seed: int,
                 randomness: str = "reproducible"):
    """DP-SGD / DECOR: ``(u, a_A, a_B, q)``, the standardised noisy clipped sums
    ``(T, 2 runs)`` and the canary's shift in each world."""
    require(alg.sampling == "poisson", "sampling", alg.sampling, "'poisson' (the canary audit "
            "reproduces the rate exactly; a fixed batch's B/m needs the task's m)")
    is_decor = isinstance(alg, DECOR)
    net, n = _copies(graph, 2 * runs, is_decor)
    C, q = alg.clip.bound, alg.rate
    c = np.zeros((net.n, RECORDS, 1))
    first = np.arange(0, net.n, n)
    c[first[:runs], 0, 0], c[first[runs:], 0, 0] = C, -C
    with warnings.catch_warnings():     # a linear loss has no optimum to diagnose a run against
        warnings.simplefilter("ignore", RunDiagnosis)
        res = run(alg, LinearRecords(c), net, iterations, x0=np.zeros((net.n, 1)), seed=seed,
                  record=True, reference=None, log_every=iterations, randomness=randomness)
    assert res.transcript is not None and q is not None   # record=True; poisson sets a rate
    half = res.transcript.stacked("x", net.n)[:, :, 0]                    # (T, N)
    W = sp.csr_matrix(net.sparse("W"))
    state = np.vstack([np.zeros((1, net.n)), (W @ half[:-1].T).T])        # x_t from messages
    y = (state - half) * (q * RECORDS) / alg.lr                           # S + xi, (T, N)
    if is_decor:
        L = graph.matrix("unweighted_laplacian")
        M = alg.noise_multiplier ** 2 * np.eye(n) + cast(DECOR, alg).pair_multiplier ** 2 * L
        w = np.linalg.inv(M)[:, 0]
        s = y.reshape(iterations, 2 * runs, n) @ (w / w[0])               # whitened, agent 0
        sigma = C / math.sqrt(w[0])
    else:
        s, sigma = y, alg.noise_multiplier * C
    return s / sigma, C / sigma, -C / sigma, q


def _batch_size(alg) -> int:
    return alg.batch if isinstance(alg, KangWDDP) else alg.batch_size


def _minibatch_gradients(alg, iterations: int, runs: int, seed: int, records: int,
                         gradient_bound: float | None):
    """DO-ADP / DP-DDA / KangWDDP: ``(u, a_A, a_B, q)``, agent 0's noisy gradients
    ``g + theta`` recovered from the messages, standardised (and, for a fixed batch, centred on
    the other records' mean), ``(T, 2 runs)`` (``T - 1`` for DP-DDA), NaN where the agent was
    inactive. C is the clipping bound, or for KangWDDP (no clipping) the ``gradient_bound`` G its
    claim assumes.

    A fixed batch puts the other records at ``+C e_1`` (its worst case, the add-or-remove pair at
    ``2C/B``). A Poisson batch puts them at zero, its worst case under replace-one (their
    inclusion is independent of the canary's, so nonzero records only add shared noise): the
    clipped sum is then the canary's alone, ``+-C`` with probability ``B/m``, divided by the
    public B, which is what a fixed batch of the same B over records of which only the canary
    is nonzero shows. The audit runs that twin (the same law of every message), drawing the
    canary's inclusion as one Bernoulli instead of m uniforms per step."""
    sampling = getattr(alg, "sampling", "fixed")            # KangWDDP: always a fixed batch
    require(getattr(alg, "k", None) is None, "k", getattr(alg, "k", None), "None (Top-k "
            "with k < d is not coordinate-wise: its canary pair is not one coordinate)")
    clip = getattr(alg, "clip", None)
    C = clip.bound if clip is not None else gradient_bound
    require(C is not None, "gradient_bound", gradient_bound, f"the bound G on every gradient "
            f"that {alg.name}'s claim assumes (the canary's norm; it does not clip)")
    assert C is not None                                    # the require above raised otherwise
    B, sigma = _batch_size(alg), alg.sigma
    require(B <= records, "records", records, f">= the batch {B} (the task's m local records)")
    poisson = sampling == "poisson"
    if poisson:
        alg = copy.copy(alg)
        alg.sampling = "fixed"
    rest = 0.0 if poisson else 1.0
    pair = [RecordPair(2, records, np.ones(1), C, sign, 0.0, rest=rest) for sign in (1.0, -1.0)]
    net = server_graph(2) if isinstance(alg, KangWDDP) else graphs.complete(2)
    seeds, world = seed * 2 * runs + np.arange(2 * runs), np.repeat([0, 1], runs)
    y = np.concatenate([_recovered(alg, run_copies(alg, pair, net, iterations, np.zeros(1),
                                                   seeds[c:c + CHUNK], world[c:c + CHUNK]),
                                   net.matrix("W"), C, sigma)
                        for c in range(0, 2 * runs, CHUNK)], axis=1)
    if poisson:             # the canary moves the mean by +C/B (A) or -C/B (B) when drawn
        return y / sigma, C / (B * sigma), -C / (B * sigma), B / records
    # the other B - 1 (or B) records add C; the canary moves the mean by 0 (A) or -2C/B (B)
    return (y - C) / sigma, 0.0, -2 * C / (B * sigma), B / records


def _recovered(alg, views: dict[str, np.ndarray], W: np.ndarray, C: float,
               sigma: float) -> np.ndarray:
    """Agent 0's ``g + theta`` of every copy, ``(T, copies)``, from the messages alone."""
    if isinstance(alg, KangWDDP):
        u = views["u"][..., 0]                                            # (copies, T, 2)
        model = np.concatenate([np.zeros((u.shape[0], 1)), u[:, :-1] @ W[0]], axis=1)
        steps = alg.eta / (np.arange(u.shape[1]) + 1.0) ** alg.power
        return ((model - u[:, :, 0]) / steps).T                           # x_k - u_0 = eta_k y
    if isinstance(alg, DPDDA):
        z = views["z"][..., 0]                                            # (copies, T, 2)
        y = (z[:, 1:, 0] - z[:, :-1] @ W[0]).T                            # (T - 1, copies)
        # an inactive node's innovation is exactly 0 (up to the rounding of the re-mixing)
        y[np.abs(y) <= 1e-9 * max(C, sigma)] = np.nan
        return y
    s = views["s"][..., 0]                                                # (copies, T, 2)
    L = np.eye(2) - W
    copies = np.zeros_like(s[:, 0])               # x^_t of both agents, sums of the messages
    x = np.zeros(s.shape[0])                      # agent 0's state x_t (x_0 public)
    m = np.zeros_like(x)
    y = np.full((s.shape[1], s.shape[0]), np.nan)
    for t in range(s.shape[1]):
        sent = s[:, t, 0]
        active = ~np.isnan(sent)
        kept = x - alg.gamma * (copies @ L[0])                            # (5b) without the step
        x_next = np.where(active, copies[:, 0] + np.nan_to_num(sent), kept)
        m_next = np.where(active, (kept - x_next) / alg.alpha, alg.beta * m)
        y[t, active] = (m_next - alg.beta * m)[active]
        copies, x, m = copies + np.nan_to_num(s[:, t]), x_next, m_next
    return y


def scores(alg, graph, iterations: int, runs: int, seed: int = 0,
           records: int | None = None, gradient_bound: float | None = None,
           randomness: str = "reproducible") -> np.ndarray:
    """``(2, runs)``: the canary LLR score of every run in world A (row 0) and B (row 1);
    ``records``: the task's m local records (a fixed batch's rate is B/m); ``gradient_bound``:
    the G an unclipped algorithm's claim assumes (KangWDDP); ``randomness``: the runs' draws
    (``"secret"``: the deployment's, DP-SGD and DECOR)."""
    if isinstance(alg, DPSGD):
        u, a_A, a_B, q = _dp_sgd_sums(alg, graph, iterations, runs, seed, randomness)
    elif isinstance(alg, DOADP | DPDDA | KangWDDP):
        require(randomness == "reproducible", "randomness", randomness, f"'reproducible' for "
                f"{alg.name}'s canary (its batches are replayed from the seed)")
        require(records is not None, "records", records, f"the task's m local records "
                f"({alg.name} samples a fixed batch of them)")
        assert records is not None                          # the require above raised otherwise
        u, a_A, a_B, q = _minibatch_gradients(alg, iterations, runs, seed, records,
                                              gradient_bound)
    else:
        raise ParameterError("algorithm", alg.name, f"one of {AUDITED} (a canary audit)")
    skip = math.log1p(-q) if q < 1 else -math.inf        # the canary's slot not sampled
    with np.errstate(invalid="ignore"):                   # NaN: an inactive step, seen as such
        llr = (np.logaddexp(skip - u ** 2 / 2, math.log(q) - (u - a_A) ** 2 / 2)
               - np.logaddexp(skip - u ** 2 / 2, math.log(q) - (u - a_B) ** 2 / 2))
    total = np.nansum(llr, axis=0)             # (2 runs,); an unobserved step (NaN) scores 0
    return np.stack([total[:runs], total[runs:]])


def closest_text(point: dict) -> str:
    """A profile point as the reports print it: ``delta D: audited / claimed``."""
    return f"delta {point['delta']:g}: {point['audited']:.3g} / {point['claimed']:.3g}"


#: the lower bounds an audit can decide by (``audit(estimator=...)``, ``dpnet audit --estimator``)
ESTIMATORS = ("clopper-pearson", "one-run")


def audit(alg, graph, iterations: int, claim: float, delta: float, runs: int = 2000,
          seed: int = 0, confidence: float = 0.95, power: bool = True,
          records: int | None = None,
          profile: Callable[[float], float] | None = None,
          gradient_bound: float | None = None,
          estimator: str = "clopper-pearson", randomness: str = "reproducible") -> dict[str, Any]:
    """The canary audit of a calibrated configuration against its ``claim`` (epsilon at
    ``delta``): the lower bound of ``estimator`` (the Clopper-Pearson threshold test, or the
    one-run test of the same runs read as 2 ``runs`` canaries), the GDP estimate, the other
    estimator's bound beside it and, with ``power``, the smallest silent noise reduction caught.

    ``profile``: the same account's epsilon at another delta. A claim at ``delta`` is one point
    of the accountant's privacy profile, and every point of it is claimed; the runs test the
    points at :data:`PROFILE_DELTAS` too (Bonferroni over all points tested), where a few
    thousand runs resolve the events: a subsampled mechanism's under-reported profile is seen
    there long before its 1e-5 tail is."""
    require(estimator in ESTIMATORS, "estimator", estimator, f"one of {ESTIMATORS}")
    start = time.perf_counter()
    points = [(delta, claim)] + ([(d, profile(d)) for d in PROFILE_DELTAS if d > delta]
                                 if profile is not None else [])
    miss = (1 - confidence) / len(points)

    def lower_bounds(sa, sb, name: str) -> list[float]:
        if name == "one-run":
            return [estimators.one_run_from_scores(sa, sb, d, miss, seed)["epsilon"]
                    for d, _ in points]
        return [threshold_test(sa[:, None], sb[:, None], 1 - miss, d, "projection")["epsilon"]
                for d, _ in points]

    with torch_threads(1):
        def bound(factor: float) -> tuple[list[float], np.ndarray, np.ndarray]:
            a = alg if factor == 1.0 else silently_scaled(alg, factor)
            sa, sb = scores(a, graph, iterations, runs, seed, records, gradient_bound,
                            randomness)
            return lower_bounds(sa, sb, estimator), sa, sb

        def exceeds(audited: list[float]) -> bool:
            return any(e > c for e, (_, c) in zip(audited, points))

        audited, sa, sb = bound(1.0)
        other = lower_bounds(sa, sb, ESTIMATORS[estimator == ESTIMATORS[0]])[0]
        gdp = estimators.gdp_fit_epsilon(sa, sb, delta)
        caught = None
        if power:
            for f in REDUCTIONS:
                if exceeds(bound(f)[0]):
                    caught = f
                    break
    profile_points = [{"delta": d, "claimed": c, "audited": e}
                      for (d, c), e in zip(points, audited)]
    return {"claimed": claim, "estimator": estimator, "lower_bound": audited[0],
            "other_bound": other, "gdp_estimate": gdp["epsilon"], "gdp_mu": gdp["mu"],
            "ratio": audited[0] / claim if claim > 0 else math.nan,
            "profile": profile_points,
            "closest": max(profile_points, key=lambda p: p["audited"] - p["claimed"]),
            "runs": runs, "iterations": iterations,
            "violated": exceeds(audited), "caught_at": caught,
            "seconds": time.perf_counter() - start}
