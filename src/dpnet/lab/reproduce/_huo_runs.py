"""The runs of paper 001's figures (Huo et al., DO-ADP): what is computed, apart from what the
specs in :mod:`.huo` claim and show about it.

Logistic regression (Figs. 2-3): ``f_i(x) = (1/q) sum_j log(1 + exp(-b_j a_j^T x)) +
||x||^2/(2q)`` over n = 20 agents on the circulant graph (i, i +- 1, 2, 3 mod n), W = I - L/7,
x_0 = 0, T = epochs x q single-sample steps; DO-ADP (Algorithm 1) with (alpha, gamma, beta) =
(0.001, 0.05, 0.15), per-coordinate clipping at G/sqrt(d) (Assumption 2), sigma by Theorem 1;
the baselines DPDO, DP-DDA and CPGT each by its own accountant, with the public bound
R = sqrt(2 q log 2) >= ||x*|| where a method needs one. The MNIST CNN (Fig. 4, Table II): DO-ADP
with (0.01, 0.05, 0.15), minibatch B, sigma by dp-accounting's PLD at delta = 1e-5.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

from ... import checkpoints, graphs
from ...algorithms.doadp import DOADP
from ...algorithms.dpdda import DPDDA
from ...algorithms.dpdo import DPDO
from ...algorithms.pgtc import PGTC
from ...compression import TopK
from ...errors import ParameterError
from ...network import Network
from ...privacy import huo
from ...problems import LogisticRegression
from ...problems.base import minimize_global
from ...rng import Streams
from ...runner import run
from .. import source
from ..store import run_folder

N_AGENTS, IOTA, G_LR, DELTA0, DELTA, CNN_DELTA0 = 20, 7.0, 1.0, 1e-5, 1e-5, 1e-7
LR_STEPS: dict[str, Any] = dict(alpha=0.001, gamma=0.05, beta=0.15)
CNN_STEPS: dict[str, Any] = dict(alpha=0.01, gamma=0.05, beta=0.15)
CNN_RATES = {"100%": (1.0, 1.0), "80%": (0.8, 1.0), "40%": (1.0, 0.4), "32%": (0.8, 0.4)}
ROOT = lambda: str(source._SOURCE["root"])  # noqa: E731  (the data root keys the setup caches)


def graph() -> graphs.Graph:
    return graphs.circulant(N_AGENTS, offsets=(1, 2, 3), weights="laplacian", iota=IOTA)


def x_star_bound(q: int) -> float:
    """A public bound on ||x*||: f(x*) <= f(0) = log 2 and f(x) >= ||x||^2/(2q)."""
    return math.sqrt(2 * q * math.log(2))


@functools.lru_cache(maxsize=256)
def doadp_sigma(epsilon: float, mech: huo.DOADPStep, accountant: str = "theorem1",
                delta0: float = DELTA0) -> tuple[float, str]:
    """``"theorem1"``: (7) where Theorem 1's hypotheses hold, else the smallest sigma its proof's
    accountant (delta_hat = sqrt(S)) certifies; ``"proof"``: that accountant at DELTA;
    ``"pld"``/``"rdp"``: dp-accounting at DELTA; ``"(7)"``: the formula whatever its other
    hypotheses."""
    # the paper's protocol counts the activation as subsampling (Lemma 4): reproduced as is,
    # though an eavesdropper sees who is active (dpnet's accountants default to "visible")
    if accountant in ("pld", "rdp"):
        return (huo.calibrate_sigma(epsilon, mech, accountant, delta=DELTA, rel_tol=1e-3,
                                    activation="hidden"),
                f"{accountant.upper()} accountant at delta = {DELTA:g}")
    if accountant == "(7)":
        return huo.theorem1_sigma(epsilon, delta0, mech), "formula (7) (outside Theorem 1)"
    if accountant == "proof":
        return huo.calibrate_sigma(epsilon, mech, "proof", delta0, DELTA), "proof accountant"
    try:
        return huo.calibrate_sigma(epsilon, mech, "theorem1", delta0), "Theorem 1 (7)"
    except ParameterError:
        return huo.calibrate_sigma(epsilon, mech, "proof", delta0), "proof accountant"


@functools.lru_cache(maxsize=4)
def _lr_setup(dataset: str, subsample: int | None, root: str):
    X, y, _ = source.binary(dataset)
    if subsample:
        keep = np.random.default_rng(0).permutation(len(y))[:subsample]
        X, y = X[keep], y[keep]
    problem = LogisticRegression.partition(X, y, N_AGENTS, seed=0, reg="1/m")
    x_star = minimize_global(problem, tol=1e-10)
    f_star = float(problem.loss(x_star))
    return problem, x_star, f_star, float(problem.loss(torch.zeros_like(x_star))) - f_star


def lr_setup(dataset: str, subsample: int | None = None):
    """``(problem, x*, f*, f(0) - f*)``; x* by L-BFGS on the global objective (gtol 1e-10)."""
    return _lr_setup(dataset, subsample, ROOT())


def lr_algorithm(method: str, problem, T: int, epsilon, p: float, ratio: float,
                 accountant: str, clipped: bool):
    """A method of Figs. 2-3 at epsilon (None: DO-ADP without noise) and its noise:
    ``(algorithm, {"sigma", "sigma_from", "walk"})``."""
    d, q, R = problem.dim, problem.m, x_star_bound(problem.m)
    clip, info = G_LR if clipped else None, {"walk": float("nan")}
    if method == "DO-ADP":
        k = max(1, round(ratio * d))
        mech = huo.DOADPStep(G=G_LR, k=k, d=d, p=p, q=q, T=T)
        sigma, how = (0.0, "noise-free") if epsilon is None else doadp_sigma(epsilon, mech,
                                                                              accountant)
        # the noise's random walk in xbar through the momentum, per coordinate
        walk = LR_STEPS["alpha"] * sigma * math.sqrt(p * T / N_AGENTS) / (1 - LR_STEPS["beta"])
        return (DOADP(sigma=sigma, p=p, k=k, coordinate_clip=clip, **LR_STEPS),
                {"sigma": sigma, "sigma_from": how, "walk": walk})
    if method == "DPDO":
        pp = 0.1 ** (1.0 / T)                 # the step decays to 10 % over the run
        G = float(torch.linalg.vector_norm(problem.A, dim=2).max()) + R * math.sqrt(d) / q
        dpdo = DPDO(c=0.01, p=pp, q=0.5 * (1 + pp), M=1.0, radius=R).calibrate(
            epsilon, problem, graph(), T, gradient_bound=G, adjacency="record")
        return dpdo, {**info, "sigma": dpdo.M, "sigma_from": f"Laplace composition, G = {G:.4g}"}
    if method == "DP-DDA":
        sigma = doadp_sigma(epsilon, huo.DOADPStep(G_LR, d, d, 0.24, q, T), "rdp")[0]
        beta0 = math.sqrt(G_LR ** 2 + d * sigma ** 2) / R
        return (DPDDA(beta0=beta0, sigma=sigma, p=0.24, coordinate_clip=clip),
                {**info, "sigma": sigma, "sigma_from": f"RDP, beta0 = {beta0:.4g}"})
    alg = PGTC(eta=LR_STEPS["alpha"], gamma=LR_STEPS["gamma"], alpha_x=0.5,
               alpha_y=0.5, compressor=TopK(max(1, round(0.12 * d))), noise_x=1.0,
               noise_y=1.0, q=0.99999, batch_size=1,
               coordinate_clip=clip)
    alg = alg.calibrate(epsilon, problem, graph(), iterations=T, gradient_bound=G_LR)
    return alg, {**info, "sigma": alg.noise_x.per_agent_params(0, N_AGENTS)["scale"],
                 "sigma_from": "paper 000's Theorem 3"}


def lr_run(dataset: str, method: str, seed: int, epsilon: float | None, p: float, ratio: float,
           accountant: str, clipped: bool, subsample: int | None, epochs: int) -> dict:
    """One run of Figs. 2-3 from x_0 = 0: the suboptimality against epochs."""
    problem, _, f_star, start = lr_setup(dataset, subsample)
    q = problem.m
    T = epochs * q
    alg, info = lr_algorithm(method, problem, T, epsilon, p, ratio, accountant, clipped)
    res = run(alg, problem, graph(), T, x0=np.zeros(problem.dim), seed=seed,
              log_every=max(1, q // (5 if subsample else 10)), reference=None)
    sub = np.asarray(res.history["objective"]) - f_star
    return {"epoch": (np.asarray(res.history["iteration"]) / q).tolist(),
            "suboptimality": sub.tolist(), "final": float(sub[-1]), "start": start,
            "bits": res.ledger.total / (N_AGENTS * T), "q": q, "d": problem.dim, "T": T, **info}


@functools.lru_cache(maxsize=2)
def _cnn_problem(per_agent, test_samples, eval_samples, seed, root):
    return source.cnn_problem("mnist", N_AGENTS, per_agent, test_samples, eval_samples, seed=seed)


def cnn_run(rate: str, epsilon: float | None, G: float, clipped: bool, epochs: float,
            sigma_epochs: float, accountant: str, batch: int, seed: int, per_agent: int | None,
            test_samples: int | None, eval_samples: int, eval_every: int,
            checkpoint_every: int) -> dict:
    """One DO-ADP run of the CNN (epsilon None: no noise), sigma calibrated for a horizon of
    ``sigma_epochs`` (the sweep runs only the first ``epochs`` of it); snapshots in the run's
    folder so an interrupted run resumes."""
    problem = _cnn_problem(per_agent, test_samples, eval_samples, seed, str(source._SOURCE["root"]))
    p, ratio = CNN_RATES[rate]
    d, q = problem.dim, problem.m
    k = max(1, round(ratio * d))
    T = max(1, round(epochs * q / batch))
    mech = huo.DOADPStep(G=G, k=k, d=d, p=p, q=q, T=max(1, round(sigma_epochs * q / batch)),
                         batch_size=batch)
    sigma, how = (0.0, "noise-free") if epsilon is None else doadp_sigma(epsilon, mech,
                                                                          accountant, CNN_DELTA0)
    alg = DOADP(sigma=sigma, p=p, k=k, coordinate_clip=G if clipped else None,
                batch_size=batch, **CNN_STEPS)
    snap = run_folder() / "checkpoint.pt"
    net = Network(graph(), float_bits=32, rng=Streams(seed), dtype=torch.float32)

    def acc(state, t):
        xbar = state["x"].mean(0, keepdim=True)
        return float(problem.evaluate_model(xbar, "test", eval_samples)["accuracy"][0])

    res = run(alg, problem, graph(), T, seed=seed, log_every=eval_every, network=net,
              metrics={"test_accuracy_subset": acc}, reference=None,
              checkpoint=lambda s: checkpoints.save(s, snap), checkpoint_every=checkpoint_every,
              resume=checkpoints.load(snap) if snap.is_file() else None)
    final = problem.evaluate(torch.as_tensor(res.x), which=("test",), per_agent=True)
    out = {"epoch": (np.asarray(res.history["iteration"]) * batch / q).tolist(),
           "test_accuracy_subset": res.history["test_accuracy_subset"],
           "test_accuracy": float(final["test_accuracy"]), "agent_accuracy_min":
           float(min(final["test_accuracy_agents"])), "agent_accuracy_max":
           float(max(final["test_accuracy_agents"])), "sigma": sigma, "sigma_from": how, "T": T,
           "k": k, "d": d, "q": q}
    nan = float("nan")
    tight = sigma > 0 and accountant != "proof"        # the quick variant skips these
    out["pld_eps"] = (huo.dp_accounting_epsilon(sigma, DELTA, mech, "pld", activation="hidden")
                      if tight else nan)
    out["pld_eps_all_d"] = (huo.dp_accounting_epsilon(sigma, DELTA, mech, "pld",
                                                      activation="hidden", sensitivity="full")
                            if tight else nan)
    out["theorem1_eps"] = huo.theorem1_epsilon(sigma, CNN_DELTA0, mech) if sigma > 0 else nan
    return out
