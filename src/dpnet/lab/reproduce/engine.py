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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from .. import report
from ..store import Run, Table, execute


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

    def draw(table: Table, quick: bool):
        t = table.where(**(where or {}))
        if seed is not None:
            t = t.where(seed=seed)
        groups = t.unique(panels) if panels else [None]
        fig, axes = report.figure(1, len(groups), figsize=(5.5 * len(groups), 4.2), squeeze=False)
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
