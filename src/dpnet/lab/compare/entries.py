"""The algorithms of the benchmark: each one's tuning grid, how its theorem's relation maps onto
the task's record relation, its default (sound) and its tightest accountant; and every private
algorithm left out, with the reason.

Mapping (``Delta = 2R/m``, the local-gradient sensitivity of :mod:`dpnet.lab.compare.tasks`):

* DiaDSP, PGTC, PPDC (paper 000, function adjacency, Assumption 7 ``||grad f_i|| <= M``): the
  proofs of Theorems 3 and 6 use M only through ``||grad f_i0(x) - grad f_i0'(x)|| <= 2M`` at a
  common point (equal noisy states give equal inputs), so the record relation is covered with
  ``M = Delta/2 = R/m``.
* DPP2 (paper 004, Definition 1: adjacency radius ``delta`` on the same gradient difference):
  ``delta = Delta`` exactly.
* DO-ADP (paper 001): its relation is the record relation already; the per-sample gradient (the
  regulariser included, as in the paper's ``l_i``) is clipped in l2 at ``G = R = 1``, so the
  minibatch sensitivity is ``2G/B`` with sampling rate ``B/m``; the accountants read ``G``.

The search, the same for every method: its grid of :data:`GRID_TRIALS` trials (a step size and a
noise decay; the methods that sample a minibatch, a step size and the batch B) at each of the task's
horizons (:attr:`~.tasks.TaskSpec.horizons`, fractions of the task's K), :data:`TRIALS`
configurations in all, each calibrated to the target epsilon at its own horizon and batch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ... import algorithms, compression, graphs, noise
from ...algorithms.decor import DECOR
from ...algorithms.diadsp import DiaDSP
from ...algorithms.doadp import DOADP
from ...algorithms.dp_sgd import DPSGD
from ...algorithms.dpp2 import DPP2
from ...algorithms.pgtc import PGTC
from ...algorithms.ppdc import PPDC
from ...errors import ParameterError
from ...privacy import accountants
from ...problems import LogisticRegression, NeuralProblem
from ...registry import Registry, calling_module
from ..keys import PROSE, value_digest
from ..source import data_root
from .tasks import task_spec

DELTA = 1e-5
#: the threat model of the papers' guarantees and of DP-SGD with gossip: every message is seen
EAVESDROPPER = "eavesdropper of every message"
DOADP_BATCH = 16
#: the batch sizes every minibatch method's grid tries (per agent; the expected one for Poisson)
BATCHES = (16, 64)
#: the trials of every method's grid on every task
GRID_TRIALS = 4
#: every method's tuning budget on a task with two horizons: each grid trial at each horizon
TRIALS = GRID_TRIALS * 2
#: the budget of ``--quick`` (the first configurations of each search)
QUICK_TRIALS = 2
#: DO-ADP's grid on the MNIST CNN task (clipping bounds a CNN record's gradient too)
DOADP_CNN_GRID = tuple({"alpha": a, "beta": 0.5} for a in (0.01, 0.03, 0.1, 0.3))


def applies_everywhere(task: Any) -> str | None:
    """An entry's default :attr:`Entry.inapplicable`: no task excludes it (no reason)."""
    return None


@dataclass(frozen=True)
class Entry:
    """One algorithm on the leaderboard: how to build it at unit noise from a tuning trial and a
    task, which constants its account reads under the task's relation, its default (sound) and
    tightest accountants, and the prose that maps its theorem onto the relation. Registered with
    :func:`register` (from any module: ``dpnet compare --with my_entries.py``); the leaderboard
    calibrates each trial to every target epsilon, tunes on validation and ranks on test, exactly
    as for the built-in entries (``docs/your-own-problem.md``, section 7)."""

    name: str                                       # the algorithm's registry name
    grid: tuple[dict[str, float], ...]              # tuning trials (the same count for all)
    build: Callable[[dict[str, float], Any], Any]   # (trial, task) -> algorithm at unit noise
    constants: Callable[[Any], dict[str, float]]    # task -> assumptions under its relation
    default: str                                    # the default (sound) accountant
    tight: str | None                               # the tightest one dpnet has, where different
    mapping: str = dataclasses.field(metadata=PROSE)   # not in a run's key
    options: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    #: task -> why this algorithm does not apply to it (None: it applies)
    inapplicable: Callable[[Any], str | None] = applies_everywhere
    #: task name -> the grid on that task where ``grid`` does not suit it (the same count)
    task_grids: dict[str, tuple[dict[str, float], ...]] = dataclasses.field(default_factory=dict)
    #: who the guarantee is against (a row's column)
    threat_model: str = dataclasses.field(default=EAVESDROPPER, metadata=PROSE)
    #: task -> (problem, graph, x0) where the entry runs elsewhere than the task's agents
    setting: Callable[[Any], tuple[Any, Any, Any]] | None = None
    #: an anchor row's role ("central", "local-only"): listed beside the ranking, not ranked
    anchor: str | None = None

    def setting_for(self, task) -> tuple[Any, Any, Any]:
        """The problem, graph and start this entry runs on for ``task``."""
        return (task.problem, task.graph, task.x0) if self.setting is None else self.setting(task)

    def grid_for(self, task: str) -> tuple[dict[str, float], ...]:
        """The grid's trials on ``task``."""
        return self.task_grids.get(task, self.grid)

    def search(self, task: str) -> tuple[dict[str, float], ...]:
        """The configurations tuned on ``task``: every grid trial at every horizon of the task."""
        return tuple({**trial, "horizon": h} for trial in self.grid_for(task)
                     for h in task_spec(task).horizons)

    def accountant_constants(self, task, accountant: str) -> dict[str, float]:
        """The assumptions, delta (which only (epsilon, delta) accountants read) and the
        accountant's own options."""
        pure = accountants.is_pure(accountant)
        return {**self.constants(task), **({} if pure else {"delta": DELTA}),
                **self.options.get(accountant, {})}


def iterations(choice: dict[str, float], m: int, K: int) -> int:
    """A configuration's horizon: the fraction ``horizon`` (default 1) of its base, which is
    ``epochs`` passes over the m local records at the expected batch ``batch`` where the trial
    gives epochs, else the task's K."""
    base = math.ceil(choice["epochs"] * m / choice["batch"]) if "epochs" in choice else K
    return max(1, round(choice.get("horizon", 1.0) * base))


def _lap(q: float) -> noise.Laplace:
    return noise.Laplace(1.0, decay=q)


def _grid(steps: tuple[float, float], key: str, others: tuple[float, float],
          other_key: str = "q") -> tuple[dict[str, float], ...]:
    return tuple({key: s, other_key: o} for s in steps for o in others)


def pooled(problem):
    """Every agent's records held by one agent (a trusted curator): the central anchor."""
    if isinstance(problem, LogisticRegression | NeuralProblem):
        sizes = problem.local_sizes()
        # the real records only (an unequal split pads each agent's rows to the largest)
        rows = problem.A if isinstance(problem, LogisticRegression) else problem.parts
        keep = torch.arange(rows.shape[1])[None, :] < torch.as_tensor(sizes)[:, None]
    if isinstance(problem, LogisticRegression):
        return LogisticRegression(problem.A[keep][None], problem.b[keep][None], reg=problem.reg)
    if isinstance(problem, NeuralProblem):
        return NeuralProblem(problem.model, problem.features, problem.labels,
                             problem.parts[keep.to(problem.parts.device)][None], problem.test,
                             problem.transform,
                             problem.chunk, problem.metric_samples)
    raise ParameterError("problem", type(problem).__name__, "LogisticRegression or NeuralProblem "
                         "(the problems whose records dpnet can pool on one agent)")


def _central(task):
    return pooled(task.problem), graphs.from_weights(np.eye(1), name="one curator"), task.x0


def _local_only(task):
    n = task.problem.n_agents
    return task.problem, graphs.from_weights(np.eye(n), name="no communication"), task.x0


def _dp_sgd(t, task) -> DPSGD:
    # the rate B/m of the task's agents: the central curator's expected batch is then n B
    return DPSGD(t["lr"], 1.0, clip=1.0, sampling="poisson",
                 rate=min(1.0, t["batch"] / task.m),
                 ema_decay=t.get("ema_decay", 0.0))


def _needs_clip(task) -> str | None:
    return None if getattr(task.problem, "supports_clip", False) else (
        f"its sensitivity comes from per-sample clipping; {type(task.problem).__name__} has no "
        "per-sample gradients")


DP_SGD_GRID = tuple({"lr": lr, "batch": b} for lr in (0.3, 1.0) for b in BATCHES)
#: on mnist_cnn: the practitioner's length (6 epochs; K = 6 m / B follows the batch), each
#: agent publishing the moving average of its iterates (decay CNN_EMA_DECAY)
CNN_EMA_DECAY = 0.95
DP_SGD_CNN_GRID = tuple({"lr": lr, "batch": b, "epochs": 6, "ema_decay": CNN_EMA_DECAY}
                        for lr in (2.0, 4.0) for b in (128, 256))
DP_SGD_MAPPING = ("the practitioner's recipe on the task's record relation directly: Poisson "
                  "sampling at the expected batch B (rate B/m), every record's gradient (the "
                  "regulariser included) clipped in l2 at C = R = 1, Gaussian noise z C on the "
                  "sum, one gossip step (adapt then combine); replace-one accounted exactly by "
                  "dp-accounting's PLD (REPLACE_ONE); grid lr in 0.3, 1 by B in 16, 64; on "
                  "mnist_cnn 6 epochs (K = 6 m / B) with lr in 2, 4 by B in 128, 256, each "
                  f"agent publishing the moving average of its iterates (decay {CNN_EMA_DECAY:g}, "
                  "post-processing of the messages)")


def _doadp_poisson(t, task) -> DOADP:
    return DOADP(t["alpha"], 0.5, t.get("beta", 0.0), sigma=1.0,
                 clip=1.0, sampling="poisson",
                 batch_size=min(int(t.get("batch", DOADP_BATCH)), task.m))


#: the mapping of the Poisson twins of the fixed-batch rows (DO-ADP's, DP-DDA's)
POISSON_TWIN = ("as the {row} row, with Poisson batches instead of the fixed one: each record in "
                "its agent's batch independently with probability B/m, the clipped sum divided "
                "by the public B; the replace-one pair is then a mixture against a mixture "
                "(components G/B from the centre), accounted exactly by dp-accounting's PLD "
                "(REPLACE_ONE), which the paper's Theorem 1 and proof do not cover; same grid")


def _decor(t, task) -> DECOR:
    return DECOR(t["lr"], 1.0, DECOR_PAIR_RATIO, clip=1.0, sampling="poisson",
                 rate=min(1.0, t["batch"] / task.m),
                 ema_decay=t.get("ema_decay", 0.0))


#: DECOR's pairwise multiplier over its independent one (calibration keeps the ratio)
DECOR_PAIR_RATIO = 3.0
#: who DECOR's guarantee is against
SECRETS = ("eavesdropper of every message who knows no pairwise secret (the pairs' shared "
           "seeds); a curious agent knowing its own edges' secrets is not covered")


def _xie_m(task) -> dict[str, float]:
    return {"gradient_bound": task.sensitivity / 2}


ENTRIES: Registry[Entry] = Registry("benchmark entry", "dpnet.lab.compare")


def register(e: Entry) -> Entry:
    """Add an algorithm (modules of this package that benchmark one call this at import); its
    grid must have :data:`GRID_TRIALS` trials, the same count as every other method's."""
    for grid in (e.grid, *e.task_grids.values()):
        if len(grid) != GRID_TRIALS:
            raise ParameterError(f"entry {e.name} grid", len(grid), f"{GRID_TRIALS} trials, as "
                                 "every other method's")
    return ENTRIES.register(e.name, e, registrant=calling_module())


for _e in (
    Entry("diadsp", _grid((0.3, 1.0), "eta", (0.95, 0.99)),
          lambda t, task: DiaDSP(t["eta"], _lap(t["q"]), _lap(t["q"])),
          _xie_m, "xie", "pld", "paper 000 Theorem 3 (as PGTC with C = I): M = R/m"),
    Entry("pgtc", _grid((0.1, 0.3), "eta", (0.95, 0.99)),
          lambda t, task: PGTC(
              t["eta"], 0.2, 0.5, 0.5, compression.TopK(max(1, task.problem.dim // 4)),
              1.0, 1.0, q=t["q"]),
          _xie_m, "xie", "pld", "paper 000 Theorem 3, Top-k (k = d/4) compression: M = R/m"),
    Entry("ppdc", _grid((0.01, 0.03), "eta", (0.95, 0.99)),
          lambda t, task: PPDC(t["eta"], 65.0, 5.0, 0.5, None, 1.0, 1.0, q=t["q"]),
          _xie_m, "xie", "pld", "paper 000 Theorem 6 (uncompressed): M = R/m"),
    Entry("dpp2", _grid((0.1, 0.3), "alpha", (0.95, 0.99)),
          lambda t, task: DPP2(t["alpha"], t["alpha"] / 2.5, 10.0, noise_w=1.0,
                               noise_e=1.0, r=t["q"]),
          lambda task: {"adjacency_radius": task.sensitivity}, "ou", "pld",
          "paper 004 Theorem 3: adjacency_radius (the paper's delta) = 2R/m"),
    Entry("doadp", _grid((0.1, 1.0), "alpha", BATCHES, "batch"),
          lambda t, task: DOADP(t["alpha"], 0.5, t.get("beta", 0.0), sigma=1.0,
                                clip=1.0,
                                batch_size=min(int(t.get("batch", DOADP_BATCH)),
                                               task.m)),
          lambda task: {"gradient_bound": 1.0}, "proof", "pld",
          "paper 001's own record relation: l2 clipping at G = 1, a fixed batch B in 16, 64 (m "
          "if smaller) drawn without replacement, alpha in 0.1, 1 without momentum (the old grid "
          "alpha in 0.1, 0.3 by beta in 0, 0.5 stopped below the step DP-SGD prefers); "
          "Theorem 1 itself certifies only 'some delta' (about 0.04 here), so the default is its "
          "proof's step-by-step accountant at delta = 1e-5 (with the per-step delta0 = 1e-8, so "
          "that T delta_t stays below it); on mnist_cnn: batch 16, alpha in 0.01, 0.03, 0.1, "
          "0.3 with beta = 0.5",
          {"proof": {"delta0": 1e-8}},
          lambda task: None if getattr(task.problem, "supports_clip", False) else
          f"its sensitivity comes from per-sample clipping; {type(task.problem).__name__} has no "
          "per-sample gradients", task_grids={"mnist_cnn": DOADP_CNN_GRID}),
    Entry("doadp_poisson", _grid((0.1, 1.0), "alpha", BATCHES, "batch"), _doadp_poisson,
          lambda task: {"gradient_bound": 1.0}, "pld", None, POISSON_TWIN.format(row="doadp"),
          inapplicable=lambda task: task.exclude("doadp") or _needs_clip(task),
          task_grids={"mnist_cnn": DOADP_CNN_GRID}),
    Entry("dp_sgd", DP_SGD_GRID, _dp_sgd, lambda task: {}, "pld", None, DP_SGD_MAPPING,
          inapplicable=_needs_clip, task_grids={"mnist_cnn": DP_SGD_CNN_GRID}),
    Entry("decor", DP_SGD_GRID, _decor, lambda task: {}, "pld", None,
          "anchor: DECOR (Allouah et al. 2024), DP-SGD whose noise adds pairwise-cancelling "
          f"secrets of multiplier {DECOR_PAIR_RATIO:g} times the independent one on every edge "
          "of the task's graph; the record relation is the task's, each agent's account is "
          "DP-SGD's at its effective multiplier 1/sqrt((M^-1)_ii), M = z_cdp^2 I + z_cor^2 L "
          "(2.8 times z_cdp on the 10-agent circulant graph, against sqrt(10) = 3.2 with "
          "infinite secrets); listed beside the ranking, not in it: its threat model is "
          "weaker than the eavesdropper's; same grid as dp_sgd",
          inapplicable=_needs_clip, task_grids={"mnist_cnn": DP_SGD_CNN_GRID},
          threat_model=SECRETS, anchor="pairwise secrets"),
    Entry("dp_sgd_local", DP_SGD_GRID, _dp_sgd, lambda task: {}, "pld", None,
          "anchor: the same DP-SGD with no communication (every agent trains on its own m "
          "records; the identity graph), the floor that collaboration must beat",
          inapplicable=_needs_clip, task_grids={"mnist_cnn": DP_SGD_CNN_GRID},
          threat_model="each agent alone: nothing is exchanged (its iterates are covered)",
          setting=_local_only, anchor="local-only"),
    Entry("dp_sgd_central", DP_SGD_GRID, _dp_sgd, lambda task: {}, "pld", None,
          "anchor: the same DP-SGD on the pooled data of all agents (one trusted curator, rate "
          "B/m, so the expected batch is n B), the ceiling a decentralized method approaches",
          inapplicable=lambda task: _needs_clip(task) or (
              None if isinstance(task.problem, LogisticRegression | NeuralProblem) else
              f"dpnet pools the records of LogisticRegression and NeuralProblem only, not "
              f"{type(task.problem).__name__}'s"),
          task_grids={"mnist_cnn": DP_SGD_CNN_GRID},
          threat_model="trusted curator holding every record (its iterates are covered)",
          setting=_central, anchor="central"),
):
    register(_e)


#: private algorithms not in the benchmark, with the reason (printed in every leaderboard)
LEFT_OUT = {
    "muffliato": "Cyffers et al. (NeurIPS 2022) guarantee pairwise network DP: privacy of one "
                 "agent's data against each other agent, amplified by the graph distance "
                 "between them, with no statement against an eavesdropper of every message; it "
                 "cannot be stated under the leaderboard's threat models (the eavesdropper, "
                 "pairwise secrets unknown to it, a trusted curator) without a new analysis, so "
                 "it is not a row (and not a dpnet algorithm)",
    "kang_wddp": "paper 003's baseline [33] is federated: every party's noisy gradient is "
                 "averaged at a central server (dpnet emulates it on a complete graph with "
                 "identical rows W = 1 p^T); no task's graph has a server, and running it on one "
                 "would compare another communication topology, not another algorithm",
    "yan_binomial": "paper 003's baseline [37] is federated like kang_wddp (quantized gradients "
                    "averaged at a central server): no task's graph has a server",
}


def entry(name: str) -> Entry:
    """The registered entry ``name`` (an unknown name lists the known ones)."""
    return ENTRIES[name]


#: run_code's digests by (task, algorithm, data root), each beside the spec and entry it read
_RUN_CODES: dict[tuple, tuple[Any, Any, str]] = {}


def run_code(task: str, algorithm: str | None = None) -> str:
    """What a run reads by name through the registries, as one of its arguments (``code``): the
    task's spec (its builder's source closure) and the entry's (its builder, assumptions, grids
    and accountants), wherever each was registered, and the data root. Their prose (a title, a
    mapping's wording) does not count, and another entry's edit leaves these runs cached.
    Computed once per process for the same registered objects (a digest walks their source
    closure: 0.2 s, once per run before)."""
    spec, ent, root = task_spec(task), entry(algorithm) if algorithm else None, data_root()
    known = _RUN_CODES.get((task, algorithm, root))
    if known is not None and known[0] is spec and known[1] is ent:
        return known[2]
    digest = value_digest(spec, *([ent] if algorithm else []), root)
    _RUN_CODES[task, algorithm, root] = (spec, ent, digest)
    return digest


def why_not(task, name: str) -> str | None:
    """Why entry ``name`` does not run on the built ``task`` (the task's reason first, then the
    entry's); None where it runs."""
    return task.exclude(name) or entry(name).inapplicable(task)


def left_out() -> dict[str, str]:
    """The private algorithms of :data:`LEFT_OUT` that no module has benchmarked since."""
    return {name: why for name, why in LEFT_OUT.items() if name not in ENTRIES}


def check_complete() -> list[str]:
    """Private registered algorithms that are neither benchmarked nor left out with a reason."""
    private = [n for n, cls in algorithms.available().items() if getattr(cls, "private", False)]
    return sorted(set(private) - set(ENTRIES) - set(LEFT_OUT))
