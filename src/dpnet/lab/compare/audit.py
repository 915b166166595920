"""Audit a sample of the leaderboard's calibrated configurations (``dpnet compare --audit``).

A leaderboard row is a claim: "this algorithm, with this tuned choice and this noise factor,
is (epsilon, delta)-DP under the task's record relation by this accountant". The audit checks it
empirically at a small horizon ``K_a``: the chosen configuration is re-calibrated to the row's
target epsilon over ``K_a`` iterations (so the claim is the target itself), run ``R`` times on
each of two adjacent datasets, and the threshold test of :mod:`dpnet.lab.audit` turns the agent-0
transcripts into a lower bound on epsilon that holds with 95 % confidence. A lower bound above
the claim is a violation.

The adjacent datasets are the relation's worst case (:class:`RecordPair`): agent 0's record 0
has per-record gradient ``+R u`` in one world and ``-R u`` in the other (``||u|| = 1``), every
other record a zero gradient, so the local gradient moves by exactly ``Delta = 2R/m``, the
sensitivity every entry's mapping uses, and only that move reaches the wire. The claim is
computed on the task's own problem with the entry's own constants (what the leaderboard
certifies). The same configuration is then audited with its noise silently scaled by each of
:data:`MUTATIONS` in turn (the claim unchanged) until the test catches one: the largest factor
caught is the audit's resolution. It is coarse on these tasks, and the reason is measured, not
assumed: the record's l2 sensitivity is spread over d coordinates, so no test with a feasible
number of runs reaches the tail events where a d-dimensional Laplace mechanism's privacy loss
peaks, and the theorems' epsilons sum a worst case over every iteration that a single record
pair realises only at the first.

A stream task's relation is one record of one agent's stream, used at one step: its pair is
the task's one-pass stream of linear records, all zero but agent 0's first (:func:`stream_pair`).

Rows the canary audit covers (``dp_sgd``, ``decor`` and the DP-SGD anchors; DO-ADP and DP-DDA
with their clipped batch, fixed or Poisson) get the white-box canary audit of
:mod:`dpnet.lab.audit.canary` instead, at every epsilon and accountant: at the row's own
horizon and noise, with a Dirac gradient canary, the exact likelihood-ratio score, at least
:data:`CANARY_RUNS` runs per world (they are cheap), the claim's privacy profile at larger
deltas, the Gaussian-DP estimate beside the bound, and the finer mutations of
:data:`~dpnet.lab.audit.canary.REDUCTIONS`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...algorithms.decor import DECOR
from ...errors import require
from ...threads import torch_threads
from .. import report
from ..audit import canary
from ..audit.engine import LinearSamples, RecordPair, run_copies, silently_scaled, threshold_test
from ..store import Run, execute, restored
from .entries import entry, run_code
from .leaderboard import calibration, choice_of
from .online import RecordStream
from .tasks import build

AUDIT_ITERATIONS = 3
UNBOUNDED_RECORD = 10.0
#: floats held per state in one batch of copies (n agents x d coordinates each)
BATCH_FLOATS = 20_000_000
#: silent noise factors tried, in order, until the audit catches one (the test's resolution)
MUTATIONS = (0.1, 0.01, 0.001)
#: the least runs per world of a DP-SGD canary audit (20,000: x0.5 caught at epsilon 2); DECOR,
#: which runs the whole graph per copy, gets the same number of simulated agents (2,000 runs of
#: 10 agents: about 100 s per bound at K = 400 instead of 80 min)
CANARY_RUNS = 20_000


def pair(task) -> tuple[Any, ...]:
    """The worst-case adjacent datasets of ``task``'s relation (see the module docstring). A task
    without a record bound (``R = inf``: only clipping algorithms apply) gets records of norm
    :data:`UNBOUNDED_RECORD`, above every clipping bound of the entries, which clipping then
    brings to the worst case. On a one-pass stream (:func:`stream_pair`) the record is agent 0's
    first."""
    d = task.problem.dim
    u = np.ones(d) / math.sqrt(d)
    R = task.R if math.isfinite(task.R) else UNBOUNDED_RECORD
    if not task.spec.finite_sum:
        return tuple(stream_pair(task, R * s * u) for s in (1.0, -1.0))
    return tuple(RecordPair(task.problem.n_agents, task.m, u, R, s,
                            task.problem.smoothness) for s in (1.0, -1.0))


def stream_pair(task, record: np.ndarray) -> RecordStream:
    """The stream relation's fixture: ``task``'s one-pass stream (its agents, horizon and batch)
    of linear records, every record's gradient zero but agent 0's first, ``record``. That record
    enters step 0's gradient and nothing else; a stream method's own dynamics (DMOD's clean
    gradient point) carry it further, which the claims charge and the transcript shows."""
    s = task.problem
    c = np.zeros((s.n_agents * s.pool_size, s.dim))
    c[0] = record
    return RecordStream(LinearSamples(c), s.n_agents,
                        np.arange(c.shape[0]).reshape(s.n_agents, s.pool_size), s.batch)


def _agent0_innovations(W: np.ndarray):
    """``m_0, m_1 - W m_0, ...`` of every transcript name, agent 0's rows: each fresh draw of a
    mixing method appears alone (exact for plain W-mixing, a valid statistic for any method)."""
    def features(views):
        cols = []
        for name in sorted(views):
            v = np.nan_to_num(views[name])
            inn = v.copy()
            inn[:, 1:] -= np.einsum("ij,rtjd->rtid", W, v[:, :-1])
            cols.append(inn[:, :, 0].reshape(v.shape[0], -1))
        return np.concatenate(cols, axis=1)

    return features


#: the fields of a leaderboard row that its audit reads (its run's key)
ROW_FIELDS = ("task", "algorithm", "accountant", "target_epsilon", "choice")


def audit_rows(rows: Sequence[dict], dataset: str | None, repetitions: int, jobs: int = 1,
               log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Audit each row (:func:`audit_row`) as a run of the run store: an interrupted audit of a
    leaderboard resumes audit by audit, a rerun reads finished audits back, and ``jobs`` worker
    processes share them."""
    runs = [Run(audit_row, {"row": {k: r[k] for k in ROW_FIELDS}, "dataset": dataset,
                            "repetitions": repetitions,
                            "code": run_code(r["task"], r["algorithm"])},
                {"audit": f"{r['task']}/{r['algorithm']}/{r['accountant']}/"
                          f"eps={r['target_epsilon']:g}"}) for r in rows]
    return [{k: restored(v) for k, v in a.items() if k != "audit"}
            for a in execute(runs, jobs, log)]


def published_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a leaderboard's ``leaderboard.csv`` (a published one can be audited without
    recomputing it: an audit re-calibrates each configuration from its choice and target)."""
    path = Path(path)
    require(path.is_file(), "--audit-csv", str(path), "a leaderboard.csv that exists")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    missing = sorted({*ROW_FIELDS, "status", "certified_epsilon"} - set(rows[0] if rows else {}))
    require(not missing, "--audit-csv", str(path), f"a leaderboard CSV with the columns "
            f"{sorted({*ROW_FIELDS, 'status', 'certified_epsilon'})}", f"missing {missing}")
    return [{**r, "target_epsilon": float(r["target_epsilon"]),
             "certified_epsilon": float(r["certified_epsilon"] or "nan")} for r in rows]


#: the options that select published rows, and the column each reads
SELECTIONS = {"--tasks": "task", "--algorithms": "algorithm", "--epsilons": "target_epsilon"}


def selected(rows: Sequence[dict], **wanted: Sequence | None) -> list[dict]:
    """The rows whose column of each :data:`SELECTIONS` option given (``tasks=[...]``, keyed by
    the option's name) holds one of its values; a value no row holds is an error that lists the
    column's values."""
    def text(v):
        return f"{v:g}" if isinstance(v, float) else str(v)

    for name, values in wanted.items():
        option = f"--{name}"
        require(option in SELECTIONS, "selection", name, f"one of {sorted(SELECTIONS)}")
        if values is None:
            continue
        field = SELECTIONS[option]
        known = sorted({r[field] for r in rows})
        missing = [v for v in values if v not in known]
        require(not missing, option, ",".join(map(text, missing)),
                f"values of the CSV's {field} column: {', '.join(map(text, known))}")
        rows = [r for r in rows if r[field] in values]
    return list(rows)


def calibrated(row: dict, dataset: str | None, iterations: int) -> tuple[dict, Any]:
    """A leaderboard row's configuration re-calibrated to its target epsilon by its accountant
    over ``iterations``: the calibration (:func:`~.leaderboard.calibration`) and the algorithm
    with its noise scaled by it (None where the calibration failed)."""
    t, e, choice = build(row["task"], dataset), entry(row["algorithm"]), choice_of(row)
    cal = calibration(row["task"], dataset, row["algorithm"], choice, row["target_epsilon"],
                      row["accountant"], iterations)
    return cal, (e.build(choice, t).noise_scaled(cal["noise_factor"])
                 if cal["status"] == "ok" else None)


def audit_row(row: dict, dataset: str | None = None, repetitions: int = 4000,
              iterations: int = AUDIT_ITERATIONS, seed: int = 0, confidence: float = 0.95,
              code: str = "") -> dict[str, Any]:
    """Audit one leaderboard row's configuration (see the module docstring; ``code``, the
    entry's :func:`~.entries.run_code`, only keys the stored result)."""
    require(repetitions >= 20, "repetitions", repetitions, ">= 20")
    t, e = build(row["task"], dataset), entry(row["algorithm"])
    choice = choice_of(row)
    built = e.build(choice, t)
    if canary.covers(built):
        # DECOR runs the task's graph per copy: the same budget of simulated agents
        per_copy = e.setting_for(t)[1].n if isinstance(built, DECOR) else 1
        return canary_row(row, dataset, max(repetitions, CANARY_RUNS // per_copy), seed,
                          confidence)
    cal, alg = calibrated(row, dataset, iterations)
    out = {"task": row["task"], "algorithm": row["algorithm"], "accountant": row["accountant"],
           "target_epsilon": row["target_epsilon"], "choice": row["choice"],
           "iterations": iterations, "repetitions": repetitions}
    if alg is None:
        return {**out, "status": cal["status"]}
    problems = pair(t)
    innovations = _agent0_innovations(np.asarray(t.graph.W))

    def transcripts(algorithm, copies: int, w: int, first: int) -> np.ndarray:
        parts, chunk = [], max(1, BATCH_FLOATS // (t.graph.n * t.problem.dim))
        for start in range(0, copies, chunk):
            c = np.arange(start, min(copies, start + chunk))
            parts.append(innovations(run_copies(algorithm, problems, t.graph, iterations, t.x0,
                                                first + c, np.full(c.size, w))))
        return np.concatenate(parts)

    # The adversary knows the pair: its statistic is the projection of agent 0's innovations on
    # their noise-free difference between the two worlds (one deterministic run each).
    silent = silently_scaled(alg, 0.0)
    direction = transcripts(silent, 1, 0, 0)[0] - transcripts(silent, 1, 1, 0)[0]
    with torch_threads(1):
        def audited(factor: float) -> float:
            run_alg = alg if factor == 1.0 else silently_scaled(alg, factor)
            stat = [transcripts(run_alg, repetitions, w, (2 * seed + w) * repetitions)
                    @ direction for w in (0, 1)]
            return float(threshold_test(stat[0][:, None], stat[1][:, None], confidence,
                                        cal["delta"], "projection")["epsilon"])

        claimed, bound = cal["certified_epsilon"], audited(1.0)
        caught, mutated = None, math.nan
        for factor in MUTATIONS:
            mutated = audited(factor)
            if mutated > claimed:
                caught = factor
                break
    return {**out, "status": "ok", "claimed_epsilon": claimed, "delta": cal["delta"],
            "audited_epsilon": bound, "violated": bound > claimed, "caught_at": caught,
            "mutated_audited_epsilon": mutated}


def canary_row(row: dict, dataset: str | None, runs: int, seed: int = 0,
               confidence: float = 0.95) -> dict[str, Any]:
    """The canary audit of a row at its own horizon K and noise factor, against the row's
    claim and its accountant's privacy profile at the larger deltas."""
    t, e = build(row["task"], dataset), entry(row["algorithm"])
    K = int(choice_of(row)["K"])
    cal, alg = calibrated(row, dataset, K)
    out = {"task": row["task"], "algorithm": row["algorithm"], "accountant": row["accountant"],
           "target_epsilon": row["target_epsilon"], "choice": row["choice"], "iterations": K,
           "repetitions": runs, "method": "canary"}
    if alg is None:
        return {**out, "status": cal["status"]}
    problem, graph, _ = e.setting_for(t)
    constants = e.accountant_constants(t, row["accountant"])

    def profile(delta: float) -> float:
        return alg.privacy(problem, graph, K, accountant=row["accountant"],
                           **{**constants, "delta": delta}).epsilon

    a = canary.audit(alg, graph, K, cal["certified_epsilon"], cal["delta"], runs, seed,
                     confidence, records=t.m, profile=profile)
    return {**out, "status": "ok", "claimed_epsilon": a["claimed"], "delta": cal["delta"],
            "audited_epsilon": a["lower_bound"], "one_run_epsilon": a["other_bound"],
            "gdp_estimate": a["gdp_estimate"], "profile": a["profile"], "closest": a["closest"],
            "violated": a["violated"], "caught_at": a["caught_at"],
            "seconds": a["seconds"]}


def sample(rows: Sequence[dict], per_task: int | None = None, dataset: str | None = None,
           every: bool = False) -> list[dict]:
    """The audited rows, per task: every epsilon and accountant of a row the canary audit
    covers (it is cheap and near-tight), and of the other rows each algorithm's
    default-accountant row at the smallest target epsilon it ran, or with ``every`` all of
    them (``per_task`` caps the number of algorithms; ``dataset``: the rows' LIBSVM dataset, to
    rebuild their configurations). A row that publishes x0 has nothing to audit. A stream's
    rows are audited with the stream's pair (:func:`pair`)."""
    picked = []
    for task in dict.fromkeys(r["task"] for r in rows):
        seen: set[str] = set()
        for r in sorted((r for r in rows if r["task"] == task and r["status"] == "ok"
                         and r["certified_epsilon"] > 0),
                        key=lambda r: (r["target_epsilon"], r["algorithm"], r["accountant"])):
            covered = every or _canary(r, dataset)
            if not covered and r["accountant"] != entry(r["algorithm"]).default:
                continue
            if r["algorithm"] not in seen and (per_task is None or len(seen) < per_task):
                seen.add(r["algorithm"])
                picked.append(r)
            elif r["algorithm"] in seen and covered:
                picked.append(r)
    return picked


def _canary(row: dict, dataset: str | None) -> bool:
    """Whether the canary audit covers the row's configuration."""
    t = build(row["task"], dataset)
    return canary.covers(entry(row["algorithm"]).build(choice_of(row), t))


def markdown(audits: Sequence[dict]) -> str:
    """The audit section of a leaderboard page: how the sampled configurations were audited (the
    record-pair test and the white-box canary audit, with their resolutions), then one table row per
    audit: task, algorithm, accountant, method, horizon K_a, runs per world, claimed and audited epsilon,
    the one-run bound and the GDP estimate where computed, the ratio, the closest point of the privacy
    profile, the resolution and the status (within claim, VIOLATED, or why it did not run)."""
    lines = ["## Audit of a sample of calibrated configurations", "",
             "Each configuration re-calibrated to its target epsilon over K_a iterations, run on "
             "the relation's worst-case adjacent datasets (agent 0's record 0 with per-record "
             "gradient +R u vs -R u, all others 0: the local gradient moves by exactly 2R/m; "
             "on a stream, agent 0's first record: its step's gradient moves by 2R, no other); "
             "the audited epsilon is a 95 % lower bound from agent 0's transcript. Resolution: "
             "the largest silent noise factor of "
             + ", ".join(f"x{f:g}" for f in MUTATIONS) + " at which the same test exceeds the "
             "same claim (a coarse resolution means the test could not have caught a small "
             "miscalibration; see dpnet.lab.compare.audit for why).", ""]
    lines += ["Rows the canary audit covers (DP-SGD, DECOR, DO-ADP and DP-DDA with a clipped "
              "batch): the white-box canary audit (dpnet.lab.audit.canary) at the row's own K "
              "and noise, a Dirac gradient canary +C e_1 against -C e_1 (a fixed batch's other "
              "records at +C e_1, its worst case), the exact likelihood-ratio score of what "
              "every message reveals, the Gaussian-DP fit of the scores as an estimate beside "
              "the bound and the one-run bound of the same runs (Steinke et al. 2023); the "
              "claim's privacy profile is audited at delta "
              + ", ".join(f"{d:g}" for d in canary.PROFILE_DELTAS) + " too (column *profile*: "
              "the point where the audit comes closest, audited / claimed); resolution: the "
              "mildest silent noise factor of "
              + ", ".join(f"x{f:g}" for f in canary.REDUCTIONS) + " caught.", ""]
    rows = []
    for a in audits:
        row = {"task": a["task"], "algorithm": a["algorithm"], "accountant": a["accountant"],
               "method": a.get("method", "record pair"), "K_a": a["iterations"],
               "runs/world": a["repetitions"], "claimed eps": "", "delta": "",
               "audited eps": "", "one-run eps": "", "GDP estimate": "", "ratio": "",
               "profile": "",
               "resolution": "",
               "status": a["status"]}
        if a["status"] == "ok":
            floor = (canary.REDUCTIONS if a.get("method") == "canary" else MUTATIONS)[-1]
            row.update({"claimed eps": f"{a['claimed_epsilon']:.4g}",
                        "delta": f"{a['delta']:.0e}",
                        "audited eps": f"{a['audited_epsilon']:.4g}",
                        "one-run eps": (f"{a['one_run_epsilon']:.4g}"
                                        if "one_run_epsilon" in a else ""),
                        "GDP estimate": (f"{a['gdp_estimate']:.4g}" if "gdp_estimate" in a
                                         else ""),
                        "ratio": f"{a['audited_epsilon'] / a['claimed_epsilon']:.2f}",
                        "profile": (canary.closest_text(a["closest"]) if "closest" in a
                                    else ""),
                        "resolution": (f"noise x{a['caught_at']:g} caught" if a["caught_at"]
                                       else f"not caught down to x{floor:g}"),
                        "status": "VIOLATED" if a["violated"] else "within claim"})
        rows.append(row)
    return "\n".join(lines + report.md_table(rows)) + "\n"

