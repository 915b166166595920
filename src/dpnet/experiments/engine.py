"""The experiment engine: a figure or table is a declarative :class:`Spec`.

A spec names its runs (:class:`Run`: a module-level function and JSON-able keyword arguments, one
per method x setting x seed), the settings and the choices made where the paper is silent, generic
figures and tables over the results, and the paper's claims as :class:`Check` predicates over the
results :class:`Table`. :func:`execute` runs a list of runs with **one cache**: a run's result is
stored under ``$DPNET_RUNS/<key>.json`` (default ``~/.cache/dpnet/runs``), where the key hashes the
function's name, the source it executes (:func:`.keys.code_digest`: the library below the
experiments and the function's own closure), its arguments and the data root, so an interrupted
experiment resumes run by run, and a changed run is never read back stale. Runs go to worker
processes when ``jobs > 1``; a long run can keep snapshots in :func:`run_folder` to resume mid-run.

A claim ends in one of four verdicts (:class:`Verdict`). A claim that is not reproduced carries a
:class:`Diagnosis`: its cause in one sentence and a counterfactual, the same runs with one stated
change, on which the same predicate is evaluated again; where no cause is known, the check says
what would settle it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParameterError
from .keys import Runtime


class Verdict(StrEnum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    NOT_APPLICABLE = "not applicable"      # a reading of the paper its own text rules out
    UNDECIDED = "undecided"                # the run cannot tell either way

    @classmethod
    def of(cls, value: Verdict | bool | None) -> Verdict:
        """True -> reproduced, False -> not reproduced, None -> undecided."""
        if isinstance(value, Verdict):
            return value
        if value is None:
            return cls.UNDECIDED
        return cls.REPRODUCED if bool(value) else cls.NOT_REPRODUCED


# -- runs and the one cache ------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """``fn(**params)`` -> a JSON-able dict of scalars and curves (lists). ``tags`` are the columns
    that place the result in the table (method, r, seed, ...); they are not part of the key."""

    fn: Callable[..., dict]
    params: Mapping[str, Any]
    tags: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **params: Any) -> Run:
        """The same run with some arguments changed (a counterfactual's one change)."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ParameterError("counterfactual change", unknown[0],
                                 f"an argument of {self.fn.__name__}: {sorted(self.params)}")
        return Run(self.fn, {**self.params, **params}, self.tags)

    @property
    def key(self) -> str:
        from .common import data_root
        from .keys import code_digest

        body = {"fn": f"{self.fn.__module__}.{self.fn.__qualname__}",
                "code": code_digest(self.fn), "params": _canonical(self.params),
                "data": data_root()}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]


def _canonical(value: Any) -> Any:
    """JSON-able form of run arguments; anything else is refused rather than hashed by repr
    (a repr can hide a difference, an address makes every key new)."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ParameterError("run argument", repr(value), "JSON-able (numbers, strings, lists, "
                         "dicts): a run is keyed by its arguments")


def cache_root() -> Path:
    return Path(os.environ.get("DPNET_RUNS") or Path.home() / ".cache" / "dpnet" / "runs")


def cache_usage() -> dict[str, Any]:
    """Where the run cache is, how many results, unfinished runs and runs computing now it holds,
    and their bytes."""
    root = cache_root()
    files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
    running = _running(root)
    return {"root": str(root), "results": sum(p.parent == root and p.suffix == ".json"
                                              for p in files),
            "unfinished": sum(_key_of(p) not in running for p in root.glob("*.partial")),
            "running": len(running), "bytes": sum(p.stat().st_size for p in files)}


def _key_of(path: Path) -> str:
    """The run key a cache entry belongs to (``<key>.json``, ``.lock``, ``.partial``, ``.tmp``)."""
    return path.name.split(".")[0]


def _running(root: Path) -> set[str]:
    """Keys of the runs being computed now: a lock whose process is alive (or on another host,
    where it cannot be checked)."""
    live = set()
    for lock in root.glob("*.lock") if root.is_dir() else []:
        try:
            host, pid = lock.read_text().split()
            if host == socket.gethostname():
                os.kill(int(pid), 0)
        except ProcessLookupError:
            continue                 # its process died: an unfinished run, prunable
        except (OSError, ValueError):
            pass                     # unreadable, or not ours to signal: assume alive
        live.add(_key_of(lock))
    return live


def prune(days: float | None = None) -> int:
    """Remove cached results and unfinished runs (snapshots) unused for ``days`` days (None: all);
    the number removed. Results are marked used when read, so a key that no longer occurs (the
    code it hashes has changed) ages out. A run being computed now (its lock's process alive) is
    left alone, so clearing beside a long reproduction never loses its result."""
    if days is not None and not days >= 0:
        raise ParameterError("days", days, "a non-negative number of days (or none: everything)")
    root, removed = cache_root(), 0
    cutoff = -math.inf if days is None else time.time() - 86400.0 * days
    running = _running(root)        # their snapshots, result being written and lock stay
    for entry in sorted(root.glob("*")) if root.is_dir() else []:
        if _key_of(entry) in running:
            continue
        tree = [entry, *entry.rglob("*")] if entry.is_dir() else [entry]
        if days is not None and max(p.stat().st_mtime for p in tree) >= cutoff:
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        removed += 1
    return removed


#: the folder of the run being computed, and whether a plan is being made (no run's input)
_STATE = Runtime(folder=None, planning=False)


def run_folder() -> Path:
    """A folder owned by the run being executed, for snapshots of a long run (kept until the
    run's result is stored, then removed)."""
    folder = _STATE["folder"]
    if folder is None:
        raise RuntimeError("run_folder() is only available inside a run executed by the engine")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _compute(fn: Callable, params: dict, key: str, root: str, threads: int) -> dict:
    if threads:
        import torch

        torch.set_num_threads(threads)
    path = Path(root) / f"{key}.json"
    if path.exists():
        with contextlib.suppress(OSError):      # last use, for prune(); a read-only cache is fine
            os.utime(path)
        return json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(root) / f"{key}.lock"          # prune() leaves a run alone while it computes
    lock.write_text(f"{socket.gethostname()} {os.getpid()}")
    _STATE["folder"] = Path(root) / f"{key}.partial"
    try:
        result = fn(**params)
        _check_result(fn, params, result)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, prefix=f"{key}.",
                                         suffix=".tmp") as fh:
            json.dump(_jsonable(result), fh)
        os.replace(fh.name, path)
        shutil.rmtree(Path(root) / f"{key}.partial", ignore_errors=True)
    finally:
        _STATE["folder"] = None
        lock.unlink(missing_ok=True)
    return json.loads(path.read_text())


def _check_result(fn, params, result) -> None:
    if not isinstance(result, Mapping):
        raise ParameterError(f"result of {fn.__name__}", type(result).__name__, "a dict")


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)                   # JSON has no nan/inf; read back by Table.values
    return value


def execute(runs: Sequence[Run], jobs: int = 1, log: Callable[[str], None] | None = None
            ) -> Table:
    """Run (or read back from the cache) every run; one table row per run: its tags, then its
    result's fields. Identical runs are computed once."""
    if jobs < 1:
        raise ParameterError("jobs", jobs, "a positive number of worker processes")
    if _STATE["planning"]:
        total, done = cached(runs)
        if done < total:        # a spec that needs results to name its runs (a chosen parameter)
            raise Unplanned(total, done)
    root = str(cache_root())
    keys = [r.key for r in runs]
    todo = {k: r for k, r in zip(keys, runs)}
    results: dict[str, dict] = {}
    if jobs == 1 or len(todo) == 1:
        from ..threads import torch_threads

        with torch_threads(1):
            for i, (k, r) in enumerate(todo.items()):
                results[k] = _compute(r.fn, dict(r.params), k, root, 0)
                if log:
                    log(f"[{i + 1}/{len(todo)}] {_label(r)}")
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {k: pool.submit(_compute, r.fn, dict(r.params), k, root, 1)
                       for k, r in todo.items()}
            for i, (k, fut) in enumerate(futures.items()):
                results[k] = fut.result()
                if log:
                    log(f"[{i + 1}/{len(todo)}] {_label(todo[k])}")
    return Table([{**r.tags, **results[k]} for k, r in zip(keys, runs)])


def cached(runs: Sequence[Run]) -> tuple[int, int]:
    """``(distinct runs, of which cached)``: what :func:`execute` would compute, without running."""
    keys = {r.key for r in runs}
    return len(keys), sum((cache_root() / f"{k}.json").exists() for k in keys)


class Unplanned(Exception):
    """Raised while planning when a spec needs uncached results to name its runs."""

    def __init__(self, total: int, done: int):
        super().__init__(f"{total} preliminary runs ({done} cached) decide its runs")
        self.total, self.done = total, done


def plan(runs_of: Callable[[], Sequence[Run]], diagnoses: Sequence[Diagnosis] = ()) -> str:
    """What running ``runs_of()`` would compute, computing nothing: the runs and how many are
    cached, or, for a spec that chooses its runs from results (a sweep), those results first;
    and at most how many counterfactual runs ``diagnoses`` add (each runs only if its claim does
    not reproduce)."""
    _STATE["planning"] = True
    try:
        runs = runs_of()
        total, done = cached(runs)
        base, extra, later = {r.key for r in runs}, [], 0
        for d in diagnoses:
            try:
                extra += [c for c in map(d.counterfactual, runs) if c.key not in base]
            except Unplanned:
                later += 1
    except Unplanned as err:
        return f"its runs depend on results: first {err.total - err.done} preliminary run(s) " \
               f"({err.done} of {err.total} cached) that choose a parameter, then plan again"
    finally:
        _STATE["planning"] = False
    n, m = cached(extra)
    return f"{total} runs, {done} cached, {total - done} to compute; up to {n} counterfactual " \
           f"run(s) ({m} cached) for claims that do not reproduce" + (
               f", and {later} counterfactual(s) that choose their runs from results" if later
               else "")


def _label(run: Run) -> str:
    tags = run.tags or run.params
    return ", ".join(f"{k}={v}" for k, v in tags.items() if not isinstance(v, list | dict))


# -- the results table -------------------------------------------------------------------------


class Table:
    """Rows of one experiment (one per run): tags and result fields, curves as lists."""

    def __init__(self, rows: Iterable[Mapping[str, Any]]):
        self.rows = [dict(r) for r in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def where(self, **equal: Any) -> Table:
        for k in equal:
            if self.rows and all(k not in r for r in self.rows):
                raise ParameterError("column", k, f"one of {self.columns}")
        return Table(r for r in self.rows if all(r.get(k) == v for k, v in equal.items()))

    @property
    def columns(self) -> list[str]:
        cols: list[str] = []
        for r in self.rows:
            cols += [k for k in r if k not in cols]
        return cols

    def one(self, **equal: Any) -> dict:
        rows = self.where(**equal).rows
        if len(rows) != 1:
            raise ParameterError("rows matching", equal, f"exactly one row (found {len(rows)})")
        return rows[0]

    def unique(self, column: str) -> list:
        seen: list = []
        for r in self.rows:
            if column in r and r[column] not in seen:
                seen.append(r[column])
        return seen

    def values(self, column: str) -> np.ndarray:
        """One number per row (non-finite numbers come back from JSON as strings)."""
        return np.array([float(r[column]) for r in self.rows])

    def curves(self, column: str) -> np.ndarray:
        """(rows, points) array of a curve column."""
        return np.array([[float(v) for v in r[column]] for r in self.rows])

    def gmean(self, column: str) -> np.ndarray:
        """Geometric mean over rows of a positive curve (or scalar) column."""
        data = self.curves(column) if isinstance(self.rows[0][column], list) else \
            self.values(column)
        return np.exp(np.mean(np.log(np.maximum(data, 1e-300)), axis=0))

    def long(self) -> list[dict]:
        """Long format for CSV: a row with curves becomes one row per curve point."""
        out = []
        for r in self.rows:
            lists = {k: v for k, v in r.items() if isinstance(v, list)}
            scalars = {k: v for k, v in r.items() if not isinstance(v, list | dict)}
            lengths = {len(v) for v in lists.values()}
            if len(lengths) == 1:
                n = lengths.pop()
                out += [{**scalars, **{k: v[i] for k, v in lists.items()}} for i in range(n)]
            else:
                out.append(scalars)
        return out


# -- claims, diagnoses, specs ------------------------------------------------------------------


Predicate = Callable[[Table, bool], tuple[Any, str]]


def all_of(verdicts: Iterable[bool | None]) -> bool | None:
    """Three-valued 'and' of verdicts: False if one is False, else None (undecided) if one is,
    else True."""
    verdicts = list(verdicts)
    return False if False in verdicts else None if None in verdicts else True


def changed(when: Callable[[Run], bool] | None = None, **change: Any) -> Callable[[Run], Run]:
    """A counterfactual's one change: each argument in ``change`` (a value, or a function of the
    run's value) set in every run that ``when`` accepts (all runs by default)."""
    def apply(run: Run) -> Run:
        if when is not None and not when(run):
            return run
        return run.replace(**{k: v(run.params[k]) if callable(v) else v
                              for k, v in change.items()})
    return apply


@dataclass(frozen=True)
class Diagnosis:
    """Why a claim is not reproduced: ``cause`` in one sentence, and ``change`` applied to every
    run of the spec (``counterfactual(run) -> run``, identity for runs it does not touch); the
    claim's predicate is evaluated again on the changed runs."""

    cause: str
    change: str
    counterfactual: Callable[[Run], Run]


@dataclass(frozen=True)
class Check:
    """A claim of the paper: ``predicate(table, quick) -> (verdict, measured numbers)`` where the
    verdict is a bool, None (undecided) or a :class:`Verdict`. ``not_applicable`` (a reason) marks
    a claim on a reading the paper's text rules out; it is still measured and shown."""

    text: str
    predicate: Predicate
    diagnosis: Diagnosis | None = None
    not_applicable: str | None = None
    unsettled: str = ""          # for a not-reproduced claim without diagnosis: what would settle it


@dataclass(frozen=True)
class Spec:
    """One figure or table. ``runs(quick)``; ``figures``/``tables``: callables of
    (table, quick) returning (figure, caption[, suffix]) and (caption, rows); ``analysis``:
    named hooks ``fn(report, table, quick)`` for notes that need more than a table or plot."""

    name: str
    title: str
    paper: str
    runs: Callable[[bool], list[Run]]
    checks: Sequence[Check] = ()
    settings: Callable[[bool], Mapping[str, Any]] | Mapping[str, Any] = field(default_factory=dict)
    choices: Sequence[str] = ()
    notes: Sequence[str] = ()
    figures: Sequence[Callable] = ()
    tables: Sequence[Callable] = ()
    analysis: Sequence[Callable] = ()


def evaluate(spec: Spec, report, quick: bool, jobs: int = 1,
             log: Callable[[str], None] | None = None) -> Table:
    """Execute ``spec`` and fill ``report``: settings, choices, rows, figures, tables, every
    claim with its verdict, and each not-reproduced claim's counterfactual."""
    runs = spec.runs(quick)
    table = execute(runs, jobs=jobs, log=log)
    settings = spec.settings(quick) if callable(spec.settings) else spec.settings
    for k, v in settings.items():
        report.setting(k, v)
    for c in spec.choices:
        report.choice(c)
    for n in spec.notes:
        report.note(n)
    report.add_rows(table.long())
    for draw in spec.figures:
        fig, caption, *suffix = draw(table, quick)
        report.figure(fig, suffix=suffix[0] if suffix else "", caption=caption)
    for make in spec.tables:
        caption, rows = make(table, quick)
        report.table(caption, rows)
    for check in spec.checks:
        value, measured = check.predicate(table, quick)
        verdict = Verdict.NOT_APPLICABLE if check.not_applicable else Verdict.of(value)
        if check.not_applicable:
            measured = f"{check.not_applicable} (measured anyway: {measured})"
        claim = report.claim(check.text, verdict, measured)
        if verdict is Verdict.NOT_REPRODUCED:
            claim.diagnosis = _diagnose(check, runs, quick, jobs, log)
    for hook in spec.analysis:
        hook(report, table, quick)
    return table


def _diagnose(check: Check, runs: list[Run], quick: bool, jobs: int, log) -> dict:
    d = check.diagnosis
    if d is None:
        return {"cause": "no cause found yet", "settle": check.unsettled or
                "not stated", "change": "", "verdict": "", "measured": ""}
    changed = [d.counterfactual(r) for r in runs]
    value, measured = check.predicate(execute(changed, jobs=jobs, log=log), quick)
    return {"cause": d.cause, "change": d.change, "verdict": Verdict.of(value).value,
            "measured": measured}


# -- generic figures ---------------------------------------------------------------------------


def curve_figure(y: str, hue: str, x: str = "iteration", where: Mapping[str, Any] | None = None,
                 logy: bool = True, seed: Any = None, ylabel: str | None = None,
                 title: str = "", caption: str = "", suffix: str = "",
                 panels: str | None = None) -> Callable:
    """Curves of ``y`` against ``x``, one line per value of ``hue`` (geometric mean over the
    remaining rows, or the rows of ``seed`` only), one panel per value of ``panels``."""
    import matplotlib.pyplot as plt

    def draw(table: Table, quick: bool):
        t = table.where(**(where or {}))
        if seed is not None:
            t = t.where(seed=seed)
        groups = t.unique(panels) if panels else [None]
        fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4.2), squeeze=False)
        for ax, g in zip(axes[0], groups):
            sub = t.where(**{panels: g}) if panels else t
            for h in sub.unique(hue):
                lines = sub.where(**{hue: h})
                xs = np.asarray(lines.rows[0][x], dtype=float)
                ys = lines.gmean(y) if len(lines) > 1 else lines.curves(y)[0]
                (ax.semilogy if logy else ax.plot)(xs, np.maximum(ys, 1e-300) if logy else ys,
                                                   label=f"{hue}={h}" if not isinstance(h, str)
                                                   else h)
            ax.set(xlabel=x, ylabel=ylabel or y,
                   title=(f"{title} {panels}={g}" if panels else title).strip())
            ax.legend(fontsize=7)
        fig.tight_layout()
        return (fig, caption or f"{ylabel or y} against {x}", suffix)

    return draw


@contextlib.contextmanager
def cache_at(path: str | Path) -> Iterator[None]:
    """Use ``path`` as the run cache inside the block (tests, one-off experiments)."""
    before = os.environ.get("DPNET_RUNS")
    os.environ["DPNET_RUNS"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DPNET_RUNS", None)
        else:
            os.environ["DPNET_RUNS"] = before
