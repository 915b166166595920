"""``dpnet compare``: which private algorithm gives the best model at my epsilon?

For each task (:mod:`.tasks`) and each target epsilon, every benchmarked algorithm
(:mod:`.entries`) is calibrated to the target by its default (sound) accountant and run; a second
row re-calibrates the tuned configuration with the tightest accountant dpnet has for it (PLD for
Laplace and Gaussian releases) where that differs. Pure-epsilon and (epsilon, delta) guarantees
share the epsilon axis at delta = 1e-5 (pure epsilon is (epsilon, 0)).

Tuning protocol, the same for every method: the :data:`~.entries.TRIALS` configurations of its
grid, each calibrated to the target and run once (seed 100) on the training data, scored on the
held-out validation split; the best one is then run with ``seeds`` (0, 1, 2) and scored on the
test split. The horizon is fixed per task. The privacy cost of tuning is **not** charged (as in
the papers): a tuned row's epsilon covers one run. Every run goes through the experiment engine's
one cache, so an interrupted comparison resumes run by run.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DPNetError, ParameterError
from ..experiments.engine import Run, execute
from . import cnn, directed, entries, online, tasks  # noqa: F401  (each registers its own)
from .entries import DELTA, ENTRIES, LEFT_OUT, TRIALS, entry, run_code
from .tasks import RELATION, TASKS, build, task_spec

EPSILONS = (0.5, 1.0, 2.0, 4.0)
#: statuses of rows that are listed under their task but not ranked
UNRANKED = ("not applicable", "refused")
TUNING_SEED = 100
COLUMNS = ("task", "algorithm", "accountant", "target_epsilon", "certified_epsilon", "delta",
           "utility", "utility_std", "accuracy", "bits_per_agent", "seconds", "noise_factor",
           "choice", "seeds", "status")


def calibration(task: str, dataset: str | None, algorithm: str, params: dict, epsilon: float,
                accountant: str, iterations: int, code: str = "") -> dict:
    """The smallest common noise factor (on the entry's unit noise) whose guarantee by
    ``accountant`` is at most ``epsilon`` over ``iterations``, and that guarantee."""
    t = build(task, dataset)
    e = entry(algorithm)
    constants = e.accountant_constants(t, accountant)
    start = time.perf_counter()
    try:
        alg = e.build(params, t)
        factor = _factor(alg.calibrate(epsilon, t.problem, t.graph, iterations,
                                       accountant=accountant, **constants), alg)
        g = alg.noise_scaled(factor).privacy(t.problem, t.graph, iterations,
                                             accountant=accountant, **constants)
    except DPNetError as err:
        return {"status": f"refused: {err}"}
    return {"status": "ok", "noise_factor": factor, "certified_epsilon": g.epsilon,
            "delta": g.delta, "calibration_s": time.perf_counter() - start}


def trial(task: str, dataset: str | None, algorithm: str, params: dict, noise_factor: float,
          iterations: int, seed: int, split: str, code: str = "") -> dict:
    """Run one calibrated configuration and score its average iterate on ``split``."""
    from ..runner import run

    t = build(task, dataset)
    alg = entry(algorithm).build(params, t).noise_scaled(noise_factor)
    start = time.perf_counter()
    try:
        res = run(alg, t.problem, t.graph, iterations, x0=t.x0, seed=seed,
                  log_every=iterations, reference=None,
                  float_bits=32 if getattr(t.problem, "dtype", None) == torch.float32 else 64)
    except DPNetError as err:       # a diverging run stops with a message, never NaN
        return {"status": f"diverged: {err}"}
    return {"status": "ok", **t.utility(res.x.mean(axis=0), split),
            "bits_per_agent": res.ledger.total / t.problem.n_agents,
            "seconds": time.perf_counter() - start}


def _factor(calibrated, unit) -> float:
    """The common factor between a calibrated algorithm and its unit-noise original."""
    a = unit.noise_attributes[0]
    scale = [getattr(x, a) for x in (calibrated, unit)]
    if isinstance(scale[0], int | float):
        return float(scale[0]) / float(scale[1])
    return float(np.max(scale[0].scale_at(0, 1)) / np.max(scale[1].scale_at(0, 1)))


def _calibrations(task, dataset, pairs, K, jobs, log) -> dict:
    """(algorithm, params, epsilon, accountant) -> calibration result."""
    runs = [Run(calibration, dict(task=task, dataset=dataset, algorithm=n, params=p,
                                  epsilon=eps, accountant=acc, iterations=K,
                                  code=run_code(task, n)))
            for n, p, eps, acc in pairs]
    table = execute(runs, jobs, log)
    return {(n, json.dumps(p, sort_keys=True), eps, acc): row
            for (n, p, eps, acc), row in zip(pairs, table.rows)}


def _trials(task, dataset, cases, K, seeds, split, jobs, log) -> list[dict]:
    """One row per (case, seed): the case's calibration and the run's scores."""
    runs, meta = [], []
    for case in cases:
        for s in seeds:
            meta.append({**case, "seed": s})
            if case["status"] == "ok":
                runs.append(Run(trial, dict(task=task, dataset=dataset,
                                            algorithm=case["algorithm"], params=case["choice"],
                                            noise_factor=case["noise_factor"], iterations=K,
                                            seed=s, split=split,
                                            code=run_code(task, case["algorithm"]))))
    done = iter(execute(runs, jobs, log).rows)
    return [{**m, **next(done)} if m["status"] == "ok" else m for m in meta]


def _score(row: dict, key: str = "utility") -> float:
    u = row.get(key)
    return float(u) if row.get("status") == "ok" and u is not None and math.isfinite(
        float(u)) else math.inf


def compare(tasks: Sequence[str] | None = None, epsilons=EPSILONS,
            algorithms: Sequence[str] | None = None, quick: bool = False,
            seeds: Sequence[int] = (0, 1, 2), dataset: str | None = None, jobs: int = 1,
            tight: str = "entry", log: Callable[[str], None] | None = None
            ) -> list[dict[str, Any]]:
    """The leaderboard rows (see :data:`COLUMNS`). ``tight``: the second row's accountant:
    ``"entry"`` (the tightest dpnet has for each algorithm), an accountant name for all (``"rdp"``
    is much faster to calibrate than PLD), or ``"none"``."""
    if tight not in ("entry", "none", "rdp", "pld"):
        raise ParameterError("tight", tight, "one of entry, none, rdp, pld")
    names = list(algorithms or ENTRIES)
    for n in names:
        entry(n)
    for e in epsilons:
        if not (isinstance(e, int | float) and 0 < e < math.inf):
            raise ParameterError("epsilons", e, "0 < epsilon < inf")
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's per-order RDP chatter
    rows: list[dict[str, Any]] = []
    for task in tasks or list(TASKS):
        t = build(task, dataset)
        K = t.spec.quick_horizon if quick else t.spec.horizon   # the built task's (as references)
        why = {n: t.exclude(n) or entry(n).inapplicable(t) for n in names}
        rows += [_aggregate(task, {"algorithm": n, "accountant": entry(n).default,
                                   "target_epsilon": eps, "choice": {}}, [], why[n])
                 for n in names if why[n] for eps in epsilons]
        names_here = [n for n in names if not why[n]]
        grid = {n: entry(n).grid_for(task)[: 2 if quick else TRIALS] for n in names_here}
        pairs = [(n, p, eps, entry(n).default) for n in names_here for eps in epsilons
                 for p in grid[n]]
        cal = _calibrations(task, dataset, pairs, K, jobs, log)

        def case(n, p, eps, acc, cal=cal):
            return {"algorithm": n, "accountant": acc, "target_epsilon": eps, "choice": p,
                    **cal[n, json.dumps(p, sort_keys=True), eps, acc]}

        tuning = _trials(task, dataset, [case(*k) for k in pairs], K, [TUNING_SEED], "val",
                         jobs, log)
        chosen = {}
        for n in names_here:
            for eps in epsilons:
                cands = [r for r in tuning if r["algorithm"] == n and r["target_epsilon"] == eps]
                chosen[n, eps] = min(cands, key=lambda r: (_score(r, "heldout_loss"),
                                                          json.dumps(r["choice"])))["choice"]
        second = {n: (entry(n).tight if tight == "entry" else None if tight == "none" else tight)
                  for n in names_here}
        extra = [(n, chosen[n, eps], eps, second[n]) for n in names_here for eps in epsilons
                 if second[n] and second[n] != entry(n).default]
        cal.update(_calibrations(task, dataset, extra, K, jobs, log))
        cases = [case(n, chosen[n, eps], eps, entry(n).default) for n in names_here
                 for eps in epsilons] + [case(*k) for k in extra]
        final = _trials(task, dataset, cases, K, seeds, "test", jobs, log)
        for c in cases:
            rows.append(_aggregate(task, c, [r for r in final if all(
                r[k] == c[k] for k in ("algorithm", "accountant", "target_epsilon"))]))
    return rows


def _aggregate(task: str, case: dict, runs: list[dict], inapplicable: str | None = None
               ) -> dict[str, Any]:
    """Mean and std over seeds; a row certifies the calibration's (epsilon, delta), and one whose
    delta exceeds the axis' :data:`DELTA` is marked invalid (it would not share the axis)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    row = {"task": task, "algorithm": case["algorithm"], "accountant": case["accountant"],
           "target_epsilon": case["target_epsilon"],
           "certified_epsilon": float(case.get("certified_epsilon", math.nan)),
           "delta": float(case.get("delta", math.nan)),
           "choice": ", ".join(f"{k}={v:g}" for k, v in case["choice"].items()),
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
                   seconds=float(np.mean([r["seconds"] for r in ok])))
    else:
        row.update(utility=math.inf, utility_std=math.nan, accuracy=math.nan,
                   bits_per_agent=math.nan, seconds=math.nan)
    return row


def references(task: str, dataset: str | None, quick: bool) -> dict[str, float]:
    """Utility of the start x0 and of noise-free gradient tracking (the best step of a small
    grid) at the task's horizon, on the test split: the scale every private row is read on. A
    task with its own ``reference`` (:class:`~.tasks.Task`) uses that instead."""
    from ..algorithms import GradientTracking

    t = build(task, dataset)
    K = t.spec.quick_horizon if quick else t.spec.horizon
    start = t.utility(t.x0, "test")["utility"]
    if t.reference is not None:     # the task's own (the CNN: full gradients cost too much)
        return {"iterations": K, "start": start, **t.reference(K)}
    best = tasks.best_noise_free(t, [(f"gradient tracking (eta = {eta:g})", eta,
                                      GradientTracking(eta)) for eta in (0.3, 1.0, 3.0)], K)
    return {"iterations": K, "start": start, **best}


# -- outputs -----------------------------------------------------------------------------------


def write(rows: list[dict], out: str | Path, command: str, quick: bool,
          dataset: str | None = None, audits: list[dict] | None = None) -> dict[str, Path]:
    """``leaderboard.csv``, ``leaderboard.md`` and one ``utility-<task>.png`` per task (and
    ``audit.csv`` with the audit section in ``leaderboard.md`` when ``audits`` are given)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "leaderboard.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.6g}" if isinstance(r.get(k), float) else r.get(k, ""))
                        for k in COLUMNS})
    paths = {"csv": out / "leaderboard.csv"}
    refs = {task: references(task, dataset, quick) for task in dict.fromkeys(
        r["task"] for r in rows)}
    for task, ref in refs.items():
        paths[f"png-{task}"] = _plot([r for r in rows if r["task"] == task], task,
                                     out / f"utility-{task}.png", ref)
    text = markdown(rows, command, quick, dataset, refs)
    if audits:
        from . import audit

        with (out / "audit.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for a in audits for k in a)))
            w.writeheader()
            w.writerows(audits)
        paths["audit"] = out / "audit.csv"
        text += "\n" + audit.markdown(audits)
    (out / "leaderboard.md").write_text(text)
    paths["md"] = out / "leaderboard.md"
    return paths


def epsilons_of(rows: list[dict], task: str) -> list[float]:
    return sorted({r["target_epsilon"] for r in rows if r["task"] == task})


def ranking(rows: list[dict], task: str, eps: float) -> list[dict]:
    sel = [r for r in rows if r["task"] == task and r["target_epsilon"] == eps
           and not r["status"].startswith(UNRANKED)]
    return sorted(sel, key=lambda r: (r["utility"], r["algorithm"], r["accountant"]))


def markdown(rows: list[dict], command: str, quick: bool, dataset: str | None = None,
             refs: dict[str, dict] | None = None) -> str:
    lines = ["# Privacy-utility leaderboard", "",
             f"Regenerate: `{command}`" + (" (quick: short horizons, 2 trials per method)"
                                           if quick else ""), "",
             "**Neighbouring relation:** one per task (stated under each task; for the "
             f"finite-sum tasks: {RELATION}). Each algorithm's guarantee is expressed under it "
             "through its mechanism's sensitivity (mapping per algorithm below). Pure-epsilon "
             f"and (epsilon, delta) rows share the epsilon axis at delta = {DELTA:g}.", "",
             "**What is private:** every guarantee covers the messages the agents exchange (the "
             "papers' eavesdropper). The utility is read on the average of the agents' final "
             "states, which, as in the papers, is not itself a function of the messages alone: "
             "publishing that model is outside the guarantees here.", "",
             f"**Tuning:** {TRIALS} trials per method over its own grid, chosen on held-out "
             "validation loss under the default accountant, then the reported seeds on the test "
             "split; the "
             "tightest-accountant row re-calibrates the same choice. The privacy cost of tuning "
             "is not charged (as in the papers).", ""]
    for task in dict.fromkeys(r["task"] for r in rows):
        t = build(task, dataset)
        ref = (refs or {}).get(task) or references(task, dataset, quick)
        lines += [f"## {task}: {t.spec.title}", "", f"**Relation:** {t.spec.relation}.", "",
                  *(f"- {n}" for n in t.notes), *([""] if t.notes else []),
                  f"Ranked by {t.spec.utility} (lower is "
                  f"better), mean ± std over seeds, after K = {ref['iterations']} iterations "
                  f"from the public start x0. Plot: `utility-{task}.png`.", "",
                  f"For scale: the start x0 has utility {ref['start']:.3e}; noise-free "
                  f"{ref['method']} at the same K reaches "
                  f"{ref['noise_free']:.3e} (test accuracy {ref['accuracy']:.4f}). A private row "
                  "above the start has not learned anything at that epsilon.", ""]
        lines += [f"Not applicable to this task: **{r['algorithm']}**, "
                  f"{r['status'].removeprefix('not applicable: ')}." for r in rows
                  if r["task"] == task and r["status"].startswith("not applicable")
                  and r["target_epsilon"] == min(epsilons_of(rows, task))]
        lines += [f"Refused by its accountant: **{r['algorithm']}** ({r['accountant']}) at "
                  f"epsilon = {r['target_epsilon']:g}: {r['status'].removeprefix('refused: ')}"
                  for r in rows if r["task"] == task and r["status"].startswith("refused")]
        lines += [""] if lines[-1] != "" else []
        for eps in epsilons_of(rows, task):
            ranked = ranking(rows, task, eps)
            win = ranked[0]
            lines += [f"### epsilon = {eps:g}: winner {win['algorithm']} ({win['accountant']})",
                      "", "| rank | algorithm | accountant | certified eps | utility | accuracy "
                      "| bits/agent | s/run | choice | status |", "|---|" * 10 + ""]
            lines[-1] = "|---|---|---|---|---|---|---|---|---|---|"
            for i, r in enumerate(ranked, 1):
                lines.append(f"| {i} | {r['algorithm']} | {r['accountant']} | "
                             f"{r['certified_epsilon']:.4g} | {r['utility']:.3e} ± "
                             f"{r['utility_std']:.1e} | {r['accuracy']:.4f} | "
                             f"{r['bits_per_agent']:.3g} | {r['seconds']:.2f} | {r['choice']} | "
                             f"{r['status']} |")
            lines.append("")
    lines += ["## Mapping of each algorithm's theorem onto the relation", ""]
    lines += [f"- **{e.name}** ({e.default}; tightest: {e.tight or e.default}): {e.mapping}"
              for e in ENTRIES.values()]
    lines += ["", "## Private algorithms left out, and why", ""]
    lines += [f"- **{n}**: {why}" for n, why in LEFT_OUT.items()]
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict], task: str, path: Path, ref: dict | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8))
    ran = [r for r in rows if math.isfinite(float(r["utility"]))]
    names = list(dict.fromkeys(r["algorithm"] for r in ran))
    colours = plt.get_cmap("tab20")
    for (alg, acc) in dict.fromkeys((r["algorithm"], r["accountant"]) for r in ran):
        sel = sorted((r for r in ran if r["algorithm"] == alg and r["accountant"] == acc),
                     key=lambda r: r["target_epsilon"])
        eps = np.array([r["target_epsilon"] for r in sel])
        u = np.array([r["utility"] for r in sel], dtype=float)
        s = np.nan_to_num(np.array([r["utility_std"] for r in sel], dtype=float))
        colour = colours(names.index(alg) % 20)
        ax.loglog(eps, u, "o-" if acc == entry(alg).default else "s--", color=colour,
                  label=f"{alg} ({acc})")
        ax.fill_between(eps, np.maximum(u - s, u * 1e-3), u + s, color=colour, alpha=0.15)
    if ref:   # the scale every row is read on: not moving, and the same K without privacy
        ax.axhline(ref["start"], color="black", lw=1, ls=":", label="start x0")
        if math.isfinite(ref["noise_free"]):
            ax.axhline(ref["noise_free"], color="grey", lw=1, ls="-.", label="noise-free")
    ax.set(xlabel="target epsilon (delta = 1e-5 for (eps, delta) rows)",
           ylabel=task_spec(task).utility, title=f"{task}: utility against epsilon "
           "(solid: default accountant, dashed: tightest)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
