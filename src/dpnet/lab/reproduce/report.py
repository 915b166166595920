"""Reports of reproduced figures: settings, choices, data (CSV), plots (PNG), claims (markdown).

An experiment function fills a :class:`Report`; :meth:`Report.write` produces ``NAME.csv``,
``NAME.png`` (and ``NAME-<suffix>.png`` for extra figures), ``NAME.md`` and ``NAME.json``. A claim
is the paper's sentence, the measured numbers and a :class:`~dpnet.lab.reproduce.engine.Verdict`
(reproduced, not reproduced: reported, never tuned away, with its diagnosis; not applicable;
undecided).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import report
from ..report import md_escape as _md
from ..report import md_table as _md_table
from .engine import Verdict


@dataclass
class Claim:
    """The paper's sentence, the measured numbers and one of the four verdicts; a claim that is
    not reproduced carries its diagnosis (cause, counterfactual change and its verdict). ``id``:
    the claim's id in the paper's prose file (``ID/CASE`` for one case of it)."""

    text: str
    verdict: Verdict
    measured: str
    diagnosis: dict[str, str] | None = None
    id: str = ""

    @property
    def passed(self) -> bool | None:
        """True / False for reproduced / not reproduced, None for the other two."""
        return {Verdict.REPRODUCED: True, Verdict.NOT_REPRODUCED: False}.get(self.verdict)


@dataclass
class Report:
    """What one experiment reports (:meth:`write`): its name, title and paper, whether it is the quick
    variant, the settings, the choices made where the paper is silent, notes, the claims with their
    verdicts, the data rows, small tables and figures."""
    name: str
    title: str
    paper: str
    quick: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    tables: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    figures: list[tuple[str, Any, str]] = field(default_factory=list)

    # -- filling ----------------------------------------------------------------------------
    def setting(self, key: str, value: Any) -> None:
        """Record the setting ``key`` (its value shown in the report's settings list)."""
        self.settings[key] = value

    def choice(self, text: str) -> None:
        """A decision taken where the paper is silent or inconsistent."""
        self.choices.append(text)

    def note(self, text: str) -> None:
        """Add a note (a line of the report's notes)."""
        self.notes.append(text)

    def claim(self, text: str, passed: Verdict | bool | None, measured: str,
              id: str = "") -> Claim:
        """Add a claim: the paper's sentence ``text``, its verdict (``passed``: True, False, None for
        undecided, or a :class:`Verdict`) and the ``measured`` numbers; ``id`` names it in the prose file.
        Returns the claim."""
        c = Claim(text, Verdict.of(passed), measured, id=id)
        self.claims.append(c)
        return c

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Long-format data rows for NAME.csv."""
        self.rows.extend(rows)

    def table(self, caption: str, rows: list[dict[str, Any]]) -> None:
        """A small table printed in the markdown report."""
        self.tables.append((caption, rows))

    def figure(self, fig, suffix: str = "", caption: str = "") -> None:
        """Add a matplotlib figure, written as ``NAME.png`` (``NAME-<suffix>.png`` with a ``suffix``) and
        shown with its ``caption``."""
        self.figures.append((suffix, fig, caption))

    # -- output -----------------------------------------------------------------------------
    @property
    def all_passed(self) -> bool:
        """Whether no claim is not reproduced (undecided and not-applicable claims do not fail it)."""
        return all(c.passed is not False for c in self.claims)

    def write(self, outdir: str | Path) -> dict[str, Path]:
        """Write the report to ``outdir`` (created if missing): ``NAME.csv`` (the data rows, if any), the
        figures' PNGs, ``NAME.md`` and ``NAME.json`` (:meth:`summary`). Returns the paths by kind
        (``csv``, ``png``: the first figure, ``md``, ``json``)."""
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Path] = {}
        if self.rows:
            paths["csv"] = report.write_csv(self.rows, out / f"{self.name}.csv", rounded=True)
        images = []
        for suffix, fig, caption in self.figures:
            p = out / (f"{self.name}-{suffix}.png" if suffix else f"{self.name}.png")
            report.save_png(fig, p)
            images.append((p, caption))
            paths.setdefault("png", p)
        p = out / f"{self.name}.md"
        p.write_text(self._markdown(images))
        paths["md"] = p
        (out / f"{self.name}.json").write_text(json.dumps(self.summary(), indent=2, default=str))
        paths["json"] = out / f"{self.name}.json"
        return paths

    def summary(self) -> dict[str, Any]:
        """The report as JSON-able data: name, title, paper, quick, the settings and each claim (id, text,
        verdict, passed, measured, diagnosis); what :func:`write_index` reads back."""
        return {"name": self.name, "title": self.title, "paper": self.paper, "quick": self.quick,
                "settings": self.settings,
                "claims": [{"id": c.id, "text": c.text, "verdict": c.verdict.value, "passed": c.passed,
                            "measured": c.measured, "diagnosis": c.diagnosis}
                           for c in self.claims]}

    def _markdown(self, images) -> str:
        lines = [f"# {self.name}: {self.title}", "",
                 f"Paper: {self.paper}. Generated by `dpnet reproduce {self.name}"
                 f"{' --quick' if self.quick else ''}` on {_dt.date.today().isoformat()}.", ""]
        if self.quick:
            lines += ["**Quick variant**: shortened horizons and fewer seeds; numbers are indicative "
                      "only.", ""]
        counts = ", ".join(f"{sum(c.verdict is v for c in self.claims)} {v.value}"
                           for v in Verdict)
        lines += ["## Claims", "", counts + ".", "",
                  "| claim | verdict | measured |", "|---|---|---|"]
        lines += [f"| {_md(c.text)}{f' `{c.id}`' if c.id else ''} | {c.verdict.value} | "
                  f"{_md(c.measured)} |" for c in self.claims]
        lines.append("")
        diagnosed = [c for c in self.claims if c.diagnosis]
        if diagnosed:
            lines += ["## Diagnoses: cause and counterfactual of each claim not reproduced", ""]
            for c in diagnosed:
                d = c.diagnosis
                assert d is not None          # diagnosed keeps the claims with one
                lines += [f"- **{_md(c.text)}**", f"  - cause: {_md(d['cause'])}"]
                if d.get("change"):
                    lines += [f"  - counterfactual (one change: {_md(d['change'])}): the claim is "
                              f"**{d['verdict']}** there; {_md(d['measured'])}"]
                else:
                    lines += [f"  - no counterfactual yet; what would settle it: "
                              f"{_md(d.get('settle', ''))}"]
            lines.append("")
        for p, caption in images:
            lines += [f"![{caption or p.stem}]({p.name})", ""]
            if caption:
                lines += [f"*{caption}*", ""]
        for caption, rows in self.tables:
            lines += [f"### {caption}", ""] + _md_table(rows) + [""]
        lines += ["## Settings", ""]
        lines += [f"- **{k}**: {_md(report.cell(v))}" for k, v in self.settings.items()]
        if self.choices:
            lines += ["", "## Choices where the paper is silent or inconsistent", ""]
            lines += [f"- {_md(c)}" for c in self.choices]
        if self.notes:
            lines += ["", "## Notes", ""] + [f"- {_md(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"


def write_index(folder: str | Path) -> Path:
    """``README.md`` of a reproductions folder: one line per report (from its ``NAME.json``)
    with the figure it regenerates and how many of its claims reproduced, so the state of every
    paper is readable at a glance. Rewritten by every ``dpnet reproduce``."""
    folder = Path(folder)
    rows = []
    for p in sorted(folder.glob("*.json")):
        s = json.loads(p.read_text())
        if not {"name", "claims", "paper"} <= s.keys():
            continue
        verdicts = [c.get("verdict") or Verdict.of(c["passed"]).value for c in s["claims"]]
        rows.append({"report": f"[{s['name']}]({s['name']}.md)",
                     "regenerates": _figure_of(s["paper"]),
                     "variant": "--quick" if s.get("quick") else "full",
                     **{v.value: verdicts.count(v.value) for v in Verdict},
                     "diagnosed": sum(bool(c.get("diagnosis", {}) or {}) and
                                      bool((c.get("diagnosis") or {}).get("change"))
                                      for c in s["claims"]),
                     "title": s.get("title", "")})
    lines = ["# Reproductions", "",
             "Written by `dpnet reproduce NAME --out DIR` into DIR. Each report states its claims "
             "with the measured numbers, the settings, the choices made where the paper is "
             "silent, and what was run at reduced size. A claim that did not reproduce is a "
             "finding, explained in its report.", ""]
    lines += _md_table(rows)
    totals = {v.value: sum(r[v.value] for r in rows) for v in Verdict}
    lines += ["", "Over all reports: " + ", ".join(f"{n} {v}" for v, n in totals.items())
              + f"; {sum(r['diagnosed'] for r in rows)} of the {totals['not reproduced']} "
              "not-reproduced claims have a counterfactual diagnosis (the column *diagnosed*)."]
    out = folder / "README.md"
    out.write_text("\n".join(lines) + "\n")
    return out


def _figure_of(paper: str) -> str:
    """'Authors: Title (paper 001), Fig. 2(a)' -> 'paper 001, Fig. 2(a)'."""
    m = re.search(r"\((paper \d+)\),?\s*(.*)$", paper)
    return f"{m.group(1)}, {m.group(2)}".rstrip(", ") if m else paper
