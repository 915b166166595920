"""Noise draws on one core: the original NumPy chain, the default (compiled) path and torch.

For blocks of ``agents x width`` = 10^6 and 10^7 draws (1000 agents): nanoseconds per draw and
draws per second of ``Streams.uniform``, ``laplace`` and ``gaussian`` evaluated

* ``numpy``: the original whole-array NumPy chain, reproduced verbatim below (what
  ``dpnet.rng`` did before the compiled kernels, and what it still does with ``DPNET_NO_NUMBA=1``);
* ``default``: :class:`dpnet.rng.Streams` as shipped (numba kernels + NumPy's ``log1p``/``log``/
  ``cos`` on cache-sized chunks);
* ``torch-cpu``: ``Streams.*_tensor(..., device="cpu")``, the device path run on the CPU.

Everything runs single-threaded (``torch.set_num_threads(1)``; the kernels are serial). Times are
the thread's CPU time, best of two rounds of back-to-back calls, the implementations taking turns
(robust when other users share the cores; the wall time is printed too). The first call, which
compiles the kernels or loads them from numba's disk cache, is timed separately and excluded.
The benchmark also checks that the default path returns exactly the bits of the NumPy chain and
that torch's uniforms do too. Target: the default path at least 4x faster than the NumPy chain
per Laplace draw at 10^6 draws.

    python benchmarks/bench_noise.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from dpnet import rng
from dpnet.rng import Streams

AGENTS = 1000
WIDTHS = [1000, 10_000]         # 10^6 and 10^7 draws
REPEATS = {1000: 5, 10_000: 2}     # back-to-back calls per round (two rounds)
TARGET = 4.0                    # Laplace speed-up of the default path at 10^6 draws
PURPOSE, ITERATION = "noise_x", 3


# ---- the original chain, verbatim (the "before" of this benchmark) -----------------------------

def _old_bits(s: Streams, purpose, iteration, agents, width):
    with np.errstate(over="ignore"):
        h = np.uint64(s._seed_key) ^ np.uint64(rng.purpose_key(purpose))
        h = rng._mix(np.asarray([h], dtype=np.uint64))[0] ^ np.uint64(iteration & (2**64 - 1))
        h = rng._mix(np.asarray([h], dtype=np.uint64))
        a = rng._mix(h ^ agents.astype(np.uint64)[:, None])
        cols = np.arange(width, dtype=np.uint64)[None, :]
        return rng._mix(a ^ (cols * rng._GOLDEN))


def old_uniform(s, purpose, iteration, agents, width):
    agents = np.asarray(agents, dtype=np.int64)
    bits = _old_bits(s, purpose, iteration, agents, width)
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53


def old_laplace(s, purpose, iteration, agents, width):
    u = old_uniform(s, purpose, iteration, agents, width) - 0.5
    return -np.sign(u) * np.log1p(-2.0 * np.abs(u))


def old_gaussian(s, purpose, iteration, agents, width):
    u = old_uniform(s, purpose, iteration, agents, 2 * width)
    u1, u2 = u[:, :width], u[:, width:]
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


# ---- measurement -------------------------------------------------------------------------------

def implementations(s: Streams) -> dict:
    return {
        "numpy": {"uniform": lambda *a: old_uniform(s, *a), "laplace": lambda *a: old_laplace(s, *a),
                  "gaussian": lambda *a: old_gaussian(s, *a)},
        "default": {"uniform": s.uniform, "laplace": s.laplace, "gaussian": s.gaussian},
        "torch-cpu": {"uniform": lambda *a: s.uniform_tensor(*a, device="cpu"),
                      "laplace": lambda *a: s.laplace_tensor(*a, device="cpu"),
                      "gaussian": lambda *a: s.gaussian_tensor(*a, device="cpu")},
    }


def best_times(fns: dict, repeats: int, rounds: int = 2) -> dict:
    """{name: (CPU seconds, wall seconds)}: the fastest call of each function over ``rounds``
    rounds of ``repeats`` back-to-back calls (the steady state of drawing block after block, as
    an algorithm does). The rounds take turns, so that a change in the shared machine's load
    affects every function alike rather than whichever happened to run then."""
    cpu = {name: [] for name in fns}
    wall = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(repeats):
                c0, w0 = time.thread_time(), time.perf_counter()
                fn()
                cpu[name].append(time.thread_time() - c0)
                wall[name].append(time.perf_counter() - w0)
    return {name: (min(cpu[name]), min(wall[name])) for name in fns}


def first_call_seconds(s: Streams) -> float:
    """Compile or cache-load time of the kernels (the first draw of each kind)."""
    t0 = time.perf_counter()
    for fn in (s.uniform, s.laplace, s.gaussian, s.permutation_keys):
        fn(PURPOSE, ITERATION, np.arange(2), 3)
    return time.perf_counter() - t0


def check_bits(s: Streams, agents: np.ndarray, width: int) -> list[str]:
    """Which draws of the default path differ from the NumPy chain (an empty list: none)."""
    bad = []
    for name, old in (("uniform", old_uniform), ("laplace", old_laplace), ("gaussian", old_gaussian)):
        new = getattr(s, name)(PURPOSE, ITERATION, agents, width)
        ref = old(s, PURPOSE, ITERATION, agents, width)
        if not np.array_equal(new.view(np.int64), ref.view(np.int64)):
            bad.append(name)
    ut = s.uniform_tensor(PURPOSE, ITERATION, agents, width).numpy()
    if not np.array_equal(ut.view(np.int64), old_uniform(s, PURPOSE, ITERATION, agents, width)
                          .view(np.int64)):
        bad.append("uniform_tensor")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10^6 draws only, fewer repeats")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    s = Streams(0)
    first = first_call_seconds(s)
    agents = np.arange(AGENTS)
    bad = check_bits(s, agents, 1000)
    widths = WIDTHS[:1] if args.quick else WIDTHS
    rows, ns = [], {}
    for width in widths:
        repeats = 2 if args.quick else REPEATS[width]
        draws = AGENTS * width
        calls = {(impl, dist): (lambda fn=fn, w=width: fn(PURPOSE, ITERATION, agents, w))
                 for impl, fns in implementations(s).items() for dist, fn in fns.items()}
        for (impl, dist), (cpu, wall) in best_times(calls, repeats).items():
            ns[width, impl, dist] = cpu / draws * 1e9
            rows.append((draws, dist, impl, cpu / draws * 1e9, draws / cpu, wall / draws * 1e9))
    print(f"\n## Noise draws, one core (backend: {rng.backend()})\n")
    print("| draws | distribution | implementation | ns/draw | draws/s | speed-up vs numpy "
          "| (wall ns/draw) |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for draws, dist, impl, t_ns, rate, wall_ns in sorted(rows, key=lambda r: (r[0], r[1])):
        base = ns[draws // AGENTS, "numpy", dist]
        print(f"| 10^{round(np.log10(draws))} | {dist} | {impl} | {t_ns:.2f} | {rate:.3g} "
              f"| {base / t_ns:.1f}x | {wall_ns:.2f} |")
    print(f"\nns/draw: CPU time of the thread, best of 2 rounds of "
          f"{2 if args.quick else REPEATS[1000]} (10^6) / {REPEATS[10_000]} (10^7) back-to-back "
          f"calls; a Gaussian draw hashes two uniforms. "
          f"First call (kernel compile or cache load): {first:.2f} s.")
    ok = not bad
    print("\nbits: default path == NumPy chain, torch uniforms == NumPy uniforms: "
          + ("identical" if ok else f"DIFFERENT for {', '.join(bad)}"))
    ratio = ns[1000, "numpy", "laplace"] / ns[1000, "default", "laplace"]
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(f"target: Laplace >= {TARGET:g}x at 10^6 draws: {ratio:.1f}x ({verdict}); Gaussian "
          f"{ns[1000, 'numpy', 'gaussian'] / ns[1000, 'default', 'gaussian']:.1f}x")
    print(f"\nbench_noise: {time.perf_counter() - start:.0f} s")
    return 0 if ok and (ratio >= TARGET or rng.backend() == "numpy") else 1


if __name__ == "__main__":
    sys.exit(main())
