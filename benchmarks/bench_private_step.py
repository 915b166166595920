"""One decentralized DP-SGD step on the MNIST CNN: dpnet against the script a user would write.

The leaderboard's CNN setting: 10 agents on a circulant graph (offsets 1, 2), 5,000 records per
agent, Poisson batches of expected size 256, per-record l2 clipping at 1, Gaussian noise of
multiplier 1, one gossip step (Metropolis weights). Images are random uint8 arrays of MNIST's
shape (the cost does not depend on their values). Per step, one thread, process CPU time:

* ``dpnet``: ``dpnet.run(DPSGD(...), ..., log_every=K)``, the difference of K = 8 and K = 2
  runs divided by 6 (setup and the first/last metrics cancel);
* ``script``: the hand-written step: per agent, its Poisson batch, ``torch.func.vmap(grad)``
  over its records, clip, sum, noise; then the half-step and ``W @ X`` (the peer to beat);
* ``non-private``: the same loop with each agent's batch-mean gradient (one backward);
* ``opacus``: ``GradSampleModule`` (hooks) in the same loop, when opacus is installed (a
  benchmark-only dependency: ``pip install opacus``).

Before timing, dpnet's clipped sum of one agent's batch is checked against the script's on the
same records (float32 tolerance). Exit status 1 when it differs.

    python benchmarks/bench_private_step.py [--reps 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

import dpnet
from dpnet import algorithms, graphs, models
from dpnet.problems import Clip, NeuralProblem
from dpnet.problems.stochastic import clipped_grad_sum, poisson_indices
from dpnet.rng import Streams

N, M, BATCH, CLIP, Z = 10, 5000, 256, 1.0, 1.0


def setting():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(N * M, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, size=N * M)
    # metrics on a 256-record sample: the two logs of each dpnet run cancel in the difference,
    # and a full pass (50,000 records) would add seconds of noise to it
    problem = NeuralProblem(models.mnist_cnn(0), X, y, np.arange(N * M).reshape(N, M),
                            transform=models.mnist_transform, metric_samples=256)
    return problem, graphs.circulant(N, offsets=(1, 2))


def dpnet_step(problem, graph, reps: int) -> float:
    alg = algorithms.DPSGD(0.1, noise_multiplier=Z, clip=CLIP, rate=BATCH / M)

    def run(K):
        t = time.process_time()
        dpnet.run(alg, problem, graph, K, log_every=K, reference=None)
        return time.process_time() - t
    run(2)
    return statistics.median((run(8) - run(2)) / 6 for _ in range(reps))


class Script:
    """What a user writes: a loop over agents, vmap(grad) over each agent's records."""

    def __init__(self, problem, graph, private: bool) -> None:
        self.model, self.private = problem.model, private
        self.W = torch.as_tensor(graph.sparse("W").toarray(), dtype=torch.float32)
        self.params = [{k: v.detach().clone() for k, v in problem.model.named_parameters()}
                       for _ in range(N)]
        self.X = problem.features
        self.y = problem.labels
        self.rng = np.random.default_rng(1)
        self.per_sample = vmap(grad(self.loss_one), in_dims=(None, 0, 0))
        self.batch_grad = grad(self.loss_batch)

    def loss_one(self, p, x, y):
        return nn.functional.cross_entropy(functional_call(self.model, p, (x[None],)), y[None])

    def loss_batch(self, p, x, y):
        return nn.functional.cross_entropy(functional_call(self.model, p, (x,)), y,
                                           reduction="sum")

    def clipped_sum(self, p, x, y):
        g = self.per_sample(p, x, y)
        flat = torch.cat([v.reshape(v.shape[0], -1) for v in g.values()], 1)
        factor = torch.clamp(CLIP / flat.norm(dim=1).clamp_min(1e-12), max=1.0)
        return factor @ flat

    def step(self) -> None:
        rows = []
        for i in range(N):
            take = np.flatnonzero(self.rng.random(M) < BATCH / M) + i * M
            x = models.mnist_transform(self.X[take])
            y = self.y[take]
            p = self.params[i]
            if self.private:
                g = self.clipped_sum(p, x, y)
                g = (g + Z * CLIP * torch.randn_like(g)) / BATCH
            else:
                gd = self.batch_grad(p, x, y)
                g = torch.cat([v.reshape(-1) for v in gd.values()]) / BATCH
            flat = torch.cat([v.reshape(-1) for v in p.values()])
            rows.append(flat - 0.1 * g)
        mixed = self.W @ torch.stack(rows)
        for i in range(N):
            o = 0
            for v in self.params[i].values():
                v.copy_(mixed[i, o:o + v.numel()].reshape(v.shape))
                o += v.numel()


def opacus_step(problem, graph):
    try:
        from opacus import GradSampleModule
    except ImportError:
        return None
    import copy

    W = torch.as_tensor(graph.sparse("W").toarray(), dtype=torch.float32)
    mods = [GradSampleModule(copy.deepcopy(problem.model)) for _ in range(N)]
    rng = np.random.default_rng(2)

    def step():
        rows = []
        for i, mod in enumerate(mods):
            take = np.flatnonzero(rng.random(M) < BATCH / M) + i * M
            x = models.mnist_transform(problem.features[take])
            mod.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(mod(x), problem.labels[take], reduction="sum").backward()
            gs = torch.cat([p.grad_sample.reshape(len(take), -1) for p in mod.parameters()], 1)
            factor = torch.clamp(CLIP / gs.norm(dim=1).clamp_min(1e-12), max=1.0)
            g = (factor @ gs + Z * CLIP * torch.randn(gs.shape[1])) / BATCH
            flat = torch.cat([p.detach().reshape(-1) for p in mod.parameters()])
            rows.append(flat - 0.1 * g)
        mixed = W @ torch.stack(rows)
        with torch.no_grad():
            for i, mod in enumerate(mods):
                o = 0
                for p in mod.parameters():
                    p.copy_(mixed[i, o:o + p.numel()].reshape(p.shape))
                    o += p.numel()
    return step


def timed(step, reps: int) -> float:
    step()
    out = []
    for _ in range(reps):
        t = time.process_time()
        step()
        out.append(time.process_time() - t)
    return statistics.median(out)


def ghost_norm_costs(model: nn.Module, input_shape: tuple[int, ...]) -> list[tuple[str, int, int]]:
    """Per layer, the multiplications per record of its per-record gradient norm, two ways.

    A layer with T output positions (a convolution's output pixels, 1 for a linear layer), input
    rows a_t of width d (a convolution's unfolded patch) and output gradients g_t of width p:
    materialising the per-record gradient sum_t a_t g_t^T costs T p d; the ghost norm (Li et al.
    2021) sum_{t,s} (a_t . a_s)(g_t . g_s) costs T^2 (p + d) for its two Gram matrices. The mixed
    rule of Bu, Mao & Xu (2022) takes the ghost norm where it is the cheaper (their memory form:
    2 T^2 < p d).
    """
    rows: list[tuple[str, int, int]] = []

    def hook(mod, inputs, out):
        if isinstance(mod, nn.Conv2d):
            T = out.shape[-1] * out.shape[-2]
            d = mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
        else:
            T, d = 1, mod.in_features
        p = out.shape[1]
        rows.append((f"{type(mod).__name__} {d}x{p}, T={T}", T * p * d, T * T * (p + d)))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(torch.zeros((1, *input_shape)))
    for h in handles:
        h.remove()
    return rows


def agree(problem) -> float:
    """dpnet's clipped sum of agent 0's first Poisson batch against the script's."""
    idx, inc = poisson_indices(Streams(0), 0, np.arange(N), M, BATCH / M)
    X = problem.default_x0()
    ours = clipped_grad_sum(problem, X, idx, inc, Clip(CLIP, "l2"), np.arange(N))[0]
    s = Script(problem, graphs.circulant(N, offsets=(1, 2)), True)
    take = idx[0][inc[0]]
    theirs = s.clipped_sum(s.params[0], models.mnist_transform(problem.features[take]),
                           problem.labels[take])
    return float((ours - theirs).abs().max() / theirs.abs().max())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="two repetitions (make bench --quick)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 2
    torch.set_num_threads(1)
    torch.manual_seed(0)
    problem, graph = setting()
    diff = agree(problem)
    print(f"agreement of one agent's clipped sum (relative max diff): {diff:.1e}")
    if diff > 1e-5:
        print("FAILED: dpnet's clipped sum differs from the script's")
        return 1
    times = {"dpnet DPSGD": dpnet_step(problem, graph, args.reps),
             "script: vmap(grad) per agent": timed(Script(problem, graph, True).step, args.reps),
             "non-private batch gradient": timed(Script(problem, graph, False).step, args.reps)}
    op = opacus_step(problem, graph)
    if op is not None:
        times["opacus GradSampleModule"] = timed(op, args.reps)
    print("\nPer-record gradient norm, multiplications per record by layer (the mixed ghost rule"
          " picks the smaller):\n\n| layer | materialise T p d | ghost norm T^2 (p + d) | cheaper |"
          "\n|---|---:|---:|---|")
    for name, mat, ghost in ghost_norm_costs(problem.model, (1, 28, 28)):
        print(f"| {name} | {mat:,} | {ghost:,} | {'ghost' if ghost < mat else 'materialise'} |")
    base = times["script: vmap(grad) per agent"]
    print("\n| implementation | ms per step | ratio to the script |\n|---|---:|---:|")
    for name, t in times.items():
        print(f"| {name} | {1000 * t:,.0f} | {t / base:.2f} |")
    print(f"\ndpnet / non-private: {times['dpnet DPSGD'] / times['non-private batch gradient']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
