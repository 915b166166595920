"""What the default metrics cost: ``Result.timing`` of ``dpnet.run`` at ``log_every="auto"``.

For each setting, one run at the default cadence and one at the cadence the runner used before
it counted records (``max(1, K // 500)``; for the neural problem also the whole training union,
the old ``metric_samples=None``). The share is metrics seconds over steps seconds
(``Result.timing``, wall time, one thread). The target: at most 10 % by default.

* ``quadratic``: DGD on the synthetic quadratic, n = 20, d = 50, K = 300 (a problem without
  records: a row is taken to cost two steps);
* ``nonconvex``: DiaDSP on the synthetic nonconvex logistic problem, n = 20, K = 300;
* ``logistic-full``: DGD on logistic regression, 20 agents x 1,600 records x 123 features
  (a9a's shape, random data), K = 300;
* ``logistic-dpsgd``: DP-SGD at rate 0.01 on the same problem, K = 400;
* ``cnn-dpsgd``: DP-SGD on the MNIST CNN, 10 agents x 2,000 random images (20,000 records, the
  issue's measurement), expected batch 256 per agent, K = 20.

    python benchmarks/bench_metrics.py [--quick]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import torch

import dpnet
from dpnet import algorithms, graphs, models, problems
from dpnet.runner import AUTO_LOG_ROWS, RunDiagnosis


def settings(quick: bool):
    rng = np.random.default_rng(0)
    K = 60 if quick else 300
    n = 20
    A = rng.normal(size=(n, 1600, 123)) / np.sqrt(123)
    b = np.where(rng.random((n, 1600)) < 0.5, -1.0, 1.0)
    logistic = problems.LogisticRegression(A, b, reg=1e-3)
    ring = graphs.ring(n)
    yield ("quadratic", algorithms.DGD(0.05), problems.Quadratic.random(n, 50, seed=0), ring, K)
    yield ("nonconvex", algorithms.DiaDSP(0.05),
           problems.NonconvexLogistic.random(n_agents=n, samples=50, dim=20, seed=0), ring, K)
    yield "logistic-full", algorithms.DGD(0.5), logistic, ring, K
    yield ("logistic-dpsgd", algorithms.DPSGD(0.5, 1.0, rate=0.01), logistic, ring,
           80 if quick else 400)
    m = 300 if quick else 2000
    X = rng.integers(0, 256, size=(10 * m, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, size=10 * m)
    parts = np.arange(10 * m).reshape(10, m)
    yield ("cnn-dpsgd", algorithms.DPSGD(0.1, 1.0, rate=min(1.0, 256 / m)),
           (lambda samples: problems.NeuralProblem(models.mnist_cnn(0), X, y, parts,
                                                   transform=models.mnist_transform,
                                                   metric_samples=samples)),
           graphs.circulant(10, offsets=(1, 2)), 6 if quick else 20)


def share(res) -> tuple[float, int]:
    t = res.timing
    return t["metrics"] / t["steps"], len(res.history["iteration"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", RunDiagnosis)
    print("| setting | K | default: rows | default: metrics / steps | before: rows | "
          "before: metrics / steps |")
    print("|---|---|---|---|---|---|")
    for name, alg, problem, graph, K in settings(args.quick):
        if callable(problem):
            now = dpnet.run(alg, problem(problems.neural.DEFAULT_METRIC_SAMPLES), graph, K,
                            reference=None)
            old = dpnet.run(alg, problem(None), graph, K, reference=None,
                            log_every=max(1, K // AUTO_LOG_ROWS))
        else:
            now = dpnet.run(alg, problem, graph, K, reference=None)
            old = dpnet.run(alg, problem, graph, K, reference=None,
                            log_every=max(1, K // AUTO_LOG_ROWS))
        (s_now, r_now), (s_old, r_old) = share(now), share(old)
        print(f"| {name} | {K} | {r_now} | {100 * s_now:.1f} % | {r_old} | {100 * s_old:.1f} % |",
              flush=True)


if __name__ == "__main__":
    main()
