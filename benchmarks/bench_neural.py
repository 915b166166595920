"""Neural gradients of n agents: one vmap'd torch.func call against a loop over n module copies.

For n in {10, 20, 100} agents (``--quick``: 10 and 20; ``--agents`` picks others), minibatch 32,
the MNIST CNN of :mod:`dpnet.models` (7,194 parameters), per call (all n agents):

* ``batch``: minibatch-mean gradients. ``vmap``: :meth:`NeuralProblem.stochastic_grad` (one
  ``vmap(grad(loss))`` over the agents' parameter rows); ``loop``: n ``nn.Module`` copies, each
  ``zero_grad`` / forward / ``backward`` on its own minibatch (what one would write without
  dpnet).
* ``clipped``: per-sample gradients clipped per coordinate then averaged (DO-ADP's gradient).
  ``vmap``: the nested ``vmap(vmap(grad))`` over agents and samples; ``loop``: per agent, one
  ``vmap(grad)`` over that agent's samples (the usual single-model per-sample trick).

Agreement, checked per agent before timing, on the same samples and parameter rows:

1. In float64 (a float64 twin of the problem) vmap and loop must agree to ``F64_TOL``: this is
   the check that dpnet's batching, sample indexing and clipping are right, free of rounding.
2. In float32 (the timed precision) each side is compared with the float64 result. Exact
   agreement is not to be expected there: ReLU and max-pool are not differentiable at ties, and
   when a ReLU input lies within float32 rounding of 0, or the two largest inputs of a max-pool
   window lie within it of each other, the rounding of each implementation decides which branch
   receives the gradient. One such window moves an agent's gradient by ~1e-3 (with this seed,
   n = 10, agent 1, sample 1: two inputs of the last max-pool, 0.069703967 and 0.069703989 in
   float64, round to the same float32; float64 routes the gradient to the second, float32 here
   to the first: 7.6e-4 on agent 1). Both are valid subgradients; clipping cannot cause such
   jumps (clamping is continuous). So an agent passes when each float32 result is within
   ``F32_TOL`` of the float64 gradient, either along float64's branches or along the other
   branch of one near-tie of its minibatch (inputs within ``TIE_MARGIN`` times the float32 error
   measured at that layer; float64 is nudged across the tie and the gradient recomputed). The
   tie that explains an agent is printed; a difference no tie explains fails the check.

One intra-op thread (``torch.set_num_threads(1)``): the ratio measures batching, not parallelism.
Times are process CPU time per call (robust when other jobs share the cores; wall time printed
too), the median of ``reps`` calls after two warm-up calls. Exit status 1 when a check fails.

``--device cuda`` adds the accelerator: the same problem moved there (:meth:`Problem.to`), both
sides computed there on the same minibatch and held to the same float32-vs-float64 check (a
device's convolutions round otherwise, so its near-ties are explained the same way), and timed
by wall clock with the device synchronised (median of ``reps`` after two warm-ups); the table
gives the device's ms per call and its speed-up over the one-thread CPU vmap.

    python benchmarks/bench_neural.py [--quick] [--agents N ...] [--per-agent] [--device cuda]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpnet import models
from dpnet.problems import Clip, NeuralProblem
from dpnet.problems.stochastic import sample_indices
from dpnet.rng import Streams

BATCH = 32
AGENTS = (10, 20, 100)
QUICK_AGENTS = (10, 20)
F64_TOL = 1e-10    # vmap vs loop in float64: rounding there is ~1e-16
F32_TOL = 1e-5     # float32 vs float64 without a near-tie: measured ~1e-7 (batch), ~1e-8 (clipped)
TIE_MARGIN = 4.0   # a near-tie: within this many times the float32 error measured at the layer
CLIP = Clip(1.0, "coordinate")


class Float64Problem(NeuralProblem):
    """The same problem in float64: the reference of the agreement check."""

    dtype = torch.float64


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


def _time_on(device: torch.device, fn, reps: int) -> float:
    """Median wall seconds of ``fn`` on ``device``, synchronised, after two warm-up calls."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    for _ in range(2):
        fn()
    sync()
    out = []
    for _ in range(reps):
        w0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - w0)
    return statistics.median(out)


def _data(n: int, m: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    feats = rng.integers(0, 256, size=(n * m, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n * m)
    return feats, labels, np.arange(n * m).reshape(n, m)


def _problem(n: int, dtype: torch.dtype = torch.float32) -> NeuralProblem:
    feats, labels, parts = _data(n)
    if dtype == torch.float64:
        return Float64Problem(models.mnist_cnn(seed=0).double(), feats, labels, parts,
                              transform=lambda x: models.mnist_transform(x).double())
    return NeuralProblem(models.mnist_cnn(seed=0), feats, labels, parts,
                         transform=models.mnist_transform)


@dataclass
class Sides:
    """vmap and loop gradients of every agent, both kinds, on one problem and one minibatch."""

    problem: NeuralProblem
    X: torch.Tensor
    idx: torch.Tensor
    streams: Streams = field(default_factory=lambda: Streams(0))

    def __post_init__(self) -> None:
        p, n = self.problem, self.X.shape[0]
        self.xb, self.yb = p.batch(self.idx, np.arange(n))
        self.copies = [p.load_into(copy.deepcopy(p.model), self.X[i]) for i in range(n)]
        self.names = [name for name, _ in p.model.named_parameters()]  # the rows' order
        self.per_sample = vmap(grad(self._one_sample_loss), in_dims=(None, 0, 0))

    def _one_sample_loss(self, params, x, y):
        return nn.functional.cross_entropy(functional_call(self.problem.model, params, (x[None],)),
                                           y[None])

    def loop_batch(self) -> torch.Tensor:
        out = []
        for i, mod in enumerate(self.copies):
            mod.zero_grad()
            nn.functional.cross_entropy(mod(self.xb[i]), self.yb[i]).backward()
            out.append(torch.cat([q.grad.reshape(-1) for q in mod.parameters()]))
        return torch.stack(out)

    def loop_clipped(self) -> torch.Tensor:
        out = []
        for i in range(self.X.shape[0]):
            g = self.per_sample(self.problem.unflatten(self.X[i]), self.xb[i], self.yb[i])
            flat = torch.cat([g[name].reshape(BATCH, -1) for name in self.names], dim=1)
            out.append(CLIP.apply(flat).mean(0))
        return torch.stack(out)

    def vmap_batch(self) -> torch.Tensor:
        return self.problem.stochastic_grad(self.X, self.streams, 0, BATCH)

    def vmap_clipped(self) -> torch.Tensor:
        return self.problem.stochastic_grad(self.X, self.streams, 0, BATCH, clip=CLIP)

    def pairs(self):
        return (("batch", self.vmap_batch, self.loop_batch),
                ("clipped", self.vmap_clipped, self.loop_clipped))


# -- agreement ------------------------------------------------------------------------------
def _per_agent(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return (a.double() - b.double()).abs().amax(dim=1).numpy()


@dataclass
class Tie:
    """A near-tie in one sample's forward pass, and the float64 nudge that takes its other
    branch: ``delta`` added to the input of ``layer`` at ``index``."""

    layer: str
    index: tuple[int, ...]
    delta: float
    closeness: float   # gap / margin: smaller is closer
    text: str


def _layer_inputs(module: nn.Module, x: torch.Tensor) -> list[tuple[str, nn.Module, torch.Tensor]]:
    """Inputs of every ReLU and MaxPool2d of ``module`` on ``x`` (where a subgradient branches)."""
    seen, hooks = [], []
    for name, layer in module.named_modules():
        if isinstance(layer, nn.ReLU | nn.MaxPool2d):
            hooks.append(layer.register_forward_pre_hook(
                lambda mod, args, name=name: seen.append((name, mod, args[0].detach()))))
    try:
        with torch.no_grad():
            module(x)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _ints(v) -> int:
    return v if isinstance(v, int) else v[0]


def _relu_ties(name: str, a: torch.Tensor, margin: float) -> list[Tie]:
    """ReLU inputs within ``margin`` of 0: the nudge moves them to the other side."""
    out = []
    for pos in (a.abs() < margin).nonzero().tolist():
        v = float(a[tuple(pos)])
        out.append(Tie(name, tuple(pos), -2 * v if v else margin, abs(v) / margin,
                       f"{name} (ReLU) sample {pos[0]} channel {pos[1]}: input {v:.3g}"))
    return out


def _pool_ties(name: str, pool: nn.MaxPool2d, a: torch.Tensor, margin: float) -> list[Tie]:
    """Max-pool windows (no padding or dilation, as in dpnet's CNNs) whose two largest inputs are
    within ``margin``, the largest positive (a window of ReLU zeros sends no gradient): the nudge
    lifts the runner-up above the maximum."""
    k, st = _ints(pool.kernel_size), _ints(pool.stride)
    top = a.unfold(2, k, st).unfold(3, k, st).flatten(-2).topk(2, dim=-1)
    gap = top.values[..., 0] - top.values[..., 1]
    out = []
    for b, c, i, j in ((gap < margin) & (top.values[..., 0] > margin)).nonzero().tolist():
        g, q = float(gap[b, c, i, j]), int(top.indices[b, c, i, j, 1])
        out.append(Tie(name, (b, c, i * st + q // k, j * st + q % k), 2 * g + 1e-6 * margin,
                       g / margin, f"{name} (MaxPool2d) sample {b} channel {c}: top two inputs "
                       f"{float(top.values[b, c, i, j, 0]):.9g} apart by {g:.1e}"))
    return out


def near_ties(mod32: nn.Module, mod64: nn.Module, x32: torch.Tensor, most: int = 16) -> list[Tie]:
    """Where float32 may branch otherwise than float64 on these samples (the ``most`` closest):
    ReLU inputs near 0 and max-pool windows with a near-tie, "near" meaning within TIE_MARGIN
    times the largest float32-vs-float64 difference of that layer's inputs."""
    ties = []
    for (name, layer, a32), (_, _, a64) in zip(_layer_inputs(mod32, x32),
                                               _layer_inputs(mod64, x32.double())):
        margin = TIE_MARGIN * float((a32.double() - a64).abs().max())
        ties += (_relu_ties(name, a64, margin) if isinstance(layer, nn.ReLU)
                 else _pool_ties(name, layer, a64, margin))
    return sorted(ties, key=lambda t: t.closeness)[:most]


def _sample_grad(mod64: nn.Module, x: torch.Tensor, y: torch.Tensor,
                 tie: Tie | None = None) -> torch.Tensor:
    """Float64 gradient of one sample's loss, along the other branch of ``tie`` when given."""
    hook = None
    if tie is not None:
        def nudge(mod, args):
            bump = torch.zeros_like(args[0])
            bump[(0, *tie.index[1:])] = tie.delta
            return (args[0] + bump,)
        hook = dict(mod64.named_modules())[tie.layer].register_forward_pre_hook(nudge)
    try:
        mod64.zero_grad()
        nn.functional.cross_entropy(mod64(x[None]), y[None]).backward()
    finally:
        if hook is not None:
            hook.remove()
    return torch.cat([q.grad.reshape(-1) for q in mod64.parameters()])


def explain(got: dict[str, dict[str, torch.Tensor]], mod32: nn.Module, mod64: nn.Module,
            x32: torch.Tensor, y: torch.Tensor) -> tuple[bool, list[str]]:
    """Whether each float32 result of one agent (``got[kind][side]``) is the float64 gradient
    along float64's branches or along the other branch of one near-tie, within F32_TOL."""
    x64 = x32.double()
    base = torch.stack([_sample_grad(mod64, x64[s], y[s]) for s in range(len(y))])
    variants: list[tuple[str, torch.Tensor]] = [("float64's branches", base)]
    for tie in near_ties(mod32, mod64, x32):
        G = base.clone()
        G[tie.index[0]] = _sample_grad(mod64, x64[tie.index[0]], y[tie.index[0]], tie)
        variants.append((f"the other branch at {tie.text}", G))
    reduce = {"batch": lambda G: G.mean(0), "clipped": lambda G: CLIP.apply(G).mean(0)}
    ok, found = True, {}
    for kind, sides in got.items():
        refs = [(why, reduce[kind](G)) for why, G in variants]
        for side, g in sides.items():
            errs = [float((g.double() - r).abs().max()) for _, r in refs]
            best = int(np.argmin(errs))
            ok &= errs[best] <= F32_TOL
            why = (refs[best][0] if errs[best] <= F32_TOL
                   else "its branches or one near-tie's other branch: UNEXPLAINED")
            found.setdefault(why, []).append(f"{kind} {side} {errs[best]:.0e}")
    return ok, [f"{', '.join(what)} from float64 along {why}" for why, what in found.items()]


def check(n: int, per_agent: bool, device: torch.device | None = None
          ) -> tuple[Sides, Sides | None, bool]:
    """Both agreement checks of the module docstring for n agents (and the device's float32
    sides, when a device is given); prints them; returns the float32 sides (for timing) and
    whether every agent passed."""
    p32, p64 = _problem(n), _problem(n, torch.float64)
    X = p32.default_x0() + 0.01 * torch.randn(n, p32.dim, generator=torch.Generator().manual_seed(1))
    idx = sample_indices(Streams(0), 0, np.arange(n), p32.m, BATCH)
    s32, s64 = Sides(p32, X, idx), Sides(p64, X.double(), idx)
    on = None if device is None else Sides(p32.to(device), X.to(device), idx.to(device))
    ok, got, suspects = True, {}, set()
    for i, ((kind, v32, l32), (_, v64, l64)) in enumerate(zip(s32.pairs(), s64.pairs())):
        ref, ref_loop = v64(), l64()
        got[kind] = {"vmap": v32(), "loop": l32()}
        if on is not None:
            _, vd, ld = on.pairs()[i]
            got[kind] |= {f"vmap@{device.type}": vd().cpu(), f"loop@{device.type}": ld().cpu()}
        d64 = _per_agent(ref, ref_loop)
        d32 = np.max([_per_agent(g, ref) for g in got[kind].values()], axis=0)
        bad64, over = np.flatnonzero(d64 > F64_TOL), np.flatnonzero(d32 > F32_TOL)
        ok &= not len(bad64)
        suspects |= set(over.tolist())
        print(f"  n={n} {kind:>7}: float64 vmap vs loop max {d64.max():.1e} (<= {F64_TOL:g}"
              + (f"; FAILED at agents {bad64.tolist()}" if len(bad64) else "")
              + f"); float32 vs float64 max {d32.max():.1e}, agents over {F32_TOL:g}: "
              + (", ".join(f"{a} ({d32[a]:.1e})" for a in over) or "none"))
        if per_agent:
            print(f"    per agent, float64 vmap-loop: {' '.join(f'{v:.0e}' for v in d64)}")
            print(f"    per agent, float32 vs f64:    {' '.join(f'{v:.0e}' for v in d32)}")
    for a in sorted(suspects):
        passed, lines = explain({k: {side: g[a] for side, g in v.items()} for k, v in got.items()},
                                s32.copies[a], s64.copies[a], s32.xb[a], s32.yb[a])
        ok &= passed
        print(f"    agent {a}: " + "; ".join(lines))
    return s32, on, ok


# -- timing ---------------------------------------------------------------------------------
def bench(sides: Sides, on: Sides | None, reps: int) -> list[dict]:
    n, rows = sides.X.shape[0], []
    for i, (kind, fv, fl) in enumerate(sides.pairs()):
        cv, wv = _time(fv, reps)
        cl, wl = _time(fl, reps)
        rows.append({"n": n, "kind": kind, "vmap_ms": 1e3 * cv, "loop_ms": 1e3 * cl,
                     "ratio": cl / cv, "vmap_wall_ms": 1e3 * wv, "loop_wall_ms": 1e3 * wl})
        if on is not None:
            _, dv, dl = on.pairs()[i]
            device = on.X.device
            rows[-1] |= {"device_vmap_ms": 1e3 * _time_on(device, dv, reps),
                         "device_loop_ms": 1e3 * _time_on(device, dl, reps)}
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"n in {QUICK_AGENTS}, fewer repetitions (a smoke test)")
    ap.add_argument("--agents", type=int, nargs="+", metavar="N",
                    help=f"numbers of agents (default {AGENTS}, --quick {QUICK_AGENTS})")
    ap.add_argument("--per-agent", action="store_true", help="print every agent's differences")
    ap.add_argument("--device", default=None,
                    help="also compute and time both sides on this torch device (cuda, cuda:1)")
    args = ap.parse_args(argv)
    device = None if args.device is None else torch.device(args.device)
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        print("bench_neural: no CUDA device on this machine: --device skipped")
        device = None
    if device is not None and device.type == "cuda":
        # the loop's convolutions in IEEE float32 too, as dpnet's gradient calls hold them
        # (FlatModule.in_float32): the two sides compare at one precision
        torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(1)
    reps = 3 if args.quick else 5
    sizes = args.agents or (QUICK_AGENTS if args.quick else AGENTS)
    print(f"MNIST CNN ({sum(q.numel() for q in models.mnist_cnn().parameters())} parameters), "
          f"batch {BATCH}, 1 thread, CPU ms per call for all agents (median of {reps})")
    rows, ok = [], True
    for n in sizes:
        sides, on, passed = check(n, args.per_agent, device)
        ok &= passed
        rows += bench(sides, on, reps)
    print(f"{'n':>4} {'kind':>8} {'vmap ms':>9} {'loop ms':>9} {'loop/vmap':>10} "
          f"{'vmap wall':>10} {'loop wall':>10}")
    for r in rows:
        print(f"{r['n']:>4} {r['kind']:>8} {r['vmap_ms']:>9.1f} {r['loop_ms']:>9.1f} "
              f"{r['ratio']:>10.2f} {r['vmap_wall_ms']:>10.1f} {r['loop_wall_ms']:>10.1f}")
    print("loop/vmap > 1: the single vmap'd call is faster than the per-agent loop")
    if device is not None:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
        print(f"on {name}: wall ms per call, synchronised (median of {reps})")
        print(f"{'n':>4} {'kind':>8} {'vmap ms':>9} {'loop ms':>9} {'loop/vmap':>10} "
              f"{'CPU vmap/device vmap':>21}")
        for r in rows:
            print(f"{r['n']:>4} {r['kind']:>8} {r['device_vmap_ms']:>9.2f} "
                  f"{r['device_loop_ms']:>9.2f} {r['device_loop_ms'] / r['device_vmap_ms']:>10.2f} "
                  f"{r['vmap_ms'] / r['device_vmap_ms']:>21.1f}")
    print("agreement: " + ("every agent passed" if ok else "FAILED (see above)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
