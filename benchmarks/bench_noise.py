"""Noise draws on one core: the original NumPy chain, the default (compiled) path and torch.

For blocks of ``agents x width`` = 10^6 and 10^7 draws (1000 agents): nanoseconds per draw and
draws per second of ``Streams.uniform``, ``laplace`` and ``gaussian`` evaluated

* ``numpy``: the original whole-array NumPy chain, reproduced verbatim below (what
  ``dpnet.rng`` did before the compiled kernels and before it had its own ``cos(2 pi u)``; what it
  still does for uniform and Laplace draws with ``DPNET_NO_NUMBA=1``);
* ``numpy-fallback``: Gaussian draws of ``DPNET_NO_NUMBA=1`` now (the chain with dpnet's own
  cosine, :func:`dpnet.rng.cos_2pi`, evaluated by NumPy);
* ``default``: :class:`dpnet.rng.Streams` as shipped (numba kernels, the cosine included, + NumPy's
  ``log1p``/``log`` on cache-sized chunks);
* ``torch-cpu``: ``Streams.*_tensor(..., device="cpu")``, the device path run on the CPU.

Everything runs single-threaded (``torch.set_num_threads(1)``; the kernels are serial). Times are
the thread's CPU time, best of two rounds of back-to-back calls, the implementations taking turns
(robust when other users share the cores; the wall time is printed too). The first call, which
compiles the kernels or loads them from numba's disk cache, is timed separately and excluded.
The benchmark also checks that the default path returns exactly the bits of the NumPy chain for
uniform and Laplace draws, and of the NumPy fallback for Gaussian draws (whose cosine is no longer
NumPy's: how far they moved from the original chain's is printed), and that torch's uniforms are
NumPy's. Target: the default path at least 4x faster than the NumPy chain per Laplace draw and per
Gaussian draw at 10^6 draws.

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
TARGET = 4.0                    # Laplace and Gaussian speed-up of the default path, 10^6
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

def fallback(fn):
    """``fn`` run as with ``DPNET_NO_NUMBA=1`` (the NumPy chain of :mod:`dpnet.rng`)."""
    def run(*args):
        saved, rng._USE_KERNELS = rng._USE_KERNELS, False
        try:
            return fn(*args)
        finally:
            rng._USE_KERNELS = saved
    return run


def implementations(s: Streams) -> dict:
    return {
        "numpy": {"uniform": lambda *a: old_uniform(s, *a), "laplace": lambda *a: old_laplace(s, *a),
                  "gaussian": lambda *a: old_gaussian(s, *a)},
        "numpy-fallback": {"gaussian": fallback(s.gaussian)},
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
    """Which draws of the default path differ from their reference (an empty list: none): the
    NumPy chain for uniform and Laplace draws, the NumPy fallback for Gaussian draws."""
    bad = []
    for name, ref in (("uniform", old_uniform), ("laplace", old_laplace),
                      ("gaussian", lambda s, *a: fallback(s.gaussian)(*a))):
        new = getattr(s, name)(PURPOSE, ITERATION, agents, width)
        if not np.array_equal(new.view(np.int64), ref(s, PURPOSE, ITERATION, agents, width)
                              .view(np.int64)):
            bad.append(name)
    ut = s.uniform_tensor(PURPOSE, ITERATION, agents, width).numpy()
    if not np.array_equal(ut.view(np.int64), old_uniform(s, PURPOSE, ITERATION, agents, width)
                          .view(np.int64)):
        bad.append("uniform_tensor")
    return bad


def gaussian_moves(s: Streams, agents: np.ndarray, width: int) -> str:
    """How far the Gaussian draws moved from the original chain's, in ulp of the draw."""
    new = s.gaussian(PURPOSE, ITERATION, agents, width)
    old = old_gaussian(s, PURPOSE, ITERATION, agents, width)
    ulps = np.abs(new.view(np.int64) - old.view(np.int64))
    ulps[np.signbit(new) != np.signbit(old)] = np.iinfo(np.int64).max
    share = [np.mean(ulps == 0), np.mean(ulps <= 1), np.mean(ulps <= 2), np.mean(ulps >= 10)]
    return (f"{ulps.size:.0e} draws: unchanged {share[0]:.1%}, <= 1 ulp {share[1]:.1%}, "
            f"<= 2 ulp {share[2]:.1%}, >= 10 ulp {share[3]:.1%} (largest {ulps.max()} ulp, "
            f"{np.abs(new - old).max():.1e} absolute)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10^6 draws only, fewer repeats")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    # the kernels from the first draw: this benchmark measures them, not the NumPy chain that a
    # process's first 2^24 elements take (dpnet.rng._KERNELS_AFTER)
    rng._KERNELS_AFTER = 0
    start = time.perf_counter()
    s = Streams(0)
    first = first_call_seconds(s)
    agents = np.arange(AGENTS)
    bad = check_bits(s, agents, 1000)
    moves = gaussian_moves(s, agents, 1000)
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
    print("\nbits: default path == NumPy chain (uniform, Laplace) and == NumPy fallback "
          "(Gaussian), torch uniforms == NumPy uniforms: "
          + ("identical" if ok else f"DIFFERENT for {', '.join(bad)}"))
    print(f"Gaussian draws against the original chain's (its cosine is dpnet's own): {moves}")
    ratios = {dist: ns[1000, "numpy", dist] / ns[1000, "default", dist]
              for dist in ("laplace", "gaussian")}
    met = all(r >= TARGET for r in ratios.values())
    print(f"target: Laplace and Gaussian >= {TARGET:g}x at 10^6 draws: Laplace "
          f"{ratios['laplace']:.1f}x, Gaussian {ratios['gaussian']:.1f}x "
          f"({'met' if met else 'NOT met'})")
    print(f"\nbench_noise: {time.perf_counter() - start:.0f} s")
    return 0 if ok and (met or rng.backend() == "numpy") else 1


if __name__ == "__main__":
    sys.exit(main())
