"""``dpnet audit``'s work: audit registered targets and write their reports and the summary table;
or run the eavesdropper lab. The command line only parses and prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import ParameterError
from . import attacks
from .engine import TARGETS, AuditResult, audit, available_targets, table, write_report


def listing() -> str:
    """The targets (with what each needs or documents) and the attack scenarios."""
    lines = []
    for name, t in TARGETS.items():
        flag = "" if t.available else f"  [needs {t.requires}]"
        known = "  [documents an accounting failure]" if t.expected_violation else ""
        lines.append(f"{name}{flag}{known}\n    {t.note}")
    lines.append("attack scenarios: " + ", ".join(attacks.SCENARIOS))
    return "\n".join(lines)


def attack_lab(names: Sequence[str], iterations: int, seed: int, out: Path) -> tuple[str, Path, Path]:
    """(table, markdown, png) of the reconstruction scenarios ``names`` (empty: all)."""
    chosen = "all" if not names or list(names) == ["all"] else list(names)
    results = attacks.lab(chosen, iterations=iterations, seed=seed)
    md, png = attacks.write_lab_report(results, out)
    return attacks.lab_table(results), md, png


def audit_targets(names: Sequence[str], out: Path, repetitions: int | None, seed: int,
                  confidence: float, noise_factor: float, command: str,
                  log: Callable[[str], None] = lambda line: None) -> tuple[list[AuditResult], Path]:
    """Audit each target (``["all"]``: every available one), write ``NAME.md``/``NAME.png`` per
    target and ``audit.md`` with the table; returns the results and the summary's path."""
    if not names:
        raise ParameterError("names", None, "audit target names or 'all' (dpnet audit --list)")
    chosen = available_targets() if list(names) == ["all"] else list(names)
    results = []
    for name in chosen:
        r = audit(name, repetitions=repetitions, seed=seed, confidence=confidence,
                  noise_factor=noise_factor)
        write_report(r, out)
        results.append(r)
        log(f"{name}: audited eps >= {r.epsilon:.4g}, claimed {r.claimed:.4g} "
            f"({'VIOLATION' if r.violated else 'ok'}, {r.wall_time:.1f} s)")
    summary = out / "audit.md"
    notes = [f"- {r.name}: {TARGETS[r.name].expected_violation or TARGETS[r.name].note}"
             for r in results]
    summary.write_text("\n".join(["# Privacy audits", "", f"Regenerate: `{command}`", "",
                                  f"Lower bounds hold with {confidence:.0%} confidence each.",
                                  "", table(results), "", *notes, ""]))
    return results, summary


def unexpected_violations(results: Sequence[AuditResult], noise_factor: float) -> list[str]:
    """Targets whose audited bound exceeds an unmutated claim that no finding documents."""
    return [r.name for r in results if r.violated and noise_factor == 1
            and not TARGETS[r.name].expected_violation]
