"""The two tested causes behind FINDINGS' "never caught down to x0.001" (2026-11-27c audit): the
record-pair audit of a published a9a row, changed in one thing each. Usage (about 70 s on one
core, from the repository root):

    DPNET_DATA=../shared/data python benchmarks/audit_causes.py

* CWZ-quantized (epsilon 2, pld): its unbiased rounding (resolution 1, post-processing, not
  credited in the account) hides the record; with the rounding replaced by the identity the
  same audit catches x0.01.
* LDP online (epsilon 2, rdp): its account charges the whole local dataset per step (no 1/m),
  so the claim is loose by about m sqrt(D); finer mutations find the factor the audit catches.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from dpnet.algorithms import cwz_quantized
from dpnet.lab.compare import audit

LEADERBOARD = Path(__file__).resolve().parents[1] / "docs/benchmark/2026-11-27b/leaderboard.csv"
RUNS = 4000


def published(algorithm: str, accountant: str, epsilon: str) -> dict:
    for r in csv.DictReader(LEADERBOARD.open()):
        if (r["task"], r["algorithm"], r["accountant"], r["target_epsilon"]) == (
                "logistic", algorithm, accountant, epsilon):
            return {**r, "target_epsilon": float(r["target_epsilon"])}
    raise SystemExit(f"no logistic/{algorithm}/{accountant}/eps={epsilon} row in {LEADERBOARD}")


def show(label: str, a: dict, start: float) -> None:
    print(f"{label}: caught at {a['caught_at']}, last mutation certifies "
          f"{a['mutated_audited_epsilon']:.3g} against {a['claimed_epsilon']:.3g} "
          f"({time.time() - start:.0f} s)", flush=True)


def main() -> None:
    start = time.time()
    row = published("cwz_quantized", "pld", "2")
    show("cwz_quantized, rounding (as published)", audit.audit_row(row, "a9a", RUNS), start)
    rounding = cwz_quantized.ProbabilisticRounding.compress
    cwz_quantized.ProbabilisticRounding.compress = lambda self, X, *args, **kwargs: X
    try:
        show("cwz_quantized, rounding replaced by the identity",
             audit.audit_row(row, "a9a", RUNS), start)
    finally:
        cwz_quantized.ProbabilisticRounding.compress = rounding
    audit.MUTATIONS = (1e-3, 1e-4, 1e-5, 1e-6)
    show("ldp_online, mutations down to x1e-6",
         audit.audit_row(published("ldp_online", "rdp", "2"), "a9a", RUNS), start)


if __name__ == "__main__":
    main()
