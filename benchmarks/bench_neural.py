"""Neural gradients of n agents: one vmap'd torch.func call against a loop over n module copies.

For n in {10, 20} agents, minibatch 32, the MNIST CNN of :mod:`dpnet.models` (7,194 parameters),
per call (all n agents):

* ``batch``: minibatch-mean gradients. ``vmap``: :meth:`NeuralProblem.stochastic_grad` (one
  ``vmap(grad(loss))`` over the agents' parameter rows); ``loop``: n ``nn.Module`` copies, each
  ``zero_grad`` / forward / ``backward`` on its own minibatch (what one would write without
  dpnet).
* ``clipped``: per-sample gradients clipped per coordinate then averaged (DO-ADP's gradient).
  ``vmap``: the nested ``vmap(vmap(grad))`` over agents and samples; ``loop``: per agent, one
  ``vmap(grad)`` over that agent's samples (the usual single-model per-sample trick).

Both sides compute on the same samples and their results are checked to agree. One intra-op
thread (``torch.set_num_threads(1)``): the ratio measures batching, not parallelism. Times are
process CPU time per call (robust when other jobs share the cores; wall time printed too), the
median of ``reps`` calls after two warm-up calls.

    python benchmarks/bench_neural.py [--quick]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpnet import models
from dpnet.problems import Clip, NeuralProblem
from dpnet.problems.stochastic import sample_indices
from dpnet.rng import Streams

BATCH = 32
AGENTS = (10, 20)


def _time(fn, reps: int) -> tuple[float, float]:
    fn()
    fn()
    cpu, wall = [], []
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def _problem(n: int) -> NeuralProblem:
    m = 200
    rng = np.random.default_rng(0)
    feats = rng.integers(0, 256, size=(n * m, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n * m)
    return NeuralProblem(models.mnist_cnn(seed=0), feats, labels, np.arange(n * m).reshape(n, m),
                         transform=models.mnist_transform)


def bench(n: int, reps: int) -> list[dict]:
    p = _problem(n)
    streams = Streams(0)
    agents = np.arange(n)
    X = p.default_x0() + 0.01 * torch.randn(n, p.dim, generator=torch.Generator().manual_seed(1))
    idx = sample_indices(streams, 0, agents, p.m, BATCH)
    xb, yb = p.batch(idx, agents)
    copies = [p.load_into(copy.deepcopy(p.model), X[i]) for i in range(n)]
    clip = Clip(1.0, "coordinate")

    def loop_batch():
        out = []
        for i, mod in enumerate(copies):
            mod.zero_grad()
            nn.functional.cross_entropy(mod(xb[i]), yb[i]).backward()
            out.append(torch.cat([q.grad.reshape(-1) for q in mod.parameters()]))
        return torch.stack(out)

    def one_sample_loss(params, x, y):
        return nn.functional.cross_entropy(functional_call(p.model, params, (x[None],)), y[None])

    per_sample = vmap(grad(one_sample_loss), in_dims=(None, 0, 0))

    def loop_clipped():
        out = []
        for i in range(n):
            g = per_sample(p.unflatten(X[i]), xb[i], yb[i])
            flat = torch.cat([g[name].reshape(BATCH, -1) for name in p._names], dim=1)
            out.append(clip.apply(flat).mean(0))
        return torch.stack(out)

    def vmap_batch():
        return p.stochastic_grad(X, streams, 0, BATCH)

    def vmap_clipped():
        return p.stochastic_grad(X, streams, 0, BATCH, clip=clip)

    torch.testing.assert_close(vmap_batch(), loop_batch(), rtol=1e-3, atol=1e-5)
    torch.testing.assert_close(vmap_clipped(), loop_clipped(), rtol=1e-3, atol=1e-6)
    rows = []
    cases = (("batch", vmap_batch, loop_batch), ("clipped", vmap_clipped, loop_clipped))
    for kind, fv, fl in cases:
        cv, wv = _time(fv, reps)
        cl, wl = _time(fl, reps)
        rows.append({"n": n, "kind": kind, "vmap_ms": 1e3 * cv, "loop_ms": 1e3 * cl,
                     "ratio": cl / cv, "vmap_wall_ms": 1e3 * wv, "loop_wall_ms": 1e3 * wl})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    reps = 3 if args.quick else 7
    print(f"MNIST CNN ({sum(q.numel() for q in models.mnist_cnn().parameters())} parameters), "
          f"batch {BATCH}, 1 thread, CPU ms per call for all agents (median of {reps})")
    print(f"{'n':>3} {'kind':>8} {'vmap ms':>9} {'loop ms':>9} {'loop/vmap':>10} "
          f"{'vmap wall':>10} {'loop wall':>10}")
    for n in AGENTS:
        for r in bench(n, reps):
            print(f"{r['n']:>3} {r['kind']:>8} {r['vmap_ms']:>9.1f} {r['loop_ms']:>9.1f} "
                  f"{r['ratio']:>10.2f} {r['vmap_wall_ms']:>10.1f} {r['loop_wall_ms']:>10.1f}",
                  flush=True)
    print("loop/vmap > 1: the single vmap'd call is faster than the per-agent loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
