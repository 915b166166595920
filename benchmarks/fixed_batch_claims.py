"""The fixed-batch PLD rows of a published leaderboard: each row's claim against the epsilon that
the proven pair of sampling without replacement (dpnet.privacy.without_replacement) gives at the
row's own configuration and noise (issue 41).

    DPNET_DATA=../shared/data python benchmarks/fixed_batch_claims.py \
        docs/benchmark/2026-11-27b/leaderboard.csv docs/benchmark/2026-11-27d-cnn/leaderboard.csv

Prints one CSV line per DO-ADP / DP-DDA row with the ``pld`` accountant: task, algorithm,
target, claimed epsilon, proven epsilon, and the excess in per cent (a few seconds per row).
"""

from __future__ import annotations

import csv
import sys

from dpnet.lab.compare import entries
from dpnet.lab.compare.leaderboard import choice_of
from dpnet.lab.compare.tasks import build

FIXED_BATCH = ("doadp", "dp_dda")


def proven(row: dict) -> float:
    """The row's epsilon by today's account of its configuration and noise factor."""
    t = build(row["task"], None)
    e = entries.entry(row["algorithm"])
    problem, graph, _ = e.setting_for(t)
    choice = choice_of(row)
    iterations = int(choice.pop("K"))
    alg = e.build(choice, t).noise_scaled(float(row["noise_factor"]))
    return alg.privacy(problem, graph, iterations, accountant="pld",
                       **e.accountant_constants(t, "pld")).epsilon


def main(paths: list[str]) -> None:
    print("task,algorithm,target,claimed,proven,excess_percent")
    for path in paths:
        for row in csv.DictReader(open(path)):
            if (row["algorithm"] in FIXED_BATCH and row["accountant"] == "pld"
                    and row["status"] == "ok" and row["choice"] not in ("", "K=0")):
                claimed, now = float(row["certified_epsilon"]), proven(row)
                print(f"{row['task']},{row['algorithm']},{row['target_epsilon']},{claimed:.4f},"
                      f"{now:.4f},{100 * (now / claimed - 1):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
