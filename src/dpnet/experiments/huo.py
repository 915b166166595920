"""Paper 001 (Huo, Liu, Ding, Johansson, Shi: DO-ADP): Figs. 2-4 and Table II.

* ``huo-fig2a``: decentralized logistic regression at epsilon = 0.01, suboptimality
  ``f(xbar_t) - f(x*)`` for the communication rates 100/80/30/24 %
  (``(p, k/d) = (1, 1), (0.8, 1), (1, 0.3), (0.8, 0.3)``);
* ``huo-fig2b``: final suboptimality against epsilon for the same rates;
* ``huo-fig3``: DO-ADP (24 %) against DPDO, DP-DDA (24 % node sampling) and CPGT (k/d = 0.12)
  at epsilon = 0.01;
* ``huo-fig4`` / ``huo-table2``: the MNIST CNN at epsilon in {1, 0.9, 0.8} and rates
  100/80/40/32 %: test accuracy curves (epsilon = 1) and final test accuracies beside Table II.
  Runs are checkpointed under ``$DPNET_RUNS`` (default ``runs/``) and resume after an
  interruption; ``huo-fig4`` reuses the finished epsilon = 1 runs of ``huo-table2``.

The paper's logistic regression runs on the LIBSVM *epsilon* dataset (400k x 2000); when it is
not under ``$DPNET_DATA`` these experiments run on a9a and w8a instead and say so. Every number in
a report is measured in the run that wrote it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from .. import algorithms, checkpoints, data, graphs, models
from ..compression import TopK
from ..errors import ParameterError
from ..network import Network
from ..privacy import huo
from ..problems import Clip, LogisticRegression, NeuralProblem
from ..problems.base import minimize_global
from ..rng import Streams
from ..runner import run
from . import experiment

PAPER = ("Huo, Liu, Ding, Johansson, Shi: Decentralized optimization with amplified privacy via "
         "efficient communication (paper 001)")
N_AGENTS = 20
OFFSETS = (1, 2, 3)
IOTA = 7.0                       # W = I - L / iota, iota > d_max = 6
G_CLIP = 1.0                     # Assumption 2's G: per-sample gradients clipped per coordinate
DELTA0 = 1e-5
LR_STEPS = dict(alpha=0.001, gamma=0.05, beta=0.15)
CNN_STEPS = dict(alpha=0.01, gamma=0.05, beta=0.15)
LR_RATES = (("100%", 1.0, 1.0), ("80%", 0.8, 1.0), ("30%", 1.0, 0.3), ("24%", 0.8, 0.3))
CNN_RATES = (("100%", 1.0, 1.0), ("80%", 0.8, 1.0), ("40%", 1.0, 0.4), ("32%", 0.8, 0.4))
TABLE2 = {1.0: (89.58, 90.26, 90.98, 93.35), 0.9: (88.06, 90.11, 90.75, 91.27),
          0.8: (87.88, 87.91, 90.11, 90.37)}
EPS_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)


def runs_dir() -> Path:
    return Path(os.environ.get("DPNET_RUNS", "runs"))


def circulant_graph(n: int = N_AGENTS) -> graphs.Graph:
    """The experiments' graph: i linked to i +- 1, 2, 3 (mod n), W = I - L/7."""
    return graphs.circulant(n, offsets=OFFSETS, weights="laplacian", iota=IOTA)


# ---- data (module-level so tests can substitute the fixtures) -------------------------------

def load_binary(name: str):
    """``(X dense, y in {-1, +1}, notes)`` of a LIBSVM dataset from ``$DPNET_DATA``."""
    ds = data.load_libsvm(name, download=False, dtype=np.float32 if name == "epsilon" else
                          np.float64)
    return ds.dense(np.float32 if name == "epsilon" else np.float64), ds.binary_labels(), ds.notes


def load_images(name: str, split: str):
    return data.load_mnist(split, download=False)


def lr_datasets() -> tuple[list[str], str]:
    if data.available(["epsilon"]):
        return ["epsilon"], "the paper's epsilon dataset (LIBSVM epsilon_normalized)"
    return ["a9a", "w8a"], ("the epsilon dataset (400k x 2000) is not under $DPNET_DATA, so the "
                            "logistic-regression figures run on a9a and w8a (LIBSVM) instead")


# ---- logistic regression setting -----------------------------------------------------------

@dataclass
class LRSetup:
    name: str
    problem: LogisticRegression
    graph: graphs.Graph
    x_star: torch.Tensor
    f_star: float
    T: int
    log_every: int
    seeds: tuple[int, ...]
    notes: tuple[str, ...] = ()
    start_gap: float = float("nan")   # f(x_0) - f(x*) at x_0 = 0

    @property
    def q(self) -> int:
        return self.problem.m


def lr_setup(name: str, quick: bool) -> LRSetup:
    X, y, notes = load_binary(name)
    if quick:  # a 600-sample subsample (30 per agent), one epoch, one seed
        keep = np.random.default_rng(0).permutation(len(y))[: 30 * N_AGENTS]
        X, y = X[keep], y[keep]
    problem = LogisticRegression.partition(X, y, N_AGENTS, seed=0, reg="1/m")
    x_star = minimize_global(problem, tol=1e-10)
    q = problem.m
    epochs = 1 if quick else 6
    T = epochs * q
    f_star = problem.loss(x_star)
    start_gap = problem.loss(torch.zeros_like(x_star)) - f_star
    return LRSetup(name, problem, circulant_graph(), x_star, f_star, T,
                   max(1, q // (5 if quick else 10)), (0,) if quick else (0, 1, 2, 3, 4),
                   tuple(notes), float(start_gap))


def doadp_sigma(epsilon: float, mech: huo.Mechanism) -> tuple[float, str]:
    """Theorem 1's sigma (7) when its hypotheses hold; otherwise the smallest sigma for which the
    theorem's own proof (Lemmas 1, 4, 5 with delta_hat = sqrt(S)) certifies epsilon."""
    try:
        return huo.calibrate_sigma(epsilon, mech, "theorem1", DELTA0), "Theorem 1 (7)"
    except ParameterError as err:  # a failing hypothesis: reported in the privacy table
        if "Theorem 1" not in str(err):
            raise
        return huo.calibrate_sigma(epsilon, mech, "proof", DELTA0), "proof accountant"


def _suboptimality(setup: LRSetup, history) -> np.ndarray:
    return np.asarray(history["objective"]) - setup.f_star


def _key(label: str, alg) -> str:
    """Cache key of a run: the method and a digest of all its parameters."""
    import hashlib

    digest = hashlib.sha256(repr(sorted(alg.params().items())).encode()).hexdigest()[:12]
    return f"{label.split(' ')[0].lower()}-{digest}"


@dataclass
class Curve:
    iteration: np.ndarray
    suboptimality: np.ndarray
    bits: int


def run_lr(setup: LRSetup, alg, seed: int, key: str | None = None) -> Curve:
    """One run from x_0 = 0. With ``key`` (full runs) the curve is cached under
    ``$DPNET_RUNS/huo-lr/`` so an interrupted experiment resumes run by run and the figures
    share identical runs (Fig. 2(b) reuses Fig. 2(a)'s epsilon = 0.01 runs)."""
    path = None
    if key is not None:
        path = runs_dir() / "huo-lr" / f"{setup.name}-{key}-T{setup.T}-seed{seed}.npz"
        if path.is_file():
            z = np.load(path)
            return Curve(z["iteration"], z["suboptimality"], int(z["bits"]))
    res = run(alg, setup.problem, setup.graph, setup.T, x0=np.zeros(setup.problem.dim),
              seed=seed, log_every=setup.log_every, reference=None)
    curve = Curve(np.asarray(res.history["iteration"]), _suboptimality(setup, res.history),
                  int(res.ledger.total))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, iteration=curve.iteration, suboptimality=curve.suboptimality,
                 bits=curve.bits)
        tmp.replace(path)
    return curve


def doadp_lr(setup: LRSetup, p: float, ratio: float, epsilon: float):
    d = setup.problem.dim
    k = max(1, round(ratio * d))
    mech = huo.Mechanism(G=G_CLIP, k=k, d=d, p=p, q=setup.q, T=setup.T)
    sigma, how = doadp_sigma(epsilon, mech)
    alg = algorithms.DOADP(sigma=sigma, p=p, k=k, clip=Clip(G_CLIP, "coordinate"), **LR_STEPS)
    return alg, mech, sigma, how


def noise_free_lr(setup: LRSetup, quick: bool, clipped: bool = True) -> tuple[float, Curve]:
    """The same DO-ADP steps without noise, activation or sparsification (sigma = 0, p = 1,
    k = d), clipped like the private runs or not: the mean final suboptimality over the setup's
    seeds and the mean curve. They separate what the steps and horizon allow, what the clipping
    costs (its clipped-gradient fixed point is not x*) and what the noise costs."""
    alg = algorithms.DOADP(sigma=0.0, p=1.0, k=setup.problem.dim,
                           clip=Clip(G_CLIP, "coordinate") if clipped else None, **LR_STEPS)
    key = None if quick else _key("noise-free", alg)
    runs_ = [run_lr(setup, alg, seed, key) for seed in setup.seeds]
    mean = np.stack([c.suboptimality for c in runs_]).mean(0)
    return float(mean[-1]), Curve(runs_[0].iteration, mean, runs_[0].bits)


def _references(report, ax, s: LRSetup, finals: dict[str, float], quick: bool,
                curve: bool = True) -> None:
    """Draw the start and the noise-free run on ``ax`` and say where the private runs ended
    relative to both."""
    ends = {}
    for clipped, style in ((True, "k--"), (False, "k-.")):
        ref, ref_curve = noise_free_lr(s, quick, clipped)
        label = f"noise-free, {'clipped' if clipped else 'unclipped'} (sigma = 0, 100%)"
        ends[clipped] = (ref, float(ref_curve.suboptimality.min()))
        if curve:
            ax.semilogy(ref_curve.iteration / s.q, ref_curve.suboptimality, style, lw=1,
                        label=label)
        else:
            ax.axhline(ref, color="k", ls=style[1:], lw=1, label=label)
    ax.axhline(s.start_gap, color="0.5", ls=":", lw=1, label="x_0 = 0")
    above = [lb for lb, v in finals.items() if v > s.start_gap]
    report.note(f"{s.name}: x_0 = 0 starts at suboptimality {s.start_gap:.4g}; the same steps "
                f"without noise end at {ends[True][0]:.4g} with the private runs' clipping "
                f"(lowest on the way {ends[True][1]:.4g}) and at {ends[False][0]:.4g} unclipped; "
                f"{len(above)} of {len(finals)} private configurations end above the starting "
                "point" + (f" ({', '.join(above)})" if above else ""))


def _privacy_row(label: str, mech: huo.Mechanism, sigma: float, how: str,
                 tight: bool = True) -> dict:
    """sigma and what each accountant says about it (``tight=False`` skips dp-accounting)."""
    acc = huo.proof_account(sigma, DELTA0, mech)
    nan = float("nan")
    row = {"rate": label, "p": mech.p, "k/d": f"{mech.k}/{mech.d}", "sigma": sigma,
           "sigma from": how, "Theorem 1 eps (7)": huo.theorem1_epsilon(sigma, DELTA0, mech),
           "Theorem 1 holds": not huo.theorem1_failures(huo.theorem1_epsilon(sigma, DELTA0, mech),
                                                        sigma, DELTA0, mech),
           "proof eps~": acc.epsilon, "proof delta": acc.delta,
           "PLD eps (delta=1e-5)": huo.dp_accounting_epsilon(sigma, 1e-5, mech, "pld")
           if tight else nan,
           "RDP eps, visible activation": huo.dp_accounting_epsilon(
               sigma, 1e-5, mech, "rdp", activation="visible") if tight else nan,
           "RDP eps, all d coordinates": huo.dp_accounting_epsilon(
               sigma, 1e-5, mech, "rdp", sensitivity="full") if tight else nan}
    return row


def _common_lr_report(report, setups: list[LRSetup], source_note: str, quick: bool) -> None:
    report.setting("data", "; ".join(
        f"{s.name}: {s.problem.n_agents * s.q} samples x {s.problem.dim} features, q = {s.q} "
        "per agent" for s in setups))
    report.setting("graph", f"n = {N_AGENTS}, edges (i, i +- j mod n), j = 1, 2, 3; W = I - L/"
                   f"{IOTA:g}")
    report.setting("loss", "f_i(x) = (1/q) sum_j log(1 + exp(-b_j a_j^T x)) + (1/(2q))||x||^2")
    report.setting("steps", "alpha = 0.001, gamma = 0.05, beta = 0.15, one sample per active "
                   "agent per iteration, x_0 = 0")
    report.setting("horizon", f"{'1 epoch (quick)' if quick else '6 epochs'}: T = epochs x q; "
                   f"{len(setups[0].seeds)} repetition(s) (seeds {list(setups[0].seeds)}), curves "
                   "are means over repetitions")
    report.setting("metric", "suboptimality f(xbar_t) - f(x*), x* by L-BFGS on the global "
                   "objective (gtol 1e-10); reference lines: the start x_0 = 0 ("
                   + ", ".join(f"{s.name}: {s.start_gap:.4g}" for s in setups) + ") and the same "
                   "steps without noise (sigma = 0, p = 1, k = d), clipped as the private runs "
                   "and unclipped")
    report.note(source_note)
    report.choice(f"G = {G_CLIP:g} with per-coordinate clipping of every per-sample gradient at "
                  "G/sqrt(d) (Assumption 2; the paper gives neither G nor the clipping)")
    report.choice(f"delta0 = {DELTA0:g}; sigma from Theorem 1's bound (7) where its hypotheses "
                  "hold (eps <= 1, T >= q^2 eps^2/(4p^2)); elsewhere the smallest sigma whose "
                  "proof accountant (Lemmas 1, 4, 5 with delta_hat = sqrt(S)) certifies eps")
    report.choice(f"W = I - L/{IOTA:g} (the paper's suggested form; it does not give W)")
    report.choice("x* from L-BFGS instead of the paper's 'LogisticSGD' of scikit-learn (no such "
                  "class exists)")
    if quick:
        report.note("quick variant: a 600-sample subsample (30 per agent), one epoch, one seed")


def _rate_color(label: str) -> str:
    return {"100%": "tab:orange", "80%": "tab:green", "30%": "tab:blue", "24%": "tab:red",
            "40%": "tab:blue", "32%": "tab:red"}.get(label, "k")


@experiment("huo-fig2a", "DO-ADP logistic regression at epsilon = 0.01: suboptimality for "
            "communication rates 100/80/30/24 %", PAPER + ", Fig. 2(a)")
def fig2a(report, quick: bool) -> None:
    names, source = lr_datasets()
    setups = [lr_setup(nm, quick) for nm in names]
    _common_lr_report(report, setups, source, quick)
    eps = 0.01
    report.setting("privacy", f"epsilon = {eps} per agent, delta0 = {DELTA0:g}")
    fig, axes = plt.subplots(1, len(setups), figsize=(5.2 * len(setups), 3.8), squeeze=False)
    for ax, s in zip(axes[0], setups):
        finals, privacy_rows = {}, []
        for label, p, ratio in LR_RATES:
            alg, mech, sigma, how = doadp_lr(s, p, ratio, eps)
            privacy_rows.append(_privacy_row(label, mech, sigma, how, tight=not quick))
            key = None if quick else _key("do-adp", alg)
            runs_ = [run_lr(s, alg, seed, key) for seed in s.seeds]
            curves = np.stack([c.suboptimality for c in runs_])
            it = runs_[0].iteration
            mean = curves.mean(0)
            finals[label] = float(mean[-1])
            report.add_rows([{"dataset": s.name, "rate": label, "p": p, "k/d": ratio,
                              "epsilon": eps, "sigma": sigma, "iteration": int(i),
                              "epoch": i / s.q, "suboptimality_mean": float(m),
                              "suboptimality_std": float(sd)}
                             for i, m, sd in zip(it, mean, curves.std(0))])
            ax.semilogy(it / s.q, mean, label=f"{label} (sigma={sigma:.3g})",
                        color=_rate_color(label))
        _references(report, ax, s, finals, quick)
        ax.set_title(f"{s.name}, epsilon = {eps}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("f(xbar) - f(x*)")
        ax.legend(fontsize=7)
        report.table(f"{s.name}: noise and privacy of each configuration", privacy_rows)
        order = [finals[lb] for lb in ("24%", "30%", "80%", "100%")]
        report.claim(f"{s.name}: a lower communication rate gives a smaller error: final "
                     "suboptimality 24% < 30% < 80% < 100%",
                     all(a < b for a, b in zip(order, order[1:])),
                     ", ".join(f"{lb}: {finals[lb]:.4g}" for lb in ("24%", "30%", "80%", "100%")))
    report.figure(fig, caption="mean suboptimality over repetitions (log scale)")


@experiment("huo-fig2b", "DO-ADP logistic regression: final suboptimality against epsilon",
            PAPER + ", Fig. 2(b)")
def fig2b(report, quick: bool) -> None:
    names, source = lr_datasets()
    setups = [lr_setup(nm, quick) for nm in names]
    _common_lr_report(report, setups, source, quick)
    grid = (0.01, 1.0) if quick else EPS_GRID
    report.setting("epsilon grid", f"{list(grid)} (the paper's grid is not given)")
    report.choice("epsilon grid " + str(list(grid)) + "; the 5 repetitions of Fig. 2(a) per point")
    fig, axes = plt.subplots(1, len(setups), figsize=(5.2 * len(setups), 3.8), squeeze=False)
    for ax, s in zip(axes[0], setups):
        finals: dict[str, list[float]] = {lb: [] for lb, _, _ in LR_RATES}
        for eps in grid:
            for label, p, ratio in LR_RATES:
                alg, mech, sigma, how = doadp_lr(s, p, ratio, eps)
                acc = huo.proof_account(sigma, DELTA0, mech)
                key = None if quick else _key("do-adp", alg)
                vals = [run_lr(s, alg, seed, key).suboptimality[-1] for seed in s.seeds]
                finals[label].append(float(np.mean(vals)))
                report.add_rows([{"dataset": s.name, "epsilon": eps, "rate": label, "p": p,
                                  "k/d": ratio, "sigma": sigma, "sigma from": how,
                                  "delta (proof)": acc.delta,
                                  "final_suboptimality_mean": float(np.mean(vals)),
                                  "final_suboptimality_std": float(np.std(vals))}])
        for label, _, _ in LR_RATES:
            ax.loglog(grid, finals[label], "o-", label=label, color=_rate_color(label))
        _references(report, ax, s, {f"{lb} eps={e:g}": v[i] for lb, v in finals.items()
                                    for i, e in enumerate(grid)}, quick, curve=False)
        ax.set_title(s.name)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("final f(xbar) - f(x*)")
        ax.legend(fontsize=7)
        mono = {lb: all(a > b for a, b in zip(v, v[1:])) for lb, v in finals.items()}
        report.claim(f"{s.name}: a larger epsilon gives a smaller error (every rate, monotone "
                     "over the grid)", all(mono.values()),
                     "; ".join(f"{lb}: " + ", ".join(f"{x:.3g}" for x in v)
                               for lb, v in finals.items()))
        spread = [max(finals[lb][i] for lb in finals) - min(finals[lb][i] for lb in finals)
                  for i in range(len(grid))]
        report.claim(f"{s.name}: the gap between communication rates is larger at smaller "
                     "epsilon (spread at the smallest epsilon > at the largest)",
                     spread[0] > spread[-1],
                     f"spread max-min over rates: eps={grid[0]}: {spread[0]:.4g}, "
                     f"eps={grid[-1]}: {spread[-1]:.4g}")
    report.figure(fig, caption="final suboptimality (mean over repetitions) against epsilon")


# ---- Fig. 3: baselines -------------------------------------------------------------------------

def _dpdo(s: LRSetup, eps: float) -> tuple[algorithms.DPDO, str]:
    p = 0.1 ** (1.0 / s.T)                 # the step decays to 10 % over the run
    q = 0.5 * (1.0 + p)
    radius = max(1.0, 2.0 * float(s.x_star.abs().max()))
    A = s.problem.A
    G = float(torch.linalg.vector_norm(A, dim=2).max()) + s.problem.reg * radius * math.sqrt(
        s.problem.dim)
    base = algorithms.DPDO(c=0.01, p=p, q=q, M=1.0, radius=radius)
    alg = base.calibrate(eps, s.problem, s.graph, s.T, gradient_bound=G, adjacency="record")
    return alg, (f"c = 0.01, p = 0.1^(1/T) = {p:.6f}, q = (1+p)/2 = {q:.6f}, box [-R, R]^d with "
                 f"R = 2 ||x*||_inf = {radius:.3g}, full local gradients, per-sample gradient "
                 f"bound G = max ||a|| + R sqrt(d)/q = {G:.4g} on the box, record adjacency "
                 f"(sensitivity 2 sqrt(d) G/q), pure eps = {eps} by the Laplace composition: "
                 f"M = {alg.M:.4g}")


def _dpdda(s: LRSetup, eps: float, x_star_norm: float):
    d = s.problem.dim
    mech = huo.Mechanism(G=G_CLIP, k=d, d=d, p=0.24, q=s.q, T=s.T)
    sigma, how = doadp_sigma(eps, mech)
    # the DDA step alpha_t = R / (L sqrt t) with L^2 >= E||g + nu||^2 = G^2 + d sigma^2
    beta0 = math.sqrt(G_CLIP ** 2 + d * sigma ** 2) / max(x_star_norm, 1e-3)
    alg = algorithms.DPDDA(beta0=beta0, sigma=sigma, p=0.24, clip=Clip(G_CLIP, "l2"))
    return alg, (f"node sampling p = 0.24, one sample per active node, l2 clipping at G = "
                 f"{G_CLIP:g}, beta_t = beta0 sqrt(t+1) with beta0 = sqrt(G^2 + d sigma^2)/||x*||"
                 f" = {beta0:.4g} (the DDA rule alpha_t = R/(L sqrt t), L^2 the noisy "
                 f"gradient's second moment); sigma = {sigma:.4g} from {how} applied to DP-DDA's "
                 "mechanism (k = d, p = 0.24)")


def _cpgt(s: LRSetup, eps: float):
    d = s.problem.dim
    k = max(1, round(0.12 * d))
    qn = 0.99999
    base = algorithms.PGTC(eta=LR_STEPS["alpha"], gamma=LR_STEPS["gamma"], alpha_x=0.5,
                           alpha_y=0.5, compressor=TopK(k), noise_x=1.0, noise_y=1.0, q=qn,
                           batch_size=1, clip=Clip(G_CLIP, "l2"))
    alg = base.calibrate(eps, s.problem, s.graph, iterations=s.T, gradient_bound=G_CLIP)
    sx = alg.noise_x.per_agent_params(0, s.problem.n_agents)["scale"]
    return alg, (f"PGTC (paper 000) with Top-k, k = {k} (k/d = 0.12: two messages, 24 %), "
                 f"eta = {LR_STEPS['alpha']}, gamma = {LR_STEPS['gamma']}, alpha_x = alpha_y = "
                 f"0.5, one l2-clipped sample (G = {G_CLIP:g}) per gradient, Laplace s q^k with "
                 f"q = {qn}, s = {sx:.4g} from paper 000's Theorem 3 (pure eps = {eps}, M = G)")


@experiment("huo-fig3", "DO-ADP against DPDO, DP-DDA and CPGT at epsilon = 0.01",
            PAPER + ", Fig. 3")
def fig3(report, quick: bool) -> None:
    names, source = lr_datasets()
    setups = [lr_setup(nm, quick) for nm in names]
    if not quick:
        for s in setups:       # 3 repetitions (CPU budget)
            s.seeds = (0, 1, 2)
    _common_lr_report(report, setups, source, quick)
    eps = 0.01
    report.setting("privacy", f"epsilon = {eps} for every method by its own paper's accountant")
    report.choice("3 repetitions per method in the full run (CPU budget; Fig. 2(a) has 5)")
    report.choice("Same privacy level: each method is calibrated to epsilon = 0.01 by its own "
                  "accountant: DO-ADP and DP-DDA (eps, delta) by Theorem 1's formula (delta ~ "
                  "0.002-0.005), DPDO and CPGT pure eps = 0.01 (a stronger guarantee); the paper "
                  "does not say how it matched pure and approximate DP")
    report.choice("Fig. 3 labels CPGT 'GPGT' (typo)")
    report.note("CPGT's pure epsilon (paper 000's Theorem 3) is 4 sqrt(d) M (sqrt(eta)/s_x + "
                "1/s_y) sum_{k<=T} q^-k: the sum is at least T + 1 for every q < 1 (smallest as "
                "q -> 1, hence q = 0.99999), so epsilon = 0.01 over T = 6 epochs of single-sample "
                "steps needs Laplace scales ~1e7-1e8, which swamp the iterates")
    fig, axes = plt.subplots(1, len(setups), figsize=(5.2 * len(setups), 3.8), squeeze=False)
    for ax, s in zip(axes[0], setups):
        x_star_norm = float(torch.linalg.vector_norm(s.x_star))
        alg, mech, sigma, how = doadp_lr(s, 0.8, 0.3, eps)
        methods = {"DO-ADP (24%)": (alg, f"p = 0.8, k/d = 0.3, sigma = {sigma:.4g} ({how})")}
        methods["DPDO"] = _dpdo(s, eps)
        methods["DP-DDA"] = _dpdda(s, eps, x_star_norm)
        methods["CPGT (24%)"] = _cpgt(s, eps)
        finals, rows = {}, []
        for label, (a, desc) in methods.items():
            report.setting(f"{s.name} {label}", desc)
            key = None if quick else _key(label, a)
            runs_ = [run_lr(s, a, seed, key) for seed in s.seeds]
            curves = np.stack([c.suboptimality for c in runs_])
            mean = curves.mean(0)
            it = runs_[0].iteration
            finals[label] = float(mean[-1])
            bits = runs_[0].bits / (s.problem.n_agents * s.T)
            rows.append({"method": label, "final suboptimality": finals[label],
                         "bits per agent per iteration": bits})
            report.add_rows([{"dataset": s.name, "method": label, "iteration": int(i),
                              "epoch": i / s.q, "suboptimality_mean": float(m),
                              "suboptimality_std": float(sd)}
                             for i, m, sd in zip(it, mean, curves.std(0))])
            ax.semilogy(it / s.q, np.maximum(mean, 1e-12), label=label)
        report.table(f"{s.name}: final suboptimality and communication", rows)
        _references(report, ax, s, finals, quick)
        ax.set_title(f"{s.name}, epsilon = {eps}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("f(xbar) - f(x*)")
        ax.legend(fontsize=7)
        best = min(finals, key=finals.get)
        report.claim(f"{s.name}: DO-ADP attains the best optimization accuracy",
                     best == "DO-ADP (24%)",
                     ", ".join(f"{k}: {v:.4g}" for k, v in finals.items()))
    report.figure(fig, caption="mean suboptimality over repetitions (log scale)")


# ---- Fig. 4 / Table II: MNIST CNN --------------------------------------------------------------

@dataclass
class CNNSpec:
    batch_size: int = 8
    epochs: float = 8.0
    G: float = 3.0                      # per-coordinate clipping at G / sqrt(P)
    eval_every: int = 150
    eval_samples: int = 2000
    train_subset: int | None = None     # samples per agent (quick)
    test_subset: int | None = None
    checkpoint_every: int = 150
    seed: int = 0
    epsilons: tuple[float, ...] = (1.0, 0.9, 0.8)
    delta: float = 1e-5
    delta0: float = 1e-7
    extra: dict = field(default_factory=dict)


def cnn_spec(quick: bool) -> CNNSpec:
    if quick:
        return CNNSpec(batch_size=2, epochs=1.0, eval_every=2, eval_samples=20, train_subset=8,
                       test_subset=20, checkpoint_every=2, epsilons=(1.0, 0.8))
    return CNNSpec()


def cnn_problem(spec: CNNSpec) -> NeuralProblem:
    train = load_images("mnist", "train")
    test = load_images("mnist", "test")
    parts = data.split_even(len(train.y), N_AGENTS, seed=0)
    if spec.train_subset is not None:
        parts = parts[:, : spec.train_subset]
    tx, ty = test.X, test.y
    if spec.test_subset is not None:
        tx, ty = tx[: spec.test_subset], ty[: spec.test_subset]
    return NeuralProblem(models.mnist_cnn(seed=spec.seed), train.X, train.y, parts,
                         test=(tx, ty), transform=models.mnist_transform,
                         metric_samples=spec.eval_samples)


def cnn_sigma(spec: CNNSpec, mech: huo.Mechanism, eps: float,
              quick: bool = False) -> tuple[float, str]:
    """Theorem 1 never applies here (T >= q^2 eps^2/(4p^2B^2) = 3.5e4/p^2 at eps = 1): the smallest
    sigma for which dp-accounting's PLD accountant certifies (eps, spec.delta) for the paper's
    mechanism model (subsampling p B / q, Top-k sensitivity 2 G sqrt(k/d) / B). The quick variant
    uses the (much cheaper) proof accountant at the same delta."""
    if quick:
        return (huo.calibrate_sigma(eps, mech, "proof", spec.delta0, spec.delta),
                f"proof accountant at delta = {spec.delta:g} (quick)")
    return (huo.calibrate_sigma(eps, mech, "pld", delta=spec.delta, rel_tol=1e-3),
            f"PLD accountant at delta = {spec.delta:g}")


def cnn_run(spec: CNNSpec, problem: NeuralProblem, graph, eps: float | None, label: str,
            p: float, ratio: float, quick: bool, log=print) -> dict:
    """One checkpointed DO-ADP run; returns its history and final evaluation (cached).
    ``eps=None``: the noise-free reference (sigma = 0, same clipping and steps)."""
    d, q = problem.dim, problem.m
    k = max(1, round(ratio * d))
    T = max(1, int(round(spec.epochs * q / spec.batch_size)))
    mech = huo.Mechanism(G=spec.G, k=k, d=d, p=p, q=q, T=T, batch_size=spec.batch_size)
    sigma, how = (0.0, "noise-free reference") if eps is None else cnn_sigma(spec, mech, eps,
                                                                             quick)
    alg = algorithms.DOADP(sigma=sigma, p=p, k=k, clip=Clip(spec.G, "coordinate"),
                           batch_size=spec.batch_size, **CNN_STEPS)
    tag = (f"{'quick-' if quick else ''}{'nonoise' if eps is None else f'eps{eps:g}'}-p{p:g}-"
           f"k{ratio:g}-B{spec.batch_size}-T{T}-G{spec.G:g}-s{sigma:.6g}")
    folder = runs_dir() / "huo-table2"
    folder.mkdir(parents=True, exist_ok=True)
    done, ckpt = folder / f"{tag}.done.pt", folder / f"{tag}.ckpt.pt"
    if done.is_file():
        return checkpoints.load(done)
    resume = checkpoints.load(ckpt) if ckpt.is_file() else None
    if resume is not None:
        log(f"[huo-table2] {tag}: resuming at iteration {resume['iteration']}")

    def save(snap):
        checkpoints.save(snap, ckpt)
        log(f"[huo-table2] {tag}: checkpoint at iteration {snap['iteration']}/{T} "
            f"({time.strftime('%H:%M:%S')})")

    def test_acc(state, k):
        xbar = state["x"].mean(0, keepdim=True)
        return float(problem.evaluate_model(xbar, "test", spec.eval_samples)["accuracy"][0])

    net = Network(graph, float_bits=32, rng=Streams(spec.seed), dtype=torch.float32)
    start = time.perf_counter()
    res = run(alg, problem, graph, T, seed=spec.seed, log_every=spec.eval_every, network=net,
              metrics={"test_accuracy_subset": test_acc}, checkpoint=save,
              checkpoint_every=spec.checkpoint_every, resume=resume, reference=None)
    X = torch.as_tensor(res.x)
    final = problem.evaluate(X, which=("test",), per_agent=True)
    out = {"tag": tag, "eps": eps, "rate": label, "p": p, "k/d": ratio, "k": k, "d": d, "T": T,
           "sigma": sigma, "sigma from": how, "history": {k2: np.asarray(v).tolist()
                                                         for k2, v in res.history.items()},
           "test_accuracy": final["test_accuracy"],
           "test_accuracy_agents": np.asarray(final["test_accuracy_agents"]).tolist(),
           "test_loss": final["test_loss"], "bits": res.ledger.total,
           "wall_s": time.perf_counter() - start}
    nan = float("nan")
    out["privacy"] = {"proof eps": nan, "proof delta": nan, "Theorem 1 failures": [],
                      "PLD eps": nan, "RDP eps visible": nan}
    if sigma > 0:
        acc = huo.proof_account(sigma, spec.delta0, mech,
                                huo.delta_hat_for(spec.delta, spec.delta0, mech))
        out["privacy"].update({"proof eps": acc.epsilon, "proof delta": acc.delta,
                               "Theorem 1 failures": huo.theorem1_failures(eps, sigma, DELTA0,
                                                                           mech)})
        if not quick:
            out["privacy"]["PLD eps"] = huo.dp_accounting_epsilon(sigma, spec.delta, mech, "pld")
            out["privacy"]["RDP eps visible"] = huo.dp_accounting_epsilon(
                sigma, spec.delta, mech, "rdp", activation="visible")
    checkpoints.save(out, done)
    ckpt.unlink(missing_ok=True)
    log(f"[huo-table2] {tag}: done, test accuracy {out['test_accuracy']:.4f}")
    return out


def _full_sensitivity_eps(spec: CNNSpec, problem: NeuralProblem, r: dict, quick: bool) -> float:
    """PLD epsilon of a run's sigma when every one of the d noisy coordinates is charged
    (sensitivity 2G/B): the account DOADP.privacy() gives by default."""
    if quick or r["sigma"] == 0:
        return float("nan")
    mech = huo.Mechanism(G=spec.G, k=r["k"], d=r["d"], p=r["p"], q=problem.m, T=r["T"],
                         batch_size=spec.batch_size)
    return huo.dp_accounting_epsilon(r["sigma"], spec.delta, mech, "pld", sensitivity="full")


def _cnn_settings(report, spec: CNNSpec, problem: NeuralProblem, quick: bool) -> None:
    report.setting("data", f"MNIST: {problem.n_agents} agents x {problem.m} training images "
                   f"(random even split), test set {problem.test[1].shape[0]} images")
    report.setting("model", "MnistCNN (dpnet.models): conv5x5 1->8, conv5x5 8->16, conv3x3 "
                   f"16->16 (each ReLU + max-pool 2), linear 144->10; P = {problem.dim} "
                   "parameters; cross-entropy")
    report.setting("graph", f"n = {N_AGENTS}, (i, i +- 1, 2, 3 mod n), W = I - L/{IOTA:g}")
    report.setting("steps", "alpha = 0.01, gamma = 0.05, beta = 0.15")
    report.setting("training", f"minibatch {spec.batch_size} per active agent, {spec.epochs:g} "
                   f"epochs (T = epochs x q / batch), seed {spec.seed}, x_0 = the module's "
                   "initialisation for every agent")
    report.setting("evaluation", "test accuracy of the agents' average model xbar on the whole "
                   "test set (per-agent accuracies in the CSV); curves on a fixed "
                   f"{spec.eval_samples}-image test subset")
    report.choice("CNN architecture, batch size, epochs, G, delta0 and the evaluated model are "
                  "not given by the paper: the values above are choices (7,194 parameters keep 20 "
                  "agents' per-sample gradients affordable on 2 CPU cores)")
    report.choice(f"G = {spec.G:g}: per-coordinate clipping of each per-sample gradient at "
                  f"G/sqrt(P) = {spec.G / math.sqrt(problem.dim):.4g} (Assumption 2). At the "
                  "initial point the per-sample gradients have l2 norm ~3 and median coordinate "
                  "~0.011 = 1/sqrt(P); a 600-iteration pilot (eps = 1, batch 8) reached 15% test "
                  "accuracy with G = 1 and 35% with G = 3: with alpha = 0.01, clipping at G = 1 "
                  "leaves steps too small to learn in an affordable horizon")
    full = cnn_spec(False)      # the statement is about the full runs (q = 3000 per agent)
    B, T = full.batch_size, int(round(full.epochs * 3000 / full.batch_size))
    report.choice("Theorem 1 cannot apply: with B records per step its proof needs T >= q^2 "
                  "eps^2/(4 p^2 B^2) (B cancels from the bound (7) on sigma), "
                  f"{huo.theorem1_min_iterations(1.0, 1.0, 3000, B):.3g}/p^2 at eps = 1 (q = "
                  f"3000, B = {B}), more than the full runs' T = {T}, and its proof's accountant "
                  "with the paper's delta_hat = sqrt(S) leaves delta ~ 0.45 at eps = 1. sigma is "
                  "therefore the smallest value for which dp-accounting's PLD accountant certifies "
                  f"(eps, delta = {spec.delta:g}) for the paper's own mechanism model (Top-k "
                  "sensitivity 2 G sqrt(k/d)/B, activation counted as subsampling, sampling "
                  "p B/q): the tightest valid account of what the paper analyses. The table lists "
                  "what the proof's accountant and an RDP account with the activation public say "
                  "about the same sigma")
    report.note("One run per configuration (the paper does not say how many it averaged)")
    if quick:
        report.note("quick variant: at most 8 training images per agent, 20 test images, batch 2, "
                    "one epoch: accuracies are meaningless, only the pipeline is exercised")


def table2_runs(spec: CNNSpec, quick: bool,
                log=print) -> tuple[NeuralProblem, list[dict], dict]:
    """The private runs (every epsilon and rate) and the noise-free reference (100 %)."""
    problem = cnn_problem(spec)
    graph = circulant_graph()
    out = []
    for eps in spec.epsilons:
        for label, p, ratio in CNN_RATES:
            out.append(cnn_run(spec, problem, graph, eps, label, p, ratio, quick, log))
    return problem, out, cnn_run(spec, problem, graph, None, "100%", 1.0, 1.0, quick, log)


def _noise_free_note(report, reference: dict, results: list[dict]) -> None:
    best = max(results, key=lambda r: r["test_accuracy"])
    report.note(f"Noise-free reference (sigma = 0, 100 %, same clipping, steps and horizon): "
                f"test accuracy {100 * reference['test_accuracy']:.2f} %; the best private run "
                f"({best['rate']}, eps = {best['eps']:g}) reaches "
                f"{100 * best['test_accuracy']:.2f} %. The gap to Table II's ~90 % that the "
                "reference shares comes from the model and horizon, the rest from the noise")


@experiment("huo-table2", "DO-ADP CNN on MNIST: test accuracy for epsilon in {1, 0.9, 0.8} and "
            "communication rates 100/80/40/32 %", PAPER + ", Table II")
def table2(report, quick: bool) -> None:
    spec = cnn_spec(quick)
    problem, results, reference = table2_runs(spec, quick)
    _cnn_settings(report, spec, problem, quick)
    _noise_free_note(report, reference, results)
    rows, acc = [], {}
    for r in results:
        acc[(r["eps"], r["rate"])] = 100 * r["test_accuracy"]
        report.add_rows([{"epsilon": r["eps"], "rate": r["rate"], "p": r["p"], "k/d": r["k/d"],
                          "sigma": r["sigma"], "T": r["T"], "test_accuracy": r["test_accuracy"],
                          "agent_accuracy_min": min(r["test_accuracy_agents"]),
                          "agent_accuracy_max": max(r["test_accuracy_agents"]),
                          "proof_eps": r["privacy"]["proof eps"],
                          "proof_delta": r["privacy"]["proof delta"],
                          "pld_eps": r["privacy"]["PLD eps"],
                          "rdp_eps_visible_activation": r["privacy"]["RDP eps visible"],
                          "wall_s": r["wall_s"]}])
    labels = [lb for lb, _, _ in CNN_RATES]
    for eps in spec.epsilons:
        row = {"epsilon": eps}
        for i, lb in enumerate(labels):
            row[f"{lb} measured"] = round(acc[(eps, lb)], 2)
            if eps in TABLE2:
                row[f"{lb} paper"] = TABLE2[eps][i]
        rows.append(row)
    rows.append({"epsilon": "no noise", "100% measured":
                 round(100 * reference["test_accuracy"], 2)})
    report.table("Test accuracy (%) of the average model: measured beside Table II", rows)
    full = {r["tag"]: _full_sensitivity_eps(spec, problem, r, quick) for r in results}
    report.table("Noise and privacy of each run", [
        {"epsilon": r["eps"], "rate": r["rate"], "sigma": r["sigma"], "T": r["T"],
         "proof (eps, delta)": f"({r['privacy']['proof eps']:.3g}, "
                               f"{r['privacy']['proof delta']:.2g})",
         "PLD eps": r["privacy"]["PLD eps"], "RDP eps (activation visible)":
         r["privacy"]["RDP eps visible"], "PLD eps, all d coordinates": full[r["tag"]]}
        for r in results])
    sparse = [r for r in results if r["k"] < r["d"]]
    if sparse and not quick:
        report.note("The 40 % and 32 % runs' sigma uses eq. (6)'s Top-k sensitivity 2G sqrt(k/d)/B "
                    "(the paper's account), which an audit finds exceeded (`dpnet audit "
                    "doadp-top1`; DOADP.privacy() defaults to all d coordinates). Charged for all "
                    "d coordinates, the same noise certifies only " + ", ".join(
                        f"eps = {full[r['tag']]:.3g} ({r['rate']}, target {r['eps']:g})"
                        for r in sparse) + ": part of the accuracy gained by sparsifying comes "
                    "from noise that the sound account does not cover")
    ok_comm = [all(acc[(e, a)] <= acc[(e, b)] for a, b in zip(labels, labels[1:]))
               for e in spec.epsilons]
    report.claim("accuracy rises as communication falls (100% <= 80% <= 40% <= 32% for every "
                 "epsilon)", all(ok_comm),
                 "; ".join(f"eps={e}: " + ", ".join(f"{acc[(e, lb)]:.2f}" for lb in labels)
                           for e in spec.epsilons))
    eps_sorted = sorted(spec.epsilons)
    ok_eps = [all(acc[(a, lb)] <= acc[(b, lb)] for a, b in zip(eps_sorted, eps_sorted[1:]))
              for lb in labels]
    report.claim("accuracy rises with epsilon (for every communication rate)", all(ok_eps),
                 "; ".join(f"{lb}: " + ", ".join(f"{acc[(e, lb)]:.2f}" for e in eps_sorted)
                           for lb in labels))
    gaps = [acc[(e, lb)] - TABLE2[e][i] for e in spec.epsilons if e in TABLE2
            for i, lb in enumerate(labels)]
    report.claim("absolute accuracies match Table II within 3 points (the CNN and training "
                 "length are not specified, so this is indicative)",
                 None if quick else all(abs(g) <= 3 for g in gaps),
                 f"measured minus paper: min {min(gaps):+.2f}, max {max(gaps):+.2f} points")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for eps in spec.epsilons:
        ax.plot(labels, [acc[(eps, lb)] for lb in labels], "o-", label=f"measured eps={eps}")
        if eps in TABLE2 and not quick:
            ax.plot(labels, TABLE2[eps], "x--", alpha=0.6, label=f"Table II eps={eps}")
    ax.set_xlabel("communication rate")
    ax.set_ylabel("test accuracy (%)")
    ax.legend(fontsize=7)
    report.figure(fig, caption="test accuracy of xbar against communication rate")


@experiment("huo-fig4", "DO-ADP CNN on MNIST at epsilon = 1: test accuracy during training",
            PAPER + ", Fig. 4")
def fig4(report, quick: bool) -> None:
    spec = cnn_spec(quick)
    spec.epsilons = (1.0,)
    problem, results, reference = table2_runs(spec, quick)
    _cnn_settings(report, spec, problem, quick)
    _noise_free_note(report, reference, results)
    report.note("The curves come from the same checkpointed runs as huo-table2 (epsilon = 1)")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    finals = {}
    h = reference["history"]
    ax.plot(np.asarray(h["iteration"]) * spec.batch_size / problem.m,
            100 * np.asarray(h["test_accuracy_subset"]), "k--", lw=1, label="noise-free")
    for r in results:
        h = r["history"]
        it = np.asarray(h["iteration"])
        accs = np.asarray(h["test_accuracy_subset"])
        ax.plot(it * spec.batch_size / problem.m, 100 * accs, label=r["rate"],
                color=_rate_color(r["rate"]))
        finals[r["rate"]] = 100 * r["test_accuracy"]
        report.add_rows([{"rate": r["rate"], "iteration": int(i),
                          "epoch": float(i * spec.batch_size / problem.m),
                          "test_accuracy_subset": float(a), "train_loss_subset": float(lo)}
                         for i, a, lo in zip(it, accs, h["objective"])])
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"test accuracy (%), {spec.eval_samples}-image subset")
    ax.legend(fontsize=7)
    report.figure(fig, caption="test accuracy of xbar during training, epsilon = 1")
    labels = [lb for lb, _, _ in CNN_RATES]
    report.claim("the final test accuracy rises as communication falls (epsilon = 1)",
                 all(finals[a] <= finals[b] for a, b in zip(labels, labels[1:])),
                 ", ".join(f"{lb}: {finals[lb]:.2f}" for lb in labels))
