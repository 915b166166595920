"""Every figure and table of the papers as a registered experiment (``dpnet reproduce NAME``).

An experiment is a declarative :class:`~.engine.Spec` registered with :func:`register` (problem,
graph, algorithms, horizon full and quick, seeds, metric, plots, choices, claims as predicates
over the results table), executed by the engine with one cache. One module of specs per paper,
its prose (claims, diagnoses, choices, notes, titles) in one data file per paper
(``data/<module>.toml``, :mod:`.prose`); every module here is imported on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...registry import Registry, calling_module
from . import engine, prose, report
from .engine import Check, Diagnosis, Run, Spec, Table, Verdict, all_of, changed, evaluate, execute
from .prose import DATA, Prose
from .report import Claim, Report

__all__ = ["engine", "prose", "report", "Experiment", "Report", "Claim", "Spec", "Run", "Check",
           "Diagnosis", "Table", "Prose", "DATA", "Verdict", "all_of", "changed", "execute",
           "register", "get", "available", "reproduce"]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment (:func:`register`): its ``name``, ``title``, the ``paper`` and figure it
    reproduces, and the :class:`~.engine.Spec` that runs and checks it."""
    name: str
    title: str
    paper: str
    spec: Spec

    def run(self, quick: bool = False, outdir: str | Path | None = None, jobs: int = 1,
            log: Callable[[str], None] | None = None) -> Report:
        """Run the experiment (``quick``: the short horizons and fewer seeds; ``jobs`` worker processes;
        cached runs are read back) and return its :class:`Report`, with every claim checked; with
        ``outdir`` the report's files are written there too (:meth:`Report.write`). ``log`` receives the
        progress lines."""
        out = Report(self.name, self.title, self.paper, quick=quick)
        evaluate(self.spec, out, quick, jobs=jobs, log=log)
        if outdir is not None:
            out.write(outdir)
        return out


#: every experiment by name (``dpnet list experiments``)
EXPERIMENTS: Registry[Experiment] = Registry("experiment", "dpnet.lab.reproduce")
_loaded = False


def register(*specs: Spec) -> None:
    """Register specs as experiments, each under its name. The specs of one prose file are
    registered in one call: together they must use every entry of the file (an orphan claim,
    diagnosis, choice group, snippet or spec section is an error naming its id)."""
    for p in {id(s.prose): s.prose for s in specs}.values():
        p.verify(s for s in specs if s.prose is p)
    for spec in specs:
        EXPERIMENTS.register(spec.name, Experiment(spec.name, spec.title, spec.paper, spec),
                             registrant=calling_module())


def _load() -> None:
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name not in ("report", "engine", "prose") and not mod.name.startswith("_"):
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True


def available() -> dict[str, Experiment]:
    """Every registered experiment by name, sorted (this package's modules imported first)."""
    _load()
    return dict(sorted(EXPERIMENTS.items()))


def get(name: str) -> Experiment:
    """The experiment called ``name`` (this package's modules imported first); raises
    :class:`~dpnet.errors.UnknownNameError` listing the known ones."""
    _load()
    return EXPERIMENTS[name]


def reproduce(name: str, quick: bool = False, outdir: str | Path = "reproductions") -> Report:
    """Run the experiment called ``name`` and write its report to ``outdir``: what
    ``dpnet reproduce NAME`` does, in one process."""
    return get(name).run(quick=quick, outdir=outdir)
