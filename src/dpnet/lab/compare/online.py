"""Online algorithms on a one-pass stream (task ``logistic_stream``) and the box-constrained
baselines that need a public bound on ``||x*||``.

**The stream.** ``logistic_stream`` is the ``logistic`` task's data (:func:`~.tasks.split_binary`:
unit-norm rows, the same 60/20/20 split, the same validation and test sets and utility, the
suboptimality of the *batch* training objective at ``xbar``) consumed in one pass: agent i's
``m`` training records in a fixed order, and at step t its loss is the t-th record's
``l(x; a, b) = log(1 + exp(-b a^T x)) + (lambda/2) ||x||^2`` (:class:`RecordStream`). Every record
is used at exactly one step, so the horizon is at most ``m``. The relation is the benchmark's
(:data:`~.tasks.RELATION`): one record of one agent replaced by any record of feature norm
``<= R = 1``; on the stream that is paper 002's Definition 1 (one time-indexed sample differs).

**The one bound every mapping uses.** Split ``l = phi + r`` into the data term
``phi(x; a, b) = log(1 + exp(-b a^T x))`` and the data-free regulariser ``r = (lambda/2)||x||^2``.
``grad phi = -s(-b a^T x) b a`` with ``0 < s < 1``, so ``||grad phi||_1 <= ||a||_1 <=
sqrt(D) ||a||_2 <= sqrt(D) R`` for every record and every x, the replacement record included (an
average of such terms, a full local gradient, obeys the same bound). At a *common* point the
regulariser cancels, and one record replaced moves the data term by at most ``2R`` in l2 and
``2 sqrt(D) R`` in l1 (``c a - c' a'`` with ``|c|, |c'| < 1``; not loose under this relation:
a flat ``a`` replaced by its sign flip on all coordinates but one, at x far along that one, gives
``2 sqrt(D) R (1 - 1/D)``, checked in the tests); at two *different* points with the
same record the data term moves by less than ``||a||_1 <= sqrt(D) R`` (``|s(u) - s(u')| < 1``).
A gradient step enters an update linearly, so the regulariser folds into the update's linear
part: ``x - eta (grad phi + lambda x) = (1 - eta lambda) x - eta grad phi``. ``D`` is the
dimension, ``lambda`` the regulariser (1e-3), ``m`` the records per agent.

**The public radius.** ``f(0) = ln 2`` (every logistic term is ``ln 2`` at 0, the regulariser 0,
for any data) and ``f(x) >= (lambda/2)||x||^2`` (the logistic terms are nonnegative; the objective
is the agents' average of per-agent averages), so ``(lambda/2)||x*||^2 <= f(x*) <= f(0)``:
``||x*||_2 <= r* = sqrt(2 ln 2 / lambda)`` (37.2 at lambda = 1e-3), data-free, hence public. The
box ``[-r*, r*]^D`` contains x*. On tasks without such a bound (problem (37), non-logistic
losses) DPDO, DP-DDA, LDOL, DOLA and DMOD, whose boxes use r*, are not applicable.

**Mappings** (the entries' ``mapping`` strings say the same):

* ``ldp_online`` (paper 002, Algorithm 1), both logistic tasks: accountant ``chen_wang``, Lemma 1 +
  Theorem 5(1) with Assumption 5's ``d = sqrt(D) R`` for the data term. The regulariser folds into
  the self-weight: ``theta_{t+1} = (1 + w_ii - lambda_t lambda) theta_t + sum_j w_ij y_j -
  lambda_t grad phi_t``, and ``0 <= 1 + w_ii - lambda_t lambda <= 1 - wbar`` when
  ``lambda_0 lambda <= 1 - max_i |w_ii|`` (checked at build), so (18)-(22) hold verbatim:
  ``Delta_t <= 2 d rho_t``. The theorem charges ``2d`` at *every* step (a difference of any
  kind), so it covers the stream (where the one record's step is one of them) and also the finite
  sum, where a record enters every step's full local gradient (the bound then protects the whole
  local dataset; no 1/m is claimed). It grows like ``T^{1 - v + varsigma}`` although a stream
  record is used once: the theorem's figure is reported, never a smaller one.
* ``ldol`` (paper 002's (17)), both logistic tasks: the ``[DERIVED]`` Theorem 5(1) account of
  :func:`dpnet.privacy.chen_wang.ldol_epsilons` with ``d = sqrt(D) R``; the regulariser folds into
  ``1 - gamma_t |w_ii| - lambda_t lambda``, in ``[0, 1 - gamma_t |w_ii|]`` when
  ``gamma_0 max_i |w_ii| + lambda_0 lambda <= 1`` (checked), so its ``rho_t`` recursion holds; the
  box of radius ``r*`` is l1-nonexpansive.
* ``dola`` (Li et al. 2018): the gradient point ``b_t = sum_j a_ij (w_t^j + noise)`` (own noisy
  message included) is a function of the transcript, so given the past messages only the record
  of step t moves ``w_{t+1}``, by ``alpha_{t+1} ||grad phi(b_t; xi) - grad phi(b_t; xi')||_1 <=
  2 alpha_{t+1} sqrt(D) L`` (``L = R``; the regulariser cancels; the box is l1-nonexpansive). On
  the stream that record enters one step only: parallel composition over records gives
  ``eps = 2 alpha0 sqrt(D) R / b`` whatever the step (``mu_t = b alpha_t / alpha0``), which is
  exactly DOLA's published account (``li``). On the finite sum the record enters every step with
  ``L = R/m``: ``T`` releases, ``eps = T 2 alpha0 sqrt(D) R / (m b)`` by basic composition,
  ``T`` times the published account (which charges one release and would be unsound here). The
  default is ``laplace`` over that description (:class:`DOLAOnTask`), equal to ``li`` on the
  stream.
* ``dmod`` (Yuan, Lei & Hong 2023), stream only: its gradient point is the agent's own clean
  decision ``x_t``, so a record's influence propagates. With the transcript fixed
  (``z`` common), ``e_s = ||x_s - x'_s||_1`` obeys ``e_{t0+1} <= 2 alpha_{t0+1} sqrt(D) R`` and
  ``e_{s+1} <= alpha_{s+1} (sqrt(D) R + lambda e_s)``, so ``e_s <= 2 alpha_s sqrt(D) R`` for every
  later s when ``2 alpha_0 lambda <= 1`` (checked): ``T`` releases of that sensitivity,
  ``eps <= T 2 alpha0 sqrt(D) R / b`` (``[DERIVED]``, :class:`DMODOnTask`), T times DMOD's own
  per-iteration account (``yuan``), which ignores the propagation. On the finite sum a record
  moves every step's gradient at different points; that recursion is not derived: not
  applicable there.
* ``dpdo`` (Huang, Mitra & Vaidya 2015; PDOP of paper 002), both logistic tasks, box radius
  ``r*``: accountant ``huang`` with adjacency ``record`` and ``G = R``: its gradient point ``v`` is
  a mix of noisy messages (own included), so it uses G only through the difference at a common
  point (the regulariser cancels). Stream: one-record gradients (batch 1), ``Delta_g = 2 sqrt(D)
  R``; finite sum: full local gradients, ``Delta_g = 2 sqrt(D) R / m``. The theorem sums over all K
  steps (as if the record entered each): on the stream that is more than the one step a record
  enters; it is reported as is.
* ``dp_dda`` (paper 001's baseline), the finite-sum logistic task only: its relation is the record
  relation already (as DO-ADP's entry): per-sample l2 clipping at ``G = 1``, minibatch ``B = 16``,
  Gaussian noise, node sampling ``p``; accountant ``proof`` (Huo et al.'s step-by-step account
  with k = d, delta0 = 1e-8, at delta = 1e-5); the gradient point ``x = Pi[-z / beta_t]`` is a
  function of the sent dual ``z``. Its box is ``[-r*, r*]^D``.

On the stream task the batch methods (every record at every step) are not applicable
(:attr:`~.tasks.Task.exclude`). Horizons: the stream's is one pass, ``min(1953, m)`` (a9a: m =
1953), quick ``min(200, m)``.

**Grids** (the same :data:`~.entries.GRID_TRIALS` = 4 per method, each run at every horizon of the
task: two step sizes times a noise-decay or step-decay exponent, DP-DDA's step times its batch;
quick mode runs the smaller step). The step sizes were placed by a scan
over decades (1e-3 .. 3) on a9a at epsilon 1 and 4 on both logistic tasks: every account here
charges the step times the sensitivity against the noise, so the calibrated noise grows with the
step, and for Algorithm 1, LDOL, DMOD and DPDO it enters the state at full scale: past a small
step, a larger one only adds noise. Each grid spans the scales where its method did best on
either task (DOLA: 0.03 on the stream, 0.3 on the finite sum; DPDO: 1e-3 and 0.1).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import numpy as np
import torch

from ... import graphs
from ...algorithms.dmod import DMOD
from ...algorithms.dola import DOLA
from ...algorithms.dpdda import DPDDA
from ...algorithms.dpdo import DPDO
from ...algorithms.ldol import LDOL
from ...algorithms.ldp_online import LDPOnline
from ...errors import ParameterError, require
from ...privacy.mechanism import Mechanism, Releases
from ...problems import LogisticRegression
from ...problems.online import LogisticSamples, OnlineProblem
from . import entries, tasks
from .entries import Entry

STREAM = "logistic_stream"
#: the entries that consume a one-pass stream (every other entry is a batch method)
ONLINE = ("ldp_online", "ldol", "dola", "dmod", "dpdo")


# ---- the stream ----------------------------------------------------------------------------------

class RecordStream(OnlineProblem):
    """Agent i's records ``pools[i]`` in order, ``batch`` of them per step, each used once: at
    step t the loss is the average over records ``t B .. (t+1) B - 1`` of its pool (an
    :class:`~dpnet.problems.online.OnlineProblem` whose stream is that order instead of i.i.d.
    draws, and whose online gradient is the current batch's only). The population objective
    (``grad``, ``loss``) is the average over each pool: the finite-sum objective of the same
    records. A step past the end of the stream is an error, never a second pass."""

    name = "record_stream"

    def __init__(self, model, n_agents: int, pools, batch: int = 1) -> None:
        super().__init__(model, n_agents, batch=batch, pools=pools, mode="window", window=1)

    @property
    def horizon(self) -> int:
        """Steps of one pass."""
        return self.pool_size // self.batch

    def sample_positions(self, rng, t, agents, purpose="sample") -> torch.Tensor:
        require(0 <= int(t) < self.horizon, "iteration", t,
                f"a step of the one-pass stream, 0 <= t < {self.horizon} (= m / batch; every "
                "record is used once)")
        pos = torch.arange(int(t) * self.batch, (int(t) + 1) * self.batch, device=self.device)
        return pos.reshape(1, -1).expand(len(agents), -1)

    def stochastic_grad(self, X, rng, k, batch_size=None, agents=None, purpose="sample"):
        """Gradient of step k's loss (its batch of records) at ``X``."""
        require(batch_size is None or int(batch_size) == self.batch, "batch_size", batch_size,
                f"None or the stream's batch = {self.batch}")
        a = self._agents(agents)
        pos = self.sample_positions(rng, k, a, purpose)
        rows = self.pools[:, pos[0]][self._index(a)]
        return self.model.grad(X, rows, self._full(rows.shape, 1.0 / self.batch))

    def describe(self):
        """:meth:`OnlineProblem.describe <dpnet.problems.online.OnlineProblem.describe>` plus the stream's
        order (one pass, records in order)."""
        return {**super().describe(), "stream": "one pass, records in order"}


def _stream(spec: tasks.TaskSpec, dataset: str | None) -> tasks.Task:
    ds = dataset or spec.dataset
    problem, evals, f_star, notes = tasks.split_binary(ds, spec.n_agents)
    n, m, d = problem.A.shape
    model = LogisticSamples(problem.A.reshape(-1, d).numpy(), problem.b.reshape(-1).numpy(),
                            reg=problem.reg)
    stream = RecordStream(model, n, np.arange(n * m).reshape(n, m))
    spec = dataclasses.replace(spec, title=spec.title.format(dataset=ds), dataset=ds,
                               horizon=min(spec.horizon, m),
                               quick_horizon=min(spec.quick_horizon, m))

    def exclude(name: str) -> str | None:
        return None if name in ONLINE else (
            "a finite-sum method (it draws from every local record at every step), not a "
            "one-pass stream")

    task = tasks.Task(spec, stream, graphs.circulant(spec.n_agents, offsets=(1, 2)), m, 1.0,
                      tasks.logistic_score(problem, evals, f_star), np.zeros(d),
                      (*notes, f"one pass over the m = {m} records per agent: horizon "
                       f"{spec.horizon} (quick {spec.quick_horizon}); utility on the batch "
                       "objective of the same records"), exclude)

    def reference(K: int) -> dict:
        """The yardstick is one-pass too: DOLA over its grid with the noise off, the best on
        the test split (a batch method's optimum would not be a stream's reach)."""
        return tasks.best_noise_free(task, [
            ("one-pass DOLA without noise (alpha0 = {alpha0:g}, power = {power:g}, the best of "
             "its grid on the test split)".format(**trial), trial["alpha0"],
             _dola(trial, task).noise_scaled(0.0)) for trial in entries.entry("dola").grid], K)

    task.reference = reference
    return task


tasks.register(tasks.TaskSpec(
    STREAM, "one-pass stream of the logistic task's records (LIBSVM {dataset}, lambda = 1e-3): "
    "at step t agent i's loss is its t-th training record's, each record used once; 10 agents, "
    "circulant graph (offsets 1, 2); horizon min(1953, m) (quick min(200, m))",
    "suboptimality f(xbar_K) - f* of the batch objective", 1953, 200, _stream, dataset="a9a",
    reads_dataset=True,
    relation="one record of one agent's stream replaced by any record with feature norm <= R = "
             "1; each record enters exactly one step, so its per-record gradient moves by at "
             "most 2R in l2 (2 sqrt(D) R in l1) at that step only", finite_sum=False))


# ---- what a task offers: kind, the l1 data-term bound, the public radius --------------------------

def kind(task) -> str | None:
    """``"stream"`` (a :class:`RecordStream` of logistic records), ``"batch"`` (the finite-sum
    :class:`~dpnet.problems.LogisticRegression`) or None (any other problem)."""
    p = task.problem
    if isinstance(p, RecordStream) and isinstance(p.model, LogisticSamples):
        return "stream"
    if isinstance(p, LogisticRegression) and p.convention == "average":
        return "batch"
    return None


def reg(task) -> float:
    """The regulariser ``reg`` of the task's loss: its sample model's on a :class:`RecordStream`, else the
    problem's own."""
    p = task.problem
    # a RecordStream's sample model has a reg (the protocol SampleModel does not declare it)
    return float(cast(Any, p.model).reg if isinstance(p, RecordStream) else p.reg)


def l1_data_bound(task) -> float:
    """Assumption 5's ``d`` for the logistic data term: ``sqrt(D) R``."""
    return math.sqrt(task.problem.dim) * task.R


def x_star_radius(task) -> float | None:
    """The public ``r* = sqrt(2 ln 2 / lambda) >= ||x*||_2`` (module docstring), or None."""
    if kind(task) is None or reg(task) <= 0:
        return None
    return math.sqrt(2.0 * math.log(2.0) / reg(task))


def _self_weights(graph) -> np.ndarray:
    """``|w_ii|`` of paper 002's Laplacian-like W (the mixing matrix is I + W)."""
    return np.abs(graph.sparse("laplacian_like").diagonal())


def _why_not(task, needs_radius: bool = False, batch_ok: bool = True) -> str | None:
    k = kind(task)
    if k is None:
        radius = " and the public radius sqrt(2 ln 2 / lambda)" if needs_radius else ""
        return (f"its mapping needs the logistic loss with bounded records (the l1 data-term "
                f"bound sqrt(D) R{radius}); {type(task.problem).__name__} has none derived")
    if needs_radius and x_star_radius(task) is None:
        return "its box needs a public bound on ||x*||, which this task does not give"
    if task.graph.directed or not task.graph.is_doubly_stochastic():
        return "it needs an undirected graph with doubly stochastic weights"
    if not batch_ok and k == "batch":
        return ("its gradient point is the agent's own clean state: a record used at every step "
                "moves every later gradient at two different points, and that recursion is not "
                "derived (its own account charges one release); it applies to the one-pass stream")
    return None


# ---- DOLA and DMOD described on a task ------------------------------------------------------------

def _releases(alg, problem, iterations: int, L: float | None, count: int, why: str) -> list:
    """``count`` Laplace releases of l1 sensitivity ``2 alpha0 sqrt(D) L`` at scale ``b``: each
    release t is ``Delta_t = 2 alpha_t sqrt(D) L`` under ``mu_t = b alpha_t / alpha0``, and a
    Laplace release's privacy loss depends only on ``Delta_t / mu_t``, the same for every t."""
    if L is None:
        raise ParameterError("gradient_bound", None, "L, half the l2 bound on the gradient "
                             "difference one record makes")
    n = problem.n_agents
    release = Releases("w_t + Lap(mu_t)", "laplace",
                       np.full(count, 2.0 * alg.alpha0 * math.sqrt(problem.dim) * L),
                       np.full(count, float(alg.noise_scale)))
    return [(np.arange(n), Mechanism((release,), "record", int(iterations), why,
                                         relation="replace_one"))]


class DOLAOnTask(DOLA):
    """DOLA whose :meth:`mechanism` is its releases under the record relation (module
    docstring): one release on a :class:`RecordStream` (parallel composition over records), all
    ``T`` on a finite sum."""

    def mechanism(self, problem, graph, iterations, assumptions):
        one = isinstance(problem, RecordStream)
        return _releases(self, problem, iterations, assumptions.gradient_bound,
                         1 if one else int(iterations),
                         "DOLA's gradient point is a function of the transcript: "
                         + ("a stream record moves one release (parallel composition)" if one
                            else "a record moves every release at a common point (L = R/m)"))


class DMODOnTask(DMOD):
    """DMOD whose :meth:`mechanism` charges every release after a stream record's step
    (``[DERIVED]``, module docstring): ``T`` releases of sensitivity ``2 alpha_t sqrt(D) R``."""

    def mechanism(self, problem, graph, iterations, assumptions):
        require(isinstance(problem, RecordStream), "problem", type(problem).__name__,
                "a one-pass RecordStream (the propagation bound is derived for it only)")
        return _releases(self, problem, iterations, assumptions.gradient_bound, int(iterations),
                         "[DERIVED] DMOD's own clean gradient point propagates a stream record "
                         "to every later release: e_s <= 2 alpha_s sqrt(D) R")


# ---- builders (the conditions the mappings rest on are checked here) -----------------------------

def _ldp_online(t: dict, task) -> LDPOnline:
    top = 1.0 - float(_self_weights(task.graph).max())
    require(t["lambda0"] * reg(task) <= top, "lambda0", t["lambda0"],
            f"lambda0 * lambda <= 1 - max_i |w_ii| = {top:.4g} (the regulariser folds into the "
            "self-weight without breaking Theorem 5's 1 - wbar)")
    return LDPOnline(t["lambda0"], 0.71, 1.0, t["varsigma"])


def _ldol(t: dict, task) -> LDOL:
    top = float(_self_weights(task.graph).max())
    require(top + t["lambda0"] * reg(task) <= 1.0, "lambda0", t["lambda0"],
            f"gamma0 max_i |w_ii| + lambda0 lambda <= 1 (gamma0 = 1, max |w_ii| = {top:.4g})")
    return LDOL(t["lambda0"], 0.71, 1.0, 0.7, 1.0, t["varsigma"],
                radius=x_star_radius(task))


def _dola(t: dict, task) -> DOLAOnTask:
    return DOLAOnTask(t["alpha0"], t["power"], 1.0, radius=x_star_radius(task))


def _dmod(t: dict, task) -> DMODOnTask:
    require(2 * t["alpha0"] * reg(task) <= 1.0, "alpha0", t["alpha0"],
            "2 alpha0 lambda <= 1 (the propagation bound e_s <= 2 alpha_s sqrt(D) R)")
    return DMODOnTask(t["alpha0"], t["power"], 1.0, radius=x_star_radius(task))


def _dpdo(t: dict, task) -> DPDO:
    p = t["p"]
    return DPDO(t["c"], p, 0.5 * (1.0 + p), 1.0, radius=x_star_radius(task),
                batch_size=1 if kind(task) == "stream" else None)


def _dp_dda(t: dict, task) -> DPDDA:
    return DPDDA(t["beta0"], sigma=1.0, clip=1.0,
                 batch_size=min(int(t["batch"]), task.m), radius=x_star_radius(task))


def _dp_dda_poisson(t: dict, task) -> DPDDA:
    return DPDDA(t["beta0"], sigma=1.0, clip=1.0, sampling="poisson",
                 batch_size=min(int(t["batch"]), task.m), radius=x_star_radius(task))


def _half_difference(task) -> float:
    """``L``: half the l2 bound on the gradient difference one record makes (stream: R; finite
    sum: R/m, at the smallest m_i where the sizes differ)."""
    return task.R if kind(task) == "stream" else task.sensitivity / 2


def _dpdda_why(task) -> str | None:
    if kind(task) == "stream":
        return "it samples minibatches from the whole local dataset, not a one-pass stream"
    return _why_not(task, needs_radius=True) or (
        None if getattr(task.problem, "supports_clip", False) else
        "its sensitivity comes from per-sample clipping, which this problem does not offer")


L1 = "Assumption 5's d = sqrt(D) R for the logistic data term (||grad phi||_1 <= ||a||_1)"

for _e in (
    Entry("ldp_online", entries._grid((0.001, 0.01), "lambda0", (0.51, 0.6), "varsigma"),
          _ldp_online, lambda task: {"l1_gradient_bound": l1_data_bound(task)}, "chen_wang",
          "rdp",
          f"paper 002 Lemma 1 + Theorem 5(1), {L1}; the regulariser folds into the self-weight "
          "(lambda0 lambda <= 1 - max|w_ii|, checked); the theorem charges 2d at every step, so "
          "it covers a stream record (one step) and a finite-sum record (every step; the whole "
          "local dataset is protected, no 1/m claimed); v = 0.71; tight row: RDP over the same "
          "releases (PLD over ~2000 distinct Laplace releases costs minutes per calibration)",
          inapplicable=_why_not),
    Entry("ldol", entries._grid((0.001, 0.01), "lambda0", (0.05, 0.15), "varsigma"),
          _ldol, lambda task: {"l1_gradient_bound": l1_data_bound(task)}, "chen_wang", "rdp",
          f"[DERIVED] Theorem 5(1)'s argument on (17), {L1}; the regulariser folds into "
          "1 - gamma_t|w_ii| - lambda_t lambda (gamma0 max|w_ii| + lambda0 lambda <= 1, checked); "
          "box radius r* = sqrt(2 ln 2 / lambda); v = 0.71, u = 0.7, gamma0 = 1",
          inapplicable=lambda task: _why_not(task, needs_radius=True)),
    Entry("dola", entries._grid((0.03, 0.3), "alpha0", (0.5, 1.0), "power"),
          _dola, lambda task: {"gradient_bound": _half_difference(task)}, "laplace", "pld",
          "gradient point b_t is a function of the transcript, so a record moves w_{t+1} by "
          "<= 2 alpha_{t+1} sqrt(D) L in l1 (L = R; regulariser cancels): stream, one release "
          "per record, eps = 2 alpha0 sqrt(D) R / b = DOLA's published account; finite sum, "
          "L = R/m at all T releases, T times the published account; box radius r*",
          inapplicable=lambda task: _why_not(task, needs_radius=True)),
    Entry("dmod", entries._grid((0.001, 0.01), "alpha0", (0.5, 1.0), "power"),
          _dmod, lambda task: {"gradient_bound": task.R}, "laplace", "rdp",
          "[DERIVED] stream only: the own clean gradient point propagates a record to every "
          "later release, e_s <= 2 alpha_s sqrt(D) R (2 alpha0 lambda <= 1, checked): T releases, "
          "eps = T 2 alpha0 sqrt(D) R / b, T times DMOD's own per-iteration account; box r*",
          inapplicable=lambda task: _why_not(task, needs_radius=True, batch_ok=False)),
    Entry("dpdo", entries._grid((0.001, 0.1), "c", (0.99, 0.999), "p"),
          _dpdo, lambda task: {"gradient_bound": task.R, "adjacency": "record"}, "huang", "rdp",
          "Huang et al.'s Laplace composition, record adjacency, G = R (the gradient point is a "
          "mix of noisy messages: the difference is at a common point, the regulariser cancels): "
          "stream, batch 1, Delta_g = 2 sqrt(D) R; finite sum, full gradients, "
          "Delta_g = 2 sqrt(D) R / m; summed over all K steps; q = (1 + p)/2; box radius "
          "r* = sqrt(2 ln 2 / lambda) >= ||x*|| (f(0) = ln 2, lambda-strong convexity)",
          inapplicable=lambda task: _why_not(task, needs_radius=True)),
    Entry("dp_dda", entries._grid((0.1, 0.3), "beta0", entries.BATCHES, "batch"),
          _dp_dda, lambda task: {"gradient_bound": 1.0}, "proof", "pld",
          "paper 001's record relation: l2 clipping at G = 1, a fixed batch B in 16, 64 (m if "
          "smaller) drawn without replacement, every node active (p = 1: node sampling is "
          "visible and only removes releases), k = d; Huo et al.'s step-by-step accountant at "
          "delta = 1e-5 (delta0 = 1e-8); box radius r* = sqrt(2 ln 2 / lambda) >= ||x*||",
          {"proof": {"delta0": 1e-8}}, _dpdda_why),
    Entry("dp_dda_poisson", entries._grid((0.1, 0.3), "beta0", entries.BATCHES, "batch"),
          _dp_dda_poisson, lambda task: {"gradient_bound": 1.0}, "pld", None,
          entries.POISSON_TWIN.format(row="dp_dda"),
          inapplicable=lambda task: task.exclude("dp_dda") or _dpdda_why(task)),
):
    entries.register(_e)
