"""One DP-SGD run of the leaderboard's MNIST CNN task at a given batch, length and step,
calibrated to an epsilon (delta 1e-5, PLD), or noise-free with ``--epsilon 0``: the probes behind
FINDINGS' diagnosis of the epsilon-2 CNN row. Prints the validation and test accuracy of the
agents' average last iterate and of the average of their moving averages (eq. (4) of
:class:`~dpnet.algorithms.DPSGD`, decay ``--ema``, the released model of the leaderboard's
rows). About 2.5 min on one core at B = 128, 6 epochs; 4 min at B = 256.

    DPNET_DATA=../shared/data python benchmarks/cnn_horizon_probe.py BATCH EPOCHS LR \
        [--seed 100] [--epsilon 2] [--ema 0.95]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpnet import algorithms
from dpnet.lab.compare import tasks
from dpnet.lab.compare.cnn import TASK
from dpnet.runner import run


def main(batch: int, epochs: float, lr: float, seed: int, epsilon: float, ema: float) -> None:
    t = tasks.build(TASK)
    K = math.ceil(epochs * t.m / batch)
    alg = algorithms.DPSGD(lr, 1.0 if epsilon > 0 else 0.0, clip=1.0, sampling="poisson",
                           rate=batch / t.m, ema_decay=ema)
    if epsilon > 0:
        alg = alg.calibrate(epsilon, t.problem, t.graph, K, delta=1e-5)
    start = time.time()
    res = run(alg, t.problem, t.graph, K, x0=t.x0, seed=seed, log_every=K, reference=None,
              float_bits=32)
    seconds = time.time() - start
    eps = alg.privacy(t.problem, t.graph, K, delta=1e-5).epsilon
    print(f"B={batch} epochs={epochs:g} K={K} lr={lr:g} seed={seed} "
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
    a = p.parse_args()
    main(a.batch, a.epochs, a.lr, a.seed, a.epsilon, a.ema)
