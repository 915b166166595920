"""The directed-graph task of ``dpnet compare`` and the entries of paper 003 (Chen, Wang & Zhang).

**Task** ``directed_logistic``: the ``logistic`` task's l2-regularised logistic regression
(:func:`~dpnet.lab.compare.tasks.split_binary`, the same 60/20/20 split and 10 agents, a9a by
default, the same record relation: one record replaced, local-gradient sensitivity
``Delta = 2R/m``) over a pair of random strongly connected digraphs as in paper 003's
experiments: ``G_R`` (states) and ``G_C`` (tracking variables) drawn independently by
:func:`dpnet.graphs.random_digraph` (10 agents, a random Hamiltonian cycle plus every other arc
with probability 0.3, seed 0), R with rows summing to 1 (each agent averages its in-neighbours)
and C with columns summing to 1 (each agent splits its tracking variable over its
out-neighbours): neither is doubly stochastic, so only push-pull methods apply.

**Entries** (the mapping of each theorem onto the record relation, ``L = R^2/4 + lambda`` the
public smoothness of one record's loss ``log(1 + exp(-b a^T x)) + (lambda/2)||x||^2`` for any
``||a|| <= R``):

* ``directed_dpgt`` (Scheme S2: constant noise) and ``directed_dpgt_s1`` (Scheme S1: noise
  ``(k+1)^p``): Algorithm 1 in its compact form (7)-(8), full local gradients (``batch=None``,
  so Lemma 4's ``m`` is 1), accountant ``chen_wang_zhang`` (Lemmas 4-5) with Definition 3's
  ``C = Delta = 2R/m`` (``gradient_bound`` = R/m bounds agent i0's local gradient, C = 2G its l2 change at a
  common point; the accountant uses the l1 constant ``sqrt(d) C``). Lemma 4 omits the change of
  ``g_i0`` through ``x_i0 != x'_i0``; in the compact form it is covered: under equal observations
  every mixing term is fixed, so ``Delta y_k = Delta g_k`` (telescoping, ``y_0 = g_0``) and
  ``Delta x_{k+1} = Delta x_k - gamma (grad f(x_k) - grad f(x'_k)) - gamma e_k`` with
  ``||e_k|| <= Delta``; for the convex L-smooth loss and ``gamma <= 2/L`` the gradient step is
  nonexpansive, so ``||Delta x_k|| <= k gamma Delta <= gamma k^2 Delta = Dx[k]`` and
  ``||Delta y_k|| <= (1 + k gamma L) Delta <= (2k + 1) Delta = Dy[k]`` (Lemma 4's recursions with
  a = b = 1), in l2, hence in l1 after the factor sqrt(d). ``build`` refuses ``gamma > 2/L``.
  The per-agent rules (4)/(6) are not benchmarked: there the printed lemma misses the drift
  term, its sound version (``smoothness=L``) grows geometrically in k (a noise factor of
  1e141 at epsilon = 1, gamma = 0.3 over 400 steps on a9a), and with this C (rows not summing
  like its columns) they lose the gradient-sum tracking.
* ``wang_basar_ternary`` ([36], reconstructed) and ``cwz_quantized`` ([41], reconstructed): DSGD
  on an **undirected** graph (not applicable here; they run on the undirected logistic task),
  every local record in the minibatch (``batch = m``), Definition 3's ``C = 2R`` (one record's
  gradient, the regulariser cancels), so the m-sample average moves by ``2R/m = Delta``. Their
  accountants' state recursion ``D_{k+1} = |1 - c_k s_i| D_k + step_k sqrt(d) C/m`` (``s_i =
  sum_{j != i} w_ij``, messages fixed by the observation) also omits the drift of the gradient;
  for the convex loss ``a (x - x') - step (grad f(x) - grad f(x'))`` has norm at most
  ``a ||x - x'||`` when ``0 < a = 1 - c_k s_i`` and ``step <= 2a/L``. ``build`` checks both at
  k = 0, the worst k for the nonincreasing schedules used. Wang-Basar's noise is its ternary
  quantizer's margin ``b - a`` (the messages are clamped to ``[-1, 1]``), which
  :class:`_Ternary` exposes to the common-factor bookkeeping as ``scale_at``.
* ``kang_wddp`` ([33]) and ``yan_binomial`` ([37]) average at a central server: left out
  (:data:`~dpnet.lab.compare.entries.LEFT_OUT`).
* The undirected entries (DiaDSP, PGTC, PPDC, DPP2, DO-ADP) get "not applicable" rows on every
  task over a directed graph (their weight requirements, below); on undirected tasks their
  rows are unchanged.

**Schemes at a fixed horizon.** S1's and S2's step sizes depend on K only, so at the task's fixed
K both are constant steps (alpha = beta, gamma, tuned); what tells them apart is the noise: S2's
``p^K`` is constant in k, S1's ``(k+1)^p`` grows (the calibration sets the common factor). Their
sampling numbers (``floor(a4 K^p_m) + 1``, ``floor(p_m^K) + 1``) are replaced by all m local
records: Lemma 4 credits sampling only through ``C/m``, so fewer records only add noise.

**Grids** (:data:`~dpnet.lab.compare.entries.GRID_TRIALS` = 4 each, run at every horizon of the
task): S2 ``gamma in (0.1, 1)`` x ``alpha = beta in (0.1, 0.5)``; S1 ``gamma in (0.1, 1)`` x
``p in (0.2, 0.6)`` (0.2 is the paper's; 0.6 near ``sigma_k ~ Dx[k]^(1/3)``),
``alpha = beta = 0.5``; Wang-Basar step ``lambda0 in (0.3, 1)`` x its decay ``u in (0.3, 0.6)``
(coupling ``0.1/(k+1)^0.55``); CWZ step ``beta0 in (0.1, 0.3)`` x noise growth
``p_sigma in (0, 0.3)`` (coupling ``1/(k+1)^0.3``, step decay 0.6).

**Horizon and cost.** K = 400 (quick: 80), as the logistic task. Measured on one torch thread:
one calibrated Algorithm 1 trial 1 s, a Lemma 5 calibration 0.2 s, a PLD one 16-21 s; the full
task (2 entries x 4 epsilons x (4 tuning + 3 seeds x 2 accountants) = 80 trials, 32 Lemma 5
and 8 PLD calibrations) about 4 min. The two DSGD baselines add about 2 min to the logistic
task (1.5 s a trial, a PLD calibration of CWZ 6 s).

The privacy guarantees cover what the theorems observe: the messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ... import graphs, noise
from ...algorithms.cwz_quantized import CWZQuantized
from ...algorithms.directed_dpgt import DirectedDPGT
from ...algorithms.wang_basar_ternary import TernaryDP, WangBasarTernary
from ...errors import require
from ...problems import LogisticRegression
from . import tasks
from .entries import Entry, register

#: the task's digraph pair (paper 003's experiments: two different strongly connected digraphs)
DIGRAPH: dict[str, Any] = {"p": 0.3, "seed": 0}
#: Wang-Basar's clamp of the messages (not of the states): a larger one costs quantizer variance
#: ``2 b^2`` with ``b > a`` (a = 3 left the logistic task's rows above the start)
TERNARY_CLAMP = 1.0
REFERENCE_GAMMAS = (0.3, 1.0, 3.0)


def _directed_logistic(spec: tasks.TaskSpec, dataset: str | None) -> tasks.Task:
    ds = dataset or spec.dataset
    problem, evals, f_star, notes = tasks.split_binary(ds, spec.n_agents)
    spec = dataclasses.replace(spec, title=spec.title.format(dataset=ds), dataset=ds)
    g = graphs.random_digraph(spec.n_agents, **DIGRAPH)
    score = tasks.logistic_score(problem, evals, f_star)
    x0 = np.zeros(problem.dim)

    def reference(K: int) -> dict:
        """Noise-free push-pull gradient tracking (Algorithm 1 without noise, full gradients,
        alpha = beta = 0.5), the best of gamma in (0.3, 1, 3) on the test split: what
        :func:`dpnet.lab.compare.references` does with gradient tracking, which needs a doubly
        stochastic W."""
        return tasks.best_noise_free(task, [
            (f"push-pull gradient tracking (alpha = beta = 0.5, gamma = {gamma:g})", gamma,
             DirectedDPGT(0.5, 0.5, gamma)) for gamma in REFERENCE_GAMMAS], K)

    task = tasks.Task(spec, problem, g, problem.m, 1.0, score, x0,
                      (*notes, f"graph: {g!r}, R rows and C columns sum to 1, every agent a "
                               "common root"), exclude=_undirected_only, reference=reference)
    return task


tasks.register(tasks.TaskSpec(
    "directed_logistic", "l2-regularised logistic regression (lambda = 1e-3) on LIBSVM {dataset}, "
    "10 agents (the logistic task's data and split), over two random strongly connected digraphs "
    "G_R, G_C (random_digraph(10, p = 0.3, seed = 0): a Hamiltonian cycle plus each arc w.p. 0.3, "
    "drawn independently; R rows and C columns sum to 1, neither doubly stochastic)",
    "suboptimality f(xbar_K) - f*", 400, 80, _directed_logistic, dataset="a9a",
    reads_dataset=True))


# -- when the mappings hold -------------------------------------------------------------------

def record_smoothness(task) -> float:
    """``L = R^2/4 + lambda``: the smoothness of one record's regularised logistic loss for any
    feature vector with ``||a|| <= R`` (public, data-independent)."""
    return task.R ** 2 / 4 + task.problem.reg


def _convex(task) -> str | None:
    if not isinstance(task.problem, LogisticRegression):
        return ("its accountant omits the gradient's drift between neighbouring runs, which is "
                "shown here to be absorbed for the convex finite-sum logistic loss only "
                f"(LogisticRegression); this task's problem is {type(task.problem).__name__}")
    return None


def _needs_directed(task) -> str | None:
    if not isinstance(task.graph, graphs.DirectedGraph):
        return ("it needs a pair of digraphs R, C (paper 003's Assumption 1); this task's graph "
                "is undirected (its digraph version is the directed_logistic task)")
    return _convex(task)


def _needs_undirected(task) -> str | None:
    if task.graph.directed:
        return ("DSGD on an undirected graph with symmetric weights; this task's digraphs are "
                "not symmetric")
    return _convex(task)


# -- paper 003, Algorithm 1 -------------------------------------------------------------------

def _dpgt(trial: dict, task, s1: bool) -> DirectedDPGT:
    L = record_smoothness(task)
    require(trial["gamma"] <= 2 / L, "gamma", trial["gamma"],
            f"gamma <= 2/L = {2 / L:.4g} (the nonexpansive step that makes Lemma 4 sound here)")
    unit = [noise.Laplace(1.0, power=-trial["p"]) if s1 else noise.Laplace(1.0) for _ in "xy"]
    return DirectedDPGT(trial["alpha"], trial["alpha"], trial["gamma"], batch=None,
                        noise_x=unit[0], noise_y=unit[1])


def _cwz_constants(task) -> dict[str, float]:
    # gradient_bound bounds every local gradient (R/m); the accountants charge C = 2R/m
    return {"gradient_bound": task.sensitivity / 2}


_DPGT_MAPPING = ("paper 003 Lemmas 4-5 (Appendix F), compact form (7)-(8), full local gradients "
                 "(Lemma 4's m = 1) with C = Delta = 2R/m in l2 (l1 constant sqrt(d) C); the "
                 "drift term Lemma 4 omits is covered for the convex loss with gamma <= 2/L, "
                 "L = R^2/4 + lambda: Delta y_k = Delta g_k, ||Delta x_k|| <= k gamma Delta <= "
                 "Dx[k], ||Delta y_k|| <= (1 + k gamma L) Delta <= Dy[k]")

register(Entry("directed_dpgt", tuple({"gamma": g, "alpha": a} for g in (0.1, 1.0)
                                      for a in (0.1, 0.5)),
               lambda t, task: _dpgt(t, task, s1=False), _cwz_constants, "chen_wang_zhang",
               "pld", "Scheme S2 (constant noise, alpha = beta): " + _DPGT_MAPPING,
               inapplicable=_needs_directed))
register(Entry("directed_dpgt_s1", tuple({"gamma": g, "p": p, "alpha": 0.5} for g in (0.1, 1.0)
                                         for p in (0.2, 0.6)),
               lambda t, task: _dpgt(t, task, s1=True), _cwz_constants, "chen_wang_zhang",
               "pld", "Scheme S1 (noise (k+1)^p, alpha = beta = 0.5): " + _DPGT_MAPPING,
               inapplicable=_needs_directed))


# -- the undirected baselines of paper 003 -----------------------------------------------------

def _dsgd_check(task, coupling0: float, step0: float, who: str) -> None:
    """The drift of the gradient is absorbed when ``a_0 = 1 - c_0 max_i s_i > 0`` and
    ``step_0 <= 2 a_0 / L`` (nonincreasing schedules: k = 0 is the worst)."""
    s = float(np.max(task.graph.sparse("L").diagonal()))
    a0 = 1 - coupling0 * s
    L = record_smoothness(task)
    require(a0 > 0 and step0 <= 2 * a0 / L, f"{who} step", step0,
            f"0 < a_0 = 1 - c_0 max_i sum_j w_ij = {a0:.4g} and step_0 <= 2 a_0/L = "
            f"{2 * a0 / L:.4g} (the nonexpansive step that makes the state recursion sound)")


class _Ternary(TernaryDP):
    """Wang-Basar's quantizer with its noise scale, the margin ``b - a``, readable as
    ``scale_at`` (what compare reads to recover a calibration's common factor)."""

    def scale_at(self, k: int, n: int) -> np.ndarray:
        return np.full(n, self.b - self.a)

    def scaled(self, factor: float) -> _Ternary:
        q = super().scaled(factor)
        return _Ternary(q.a, q.b)


def _wang_basar(t: dict, task) -> WangBasarTernary:
    _dsgd_check(task, WB_COUPLING, t["lambda0"], "wang_basar_ternary")
    alg = WangBasarTernary(t["lambda0"], t["u"], WB_COUPLING, WB_COUPLING_DECAY,
                           task.m, TERNARY_CLAMP, TERNARY_CLAMP + 1.0)
    alg.quantizer = _Ternary(TERNARY_CLAMP, TERNARY_CLAMP + 1.0)
    return alg


def _cwz_quantized(t: dict, task) -> CWZQuantized:
    _dsgd_check(task, CWZ_COUPLING, t["beta0"], "cwz_quantized")
    return CWZQuantized(CWZ_COUPLING, CWZ_COUPLING_DECAY, t["beta0"], 0.6, task.m,
                        1.0, t["p_sigma"])


def _record_c(task) -> dict[str, float]:
    return {"gradient_bound": task.R}      # R per record: C = 2R


WB_COUPLING, WB_COUPLING_DECAY = 0.1, 0.55      # paper 003's reproduction's coupling
CWZ_COUPLING, CWZ_COUPLING_DECAY = 1.0, 0.3
_DSGD_MAPPING = ("batch = all m local records, C = 2R per record in l2 (l1 constant sqrt(d) C), "
                 "so the minibatch moves by 2R/m; the state recursion's omitted gradient drift "
                 "is absorbed by the convex loss when 0 < a_0 = 1 - c_0 max_i sum_j w_ij and "
                 "step_0 <= 2 a_0/L, L = R^2/4 + lambda (checked)")

register(Entry("wang_basar_ternary", tuple({"lambda0": s, "u": u} for s in (0.3, 1.0)
                                           for u in (0.3, 0.6)),
               _wang_basar, _record_c, "wang_basar", None,
               f"[36] reconstructed: ternary quantizer (clamp a = {TERNARY_CLAMP:g}), "
               "||D_k||_1/(b - a) per release, basic composition; coupling 0.1/(k+1)^0.55, step "
               "lambda0/(k+1)^u; "
               + _DSGD_MAPPING, inapplicable=_needs_undirected))
register(Entry("cwz_quantized", tuple({"beta0": s, "p_sigma": p} for s in (0.1, 0.3)
                                      for p in (0.0, 0.3)),
               _cwz_quantized, _record_c, "chen_wang_zhang", "pld",
               "[41] reconstructed: Laplace on the state (rounding is post-processing), "
               "sum_k D_k/sigma_k; coupling 1/(k+1)^0.3, step beta0/(k+1)^0.6; " + _DSGD_MAPPING,
               inapplicable=_needs_undirected))


# -- the undirected entries do not run on digraphs ---------------------------------------------

UNDIRECTED_ONLY = {
    "diadsp": "it mixes with a doubly stochastic W on an undirected graph (paper 000, "
              "Assumption 4)",
    "pgtc": "it mixes with a doubly stochastic W on an undirected graph (paper 000, Assumption 4)",
    "ppdc": "it mixes with a doubly stochastic W on an undirected graph (paper 000, Assumption 4)",
    "dpp2": "it needs an undirected graph: a symmetric PSD P with null space span(1) (paper 004)",
    "doadp": "it needs a symmetric doubly stochastic W (paper 001, Assumption 3)",
    "dp_sgd": "its gossip step averages with a doubly stochastic W",
    "decor": "its pairwise secrets live on undirected edges and its gossip step averages with a "
             "doubly stochastic W",
}


def _undirected_only(name: str) -> str | None:
    """Why entry ``name`` does not run on this task's digraphs (None: the entry decides)."""
    if name not in UNDIRECTED_ONLY:
        return None
    return (f"{UNDIRECTED_ONLY[name]}; this task's digraphs have a row-stochastic R and a "
            "column-stochastic C, neither symmetric nor doubly stochastic")
