"""The runs of paper 002's figures (Chen & Wang): what is computed, apart from what the specs in
:mod:`.chen_wang` claim and show about it.

m = 10 agents on a ring, w_ij = 0.3 (w_ii = -0.6; mixing matrix I + W). Algorithm 1:
``lambda_t = (t+1)^-v``, Laplace message noise ``nu_t^i = sigma0/(sqrt 2 (t+1)^varsigma_i)``,
``varsigma_i = 0.5 + 0.01 i``, all-data gradient. LDOL (17): ``gamma_t = (t+1)^-0.7``,
``lambda_t = (t+1)^-0.71``, ``varsigmachk_i = 0.7 - varsigma_i``. DOLA, DMOD (``alpha0/sqrt t``,
noise of the same decay) and PDOP (``c p^k``, noise ``M q^k``) are calibrated by their own
accountants to the largest of Algorithm 1's budgets. DSGD is noise-free.
"""

from __future__ import annotations

import functools
import math
import time
from typing import cast

import numpy as np
import torch

from ... import data, graphs, models
from ...algorithms.dgd import DSGD
from ...algorithms.dmod import DMOD
from ...algorithms.dola import DOLA
from ...algorithms.dpdo import DPDO
from ...algorithms.ldol import LDOL
from ...algorithms.ldp_online import LDPOnline
from ...errors import NonFiniteError
from ...network import Network
from ...problems.online import LogisticSamples, NeuralSamples, OnlineProblem
from ...rng import Streams
from ...runner import run
from .. import source

M_AGENTS, RADIUS, BATCH, REG = 10, 5.0, 2, 0.1 / 2       # mushrooms: N^i = 2, r^i = 0.1/N^i
VS = 0.5 + 0.01 * np.arange(1, M_AGENTS + 1)              # varsigma_i
BASELINES = ("DOLA", "DMOD", "PDOP")
CNN = {"mnist": (0.68, 0.02), "cifar10": (0.7, 0.1)}     # (v, sigma0): nu_0 = sigma0 / sqrt 2


def algorithm(method: str, v: float, sigma0: float, T: int, problem, graph, d: float, L: float,
              radius: float | None, step: float = 1.0, noise_x: float = 1.0):
    """``method`` with the paper's parameters; DOLA/DMOD/PDOP (step ``step``) calibrated to the
    largest of Algorithm 1's budgets over T (l1 bound d for Algorithm 1, l2 bound L for theirs),
    then their noise multiplied by ``noise_x`` (a counterfactual's change)."""
    a1 = LDPOnline(1.0, v, sigma0, VS)
    if method == "Algorithm 1":
        return a1
    if method == "DSGD":
        return DSGD(1.0, batch_size=problem.batch, power=v)
    if method == "LDOL":       # §IV-B(i) compares (17) with Algorithm 1 at u - varsigmachk = varsigma
        return LDOL(1.0, 0.71, 1.0, 0.7, sigma0, 0.7 - VS, radius=radius)
    target = a1.privacy(problem, graph, iterations=T, l1_gradient_bound=d).epsilon
    if method == "PDOP":
        a = DPDO.for_chen_wang(step, target, L, problem.dim, radius, iterations=T)
        return DPDO(a.c, a.p, a.q, a.M * noise_x, radius, batch_size=problem.batch)
    cls = {"DOLA": DOLA, "DMOD": DMOD}[method]
    tuned = cls(step, 0.5, 1.0, radius).calibrate(target, problem, graph, T, gradient_bound=L)
    return cls(step, 0.5, tuned.noise_scale * noise_x, radius)


def budget(alg, problem, graph, T, d, L) -> dict:
    """The run's own budget (its own accountant) and noise parameter (nu_0, mu_1 or M)."""
    if isinstance(alg, DSGD):
        return {"own_budget": math.inf, "noise": 0.0}
    noise = alg.M if isinstance(alg, DPDO) else getattr(alg, "noise_scale", None)
    return {"own_budget": alg.privacy(problem, graph, T, l1_gradient_bound=d,
                                      gradient_bound=L).epsilon,
            "noise": float(np.max(alg.sigma0)) / math.sqrt(2) if noise is None else noise}


@functools.lru_cache(maxsize=2)
def _mushrooms(root: str):
    X, y, _ = source.binary("mushrooms")
    problem = OnlineProblem(LogisticSamples(X, y, reg=REG), M_AGENTS, batch=BATCH,
                            name="mushrooms-online")
    model, n = cast(LogisticSamples, problem.model), problem.dim       # the model built above
    d = model.data_gradient_bound(1) + REG * RADIUS * n          # iterates in [-R, R]^n
    L = model.data_gradient_bound(2) + REG * RADIUS * math.sqrt(n)
    return problem, graphs.ring(M_AGENTS, weight=0.3), problem.optimum(), d, L


def mushrooms():
    """(problem, graph, theta*, l1 bound d, l2 bound L) of Fig. 1 on the current data root."""
    return _mushrooms(str(source._SOURCE["root"]))


def mushrooms_run(method: str, T: int, seed: int, every: int, step: float = 1.0,
                  noise_x: float = 1.0) -> dict:
    """One Fig. 1 run: tracking error and average objective every ``every`` iterations."""
    problem, graph, theta, d, L = mushrooms()
    alg = algorithm(method, 0.71, 0.1 * math.sqrt(2), T, problem, graph, d, L, RADIUS, step,
                    noise_x)
    res = run(alg, problem, graph, T, seed=seed, log_every=every, reference=None, metrics={
        "tracking": lambda s, k: float(((s["x"] - theta) ** 2).sum(1).mean()),
        "avg_objective": lambda s, k: float(problem.local_loss(s["x"]).mean())})
    h = res.history
    return {"iteration": h["iteration"], "tracking": h["tracking"],
            "avg_objective": h["avg_objective"], "max_abs": float(np.abs(res.x).max()),
            "step": step, **budget(alg, problem, graph, T, d, L)}


@functools.lru_cache(maxsize=2)
def images(root: str, name: str, evals: int):
    """(train set, the agents' parts, evaluation subsets of ``evals`` training / test images)."""
    train, test = source.images(name)
    parts = data.split_even(len(train.y), M_AGENTS, seed=0)
    tr = parts.reshape(-1)[np.linspace(0, parts.size - 1, min(evals, parts.size)).round()
                           .astype(int)]
    te = np.linspace(0, len(test.y) - 1, min(evals, len(test.y))).round().astype(int)
    return train, parts, {"train": (train.X[tr], train.y[tr]), "test": (test.X[te], test.y[te])}


def cnn_run(name: str, method: str, mode: str, T: int, every: int, seed: int, batch: int,
            evals: int, noise_x: float = 1.0) -> dict:
    """One CNN run: accuracy of the agents' average model on fixed evaluation subsets every
    ``every`` iterations (the network starts from the CNN of seed 0; ``seed`` draws the noise and
    the streams; ``mode`` "exact" or "window", the last 2 batches)."""
    train, parts, evalsets = images(str(source._SOURCE["root"]), name, evals)
    grey = name == "mnist"
    model = NeuralSamples(models.mnist_cnn(seed=0) if grey else models.cifar_cnn(seed=0),
                          train.X, train.y, chunk=256,
                          transform=models.mnist_transform if grey else models.cifar_transform)
    problem = OnlineProblem(model, M_AGENTS, batch=batch, pools=parts, mode=mode,
                            window=2 if mode == "window" else None,
                            population_subset=min(50, parts.shape[1]), name=f"{name}-online")
    graph, (v, sigma0), n = graphs.ring(M_AGENTS, weight=0.3), CNN[name], model.dim
    # no l1 bound without clipping: budgets per unit d = sqrt(n) G, G = 1 (noise independent of G)
    alg = algorithm(method, v, sigma0, T, problem, graph, math.sqrt(n), 1.0, None, 1.0, noise_x)
    out: dict = {"iteration": [], "train_accuracy": [], "test_accuracy": []}

    def evaluate(k, X):
        out["iteration"].append(int(k))
        for split, (fx, fy) in evalsets.items():
            acc = model.evaluate(X.mean(0, keepdim=True), fx, fy)["accuracy"][0]
            out[f"{split}_accuracy"].append(float(acc))

    start, diverged, agents = time.perf_counter(), None, math.nan
    evaluate(0, problem.default_x0())
    try:
        res = run(alg, problem, graph, T, seed=seed, log_every=T, reference=None,
                  network=Network(graph, dtype=torch.float32, rng=Streams(seed)),
                  callback=lambda k, s: evaluate(k, s["x"]) if k % every == 0 or k == T else None)
        agents = float(np.mean(model.evaluate(torch.from_numpy(res.x), *evalsets["test"])
                               ["accuracy"]))
    except NonFiniteError as err:
        diverged = int(err.iteration)
    return {**out, "agents_test_accuracy": agents, "diverged_at": diverged,
            "n_test": len(evalsets["test"][1]), "dim": n, "seconds": time.perf_counter() - start,
            **budget(alg, problem, graph, T, math.sqrt(n), 1.0)}
