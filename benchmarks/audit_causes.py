"""The two tested causes behind FINDINGS' "never caught down to x0.001" (2026-11-27c audit): the
record-pair audit of a published a9a row, changed in one thing each. Usage (about 2 min on one
core, from the repository root):

    DPNET_DATA=../shared/data python benchmarks/audit_causes.py

* CWZ-quantized (epsilon 2, pld): its unbiased rounding (resolution 1, post-processing, not
  credited in the account) hides the record; with the rounding replaced by the identity the
  same audit catches x0.01.
* LDP online (epsilon 2, rdp): its account charges the whole local dataset per step (no 1/m),
  so the claim is loose by about m sqrt(D); finer mutations find the factor the audit catches.

It then states, for every DOLA row (its releases are identical, so ``lab/audit/reach.py``
applies as is), the strongest allowed record pair's epsilon at delta = 1e-5 at silent noise
factors x1, x0.5, x0.3 and x0.1 beside the claim and the factor the committed audit caught: no
sound audit of these pairs can catch a factor whose pair epsilon stays below the claim.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

from dpnet.algorithms import cwz_quantized
from dpnet.lab.audit.reach import sparse_laplace_pair_epsilon
from dpnet.lab.compare import audit, entries, tasks
from dpnet.lab.compare.leaderboard import choice_of
from dpnet.privacy import accountants

LEADERBOARD = Path(__file__).resolve().parents[1] / "docs/benchmark/2026-11-27b/leaderboard.csv"
AUDIT = LEADERBOARD.parents[1] / "audit.csv"
RUNS = 4000
FACTORS = (1.0, 0.5, 0.3, 0.1)


def published(algorithm: str, accountant: str, epsilon: float) -> dict:
    rows = audit.selected(audit.published_rows(LEADERBOARD), tasks=["logistic"],
                          algorithms=[algorithm], epsilons=[epsilon])
    return next(r for r in rows if r["accountant"] == accountant)


def show(label: str, a: dict, start: float) -> None:
    print(f"{label}: caught at {a['caught_at']}, last mutation certifies "
          f"{a['mutated_audited_epsilon']:.3g} against {a['claimed_epsilon']:.3g} "
          f"({time.time() - start:.0f} s)", flush=True)


def main() -> None:
    start = time.time()
    row = published("cwz_quantized", "pld", 2.0)
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
         audit.audit_row(published("ldp_online", "rdp", 2.0), "a9a", RUNS), start)


def dola_reach() -> None:
    """Per DOLA row: its calibrated releases' l1 sensitivity over scale (identical releases: the
    noise follows the step), the record's l2 shift a sqrt(D)-th of it (DOLA's l1 constant is
    sqrt(D) times its l2 one), and the pair's epsilon over the releases a record moves."""
    caught = {(r["task"], r["accountant"], float(r["target_epsilon"])): r["caught_at"]
              for r in csv.DictReader(AUDIT.open()) if r["algorithm"] == "dola"}
    print("task | accountant | claim | releases | pair epsilon at x1 / x0.5 / x0.3 / x0.1 | "
          "audit caught")
    released = audit.sample(audit.published_rows(LEADERBOARD), every=True)   # not x0
    for r in audit.selected(released, algorithms=["dola"]):
        t, e = tasks.build(r["task"]), entries.entry("dola")
        K, claim = int(choice_of(r)["K"]), r["target_epsilon"]
        _, alg = audit.calibrated(r, None, K)
        problem, graph, _ = e.setting_for(t)
        constants = e.accountant_constants(t, r["accountant"])
        facts, _ = accountants.split_constants(
            None, constants, accountants.available(alg)[r["accountant"]].options)
        # one mechanism per group of agents; the protected agent is any of them
        ratios = [m.releases[0].sensitivity / m.releases[0].scale
                  for _, m in alg.mechanism(problem, graph, K, facts)]
        ratio = max(ratios, key=lambda x: float(x.max()))
        assert ratio.max() - ratio.min() <= 1e-9 * ratio.max(), "releases not identical"
        d = problem.dim
        pair = [max(sparse_laplace_pair_epsilon(float(ratio[0]) / math.sqrt(d) / f, d,
                                                ratio.size, 1e-5).values()) for f in FACTORS]
        print(f"{r['task']} | {r['accountant']} | {claim:g} | {ratio.size} | "
              + " / ".join(f"{p:.3g}" for p in pair)
              + f" | x{caught[(r['task'], r['accountant'], claim)] or ' none'}",
              flush=True)


if __name__ == "__main__":
    main()
    dola_reach()
