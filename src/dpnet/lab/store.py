"""The run store of the application layer: one cache of run results, locks, parallel execution.

A run (:class:`Run`) is a module-level function and JSON-able keyword arguments; its result is a
JSON-able dict stored under ``$DPNET_RUNS/<key>.json`` (default ``~/.cache/dpnet/runs``), where the
key hashes the function's name, the source it executes (:func:`.keys.code_digest`: the library
below the application layer and the function's own closure), its arguments and the data root. So
an interrupted batch resumes run by run, and a changed run is never read back stale. A run being
computed holds a lock file (host, pid) that :func:`prune` respects; a long run can keep snapshots
in :func:`run_folder` to resume mid-run. :func:`execute` computes a batch in-process or in worker
processes and returns a :class:`Table`. ``dpnet reproduce``, ``compare``, ``sweep`` and ``audit``
all run through it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import registry
from ..errors import ParameterError
from ..runner import RunDiagnosis
from ..threads import torch_threads
from . import keys, source
from .keys import Runtime

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
        """The run's cache key, 20 hex digits of a SHA-256 over the function's qualified name, the digest
        of its code (:func:`dpnet.lab.keys.code_digest`), its arguments in canonical JSON and the data
        root; ``tags`` are not part of it. Raises :class:`~dpnet.errors.ParameterError` for an argument
        that is not JSON-able."""
        body = {"fn": f"{self.fn.__module__}.{self.fn.__qualname__}",
                "code": keys.code_digest(self.fn), "params": _canonical(self.params),
                "data": source.data_root()}
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
    """The run cache's folder: ``$DPNET_RUNS``, else ``~/.cache/dpnet/runs`` (not created here)."""
    return Path(os.environ.get("DPNET_RUNS") or Path.home() / ".cache" / "dpnet" / "runs")


def cache_usage() -> dict[str, Any]:
    """Where the run cache is, how many results, unfinished runs and runs computing now it holds,
    and their bytes."""
    root = cache_root()
    files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
    running = _running(root)
    return {"root": str(root), "results": sum(p.parent == root and p.suffix == ".json"
                                              for p in files),
            "stale_locks": len(_stale_locks(root)),
            "unfinished": sum(_key_of(p) not in running for p in root.glob("*.partial")),
            "running": len(running), "bytes": sum(p.stat().st_size for p in files)}


def check_cache_root(uncached: int) -> Path:
    """The run cache's folder, checked before any work: a folder (created if missing) that this
    process can write when ``uncached`` runs will store their results there (a read-only cache
    serves cached results only)."""
    root = cache_root()
    if root.exists() and not root.is_dir():
        raise ParameterError("$DPNET_RUNS", str(root), "a folder for the run cache (it is a file)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParameterError("$DPNET_RUNS", str(root), f"a folder that can be created "
                             f"({err.strerror})") from None
    if uncached and not os.access(root, os.W_OK | os.X_OK):
        raise ParameterError("$DPNET_RUNS", str(root), f"a writable folder: {uncached} run(s) "
                             "are not cached yet and would store their results there")
    return root


def _key_of(path: Path) -> str:
    """The run key a cache entry belongs to (``<key>.json``, ``.lock``, ``.partial``, ``.tmp``)."""
    return path.name.split(".")[0]


def _locks(root: Path) -> tuple[set[str], list[Path]]:
    """``(live, stale)``: the keys of the runs being computed now (a lock whose process is alive,
    or on another host, where it cannot be checked) and the locks of this host whose process
    has died (a killed sweep: no run computes under them)."""
    live, stale = set(), []
    for lock in root.glob("*.lock") if root.is_dir() else []:
        try:
            host, pid = lock.read_text().split()
            if host == socket.gethostname():
                os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(lock)       # its process died: an unfinished run, prunable
            continue
        except (OSError, ValueError):
            pass                     # unreadable, or not ours to signal: assume alive
        live.add(_key_of(lock))
    return live, stale


def _running(root: Path) -> set[str]:
    return _locks(root)[0]


def _stale_locks(root: Path) -> list[Path]:
    return _locks(root)[1]


def prune(days: float | None = None) -> int:
    """Remove cached results and unfinished runs (snapshots) unused for ``days`` days (None: all);
    the number removed. Results are marked used when read, so a key that no longer occurs (the
    code it hashes has changed) ages out. A run being computed now (its lock's process alive) is
    left alone, so clearing beside a long reproduction never loses its result."""
    if days is not None and not days >= 0:
        raise ParameterError("days", days, "a non-negative number of days (or none: everything)")
    root, removed = cache_root(), 0
    for lock in _stale_locks(root):  # a dead process's lock guards nothing, whatever its age
        lock.unlink(missing_ok=True)
        removed += 1
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


@contextlib.contextmanager
def _runs_unheard():
    """A batch reports its runs itself: their own progress lines and long-run forecasts (a
    batch of long runs is long on purpose) stay quiet."""
    log = logging.getLogger("dpnet.run")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _compute(fn: Callable, params: dict, key: str, root: str, threads: int) -> tuple[dict, str]:
    """``(result, "ran" | "cached")`` of one run, computing it unless its result is stored."""
    if threads:
        torch.set_num_threads(threads)
    path = Path(root) / f"{key}.json"
    if path.exists():
        with contextlib.suppress(OSError):      # last use, for prune(); a read-only cache is fine
            os.utime(path)
        return json.loads(path.read_text()), "cached"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(root) / f"{key}.lock"          # prune() leaves a run alone while it computes
    lock.write_text(f"{socket.gethostname()} {os.getpid()}")
    _STATE["folder"] = Path(root) / f"{key}.partial"
    try:
        with warnings.catch_warnings(), _runs_unheard():
            # a batch judges its runs in its own tables; a run that got worse is a row there,
            # not a warning per run on the console
            warnings.simplefilter("ignore", RunDiagnosis)
            result = fn(**params)
        _check_result(fn, params, result)
        # written whole or not at all: an interrupted run is never read back as done
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, prefix=f"{key}.",
                                         suffix=".tmp") as fh:
            json.dump(_jsonable(result), fh)
        os.replace(fh.name, path)
        shutil.rmtree(Path(root) / f"{key}.partial", ignore_errors=True)
    finally:
        _STATE["folder"] = None
        lock.unlink(missing_ok=True)
    return json.loads(path.read_text()), "ran"


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


#: how :func:`_jsonable` stores a non-finite float
NONFINITE = ("nan", "inf", "-inf")


def restored(value: Any) -> Any:
    """A stored result with its non-finite floats back as floats (JSON holds them as strings)."""
    if isinstance(value, Mapping):
        return {k: restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restored(v) for v in value]
    return float(value) if isinstance(value, str) and value in NONFINITE else value


def _recorded(fn: Callable, params: dict, key: str, root: str, threads: int) -> tuple[dict, str]:
    """:func:`_compute`, with a failure returned as ``({"error": ...}, "failed")`` (not stored,
    so the next batch tries it again)."""
    try:
        return _compute(fn, params, key, root, threads)
    except Exception as err:   # noqa: BLE001 - the batch goes on; the row says what failed
        return {"error": f"{type(err).__name__}: {err}"}, "failed"


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the process that started it dies (a ``kill -9``
    of ``dpnet sweep`` must not leave orphans computing): the kernel's parent-death signal where
    there is one (Linux), and a watcher thread everywhere."""
    # Ctrl-C reaches the whole process group: the parent alone handles it (and ends us), so a
    # worker's KeyboardInterrupt never turns into a broken pool and a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _start_worker(parent: int, extensions: tuple[str, ...]) -> None:
    """Worker initializer: die with the parent, and import the user's ``--with`` extensions
    where the worker was spawned (a fork has them already)."""
    _die_with_parent(parent)
    registry.import_extensions(extensions)


def _pool(jobs: int, method: str | None = None) -> ProcessPoolExecutor:
    """Worker processes that die with this one; forked (cheap) unless CUDA is initialised here,
    whose state a fork would copy unusable (``method`` forces one). Spawned workers import the
    parent's ``--with`` extensions first, so a user's names resolve there too."""
    method = method or ("spawn" if torch.cuda.is_initialized() else "fork")
    extensions = registry.imported_extensions() if method == "spawn" else ()
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                               initializer=_start_worker, initargs=(os.getpid(), extensions))


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (their runs' results were not written,
    so nothing half-done is kept)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())   # no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        with contextlib.suppress(Exception):
            proc.kill()


def worker_count(jobs: int) -> int:
    """``jobs`` checked, and capped at this process's cores with one line on stderr: workers
    beyond the cores only share them (``--jobs 1000`` forked 1,000 processes and took 10x)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ParameterError("jobs", jobs, "a positive number of worker processes")
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
             os.cpu_count()) or 1
    if jobs > cores:
        print(f"dpnet: --jobs {jobs} capped at {cores}, the cores this process may use",
              file=sys.stderr)
        return cores
    return jobs


def execute(runs: Sequence[Run], jobs: int = 1, log: Callable[[str], None] | None = None,
            errors: str = "raise") -> Table:
    """Run (or read back from the cache) every run; one table row per run: its tags, then its
    result's fields. Identical runs are computed once. ``errors="record"``: a run that fails
    does not stop the batch; every row then also has ``run_status`` (ran, cached or failed) and
    ``run_error``. Ctrl-C ends the workers at once and raises :class:`KeyboardInterrupt`."""
    jobs = worker_count(jobs)
    if errors not in ("raise", "record"):
        raise ParameterError("errors", errors, "'raise' or 'record'")
    if _STATE["planning"]:
        total, n_done = cached(runs)
        if n_done < total:      # a spec that needs results to name its runs (a chosen parameter)
            raise Unplanned(total, n_done)
    root = str(cache_root())
    run_keys = [r.key for r in runs]
    todo = {k: r for k, r in zip(run_keys, runs)}
    to_compute = sum(not (Path(root) / f"{k}.json").exists() for k in todo)
    check_cache_root(to_compute)
    compute = _recorded if errors == "record" else _compute
    results: dict[str, tuple[dict, str]] = {}
    progress = _Progress(todo, to_compute, log)

    def done(k: str) -> None:
        progress.done(k, *results[k])

    if jobs == 1 or len(todo) == 1:
        with torch_threads(1):
            for k, r in todo.items():
                results[k] = compute(r.fn, dict(r.params), k, root, 0)
                done(k)
    else:
        pool = _pool(jobs)
        try:
            futures = {pool.submit(compute, r.fn, dict(r.params), k, root, 1): k
                       for k, r in todo.items()}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                done(futures[fut])
        except BaseException:
            _stop(pool)
            raise
        pool.shutdown(wait=True)
    rows = []
    for k, r in zip(run_keys, runs):
        result, status = results[k]
        extra = {"run_status": status, "run_error": result.get("error", "")} \
            if errors == "record" else {}
        rows.append({**r.tags, **(result if status != "failed" else {}), **extra})
    return Table(rows)


LOG = logging.getLogger("dpnet.lab")
#: a batch's computed runs are reported at most this often (a failed one and the last always)
BATCH_PROGRESS_EVERY_S = 10.0


class _Progress:
    """One progress style for every batch (run, sweep, compare, reproduce, audit): a line when the
    batch starts (how many runs, how many in the cache), then a line on a computed run at most
    every :data:`BATCH_PROGRESS_EVERY_S` seconds, on every failed one and on the last, with the
    count, the time so far and the time left; cached runs count without a line each. Lines go
    to ``log`` if given, else to the ``dpnet.lab`` logger at INFO (the command line shows it on
    stderr)."""

    def __init__(self, todo: Mapping[str, Run], to_compute: int,
                 log: Callable[[str], None] | None) -> None:
        self.todo, self.to_compute, self.say = todo, to_compute, log or LOG.info
        self.finished = self.computed = 0
        self.start = self.said = time.perf_counter()
        first = next(iter(todo.values()), None)
        self.what = getattr(getattr(first, "fn", None), "__name__", "runs")
        if todo:
            cached_now = len(todo) - self.to_compute
            self.say(f"{self.what}: {len(todo)} run(s), "
                     + ("all in the cache" if not self.to_compute else
                        f"{cached_now} in the cache, {self.to_compute} to compute"))

    def done(self, key: str, result: dict, status: str) -> None:
        self.finished += 1
        if status == "cached":
            return
        self.computed += 1
        now = time.perf_counter()
        spent = now - self.start
        left = max(0, self.to_compute - self.computed)
        if status != "failed" and left and now - self.said < BATCH_PROGRESS_EVERY_S:
            return
        self.said = now
        eta = f", about {_duration(spent / self.computed * left)} left" if left else ""
        what = (f"failed ({result.get('error', '')})" if status == "failed"
                else f"computed ({_duration(spent)} so far{eta})")
        self.say(f"[{self.finished}/{len(self.todo)}] {self.what}: {_label(self.todo[key])}: "
                 f"{what}")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def cached(runs: Sequence[Run]) -> tuple[int, int]:
    """``(distinct runs, of which cached)``: what :func:`execute` would compute, without running."""
    distinct = {r.key for r in runs}
    return len(distinct), sum((cache_root() / f"{k}.json").exists() for k in distinct)


class Unplanned(Exception):
    """Raised while planning when a spec needs uncached results to name its runs."""

    def __init__(self, total: int, done: int):
        super().__init__(f"{total} preliminary runs ({done} cached) decide its runs")
        self.total, self.done = total, done


def plan(runs_of: Callable[[], Sequence[Run]], diagnoses: Sequence[Any] = ()) -> str:
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
    """The run in a progress line: its tags, or its scalar arguments but digests (``code``)."""
    tags = run.tags or {k: v for k, v in run.params.items() if k != "code"}
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
        """The rows whose columns equal the given values (``where(method="DPP2", seed=0)``), as a new
        table. Raises :class:`~dpnet.errors.ParameterError` for a column no row has (on a non-empty
        table)."""
        for k in equal:
            if self.rows and all(k not in r for r in self.rows):
                raise ParameterError("column", k, f"one of {self.columns}")
        return Table(r for r in self.rows if all(r.get(k) == v for k, v in equal.items()))

    @property
    def columns(self) -> list[str]:
        """Every column of the rows, in order of first appearance."""
        cols: list[str] = []
        for r in self.rows:
            cols += [k for k in r if k not in cols]
        return cols

    def one(self, **equal: Any) -> dict:
        """The one row matching ``equal`` (as :meth:`where`); raises :class:`~dpnet.errors.ParameterError`
        unless exactly one matches."""
        rows = self.where(**equal).rows
        if len(rows) != 1:
            raise ParameterError("rows matching", equal, f"exactly one row (found {len(rows)})")
        return rows[0]

    def unique(self, column: str) -> list:
        """The distinct values of ``column`` in row order (rows without it skipped)."""
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
