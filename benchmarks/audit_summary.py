"""The audit of the full leaderboard in one table (``docs/benchmark/audit.md``): one line per task,
algorithm and accountant, from the committed audit CSVs that together cover every row of the
leaderboard that releases more than x0. It checks that coverage and fails on a gap. Usage:

    python benchmarks/audit_summary.py LEADERBOARD.csv AUDIT.csv [AUDIT.csv ...] > audit.md

With ``--csv OUT`` first, it also writes the audited rows of the sources as one CSV (the union
of their columns, one row per audited leaderboard row, in the leaderboard's order).
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict

from dpnet.lab.compare import audit


def key(r: dict) -> tuple:
    return r["task"], r["algorithm"], r["accountant"], float(r["target_epsilon"])


def released(path: str) -> set[tuple]:
    """The leaderboard rows that release more than x0: what ``--audit-every-row`` audits."""
    return {key(r) for r in audit.sample(audit.published_rows(path), every=True)}


def audits(paths: list[str]) -> dict[tuple, dict]:
    out = {}
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                out[key(r)] = {**r, "source": path}
    return out


def _number(text: str) -> float:
    return float(text) if text not in ("", None) else math.nan


def summary(leaderboard: str, paths: list[str]) -> str:
    rows, audited = released(leaderboard), audits(paths)
    missing = sorted(rows - set(audited))
    if missing:
        raise SystemExit(f"not audited: {missing}")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for k in sorted(rows, key=lambda k: (k[0], k[1], k[2], k[3])):
        groups[k[:3]].append(audited[k])
    lines = [
        "| task | algorithm | accountant | method | epsilons | runs/world | violations | "
        "max audited / claimed | GDP estimate / claimed | power (mildest factor caught, per "
        "epsilon) |", "|" + "---|" * 10]
    for (task, alg, acc), group in groups.items():
        ratios = [_number(a["audited_epsilon"]) / _number(a["claimed_epsilon"]) for a in group]
        gdp = [_number(a.get("gdp_estimate", "")) / _number(a["claimed_epsilon"]) for a in group]
        gdp = [g for g in gdp if math.isfinite(g)]
        lines.append(
            f"| {task} | {alg} | {acc} | {group[0].get('method') or 'record pair'} | "
            + ", ".join(f"{float(a['target_epsilon']):g}" for a in group) + " | "
            + ", ".join(sorted({a["repetitions"] for a in group})) + " | "
            + str(sum(a["violated"] == "True" for a in group)) + " | "
            + f"{max(ratios):.2f} | "
            + (f"{min(gdp):.2f}-{max(gdp):.2f}" if gdp else "") + " | "
            + ", ".join(f"x{float(a['caught_at']):g}" if a["caught_at"] else "none"
                        for a in group) + " |")
    n = len(rows)
    violations = sum(audited[k]["violated"] == "True" for k in rows)
    # the Gaussian rows with a tight account (the x0.5 target): canary-audited PLD/RDP
    tight = [audited[k] for k in rows if audited[k].get("method") == "canary"
             and k[2] in ("pld", "rdp")]
    caught = sum(bool(a["caught_at"]) and float(a["caught_at"]) >= 0.5 for a in tight)
    return "\n".join([
        f"{n} rows audited, {violations} violations; x0.5 or milder caught on {caught} of the "
        f"{len(tight)} Gaussian rows with a tight (PLD or RDP) account. Sources: "
        + ", ".join(f"`{p}`" for p in paths) + ".", "", *lines, ""])


def write_rows(leaderboard: str, paths: list[str], out: str) -> None:
    audited = audits(paths)
    with open(leaderboard, newline="") as fh:
        order = [key(r) for r in csv.DictReader(fh)]
    rows = [audited[k] for k in order if k in released(leaderboard)]
    columns = list(dict.fromkeys(c for r in rows for c in r))
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns, restval="")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    args = sys.argv[1:]
    out = None
    if args[:1] == ["--csv"]:
        out, args = args[1], args[2:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    print(summary(args[0], args[1:]))
    if out:
        write_rows(args[0], args[1:], out)
