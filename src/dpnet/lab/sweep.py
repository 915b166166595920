"""Parameter sweeps over a run configuration.

    dpnet sweep CONFIG --set algorithm.eta=0.05,0.1,0.2 --seeds 0-4 --jobs 4 --out DIR

A sweep is the Cartesian product of the ``--set`` value lists and the seeds (at most
:data:`MAX_POINTS`). Each point is one :func:`dpnet.lab.config.run` of its fully resolved
configuration, computed through the run store (:mod:`dpnet.lab.store`: one cache keyed by the code
and the configuration, parallel workers that die with the sweep, a result written whole or not at
all), so an interrupted sweep resumes point by point and a point already computed, in this sweep
or any other, is read back. Each point's files go to ``DIR/runs/<hash of its configuration>/``
(``config.json``, ``history.csv``, ``summary.json``); the points are aggregated in
``DIR/sweep.csv`` (one row each, failed points with their error) and ``DIR/sweep.png``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from ..errors import ParameterError
from . import config as lab_config
from . import report, store

#: final metrics copied from each point's summary.json into sweep.csv
METRICS = ("objective", "grad_norm_sq", "consensus", "distance")
#: the largest grid one sweep runs (a range typed with one digit too many is refused, not run)
MAX_POINTS = 10_000
#: columns of sweep.csv after the swept keys
COLUMNS = ("seed", "status", *METRICS, "bits", "epsilon", "wall_time_s", "run", "error")


# -- sweep grid ------------------------------------------------------------------------------


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes, so ``[1,2],[3,4]`` is two list values."""
    cur: list[str]
    items, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    items.append("".join(cur).strip())
    return items


def parse_set(text: str) -> tuple[str, list[Any]]:
    """``"algorithm.eta=0.05,0.1"`` -> ("algorithm.eta", [0.05, 0.1])."""
    parts, values = lab_config.parse_assignment(text)
    items = _split_top_level(values)
    if not values or any(not v for v in items):
        raise ParameterError(f"--set {'.'.join(parts)}", values, "a comma-separated list of "
                             "non-empty values, e.g. --set algorithm.eta=0.05,0.1")
    return ".".join(parts), [lab_config.parse_value(v) for v in items]


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0..4] (inclusive), ``"0,2,7"`` -> [0, 2, 7], or a mix ``"0-2,9"``."""
    seeds: list[int] = []
    try:
        for item in text.split(","):
            lo, sep, hi = item.strip().partition("-")
            rng = range(int(lo), int(hi) + 1) if sep else [int(lo)]
            if sep and int(hi) < int(lo):
                raise ValueError(item)
            if len(seeds) + len(rng) > MAX_POINTS:     # counted before a list is made of it
                raise ParameterError("--seeds", text, f"at most {MAX_POINTS} seeds")
            seeds.extend(rng)
    except ParameterError:
        raise
    except ValueError:
        raise ParameterError("--seeds", text, "non-negative integers as a range 0-4 (inclusive) "
                             "or a list 0,2,7") from None
    if any(s >= 2 ** 63 for s in seeds):
        raise ParameterError("--seeds", text, "seeds below 2**63")
    if len(set(seeds)) != len(seeds):
        raise ParameterError("--seeds", text, "each seed at most once")
    return seeds


def grid(sets: list[str], seeds: list[int]) -> tuple[list[str], list[dict[str, Any]]]:
    """(swept keys, points): each point maps every swept key and ``seed`` to one value."""
    parsed = [parse_set(s) for s in sets]
    keys = [k for k, _ in parsed]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ParameterError("--set", dup[0], "each key swept once (list all its values in one "
                             "--set)")
    if "seed" in keys:
        raise ParameterError("--set", "seed", "seeds given by --seeds, not --set")
    count = math.prod(len(v) for _, v in parsed) * len(seeds)
    if count > MAX_POINTS:
        raise ParameterError("--set/--seeds", f"{count} points", f"at most {MAX_POINTS} points "
                             "in one sweep (split it)")
    points = [dict(zip(keys, combo), seed=seed)
              for combo in itertools.product(*(v for _, v in parsed)) for seed in seeds]
    return keys, points


def point_config(base: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The resolved configuration of one point (overrides applied to a copy of ``base``)."""
    cfg = copy.deepcopy(base)
    for key, value in point.items():
        lab_config.set_path(cfg, key.split("."), value)
    return cfg


def config_hash(cfg: dict[str, Any]) -> str:
    """Cache key of a resolved configuration: everything but ``[output]`` (where files go does
    not change a result), canonical JSON, so key order and TOML layout do not matter."""
    body = {k: v for k, v in cfg.items() if k != "output"}
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- one point -------------------------------------------------------------------------------


def point(config: dict[str, Any]) -> dict[str, Any]:
    """The run of one resolved configuration, as the store keeps it: the summary (final
    metrics, bits, privacy, timing) and the history."""
    res = lab_config.run(config, None, quiet=True)
    return {"summary": res.summary(), "history": res.history}


def _float(v: Any) -> float:
    """A number from a stored result: null (an untracked metric) is NaN, and the store's
    non-finite strings are read back by :func:`.store.restored`."""
    return math.nan if v is None else float(store.restored(v))


def main_metric(final: dict[str, Any]) -> str:
    """grad_norm_sq, or objective where the gradient norm is not recorded (NaN)."""
    return "objective" if math.isnan(_float(final.get("grad_norm_sq"))) else "grad_norm_sq"


def record(summary: dict[str, Any], status: str) -> dict[str, Any]:
    """Row fields from a summary; a non-finite main metric makes the point failed."""
    final = summary["final"]
    row: dict[str, Any] = {m: _float(final.get(m)) for m in METRICS}
    bits = summary.get("bits", {})
    row["bits"] = bits.get("total") if isinstance(bits, dict) else bits
    row["epsilon"] = _float(summary.get("privacy", {}).get("epsilon"))
    row["wall_time_s"] = _float(summary.get("wall_time_s"))
    metric = main_metric(final)
    if not math.isfinite(row[metric]):
        status = "failed"
        row["error"] = f"non-finite final {metric}={row[metric]}"
    row["status"] = status
    return row


def write_point(folder: Path, cfg: dict[str, Any], result: dict[str, Any]) -> None:
    """``config.json``, ``history.csv`` and, last, ``summary.json`` of one point (a folder that
    already has its summary is left as it is: the point's result does not change)."""
    if (folder / "summary.json").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True, default=str))
    history = result["history"]
    report.write_csv([dict(zip(history, row)) for row in zip(*history.values())],
                     folder / "history.csv")
    tmp = folder / "summary.json.tmp"
    tmp.write_text(json.dumps(result["summary"], indent=2))
    os.replace(tmp, folder / "summary.json")


# -- the sweep -------------------------------------------------------------------------------


def sweep(base: dict[str, Any], sets: list[str], seeds: list[int], out: Path, jobs: int = 1,
          device: str | None = None, log: Callable[[str], None] | None = None
          ) -> list[dict[str, Any]]:
    """Run (or read back from the run store) every point; write ``out/runs/<hash>/`` per point,
    ``out/sweep.csv`` and ``out/sweep.png``; return the rows. Every key of every point is
    checked before the first run starts."""
    if jobs < 1:
        raise ParameterError("--jobs", jobs, "a positive number of worker processes")
    keys, points = grid(sets, seeds)
    if device is not None:
        base = lab_config.apply_overrides(base, [f"device={device!r}"])
    configs = [lab_config.validate(point_config(base, p)) for p in points]
    out = report.require_folder("--out", out)
    runs = [store.Run(point, {"config": cfg}, tags={"index": i}) for i, cfg in enumerate(configs)]
    table = store.execute(runs, jobs=jobs, log=log, errors="record")
    rows = []
    for p, cfg, result in zip(points, configs, table.rows):
        folder = out / "runs" / config_hash(cfg)
        row = {**p, "run": folder.name}
        if result["run_status"] == "failed":
            rows.append({**row, "status": "failed", "error": result["run_error"]})
            continue
        write_point(folder, cfg, result)
        rows.append({**row, **record(result["summary"], result["run_status"])})
    write_csv(rows, keys, out / "sweep.csv")
    plot(rows, keys, out / "sweep.png")
    return rows


def write_csv(rows: list[dict[str, Any]], keys: list[str], path: Path) -> Path:
    """One row per point: the swept keys, then :data:`COLUMNS`."""
    return report.write_csv(rows, path, [*keys, *COLUMNS])


def plot(rows: list[dict[str, Any]], keys: list[str], path: Path) -> Path | None:
    """Final main metric against the first swept key, one line per combination of the other
    keys: mean over seeds with a min-max band. Failed points are left out (they are in the
    CSV); without a swept key the seeds are plotted as one point."""
    import numpy as np

    ok = [r for r in rows if r.get("status") != "failed"]
    metric = ("grad_norm_sq" if any(math.isfinite(r.get("grad_norm_sq", math.nan)) for r in ok)
              else "objective")
    x_key = keys[0] if keys else "seed"
    others = keys[1:]
    fig, ax = report.figure(figsize=(6, 4))
    groups: dict[tuple, dict[Any, list[float]]] = {}
    for r in ok:
        xs = groups.setdefault(tuple(r[k] for k in others), {})
        xs.setdefault(r[x_key] if keys else 0, []).append(r[metric])
    numeric = all(isinstance(r[x_key], int | float) and not isinstance(r[x_key], bool)
                  for r in ok) if keys else True
    # a list whenever not numeric, the only case that reads it
    labels = sorted({x for xs in groups.values() for x in xs}, key=repr) if not numeric else None
    for combo, xs in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        order = sorted(xs) if numeric else sorted(xs, key=repr)
        pos = np.asarray(order if numeric else [cast(list, labels).index(x) for x in order], dtype=float)
        vals = [np.asarray(xs[x], dtype=float) for x in order]
        mean = np.array([v.mean() for v in vals])
        label = ", ".join(f"{k}={v}" for k, v in zip(others, combo)) or None
        (line,) = ax.plot(pos, mean, marker="o", label=label)
        ax.fill_between(pos, [v.min() for v in vals], [v.max() for v in vals],
                        color=line.get_color(), alpha=0.2)
    if labels is not None:
        ax.set_xticks(range(len(labels)), [str(x) for x in labels])
    if ok and all(r[metric] > 0 for r in ok):
        ax.set_yscale("log")
    ax.set(xlabel=x_key, ylabel=f"final {metric}",
           title=f"mean over seeds, min-max band ({len(ok)}/{len(rows)} points ok)")
    if others:
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path
