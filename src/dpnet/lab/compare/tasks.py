"""The benchmark's tasks: data, split, graph, horizon and the one neighbouring relation of each.

Every task is a finite sum over records: agent i holds ``m`` records and
``f_i(x) = (1/m) sum_j l(x; a_ij, b_ij) + r(x)`` with a data-free regulariser ``r``. The relation
is **one record of one agent's local dataset replaced** by any other record whose features have
l2 norm at most ``R`` (rows are scaled to unit norm, so ``R = 1``). For the logistic losses here
``||grad_x l(x; a, b)||_2 <= ||a||_2``, so replacing a record moves agent i's local gradient by at
most ``Delta = 2R/m`` in l2 at every x (the regulariser cancels): that is the sensitivity every
algorithm's guarantee is expressed through (:mod:`dpnet.lab.compare.entries`).

Utility is measured on the agents' average ``xbar_K``; tuning reads a held-out validation split,
the reported numbers a test split (logistic regression) or a fresh draw of the same distribution
(problem (37), which has no natural test set).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ... import graphs
from ...errors import DPNetError
from ...problems import LogisticRegression, NonconvexLogistic
from ...problems.base import minimize_global
from ...registry import Registry, calling_module
from ...runner import run
from .. import source
from ..keys import PROSE

RELATION = ("one record of one agent's local dataset replaced by any record with feature norm "
            "<= R = 1 (rows scaled to unit l2 norm): local-gradient sensitivity Delta = 2R/m")


def excludes_nothing(name: str) -> str | None:
    """A task's default :attr:`Task.exclude`: every entry applies (no reason to leave one out)."""
    return None


@dataclass(frozen=True)
class TaskSpec:
    """A leaderboard task as registered (:func:`register`): ``name``, ``title`` and the ranked ``utility``
    (lower is better), the horizons K of a full and a ``--quick`` run, the ``builder``
    ``(spec, dataset) -> Task``, ``n_agents``, the default ``dataset``, the neighbouring ``relation``,
    whether it is a finite sum (else a stream), the ``horizons`` the searches try, whether ``--dataset``
    names its data, and the ``partition`` of the training records over the agents."""
    name: str
    title: str = dataclasses.field(metadata=PROSE)     # prose fields are not in a run's key
    utility: str = dataclasses.field(metadata=PROSE)   # the ranked metric (lower is better)
    horizon: int
    quick_horizon: int
    builder: Callable[[TaskSpec, str | None], Task]   # (spec, dataset) -> the built task
    n_agents: int = 10
    dataset: str = ""
    #: the neighbouring relation every guarantee on the task is under
    relation: str = dataclasses.field(default=RELATION, metadata=PROSE)
    finite_sum: bool = True    # False: a stream, each record used at one step only
    #: the horizons every method's search tries, as fractions of its base horizon (the task's
    #: ``horizon``, or a trial's ``epochs`` over its batch)
    horizons: tuple[float, ...] = (0.25, 1.0)
    #: whether ``--dataset`` names its data (a LIBSVM dataset); a command-line check only
    reads_dataset: bool = dataclasses.field(default=False, metadata=PROSE)
    #: how the training records are split over the agents: a partitioner of
    #: :mod:`dpnet.partitions` and its parameters, ``(("how", "dirichlet"), ("alpha", 0.1))``
    partition: tuple[tuple[str, Any], ...] = (("how", "even"),)

    @property
    def privacy_unit(self) -> str:
        """What one guarantee protects (a row's column)."""
        return ("one record of one agent's local dataset" if self.finite_sum else
                "one record of one agent's stream (used at one step)")


TASKS: Registry[TaskSpec] = Registry("task", "dpnet.lab.compare")


def register(spec: TaskSpec) -> TaskSpec:
    """Add a task (modules of this package that define one call this at import)."""
    return TASKS.register(spec.name, spec,
                          registrant=calling_module())


def task_spec(name: str) -> TaskSpec:
    """The registered :class:`TaskSpec` called ``name``; raises :class:`~dpnet.errors.UnknownNameError`
    listing the known tasks."""
    return TASKS[name]


@dataclass
class Task:
    """A built task: the training problem (the agents' data), the graph, per-agent record count
    ``m`` (with unequal local sizes: their mean, which sets the rates B/m of the sampling
    methods), the feature bound ``R``, the public start ``x0`` and ``score(xbar, split)``: the ranked
    ``utility`` (lower is better) and the secondary ``heldout_loss`` (tuning reads it on the
    validation split) and ``accuracy`` of the average iterate."""

    spec: TaskSpec
    problem: Any
    graph: graphs.Graph
    m: int
    R: float
    score: Callable[[np.ndarray, str], dict[str, float]]
    x0: np.ndarray
    notes: tuple[str, ...] = ()
    #: entry name -> why that entry does not apply to this task (None: the entry decides)
    exclude: Callable[[str], str | None] = excludes_nothing
    #: horizon K -> the noise-free reference {"method", "noise_free", "accuracy"} on the test
    #: split (None: gradient tracking from x0, :func:`dpnet.lab.compare.references`)
    reference: Callable[[int], dict[str, Any]] | None = None

    @property
    def sensitivity(self) -> float:
        """``2R/m``, at the smallest local size where the sizes differ: one bound for every
        agent, exact for the smallest (a function-sensitivity account with one noise level is
        then set by that agent)."""
        sizes = self.problem.local_sizes() if hasattr(self.problem, "local_sizes") else None
        smallest = self.m if sizes is None else int(np.min(sizes))
        return 2 * self.R / smallest

    @property
    def equal_sizes(self) -> bool:
        """Whether every agent holds the same number of records (also True for a problem that declares no
        local sizes)."""
        sizes = self.problem.local_sizes() if hasattr(self.problem, "local_sizes") else None
        return sizes is None or bool(np.all(sizes == sizes[0]))

    def utility(self, xbar: np.ndarray, split: str) -> dict[str, float]:
        """The ranked metric and the secondary ones of ``xbar`` (``split``: val or test)."""
        return self.score(np.asarray(xbar), split)


def best_noise_free(task: Task, candidates, K: int, problem=None) -> dict[str, Any]:
    """The noise-free yardstick of a task: run each ``(label, step, algorithm)`` of
    ``candidates`` from ``x0`` for ``K`` iterations (on ``problem``, default the task's) and keep
    the best test utility; a run that diverges is no candidate. Returns ``method`` (the label),
    ``eta``, ``noise_free`` and ``accuracy`` (NaN when every candidate diverged)."""
    best: dict[str, Any] = {"method": "none (every candidate diverged)", "eta": float("nan"),
            "noise_free": float("nan"), "accuracy": float("nan")}
    for label, step, algorithm in candidates:
        try:
            res = run(algorithm, problem or task.problem, task.graph, K, x0=task.x0,
                      log_every=K, reference=None)
        except DPNetError:
            continue
        u = task.utility(res.x.mean(axis=0), "test")
        if not u["utility"] >= best["noise_free"]:      # NaN-safe: the first one always enters
            best = {"method": label, "eta": step, "noise_free": u["utility"],
                    "accuracy": u["accuracy"]}
    return best


def unit_rows(X: np.ndarray) -> np.ndarray:
    """``X`` with every row scaled to unit l2 norm (a zero row stays zero)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, 1e-300)


def build(name: str, dataset: str | None = None) -> Task:
    """The task (cached per process and data root: every run of a benchmark shares its data)."""
    return _build(name, dataset, source.data_root())


@functools.lru_cache(maxsize=8)
def _build(name: str, dataset: str | None, root: str) -> Task:
    spec = task_spec(name)
    return spec.builder(spec, dataset)


def split_binary(dataset: str, n_agents: int, reg: float = 1e-3,
                 partition: tuple[tuple[str, Any], ...] = (("how", "even"),)):
    """A LIBSVM binary dataset with unit-norm rows, split 60/20/20 into the agents' training
    problem (its records split over the agents by ``partition``) and the validation and test
    sets ``(X, y in {-1, +1})``; ``f*`` of the training objective and the loader's notes."""
    X, y, notes = source.binary(dataset)
    X = unit_rows(np.asarray(X, dtype=np.float64))
    order = np.random.default_rng(0).permutation(len(y))
    n_val = n_test = len(y) // 5
    val, test, train = order[:n_val], order[n_val:n_val + n_test], order[n_val + n_test:]
    problem = LogisticRegression.partition(X[train], y[train], n_agents, seed=0, reg=reg,
                                           **dict(partition))
    f_star = float(problem.loss(minimize_global(problem, tol=1e-12)))
    evals = {s: (X[idx], np.where(y[idx] > 0, 1.0, -1.0)) for s, idx in
             (("val", val), ("test", test))}
    return problem, evals, f_star, tuple(notes)


def accuracy(margins: np.ndarray) -> float:
    """Share of records classified right from their margins ``y <x, a>``; a tie (margin 0, as
    every record at the start x0 = 0) counts half, the expected accuracy of breaking it at
    random: x0 then reads 0.5, not the 0.0 that no predictor scores."""
    return float(np.mean((margins > 0) + 0.5 * (margins == 0)))


def logistic_score(problem, evals: dict, f_star: float):
    """On ``"test"``: the ranked suboptimality of the training objective; on ``"val"``: its
    validation estimate, the suboptimality of the same regularised objective on the validation
    set (tuning then reads no training data beyond the runs themselves). Both with the held-out
    logistic loss and accuracy of the split."""
    # scipy.optimize costs 0.2 s at import: the CLI imports this module for every command
    from scipy import optimize, special

    reg = float(problem.reg)

    def objective(x: np.ndarray, Xs: np.ndarray, ys: np.ndarray) -> tuple[float, np.ndarray]:
        margins = ys * (Xs @ x)
        grad = -(Xs.T @ (ys * special.expit(-margins))) / len(ys) + reg * x
        return float(np.mean(np.logaddexp(0.0, -margins)) + 0.5 * reg * x @ x), grad

    Xv, yv = evals["val"]
    val_star = float(optimize.minimize(objective, np.zeros(Xv.shape[1]), args=(Xv, yv), jac=True,
                                       method="L-BFGS-B", options={"gtol": 1e-12,
                                                                   "maxiter": 10_000}).fun)

    def score(xbar: np.ndarray, split: str) -> dict[str, float]:
        Xs, ys = evals[split]
        margins = ys * (Xs @ xbar)
        utility = (objective(np.asarray(xbar, dtype=np.float64), Xs, ys)[0] - val_star
                   if split == "val" else
                   float(problem.loss(torch.as_tensor(xbar, dtype=torch.float64)) - f_star))
        return {"utility": utility,
                "heldout_loss": float(np.mean(np.logaddexp(0.0, -margins))),
                "accuracy": accuracy(margins)}

    return score


def _logistic(spec: TaskSpec, dataset: str | None) -> Task:
    ds = dataset or spec.dataset
    problem, evals, f_star, notes = split_binary(ds, spec.n_agents, partition=spec.partition)
    spec = dataclasses.replace(spec, title=spec.title.format(dataset=ds), dataset=ds)
    sizes = problem.local_sizes()
    if not bool(np.all(sizes == sizes[0])):
        notes = (*notes, UNEQUAL_SIZES_NOTE.format(smallest=int(sizes.min()),
                                                   mean=int(round(float(sizes.mean())))))
    if not bool(np.all(sizes == sizes[0])) or spec.partition != (("how", "even"),):
        notes = (*notes, skew_note(problem))
    return Task(spec, problem, graphs.circulant(spec.n_agents, offsets=(1, 2)),
                int(round(float(sizes.mean()))), 1.0, logistic_score(problem, evals, f_star),
                np.zeros(problem.dim), notes, exclude=_one_local_size if not
                bool(np.all(sizes == sizes[0])) else (lambda name: None))


UNEQUAL_SIZES_NOTE = (
    "unequal local sizes: the objective is the average (1/n) sum_i f_i of the agents' own means; "
    "a function-sensitivity account (one noise level for all) is set by the smallest agent, "
    "Delta = 2R/{smallest}, so every agent is at or below the target; the sampling methods draw "
    "at one rate B/m with m = {mean} (the mean size), so each agent's per-record account is the "
    "same; the central anchor minimises the pooled mean, which weights agents by size")

#: the entries whose algorithm or account reads one local size m for every agent
ONE_LOCAL_SIZE = {
    "doadp": "paper 001's account and its batch read one q",
    "doadp_poisson": "its rate B/q is one q",
    "dp_dda": "its account (paper 001's) reads one q",
    "dp_dda_poisson": "its rate B/q is one q",
    "dpdo": "its record sensitivity 2 sqrt(d) G / m reads one m",
    "cwz_quantized": "it takes each agent's whole local set as one batch of m records",
    "wang_basar_ternary": "it takes each agent's whole local set as one batch of m records",
}


def _one_local_size(name: str) -> str | None:
    why = ONE_LOCAL_SIZE.get(name)
    return None if why is None else (f"the agents' local sizes differ and {why} (DP-SGD, DECOR "
                                     "and their anchors account each agent at its own m_i)")


def skew_note(problem) -> str:
    """The split in numbers: each agent's size and share of positive labels."""
    sizes = problem.local_sizes()
    b = problem.b.cpu().numpy() if hasattr(problem.b, "cpu") else np.asarray(problem.b)
    positive = [float(np.mean(b[i, :s] > 0)) for i, s in enumerate(sizes)]
    return ("local sizes " + ", ".join(str(int(s)) for s in sizes) + "; positive share "
            + ", ".join(f"{p:.2f}" for p in positive))


def _nonconvex(spec: TaskSpec, dataset: str | None) -> Task:
    def draw(seed: int) -> NonconvexLogistic:
        rng = np.random.default_rng(seed)
        V = unit_rows(rng.standard_normal((spec.n_agents * 200, 10)))
        u = rng.choice([-1.0, 1.0], size=spec.n_agents * 200)
        return NonconvexLogistic(V.reshape(spec.n_agents, 200, 10), u.reshape(spec.n_agents, 200),
                                 lam=1e-3, alpha=1.0)

    held = {"val": draw(1), "test": draw(2)}

    def score(xbar: np.ndarray, split: str) -> dict[str, float]:
        x = torch.as_tensor(xbar, dtype=torch.float64)
        g = held[split].global_grad(x)
        return {"utility": float((g * g).sum()), "heldout_loss": float(held[split].loss(x)),
                "accuracy": float("nan")}

    # x = 0 is no start for (37): with balanced random labels its gradient is ~1e-5, below what
    # noise-free gradient tracking reaches in K steps, so "not moving" would win every epsilon.
    x0 = np.random.default_rng(3).uniform(0.0, 1.0, 10)
    return Task(spec, draw(0), graphs.circulant(spec.n_agents, offsets=(1, 2)), 200, 1.0, score,
                x0, ("features v ~ N(0, I_10) scaled to the unit sphere (a bounded record is what "
                     "the relation needs; the paper's draws are not given)",
                     "start x0 ~ U[0, 1]^10 (one public draw, seed 3, shared by every agent and "
                     "run): from x = 0 the problem is already nearly stationary"))


register(TaskSpec("logistic", "l2-regularised logistic regression (lambda = 1e-3) on LIBSVM "
                  "{dataset}, 10 agents, circulant graph (offsets 1, 2)",
                  "suboptimality f(xbar_K) - f*", 400, 80, _logistic, dataset="a9a",
                  reads_dataset=True))
register(TaskSpec("nonconvex", "paper 000's nonconvex logistic problem (37) (m = 200, d = 10, "
                  "lambda = 1e-3, alpha = 1), 10 agents, circulant graph",
                  "||grad f(xbar_K)||^2", 400, 80, _nonconvex))
register(TaskSpec("logistic_shards", "the logistic task with label skew at equal sizes: a9a's "
                  "training records sorted by label and cut into 10 equal shards, one per agent "
                  "(flwr-datasets' ShardPartitioner), so most agents hold one class only",
                  "suboptimality f(xbar_K) - f*", 400, 80, _logistic, dataset="a9a",
                  partition=(("how", "shards"), ("shards_per_agent", 1))))
register(TaskSpec("logistic_dirichlet", "the logistic task with label and quantity skew: a9a's "
                  "training records split by Dirichlet(0.1) label proportions (flwr-datasets' "
                  "DirichletPartitioner), unequal local sizes",
                  "suboptimality f(xbar_K) - f*", 400, 80, _logistic, dataset="a9a",
                  partition=(("how", "dirichlet"), ("alpha", 0.1), ("min_size", 2))))
