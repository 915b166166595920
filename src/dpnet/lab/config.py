"""Run configurations: one path from a TOML file and ``key=value`` overrides to a run.

    cfg = config.load("examples/diadsp.toml")                  # a dict, or a clear error
    cfg = config.apply_overrides(cfg, ["algorithm.eta=0.2"])   # dotted keys, literal values
    config.validate(cfg)                                       # every key and value, every level
    graph, problem, algorithm = config.build(cfg)
    result = config.run(cfg, out)                              # result.csv, result.png, summary.json

A configuration names a graph, a problem and an algorithm (tables with a ``name``), and the run's
scalars (:data:`SCALARS`); optional tables say how the guarantee is accounted (``[privacy]``,
given to ``algorithm.privacy``), where files go (``[output]``) and how a distributed run is
launched (``[distributed]``). Every key at every level is checked against what its constructor
accepts before anything runs (a misspelled key is an error that lists the known ones, never
ignored), scalars are checked for type and range, and what a constructor still refuses comes
back as an error naming the table and the key. ``dpnet run`` and ``dpnet sweep`` both go through
here.
"""

from __future__ import annotations

import ast
import copy
import inspect
import math
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import algorithms, compression, distributed, graphs, noise, partitions, problems, runner
from ..errors import DPNetError, ParameterError, UnknownNameError
from ..registry import resolve
from ..secret_rng import RANDOMNESS
from . import report

#: the run's scalars: key -> (condition, check)
SCALARS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "iterations": ("an integer >= 1", lambda v: _is_int(v) and v >= 1),
    "seed": ("an integer in [0, 2**63 - 1]", lambda v: _is_int(v) and 0 <= v < 2 ** 63),
    "log_every": ('"auto" or an integer >= 1', lambda v: v == "auto" or (_is_int(v) and v >= 1)),
    "float_bits": ("32 or 64 (bits charged per real number)", lambda v: _is_int(v)
                   and v in (32, 64)),
    "device": ('a torch device name such as "cpu" or "cuda:0"',
               lambda v: isinstance(v, str) and bool(v)),
    "randomness": ('"reproducible" or "secret" (default: reproducible simulated, secret '
                   'distributed)', lambda v: v in RANDOMNESS),
}
#: the component tables (each has a ``name``)
TABLES = ("graph", "problem", "algorithm")
#: the optional tables and the keys each accepts (``privacy``: checked by the accountant)
OPTIONAL = {"privacy": None, "output": ("dir",),
            "distributed": ("timeout", "split", "checkpoint_dir", "checkpoint_every",
                            "keep_checkpoints", "resume")}
#: every top-level key of a configuration
KEYS = (*TABLES, *SCALARS, *OPTIONAL)
DEFAULTS = {"iterations": 1000, "seed": 0, "log_every": "auto", "float_bits": 64,
            "device": "cpu"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- reading ---------------------------------------------------------------------------------


def load(path: str | Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict; a missing file, a folder or malformed TOML is an
    error naming the file (and the line, from the TOML parser)."""
    path = Path(path)
    # the value is shortened in messages: the condition carries the whole path
    if not path.exists():
        raise ParameterError("config", path.name, f"an existing TOML file (no {path})")
    if not path.is_file():
        raise ParameterError("config", path.name, f"a TOML file, not a folder ({path})")
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ParameterError("config", path.name, f"valid TOML ({path}: {err})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ParameterError("config", path.name, f"a readable TOML file ({path}: {err})"
                             ) from None


def parse_value(text: str) -> Any:
    """``'0.1'`` -> 0.1, ``'[1, 2]'`` -> [1, 2], ``'topk'`` -> 'topk' (a bare word is a string)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_assignment(text: str) -> tuple[list[str], str]:
    """``"algorithm.eta=0.2"`` -> (["algorithm", "eta"], "0.2")."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise ParameterError("override", text, "of the form key=value with a dotted key, e.g. "
                             "algorithm.eta=0.2")
    return [p.strip() for p in parts], value.strip()


def set_path(cfg: dict[str, Any], parts: list[str], value: Any) -> None:
    """``cfg[a][b]...[z] = value`` in place. The top-level key must be a configuration key and
    every intermediate table must exist (creating one would hide a misspelled table name), but
    the optional tables, which an absent entry leaves at their defaults."""
    if parts[0] not in KEYS:
        raise UnknownNameError("configuration key", parts[0], KEYS)
    node = cfg
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if not isinstance(child, dict):
            if child is None and depth == 0 and part in OPTIONAL:
                child = node[part] = {}
            else:
                where = ".".join(parts[:depth + 1])
                state = "does not exist" if child is None else f"is {child!r}, not a table"
                raise ParameterError(".".join(parts), value, f"a key inside an existing table "
                                     f"({where} {state})")
        node = child
    node[parts[-1]] = value


def apply_overrides(cfg: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """A copy of ``cfg`` with each ``key=value`` applied in order (later ones win)."""
    out = copy.deepcopy(cfg)
    for text in assignments:
        parts, value = parse_assignment(text)
        set_path(out, parts, parse_value(value))
    return out


# -- checking --------------------------------------------------------------------------------


def _accepted(fn: Callable, extra: tuple[str, ...] = ()) -> set[str] | None:
    """Keyword names ``fn`` accepts (None when it takes ``**kwargs``)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return (set(params) - {"self", "cls"}) | set(extra)


def _check_names(where: str, table: dict, accepted: set[str] | None) -> None:
    if accepted is None:
        return
    unknown = sorted(set(table) - accepted, key=str)
    if unknown:
        raise UnknownNameError(f"[{where}] key", f"{where}.{unknown[0]}", accepted)


def _table(cfg: dict, key: str) -> dict:
    value = cfg.get(key)
    if not isinstance(value, dict):
        hint = (f' (a table: [{key}] with name = "{value}" and its parameters)'
                if isinstance(value, str) else "")
        raise ParameterError(key, value, f"a [{key}] table with a name{hint}")
    if not isinstance(value.get("name"), str):
        raise ParameterError(f"{key}.name", value.get("name"), f"the {key}'s name, a string "
                             "(dpnet list)")
    return value


def _graph_keys(table: dict) -> set[str] | None:
    name = table["name"]
    if name == "explicit":
        return {"name", "W"}
    if isinstance(name, str) and ":" in name:     # a user's factory: its own keys
        return _accepted(resolve(name, "graph.name"), ("name",))
    if name in graphs.SCHEDULES:
        return _accepted(graphs.SCHEDULES[name], ("name",))
    if name not in graphs.CONSTRUCTORS:
        raise UnknownNameError("graph", str(name), [*graphs.CONSTRUCTORS, *graphs.SCHEDULES,
                                                    "explicit"])
    return _accepted(graphs.CONSTRUCTORS[name], ("name",))


def _problem_keys(table: dict) -> set[str] | None:
    name = table["name"]
    if isinstance(name, str) and ":" in name:     # a user's factory: its own keys
        return _accepted(resolve(name, "problem.name"), ("name",))
    if name in problems.DATA_PROBLEMS:
        # the partitioner named by "how" brings its own parameters (alpha, beta, sizes, ...)
        how = table.get("how", "even")
        if how not in partitions.PARTITIONERS:
            raise UnknownNameError("problem.how", str(how), partitions.PARTITIONERS)
        own = (_accepted(partitions.PARTITIONERS[how]) or set()) - {"records", "n_agents"}
        if name == "neural":
            return {*problems.NEURAL_KEYS, *own}
        named = set(inspect.signature(problems.LogisticRegression.partition).parameters)
        return named - {"cls", "params", "X", "y", "agents"} | {
            "name", "dataset", "split", "verify", *own}
    if name not in problems.RANDOM:
        raise UnknownNameError("problem", str(name), [*problems.RANDOM, *problems.DATA_PROBLEMS])
    return _accepted(problems.RANDOM[name].random, ("name",))


def _check_algorithm(table: dict) -> None:
    cls = algorithms.get(str(table["name"]))
    _check_names("algorithm", table, _accepted(cls.__init__, ("name",)))
    noises = algorithms.noise_parameters(cls)
    for key, value in table.items():
        if key in noises and isinstance(value, dict):
            kind = value.get("kind", "laplace")
            if kind not in noise.KINDS:
                raise UnknownNameError(f"algorithm.{key}.kind", str(kind), noise.KINDS)
            _check_names(f"algorithm.{key}", value,
                         _accepted(noise.KINDS[kind].__init__, ("kind",)))
        elif key in noises and not (isinstance(value, int | float)
                                              and not isinstance(value, bool)):
            raise ParameterError(f"algorithm.{key}", value, "a noise table {kind, scale, decay "
                                 "| power} or a Laplace scale (a number)")
        elif key == "compressor" and isinstance(value, dict):
            cname = value.get("name", "identity")
            if cname not in compression.REGISTRY:
                raise UnknownNameError("compressor", str(cname), compression.REGISTRY)
            _check_names("algorithm.compressor", value,
                         _accepted(compression.REGISTRY[cname].__init__, ("name",)))
        elif key == "compressor" and not isinstance(value, str):
            raise ParameterError("algorithm.compressor", value, "a compressor name or table")


def validate(cfg: Any) -> dict[str, Any]:
    """``cfg`` with the defaults filled in, after checking every key at every level and the run's
    scalars; raises :class:`~dpnet.errors.DPNetError` naming the first problem."""
    if not isinstance(cfg, dict):
        raise ParameterError("config", cfg, "a table of keys (a TOML document)")
    unknown = sorted(set(cfg) - set(KEYS))
    if unknown:
        raise UnknownNameError("configuration key", unknown[0], KEYS)
    _check_names("graph", _table(cfg, "graph"), _graph_keys(cfg["graph"]))
    _check_names("problem", _table(cfg, "problem"), _problem_keys(cfg["problem"]))
    _check_algorithm(_table(cfg, "algorithm"))
    for key, keys in OPTIONAL.items():
        if key in cfg:
            if not isinstance(cfg[key], dict):
                raise ParameterError(key, cfg[key], f"a [{key}] table")
            if keys is not None:
                _check_names(key, cfg[key], set(keys))
    out = {**DEFAULTS, **cfg}
    for key, (condition, ok) in SCALARS.items():
        if key in out and not ok(out[key]):
            raise ParameterError(key, out[key], condition)
    _check_size(out)
    return out


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):      # no sysconf: assume a laptop's 16 GiB
        return 16 * 2 ** 30


def _check_size(cfg: dict[str, Any]) -> None:
    """Refuse, before anything is allocated, a configuration whose graph, data and state need
    more than half of this machine's memory (a size typed with extra digits was OOM-killed, no
    message): float64 entries of the weights (n^2 for a complete graph), the synthetic data
    (``n x samples x dim``, ``n x dim x dim`` for quadratics) and a few ``(n, dim)`` states."""
    g, p = cfg["graph"], cfg["problem"]
    # constructors take 2.0 for 2 (positive_int): count integer-valued floats as sizes too
    ints = {k: int(v) for k, v in {**g, **p}.items() if isinstance(v, int | float)
            and not isinstance(v, bool) and math.isfinite(v) and float(v).is_integer()}
    n = ints.get("n", ints.get("rows", 1) * ints.get("cols", 1))
    if g["name"] == "explicit" or not n:
        return
    dim = ints.get("dim", 10)
    data = {"nonconvex_logistic": n * ints.get("samples", 200) * dim,
            "quadratic": n * dim * dim, "sincos": n * dim}.get(p["name"], 0)
    dense = g["name"] in ("complete", "erdos_renyi", "geometric")      # pairwise draws or edges
    entries = (n * n if dense else 4 * n) + data + 16 * n * dim
    need, have = 8 * entries, _memory_bytes()
    if need > have // 2:
        raise ParameterError("graph.n, problem.samples, problem.dim", (n, ints.get("samples"),
                             dim), f"sizes whose graph, data and state fit in half of this "
                             f"machine's memory: they need about {need / 2 ** 30:.3g} GiB of "
                             f"{have / 2 ** 30:.3g} GiB")


# -- building and running ------------------------------------------------------------------


def _built(where: str, make: Callable[[], Any]) -> Any:
    """``make()``, with what a constructor refuses in a form other than a dpnet error (a
    TypeError from a wrong type deep inside) turned into one naming the table."""
    try:
        return make()
    except DPNetError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, MemoryError) as err:
        raise ParameterError(f"[{where}]", None, f"values its constructor accepts "
                             f"({type(err).__name__}: {err})") from None


def build(cfg: dict[str, Any], agents=None) -> tuple[graphs.Graph, problems.Problem,
                                                      algorithms.Algorithm]:
    """(graph, problem, algorithm) of a validated configuration; ``agents``: hold only these
    agents' data (one rank of a distributed run)."""
    graph = _built("graph", lambda: graphs.from_spec(cfg["graph"]))
    problem = _built("problem", lambda: problems.from_spec(
        {"n_agents": graph.n, **cfg["problem"]}, agents=agents))
    algorithm = _built("algorithm", lambda: algorithms.from_spec(cfg["algorithm"]))
    return graph, problem, algorithm


def run(cfg: dict[str, Any], out: Path | None, quiet: bool = False,
        backend: str = "simulated", device: str | None = None) -> runner.Result:
    """Run a configuration; with ``out``, write ``result.csv``, ``result.png`` and
    ``summary.json`` there. ``device`` overrides the configuration's. ``backend="distributed"``:
    agents spread over torchrun's ranks (options from ``[distributed]``); rank 0 writes."""
    cfg = validate(cfg)
    if out is not None:
        report.require_folder("--out", out)
    device = device or cfg["device"]
    extra = dict(cfg.get("distributed", {})) if backend == "distributed" else {}
    agents = None
    if backend == "distributed":
        agents = distributed.rank_agents(_built("graph", lambda: graphs.from_spec(
            cfg["graph"])).n, extra.get("split"),
            extra.get("timeout", distributed.DEFAULT_TIMEOUT))
    graph, problem, algorithm = build(cfg, agents)
    go = distributed.run if backend == "distributed" else runner.run
    randomness = cfg.get("randomness") or ("secret" if backend == "distributed" else
                                           "reproducible")
    res = go(algorithm, problem, graph, cfg["iterations"], seed=cfg["seed"],
             randomness=randomness,
             log_every=cfg["log_every"], float_bits=cfg["float_bits"],
             privacy=cfg.get("privacy") or None, progress=None if not quiet else False,
             device=device, **extra)
    if out is None or (backend == "distributed" and not distributed.is_rank0()):
        return res
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res.to_csv(out / "result.csv")
    res.to_json(out / "summary.json")
    plot_history(res, out / "result.png")
    return res


def plot_history(res: runner.Result, path: Path) -> Path:
    """The gradient norm, consensus error and distance to the optimum per iteration."""
    h = res.history
    fig, axes = report.figure(1, 3, figsize=(13, 3.6))
    for ax, key, label in zip(axes, ("grad_norm_sq", "consensus", "distance"),
                              ("||grad f(xbar)||^2", "||x - 1 xbar||^2", "||x - 1 x*||^2")):
        vals = np.asarray(h[key], dtype=float)
        if np.all(np.isnan(vals)):
            ax.set_visible(False)
            continue
        ax.semilogy(h["iteration"], np.maximum(vals, 1e-300))
        ax.set(xlabel="iteration", ylabel=label)
    fig.suptitle(f"{res.algorithm}: {res.privacy.epsilon:.3g}-DP" if res.privacy.is_private
                 else f"{res.algorithm} (no privacy)")
    return report.save_png(fig, path, dpi=100)


def algorithm_from_flags(name: str, params: dict[str, Any]) -> algorithms.Algorithm:
    """An algorithm from flat command-line parameters (``dpnet privacy``): noise scales are
    numbers (``noise_*``) with a common ``decay`` (geometric), ``power`` (polynomial) or
    per-noise ``<noise>_decay``; a compressor is ``name`` or ``name:k``."""
    cls = algorithms.get(name)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    params = dict(params)
    decay, power = params.pop("decay", None), params.pop("power", None)
    kwargs: dict[str, Any] = {}
    # an algorithm with its own decay parameter (PGTC's q, DPP2's r) takes plain noise scales
    own_decay = decay is None and power is None and any(k in params for k in ("q", "r"))
    noises = [k for k in params if k in algorithms.noise_parameters(cls) and not own_decay]
    if not noises and (decay is not None or power is not None):
        raise ParameterError("--decay" if decay is not None else "--power",
                             decay if decay is not None else power,
                             f"a noise scale to apply it to ({name} is given none)")
    for key in noises:
        value = params.pop(key)
        if isinstance(value, dict):
            kwargs[key] = noise.from_spec(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ParameterError(f"--{key.replace('_', '-')}", value, "a noise scale (a number)")
        own = params.pop(f"{key}_decay", decay)
        kwargs[key] = noise.Laplace(value, decay=own, power=power if own is None else None)
    if "compressor" in params:
        spec = params.pop("compressor")
        if isinstance(spec, str) and ":" in spec:
            cname, arg = spec.split(":", 1)
            spec = {"name": cname, "bits" if cname == "quantizer" else "k": parse_value(arg)}
        kwargs["compressor"] = compression.from_spec(spec)
    kwargs.update(params)
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise UnknownNameError(f"{name} parameter", unknown[0], accepted)
    required = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                if p.name != "self" and p.default is inspect.Parameter.empty
                and p.kind is not p.VAR_KEYWORD and p.kind is not p.VAR_POSITIONAL]
    missing = [p for p in required if p not in kwargs]
    if missing:
        raise ParameterError(f"--{missing[0].replace('_', '-')}", None,
                             f"a value ({name} needs {', '.join(missing)})")
    return _built("algorithm", lambda: cls(**kwargs))
