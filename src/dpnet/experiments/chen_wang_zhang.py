"""Paper 003 (Chen, Wang & Zhang, DP gradient tracking over directed graphs): Figs. 2-6.

* ``cwz-fig2``: Scheme S1 (alpha = 80/2000, beta = 0.75/2000^0.66, gamma = 100/2000, m = 57),
  noise exponents p_zeta = p_eta in {-0.1, 0.1, 0.2}: training/test accuracy on MNIST and
  CIFAR-10 and the cumulative epsilon.
* ``cwz-fig3``: Scheme S2 (alpha = 0.1, beta = 0.01, gamma = 0.1, m = floor(1.002^2000) + 1 = 55),
  p in {0.9994, 0.9996, 0.9998}, i.e. sigma = p^2000 in {0.301, 0.449, 0.670}.
* ``cwz-fig4``: S1 (p = 0.1) against S2 (p = 0.9996).
* ``cwz-fig5`` / ``cwz-fig6``: S2 (0.9996) and S1 (0.1) against the baselines [33], [36], [37],
  [39] = LDOL and [41]: accuracy (Fig. 5) and cumulative (epsilon, delta) (Fig. 6).

5 agents on our stand-in for Fig. 1 (:func:`dpnet.graphs.cwz_fig1`), K = 2000 (Algorithm 1 runs
k = 0..K), ResNet-18 adapted to small images (:class:`dpnet.models.ResNet18`). The default
(non-quick) size is the paper's; the environment variables ``DPNET_CWZ_MODEL`` (``resnet18`` or
``cnn``), ``DPNET_CWZ_WIDTH``, ``DPNET_CWZ_ITERATIONS``, ``DPNET_CWZ_PER_AGENT`` (training
samples per agent), ``DPNET_CWZ_EVAL_EVERY``, ``DPNET_CWZ_EVAL_SAMPLES`` and
``DPNET_CWZ_DATASETS`` shrink it, and every report states the size it ran at. With
``DPNET_CHECKPOINT_DIR`` set, runs save a snapshot every ``eval_every`` iterations, resume from
it, and finished curves are reused by every figure that needs the same run. ``--quick`` runs the
paper's exact schemes for a few iterations with the small CNNs of :mod:`dpnet.models`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from .. import checkpoints, graphs
from ..algorithms._cwz import Scheme, lemma2_matrix, scheme_s1, scheme_s2, spectral_radius
from ..errors import NonFiniteError
from ..network import Network
from ..problems.base import Problem
from ..rng import Streams
from ..runner import run
from . import experiment

PAPER = "Chen, Wang & Zhang, DP gradient-tracking distributed stochastic optimization over " \
        "directed graphs (paper 003)"
K = 2000
N_AGENTS = 5
S1_P = (-0.1, 0.1, 0.2)
S2_P = (0.9994, 0.9996, 0.9998)
C_ADJ = 1.0          # Definition 3's C: unknown in the paper; every epsilon is linear in it
FORM = "compact"
RESNET18_MNIST_PARAMS = 11_172_810     # d of the paper's model (ResNet-18, 1 input channel)
ORACLE_BATCH = 57                       # the problems' own minibatch size (S1's m; used by LDOL)


def s1(p: float) -> Scheme:
    """The paper's S1 at K = 2000: a1 = 80, a2 = 0.75, a3 = 100, a4 = 3e-5, p_alpha = 1,
    p_beta = 0.66, p_gamma = 1, p_m = 1.9, p_zeta = p_eta = p."""
    return scheme_s1(K, 80, 0.75, 100, 3e-5, 1, 0.66, 1, 1.9, p, p)


def s2(p: float) -> Scheme:
    """The paper's S2 at K = 2000: alpha = 0.1, beta = 0.01, gamma = 0.1, p_m = 1.002."""
    return scheme_s2(K, 0.1, 0.01, 0.1, 1.002, p, p)


# ---- run size ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSize:
    quick: bool
    model: str                 # "resnet18" or "cnn"
    width: int
    iterations: int            # run length (the paper: K + 1 = 2001)
    per_agent: int | None      # training samples per agent (None: the whole even split)
    eval_every: int
    eval_samples: int
    datasets: tuple[str, ...]
    seed: int = 0
    batch_cap: int | None = None   # quick runs only: minibatches of at most this many samples

    @property
    def reduced(self) -> bool:
        return (self.model != "resnet18" or self.width != 64 or self.iterations != K + 1
                or self.per_agent is not None or self.batch_cap is not None)

    def describe(self) -> str:
        model = "small CNN (dpnet.models)" if self.model == "cnn" else \
            f"ResNet-18 (width {self.width}{', the standard' if self.width == 64 else ''})"
        data = "the whole even split" if self.per_agent is None else \
            f"{self.per_agent} training samples per agent"
        cap = "" if self.batch_cap is None else \
            f"; minibatches capped at {self.batch_cap} samples (quick)"
        return (f"{model}; {self.iterations} iterations (k = 0..{self.iterations - 1}); {data}; "
                f"accuracy every {self.eval_every} iterations on {self.eval_samples} training "
                f"and {self.eval_samples} test samples; datasets {', '.join(self.datasets)}{cap}")


def run_size(quick: bool) -> RunSize:
    if quick:
        return RunSize(True, "cnn", 0, 1, 60, 1, 20, ("mnist", "cifar10"), batch_cap=4)
    env = os.environ.get
    per = env("DPNET_CWZ_PER_AGENT")
    return RunSize(False, env("DPNET_CWZ_MODEL", "resnet18"), int(env("DPNET_CWZ_WIDTH", "64")),
                   int(env("DPNET_CWZ_ITERATIONS", str(K + 1))), int(per) if per else None,
                   int(env("DPNET_CWZ_EVAL_EVERY", "100")),
                   int(env("DPNET_CWZ_EVAL_SAMPLES", "2000")),
                   tuple(env("DPNET_CWZ_DATASETS", "mnist,cifar10").split(",")))


# ---- data and problems -------------------------------------------------------------------------

def _load_images(name: str):
    """``(train, test)`` :class:`dpnet.data.Dataset` objects from ``$DPNET_DATA``."""
    from .. import data

    if name == "mnist":
        return data.load_mnist("train", download=False), data.load_mnist("test", download=False)
    return data.load_cifar10("train", download=False), data.load_cifar10("test", download=False)


class Monitored(Problem):
    """A :class:`~dpnet.problems.neural.NeuralProblem` as these runs use it.

    * ``stochastic_grad``: the base problem's m distinct samples per agent and iteration;
    * ``grad`` (what LDOL's eq. (17) calls its all-data gradient): replaced by the same kind of
      m-sample minibatch, drawn under purpose ``"sample"`` at a call counter, so every method
      sees the same gradient oracle;
    * ``loss`` and ``global_grad`` are not computed (NaN): the runner would otherwise pass all
      60 000 images at every log; these runs log accuracies instead."""

    name = "neural-monitored"

    def __init__(self, base, batch: int, eval_samples: int, seed: int = 0) -> None:
        self.base, self.batch, self.eval_samples = base, batch, eval_samples
        self.n_agents, self.dim, self.m = base.n_agents, base.dim, base.m
        self.dtype = base.dtype
        self._rng, self._calls = Streams(seed), 0

    def stochastic_grad(self, X, rng, k, batch_size, agents=None, purpose="sample", **kw):
        return self.base.stochastic_grad(X, rng, k, batch_size, agents, purpose, **kw)

    def grad(self, X, agents=None):
        self._calls += 1
        return self.base.stochastic_grad(X, self._rng, self._calls, self.batch, agents)

    def local_loss(self, X, agents=None):
        return self.base.local_loss(X, agents)

    def loss(self, x) -> float:
        return float("nan")

    def global_grad(self, x):
        return torch.full((self.dim,), float("nan"))

    def check_x(self, X, name: str = "x0"):
        return self.base.check_x(X, name)

    def default_x0(self, seed: int = 0):
        return self.base.default_x0(seed)

    def describe(self) -> dict:
        return {**self.base.describe(), "batch": self.batch, "eval_samples": self.eval_samples}


@dataclass
class Setup:
    name: str
    problem: Monitored
    notes: tuple[str, ...]
    model_text: str
    n_train: int
    n_test: int


def make_setup(name: str, size: RunSize, batch: int) -> Setup:
    from .. import data, models
    from ..problems.neural import NeuralProblem

    train, test = _load_images(name)
    parts = data.split_even(len(train), N_AGENTS, seed=0)
    if size.per_agent is not None:
        parts = parts[:, : size.per_agent]
    grey = name == "mnist"
    if size.model == "cnn":
        module = models.mnist_cnn(seed=0) if grey else models.cifar_cnn(seed=0)
    else:
        module = models.resnet18(seed=0, in_channels=1 if grey else 3, width=size.width)
    transform = models.mnist_transform if grey else models.cifar_transform
    base = NeuralProblem(module, train.X, train.y, parts, test=(test.X, test.y),
                         transform=transform, chunk=128)
    text = (f"{type(module).__name__}" + (f" width {size.width}" if size.model != "cnn" else "")
            + f", {base.dim} parameters")
    batch = min(batch, base.m, size.batch_cap or batch)
    return Setup(name, Monitored(base, batch, size.eval_samples, size.seed),
                 tuple(getattr(train, "notes", ())), text, int(parts.size), len(test))


# ---- runs with snapshots -----------------------------------------------------------------------

def _ckpt_dir() -> Path | None:
    root = os.environ.get("DPNET_CHECKPOINT_DIR")
    return Path(root) / "cwz" if root else None


def _weights(graph, alg) -> torch.Tensor:
    """How the evaluated model averages the agents: Lemma 2's x_bar = v1^T x / n for
    DirectedDPGT (v1^T x is untouched by the compact form's noise), the plain mean otherwise."""
    if alg.name == "directed_dpgt" and isinstance(graph, graphs.DirectedGraph):
        return torch.from_numpy(graph.v1 / graph.n).to(torch.float32)
    return torch.full((graph.n,), 1.0 / graph.n)


def run_curve(label: str, alg, setup: Setup, graph, size: RunSize) -> dict:
    """Train/test accuracy of the averaged model (see :func:`_weights`) every ``eval_every``
    iterations, with snapshots and cached results under ``$DPNET_CHECKPOINT_DIR``."""
    problem = setup.problem
    key = repr((label, repr(alg), problem.describe(), setup.name, graph.name, size.iterations,
                size.eval_every, size.seed))
    h = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = _ckpt_dir()
    done = snap = None
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        done, snap = root / f"{h}.json", root / f"{h}.snapshot.pt"
        if done.is_file():
            return json.loads(done.read_text())
    w = _weights(graph, alg)
    cache: dict[int, dict] = {}

    def evaluate(state, k):
        if k not in cache:
            X = state["x"].to(torch.float32)
            W = torch.cat([(w[:, None] * X).sum(0, keepdim=True), X[:1]])
            tr = problem.base.evaluate_model(W, "train", size.eval_samples)
            te = problem.base.evaluate_model(W, "test", size.eval_samples)
            cache.clear()
            cache[k] = {"train": float(tr["accuracy"][0]), "test": float(te["accuracy"][0]),
                        "test_agent0": float(te["accuracy"][1])}
        return cache[k]

    metrics = {f"{s}_accuracy": (lambda st, k, s=s: evaluate(st, k)[s])
               for s in ("train", "test", "test_agent0")}

    def save(snapshot):
        checkpoints.save(snapshot, snap)

    resume = checkpoints.load(snap) if snap is not None and snap.is_file() else None
    out = {"label": label, "diverged_at": None}
    start = time.perf_counter()
    try:
        res = run(alg, problem, graph, size.iterations, seed=size.seed, log_every=size.eval_every,
                  reference=None, metrics=metrics, progress=False,
                  network=Network(graph, dtype=torch.float32, rng=Streams(size.seed)),
                  checkpoint=save if snap is not None else None,
                  checkpoint_every=size.eval_every if snap is not None else 0, resume=resume,
                  privacy={})
        hist = res.history
        out.update({k: [float(v) for v in hist[k]] for k in
                    ("iteration", "train_accuracy", "test_accuracy", "test_agent0_accuracy")})
        out["bits_per_agent"] = float(hist["bits_per_agent"][-1])
    except NonFiniteError as err:
        out["diverged_at"] = int(err.iteration)
    out["seconds"] = time.perf_counter() - start
    if done is not None:
        done.write_text(json.dumps(out))
        if snap.is_file():
            snap.unlink()
    return out


# ---- epsilon ----------------------------------------------------------------------------------

def scheme_epsilon(s: Scheme, graph, d: int, form: str = FORM, norm: str = "l2") -> np.ndarray:
    """Lemma 5's cumulative epsilon over k = 0..K, worst protected agent, C = C_ADJ."""
    return s.cumulative_epsilon(graph, C_ADJ, d, form, norm).max(axis=1)


def describe_scheme(report, label: str, s: Scheme) -> dict:
    d = s.describe()
    row = {"run": label, "alpha": d["alpha"], "beta": d["beta"], "gamma": d["gamma"], "m": d["m"],
           "sigma_0": d["sigma_zeta_0"], "sigma_K": d["sigma_zeta_K"]}
    print(f"[{report.name}] {label}: alpha={s.alpha:.6g} beta={s.beta:.6g} gamma={s.gamma:.6g} "
          f"m={s.m} sigma_0={d['sigma_zeta_0']:.6g} sigma_K={d['sigma_zeta_K']:.6g}")
    return row


# ---- figures -----------------------------------------------------------------------------------

def _setups(size: RunSize) -> dict[str, Setup]:
    """The same problems for every figure (so runs shared between figures are cached once); their
    own minibatch oracle (what LDOL calls) draws ORACLE_BATCH samples."""
    return {name: make_setup(name, size, ORACLE_BATCH) for name in size.datasets}


def _common_settings(report, size: RunSize, setups: dict[str, Setup], graph) -> None:
    report.setting("graph", f"{graph.n} agents, our stand-in for Fig. 1 (dpnet.graphs.cwz_fig1): "
                   "G_R = ring 0->1->2->3->4->0 + 0->2, 2->4 (R_ij = 1/|N^-_R,i|), G_C = reverse "
                   "ring + 1->3, 3->0 (C_ij = 1/|N^+_C,j|); both strongly connected; "
                   f"v1 = {np.round(graph.v1, 4).tolist()}, v2 = {np.round(graph.v2, 4).tolist()}")
    report.setting("run size", size.describe() + (" (REDUCED: the paper trains ResNet-18 for "
                                                  "K = 2000 on all data)" if size.reduced else ""))
    for name, st in setups.items():
        report.setting(f"data {name}", f"{st.n_train} training images split evenly at random "
                       f"over {N_AGENTS} agents, {st.n_test} test images; model {st.model_text}")
        for note in st.notes:
            report.note(f"{name}: {note}")
    report.choice("Model: ResNet-18 adapted to 28x28 grey / 32x32 colour images "
                  "(dpnet.models.ResNet18: 3x3 stride-1 stem without max-pool, stages of width "
                  "64/128/256/512, BatchNorm in batch-statistics mode: no running statistics, "
                  "so the state row holds every exchanged quantity; BN's affine weights are "
                  "noised and mixed like all parameters)" + ("" if size.model == "resnet18" else
                  "; NOT used in this run: on the shared 2-core CPU one iteration of the 5 "
                  "agents' ResNet-18 minibatch gradients took 99-136 s (about 3 days per "
                  "2001-iteration run), so this run uses the small CNN named below"))
    report.choice("Fig. 1's digraphs are not in the text: our two 5-agent digraphs are stated "
                  "above (different edge sets, neither matrix doubly stochastic)")
    report.choice("Algorithm 1 runs in its compact form (7)-(8) (the form the convergence proof "
                  "analyses); its epsilon is accounted for that form (Lemma 4's argument with "
                  "contraction factors 1) and, for comparison with the paper, with Appendix F's "
                  "per-agent factors (which apply to (4)/(6))")
    report.choice(f"C = {C_ADJ:g} in Definition 3 (the paper does not give it; every epsilon is "
                  "linear in C); the l1 constant is sqrt(d) C (C bounds an l2 norm), d = the "
                  "model's parameter count; epsilon is the worst protected agent's. No gradient "
                  "clipping (the paper uses none), so C is an assumption, not enforced")
    report.choice("Evaluated model: x_bar = v1^T x / n (Lemma 2's average; v1^T x is free of "
                  "the compact form's privacy noise) for Algorithm 1 and the plain average for "
                  "the baselines; agent 0's own test accuracy is in the CSV")
    report.choice("All agents start from the same initial parameters (seed 0); minibatches of "
                  "m distinct samples per agent and iteration, returned afterwards; no "
                  "augmentation; MNIST/CIFAR-10 normalised with the usual means and deviations")


def _plot(report, setups, curves: dict[str, dict[str, dict]], eps: dict[str, np.ndarray],
          eps_label: str, title: str) -> None:
    names = list(setups)
    fig, axes = plt.subplots(1, 2 * len(names) + 1, figsize=(5 * (2 * len(names) + 1), 4))
    for j, name in enumerate(names):
        for split, ax in (("train", axes[2 * j]), ("test", axes[2 * j + 1])):
            for label, c in curves[name].items():
                if c.get("iteration"):
                    ax.plot(c["iteration"], c[f"{split}_accuracy"], label=label)
            ax.set(xlabel="iteration k", ylabel=f"{split} accuracy", title=f"{name} {split}")
    for label, e in eps.items():
        axes[-1].semilogy(np.arange(len(e)), np.maximum(e, 1e-300), label=label)
    axes[-1].set(xlabel="iteration k", ylabel="cumulative epsilon", title=eps_label)
    axes[0].legend(fontsize=7)
    if eps:
        axes[-1].legend(fontsize=7)
    fig.suptitle(title)
    report.figure(fig, caption=title)


def _record(report, fig: str, setups, curves) -> None:
    for name, cs in curves.items():
        for label, c in cs.items():
            if c.get("iteration"):
                report.add_rows([{"dataset": name, "run": label, "iteration": int(i),
                                  "train_accuracy": a, "test_accuracy": b, "test_agent0": z}
                                 for i, a, b, z in zip(c["iteration"], c["train_accuracy"],
                                                       c["test_accuracy"],
                                                       c["test_agent0_accuracy"])])


def _final(c: dict, split: str = "test") -> float:
    if c.get("diverged_at") is not None or not c.get("iteration"):
        return float("nan")
    return float(c[f"{split}_accuracy"][-1])


def _auc(c: dict, split: str = "test") -> float:
    """Mean accuracy over the logged iterations (a convergence-speed summary)."""
    if c.get("diverged_at") is not None or not c.get("iteration"):
        return float("nan")
    return float(np.mean(c[f"{split}_accuracy"]))


def _ordered(vals: list[float]) -> bool:
    return all(a >= b for a, b in zip(vals[:-1], vals[1:]))


CHANCE = 0.1         # ten classes


def _margin(size: RunSize) -> float:
    """Accuracy differences below ``1/sqrt(eval_samples)`` (twice the largest binomial standard
    error of one evaluation) are not read as one run beating another."""
    return 1.0 / math.sqrt(size.eval_samples)


def _beats(a: float, b: float, margin: float) -> bool:
    """a converges faster than b: clearly higher mean accuracy, and a learns at all."""
    return math.isfinite(a) and a > CHANCE + margin and (not math.isfinite(b) or a > b + margin)


def _learning_note(vals: dict[str, float], margin: float) -> str:
    if all(not math.isfinite(v) or v <= CHANCE + margin for v in vals.values()):
        return " (no run rises above chance level 0.1 by the margin; nothing converges)"
    return ""


def _noise_claims(report, labels, schemes, curves, eps, eps_pa, which: str,
                  margin: float) -> None:
    """The two noise claims of Figs. 2/3: smaller noise -> faster convergence (Theorems 1/2) and
    the paper's 'smaller noise -> smaller epsilon' (contradicted by Lemma 5)."""
    for name, cs in curves.items():
        aucs = [_auc(cs[lab]) for lab in labels]
        fin = [_final(cs[lab]) for lab in labels]
        ok = (all(math.isfinite(a) for a in aucs)
              and all(a >= b - margin for a, b in zip(aucs[:-1], aucs[1:]))
              and _beats(aucs[0], aucs[-1], margin))
        report.claim(f"{name}: smaller noise parameters give faster convergence ({which})", ok,
                     "mean test accuracy over the run, smallest noise first: "
                     + ", ".join(f"{lab}: {a:.4f} (final {f:.4f})"
                                 for lab, a, f in zip(labels, aucs, fin))
                     + f"; margin {margin:.3f}" + _learning_note(dict(zip(labels, aucs)), margin))
    finals = [float(eps[lab][-1]) for lab in labels]
    finals_pa = [float(eps_pa[lab][-1]) for lab in labels]
    report.claim("Smaller privacy noise gives a smaller cumulative epsilon (paper's Sec. IV-A, "
                 "Remark 13)", _ordered(finals[::-1]) and finals[0] < finals[-1],
                 "Lemma 5 gives the opposite: epsilon at k = K, smallest noise first: "
                 + ", ".join(f"{lab}: {e:.4g}" for lab, e in zip(labels, finals))
                 + " (per-agent-form factors: "
                 + ", ".join(f"{e:.4g}" for e in finals_pa) + ")")
    report.claim("Lemma 5: epsilon is proportional to 1/sigma, so smaller noise gives a larger "
                 "epsilon", finals[0] > finals[-1] and finals_pa[0] > finals_pa[-1],
                 ", ".join(f"{lab}: {e:.4g}" for lab, e in zip(labels, finals)))


def _scheme_table(report, rows, extra: list[str]) -> None:
    report.table("Step sizes, sampling number and noise scales (verified, as run)", rows)
    for line in extra:
        report.note(line)


def _conditions_table(report, caption: str, conds) -> None:
    report.table(caption, [{"condition": c.name, "value": c.value,
                            "holds": "yes" if c.holds else "NO", "source": c.source}
                           for c in conds])


def _rho_a_note(report, s: Scheme, graph) -> None:
    """rho_A of Lemma 2 at the run's step sizes for illustrative L, mu (unknown for a CNN)."""
    rows = []
    for L, mu in ((1.0, 0.1), (0.1, 0.01), (10.0, 1.0)):
        for rho in ("norm", "radius"):
            r = spectral_radius(lemma2_matrix(graph, s.alpha, s.beta, s.gamma, L, mu, rho))
            rows.append({"L": L, "mu": mu, "rho_X as": f"spectral {rho}", "rho_A": r,
                         "rho_A < 1": "yes" if r < 1 else "NO", "3 gamma L < 1":
                         "yes" if 3 * s.gamma * L < 1 else "NO"})
    report.table(f"Assumption 6 for {s.name} (alpha={s.alpha:g}, beta={s.beta:g}, "
                 f"gamma={s.gamma:g}): Lemma 2's rho_A for illustrative (L, mu); a neural "
                 "network's L and PL constant mu are unknown", rows)


def noise_free(s: Scheme):
    """The scheme's step sizes and m without privacy noise (push-pull gradient tracking)."""
    from ..algorithms import DirectedDPGT

    return DirectedDPGT(s.alpha, s.beta, s.gamma, batch=s.m, form=FORM)


def _run_schemes(report, fig: str, title: str, entries: list[tuple[str, Scheme]],
                 quick: bool) -> tuple[dict, dict, dict, dict, dict]:
    size = run_size(quick)
    graph = graphs.cwz_fig1()
    setups = _setups(size)
    _common_settings(report, size, setups, graph)
    rows = [describe_scheme(report, lab, s) for lab, s in entries]
    curves: dict[str, dict[str, dict]] = {name: {} for name in setups}
    for name, st in setups.items():
        for lab, s in entries:
            alg = s.algorithm(FORM)
            cap = min(st.problem.m, size.batch_cap or st.problem.m)
            if cap < s.m:
                alg.batch = cap
                report.note(f"{name}: the run's minibatches have {cap} samples instead of "
                            f"m = {s.m} ({'quick variant' if size.quick else 'local data'})")
            curves[name][lab] = run_curve(lab, alg, st, graph, size)
        for sname in sorted({s.name for _, s in entries}):
            s = next(sc for _, sc in entries if sc.name == sname)
            alg = noise_free(s)
            cap = min(st.problem.m, size.batch_cap or st.problem.m)
            alg.batch = min(alg.batch, cap)
            curves[name][f"{sname} steps, no noise"] = run_curve(f"{sname} steps, no noise", alg,
                                                                 st, graph, size)
    report.choice("Each figure adds Algorithm 1 without privacy noise at the same step sizes and "
                  "m (push-pull gradient tracking) as a reference; it is not in the paper")
    d = next(iter(setups.values())).problem.dim
    eps = {lab: scheme_epsilon(s, graph, d) for lab, s in entries}
    eps_pa = {lab: scheme_epsilon(s, graph, d, "per-agent") for lab, s in entries}
    _record(report, fig, setups, curves)
    report.setting("epsilon", f"Lemma 5 over k = 0..{K} for d = {d} (the {next(iter(setups))} "
                   f"model), C = {C_ADJ:g}, l1 constant sqrt(d) C, worst agent")
    eps_rows = []
    for lab, _ in entries:
        e, epa = eps[lab], eps_pa[lab]
        scale = math.sqrt(RESNET18_MNIST_PARAMS / d)
        eps_rows.append({"run": lab, "eps compact form (run)": e[-1],
                         "eps per-agent factors (paper's App. F)": epa[-1],
                         "eps per-agent, C read as an l1 bound": epa[-1] / math.sqrt(d),
                         "eps compact, ResNet-18 d": e[-1] * scale,
                         "eps per-agent, ResNet-18 d": epa[-1] * scale})
    report.table(f"Cumulative epsilon at k = K = {K} (C = {C_ADJ:g}; the last two columns for the "
                 f"standard ResNet-18, d = {RESNET18_MNIST_PARAMS})", eps_rows)
    return setups, curves, eps, eps_pa, {"rows": rows, "graph": graph, "size": size, "d": d}


def _finish(report, fig, setups, curves, eps, eps_pa, title):
    both = {**{f"{k} (compact)": v for k, v in eps.items()},
            **{f"{k} (per-agent factors)": v for k, v in eps_pa.items()}}
    _plot(report, setups, curves, both, "epsilon, Lemma 5 (C = 1, l1 const sqrt(d) C)", title)
    tab = []
    for name, cs in curves.items():
        for lab, c in cs.items():
            tab.append({"dataset": name, "run": lab, "final train acc": _final(c, "train"),
                        "final test acc": _final(c), "mean test acc": _auc(c),
                        "agent 0 final test acc": (c["test_agent0_accuracy"][-1]
                                                   if c.get("iteration") else float("nan")),
                        "diverged at": c.get("diverged_at"), "seconds": c.get("seconds")})
    report.table("Accuracy of the averaged model", tab)


@experiment("cwz-fig2", "Scheme S1 with p_zeta = p_eta in {-0.1, 0.1, 0.2}: accuracy and epsilon",
            PAPER + ", Fig. 2")
def fig2(report, quick: bool) -> None:
    entries = [(f"S1 p={p:g}", s1(p)) for p in S1_P]
    setups, curves, eps, eps_pa, info = _run_schemes(report, "cwz-fig2", "S1", entries, quick)
    s = entries[1][1]
    _scheme_table(report, info["rows"], [])
    ok = (s.alpha == 0.04 and abs(s.beta - 0.75 / 2000 ** 0.66) < 1e-15 and round(s.beta, 3)
          == 0.005 and s.gamma == 0.05 and s.m == 57)
    report.claim("S1 step sizes and sampling number: alpha = 80/2000 = 0.04, beta = "
                 "0.75/2000^0.66 = 0.005, gamma = 100/2000 = 0.05, m = floor(3e-5 2000^1.9) + 1 "
                 "= 57", ok, f"alpha = {s.alpha:.6g}, beta = {s.beta:.6g}, gamma = {s.gamma:.6g},"
                 f" m = {s.m}; sigma_k = (k+1)^p, e.g. sigma_K = 2001^0.1 = "
                 f"{s.sigma(K)[0]:.4g}")
    for lab, sc in entries:
        _conditions_table(report, f"{lab}: Assumption 5 (L = 1 illustrative), Theorem 1's "
                          "exponent and Theorem 3", sc.conditions(info["graph"], L=1.0))
    _noise_claims(report, [e[0] for e in entries], entries, curves, eps, eps_pa, "Theorem 1",
                  _margin(info["size"]))
    _finish(report, "cwz-fig2", setups, curves, eps, eps_pa, "Fig. 2: Scheme S1")


@experiment("cwz-fig3", "Scheme S2 with p_zeta = p_eta in {0.9994, 0.9996, 0.9998}: accuracy "
            "and epsilon", PAPER + ", Fig. 3")
def fig3(report, quick: bool) -> None:
    entries = [(f"S2 p={p:g}", s2(p)) for p in S2_P]
    setups, curves, eps, eps_pa, info = _run_schemes(report, "cwz-fig3", "S2", entries, quick)
    _scheme_table(report, info["rows"], [])
    sig = [round(s.sigma(0)[0], 3) for _, s in entries]
    const = all(s.sigma(0) == s.sigma(K) for _, s in entries)
    report.claim("S2: m = floor(1.002^2000) + 1 = 55 and sigma = p^2000 = 0.301, 0.449, 0.670 "
                 "(constant in k)", all(s.m == 55 for _, s in entries)
                 and sig == [0.301, 0.449, 0.670] and const,
                 f"m = {entries[0][1].m}, sigma = "
                 + ", ".join(f"{s.sigma(0)[0]:.6f}" for _, s in entries))
    for lab, sc in entries:
        _conditions_table(report, f"{lab}: Assumption 6 (without rho_A) and Theorem 4",
                          sc.conditions(info["graph"], L=1.0))
    _rho_a_note(report, entries[1][1], info["graph"])
    _noise_claims(report, [e[0] for e in entries], entries, curves, eps, eps_pa, "Theorem 2",
                  _margin(info["size"]))
    if not quick:
        _noise_sweep(report, setups, curves, info)
    _finish(report, "cwz-fig3", setups, curves, eps, eps_pa, "Fig. 3: Scheme S2")


SWEEP = (0.0449, 0.00449, 0.000449)


def _noise_sweep(report, setups, curves, info) -> None:
    """Not in the paper: S2's steps and m with smaller constant noise, to locate where training
    starts to work and what epsilon that costs (Lemma 5, C = 1)."""
    from ..algorithms import DirectedDPGT
    from ..noise import Laplace

    graph, size, d = info["graph"], info["size"], info["d"]
    rows = []
    for sigma in SWEEP:
        lab = f"S2 steps, sigma={sigma:g}"
        alg = DirectedDPGT(0.1, 0.01, 0.1, batch=55, noise_x=Laplace(sigma),
                           noise_y=Laplace(sigma), form=FORM)
        sc = scheme_s2(K, 0.1, 0.01, 0.1, 1.002, sigma ** (1.0 / K), sigma ** (1.0 / K))
        e, epa = scheme_epsilon(sc, graph, d)[-1], scheme_epsilon(sc, graph, d, "per-agent")[-1]
        for name, st in setups.items():
            c = run_curve(lab, alg, st, graph, size)
            curves[name][lab] = c
            rows.append({"dataset": name, "sigma": sigma, "final test acc": _final(c),
                         "mean test acc": _auc(c), "eps compact": e, "eps per-agent": epa})
    _record(report, "cwz-fig3", setups, {n: {k: v for k, v in cs.items() if "sigma=" in k}
                                          for n, cs in curves.items()})
    report.table("Not in the paper: S2's steps with smaller constant noise (how much noise the "
                 "model tolerates, and the epsilon it would cost)", rows)


@experiment("cwz-fig4", "Scheme S1 (p = 0.1) against S2 (p = 0.9996): accuracy and epsilon",
            PAPER + ", Fig. 4")
def fig4(report, quick: bool) -> None:
    entries = [("S1 p=0.1", s1(0.1)), ("S2 p=0.9996", s2(0.9996))]
    setups, curves, eps, eps_pa, info = _run_schemes(report, "cwz-fig4", "S1 vs S2", entries,
                                                     quick)
    _scheme_table(report, info["rows"], [])
    for name, cs in curves.items():
        a1, a2 = _auc(cs["S1 p=0.1"]), _auc(cs["S2 p=0.9996"])
        mg = _margin(info["size"])
        report.claim(f"{name}: S2 converges faster than S1", _beats(a2, a1, mg),
                     f"mean test accuracy over the run: S2 {a2:.4f}, S1 {a1:.4f}; final: S2 "
                     f"{_final(cs['S2 p=0.9996']):.4f}, S1 {_final(cs['S1 p=0.1']):.4f}; margin "
                     f"{mg:.3f}" + _learning_note({"S1": a1, "S2": a2}, mg))
    e1, e2 = eps["S1 p=0.1"][-1], eps["S2 p=0.9996"][-1]
    p1, p2 = eps_pa["S1 p=0.1"][-1], eps_pa["S2 p=0.9996"][-1]
    report.claim("S1 has the smaller cumulative epsilon (Sec. IV-B, Remark 14)", e1 < e2,
                 f"compact form: S1 {e1:.4g}, S2 {e2:.4g}; per-agent factors: S1 {p1:.4g}, "
                 f"S2 {p2:.4g}")
    _finish(report, "cwz-fig4", setups, curves, eps, eps_pa, "Fig. 4: S1 vs S2")


# ---- Figs. 5 and 6: the baselines ---------------------------------------------------------------

BASELINE_SIGMA = 0.449        # every baseline's noise parameter: S2's sigma at p = 0.9996
COUPLING0 = 0.1               # initial coupling of [36], [39], [41]: with 1.0 all three diverged


def undirected_fig1() -> graphs.Graph:
    """The undirected graph under our Fig. 1 stand-in (union of G_R and G_C, both directions),
    with Metropolis weights: where the undirected baselines [36], [39], [41] run."""
    A = graphs.cwz_fig1().adjacency
    W, _ = graphs.weights_from_adjacency(((A + A.T) > 0).astype(np.float64), "metropolis")
    return graphs.from_weights(W, name="cwz_fig1 undirected (Metropolis)")


def baselines(batch: int, d: int):
    """``{label: (algorithm, graph)}``: [33], [36], [37], [39] = LDOL, [41] with our parameters
    (the paper gives none; see the reports' choices)."""
    from .. import algorithms
    from ..algorithms.kang_wddp import server_graph
    from ..privacy import yan

    server, und = server_graph(N_AGENTS), undirected_fig1()
    s = BASELINE_SIGMA
    q_step = 2.0 / 15                                       # 16 levels on [-1, 1]
    d_inf = yan.sensitivities(C_ADJ, batch, q_step, d)[0]
    trials = yan.min_trials(0.5, d, 1e-6, d_inf)
    return {
        "[33] Kang et al.": (algorithms.KangWDDP(0.1, s, batch), server),
        "[36] Wang & Basar": (algorithms.WangBasarTernary(0.3, 0.6, COUPLING0, 0.55, batch, 1.0,
                                                          1.0 + s), und),
        "[37] Yan et al.": (algorithms.YanBinomial(0.1, batch, 16, 1.0, trials), server),
        "[39] LDOL": (algorithms.LDOL(0.3, 0.6, COUPLING0, 0.55, s * math.sqrt(2.0), 0.01), und),
        "[41] Chen, Wang & Zhang": (algorithms.CWZQuantized(COUPLING0, 0.55, 0.3, 0.6, batch, s,
                                                            0.01), und),
    }


def _baseline_choices(report) -> None:
    report.choice("The paper gives no parameter of any baseline. Ours: every noise parameter "
                  f"{BASELINE_SIGMA} (S2's sigma at p = 0.9996); [33] and [37] (server methods) "
                  "on an emulated server (complete graph, rows p = 1/5) with SGD step 0.1 = S2's "
                  "gamma; [36], [39], [41] (undirected methods) on the undirected union of our "
                  "Fig. 1 digraphs with Metropolis weights, coupling 0.1 (k+1)^-0.55 and step "
                  "0.3 (k+1)^-0.6 (LDOL's v > u > varsigma + 1/2; with coupling 1.0 (k+1)^-0.55 "
                  "all three diverged on MNIST within 10 iterations, at k = 6, 9 and 7, so the "
                  "coupling was lowered once, without further tuning); every method draws m distinct "
                  "samples per agent and iteration, m = 55 (LDOL's all-data gradient replaced by the "
                  f"problems' own {ORACLE_BATCH}-sample minibatch)")
    report.choice("[33]: Gaussian std 0.449 on the gradient, RDP accounting with sampling "
                  "without replacement (its closed form has an unspecified constant). [36]: "
                  "RECONSTRUCTED (paper unavailable offline): ternary quantizer of the clamped "
                  "state (a = 1, b = 1.449), budget Delta_1/(b - a) per release. [37]: 16 levels "
                  "on [-1, 1], Bin(N, 1/2) with the smallest N meeting cpSGD's Theorem 1 "
                  "condition, per-iteration (eps, delta0 = 1e-6) composed (delta' = 1e-5). [39]: "
                  "dpnet's LDOL (eq. (17) of paper 002), Laplace 0.449 (k+1)^0.01, budget with "
                  "the l1 gradient bound C sqrt(d)/(2m). [41]: RECONSTRUCTED: Laplace 0.449 "
                  "(k+1)^0.01 on the state, probabilistic rounding (2^-8), pure epsilon")


def baseline_epsilons(alg, graph, problem, T: int) -> tuple[float, float]:
    """(epsilon, delta) of a baseline over T iterations with paper 003's C (l2)."""
    if alg.name == "ldol":
        c1 = C_ADJ * math.sqrt(problem.dim) / (2.0 * ORACLE_BATCH)
        pg = alg.privacy(problem, graph, iterations=T, l1_gradient_bound=c1)
    else:
        pg = alg.privacy(problem, graph, iterations=T, gradient_bound=C_ADJ)
    return pg.epsilon, pg.delta


BATCH_S2 = 55


class _Dim:
    """Just a dimension and a local sample count (for accountants)."""

    def __init__(self, dim: int, m: int) -> None:
        self.dim, self.m, self.n_agents = dim, m, N_AGENTS


def _model_dim(name: str, size: RunSize) -> int:
    from .. import models

    grey = name == "mnist"
    if size.model == "cnn":
        mod = models.mnist_cnn() if grey else models.cifar_cnn()
    else:
        mod = models.resnet18(in_channels=1 if grey else 3, width=size.width)
    return int(sum(p.numel() for p in mod.parameters()))


@experiment("cwz-fig5", "S2 (p = 0.9996) and S1 (p = 0.1) against [33], [36], [37], [39], [41]: "
            "accuracy", PAPER + ", Fig. 5")
def fig5(report, quick: bool) -> None:
    entries = [("S2 p=0.9996", s2(0.9996)), ("S1 p=0.1", s1(0.1))]
    size = run_size(quick)
    if quick:      # seven methods: one dataset keeps the quick variant quick
        size = replace(size, datasets=size.datasets[:1])
    graph = graphs.cwz_fig1()
    setups = _setups(size)
    _common_settings(report, size, setups, graph)
    _baseline_choices(report)
    rows = [describe_scheme(report, lab, s) for lab, s in entries]
    _scheme_table(report, rows, [])
    curves: dict[str, dict[str, dict]] = {name: {} for name in setups}
    for name, st in setups.items():
        cap = min(st.problem.m, size.batch_cap or st.problem.m)
        for lab, s in entries:
            alg = s.algorithm(FORM)
            alg.batch = min(alg.batch, cap)
            curves[name][lab] = run_curve(lab, alg, st, graph, size)
        for lab, (alg, g) in baselines(min(BATCH_S2, cap), st.problem.dim).items():
            curves[name][lab] = run_curve(lab, alg, st, g, size)
    _record(report, "cwz-fig5", setups, curves)
    for name, cs in curves.items():
        ours = {lab: _auc(cs[lab]) for lab, _ in entries}
        others = {lab: _auc(c) for lab, c in cs.items() if lab.startswith("[")}
        for lab, a in ours.items():
            mg = _margin(size)
            beaten = [o for o, v in others.items() if not _beats(a, v, mg)]
            report.claim(f"{name}: Algorithm 1 with {lab.split()[0]} converges faster than [33], "
                         "[36], [37], [39], [41]", not beaten,
                         f"mean test accuracy over the run: {lab} {a:.4f}; "
                         + ", ".join(f"{o} {v:.4f}" for o, v in others.items())
                         + f"; margin {mg:.3f}" + _learning_note({lab: a, **others}, mg))
    _plot(report, setups, curves, {}, "(epsilon: see cwz-fig6)", "Fig. 5: accuracy vs baselines")
    tab = [{"dataset": name, "run": lab, "final test acc": _final(c), "mean test acc": _auc(c),
            "diverged at": c.get("diverged_at"), "bits per agent": c.get("bits_per_agent"),
            "seconds": c.get("seconds")} for name, cs in curves.items() for lab, c in cs.items()]
    report.table("Accuracy of the averaged model", tab)


@experiment("cwz-fig6", "S2 (p = 0.9996) and S1 (p = 0.1) against [33], [36], [37], [39], [41]: "
            "cumulative (epsilon, delta)", PAPER + ", Fig. 6")
def fig6(report, quick: bool) -> None:
    size = run_size(quick)
    graph = graphs.cwz_fig1()
    name = size.datasets[0]
    d = _model_dim(name, size)
    D = 60000 // N_AGENTS if name == "mnist" else 50000 // N_AGENTS
    if size.per_agent is not None:
        D = min(D, size.per_agent)
    prob = _Dim(d, D)
    report.setting("model / d", f"{name} model of this run size: d = {d} parameters; local "
                   f"datasets of D = {D} samples; C = {C_ADJ:g} (l2) for every method")
    report.setting("graph", "our Fig. 1 stand-in (cwz_fig1) for Algorithm 1; see the choices "
                   "for the baselines' graphs")
    _baseline_choices(report)
    grid = np.unique(np.linspace(1, K + 1, 3 if quick else 41).round().astype(int))
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for lab, s in (("S2 p=0.9996", s2(0.9996)), ("S1 p=0.1", s1(0.1))):
        for form in ("compact", "per-agent"):
            e = scheme_epsilon(s, graph, d, form)
            curves[f"{lab} ({form})"] = (e[grid - 1], np.zeros(len(grid)))
    for lab, (alg, g) in baselines(BATCH_S2, d).items():
        alg.check_graph(g)
        vals = [baseline_epsilons(alg, g, prob, int(T)) for T in grid]
        curves[lab] = (np.array([v[0] for v in vals]), np.array([v[1] for v in vals]))
    rows = []
    for lab, (e, dl) in curves.items():
        rows += [{"method": lab, "iterations": int(T), "epsilon": float(x), "delta": float(y)}
                 for T, x, y in zip(grid, e, dl)]
    report.add_rows(rows)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for lab, (e, dl) in curves.items():
        axes[0].semilogy(grid, np.maximum(e, 1e-300), label=lab)
        axes[1].plot(grid, dl, label=lab)
    axes[0].set(xlabel="iterations", ylabel="cumulative epsilon", title="epsilon (C = 1)")
    axes[1].set(xlabel="iterations", ylabel="delta", title="delta")
    axes[0].legend(fontsize=7)
    report.figure(fig, caption="Fig. 6: cumulative (epsilon, delta)")
    final = {lab: (float(e[-1]), float(dl[-1])) for lab, (e, dl) in curves.items()}
    report.table(f"(epsilon, delta) after {int(grid[-1])} iterations",
                 [{"method": k, "epsilon": v[0], "delta": v[1]} for k, v in final.items()])
    base = {k: v for k, v in final.items() if k.startswith("[")}
    for lab in ("S2 p=0.9996", "S1 p=0.1"):
        for form in ("compact", "per-agent"):
            e, dl = final[f"{lab} ({form})"]
            worse = [k for k, (be, bd) in base.items() if not (e < be and dl <= bd)]
            report.claim(f"Algorithm 1 with {lab.split()[0]} ({form} form's accounting) has "
                         "smaller epsilon and delta than [33], [36], [37], [39], [41]", not worse,
                         f"{lab}: eps {e:.4g}, delta {dl:g}; "
                         + ", ".join(f"{k}: eps {be:.4g}, delta {bd:.3g}"
                                     for k, (be, bd) in base.items()))
