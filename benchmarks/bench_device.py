"""DiaDSP on a GPU against one CPU core at n*d = 10^8 (issue "scale and speed", GPU target >= 20x).

The same problem (37) with 4 samples per agent, ring, Laplace noise, ``dpnet.run`` with
``device="cuda"`` and with the CPU pinned to one thread: the iterations' wall time
(``Result.timing["steps"]``, after a one-iteration warm-up, CUDA synchronised), the ratio, and the
largest difference between the two runs' iterates (the noise streams give the same uniform bits
on every device, so the runs agree up to floating-point rounding of the transforms and
reductions). Without a CUDA
device it says so and exits 0: ``make bench`` stays green on CPU-only machines.

``--profile ROWS`` adds one more device run of 2 iterations under ``torch.profiler`` and prints
its costliest operators by device time and by host time (where the remaining time goes).

    python benchmarks/bench_device.py [--quick] [--n N --d D] [--iterations K] [--profile ROWS]
"""

from __future__ import annotations

import argparse
import sys


def _run(device: str, V, u, X0, K: int):
    import torch

    import dpnet

    problem = dpnet.problems.NonconvexLogistic(V, u)
    graph = dpnet.graphs.ring(V.shape[0])
    noise = dpnet.noise.Laplace(0.1, decay=0.99)
    alg = dpnet.algorithms.DiaDSP(0.15, noise_x=noise, noise_y=noise)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    dpnet.run(alg, problem, graph, 1, x0=X0, seed=0, log_every=1, reference=None,
              progress=False, device=device)            # warm-up: kernels, operators, caches
    sync()
    res = dpnet.run(alg, problem, graph, K, x0=X0, seed=0, log_every=K, reference=None,
                    progress=False, device=device)
    sync()
    return res.timing["steps"] / K, res     # the iterations alone: setup is not the target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=None)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--device", default="cuda", help="the accelerator (cpu: checks this script)")
    ap.add_argument("--profile", type=int, default=0, metavar="ROWS",
                    help="print the ROWS costliest operators of a profiled 2-iteration device run")
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_device: no CUDA device on this machine: skipped (run it where one is lent)")
        return 0
    n = args.n or (10**5 if args.quick else 10**7)
    d = args.d or 10
    K = args.iterations or (5 if args.quick else 20)
    rng = np.random.default_rng(0)
    V = rng.standard_normal((n, 4, d))
    u = rng.choice([-1.0, 1.0], size=(n, 4))
    X0 = rng.random((n, d))
    torch.set_num_threads(1)
    gpu_s, gpu = _run(args.device, V, u, X0, K)
    cpu_s, cpu = _run("cpu", V, u, X0, K)
    diff = float(np.abs(gpu.x - cpu.x).max())
    print(f"DiaDSP, problem (37), ring, n = {n}, d = {d} (n*d = {n * d:.1e}), "
          f"{torch.cuda.get_device_name() if args.device.startswith('cuda') else args.device}")
    print("| device | s per iteration | speed-up over one CPU core |")
    print("|---|---:|---:|")
    print(f"| one CPU core | {cpu_s:.4f} | 1.0 |")
    print(f"| {args.device} | {gpu_s:.5f} | **{cpu_s / gpu_s:.1f}x** |")
    print(f"max |x_gpu - x_cpu| after {K} iterations: {diff:.2e}; epsilon GPU "
          f"{gpu.privacy.epsilon:.6g}, CPU {cpu.privacy.epsilon:.6g}")
    if args.profile:
        _profile(args.device, V, u, X0, args.profile)
    return 0 if np.isfinite(diff) and diff < 1e-6 else 1


def _profile(device: str, V, u, X0, rows: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=acts) as prof:
        _run(device, V, u, X0, 2)
    table = prof.key_averages()
    if device.startswith("cuda"):
        print(table.table(sort_by="self_cuda_time_total", row_limit=rows))
    print(table.table(sort_by="self_cpu_time_total", row_limit=rows))


if __name__ == "__main__":
    sys.exit(main())
