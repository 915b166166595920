"""The leaderboard's search and what it costs: Papernot & Steinke's random search over an entry's
configurations, and the epsilon of a row with its tuning charged (``epsilon_with_tuning``).

A method's search at one target epsilon draws the number of trials ``K`` from a truncated
negative binomial whose mean is its number of configurations (:mod:`dpnet.privacy.selection`),
runs ``K`` trials, each a configuration drawn uniformly with a fresh seed, and keeps the best on
the validation split (held out of every agent's data, so the score is a post-processing of the
trial). A row then publishes the chosen configuration and its reported seeds' runs. Its
``epsilon_with_tuning`` composes, in Renyi DP, the search's guarantee with those runs'
(adaptively: the runs' curve is the largest over every configuration the search may choose, each
at its own calibration under the row's accountant), converted at the axis' delta; where every
trial's guarantee is pure, the pure bound ``(2 + eta) eps_trial + runs eps_run`` is taken when
smaller. ``eta`` is the one of :data:`~dpnet.privacy.selection.ETAS` that minimises the default
row's charge (a data-independent choice).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from ...errors import DPNetError
from ...privacy import accountants, selection
from ...privacy import dp_accounting_bridge as bridge
from ...privacy.selection import TruncatedNegativeBinomial
from .entries import entry
from .tasks import build

#: Renyi orders of the charge (integers: the without-replacement pair is computed at those)
ORDERS = tuple(range(2, 65)) + (80, 96, 128, 192, 256, 384, 512, 768, 1024)


def run_rdp(task: str, dataset: str | None, algorithm: str, params: dict, noise_factor: float,
            iterations: int, code: str = "") -> dict:
    """The RDP curve, at :data:`ORDERS`, of one calibrated configuration's run (None where the
    algorithm has no curve: only its own accountants' epsilons)."""
    t = build(task, dataset)
    e = entry(algorithm)
    problem, graph, _ = e.setting_for(t)
    alg = e.build(params, t).noise_scaled(noise_factor)
    facts, _ = accountants.split_constants(None, e.constants(t))
    try:
        curve = accountants.rdp_curve(alg, problem, graph, iterations, facts, ORDERS)
    except DPNetError as err:
        return {"status": f"no curve: {err}"}
    return {"status": "ok", "rdp": None if curve is None else [float(v) for v in curve]}


class Charge:
    """What one row's charge reads: the trial's curve (or pure epsilon) over the search's
    configurations, and the reported run's over the configurations at the row's accountant
    (``inf`` where neither bound is defined)."""

    def __init__(self, trials: Sequence[dict], runs: Sequence[dict]) -> None:
        self.trial_rdp, self.trial_pure = _largest(trials)
        self.run_rdp, self.run_pure = _largest(runs)

    def epsilon(self, law: TruncatedNegativeBinomial, runs: int, delta: float) -> float:
        """Epsilon at ``delta`` of the search by ``law`` and ``runs`` reported runs."""
        best = math.inf
        if self.trial_rdp is not None and (runs == 0 or self.run_rdp is not None):
            total = selection.selection_rdp(ORDERS, self.trial_rdp, law)
            if runs:
                assert self.run_rdp is not None     # the condition above, with runs != 0
                total = total + runs * self.run_rdp
            best = bridge.epsilon_of_rdp(ORDERS, total, delta)
        if self.trial_pure is not None and (runs == 0 or self.run_pure is not None):
            best = min(best, selection.pure_selection_epsilon(self.trial_pure, law)
                       + runs * (self.run_pure or 0.0))
        return best

    def law(self, mean: float, runs: int, delta: float) -> TruncatedNegativeBinomial:
        """The law of K of mean ``mean`` whose eta minimises the charge."""
        laws = [selection.with_mean(eta, mean) for eta in selection.ETAS]
        return min(laws, key=lambda law: self.epsilon(law, runs, delta))


def _largest(cases: Sequence[dict]) -> tuple[np.ndarray | None, float | None]:
    """The pointwise largest curve and the largest pure epsilon over the configurations
    ``cases`` (``ran``: calibrated and run, ``rdp``: its curve or None, ``pure``: its certified
    epsilon under a pure accountant or None); one that does not run (refused) releases nothing,
    and one that runs without a curve (or a pure epsilon) leaves that bound undefined."""
    ran = [c for c in cases if c["ran"]]
    if not ran:
        return np.zeros(len(ORDERS)), 0.0
    curves = [c["rdp"] for c in ran]
    pures = [c["pure"] for c in ran]
    rdp = (np.max(np.asarray(curves, dtype=float), axis=0)
           if all(v is not None for v in curves) else None)
    pure = max(pures) if all(v is not None for v in pures) else None
    return rdp, pure


def draws(task: str, algorithm: str, epsilon: float, law: TruncatedNegativeBinomial,
          configurations: int) -> list[int]:
    """The search's trials: K from ``law``, then K configuration indices drawn uniformly, from a
    stream keyed by the task, the method and the target (reproducible, as every draw of a
    simulated run; it would be secret in a deployment)."""
    key = hashlib.sha256(f"tuning/{task}/{algorithm}/{epsilon!r}".encode()).digest()
    generator = np.random.default_rng(np.random.SeedSequence(int.from_bytes(key[:16], "big")))
    k = law.sample(generator)
    return [int(i) for i in generator.integers(0, configurations, size=k)]
