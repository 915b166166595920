"""dpnet.run against the stacked NumPy script a user would write instead, setup included.

The peer is :func:`numpy_diadsp` below: 25 lines of NDA-style NumPy (a ``scipy.sparse`` ring with
Metropolis weights, ``numpy.random.Generator.laplace`` noise, a vectorised gradient) running paper
000's DiaDSP eqs. (8)-(11) on problem (37) with 4 samples per agent. dpnet runs the same problem
and hyper-parameters through ``dpnet.run`` (graph construction and its checks, the spectral gap
DiaDSP requires, the network door, counter-based noise, and the Theorem 3 guarantee of every
agent with the gradient bound computed from the data).

Both sides are timed from the same data arrays in hand to the final iterate (graph, problem and
algorithm construction included), one thread, each size in a fresh process; dpnet logs only the
first and last iteration in the ratio column (the script computes no metrics), and the
``default cadence`` column is a second run with ``log_every="auto"`` (every iteration at K <= 500)
to show what the metrics cost. Peak memory is the growth of the peak resident set over the
process after the data were made. With noise scale 0 both implementations must end at the same
iterate (checked at every size and printed).

    python benchmarks/bench_scale.py [--quick] [--sizes N:D,N:D] [--iterations K]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = [(1000, 1000), (10_000, 10), (100_000, 10), (1_000_000, 10)]
QUICK = [(1000, 100), (10_000, 10)]
ETA, SCALE, DECAY, SAMPLES = 0.15, 0.1, 0.99, 4


def numpy_diadsp(V, u, X0, eta, scale, decay, K, seed, lam=1e-3, alpha=1.0):
    """DiaDSP (paper 000 (8)-(11)) on problem (37), stacked NumPy: what a user writes by hand."""
    import numpy as np
    import scipy.sparse as sp

    n, m, d = V.shape
    i = np.arange(n)
    W = sp.csr_array((np.full(3 * n, 1.0 / 3.0), (np.tile(i, 3), np.concatenate(
        [i, (i + 1) % n, (i - 1) % n]))), shape=(n, n))     # ring, Metropolis weights 1/3
    UV = u[:, :, None] * V
    rng = np.random.default_rng(seed)

    def grad(X):
        z = np.einsum("nmd,nd->nm", UV, X)
        g = -np.einsum("nm,nmd->nd", 1.0 / (1.0 + np.exp(z)), UV) / m
        return g + lam * alpha * 2.0 * X / (1.0 + alpha * X * X) ** 2

    x, g = X0.copy(), grad(X0)
    y = g.copy()
    for k in range(K):
        b = scale * decay ** k
        xa = x + (rng.laplace(0.0, b, x.shape) if b > 0 else 0.0)
        ya = y + (rng.laplace(0.0, b, y.shape) if b > 0 else 0.0)
        x = W @ xa - eta * y
        g_next = grad(x)
        y = W @ ya + g_next - g
        g = g_next
    return x


def dpnet_diadsp(V, u, X0, eta, scale, decay, K, seed, log_every):
    import dpnet

    problem = dpnet.problems.NonconvexLogistic(V, u)
    graph = dpnet.graphs.ring(V.shape[0])
    noise = dpnet.noise.Laplace(scale, decay=decay)
    alg = dpnet.algorithms.DiaDSP(eta, noise_x=noise, noise_y=noise)
    res = dpnet.run(alg, problem, graph, K, x0=X0, seed=seed, log_every=log_every,
                    reference=None, progress=False)
    return res


def _peak_kib() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def measure(which: str, n: int, d: int, K: int) -> dict:
    """One measurement in this process (called in a fresh child)."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    import dpnet  # noqa: F401  (imports are not the run's setup)

    rng = np.random.default_rng(0)
    V = rng.standard_normal((n, SAMPLES, d))
    u = rng.choice([-1.0, 1.0], size=(n, SAMPLES))
    X0 = rng.random((n, d))
    # warm up numba/torch kernels on a tiny instance so compilation is not charged
    dpnet_diadsp(V[:8], u[:8], X0[:8], ETA, SCALE, DECAY, 2, 0, 2)
    numpy_diadsp(V[:8], u[:8], X0[:8], ETA, SCALE, DECAY, 2, 0)
    _reset_peak()
    base = _peak_kib()
    out: dict = {"which": which, "n": n, "d": d, "K": K}
    t = time.perf_counter()
    if which == "numpy":
        x = numpy_diadsp(V, u, X0, ETA, SCALE, DECAY, K, 0)
    else:
        res = dpnet_diadsp(V, u, X0, ETA, SCALE, DECAY, K, 0,
                           log_every="auto" if which == "dpnet-auto" else K)
        x = res.x
        out["timing"] = res.timing
        out["epsilon"] = res.privacy.epsilon
    out["seconds"] = time.perf_counter() - t
    out["peak_mib"] = (_peak_kib() - base) / 1024
    if which in ("numpy", "dpnet") and n * d <= 10**7:   # the noise-free runs must agree
        a = numpy_diadsp(V, u, X0, ETA, 0.0, DECAY, 5, 0)
        b = dpnet_diadsp(V, u, X0, ETA, 0.0, DECAY, 5, 0, 5).x
        out["noise_free_diff"] = float(np.abs(a - b).max())
    out["finite"] = bool(np.isfinite(x).all())
    return out


def _child(which: str, n: int, d: int, K: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, __file__, "--child", which, str(n), str(d), str(K)],
                          capture_output=True, text=True, env=env, cwd=HERE.parent)
    if proc.returncode != 0:
        return {"which": which, "n": n, "d": d, "K": K, "error": proc.stderr.strip()[-400:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=None, help="N:D,N:D,...")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        which, n, d, K = args.child
        print(json.dumps(measure(which, int(n), int(d), int(K))))
        return 0
    sizes = QUICK if args.quick else SIZES
    if args.sizes:
        sizes = [tuple(int(v) for v in s.split(":")) for s in args.sizes.split(",")]
    K = args.iterations
    print(f"DiaDSP, problem (37) with {SAMPLES} samples/agent, ring, {K} iterations, one thread, "
          "setup included\n")
    print("| n | d | NumPy script s | dpnet s | ratio dpnet/script | of which setup / privacy s | "
          "dpnet default cadence s (metrics share) | peak MiB script / dpnet | epsilon | "
          "noise-free max diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    failed = False
    for n, d in sizes:
        rows = {w: _child(w, n, d, K) for w in ("numpy", "dpnet", "dpnet-auto")}
        bad = [r for r in rows.values() if "error" in r]
        if bad:
            print(f"| {n} | {d} | error: {bad[0]['which']}: {bad[0]['error']} |")
            failed = True
            continue
        s, p, pa = (rows[w] for w in ("numpy", "dpnet", "dpnet-auto"))
        share = pa["timing"]["metrics"] / max(pa["seconds"], 1e-12)
        print(f"| {n} | {d} | {s['seconds']:.3f} | {p['seconds']:.3f} | "
              f"**{p['seconds'] / s['seconds']:.2f}** | "
              f"{p['timing']['setup']:.3f} / {p['timing']['privacy']:.3f} | "
              f"{pa['seconds']:.3f} ({100 * share:.0f}%) | "
              f"{s['peak_mib']:.0f} / {p['peak_mib']:.0f} | {p['epsilon']:.3g} | "
              f"{p.get('noise_free_diff', float('nan')):.1e} |", flush=True)
        failed |= p.get("noise_free_diff", 0.0) > 1e-9 or not p["finite"]
    # the default cadence on a long run: about 500 logged rows, whatever K
    n, d, long_k = (10_000, 10, 2_000) if args.quick else (10_000, 10, 10_000)
    r = _child("dpnet-auto", n, d, long_k)
    if "error" in r:
        print(f"\ndefault cadence at K = {long_k}: error {r['error']}")
        return 1
    t = r["timing"]
    print(f"\ndefault cadence (log_every='auto') at n = {n}, d = {d}, K = {long_k}: "
          f"{r['seconds']:.2f} s, metrics {t['metrics']:.2f} s = "
          f"{100 * t['metrics'] / r['seconds']:.1f}% of the run, steps {t['steps']:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
