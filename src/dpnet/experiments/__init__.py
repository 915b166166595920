"""Every figure and table of the papers as a registered experiment (``dpnet reproduce NAME``).

An experiment is a declarative :class:`~.engine.Spec` registered with :func:`register` (problem,
graph, algorithms, horizon full and quick, seeds, metric, plots, choices, claims as predicates
over the results table), executed by the engine with one cache. One module of specs per paper;
every module here is imported on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UnknownNameError
from .engine import Check, Diagnosis, Run, Spec, Table, Verdict, all_of, changed, evaluate, execute
from .report import Claim, Report

__all__ = ["Experiment", "Report", "Claim", "Spec", "Run", "Check", "Diagnosis", "Table",
           "Verdict", "all_of", "changed", "execute", "register", "get", "available", "reproduce"]


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str
    spec: Spec

    def run(self, quick: bool = False, outdir: str | Path | None = None, jobs: int = 1,
            log: Callable[[str], None] | None = None) -> Report:
        report = Report(self.name, self.title, self.paper, quick=quick)
        evaluate(self.spec, report, quick, jobs=jobs, log=log)
        if outdir is not None:
            report.write(outdir)
        return report


_REGISTRY: dict[str, Experiment] = {}
_loaded = False


def register(spec: Spec) -> Spec:
    """Register a spec as experiment ``spec.name``."""
    _REGISTRY[spec.name] = Experiment(spec.name, spec.title, spec.paper, spec)
    return spec


def _load() -> None:
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name not in ("report", "engine") and not mod.name.startswith("_"):
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True


def available() -> dict[str, Experiment]:
    _load()
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> Experiment:
    _load()
    if name not in _REGISTRY:
        raise UnknownNameError("experiment", name, _REGISTRY)
    return _REGISTRY[name]


def reproduce(name: str, quick: bool = False, outdir: str | Path = "reproductions") -> Report:
    return get(name).run(quick=quick, outdir=outdir)
