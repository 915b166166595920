"""Vectorised DiaDSP against the per-agent loop of the same equations.

For n in {10, 100, 1000} agents and d in {10, 1000}: per-iteration time and peak memory of

* ``vec``: :class:`dpnet.algorithms.DiaDSP` driven through ``init``/``step`` (stacked tensors,
  sparse mixing through the network door, counter-based noise for all agents at once);
* ``loop``: ``reference.diadsp`` (``tests/reference.py``), one agent at a time in NumPy (paper
  000 eqs. (8)-(11) literally, the same noise streams).

Setting: ring graph (Metropolis weights), NonconvexLogistic with 4 samples per agent (a cheap
gradient, so the comparison is about the algorithm's own work), Laplace noise 0.1 * 0.99^k on x
and y, one thread (``torch.set_num_threads(1)``): the ratio measures vectorisation, not
parallelism. Every measurement runs in a fresh process, after a warm-up on a tiny instance.
Per-iteration time is the process's CPU time (equal to wall time for one thread on an idle
machine, and robust when others share the cores; wall time is printed too); it excludes one-time
setup (building the problem and graph; for the loop, its neighbour lists and y_0); peak memory is
the growth of the process's peak resident set (Linux ``VmHWM``, reset through
``/proc/self/clear_refs``) over the resident set before the run, measured in a separate short pass
with glibc's mmap threshold fixed at 128 KiB so that freed arrays leave the resident set: it
counts the arrays the run holds at its peak on top of the problem's data, not the allocator's
cache. Both implementations are checked to end at the same iterate.

    python benchmarks/bench_diadsp.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the per-agent oracle lives in tests/ (a test fixture, not public API)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SIZES = [(10, 10), (10, 1000), (100, 10), (100, 1000), (1000, 10), (1000, 1000)]
QUICK = [(10, 10), (100, 10), (100, 1000)]
# (vectorised iterations, loop iterations): the loop is timed over fewer at large n
ITERS = {10: (200, 40), 100: (100, 10), 1000: (30, 3)}
TARGET = (1000, 10, 20.0)       # at least 20x faster at n = 1000, d = 10


# ---- memory ------------------------------------------------------------------------------------

def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak resident-set growth (MiB) of the enclosed block."""

    def __enter__(self):
        gc.collect()
        self.base = _status_kib("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")           # reset VmHWM to the current RSS (Linux >= 4.0)
            self.exact = True
        except OSError:
            self.exact = False
        if self.base is None:           # not Linux: ru_maxrss, a peak since process start
            import resource

            self.base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self

    def __exit__(self, *exc):
        peak = _status_kib("VmHWM")
        if peak is None:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.mib = max(0, peak - self.base) / 1024.0
        return False


# ---- one measurement (child process) -----------------------------------------------------------

def _setup(n: int, d: int):
    import dpnet

    graph = dpnet.graphs.ring(n)
    problem = dpnet.problems.NonconvexLogistic.random(n, samples=4, dim=d, seed=0)
    x0 = problem.default_x0(seed=0)
    return dpnet, graph, problem, x0


ETA, SCALE, DECAY, SEED = 0.05, 0.1, 0.99, 0


def _vec(n: int, d: int, iters: int, check_at: int = 0, out: str | None = None) -> dict:
    import numpy as np

    from dpnet.algorithms.base import Context

    dpnet, graph, problem, x0 = _setup(n, d)
    nz = dpnet.noise.Laplace(SCALE, decay=DECAY)
    alg = dpnet.algorithms.DiaDSP(eta=ETA, noise_x=nz, noise_y=nz)
    rng = dpnet.rng.Streams(SEED)
    net = dpnet.Network(graph, rng=rng)
    ctx = Context(problem, net, rng)
    with PeakMemory() as mem:
        state = alg.init(ctx, x0)
        w0, c0 = time.perf_counter(), time.process_time()
        for k in range(iters):
            net.set_iteration(k)
            state = alg.step(ctx, state, k)
            if out is not None and k + 1 == check_at:
                np.save(out, state["x"].numpy())
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall": wall / iters, "cpu": cpu / iters, "mem": mem}


def _loop(n: int, d: int, iters: int, out: str | None = None) -> dict:
    import numpy as np

    import reference as ref

    _, graph, problem, x0 = _setup(n, d)
    grads = ref.local_gradients(problem)
    scale = ref.geometric_scale(SCALE, DECAY)
    X0 = x0.numpy()

    def go(K):
        return ref.diadsp(graph.W, grads, X0, ETA, K, scale, scale, seed=SEED, trajectory=False)

    with PeakMemory() as mem:
        w0, c0 = time.perf_counter(), time.process_time()
        go(0)                                   # setup only: neighbour lists, y_0
        w1, c1 = time.perf_counter(), time.process_time()
        res = go(iters)
        w2, c2 = time.perf_counter(), time.process_time()
    if out is not None:
        np.save(out, res["x"])
    # the second call repeats the setup: take it out once
    return {"wall": max((w2 - w1) - (w1 - w0), 1e-9) / iters,
            "cpu": max((c2 - c1) - (c1 - c0), 1e-9) / iters, "mem": mem}


def _mmap_threshold(nbytes: int) -> bool:
    """glibc's M_MMAP_THRESHOLD: allocations from this size are mmap-ed and returned to the OS
    on free. False where unavailable (not glibc)."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, nbytes))
    except (OSError, AttributeError):
        return False


def measure(impl: str, n: int, d: int, iters: int, check_at: int, out: str) -> dict:
    import torch

    torch.set_num_threads(1)
    run = _vec if impl == "vec" else _loop
    # warm up on a tiny instance (lazy initialisations of torch, the sparse path for n > 128)
    run(130, 2, 2) if impl == "vec" else run(3, 2, 1)
    # memory pass: with a fixed small mmap threshold every large array goes back to the OS when
    # freed, so the peak resident set follows the live arrays instead of the allocator's cache
    live = _mmap_threshold(128 * 1024)
    mem = (run(n, d, 2) if impl == "vec" else run(n, d, 1))["mem"]
    # timing pass: large arrays from the heap again (the default allocator's steady state)
    _mmap_threshold(32 * 1024 * 1024)
    r = run(n, d, iters, check_at, out) if impl == "vec" else run(n, d, iters, out)
    return {"impl": impl, "n": n, "d": d, "iters": iters, "ms": r["wall"] * 1e3,
            "cpu_ms": r["cpu"] * 1e3, "peak_mib": mem.mib, "exact_peak": mem.exact and live}


def _child(args) -> None:
    print(json.dumps(measure(args.impl, args.n, args.d, args.iters, args.check_at, args.out)))


# ---- driver ------------------------------------------------------------------------------------

def _run_child(impl: str, n: int, d: int, iters: int, check_at: int, out: str) -> dict:
    cmd = [sys.executable, __file__, "--child", impl, str(n), str(d), str(iters), str(check_at),
           out]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{impl} n={n} d={d} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n <= 100 only (a smoke test)")
    p.add_argument("--child", nargs=6, metavar=("IMPL", "N", "D", "ITERS", "CHECK_AT", "OUT"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        impl, n, d, iters, check_at, out = args.child
        ns = argparse.Namespace(impl=impl, n=int(n), d=int(d), iters=int(iters),
                                check_at=int(check_at), out=out)
        _child(ns)
        return 0

    import numpy as np

    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, d in (QUICK if args.quick else SIZES):
            k_vec, k_loop = ITERS[n]
            paths = {impl: str(Path(tmp) / f"{impl}-{n}-{d}.npy") for impl in ("vec", "loop")}
            vec = _run_child("vec", n, d, k_vec, k_loop, paths["vec"])
            loop = _run_child("loop", n, d, k_loop, k_loop, paths["loop"])
            diff = float(np.abs(np.load(paths["vec"]) - np.load(paths["loop"])).max())
            rows.append((n, d, vec, loop, diff))
            print(f"  n={n:<5d} d={d:<5d} vec {vec['cpu_ms']:9.3f} ms/it   loop "
                  f"{loop['cpu_ms']:10.3f} ms/it   x{loop['cpu_ms'] / vec['cpu_ms']:7.1f}",
                  flush=True)
    print("\n## DiaDSP: vectorised vs per-agent loop (ring, NonconvexLogistic m=4, 1 thread)\n")
    print("| n | d | vectorised ms/iter | loop ms/iter | speed-up | (wall: vec / loop ms) "
          "| vectorised peak MiB | loop peak MiB | iterations (vec/loop) | max abs x diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, d, vec, loop, diff in rows:
        print(f"| {n} | {d} | {vec['cpu_ms']:.3f} | {loop['cpu_ms']:.2f} "
              f"| {loop['cpu_ms'] / vec['cpu_ms']:.1f}x | {vec['ms']:.3f} / {loop['ms']:.2f} "
              f"| {vec['peak_mib']:.1f} | {loop['peak_mib']:.1f} | {vec['iters']}/{loop['iters']} "
              f"| {diff:.1e} |")
    print("\nms/iter: CPU time of the process per iteration (single-threaded, so wall time on an "
          "idle machine; robust to other load); wall time in brackets.")
    ok = True
    for n, d, vec, loop, diff in rows:
        if diff > 1e-9:
            ok = False
            print(f"\nMISMATCH at n={n}, d={d}: the two implementations differ by {diff:.3g}")
        if (n, d) == TARGET[:2]:
            ratio = loop["cpu_ms"] / vec["cpu_ms"]
            verdict = "met" if ratio >= TARGET[2] else "NOT met"
            print(f"\ntarget: >= {TARGET[2]:g}x at n={n}, d={d}: {ratio:.1f}x ({verdict})")
            ok = ok and ratio >= TARGET[2]
    if not all(vec["exact_peak"] for _, _, vec, _, _ in rows):
        print("\n(peak memory from ru_maxrss: /proc/self/clear_refs unavailable, an upper bound)")
    print(f"\nbench_diadsp: {time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
