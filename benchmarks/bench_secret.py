"""What secret randomness costs (issue 38): noise draws and whole runs, reproducible against secret.

Per draw, for a block of ``agents x width`` = 10^6 draws (100 agents), nanoseconds of this thread's
CPU time (best of three calls, single-threaded):

* ``reproducible``: :class:`dpnet.rng.Streams` (SplitMix64, compiled kernels) Laplace / Gaussian;
* ``secret (AES)``: :class:`dpnet.secret_rng.SecretStreams`, the same transforms of AES-256-CTR
  words (what Gaussian noise, batches and dithers use in secret mode);
* ``secret lattice``: a floating-point-safe release: Laplace, :func:`dpnet.lattice.perturb` with
  the secret word source (value rounded to the lattice, an exact discrete Laplace added on it);
  Gaussian, :func:`dpnet.lattice.perturb_gaussian` of the secret Gaussian draws (value and raised
  noise rounded to the lattice): what ``Context.perturb`` does in secret mode.

Whole runs: DiaDSP (two Laplace releases per agent and iteration), DP-SGD and DECOR (Gaussian,
Poisson batches), DO-ADP and DP-DDA (Gaussian, fixed batches of 5) on ``n`` agents with ``d``
coordinates, reproducible against secret, wall time of ``dpnet.run`` (``threads=1``), the ratio
printed.

    python benchmarks/bench_secret.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import torch

import dpnet
from dpnet import algorithms, graphs, lattice, problems
from dpnet.problems import LogisticRegression
from dpnet.rng import Streams
from dpnet.runner import RunDiagnosis
from dpnet.secret_rng import SecretStreams


def _cpu_ns(fn, draws: int, rounds: int = 3) -> float:
    fn()                                           # compile / warm
    best = np.inf
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        fn()
        best = min(best, time.thread_time_ns() - t0)
    return best / draws


def draws(agents: int, width: int) -> None:
    n = agents * width
    ids = np.arange(agents)
    plain, secret = Streams(0), SecretStreams(0)
    x = np.random.default_rng(0).normal(size=(agents, width))
    scale = np.full(agents, 0.3)
    rows = [
        ("Laplace", "reproducible", lambda: plain.laplace("noise", 1, ids, width)),
        ("Laplace", "secret (AES)", lambda: secret.laplace("noise", 1, ids, width)),
        ("Laplace", "secret lattice", lambda: lattice.perturb(x, scale, secret.words())),
        ("Gaussian", "reproducible", lambda: plain.gaussian("noise", 1, ids, width)),
        ("Gaussian", "secret (AES)", lambda: secret.gaussian("noise", 1, ids, width)),
        ("Gaussian", "secret lattice", lambda: lattice.perturb_gaussian(
            x, secret.gaussian("noise", 1, ids, width, scale=scale), scale, 1.0)),
    ]
    base = {}
    print(f"per draw, {agents} x {width} = {n:.0e} draws, one thread (CPU ns / draw)")
    print(f"{'law':<10}{'draws':<18}{'ns':>8}{'ratio':>8}")
    for law, kind, fn in rows:
        ns = _cpu_ns(fn, n)
        base.setdefault(law, ns)
        print(f"{law:<10}{kind:<18}{ns:>8.1f}{ns / base[law]:>8.2f}")


def runs(n: int, d: int, iterations: int) -> None:
    g = graphs.ring(n)
    quad = problems.from_spec({"name": "quadratic", "dim": d, "n_agents": n})
    rng = np.random.default_rng(3)
    A = rng.standard_normal((n, 50, d))
    logistic = LogisticRegression(A, np.sign(A[:, :, 0]), reg=0.05)
    cases = [
        ("diadsp (Laplace)", algorithms.from_spec(
            {"name": "diadsp", "eta": 0.05, "noise_x": {"kind": "laplace", "scale": 0.1, "decay": 0.99},
             "noise_y": {"kind": "laplace", "scale": 0.1, "decay": 0.99}}), quad, {"gradient_bound": 1.0}),
        ("dp_sgd (Gaussian)", algorithms.DPSGD(0.1, 1.0, clip=1.0, rate=0.2), logistic,
         {"delta": 1e-5}),
        ("decor (Gaussian)", algorithms.DECOR(0.1, 1.0, 0.5, clip=1.0, rate=0.2), logistic,
         {"delta": 1e-5}),
        ("doadp (Gaussian)", algorithms.DOADP(0.05, 0.4, 0.3, sigma=1.0, k=max(1, d // 10),
                                              coordinate_clip=1.0, batch_size=5), logistic,
         {"accountant": "pld", "delta": 1e-5}),
        ("dp_dda (Gaussian)", algorithms.DPDDA(1.0, sigma=1.0, clip=1.0, batch_size=5),
         logistic, {"accountant": "pld", "delta": 1e-5}),
    ]
    print(f"\nwhole runs: ring of {n} agents, d = {d}, {iterations} iterations, threads=1 "
          "(wall s, best of 2)")
    print(f"{'algorithm':<20}{'reproducible':>14}{'secret':>10}{'ratio':>8}")
    for name, alg, problem, privacy in cases:
        t = {}
        for kind in ("reproducible", "secret"):
            best = np.inf
            for _ in range(2):
                t0 = time.perf_counter()
                dpnet.run(alg, problem, g, iterations, randomness=kind, threads=1,
                          privacy=privacy, log_every=iterations, progress=False)
                best = min(best, time.perf_counter() - t0)
            t[kind] = best
        print(f"{name:<20}{t['reproducible']:>14.3f}{t['secret']:>10.3f}"
              f"{t['secret'] / t['reproducible']:>8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    # the runs are timed at one noise level for every algorithm, not calibrated to an epsilon
    warnings.filterwarnings("ignore", category=RunDiagnosis)
    if args.quick:
        draws(10, 1000)
        runs(8, 20, 20)
    else:
        draws(100, 10_000)
        runs(50, 200, 200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
