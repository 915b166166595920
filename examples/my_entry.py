"""Benchmark your own contender: PGTC with Rand-k instead of Top-k compression.

A benchmark entry is a tuning grid, a builder (trial, task) -> the algorithm at unit noise, the
assumptions its theorem reads under the task's relation, and its default (sound) and tightest
accountants. Registered from any module, it is calibrated, tuned and ranked exactly as the
built-in ones, and only its own rows are computed (the run cache keys each run by its entry's
and task's code)::

    dpnet compare --with examples/my_entry.py --algorithms pgtc,pgtc_randk --tasks nonconvex \
        --quick --out my-leaderboard
"""

from dpnet import algorithms, compression
from dpnet.lab.compare import entries

# the same grid, mapping and accountants as the built-in PGTC entry: only the compressor differs
PGTC = entries.entry("pgtc")

entries.register(entries.Entry(
    "pgtc_randk", PGTC.grid,
    lambda t, task: algorithms.PGTC(
        t["eta"], 0.2, 0.5, 0.5, compression.RandK(max(1, task.problem.dim // 4)), 1.0, 1.0,
        q=t["q"]),
    PGTC.constants, PGTC.default, PGTC.tight,
    "as pgtc (paper 000 Theorem 3, M = R/m), with Rand-k (k = d/4) compression"))
