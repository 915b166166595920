"""The leaderboard's computation: every entry calibrated to every target epsilon on every task,
tuned under one trial budget, scored on the task's utility (see :mod:`dpnet.lab.compare`)."""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch

from ...algorithms.diadsp import GradientTracking
from ...errors import DPNetError, ParameterError
from ...privacy import accountants
from ...runner import run
from ..store import Run, execute
from . import entries, tasks, tuning
from .entries import DELTA, ENTRIES, QUICK_TRIALS, entry, run_code
from .tasks import TASKS, build

EPSILONS = (0.5, 1.0, 2.0, 4.0)
#: statuses of rows that are listed under their task but not ranked
UNRANKED = ("not applicable", "refused")
TUNING_SEED = 100
COLUMNS = ("task", "algorithm", "accountant", "target_epsilon", "certified_epsilon",
           "epsilon_with_tuning", "delta",
           "utility", "utility_std", "accuracy", "bits_per_agent", "seconds", "noise_factor",
           "choice", "seeds", "status", "threat_model", "privacy_unit", "role", "released",
           "state_utility")


def calibration(task: str, dataset: str | None, algorithm: str, params: dict, epsilon: float,
                accountant: str, iterations: int, code: str = "") -> dict:
    """The smallest common noise factor (on the entry's unit noise) whose guarantee by
    ``accountant`` is at most ``epsilon`` over ``iterations``, and that guarantee."""
    t = build(task, dataset)
    e = entry(algorithm)
    constants = e.accountant_constants(t, accountant)
    start = time.perf_counter()
    try:
        problem, graph, _ = e.setting_for(t)
        alg = e.build(params, t)
        factor = _factor(alg.calibrate(epsilon, problem, graph, iterations,
                                       accountant=accountant, **constants), alg)
        g = alg.noise_scaled(factor).privacy(problem, graph, iterations,
                                             accountant=accountant, **constants)
    except DPNetError as err:
        return {"status": f"refused: {err}"}
    return {"status": "ok", "noise_factor": factor, "certified_epsilon": g.epsilon,
            "delta": g.delta, "calibration_s": time.perf_counter() - start}


def trial(task: str, dataset: str | None, algorithm: str, params: dict, noise_factor: float,
          iterations: int, seed: int, split: str, code: str = "") -> dict:
    """Run one calibrated configuration and score, on ``split``, the average of what the agents
    publish (the algorithm's released model: a function of what its guarantee covers) and,
    beside it, the average of their internal states (``state_utility``, not covered where the
    two differ)."""
    t = build(task, dataset)
    e = entry(algorithm)
    problem, graph, x0 = e.setting_for(t)
    alg = e.build(params, t).noise_scaled(noise_factor)
    start = time.perf_counter()
    try:
        res = run(alg, problem, graph, iterations, x0=x0, seed=seed,
                  log_every=iterations, reference=None,
                  record=(alg.released or ("",))[0] == "message",
                  float_bits=32 if getattr(problem, "dtype", None) == torch.float32 else 64)
        released = alg.released_model(res).mean(axis=0)
    except ParameterError as err:   # the algorithm refuses the task (not a divergence)
        return {"status": f"refused: {err}"}
    except DPNetError as err:       # a diverging run stops with a message, never NaN
        return {"status": f"diverged: {err}"}
    if not np.all(np.isfinite(released)):
        return {"status": "diverged: the released model is not finite"}
    return {"status": "ok", **t.utility(released, split),
            "state_utility": t.utility(res.x.mean(axis=0), split)["utility"],
            "released": released_note(alg),
            "bits_per_agent": res.ledger.total / problem.n_agents,
            "seconds": time.perf_counter() - start}


def _factor(calibrated, unit) -> float:
    """The common factor between a calibrated algorithm and its unit-noise original."""
    a = unit.noise_attributes[0]
    scale = [getattr(x, a) for x in (calibrated, unit)]
    if isinstance(scale[0], int | float):
        return float(scale[0]) / float(scale[1])
    return float(np.max(scale[0].scale_at(0, 1)) / np.max(scale[1].scale_at(0, 1)))


def _calibrations(task, dataset, pairs, horizon, jobs, log) -> dict:
    """(algorithm, params, epsilon, accountant) -> calibration result (``horizon(params)``: the
    configuration's iterations)."""
    runs = [Run(calibration, dict(task=task, dataset=dataset, algorithm=n, params=p,
                                  epsilon=eps, accountant=acc, iterations=horizon(p),
                                  code=run_code(task, n)))
            for n, p, eps, acc in pairs]
    table = execute(runs, jobs, log)
    return {(n, json.dumps(p, sort_keys=True), eps, acc): row
            for (n, p, eps, acc), row in zip(pairs, table.rows)}


def _trials(task, dataset, cases, horizon, split, jobs, log) -> list[dict]:
    """One row per (case, seed) of ``cases``: the case's calibration and the run's scores."""
    runs, meta = [], []
    for case, s in cases:
        meta.append({**case, "seed": s})
        if case["status"] == "ok":
            runs.append(Run(trial, dict(task=task, dataset=dataset,
                                        algorithm=case["algorithm"], params=case["choice"],
                                        noise_factor=case["noise_factor"],
                                        iterations=horizon(case["choice"]),
                                        seed=s, split=split,
                                        code=run_code(task, case["algorithm"]))))
    done = iter(execute(runs, jobs, log).rows)
    return [{**m, **next(done)} if m["status"] == "ok" else m for m in meta]


def _curves(task, dataset, cal, horizon, jobs, log) -> dict:
    """Calibration key -> what a row's charge reads of that calibrated configuration: its RDP
    curve (:func:`.tuning.run_rdp`) and, under a pure accountant, its certified epsilon."""
    keys = [k for k, row in cal.items() if row.get("status") == "ok"]
    runs = [Run(tuning.run_rdp, dict(task=task, dataset=dataset, algorithm=n,
                                     params=json.loads(p), noise_factor=cal[n, p, e, a][
                                         "noise_factor"], iterations=horizon(json.loads(p)),
                                     code=run_code(task, n)))
            for n, p, e, a in keys]
    table = execute(runs, jobs, log)
    # a refused calibration runs nothing
    out: dict[Any, dict[str, Any]] = {k: {"ran": False} for k in cal}
    for (n, p, e, a), row in zip(keys, table.rows):
        pure = accountants.is_pure(a)
        out[n, p, e, a] = {"ran": True, "rdp": row.get("rdp") if row["status"] == "ok" else None,
                           "pure": cal[n, p, e, a]["certified_epsilon"] if pure else None}
    return out


def _score(row: dict, key: str = "utility") -> float:
    u = row.get(key)
    return float(u) if row.get("status") == "ok" and u is not None and math.isfinite(
        float(u)) else math.inf


def compare(tasks: Sequence[str] | None = None, epsilons=EPSILONS,
            algorithms: Sequence[str] | None = None, quick: bool = False,
            seeds: Sequence[int] = (0, 1, 2), dataset: str | None = None, jobs: int = 1,
            tight: str = "entry", log: Callable[[str], None] | None = None,
            publish_start: bool = True, charge_tight: bool = False) -> list[dict[str, Any]]:
    """The leaderboard rows (see :data:`COLUMNS`). ``tight``: the second row's accountant:
    ``"entry"`` (the tightest dpnet has for each algorithm), an accountant name for all (``"rdp"``
    is much faster to calibrate than PLD), or ``"none"``. ``publish_start``: publishing the
    public start x0 (K = 0) is a candidate of every method's tuning (False: every method's best
    tuned run is ranked, as in the papers). ``charge_tight``: the second rows' tuning charge
    too, which needs every configuration calibrated under their accountant (the reported runs'
    curve is the largest over what the search may choose): on the four LIBSVM tasks about 8x
    the tight calibrations, most of them PLD; without it those rows' charge is nan."""
    if tight not in ("entry", "none", "rdp", "pld"):
        raise ParameterError("tight", tight, "one of entry, none, rdp, pld")
    names = list(algorithms or ENTRIES)
    for n in names:
        entry(n)
    for e in epsilons:
        if not (isinstance(e, int | float) and 0 < e < math.inf):
            raise ParameterError("epsilons", e, "0 < epsilon < inf")
    rows: list[dict[str, Any]] = []
    for task in tasks or list(TASKS):
        t = build(task, dataset)
        K = t.spec.quick_horizon if quick else t.spec.horizon   # the built task's (as references)

        def horizon(choice, m=t.m, K=K):
            # quick: every configuration at most the quick horizon (CI runs in minutes)
            k = entries.iterations(choice, m, K)
            return min(k, K) if quick else k

        why = {n: entries.why_not(t, n) for n in names}
        rows += [_aggregate(task, {"algorithm": n, "accountant": entry(n).default,
                                   "target_epsilon": eps, "choice": {}}, [], why[n])
                 for n in names if why[n] for eps in epsilons]
        names_here = [n for n in names if not why[n]]
        grid = {n: entry(n).search(task)[: QUICK_TRIALS if quick else None] for n in names_here}
        second = {n: (entry(n).tight if tight == "entry" else None if tight == "none" else tight)
                  for n in names_here}
        # cast: second[n] is a str where truthy
        accs = {n: [entry(n).default] + ([cast(str, second[n])] if second[n] and second[n] != entry(
            n).default else []) for n in names_here}
        # every configuration under every row's accountant: the default's are the search's
        # trials, and each row's charge takes the largest over the configurations it may publish
        pairs = [(n, p, eps, acc) for n in names_here for eps in epsilons
                 for acc in accs[n][: None if charge_tight else 1] for p in grid[n]]
        cal = _calibrations(task, dataset, pairs, horizon, jobs, log)
        curves = _curves(task, dataset, cal, horizon, jobs, log)

        def case(n, p, eps, acc, cal=cal):
            return {"algorithm": n, "accountant": acc, "target_epsilon": eps, "choice": p,
                    "iterations": horizon(p), **cal[n, json.dumps(p, sort_keys=True), eps, acc]}

        def charge(n, eps, acc, curves=curves, grid=grid):
            return tuning.Charge(
                [curves[n, json.dumps(p, sort_keys=True), eps, entry(n).default]
                 for p in grid[n]],
                [curves[n, json.dumps(p, sort_keys=True), eps, acc] for p in grid[n]])

        # the search (Papernot & Steinke): K ~ D_{eta,gamma} of mean the grid's size, each trial
        # a configuration drawn uniformly, with its own seed
        law = {(n, eps): charge(n, eps, entry(n).default).law(len(grid[n]), len(seeds), DELTA)
               for n in names_here for eps in epsilons}
        picks = {(n, eps): tuning.draws(task, n, eps, law[n, eps], len(grid[n]))
                 for n in names_here for eps in epsilons}
        trials = [(case(n, grid[n][i], eps, entry(n).default), TUNING_SEED + j)
                  for (n, eps), idx in picks.items() for j, i in enumerate(idx)]
        tuned = _trials(task, dataset, trials, horizon, "val", jobs, log)
        # selection reads the validation estimate of the ranked utility; publishing the public
        # start x0 (K = 0, epsilon 0) is always a candidate (validation; the test may differ)
        start_val = t.utility(t.x0, "val")["utility"]
        chosen, publish_x0, refused = {}, set(), {}
        for n in names_here:
            for eps in epsilons:
                cands = [r for r in tuned if r["algorithm"] == n and r["target_epsilon"] == eps]
                no = [r["status"] for r in cands if str(r.get("status", "")).startswith("refused")]
                if cands and len(no) == len(cands):
                    # every trial was refused: the method did not run here, and says why (it
                    # does not "publish x0" as if it had lost to the start)
                    refused[n, eps] = no[0]
                    continue
                best = min(cands, key=lambda r: (_score(r), json.dumps(r["choice"])),
                           default=None)
                if best is None or (publish_start and not _score(best) < start_val):
                    publish_x0.add((n, eps))
                else:
                    chosen[n, eps] = best["choice"]
        # every (algorithm, epsilon) gets its default row, then its tight one where different;
        # a method that publishes x0 does so under both accountants
        wanted = [(n, eps, acc) for n in names_here for eps in epsilons for acc in accs[n]]
        ran = [(n, chosen[n, eps], eps, acc) for n, eps, acc in wanted
               if (n, eps) in chosen]
        cal.update(_calibrations(task, dataset, [k for k in ran if (
            k[0], json.dumps(k[1], sort_keys=True), k[2], k[3]) not in cal], horizon, jobs, log))
        cases = [case(*k) for k in ran]
        final = _trials(task, dataset, [(c, s) for c in cases for s in seeds], horizon, "test",
                        jobs, log)
        for c in cases:
            n, eps, acc = c["algorithm"], c["target_epsilon"], c["accountant"]
            c["epsilon_with_tuning"] = (charge(n, eps, acc).epsilon(law[n, eps], len(seeds), DELTA)
                                        if charge_tight or acc == entry(n).default else math.nan)
            rows.append(_aggregate(task, c, [r for r in final if all(
                r[k] == c[k] for k in ("algorithm", "accountant", "target_epsilon"))]))
        start = t.utility(t.x0, "test")
        rows += [_published_x0(task, n, acc, eps, start, len(seeds),
                               charge(n, eps, entry(n).default).epsilon(law[n, eps], 0, DELTA))
                 for n, eps, acc in wanted if (n, eps) in publish_x0]
        rows += [_aggregate(task, {"algorithm": n, "accountant": acc, "target_epsilon": eps,
                                   "choice": {}}, [{"status": refused[n, eps]}])
                 for n, eps, acc in wanted if (n, eps) in refused]
    return rows


def _who(task: str, algorithm: str) -> dict[str, str]:
    """A row's threat model (its entry's), privacy unit (its task's) and role (ranked, or an
    anchor listed beside the ranking)."""
    e = entry(algorithm)
    return {"threat_model": e.threat_model, "privacy_unit": tasks.task_spec(task).privacy_unit,
            "role": f"anchor: {e.anchor}" if e.anchor else "ranked"}


def released_note(alg) -> str:
    """What a row's ranked model is: the average over agents of what each publishes."""
    kind, name = alg.released or ("state", "x")
    return ("the average of the agents' last broadcasts of " + name if kind == "message" else
            f"the average of the agents' final {name} (a function of the guarded releases)")


def _published_x0(task: str, algorithm: str, accountant: str, epsilon: float, start: dict,
                  seeds: int, with_tuning: float) -> dict[str, Any]:
    """The row of a method whose best tuned run did not beat the public start on validation:
    it publishes x0 (K = 0 steps, nothing released about the data: epsilon 0, no bits; the
    search that chose it is charged in ``with_tuning``)."""
    case = {"algorithm": algorithm, "accountant": accountant, "target_epsilon": epsilon,
            "choice": {}, "iterations": 0, "certified_epsilon": 0.0, "delta": 0.0,
            "epsilon_with_tuning": with_tuning}
    return _aggregate(task, case, [{"status": "ok", **start, "state_utility": start["utility"],
                                    "released": "the public start x0 (nothing about the data)",
                                    "bits_per_agent": 0.0, "seconds": 0.0}] * seeds)


def choice_of(row: dict) -> dict[str, float]:
    """A row's configuration, parsed back from its ``choice`` column (K included)."""
    return {k: float(v) for k, v in (p.split("=") for p in row["choice"].split(", "))}


def _aggregate(task: str, case: dict, runs: list[dict], inapplicable: str | None = None
               ) -> dict[str, Any]:
    """Mean and std over seeds; a row certifies the calibration's (epsilon, delta), and one whose
    delta exceeds the axis' :data:`DELTA` is marked invalid (it would not share the axis)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    row = {**_who(task, case["algorithm"]),
           "task": task, "algorithm": case["algorithm"], "accountant": case["accountant"],
           "target_epsilon": case["target_epsilon"],
           "certified_epsilon": float(case.get("certified_epsilon", math.nan)),
           "epsilon_with_tuning": float(case.get("epsilon_with_tuning", math.nan)),
           "delta": float(case.get("delta", math.nan)),
           "choice": ", ".join(f"{k}={v:g}" for k, v in {
               **case["choice"], **({"K": case["iterations"]} if "iterations" in case else {})
           }.items()),
           "seeds": len(ok), "noise_factor": float(case.get("noise_factor", math.nan))}
    bad = [r["status"] for r in runs if r.get("status") != "ok"]
    row["status"] = (f"not applicable: {inapplicable}" if inapplicable else
                     bad[0][:160] if bad else "ok")
    if row["delta"] > DELTA * (1 + 1e-9):
        row["status"] = f"invalid: certified delta {row['delta']:.3g} > {DELTA:g}"
        ok = []
    if ok:
        u = np.array([float(r["utility"]) for r in ok])
        row.update(utility=float(u.mean()),
                   utility_std=float(u.std(ddof=1)) if len(u) > 1 else 0.0,
                   accuracy=float(np.mean([float(r["accuracy"]) for r in ok])),
                   bits_per_agent=float(np.mean([r["bits_per_agent"] for r in ok])),
                   state_utility=float(np.mean([float(r["state_utility"]) for r in ok])),
                   released=ok[0].get("released", ""),
                   seconds=float(np.mean([r["seconds"] for r in ok])))
    else:
        row.update(utility=math.inf, utility_std=math.nan, accuracy=math.nan,
                   bits_per_agent=math.nan, seconds=math.nan, state_utility=math.nan,
                   released="")
    return row


def references(task: str, dataset: str | None, quick: bool) -> dict[str, float]:
    """Utility of the start x0 and of noise-free gradient tracking (the best step of a small
    grid) at the task's horizon, on the test split: the scale every private row is read on. A
    task with its own ``reference`` (:class:`~.tasks.Task`) uses that instead. Computed once per
    process (the report and the command's summary both read it)."""
    return dict(_references(task, dataset, quick))


@functools.cache
def _references(task: str, dataset: str | None, quick: bool) -> dict[str, float]:
    t = build(task, dataset)
    K = t.spec.quick_horizon if quick else t.spec.horizon
    start = t.utility(t.x0, "test")["utility"]
    if t.reference is not None:     # the task's own (the CNN: full gradients cost too much)
        return {"iterations": K, "start": start, **t.reference(K)}
    best = tasks.best_noise_free(t, [(f"gradient tracking (eta = {eta:g})", eta,
                                      GradientTracking(eta)) for eta in (0.3, 1.0, 3.0)], K)
    return {"iterations": K, "start": start, **best}


# -- outputs -----------------------------------------------------------------------------------
