"""One DP-SGD run of the leaderboard's MNIST CNN task at a given batch, length and step,
calibrated to an epsilon (delta 1e-5, PLD), or noise-free with ``--epsilon 0``: the probes behind
FINDINGS' diagnosis of the epsilon-2 CNN row. Prints the validation and test accuracy of the
agents' average last iterate and of the average of their moving averages (eq. (4) of
:class:`~dpnet.algorithms.DPSGD`, decay ``--ema``, the released model of the leaderboard's
rows). About 2.5 min on one core at B = 128, 6 epochs; 4 min at B = 256.

``--momentum MU`` and ``--cosine`` try the two optimiser changes a practitioner tries next, which
dpnet's DPSGD does not offer (both post-process the same Gaussian releases, so the account is
unchanged): heavy-ball momentum ``v_k = MU v_{k-1} + g~_k`` in place of ``g~_k`` in (2), and the
step ``lr (1 + cos(pi k / K)) / 2``.

    DPNET_DATA=../shared/data python benchmarks/cnn_horizon_probe.py BATCH EPOCHS LR \
        [--seed 100] [--epsilon 2] [--ema 0.95] [--momentum 0.9] [--cosine]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from dpnet import algorithms
from dpnet.lab.compare import tasks
from dpnet.lab.compare.cnn import TASK
from dpnet.problems.stochastic import clipped_grad_sum
from dpnet.runner import run


class ProbeSGD(algorithms.DPSGD):
    """DPSGD whose step (2) uses heavy-ball momentum and a cosine schedule: the probe's
    optimiser, not a library algorithm."""

    def __init__(self, *args, momentum: float, cosine: bool, horizon: int, **kw) -> None:
        super().__init__(*args, **kw)
        self.momentum, self.cosine, self.horizon = momentum, cosine, horizon

    def init(self, ctx, x0):
        return {**super().init(ctx, x0), "v": torch.zeros_like(x0)}

    def step(self, ctx, state, k):
        # (1) and (3)-(4) are DPSGD's: its step at lr_k on v_k / lr_k equals x - lr_k v_k
        lr_k = self.lr * ((1 + math.cos(math.pi * k / self.horizon)) / 2 if self.cosine else 1)
        x = state["x"]
        idx, weights, b = self._batch(ctx, k)
        total = clipped_grad_sum(ctx.problem, x, idx, weights, self.clip, ctx.agents)
        v = self.momentum * state["v"] + (total + self.step_noise(ctx, k).to(x.dtype)) / b
        x_next = ctx.net.mix(ctx.net.exchange(x - lr_k * v, "x"))
        out = {"x": x_next, "v": v}
        if self.ema_decay:
            out["x_ema"] = self.ema_decay * state["x_ema"] + (1 - self.ema_decay) * x_next
        return out


def main(batch: int, epochs: float, lr: float, seed: int, epsilon: float, ema: float,
         momentum: float = 0.0, cosine: bool = False) -> None:
    t = tasks.build(TASK)
    K = math.ceil(epochs * t.m / batch)
    kw = dict(clip=1.0, sampling="poisson", rate=batch / t.m, ema_decay=ema)
    z = 1.0 if epsilon > 0 else 0.0
    alg = (ProbeSGD(lr, z, momentum=momentum, cosine=cosine, horizon=K, **kw)
           if momentum or cosine else algorithms.DPSGD(lr, z, **kw))
    if epsilon > 0:
        alg = alg.calibrate(epsilon, t.problem, t.graph, K, delta=1e-5)
    start = time.time()
    res = run(alg, t.problem, t.graph, K, x0=t.x0, seed=seed, log_every=K, reference=None,
              float_bits=32)
    seconds = time.time() - start
    eps = alg.privacy(t.problem, t.graph, K, delta=1e-5).epsilon
    print(f"B={batch} epochs={epochs:g} K={K} lr={lr:g} momentum={momentum:g} "
          f"cosine={cosine} seed={seed} "
          f"z={alg.noise_multiplier:.3f} eps={eps:.4f} run={seconds:.0f}s")
    models = {"last iterate": np.asarray(res.x)}
    if ema:
        models[f"moving average {ema:g}"] = alg.released_model(res)
    for name, x in models.items():
        xbar = x.mean(axis=0)
        print(f"  {name:22s} val={t.utility(xbar, 'val')['accuracy']:.4f} "
              f"test={t.utility(xbar, 'test')['accuracy']:.4f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("batch", type=int)
    p.add_argument("epochs", type=float)
    p.add_argument("lr", type=float)
    p.add_argument("--seed", type=int, default=100, help="100: the search's tuning seed")
    p.add_argument("--epsilon", type=float, default=2.0, help="0: noise-free (clipped)")
    p.add_argument("--ema", type=float, default=0.95, help="0: the last iterate only")
    p.add_argument("--momentum", type=float, default=0.0, help="heavy-ball momentum (probe)")
    p.add_argument("--cosine", action="store_true", help="cosine step decay to 0 (probe)")
    a = p.parse_args()
    main(a.batch, a.epochs, a.lr, a.seed, a.epsilon, a.ema, a.momentum, a.cosine)
