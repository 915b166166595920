"""One DP-SGD run of the leaderboard's MNIST CNN task at a given batch, length and step,
calibrated to epsilon 2 (delta 1e-5, PLD): the probe behind FINDINGS' "a longer horizon does not
close the epsilon-2 gap". Usage (about 7 min on one core at B = 512, 12 epochs):

    DPNET_DATA=../shared/data python benchmarks/cnn_horizon_probe.py BATCH EPOCHS LR [SEED]
"""

from __future__ import annotations

import math
import sys
import time

from dpnet import algorithms
from dpnet.lab.compare import tasks
from dpnet.lab.compare.cnn import TASK
from dpnet.runner import run


def main(batch: int, epochs: float, lr: float, seed: int = 0) -> None:
    t = tasks.build(TASK)
    K = math.ceil(epochs * t.m / batch)
    alg = algorithms.DPSGD(lr, 1.0, clip=1.0, sampling="poisson", rate=batch / t.m).calibrate(
        2.0, t.problem, t.graph, K, delta=1e-5)
    start = time.time()
    res = run(alg, t.problem, t.graph, K, x0=t.x0, seed=seed, log_every=K, reference=None,
              float_bits=32)
    x = alg.released_model(res).mean(axis=0)
    eps = alg.privacy(t.problem, t.graph, K, delta=1e-5).epsilon
    print(f"B={batch} epochs={epochs:g} K={K} lr={lr:g} z={alg.noise_multiplier:.3f} "
          f"eps={eps:.4f} val={t.utility(x, 'val')['accuracy']:.4f} "
          f"test={t.utility(x, 'test')['accuracy']:.4f} run={time.time() - start:.0f}s")


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
         int(sys.argv[4]) if len(sys.argv) > 4 else 0)
