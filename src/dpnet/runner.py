"""``dpnet.run``: the iteration loop, metrics, results.

Metrics every ``log_every`` iterations (and at the last one), with ``xbar`` the agents' average:

* ``objective``: ``f(xbar)`` (the problem's convention);
* ``grad_norm_sq``: ``||grad f(xbar)||^2``;
* ``consensus``: ``||x - 1 xbar||^2`` (stacked, summed over agents);
* ``distance``: ``||x - 1 x_ref||^2`` to a reference point (``reference=`` or the problem's
  optimum, when known);
* ``bits``: cumulative bits on the wire; ``bits_per_agent``: the same divided by n.

Cost of one logged row: ``consensus``, ``distance`` and the bits are O(n d) tensor sums (one
all-reduce in the distributed backend); ``objective`` and ``grad_norm_sq`` evaluate the global
objective and its gradient at ``xbar`` once, a pass over the records the problem's metrics read
(:meth:`Problem.metric_records`: every agent's for a finite-sum problem, a fixed sample of 2,048
for a :class:`NeuralProblem` by default; counted once per pass, and the objective and the gradient
are two passes unless the problem fuses them, as logistic regression does). The default cadence
``log_every="auto"`` logs iteration 0, every c-th iteration and the last, with c the smallest
cadence at which those rows cost at most 10 % of the steps (and at least ``K // 500``: at most
about 500 rows). A row's cost in steps is :func:`metric_cost_ratio`, the records it reads over
the records a step reads: 1 for full gradients of logistic regression, ``N / (n q m)`` for DP-SGD
at rate ``q``, 2 for problems without records. So a full-gradient logistic run of 100 iterations
logs 10 rows, a DP-SGD run at q = 0.01 of 400 iterations its first and last.
``Result.timing`` says how the wall time split between setup, steps, metrics and the privacy
account (``benchmarks/bench_metrics.py`` measures the share).

A non-finite value in any state tensor stops the run at once with :class:`NonFiniteError` naming
the iteration and the variable.

A run that finishes but should not be trusted says so: :meth:`Result.diagnosis` lists one line per
finding (the objective ended above its start; epsilon above :data:`EPSILON_WARN`, a guarantee
close to none), and :func:`run` emits each line as a :class:`RunDiagnosis` warning, so a Python
user sees it without asking; a caller that prints ``res.diagnosis()`` itself (the CLI) silences
them with ``warnings.simplefilter("ignore", dpnet.runner.RunDiagnosis)``.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import hashlib
import json
import logging
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from .algorithms.base import Algorithm, Context, State
from .algorithms.base import available as algorithms_available
from .errors import NonFiniteError, ParameterError, UnknownNameError, positive_int
from .graphs import Graph, GraphSchedule
from .network import BitLedger, Network, Transcript
from .privacy.accountants import split_constants
from .privacy.guarantee import PrivacyGuarantee
from .problems.base import Problem, canonical_device, ranges_text
from .problems.neural import NeuralProblem
from .rng import Streams
from .secret_rng import RANDOMNESS, SecretStreams
from .threads import run_threads, torch_threads

#: above this epsilon per agent a run's guarantee is reported as close to none
#: (e^10 ~ 22000: an adversary's odds between neighbouring inputs may move by that factor)
EPSILON_WARN = 10.0


class RunDiagnosis(UserWarning):
    """A finished run's warning: see :meth:`Result.diagnosis`."""


@dataclass
class Result:
    """Outcome of :func:`run`; arrays are NumPy, easy to save."""

    algorithm: str
    x: np.ndarray
    history: dict[str, np.ndarray]
    ledger: BitLedger
    privacy: PrivacyGuarantee
    transcript: Transcript | None
    state: dict[str, np.ndarray]
    iterations: int
    seed: int
    params: dict[str, Any] = field(default_factory=dict)
    wall_time: float = 0.0
    timing: dict[str, float] = field(default_factory=dict)
    #: "reproducible" (every draw a function of the seed) or "secret" (dpnet.secret_rng)
    randomness: str = "reproducible"

    @property
    def bits(self) -> dict:
        """The bits on the wire, :meth:`BitLedger.as_dict <dpnet.network.BitLedger.as_dict>`: total, per
        agent and per message name."""
        return self.ledger.as_dict()

    @property
    def x_mean(self) -> np.ndarray:
        """``(d,)``: the average ``xbar`` of the agents' final iterates (the rows of ``x``)."""
        return self.x.mean(axis=0)

    def diagnosis(self) -> list[str]:
        """One line per reason to distrust this run (empty when there is none):

        * the objective ended above its start (the logged ``objective``; where it is not finite
          at both ends, the ``distance`` to the reference, else ``grad_norm_sq``): the step is too
          large for the noise, or the noise drowns the signal;
        * epsilon per agent above :data:`EPSILON_WARN` (a finite one: an infinite epsilon is a
          run that claims no privacy, which ``res.privacy`` says).
        """
        lines = []
        for name in ("objective", "distance", "grad_norm_sq"):
            v = np.asarray(self.history.get(name, ()), dtype=np.float64)
            if v.size >= 2 and np.isfinite(v[0]) and np.isfinite(v[-1]):
                if v[-1] > v[0]:
                    lines.append(f"{name} ended above its start ({v[0]:.4g} -> {v[-1]:.4g} over "
                                 f"{self.iterations} iterations): the run made things worse; "
                                 "try a smaller step or less noise")
                break
        eps = float(self.privacy.epsilon)
        if math.isfinite(eps) and eps > EPSILON_WARN:
            lines.append(f"epsilon = {eps:.3g} per agent exceeds {EPSILON_WARN:g}: the guarantee "
                         "is close to none (calibrate the noise: alg.calibrate(target, ...))")
        return lines

    def to_csv(self, path: str | Path) -> Path:
        """Write the history to ``path`` as CSV, one column per metric and one row per logged iteration (a
        non-finite number as its string, ``nan`` or ``inf``), creating the parent folders; returns the
        path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.history)
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(keys)
            for row in zip(*(self.history[k] for k in keys)):
                w.writerow([_num(v) for v in row])
        return path

    def summary(self) -> dict[str, Any]:
        """Plain, strict-JSON-safe dict: a metric the run does not track (NaN: the distance
        without a known optimum) is null, an infinite number (a non-private run's epsilon) the
        string "inf"."""
        last = {k: v[-1] for k, v in self.history.items() if len(v)}
        return _plain({"algorithm": self.algorithm, "params": self.params,
                       "iterations": self.iterations, "seed": self.seed,
                       "randomness": self.randomness, "final": last,
                       "bits": self.ledger.as_dict(), "privacy": self.privacy.as_dict(),
                       "wall_time_s": self.wall_time, "timing_s": dict(self.timing)})

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`summary` to ``path`` as indented strict JSON, creating the parent folders; returns
        the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.summary(), indent=2, default=_num, allow_nan=False))
        return path


def _num(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    value = _num(obj)
    return None if value == "nan" else value


def _check_finite(state: State, k: int) -> None:
    for name, t in state.items():
        # one summing pass: a NaN or inf entry makes the sum non-finite; only then (or when a
        # finite sum overflowed) is the elementwise check paid for
        if not torch.is_floating_point(t) or bool(torch.isfinite(t.sum())):
            continue
        if not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).any(dim=-1).nonzero()[0, 0]) if t.ndim > 1 else 0
            raise NonFiniteError(k, name, f"first bad row {bad}")


def fingerprint(problem: Problem, graph: Graph | GraphSchedule) -> str:
    """SHA-256 of what a run computes on: the problem's type, public data (tensors, arrays,
    numbers, strings; underscored attributes are caches derived from them) and the graph's name
    and weights. A checkpoint carries it, so a resume on another problem or graph is refused."""
    h = hashlib.sha256(type(problem).__qualname__.encode())
    for name, value in sorted(vars(problem).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous().numpy()
        if isinstance(value, np.ndarray):
            h.update(f"{name}:{value.dtype}:{value.shape}".encode())
            h.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, int | float | str | bool | type(None)):
            h.update(f"{name}={value!r}".encode())
    h.update(f"graph {graph.name} {graph.n}".encode())
    # a schedule by its name (its seed and parameters are in it) and its first rounds' weights
    rounds = ([cast(GraphSchedule, graph).at(k) for k in range(3)]
              if getattr(graph, "time_varying", False) else [cast(Graph, graph)])
    for g in rounds:
        W = g.sparse("W").tocsr()
        for part in (W.indptr, W.indices, W.data):
            h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()


#: what a snapshot of :func:`run` holds (``resume`` refuses one without it)
SNAPSHOT_KEYS = ("iteration", "algorithm", "params", "seed", "n", "fingerprint", "state",
                 "history", "network")


def _slack_of(snap: dict) -> float:
    """The lattice slack a snapshot carries (0 before any lattice release; older snapshots)."""
    slack = snap.get("lattice_slack", 0.0)
    if isinstance(slack, bool) or not isinstance(slack, int | float) or not 0 <= slack < math.inf:
        raise ParameterError("resume.lattice_slack", slack, "a number >= 0 (damaged snapshot)")
    return float(slack)


def _lattice_floor(algorithm: Algorithm, problem: Problem, graph, iterations: int,
                   privacy: dict | None) -> tuple[np.ndarray | None, str]:
    """The per-iteration sensitivity floors of a secret run's Gaussian releases
    (:meth:`Algorithm.lattice_floor`) under the assumptions the run's account is given, or None
    and why not."""
    rest = {k: v for k, v in (privacy or {}).items() if k not in ("assumptions", "accountant")}
    try:   # the accountant's own options are checked where the account is computed
        facts, _ = split_constants((privacy or {}).get("assumptions"), rest, tuple(rest))
        floor = algorithm.lattice_floor(problem, graph, iterations, facts)
    except (ParameterError, UnknownNameError) as err:
        return None, f"its sensitivity is not known at the run's start ({err})"
    if floor is None:
        return None, f"{algorithm.name} states no lower bound on its releases' sensitivity"
    floor = np.asarray(floor, dtype=np.float64).reshape(-1)
    if floor.shape != (iterations,) or not bool(np.all(floor > 0)):
        raise ParameterError(f"{algorithm.name}.lattice_floor", floor.shape, "one floor > 0 per "
                             f"iteration ({iterations}; inf where no release is sensitive)")
    return floor, ""


def _charge_lattice(guarantee: PrivacyGuarantee, slack: float, bump: float = 0.0,
                    floating: str = "") -> PrivacyGuarantee:
    """The guarantee of a run whose releases were drawn on a lattice (:mod:`dpnet.lattice`).
    Laplace ones: a pure-DP account plus the rounding's ``slack``; an (epsilon, delta) account of
    continuous Laplace noise does not cover them: no guarantee. Gaussian ones raised their noise
    by a factor of at most ``1 + bump`` to pay for the rounding: the account holds, with a note.
    ``floating``: why Gaussian releases were drawn in floating point instead (a note)."""
    if bump > 0 and guarantee.is_private:
        guarantee = dataclasses.replace(guarantee, notes=(*guarantee.notes, (
            f"secret randomness: Gaussian releases rounded to a power-of-two lattice "
            f"(dpnet.lattice, floating-point safe), their noise raised by a factor of at most "
            f"1 + {bump:.3g} to pay for the rounding, at the sensitivity floor of this run's "
            "assumptions (docs/deploying.md)")))
    if floating and guarantee.is_private:
        guarantee = dataclasses.replace(guarantee, notes=(*guarantee.notes, (
            "secret randomness: Gaussian releases drawn in floating point, whose low bits may "
            f"reveal the value they protect (Mironov 2012), because {floating}")))
    if slack == 0 or not guarantee.is_private:
        return guarantee
    if guarantee.delta > 0:
        return PrivacyGuarantee.none(
            f"{guarantee.theorem} is an (epsilon, delta) account of continuous Laplace noise; "
            "secret randomness drew it on a lattice (dpnet.lattice), which only a pure-DP "
            "account covers: choose a pure-DP accountant", guarantee.horizon)
    note = (f"secret randomness: Laplace noise drawn exactly on a power-of-two lattice "
            f"(dpnet.lattice, floating-point safe); epsilon includes the rounding's {slack:.3g}")
    return dataclasses.replace(guarantee, epsilon=guarantee.epsilon + slack,
                               per_agent=tuple(e + slack for e in guarantee.per_agent),
                               notes=(*guarantee.notes, note))


def charge_repeated_releases(guarantee: PrivacyGuarantee, algorithm: Algorithm, problem: Problem,
                             graph, iterations: int, counts: np.ndarray,
                             privacy: dict | None = None) -> PrivacyGuarantee:
    """The guarantee of a secret run some of whose iterations went out more than once: a
    distributed run resumed from a checkpoint after a fault re-executes, with fresh secret draws,
    the iterations the failed attempt had already sent; ``counts[t]`` bounds how many times
    iteration t was sent (:meth:`dpnet.distributed.RankCheckpoints.release_counts`).

    An (epsilon, delta) guarantee of an algorithm whose steps are one mechanism repeated
    (:attr:`Algorithm.identical_steps`) is recomputed over ``sum(counts)`` steps. Otherwise the
    releases split into ``m = max(counts)`` layers, each a part of one run of the horizon,
    composed by basic composition: ``m`` times the run's epsilon (a pure one with its lattice
    slack), at ``delta / m`` each (so the printed delta holds). A reproducible run needs none
    of this: its re-executed iterations send the same bits."""
    counts = np.asarray(counts, dtype=np.int64)
    total, m = int(counts.sum()), int(counts.max(initial=1))
    if total <= iterations or m <= 1 or not guarantee.is_private:
        return guarantee
    given = dict(privacy or {})
    try:
        # a pure guarantee may carry the lattice's slack, which a recomputed account lacks
        if algorithm.identical_steps and guarantee.delta > 0:
            g = algorithm.privacy(problem, graph, iterations=total, **given)
            eps, per, how = g.epsilon, g.per_agent, f"accounted as {total} steps"
        else:
            if guarantee.delta > 0:
                g = algorithm.privacy(problem, graph, iterations=iterations,
                                      **{**given, "delta": guarantee.delta / m})
            else:
                g = guarantee
            eps, per = m * g.epsilon, tuple(m * e for e in g.per_agent)
            how = f"{m} layers of one run each, basic composition at delta / {m} each"
    except (ParameterError, UnknownNameError) as err:
        return PrivacyGuarantee.none(f"a resumed secret run sent {total - iterations} "
                                     f"iterations twice, and their account fails: {err}",
                                     iterations)
    return dataclasses.replace(guarantee, epsilon=eps, per_agent=per, notes=(*guarantee.notes, (
        f"resumed after a fault: {total - iterations} iterations were sent again with fresh "
        f"secret noise ({total} releases per agent in all, {how})")))


def _restore(snap: dict, algorithm: Algorithm, graph: Graph, seed: int, K: int, log_every: int,
             net: Network, tracker: Metrics, problem: Problem) -> tuple[int, State]:
    """Check that a snapshot belongs to this run, load it, return (iteration, state)."""
    missing = [k for k in SNAPSHOT_KEYS if not isinstance(snap, dict) or k not in snap]
    if missing:
        raise ParameterError("resume", type(snap).__name__ if not isinstance(snap, dict) else
                             f"a snapshot without {', '.join(missing)}", "a snapshot that "
                             f"dpnet.run wrote (keys {', '.join(SNAPSHOT_KEYS)}): damaged, or "
                             "from another program or version")
    k0 = snap["iteration"]
    if isinstance(k0, bool) or not isinstance(k0, int) or not 0 <= k0 <= K:
        raise ParameterError("resume.iteration", k0, f"an integer in [0, iterations = {K}]")
    for key, mine in (("algorithm", algorithm.name), ("params", algorithm.params()),
                      ("seed", seed), ("n", graph.n),
                      ("fingerprint", fingerprint(problem, graph))):
        if snap[key] != mine:
            what = "this run's problem and graph" if key == "fingerprint" else "this run"
            raise ParameterError(f"resume.{key}", snap[key], f"the value of {what} ({mine!r})")
    try:
        net.load_state_dict(snap["network"])
        rows = copy.deepcopy(snap["history"])
        state = {name: t.detach().to(net.device, copy=True) for name, t in snap["state"].items()}
    except (KeyError, TypeError, AttributeError, ValueError, RuntimeError) as err:
        raise ParameterError("resume", f"{type(err).__name__}: {err}", "a snapshot whose state, "
                             "history and network parts are those dpnet.run wrote (damaged)"
                             ) from None
    if rows["iteration"] and rows["iteration"][-1] == k0 and k0 % log_every and k0 < K:
        for v in rows.values():  # a final row of a shorter run that this one would not log
            v.pop()
    tracker.rows = rows
    return k0, state


#: where a run's progress lines go when no terminal shows a bar, and how often
LOG = logging.getLogger("dpnet.run")
PROGRESS_EVERY_S = 30.0
#: a run that looks, after FORECAST_AFTER_S seconds of steps, to need more than LONG_RUN_S says so
FORECAST_AFTER_S, LONG_RUN_S = 2.0, 600.0


def _progress(total: int, enabled: bool | None):
    if enabled is None:
        enabled = sys.stderr.isatty() and total >= 2000
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="it", leave=False)


class Metrics:
    """Collects the standard metrics (collectively: one sum over agents per quantity)."""

    def __init__(self, problem: Problem, net: Network, reference: torch.Tensor | None,
                 extra: dict[str, Callable[[State, int], float]] | None = None) -> None:
        self.problem, self.net, self.reference = problem, net, reference
        self.extra = extra or {}
        self.rows: dict[str, list] = {k: [] for k in
                                      ("iteration", "objective", "grad_norm_sq", "consensus",
                                       "distance", "bits", "bits_per_agent")}
        for k in self.extra:
            self.rows[k] = []
        self.seconds = 0.0   # wall time spent logging (Result.timing["metrics"])

    def log(self, k: int, x: torch.Tensor, state: State) -> None:
        """Append the metrics row of iteration k for the local iterates x, ``(n_local, d)``: ``f(xbar)``
        and ``||grad f(xbar)||^2`` at the average iterate, the consensus error ``sum_i ||x_i - xbar||^2``,
        the distance ``sum_i ||x_i - x*||^2`` to the reference (NaN without one), the bits so far (in
        total and per agent) and each extra metric of ``state``; its wall time is added to ``seconds``.

        Collective in the distributed backend (one all-reduce). Raises
        :class:`~dpnet.errors.NonFiniteError` where ``f(xbar)`` or its gradient is NaN."""
        start = time.perf_counter()
        self._log(k, x, state)
        self.seconds += time.perf_counter() - start

    def _log(self, k: int, x: torch.Tensor, state: State) -> None:
        net, n = self.net, self.net.n
        ref = self.reference
        local_dist = float(((x - ref) ** 2).sum()) if ref is not None else 0.0
        xbar, cons, (dist, total) = net.moments(x, [local_dist, float(net.ledger.total)])
        objective, gradient = self._at(xbar)
        grad_sq = float((gradient ** 2).sum())
        if math.isnan(objective) or math.isnan(grad_sq):
            # finite iterates can still make f undefined (a step of 1e300: inf - inf): a history
            # of NaN is no result (an infinite f is a divergence the iterates show next)
            raise NonFiniteError(k, "objective" if math.isnan(objective) else "gradient",
                                 f"f(xbar) = {objective}, ||grad f(xbar)||^2 = {grad_sq} at the "
                                 "average iterate")
        self.rows["iteration"].append(k)
        self.rows["objective"].append(objective)
        self.rows["grad_norm_sq"].append(grad_sq)
        self.rows["consensus"].append(cons)
        self.rows["distance"].append(dist if ref is not None else float("nan"))
        self.rows["bits"].append(int(total))
        self.rows["bits_per_agent"].append(total / n)
        for name, fn in self.extra.items():
            self.rows[name].append(float(fn(state, k)))

    def _at(self, xbar: torch.Tensor) -> tuple[float, torch.Tensor]:
        """``f(xbar)`` and ``grad f(xbar)``. A problem holding every agent's data evaluates them
        itself (every rank alike); one holding this rank's agents only (a distributed run with
        per-rank data) sums its agents' terms, and one all-reduce adds the ranks' sums."""
        problem, net = self.problem, self.net
        if problem.held is None:
            return problem.loss_and_grad(xbar)
        Xbar = xbar.reshape(1, -1).expand(net.n_local, -1)
        terms = torch.cat([problem.local_loss(Xbar, net.agents).reshape(-1, 1).double(),
                           problem.grad(Xbar, net.agents).double()], dim=1)
        total = net.sum_agents(terms) * problem._scale()
        return float(total[0]), total[1:]

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows logged so far, one NumPy array per metric name: the run's ``history``."""
        return {k: np.asarray(v) for k, v in self.rows.items()}


#: the "auto" cadence logs at most about this many rows
AUTO_LOG_ROWS = 500
#: and keeps the metrics' cost, estimated in records read, at most this share of the steps'
METRIC_SHARE = 0.1
#: a metrics row of a problem without records, in full-gradient steps: the objective and the
#: gradient at xbar are two passes over every agent's terms where a step takes one (measured on
#: the synthetic quadratic with DGD, the cheapest step: a row costs about two steps)
RECORDLESS_ROW_COST = 2.0


def metric_cost_ratio(algorithm: Algorithm, problem: Problem) -> float:
    """The records one metrics row reads over the records one step reads (all agents): 1 for a
    full-gradient algorithm on a finite-sum problem, ``N / (n q m)`` for Poisson-sampled DP-SGD.
    :data:`RECORDLESS_ROW_COST` for a problem without records."""
    rows, sizes = problem.metric_records(), problem.local_sizes()
    if rows is None or sizes is None:
        return RECORDLESS_ROW_COST
    m = float(sizes.mean())
    per_agent = algorithm.records_per_step(problem)
    per_agent = m if per_agent is None else min(m, per_agent)
    return rows / (problem.n_agents * per_agent)


def log_cadence(log_every: int | str, iterations: int, cost_ratio: float = 0.0) -> int:
    """``log_every`` as a positive int. ``"auto"``: every ``max(1, iterations // 500)``
    iterations, or sparser where a metrics row costs ``cost_ratio`` steps
    (:func:`metric_cost_ratio`): the smallest cadence whose rows (iteration 0, the multiples of
    the cadence and the last iteration) cost at most 10 % of the steps, or only the first and
    last rows when even those two cost more."""
    if isinstance(log_every, str):
        if log_every != "auto":
            raise ParameterError("log_every", log_every, "a positive integer or 'auto'")
        every = max(1, iterations // AUTO_LOG_ROWS)
        if cost_ratio > 0 and iterations > 0:
            budget = METRIC_SHARE * iterations / cost_ratio       # rows the share pays for
            # cadence c logs 1 + ceil(K / c) rows; the tolerance keeps exact budgets exact
            spare = math.floor(budget - 1 + 1e-9)
            every = max(every, iterations if spare < 1 else math.ceil(iterations / spare))
        return every
    return positive_int("log_every", log_every)


def _to_cpu_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy().copy()


def run(algorithm: Algorithm, problem: Problem, graph: Graph, iterations: int,
        x0: torch.Tensor | np.ndarray | None = None, seed: int = 0,
        log_every: int | str = "auto",
        record: bool = False, float_bits: int = 64, reference: torch.Tensor | None | str = "auto",
        privacy: dict[str, Any] | None = None, progress: bool | None = None,
        network: Network | None = None,
        metrics: dict[str, Callable[[State, int], float]] | None = None,
        callback: Callable[[int, State], None] | None = None,
        checkpoint: Callable[[dict], object] | None = None, checkpoint_every: int = 0,
        resume: dict | None = None, device: torch.device | str | None = None,
        threads: int | None = None, randomness: str = "reproducible") -> Result:
    """Run ``algorithm`` for ``iterations`` steps on ``problem`` over ``graph``.

    ``x0``: ``(n, d)`` or ``(d,)`` (default: the problem's ``U[0,1]^d`` start from ``seed``).
    ``record=True`` keeps the transcript and per-agent-per-iteration bits. ``privacy``: what
    ``algorithm.privacy`` takes (assumptions such as ``gradient_bound``, ``adjacency_radius``,
    ``delta``; an ``accountant`` name and its options; unknown names are errors).
    ``reference="auto"`` uses the problem's optimum for the distance metric when it knows one.
    ``checkpoint_every=m`` hands ``checkpoint`` a snapshot dict every m iterations;
    ``resume=snapshot`` continues from one and reproduces the uninterrupted run exactly (draws are
    keyed by iteration, so the state, history, ledger and transcript are all there is to save).
    ``log_every="auto"``: at most about 500 rows, metrics at most about 10 % of the steps (see
    the module docstring); an integer logs every that many iterations.
    ``device``: where state, problem data, noise, compression and mixing live (``"cuda"``,
    ``"cpu"``, any torch device; default: the given network's, else the CPU); the result, its
    history and transcript are NumPy arrays on the CPU whatever the device.
    ``randomness``: ``"reproducible"`` (every draw a public function of ``seed``: simulation,
    reproductions, tests) or ``"secret"`` (:mod:`dpnet.secret_rng`: the draws a guarantee assumes
    hidden come from AES-CTR under a key from the OS's entropy; two runs with one seed differ).
    ``threads``: torch's intra-op threads during the run (None: the policy of
    :mod:`dpnet.threads`: ``$DPNET_THREADS`` when set, else 1 thread when ``n_agents * dim <
    10^5`` and the problem is not neural, else the caller's count; oversubscribed threads on a
    busy machine cost 3-30x on small problems); the caller's count is restored afterwards.
    The :meth:`Result.diagnosis` lines (objective ended above its start, epsilon above 10) are
    emitted as :class:`RunDiagnosis` warnings."""
    for name, value, kind in (("algorithm", algorithm, Algorithm), ("problem", problem, Problem),
                              ("graph", graph, (Graph, GraphSchedule))):
        if not isinstance(value, kind):
            what = " or ".join(f"a {k.__module__}.{k.__name__}" for k in
                               (kind if isinstance(kind, tuple) else (kind,)))
            raise ParameterError(name, value, what)
    if isinstance(iterations, bool) or not isinstance(iterations, int | np.integer) \
            or iterations < 0:
        raise ParameterError("iterations", iterations, "an integer >= 0 (0: the start x0 only)")
    if randomness not in RANDOMNESS:
        raise UnknownNameError("randomness", randomness, RANDOMNESS)
    count = run_threads(problem.n_agents, problem.dim, isinstance(problem, NeuralProblem), threads)
    with torch_threads(count):
        res = _run(algorithm, problem, graph, iterations, x0, seed, log_every, record, float_bits,
                   reference, privacy, progress, network, metrics, callback, checkpoint,
                   checkpoint_every, resume, device, randomness)
    for line in res.diagnosis():
        warnings.warn(f"{res.algorithm}: {line}", RunDiagnosis, stacklevel=2)
    return res


def _check_schedule(algorithm, schedule) -> None:
    """A time-varying graph for an algorithm whose theorems allow one, each checked round's W
    doubly stochastic and nonnegative and the union connected; a named error otherwise."""
    if not algorithm.time_varying_graphs:
        from_theorems = sorted(n for n, c in algorithms_available().items()
                               if c.time_varying_graphs)
        raise ParameterError("graph", schedule.name, f"a fixed graph for {algorithm.name}: its "
                             "theorems assume one W (algorithms whose theorems allow a "
                             f"time-varying W: {', '.join(from_theorems)})")
    schedule.require_time_varying_ok(algorithm.name)


def _run(algorithm, problem, graph, iterations, x0, seed, log_every, record, float_bits, reference,
         privacy, progress, network, metrics, callback, checkpoint, checkpoint_every, resume,
         device, randomness="reproducible") -> Result:
    setup_start = time.perf_counter()
    K = int(iterations)
    if device is None:
        device = network.device if network is not None else torch.device("cpu")
    device = canonical_device(device)
    if network is not None and network.device != device:
        raise ParameterError("device", str(device), f"the network's device ({network.device})")
    if problem.n_agents != graph.n:
        raise ParameterError("graph.n", graph.n, f"the problem has n_agents = {problem.n_agents}")
    if getattr(graph, "time_varying", False):
        _check_schedule(algorithm, graph)
    else:
        algorithm.check_graph(graph)
    algorithm.check_problem(problem)
    if network is not None and network.rng.kind != randomness:
        raise ParameterError("randomness", randomness, f"the given network's ({network.rng.kind}"
                             " streams): make the network with the run's streams")
    # secret streams are one object per process (their key, the agreed pair keys): the given
    # network's; seeded ones are equal whenever their seeds are
    rng = (network.rng if network is not None and randomness == "secret" else
           SecretStreams(seed) if randomness == "secret" else Streams(seed))
    # the state's dtype is the problem's (a NeuralProblem's rows are float32)
    net = network or Network(graph, record=record, float_bits=float_bits, rng=rng, device=device,
                             dtype=getattr(problem, "dtype", torch.float64))
    problem = problem.to(device)
    log_every = log_cadence(log_every, K, metric_cost_ratio(algorithm, problem))
    if problem.held is not None and not np.isin(net.agents, problem.held).all():
        raise ParameterError("problem.held", ranges_text(problem.held), "the data of every agent of "
                             f"this process ({ranges_text(net.agents)}); restrict() to them")
    x0 = problem.default_x0(seed) if x0 is None else x0
    X0 = problem.check_x(x0)[torch.as_tensor(net.agents, device=device)]
    if isinstance(reference, str):
        reference = problem.optimum() if reference == "auto" else None
    if reference is not None:
        reference = torch.as_tensor(reference, dtype=torch.float64).reshape(-1).to(device)
    ctx = Context(problem, net, rng)
    if randomness == "secret":
        ctx.lattice_floor, ctx.lattice_floor_reason = _lattice_floor(algorithm, problem, graph,
                                                                     K, privacy)
    tracker = Metrics(problem, net, reference, metrics)
    start = time.perf_counter()
    setup_s = start - setup_start
    net.set_iteration(0)
    state = algorithm.init(ctx, X0)  # also on resume: algorithms may set up caches here
    if resume is None:
        k0 = 0
        _check_finite(state, 0)
        tracker.log(0, algorithm.iterate(state), state)
    else:
        k0, state = _restore(resume, algorithm, graph, seed, K, log_every, net, tracker, problem)
        ctx.lattice_slack = _slack_of(resume)
    bar = _progress(K - k0, progress)
    # without a terminal's bar, a long run still says where it is (logger "dpnet.run": the
    # command line shows it on stderr; a library caller sees it if it configures logging)
    heard = start
    forecast = progress is not False
    mark = fingerprint(problem, graph) if checkpoint is not None and checkpoint_every else None
    for k in range(k0, K):
        net.set_iteration(k)
        state = algorithm.step(ctx, state, k)
        _check_finite(state, k + 1)
        if callback is not None:
            callback(k + 1, state)
        if (k + 1) % log_every == 0 or k + 1 == K:
            tracker.log(k + 1, algorithm.iterate(state), state)
        if checkpoint is not None and checkpoint_every and (k + 1) % checkpoint_every == 0:
            checkpoint({"iteration": k + 1, "algorithm": algorithm.name,
                        "params": algorithm.params(), "seed": seed, "n": graph.n,
                        "fingerprint": mark, "state": {name: t.detach().clone() for name, t in state.items()},
                        "history": copy.deepcopy(tracker.rows), "network": net.state_dict(),
                        "lattice_slack": ctx.lattice_slack})
        if forecast and time.perf_counter() - start >= FORECAST_AFTER_S:
            forecast = False       # once: a mistyped horizon should not run for hours unsaid
            each = (time.perf_counter() - start) / (k + 1 - k0)
            if each * (K - k0) > LONG_RUN_S:
                LOG.warning("%s: %d iterations will take about %.0f min at this pace (%.3g s "
                            "each); interrupt (Ctrl-C) if that is not what you meant",
                            algorithm.name, K - k0, each * (K - k0) / 60, each)
        if bar is not None:
            bar.update(1)
        elif time.perf_counter() - heard >= PROGRESS_EVERY_S and progress is not False:
            heard = time.perf_counter()
            done, spent = k + 1 - k0, heard - start
            LOG.info("%s: iteration %d of %d (%.0f %%), %.0f s so far, about %.0f s left",
                     algorithm.name, k + 1, K, 100.0 * (k + 1) / K, spent,
                     spent / done * (K - k - 1))
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - start
    privacy_start = time.perf_counter()
    try:
        guarantee = algorithm.privacy(problem, graph, iterations=K, **(privacy or {}))
    except ParameterError as err:
        if privacy:  # constants were given explicitly: their failure is the user's to see
            raise
        guarantee = PrivacyGuarantee.none(f"no guarantee computed: {err}", K)
    if randomness == "secret":       # every rank's lattice releases (one all-reduce)
        guarantee = _charge_lattice(guarantee, net.sum_scalar(ctx.lattice_slack),
                                    ctx.lattice_bump,
                                    ctx.lattice_floor_reason if ctx.float_gaussian else "")
    privacy_s = time.perf_counter() - privacy_start
    x = _to_cpu_numpy(net.gather(algorithm.iterate(state)))
    timing = {"setup": setup_s, "steps": wall - tracker.seconds, "metrics": tracker.seconds,
              "privacy": privacy_s}
    return Result(algorithm=algorithm.name, x=x, history=tracker.arrays(), ledger=net.ledger,
                  privacy=guarantee, transcript=net.transcript,
                  state={k: _to_cpu_numpy(v) for k, v in state.items()},
                  iterations=K, seed=seed, params=algorithm.params(), wall_time=wall,
                  timing=timing, randomness=randomness)
