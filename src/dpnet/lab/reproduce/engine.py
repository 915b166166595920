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
what would settle it. Every sentence a reader reads (claims, causes, changes, choices, notes,
titles) is in the paper's prose file, joined to the Python by id (:mod:`.prose`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from ...errors import ParameterError
from .. import report
from ..store import Run, Table, execute
from .prose import Prose


class Verdict(StrEnum):
    """One of a claim's four verdicts: reproduced, not reproduced (reported with its diagnosis, never
    tuned away), not applicable (a reading of the paper its own text rules out) or undecided (the run
    cannot tell either way)."""
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
    """Why a claim is not reproduced: its cause and change are the prose file's
    ``[diagnoses.NAME]``; ``counterfactual(run) -> run`` applies the change to every run of the
    spec (identity for runs it does not touch), and the claim's predicate is evaluated again on
    the changed runs."""

    name: str
    counterfactual: Callable[[Run], Run]
    cause: str = ""          # filled from the prose file when the spec is built
    change: str = ""


@dataclass(frozen=True)
class Check:
    """A claim of the paper: ``id`` names its text in the prose file (``[claims.ID]``);
    ``predicate(table, quick) -> (verdict, measured numbers)`` where the verdict is a bool, None
    (undecided) or a :class:`Verdict`. ``fields`` fill the text's ``{field}``s; ``case``
    qualifies the id in reports (``ID/CASE``) where one claim is checked on several cases.
    ``not_applicable`` (a ``[texts]`` snippet: the reason) marks a claim on a reading the
    paper's text rules out; it is still measured and shown."""

    id: str
    predicate: Predicate
    diagnosis: Diagnosis | None = None
    case: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    not_applicable: str | None = None
    text: str = ""           # the rest is filled from the prose file when the spec is built
    unsettled: str = ""      # for a not-reproduced claim without diagnosis: what would settle it

    @property
    def claim_id(self) -> str:
        """The claim's id in reports: ``ID``, or ``ID/CASE`` for one case of a claim checked on several."""
        return f"{self.id}/{self.case}" if self.case else self.id

    def resolved(self, prose: Prose, fields: Mapping[str, Any], spec: str) -> Check:
        """This check with its prose: text, settle, reason and diagnosis wording."""
        where = f"claim {self.claim_id} of {spec}"
        entry, f = prose.entry("claims", self.id), {**fields, **self.fields}
        d = self.diagnosis
        if d is not None:
            words = prose.entry("diagnoses", d.name)
            d = replace(d, cause=prose.format(words["cause"], f, where),
                        change=prose.format(words["change"], f, where))
        reason = self.not_applicable and prose.format(f"{{{self.not_applicable}}}", f, where)
        return replace(self, text=prose.format(entry["text"], f, where), diagnosis=d,
                       not_applicable=reason or None,
                       unsettled=prose.format(entry.get("settle", ""), f, where))


@dataclass(frozen=True)
class Spec:
    """One figure or table: experiment ``name``, its prose (title, citation, choices, notes and
    claim texts: ``[specs.NAME]`` and ``[claims.ID]`` of the paper's file, their ``{field}``s
    filled from ``fields``), ``runs(quick)``; ``figures``/``tables``: callables of (table, quick)
    returning (figure, caption[, suffix]) and (caption, rows); ``analysis``: named hooks
    ``fn(report, table, quick)`` for notes that need more than a table or plot."""

    name: str
    prose: Prose
    runs: Callable[[bool], list[Run]]
    checks: Sequence[Check] = ()
    settings: Callable[[bool], Mapping[str, Any]] | Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    figures: Sequence[Callable] = ()
    tables: Sequence[Callable] = ()
    analysis: Sequence[Callable] = ()
    title: str = field(init=False, default="")       # the rest: from the prose file
    paper: str = field(init=False, default="")
    choices: tuple[str, ...] = field(init=False, default=())
    notes: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        p, where = self.prose, f"spec {self.name}"
        entry = p.entry("specs", self.name)
        cite = p.format(entry.get("cite", ""), self.fields, where)
        checks = tuple(c.resolved(p, self.fields, self.name) for c in self.checks)
        ids = [c.claim_id for c in checks]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ParameterError("claim id", twice[0], f"unique among the checks of {self.name} "
                                 "(give each case its own Check case)")
        for k, v in {"title": p.format(entry.get("title", ""), self.fields, where),
                     "paper": ", ".join(x for x in (p.paper, cite) if x),
                     "choices": tuple(p.format(c, self.fields, f"{where}, choices {g}")
                                      for g in entry.get("choices", ())
                                      for c in p.entry("choices", g)),
                     "notes": tuple(p.format(n, self.fields, where) for n in entry.get("notes", ())),
                     "checks": checks}.items():
            object.__setattr__(self, k, v)      # frozen: the prose is resolved once, here


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
        claim = report.claim(check.text, verdict, measured, id=check.claim_id)
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
                 panels: str | None = None, floor: float | None = None) -> Callable:
    """Curves of ``y`` against ``x``, one line per value of ``hue`` (geometric mean over the
    remaining rows, or the rows of ``seed`` only), one panel per value of ``panels``; ``floor``:
    the lowest y shown (a log axis would reach down to values that are zero in floating point)."""

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
        for ax in axes[0] if floor is not None else ():
            ax.set_ylim(bottom=max(ax.get_ylim()[0], floor))
        return (fig, caption or f"{ylabel or y} against {x}", suffix)

    return draw
