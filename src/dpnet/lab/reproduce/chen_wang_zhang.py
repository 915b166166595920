"""Paper 003 (Chen, Wang & Zhang, DP gradient tracking over directed graphs): Figs. 2-6 as specs.

Algorithm 1 in its compact form (7)-(8), k = 0..K, K = 2000, m-sample minibatch gradients g_k:
``x_{k+1} = x_k - alpha L1 (x_k + zeta_k) - gamma y_k``,
``y_{k+1} = y_k - beta L2 (y_k + eta_k) + g_{k+1} - g_k``, zeta_k, eta_k ~ Lap(sigma_k) per coordinate.

* ``cwz-fig2``: Scheme S1, alpha = 80/K, beta = 0.75/K^0.66, gamma = 100/K, m = floor(3e-5 K^1.9)
  + 1 = 57, sigma_k = (k+1)^p with p = p_zeta = p_eta in {-0.1, 0.1, 0.2};
* ``cwz-fig3``: Scheme S2, alpha = 0.1, beta = 0.01, gamma = 0.1, m = floor(1.002^K) + 1 = 55,
  sigma = p^K for p in {0.9994, 0.9996, 0.9998} (0.301, 0.449, 0.670, constant in k);
* ``cwz-fig4``: S1 (p = 0.1) against S2 (p = 0.9996);
* ``cwz-fig5`` / ``cwz-fig6``: both against [33], [36], [37], [39] (= LDOL) and [41]: accuracy,
  and the cumulative (epsilon, delta) of each method's own accountant.

5 agents on our stand-in for Fig. 1 (:func:`dpnet.graphs.cwz_fig1`); epsilon by Lemma 5 with
C = 1, worst protected agent. The model is the small CNN of :mod:`dpnet.models`, not ResNet-18
(the reports say why); model and data come from :mod:`dpnet.lab.source`.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np
import torch

from ... import checkpoints, graphs, models
from ...algorithms.cwz_quantized import CWZQuantized
from ...algorithms.cwz_schemes import lemma2_matrix, scheme_s1, scheme_s2, spectral_radius
from ...algorithms.directed_dpgt import DirectedDPGT
from ...algorithms.kang_wddp import KangWDDP, server_graph
from ...algorithms.ldol import LDOL
from ...algorithms.wang_basar_ternary import WangBasarTernary
from ...algorithms.yan_binomial import YanBinomial
from ...errors import NonFiniteError
from ...network import Network
from ...noise import Laplace
from ...privacy import chen_wang_zhang as lemma5
from ...privacy import yan
from ...problems import ProblemConstants
from ...rng import Streams
from ...runner import run
from .. import source
from ..store import run_folder
from . import DATA, Prose, register
from .engine import Check, Diagnosis, Run, Spec, Verdict, all_of, curve_figure, execute

PROSE = Prose.load(DATA / "chen_wang_zhang.toml")
SETTINGS = PROSE.group("settings", "graph", "run size", "epsilon")
(DATA_SETTING, UNDECIDED, STEPS, RHO_A, EPS_CAPTION, SWEEP_CAPTION, EPS_FIGURE, FIG6_SETTINGS,
 FIG6_GRAPH, CONDITIONS_2, FIG6_CAPTION) = PROSE.texts(
    "data", "undecided", "steps", "rho-a", "eps-caption", "sweep-caption", "eps-figure",
    "fig6-settings", "fig6-graph", "conditions-2", "fig6-caption")
K, N_AGENTS = 2000, 5
S1_P, S2_P = (-0.1, 0.1, 0.2), (0.9994, 0.9996, 0.9998)
C_ADJ = 1.0                   # Definition 3's C: not given; every epsilon is linear in it
FORM = "compact"
RESNET18_MNIST_PARAMS = 11_172_810
ORACLE_BATCH, BATCH = 57, 55  # LDOL's stand-in for its all-data gradient; the baselines' m
BASELINE_SIGMA = 0.449        # every baseline's noise parameter: S2's sigma at p = 0.9996
COUPLING0 = 0.1               # initial coupling of [36], [39], [41]: with 1.0 all three diverged
SWEEP = (0.1, 0.01, 0.001)    # cwz-fig3, not in the paper: S2's sigma (p = 0.9996) scaled down
CHANCE = 0.1                  # ten classes
# full: the size of the committed reports (ResNet-18 on all data is out of reach: see the choices)
SIZE: dict[bool, dict[str, Any]] = {
    False: dict(iterations=K + 1, every=100, eval_samples=1000, per_agent=None, batch_cap=None),
    True: dict(iterations=1, every=1, eval_samples=20, per_agent=60, batch_cap=4)}
DATASETS = {False: ("mnist",), True: ("mnist", "cifar10")}
FIELDS = dict(c_adj=C_ADJ, baseline_sigma=BASELINE_SIGMA, batch=BATCH, oracle_batch=ORACLE_BATCH)


def s1(p: float):
    """Scheme S1 at K = 2000 with the constants of the experiments (``a1..a4 = 80, 0.75, 100, 3e-5``,
    ``p_alpha, p_beta, p_gamma, p_m = 1, 0.66, 1, 1.9``) and both noise exponents ``p_zeta = p_eta = p``."""
    return scheme_s1(K, 80, 0.75, 100, 3e-5, 1, 0.66, 1, 1.9, p, p)


def s2(p: float):
    """Scheme S2 at K = 2000 with the constants of the experiments
    (``alpha, beta, gamma = 0.1, 0.01, 0.1``, ``p_m = 1.002``) and both noise bases
    ``p_zeta = p_eta = p``."""
    return scheme_s2(K, 0.1, 0.01, 0.1, 1.002, p, p)


def scheme(method: str, p: float):
    """``s1(p)`` for ``method == 'S1'``, else ``s2(p)``."""
    return s1(p) if method == "S1" else s2(p)


def undirected_fig1() -> graphs.Graph:
    """Where the undirected baselines run: the union of G_R and G_C, Metropolis weights."""
    A = graphs.cwz_fig1().adjacency
    W, _ = graphs.weights_from_adjacency(((A + A.T) > 0).astype(np.float64), "metropolis")
    return graphs.from_weights(W, name="cwz_fig1 undirected (Metropolis)")


def baselines(batch: int, d: int, noise: float = 1.0) -> dict:
    """``{label: (algorithm, graph)}``; the paper gives no parameter of any (see the choices).
    ``noise`` scales every noise parameter ([37]'s binomial is set by its own epsilon)."""
    server, und, s = server_graph(N_AGENTS), undirected_fig1(), BASELINE_SIGMA * noise
    d_inf = yan.sensitivities(C_ADJ, batch, 2.0 / 15, d)[0]          # 16 levels on [-1, 1]
    return {
        "[33] Kang et al.": (KangWDDP(0.1, s, batch), server),
        "[36] Wang & Basar": (WangBasarTernary(0.3, 0.6, COUPLING0, 0.55, batch, 1.0,
                                               1.0 + s), und),
        "[37] Yan et al.": (YanBinomial(0.1, batch, 16, 1.0,
                                        yan.min_trials(0.5, d, 1e-6, d_inf)), server),
        "[39] LDOL": (LDOL(0.3, 0.6, COUPLING0, 0.55, s * math.sqrt(2.0), 0.01), und),
        "[41] Chen, Wang & Zhang": (CWZQuantized(COUPLING0, 0.55, 0.3, 0.6, batch, s,
                                                 0.01), und)}


def algorithm(method: str, p: float, noise: float, d: int, batch: int):
    """``(algorithm, graph)``: Algorithm 1 with scheme ``method`` at exponent p and its noise
    scales times ``noise`` (0: noise-free push-pull tracking), or a baseline by its label."""
    if method not in ("S1", "S2"):
        return baselines(min(BATCH, batch), d, noise)[method]
    s = scheme(method, p)

    def lap():   # Laplace(b, power=c) draws Lap(b / (k+1)^c)
        return Laplace(noise, power=-p) if method == "S1" else Laplace(noise * p ** K)

    return DirectedDPGT(s.alpha, s.beta, s.gamma, batch=min(s.m, batch),
                        noise_x=lap(), noise_y=lap(), form=FORM), graphs.cwz_fig1()


# ---- the runs --------------------------------------------------------------------------------

def curve(dataset: str, method: str, p: float, noise: float, iterations: int, every: int,
          eval_samples: int, per_agent: int | None, batch_cap: int | None, seed: int = 0) -> dict:
    """Train/test accuracy of the evaluated model every ``every`` iterations (snapshots in
    :func:`run_folder`, so an interrupted run resumes where it stopped)."""
    problem = source.cnn_problem(dataset, N_AGENTS, per_agent=per_agent, chunk=128,
                                 eval_samples=eval_samples)
    # cnn_problem splits evenly (equal local sizes: m is set) and always gives a test split
    assert problem.m is not None and problem.test is not None
    cap = min(problem.m, batch_cap or problem.m)
    alg, graph = algorithm(method, p, noise, problem.dim, cap)
    snap = run_folder() / "snapshot.pt"
    resume = checkpoints.load(snap) if snap.is_file() else None
    if alg.name == "ldol":   # eq. (17)'s all-data gradient -> the m-sample minibatch of the others
        rng, calls = Streams(seed), iter(range((resume or {}).get("iteration", 0) + 1, 1 << 62))
        # the instance's grad is replaced on purpose (LDOL's oracle): method-assign ignored
        problem.grad = lambda X, agents=None: problem.stochastic_grad(  # type: ignore[method-assign]
            X, rng, next(calls), min(ORACLE_BATCH, cap), agents)
    # Lemma 2's average v1^T x / n is free of the compact form's noise; baselines: plain mean
    w = torch.from_numpy(graph.v1 / graph.n).float() if alg.name == "directed_dpgt" else \
        torch.full((graph.n,), 1.0 / graph.n)
    seen: dict[int, dict] = {}

    def metric(split):
        def value(state, k):
            if k not in seen:
                X = state["x"].float()
                W = torch.cat([(w[:, None] * X).sum(0, keepdim=True), X[:1]])
                tr, te = (problem.evaluate_model(W, s, eval_samples)["accuracy"]
                          for s in ("train", "test"))
                seen[k] = {"train_accuracy": tr[0], "test_accuracy": te[0],
                           "test_agent0_accuracy": te[1]}
            return seen[k][split]
        return value

    names = ("train_accuracy", "test_accuracy", "test_agent0_accuracy")
    out: dict[str, Any]
    start, out = time.perf_counter(), {"diverged_at": None, "n_train": int(problem.m * N_AGENTS),
                                       "n_test": len(problem.test[1]), "d": problem.dim}
    try:
        res = run(alg, problem, graph, iterations, seed=seed, log_every=every, reference=None,
                  metrics={n: metric(n) for n in names}, progress=False,
                  network=Network(graph, dtype=torch.float32, rng=Streams(seed)),
                  checkpoint=lambda snapshot: checkpoints.save(snapshot, snap),
                  checkpoint_every=every, resume=resume)
        out.update({n: [float(v) for v in res.history[n]] for n in ("iteration", *names)})
        out["bits_per_agent"] = float(res.history["bits_per_agent"][-1])
    except NonFiniteError as err:     # keep the curve up to the divergence
        out.update({"iteration": sorted(seen), "diverged_at": int(err.iteration),
                    **{n: [float(seen[k][n]) for k in sorted(seen)] for n in names}})
    if alg.name == "directed_dpgt":   # the noise (7) puts into x per step, against the weights
        s, row = scheme(method, p), float(np.linalg.norm(graph.in_laplacian, axis=1).max())
        sigma = noise * max(s.sigma(0)[0], s.sigma(iterations - 1)[0])
        out["step_noise_ratio"] = s.alpha * row * math.sqrt(2.0) * sigma / float(
            problem.x0.float().pow(2).mean().sqrt())
    return {**out, "seconds": time.perf_counter() - start}


def _ks(points: int) -> list[int]:
    return np.unique(np.linspace(0, K, points).round().astype(int)).tolist()


def alg1_epsilon(method: str, p: float, noise: float, d: int, form: str, points: int,
                 norm: str = "l2", reciprocal: bool = False) -> dict:
    """Lemma 5's cumulative epsilon over k = 0..K (worst agent, C = 1 bounding the ``norm``):
    ``form`` "compact" (factors 1, the form run) or "per-agent" (Appendix F's factors).
    ``reciprocal``: every sigma read as 1/sigma (tests a cause; not a reading of the paper)."""
    s = scheme(method, p)

    def sig(j):
        return lambda k: (1.0 / (noise * s.sigma(k)[j])) if reciprocal else noise * s.sigma(k)[j]

    eps = lemma5.cumulative_epsilon(graphs.cwz_fig1(), s.alpha, s.beta, s.gamma, s.m, C_ADJ, d,
                                    sig(0), sig(1), K, form, norm).max(axis=1)
    ks = _ks(points)
    return {"iteration": ks, "epsilon": eps[ks].tolist(), "delta": [0.0] * len(ks)}


#: the delta of baseline [33]'s (epsilon, delta) account (the reports' value since the start;
#: an (epsilon, delta) accountant is given its delta, none is assumed)
KANG_DELTA = 1e-5


def baseline_epsilon(method: str, noise: float, d: int, D: int, points: int) -> dict:
    """A baseline's (epsilon, delta) after k + 1 iterations by its own accountant (C = 1, l2)."""
    alg, graph = baselines(BATCH, d, noise)[method]
    prob, ks, eps, delta = ProblemConstants(N_AGENTS, d, records_per_agent=D), _ks(points), [], []
    for k in ks:
        pg = alg.privacy(prob, graph, iterations=k + 1, **(
            {"l1_gradient_bound": C_ADJ * math.sqrt(d) / (2.0 * ORACLE_BATCH)}
            if alg.name == "ldol" else {"gradient_bound": C_ADJ / 2}),     # C = 2G = C_ADJ
            **({"delta": KANG_DELTA} if alg.name == "kang_wddp" else {}))
        eps.append(pg.epsilon)
        delta.append(pg.delta)
    return {"iteration": ks, "epsilon": eps, "delta": delta}


@functools.cache
def model_dim(dataset: str = "mnist") -> int:
    m = models.mnist_cnn() if dataset == "mnist" else models.cifar_cnn()
    return int(sum(p.numel() for p in m.parameters()))


def _train(ds, label, method, p, noise, quick, part="paper", **tags) -> Run:
    return Run(curve, dict(dataset=ds, method=method, p=p, noise=noise, **SIZE[quick]),
               {"kind": "accuracy", "dataset": ds, "run": label, "part": part, **tags})


def _eps(label, method, p, quick, noise=1.0, part="paper", **tags) -> list[Run]:
    return [Run(alg1_epsilon, dict(method=method, p=p, noise=noise, d=model_dim(), form=form,
                                   points=3 if quick else 41, norm="l2", reciprocal=False),
                {"kind": "epsilon", "run": f"{label} ({form})", "label": label, "form": form,
                 "part": part, **tags}) for form in ("compact", "per-agent")]


# ---- claims ------------------------------------------------------------------------------------

def _margin(quick: bool) -> float:
    """Accuracy differences below 1/sqrt(evaluation samples) (twice the largest binomial
    standard error) are not read as one run beating another."""
    return 1.0 / math.sqrt(SIZE[quick]["eval_samples"])


def _auc(t, ds, label, at: int | None = None) -> float:
    """Mean test accuracy over the logged iterations (a convergence-speed summary; ``at=-1``:
    the final one); NaN for a diverged run."""
    r = t.one(kind="accuracy", dataset=ds, run=label)
    if r["diverged_at"] is not None or not r["iteration"]:
        return math.nan
    return float(r["test_accuracy"][at]) if at is not None else float(np.mean(r["test_accuracy"]))


def _learns(a: float, mg: float) -> bool:
    return math.isfinite(a) and a > CHANCE + mg


def _faster(a: float, b: float, mg: float) -> bool | None:
    """True: a clearly converges faster than b (it learns, b does less by the margin or
    diverged); False: b clearly faster than a; None: within the margin."""
    if _learns(a, mg) and (not math.isfinite(b) or a > b + mg):
        return True
    return False if _learns(b, mg) and (not math.isfinite(a) or b > a + mg) else None


def _first_beats_rest(a, mg) -> bool | None:
    return all_of(_faster(a[0], b, mg) for b in a[1:])


def _ordered(a, mg) -> bool | None:
    """Smallest noise first: clearly faster than the largest, and no larger noise clearly
    faster than a smaller one."""
    if any(_faster(x, y, mg) is False for x, y in zip(a, a[1:])):
        return False
    return _faster(a[0], a[-1], mg)


def _convergence(labels, rule):
    """A convergence claim per dataset on the runs ``labels(t, ds)``: ``rule(accuracies,
    margin)``; undecided where no run rises above chance or the differences stay within the
    margin; not reproduced if any dataset contradicts it."""
    def pred(t, quick):
        mg, verdicts, texts = _margin(quick), [], []
        for ds in t.where(kind="accuracy").unique("dataset"):
            labs = labels(t, ds)
            a = [_auc(t, ds, lab) for lab in labs]
            learns = any(_learns(x, mg) for x in a)
            verdicts.append(rule(a, mg) if learns else None)
            texts.append(f"{ds}: " + ", ".join(f"{lab} {x:.4f} (final {_auc(t, ds, lab, -1):.4f})"
                                               for lab, x in zip(labs, a))
                         + ("" if verdicts[-1] is not None else " (within the margin: undecided)"
                            if learns else " (every run at chance level 0.1: undecided)"))
        return all_of(verdicts), "mean test accuracy over the run: " + "; ".join(texts) + \
            f"; margin {mg:.3f}"
    return pred


def _baselines_of(label):
    return lambda t, ds: [label] + [r["run"] for r in t.where(kind="accuracy", dataset=ds)
                                    if r["run"].startswith("[")]


def _eps_final(t, label, form="compact") -> float:
    return float(t.one(kind="epsilon", label=label, form=form)["epsilon"][-1])


def _eps_claim(labels, holds):
    """``holds(compact, per_agent)`` on the epsilons at k = K of ``labels``, in order."""
    def pred(t, quick):
        e, pa = ([_eps_final(t, lab, f) for lab in labels] for f in ("compact", "per-agent"))
        return holds(e, pa), "epsilon at k = K: " + ", ".join(
            f"{lab}: {x:.4g}" for lab, x in zip(labels, e)) + " (per-agent factors: " + \
            ", ".join(f"{x:.4g}" for x in pa) + ")"
    return pred


def _smaller_eps_delta(label, form):
    def pred(t, quick):
        row = t.one(kind="epsilon", label=label, form=form)
        base = {r["run"]: (r["epsilon"][-1], r["delta"][-1]) for r in t.where(kind="epsilon")
                if r["run"].startswith("[")}
        return all(row["epsilon"][-1] < e and row["delta"][-1] <= d for e, d in base.values()), \
            f"{label}: eps {row['epsilon'][-1]:.4g}, delta {row['delta'][-1]:g}; " + ", ".join(
                f"{k}: eps {e:.4g}, delta {d:.3g}" for k, (e, d) in base.items())
    return pred


def _s1_steps(t, quick):
    s = s1(0.1)
    return (s.alpha == 0.04 and round(s.beta, 3) == 0.005 and s.gamma == 0.05 and s.m == 57), \
        f"alpha = {s.alpha:.6g}, beta = {s.beta:.6g}, gamma = {s.gamma:.6g}, m = {s.m}; sigma_k " \
        f"= (k+1)^p, e.g. sigma_K = 2001^0.1 = {s.sigma(K)[0]:.4g}"


def _s2_steps(t, quick):
    sig = [s2(p).sigma(0)[0] for p in S2_P]
    return (all(s2(p).m == 55 and s2(p).sigma(0) == s2(p).sigma(K) for p in S2_P)
            and [round(x, 3) for x in sig] == [0.301, 0.449, 0.670]), \
        f"m = {s2(0.9996).m}, sigma = " + ", ".join(f"{x:.6f}" for x in sig)


def _scale_noise(r: Run) -> Run:
    """Every noise x 0.3, except the sweep's own scales and [37]'s (set by its epsilon)."""
    return r if r.tags.get("part") == "sweep" or "noise" not in r.params or \
        r.params.get("method") == "[37] Yan et al." else r.replace(noise=0.3 * r.params["noise"])


NOISE = Diagnosis("noise", _scale_noise)
INVERTED = Diagnosis("inverted", lambda r: r.replace(reciprocal=True) if r.fn is alg1_epsilon else r)
ACCOUNTS = Diagnosis("accounts", lambda r: r.replace(norm="l1") if r.fn is alg1_epsilon else r)
NOISE_WORDS = {k: PROSE.format(PROSE.entry("diagnoses", "noise")[k], {}, "diagnosis noise")
               for k in ("cause", "change")}     # for the undecided claims' counterfactual table


def _undecided_counterfactuals(runs, checks):
    """NOISE's counterfactual also for the claims the paper's noise leaves undecided (every run
    at chance): the same predicate on the same runs with that one change."""
    def hook(report, table, quick):
        rows = []
        for check, claim in zip(checks, report.claims):
            if claim.verdict is Verdict.UNDECIDED and check.diagnosis is NOISE:
                value, measured = check.predicate(execute([_scale_noise(r) for r in runs(quick)]),
                                                  quick)
                rows.append({"claim": claim.text, "verdict": Verdict.of(value).value,
                             "measured": measured})
        if rows:
            report.table(UNDECIDED(**NOISE_WORDS), rows)
    return hook


# ---- settings, tables, figures -------------------------------------------------------------

def _settings(quick: bool) -> dict:
    g, z = graphs.cwz_fig1(), SIZE[quick]
    return SETTINGS(n=g.n, v1=np.round(g.v1, 4).tolist(), v2=np.round(g.v2, 4).tolist(), **z,
                    last=z["iterations"] - 1, split="the whole even split" if z["per_agent"] is
                    None else f"{z['per_agent']} training samples per agent", K=K, d=model_dim(),
                    datasets=", ".join(DATASETS[quick]), c=C_ADJ,
                    capped="; minibatches capped at 4 samples (quick)" if quick else "")


def _data_settings(report, t, quick):
    for ds in t.where(kind="accuracy").unique("dataset"):
        r = t.where(kind="accuracy", dataset=ds).rows[0]
        report.setting(f"data {ds}", DATA_SETTING(**r, n=N_AGENTS, model="MnistCNN" if ds ==
                                                  "mnist" else "CifarCNN"))


def _scheme_tables(entries, conditions: str = ""):
    """Step sizes, m and sigma of ``entries`` and, with a caption, Assumption 5/6 and Theorem
    3/4's conditions on our graph (L = 1 illustrative)."""
    def steps(t, quick):
        return STEPS(), [
            {"run": lab, "alpha": s.alpha, "beta": s.beta, "gamma": s.gamma, "m": s.m,
             "sigma_0": s.sigma(0)[0], "sigma_K": s.sigma(K)[0]}
            for lab, s in ((lab, scheme(m, p)) for lab, m, p in entries)]

    def conds(t, quick):
        return conditions, [{"run": lab, "condition": c.name, "value": c.value,
                             "holds": "yes" if c.holds else "NO", "source": c.source}
                            for lab, m, p in entries
                            for c in scheme(m, p).conditions(graphs.cwz_fig1(), L=1.0)]
    return [steps, conds] if conditions else [steps]


def _rho_a_table(t, quick):
    s, g = s2(0.9996), graphs.cwz_fig1()
    rows = []
    for L, mu in ((1.0, 0.1), (0.1, 0.01), (10.0, 1.0)):
        for rho in ("norm", "radius"):
            r = spectral_radius(lemma2_matrix(g, s.alpha, s.beta, s.gamma, L, mu, rho))
            rows.append({"L": L, "mu": mu, "rho_X as": f"spectral {rho}", "rho_A": r,
                         "rho_A < 1": "yes" if r < 1 else "NO",
                         "3 gamma L < 1": "yes" if 3 * s.gamma * L < 1 else "NO"})
    return RHO_A(s=s), rows


def _eps_table(t, quick):
    d = model_dim()
    rows = []
    for lab in t.where(kind="epsilon", form="compact", part="paper").unique("label"):
        c, pa, r = _eps_final(t, lab), _eps_final(t, lab, "per-agent"), \
            math.sqrt(RESNET18_MNIST_PARAMS / d)
        rows.append({"run": lab, "eps compact form (run)": c,
                     "eps per-agent factors (paper's App. F)": pa,
                     "eps per-agent, C read as an l1 bound": pa / math.sqrt(d),
                     "eps compact, ResNet-18 d": c * r, "eps per-agent, ResNet-18 d": pa * r})
    return EPS_CAPTION(K=K, c=C_ADJ, d=RESNET18_MNIST_PARAMS), rows


def _accuracy_table(t, quick):
    def last(r, key):
        return r[key][-1] if r["diverged_at"] is None and r[key] else math.nan

    return "Accuracy of the averaged model", [
        {"dataset": r["dataset"], "run": r["run"], "final train acc": last(r, "train_accuracy"),
         "final test acc": last(r, "test_accuracy"),
         "mean test acc": _auc(t, r["dataset"], r["run"]),
         "agent 0 final test acc": last(r, "test_agent0_accuracy"),
         "per-step noise / weight RMS": r.get("step_noise_ratio", ""),
         "diverged at": r["diverged_at"], "bits per agent": r.get("bits_per_agent", ""),
         "seconds": r["seconds"]} for r in t.where(kind="accuracy")]


def _sweep_table(t, quick):
    return SWEEP_CAPTION(), [
        {"dataset": r["dataset"], "sigma": r["sigma"],
         "final test acc": _auc(t, r["dataset"], r["run"], -1),
         "mean test acc": _auc(t, r["dataset"], r["run"]), "eps compact": _eps_final(
             t, r["run"]), "eps per-agent": _eps_final(t, r["run"], "per-agent")}
        for r in t.where(kind="accuracy", part="sweep")]


def _accuracy_figures(title):
    return [curve_figure(f"{split}_accuracy", "run", where={"kind": "accuracy"}, logy=False,
                         panels="dataset", title=f"{title}, {split}", suffix=suffix,
                         caption=f"{title}: {split} accuracy of the averaged model")
            for split, suffix in (("test", ""), ("train", "train"))]


def _eps_figure(suffix="epsilon"):
    return curve_figure("epsilon", "run", where={"kind": "epsilon"}, ylabel="cumulative epsilon",
                        suffix=suffix, caption=EPS_FIGURE())


# ---- the specs ---------------------------------------------------------------------------------

REF_P = {"S1": 0.1, "S2": 0.9996}   # noise-free references: one run each, shared by every figure


def _scheme_spec(name: str, fig: int, entries, checks, tables=(), extra=None):
    """Figs. 2-4: Algorithm 1 under ``entries`` = [(label, scheme, p)], its noise-free
    references, and each entry's epsilon in both forms."""
    def runs(quick: bool) -> list[Run]:
        out = []
        for ds in DATASETS[quick]:
            out += [_train(ds, lab, m, p, 1.0, quick) for lab, m, p in entries]
            out += [_train(ds, f"{m} steps, no noise", m, REF_P[m], 0.0, quick, "reference")
                    for m in sorted({e[1] for e in entries})]
        out += [r for lab, m, p in entries for r in _eps(lab, m, p, quick)]
        return out + (extra(quick) if extra else [])

    return Spec(
        name, PROSE, runs, checks, settings=_settings, fields=FIELDS,
        figures=[*_accuracy_figures(f"Fig. {fig}"), _eps_figure()],
        tables=[*tables, _eps_table, _accuracy_table],
        analysis=[_data_settings, _undecided_counterfactuals(runs, checks)])


def _noise_checks(entries, theorem: str, steps: Check) -> list[Check]:
    labels = [e[0] for e in entries]
    return [steps,
            Check("less-noise-faster", _convergence(lambda t, ds: labels, _ordered), NOISE,
                  fields={"theorem": theorem}),
            Check("less-noise-smaller-eps", _eps_claim(labels, lambda e, pa: all(
                x <= y for x, y in zip(e, e[1:])) and e[0] < e[-1]), INVERTED),
            Check("lemma5", _eps_claim(labels, lambda e, pa: e[0] > e[-1] and pa[0] > pa[-1]))]


FIG2 = [(f"S1 p={p:g}", "S1", p) for p in S1_P]
FIG2_SPEC = _scheme_spec("cwz-fig2", 2, FIG2, _noise_checks(FIG2, "Theorem 1", Check(
    "s1-steps", _s1_steps)), _scheme_tables(FIG2, CONDITIONS_2()))


def _sweep_runs(quick: bool) -> list[Run]:
    """Not in the paper: S2 (p = 0.9996) with its sigma x SWEEP, to locate where training starts
    to work and what epsilon that costs (full variant only)."""
    return [] if quick else [
        r for f in SWEEP for lab, sigma in [(f"S2 p=0.9996, sigma x{f:g}",
                                             f * s2(0.9996).sigma(0)[0])]
        for r in [_train(ds, lab, "S2", 0.9996, f, quick, "sweep", sigma=sigma)
                  for ds in DATASETS[quick]] + _eps(lab, "S2", 0.9996, quick, f, "sweep")]


FIG3 = [(f"S2 p={p:g}", "S2", p) for p in S2_P]
FIG4 = [("S1 p=0.1", "S1", 0.1), ("S2 p=0.9996", "S2", 0.9996)]
SCHEME_SPECS = (FIG2_SPEC, _scheme_spec(
    "cwz-fig3", 3, FIG3, _noise_checks(FIG3, "Theorem 2", Check("s2-steps", _s2_steps)),
    [*_scheme_tables(FIG3, "Assumption 6 (without rho_A) and Theorem 4"), _rho_a_table,
     _sweep_table], extra=_sweep_runs), _scheme_spec(
    "cwz-fig4", 4, FIG4, [Check("s2-faster", _convergence(
        lambda t, ds: ["S2 p=0.9996", "S1 p=0.1"], _first_beats_rest), NOISE),
                          Check("s1-smaller-eps", _eps_claim(["S1 p=0.1", "S2 p=0.9996"],
                                                             lambda e, pa: e[0] < e[1]))],
    _scheme_tables(FIG4)))


def _fig5_runs(quick: bool) -> list[Run]:
    ds = "mnist"     # seven methods: one dataset keeps the quick variant quick
    return [_train(ds, lab, m, p, 1.0, quick) for lab, m, p in FIG4[::-1]] + \
        [_train(ds, lab, lab, 0.0, 1.0, quick) for lab in baselines(BATCH, model_dim())]


FIG5_CHECKS = [Check("beats-baselines", _convergence(_baselines_of(lab), _first_beats_rest), NOISE,
                     case=lab[:2], fields={"scheme": lab[:2]}) for lab in ("S2 p=0.9996", "S1 p=0.1")]
FIG5 = Spec(
    "cwz-fig5", PROSE, _fig5_runs, FIG5_CHECKS, settings=_settings, fields=FIELDS,
    figures=_accuracy_figures("Fig. 5"), tables=[*_scheme_tables(FIG4[::-1]), _accuracy_table],
    analysis=[_data_settings, _undecided_counterfactuals(_fig5_runs, FIG5_CHECKS)])


def _fig6_runs(quick: bool) -> list[Run]:
    d, D = model_dim(), SIZE[quick]["per_agent"] or 60000 // N_AGENTS
    return [r for lab, m, p in FIG4[::-1] for r in _eps(lab, m, p, quick)] + \
        [Run(baseline_epsilon, dict(method=lab, noise=1.0, d=d, D=D, points=3 if quick else 41),
             {"kind": "epsilon", "run": lab}) for lab in baselines(BATCH, d)]


register(*SCHEME_SPECS, FIG5, Spec(
    "cwz-fig6", PROSE, _fig6_runs,
    [Check("smaller-eps-delta", _smaller_eps_delta(lab, form), ACCOUNTS, case=f"{lab[:2]}-{form}",
           fields={"scheme": lab[:2], "form": form})
     for lab in ("S2 p=0.9996", "S1 p=0.1") for form in ("compact", "per-agent")], fields=FIELDS,
    settings=lambda quick: {"model / d": FIG6_SETTINGS(d=model_dim(), c=C_ADJ, D=SIZE[quick][
        "per_agent"] or 60000 // N_AGENTS), "graph": FIG6_GRAPH()},
    figures=[_eps_figure(""), curve_figure("delta", "run", where={"kind": "epsilon"}, logy=False,
                                      suffix="delta", caption="Cumulative delta")],
    tables=[lambda t, quick: (FIG6_CAPTION(K=K), [
        {"method": r["run"], "epsilon": r["epsilon"][-1], "delta": r["delta"][-1]}
        for r in t.where(kind="epsilon")])]))
