"""Start-up and a busy machine: import times, and the quick start's run under dpnet's thread policy
against torch's default thread count, with the machine idle and with one core kept busy.

Measured, each ``--reps`` times (min and median reported):

* ``python -c "import torch"`` and ``python -c "import dpnet"``: whole processes, wall time from
  start to exit (this checkout's ``src`` first on ``PYTHONPATH``); their difference is what
  ``import dpnet`` adds (target: at most 0.5 s);
* ``dpnet --help`` and ``dpnet list``: whole processes of the command (target: well under 2 s);
* numba's first use in a process (import, then loading the cached Laplace kernels), which is why
  :mod:`dpnet.rng` draws small totals with the NumPy chain (``_KERNELS_AFTER``);
* the README's Python quick start run (DO-ADP on 6 agents x d = 10, 100 iterations, epsilon = 1)
  and the former quick start (DiaDSP, 300 iterations, same problem), in-process: wall time of the
  ``dpnet.run`` call, after a warm-up run, with ``threads=None`` (the policy: one thread at this
  size) and with ``threads=`` torch's default count, alternated in one process.

Conditions: ``idle`` (whatever else the machine runs; its load average is printed) and ``busy``
(this script starts ``python -c "while True: pass"`` beside the measurement, as another user's
process would, and stops it afterwards). Ratios within one table come from one run.

``--sizes`` measures instead where :data:`dpnet.threads.THREADS_MIN_SIZE` comes from: DiaDSP on
NonconvexLogistic at n x d from 6 x 10 to 1000 x 1000, ms per iteration with 1 and with 2 threads
(``torch_threads``), best of 3 alternated runs, idle and busy.

    python benchmarks/bench_startup.py [--quick] [--reps R] [--sizes]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                    os.environ.get("PYTHONPATH", "")])}
ENV.pop("DPNET_THREADS", None)   # the policy itself is measured

RUNS = r"""
import json, sys, time, warnings
import torch
import dpnet
warnings.simplefilter("ignore")          # the former quick start is diagnosed: not the point here
default = torch.get_num_threads()
problem = dpnet.problems.NonconvexLogistic.random(n_agents=6, samples=200, dim=10, seed=0)
graph = dpnet.graphs.ring(6)
account = dict(accountant="pld", delta=1e-5)
doadp = dpnet.algorithms.DOADP(alpha=0.2, gamma=0.5, beta=0.5, sigma=0.379, coordinate_clip=1.0,
                               batch_size=50)
diadsp = dpnet.algorithms.DiaDSP(eta=0.15, noise_x=dpnet.noise.Laplace(scale=0.1, decay=0.9),
                                 noise_y=dpnet.noise.Laplace(scale=0.1, decay=0.9))
cases = {"quick start (DO-ADP, 100 it)": (doadp, 100, account),
         "former quick start (DiaDSP, 300 it)": (diadsp, 300, None)}
out = {"default_threads": default}
for name, (alg, K, priv) in cases.items():
    dpnet.run(alg, problem, graph, iterations=5, seed=0, privacy=priv)   # warm-up
    times = {"policy": [], "default": []}
    for _ in range(int(sys.argv[1])):
        for mode, threads in (("policy", None), ("default", default)):
            t = time.perf_counter()
            dpnet.run(alg, problem, graph, iterations=K, seed=0, privacy=priv, threads=threads)
            times[mode].append(time.perf_counter() - t)
    out[name] = times
print(json.dumps(out))
"""

NUMBA = r"""
import json, time
import numpy as np
from dpnet import rng
t = time.perf_counter(); import numba; t_import = time.perf_counter() - t
rng._KERNELS_AFTER = 0
s = rng.Streams(0)
t = time.perf_counter(); s.laplace("a", 0, np.arange(6), 10); t_first = time.perf_counter() - t
t = time.perf_counter(); s.laplace("a", 1, np.arange(6), 10); t_next = time.perf_counter() - t
rng._USE_KERNELS = False
t = time.perf_counter(); s.laplace("a", 1, np.arange(6), 10); t_numpy = time.perf_counter() - t
print(json.dumps([t_import, t_first, t_next, t_numpy]))
"""


SIZES = r"""
import sys, warnings
import dpnet
from dpnet.threads import torch_threads
warnings.simplefilter("ignore")
print("| n | d | samples | n d | ms/it 1 thread | ms/it 2 threads | 1 thread / 2 threads |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for n, d, m, K in [(6, 10, 200, 300), (100, 10, 200, 100), (100, 100, 200, 50), (300, 100, 100, 30),
                   (1000, 100, 50, 20), (1000, 1000, 20, 5)]:
    p = dpnet.problems.NonconvexLogistic.random(n_agents=n, samples=m, dim=d, seed=0)
    g = dpnet.graphs.ring(n)
    alg = dpnet.algorithms.DiaDSP(eta=0.05, noise_x=dpnet.noise.Laplace(scale=0.01, decay=0.9),
                                  noise_y=dpnet.noise.Laplace(scale=0.01, decay=0.9))
    res = {1: [], 2: []}
    for th in (1, 2, 1, 2, 1, 2):
        with torch_threads(th):
            r = dpnet.run(alg, p, g, iterations=K, seed=0, log_every=K, threads=th)
        res[th].append(r.wall_time / K * 1e3)
    a, b = min(res[1]), min(res[2])
    print(f"| {n} | {d} | {m} | {n * d} | {a:.3f} | {b:.3f} | {a / b:.2f} |", flush=True)
"""


def process_seconds(code: str, reps: int, *args: str) -> list[float]:
    """Wall time of whole ``python -c code [args]`` processes."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *args], env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


#: the ``dpnet`` command as its console script runs it
CLI = "import sys; from dpnet.cli import main; sys.exit(main(sys.argv[1:]))"


def child_json(code: str, *args: str):
    res = subprocess.run([sys.executable, "-c", code, *args], env=ENV, check=True,
                         capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def stats(xs: list[float]) -> tuple[float, float]:
    return min(xs), statistics.median(xs)


def measure(reps: int) -> dict:
    imports = {name: process_seconds(f"import {name}", reps) for name in ("torch", "dpnet")}
    imports["dpnet --help"] = process_seconds(CLI, reps, "--help")
    imports["dpnet list"] = process_seconds(CLI, reps, "list")
    numba = [child_json(NUMBA) for _ in range(max(1, reps // 2))]
    runs = child_json(RUNS, str(reps))
    return {"imports": imports, "numba": numba, "runs": runs}


def table(cond: str, m: dict, load: float) -> None:
    print(f"\n### {cond} (1-minute load average before: {load:.2f})\n")
    print("| measurement | min s | median s | ratio (min) |")
    print("|---|---:|---:|---:|")
    ti, di = stats(m["imports"]["torch"]), stats(m["imports"]["dpnet"])
    print(f"| `python -c \"import torch\"` | {ti[0]:.3f} | {ti[1]:.3f} | |")
    print(f"| `python -c \"import dpnet\"` | {di[0]:.3f} | {di[1]:.3f} | "
          f"+{di[0] - ti[0]:.3f} s over torch |")
    nb = list(zip(*m["numba"]))
    print(f"| numba: `import numba` in a process that imported dpnet | {min(nb[0]):.3f} | "
          f"{statistics.median(nb[0]):.3f} | |")
    print(f"| numba: first Laplace kernel draw (cache load), 6 x 10 | {min(nb[1]):.3f} | "
          f"{statistics.median(nb[1]):.3f} | next draw {min(nb[2]) * 1e6:.0f} us, NumPy chain "
          f"{min(nb[3]) * 1e6:.0f} us |")
    runs = m["runs"]
    for name in [k for k in runs if k != "default_threads"]:
        p, d = stats(runs[name]["policy"]), stats(runs[name]["default"])
        print(f"| {name}, thread policy (1 thread) | {p[0]:.3f} | {p[1]:.3f} | |")
        print(f"| {name}, torch default ({runs['default_threads']} threads) | {d[0]:.3f} | "
              f"{d[1]:.3f} | **{d[0] / p[0]:.1f}x** the policy's |")
    for command in ("dpnet --help", "dpnet list"):
        c = stats(m["imports"][command])
        print(f"| `{command}` (whole process) | {c[0]:.3f} | {c[1]:.3f} | "
              f"+{c[0] - ti[0]:.3f} s over torch |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 repetitions instead of 3")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--sizes", action="store_true", help="the thread-threshold sweep instead")
    args = p.parse_args(argv)
    reps = args.reps or (2 if args.quick else 3)
    start = time.perf_counter()
    if args.sizes:
        for cond in ("idle", "busy"):
            print(f"\n### {cond} (1-minute load average before: {os.getloadavg()[0]:.2f})\n",
                  flush=True)
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    if cond == "busy" else None)
            try:
                subprocess.run([sys.executable, "-c", SIZES], env=ENV, check=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
        print(f"\n({time.perf_counter() - start:.0f} s)")
        return 0
    print(f"## Start-up and busy machine ({reps} repetitions; {os.cpu_count()} cores)")
    results = {}
    for cond in ("idle", "busy"):
        load = os.getloadavg()[0]
        busy = None
        if cond == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(0.5)
        try:
            results[cond] = measure(reps)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        table(cond, results[cond], load)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    extra = min(results["idle"]["imports"]["dpnet"]) - min(results["idle"]["imports"]["torch"])
    return 0 if extra <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
