"""White-box canary audits of DP-SGD-type algorithms (:class:`~dpnet.algorithms.DPSGD` and
:class:`~dpnet.algorithms.DECOR`): can the audit of a calibrated configuration fail?

**Canary pair** (Nasr et al., S&P 2021 and USENIX Security 2023): the adversary chooses the
replaced record. Its gradient is a Dirac canary ``+C e_1`` in world A and ``-C e_1`` in world B
(the antipodal worst case of the replace-one pair, C the clipping bound); every other record's
gradient is zero, which the guarantee must survive as it survives any dataset. The problem is
:class:`~.engine.LinearRecords` with one coordinate (the other coordinates carry no signal and
independent noise). Sampling rate, noise multiplier(s), clipping and horizon are the audited
configuration's; its record count only sets the normaliser the adversary divides out.

**Runs as agents.** ``R`` runs per world are ``2R`` copies of the configuration's graph in one
run, block-diagonal (DP-SGD's per-record guarantee does not depend on the graph, and its copies
run on the identity; DECOR's does, and runs on copies of the task's graph). Every copy's first
agent holds the canary.

**Score** (what the eavesdropper of every message computes): from agent i's broadcast half-step
``x_{i,t+1/2} = x_{i,t} - (lr/b)(S_{i,t} + xi_{i,t})`` and its state ``x_{i,t}`` (a gossip average
of messages) it recovers the noisy clipped sum ``y_{i,t} = S_{i,t} + xi_{i,t}``; DECOR's
correlated noise is whitened for the canary agent, ``s_t = (M^{-1} y_t)_0 / (M^{-1})_00``, which
is ``S + N(0, z_eff^2 C^2)``. The exact log-likelihood ratio of the sampled mixture,
``sum_t log((1-q) phi(s_t) + q phi(s_t - C)) - log((1-q) phi(s_t) + q phi(s_t + C))`` in units
of the noise, is the Neyman-Pearson score.

**Estimators** (:mod:`.estimators`): the Clopper-Pearson lower bound (threshold chosen on half
the runs, bound on the other half) and the Gaussian-DP fit of the scores (an estimate); the
**power** is the smallest silent noise reduction (x0.9, 0.7, 0.5, 0.3) whose runs certify more
than the claim.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from ... import graphs
from ...algorithms import DECOR, DPSGD
from ...errors import require
from ...runner import RunDiagnosis, run
from ...threads import torch_threads
from . import estimators
from .engine import LinearRecords, silently_scaled, threshold_test

#: silent noise reductions the power column tries, mildest first
REDUCTIONS = (0.9, 0.7, 0.5, 0.3)
#: records per agent in the audit problem (only the canary's inclusion matters)
RECORDS = 32


def _copies(graph, copies: int, decor: bool):
    """``copies`` disjoint copies of ``graph`` (DECOR) or of one agent (DP-SGD)."""
    if not decor:
        return graphs.from_weights(sp.identity(copies, format="csr"), name="audit copies"), 1
    W = sp.block_diag([sp.csr_matrix(graph.sparse("W"))] * copies, format="csr")
    return graphs.from_weights(W, name=f"{copies} copies of {graph.name}"), graph.n


def scores(alg: DPSGD, graph, iterations: int, runs: int, seed: int = 0) -> np.ndarray:
    """``(2, runs)``: the canary LLR score of every run in world A (row 0) and B (row 1)."""
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
                  record=True, reference=None, log_every=iterations)
    half = res.transcript.stacked("x", net.n)[:, :, 0]                    # (T, N)
    W = sp.csr_matrix(net.sparse("W"))
    state = np.vstack([np.zeros((1, net.n)), (W @ half[:-1].T).T])        # x_t from messages
    y = (state - half) * (q * RECORDS) / alg.lr                           # S + xi, (T, N)
    if is_decor:
        L = graph.matrix("unweighted_laplacian")
        M = alg.noise_multiplier ** 2 * np.eye(n) + alg.pair_multiplier ** 2 * L
        w = np.linalg.inv(M)[:, 0]
        s = y.reshape(iterations, 2 * runs, n) @ (w / w[0])               # whitened, agent 0
        sigma = C / math.sqrt(w[0])
    else:
        s, sigma = y, alg.noise_multiplier * C
    u, a = s / sigma, C / sigma
    skip = math.log1p(-q) if q < 1 else -math.inf        # the canary's slot not sampled
    llr = (np.logaddexp(skip - u ** 2 / 2, math.log(q) - (u - a) ** 2 / 2)
           - np.logaddexp(skip - u ** 2 / 2, math.log(q) - (u + a) ** 2 / 2))
    total = llr.sum(axis=0)                                               # (2 runs,)
    return np.stack([total[:runs], total[runs:]])


def audit(alg: DPSGD, graph, iterations: int, claim: float, delta: float, runs: int = 2000,
          seed: int = 0, confidence: float = 0.95, power: bool = True) -> dict[str, Any]:
    """The canary audit of a calibrated configuration against its ``claim`` (epsilon at
    ``delta``): the CP lower bound, the GDP estimate and, with ``power``, the smallest silent
    noise reduction caught."""
    start = time.perf_counter()
    with torch_threads(1):
        def bound(factor: float) -> tuple[float, dict]:
            a = alg if factor == 1.0 else silently_scaled(alg, factor)
            sa, sb = scores(a, graph, iterations, runs, seed)
            test = threshold_test(sa[:, None], sb[:, None], confidence, delta, "projection")
            return test["epsilon"], estimators.gdp_fit_epsilon(sa, sb, delta)

        lower, gdp = bound(1.0)
        caught = None
        if power:
            for f in REDUCTIONS:
                if bound(f)[0] > claim:
                    caught = f
                    break
    return {"claimed": claim, "lower_bound": lower, "gdp_estimate": gdp["epsilon"],
            "gdp_mu": gdp["mu"], "ratio": lower / claim if claim > 0 else math.nan,
            "runs": runs, "iterations": iterations, "violated": lower > claim,
            "caught_at": caught, "seconds": time.perf_counter() - start}
