"""Paper 000 (Xie, Yi, Wang, Cao, Ren): PGTC and PPDC, Figs. 2-7 of §V, as engine specs.

* xie-fig2 / xie-fig5: residual ``R_k = min_{t<=k} ||x_t - x^inf||^2`` against k on problem (37)
  (nonconvex logistic) / (38) (``f_i = x^T x + 3 sin(x)^T sin(x) + m_i x^T cos(x)``);
* xie-fig3 / xie-fig6: the same runs against the bits each agent sent;
* xie-fig4 / xie-fig7: accuracy ``||grad f(x^inf)||`` against the noise decay q in
  {0.18, 0.26, ..., 0.90}, with ``s_xi = 0.1`` / ``s_xi = 5``.

Table I's algorithms (PGTC-C1/C2/C3, DiaDSP, PPDC-C1/C2/C3 with Top-2, the 2-bit quantizer and
norm-sign) on n = 6 agents, d = 10, noise ``Lap(s_xi q^k)`` on every noisy state. §V's "except
for s_xi = 0.1 and q = 0.2" contradicts Table I (s_xi = 100, q = 0.1): reading (a) is the
sentence, reading (b) the table; both are run.
"""

from __future__ import annotations

import functools
import math
from typing import Any, cast

import numpy as np
import torch

from ... import compression, graphs, noise, problems
from ...algorithms.base import Algorithm
from ...algorithms.diadsp import DiaDSP
from ...algorithms.pgtc import PGTC
from ...algorithms.ppdc import PPDC
from ...errors import NonFiniteError
from ...rng import Streams
from ...runner import run
from .. import report
from . import DATA, Prose, register
from .engine import Check, Diagnosis, Run, Spec, Table, curve_figure, execute

PROSE = Prose.load(DATA / "xie.toml")
(PROBLEM_37, PROBLEM_38, GRAPH, ALGORITHMS, BITS, READINGS_SET, CEILING, CEILING_AT, MECHANISM,
 PREDICTION, NOISE_SET, HORIZON_SET) = PROSE.texts(
    "problem-37", "problem-38", "graph", "algorithms", "bits", "readings", "ceiling-note",
    "ceiling-reading", "mechanism", "prediction", "noise", "horizon")
N, D, M_SAMPLES, OMEGA, FLOAT_BITS = 6, 10, 200, 5.0, 32
# Fig. 1 is not in the text: the triangular prism, the 3-regular 6-node graph that is not
# bipartite, so the paper's own W (w_ii = 0, w_ij = 1/3) has rho = 1/3 > 0.
EDGES = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (0, 3), (1, 4), (2, 5)]
Q_GRID = tuple(round(0.18 + 0.08 * i, 2) for i in range(10))
READINGS = {"a": (0.1, 0.2), "b": (100.0, 0.1)}   # (s_xi, q): text of §V vs Table I
TAU, QUICK_K, SMALL_M, LAZY = 1e-10, 100, 0.01, "DiaDSP on W_0.2"
# the paper gives no K: each is long enough for the slowest linear rate of its setting to reach
# R <= TAU (PPDC on (37) with s_v = 0: k ~ 6000; (38) reading (b) with m_i x 0.01: k ~ 3700)
HORIZON = {("37", "a"): 10000, ("37", "b"): 1500, ("38", "a"): 5000, ("38", "b"): 6000}
SEEDS = {("37", "a"): (0, 1, 2), ("37", "b"): (0,), ("38", "a"): (0, 1), ("38", "b"): (0,)}


def table_i(s: float, q: float, v_scale: float = 1.0) -> dict[str, Algorithm]:
    """Table I's algorithms with noise ``Lap(s q^k)`` (PPDC's xi_v: ``v_scale s q^k``). The
    norm-sign rows have alpha >= 1/r = 2/d (Assumption 5 fails): run anyway, as in the paper."""
    top2, c2, c3, sv = compression.TopK(2), compression.BiasedQuantizer(2), \
        compression.NormSign(), v_scale * s
    return {"PGTC-C1": PGTC(0.1, 0.2, 0.5, 0.5, top2, s, s, q=q),
            "PGTC-C2": PGTC(0.1, 0.2, 0.5, 0.5, c2, s, s, q=q),
            "PGTC-C3": PGTC(0.15, 0.1, 0.5, 0.5, c3, s, s, q=q, check_theory=False),
            "DiaDSP": DiaDSP(0.15, noise.Laplace(s, decay=q), noise.Laplace(s, decay=q)),
            "PPDC-C1": PPDC(0.015, 45, OMEGA, 0.2, top2, s, sv, q=q),
            "PPDC-C2": PPDC(0.01, 45, OMEGA, 0.2, c2, s, sv, q=q),
            "PPDC-C3": PPDC(0.01, 25, OMEGA, 0.2, c3, s, sv, q=q, check_theory=False)}


def graph() -> graphs.Graph:
    """The experiments' 6-agent graph: the triangles 0-1-2 and 3-4-5 joined by the edges 0-3, 1-4, 2-5,
    weight 1/3 on every edge (W = A / 3, zero diagonal)."""
    return graphs.from_edges(N, EDGES, weights=1.0 / 3.0)


def lazy_graph(gamma: float = 0.2) -> graphs.Graph:
    """``W_gamma = (1 - gamma) I + gamma W``: PGTC's mixing of its decoded states; DiaDSP on it
    is PGTC-C1 without compression."""
    return graphs.from_weights((1 - gamma) * np.eye(N) + gamma * graph().W, name="W_0.2")


@functools.lru_cache(maxsize=8)
def problem(which: str, m_scale: float = 1.0) -> problems.Problem:
    """(37) or (38) from data seed 0; ``m_scale`` multiplies the m_i of (38)."""
    if which == "37":
        return problems.NonconvexLogistic.random(N, M_SAMPLES, D, seed=0, lam=1e-3, alpha=1.0)
    # SinCos takes an array of the m_i too (it is annotated Sequence[float])
    return problems.SinCos(cast(Any, problems.SinCos.random(N, D, seed=0).m.numpy() * m_scale), D)


def fit_rate(R: np.ndarray, floor: float = 1e-22) -> dict:
    """Least-squares slope of ``log10 R_k`` over the k <= 0.9 K (the last 10% approach
    x^inf = x_K by construction) with ``0.1 R_0 >= R_k >= floor max(1, R_0)``: the contraction
    ``rate`` (``R_{k+1} ~ rate R_k``), the fit's ``r2`` and the first k with ``R_k <= TAU``."""
    hit = np.nonzero(R <= TAU)[0]
    out = {"rate": math.nan, "r2": math.nan, "k_tau": float(hit[0]) if hit.size else math.inf}
    lo, below = np.nonzero(R <= 0.1 * R[0])[0], np.nonzero(R <= floor * max(1.0, R[0]))[0]
    if not lo.size:
        return out
    k0, k1 = int(lo[0]), min(int(below[0]) if below.size else len(R) - 1, int(0.9 * (len(R) - 1)))
    if k1 - k0 < 10:
        return out
    k, y = np.arange(k0, k1 + 1), np.log10(np.maximum(R[k0:k1 + 1], 1e-300))
    slope, icept = np.polyfit(k, y, 1)
    resid = y - (slope * k + icept)
    r2 = 1.0 - float(resid @ resid) / max(float(((y - y.mean()) ** 2).sum()), 1e-300)
    return {**out, "rate": float(10 ** slope), "r2": r2}


def simulate(method: str, which: str, s: float, q: float, K: int, seed: int,
             v_scale: float = 1.0, m_scale: float = 1.0, to_zero: bool = False,
             tol: float = 1e-6, curve: bool = True) -> dict:
    """One run from ``x_i(0) ~ U[0,1]^d`` (seed); x^inf = x_K (``to_zero``: x* = 0). Status
    "converged" when x moved by at most ``tol (1 + ||x_K - x_0||)`` over the last 5% of K (a
    geometric approach has shrunk its steps by orders of magnitude by then, a drift or an
    oscillation has not), "no limit" otherwise, "diverged" when non-finite or |x| > 1e6."""
    alg = table_i(s, q, v_scale)["DiaDSP" if method == LAZY else method]
    prob = problem(which, m_scale)
    xs = np.empty((K + 1, N, D))
    xs[0] = prob.default_x0(seed).numpy()
    out = {"status": "", "accuracy": math.nan, "rate": math.nan, "r2": math.nan,
           "k_tau": math.inf, "bits_tau": math.inf, "bits_per_iter": math.nan}
    blank = {"iteration": [0], "residual": [math.nan], "bits_per_agent": [0.0]} if curve else {}
    try:
        res = run(alg, prob, lazy_graph() if method == LAZY else graph(), K, seed=seed,
                  log_every=K, reference=None, float_bits=FLOAT_BITS,
                  callback=lambda k, state: xs.__setitem__(k, state["x"].numpy()))
    except NonFiniteError as err:
        return {**out, **blank, "status": f"diverged at k={err.iteration}"}
    x = res.x
    if not np.all(np.abs(x) < 1e6):
        return {**out, **blank, "status": "diverged (|x| > 1e6)"}
    moved = np.linalg.norm(x - xs[K - max(1, K // 20)])
    out["status"] = "converged" if moved <= tol * (1 + np.linalg.norm(x - xs[0])) else "no limit"
    out["accuracy"] = float(prob.global_grad(torch.as_tensor(x.mean(0))).norm())
    if not curve:
        return out
    R = np.minimum.accumulate(((xs - (0.0 if to_zero else x)) ** 2).sum(axis=(1, 2)))
    bits = np.concatenate([[0.0], np.cumsum(res.ledger.per_iteration(K) / N)])
    fit, k = fit_rate(R), np.arange(0, int(0.9 * K) + 1, max(1, K // 500))
    return {**out, **fit, "bits_per_iter": float(bits[1]), "R0": float(R[0]), "RK": float(R[-1]),
            "bits_tau": float(bits[int(fit["k_tau"])]) if fit["k_tau"] < math.inf else math.inf,
            "iteration": k.tolist(), "residual": R[k].tolist(), "bits_per_agent": bits[k].tolist()}


def _run(tags: dict, **params) -> Run:
    """A run of :func:`simulate` with every argument a counterfactual may change spelled out."""
    return Run(simulate, {"v_scale": 1.0, "m_scale": 1.0, **params}, tags)


def _f(x, spec: str = ".3g") -> str:
    return format(float(x), spec) if math.isfinite(float(x)) else "n/a"


def _verdict(ok: bool, quick: bool, settled: bool = False):
    """A quick horizon that fails before its runs converged cannot tell (undecided)."""
    return True if ok else (False if not quick or settled else None)


def _on_ppdc(**change):
    return lambda r: r.replace(**change) if r.params["method"].startswith("PPDC") else r


V_OFF = Diagnosis("v-off", _on_ppdc(v_scale=0.0))
CURVATURE = Diagnosis("curvature", lambda r: r.replace(m_scale=SMALL_M)
                      if r.tags.get("reading") == "b" else r)


def _settings(which: str, **extra):
    def settings(quick: bool) -> dict:
        return {"problem": (PROBLEM_37 if which == "37" else PROBLEM_38)(),
                "graph": GRAPH(edges=EDGES, rho=graph().spectral_gap()), "algorithms": ALGORITHMS(),
                "bits": BITS(float_bits=FLOAT_BITS), **{k: v(quick) for k, v in extra.items()}}
    return settings


# ---- residual figures (2, 3, 5, 6) -----------------------------------------------------------

def _residual_runs(which: str):
    def runs(quick: bool) -> list[Run]:
        methods = [*table_i(0.1, 0.2), *([LAZY] if which == "38" else [])]
        out = [_run(dict(reading=r, method=m, seed=seed), method=m, which=which, s=s, q=q,
                    K=QUICK_K if quick else HORIZON[(which, r)], seed=seed)
               for r, (s, q) in READINGS.items()
               for seed in ((0,) if quick else SEEDS[(which, r)]) for m in methods]
        if which == "38":          # the m_i sensitivity of reading (b), and catalogue 1.D.3
            out += [_run(dict(reading="b-small-m", method=m, seed=0), method=m, which=which,
                         s=100.0, q=0.1, K=QUICK_K if quick else HORIZON[("38", "b")], seed=0,
                         m_scale=SMALL_M) for m in methods]
            out += [_run(dict(reading="noise-free", method=m, seed=0), method=m, which=which,
                         s=0.0, q=0.5, K=QUICK_K if quick else 3000, seed=0, to_zero=True)
                    for m in methods]
        return out
    return runs


def _rates(t: Table) -> dict[str, dict]:
    """Per method over seeds: statuses, median fitted rate, worst r2, median iterations and bits
    to R <= TAU (inf unless every seed converged and got there)."""
    out = {}
    for m in t.unique("method"):
        rows = t.where(method=m).rows
        ok = all(r["status"] == "converged" for r in rows)
        fits = [r for r in rows if r["status"] == "converged" and math.isfinite(float(r["rate"]))]
        med = {key: float(np.median(v)) if ok and all(map(math.isfinite, v)) else math.inf
               for key in ("k_tau", "bits_tau") for v in [[float(r[key]) for r in rows]]}
        out[m] = {"algorithm": m, "status": ", ".join(sorted({r["status"] for r in rows})),
                  "rate": float(np.median([float(r["rate"]) for r in fits])) if fits else math.nan,
                  "fit r2": min((float(r["r2"]) for r in fits), default=math.nan),
                  "iterations to R<=1e-10": med["k_tau"],
                  "bits/agent/iteration": float(rows[0]["bits_per_iter"]),
                  "bits to R<=1e-10": med["bits_tau"], "converged": ok}
    return out


def _rate_table(reading: str):
    def table(t: Table, quick: bool):
        return (f"Reading ({reading}){f' = Table I with m_i x {SMALL_M:g}' if reading[1:] else ''}"
                ": fitted rates and costs (medians over seeds)",
                [{k: v for k, v in row.items() if k != "converged"}
                 for row in _rates(t.where(reading=reading)).values()])
    return table


def _linear(reading: str):
    def pred(t: Table, quick: bool):
        rt = _rates(t.where(reading=reading))
        bad = [m for m, v in rt.items() if m.startswith(("PGTC", "PPDC"))
               and not (v["converged"] and v["rate"] < 1 and v["fit r2"] >= 0.9)]
        return _verdict(not bad, quick), "; ".join(
            f"{m}: rate {_f(v['rate'], '.4f')}, r2 {_f(v['fit r2'], '.3f')}, {v['status']}"
            for m, v in rt.items())
    return pred


def _rate_match(reading: str):
    def pred(t: Table, quick: bool):
        rt = _rates(t.where(reading=reading))
        base = rt["DiaDSP"]["rate"]
        ratio = {m: math.log(v["rate"]) / math.log(base) if 0 < v["rate"] < 1 and 0 < base < 1
                 else math.nan for m, v in rt.items() if m.startswith("PGTC")}
        best = max((v for v in ratio.values() if math.isfinite(v)), default=math.nan)
        return _verdict(best >= 0.8, quick, all(rt[m]["converged"] for m in [*ratio, "DiaDSP"])), \
            f"DiaDSP rate {_f(base, '.4f')}; ratios: " + ", ".join(f"{m}: {_f(v, '.2f')}"
                                                                  for m, v in ratio.items())
    return pred


def _fewer_bits(reading: str, base: str):
    def pred(t: Table, quick: bool):
        rt = _rates(t.where(reading=reading))
        comp = [m for m in rt if m.startswith(("PGTC", "PPDC"))]
        b = rt[base]["bits to R<=1e-10"]
        fewer = sum(rt[m]["bits to R<=1e-10"] < b for m in comp)
        return _verdict(fewer > len(comp) / 2, quick, all(rt[m]["converged"] for m in
                                                          [*comp, base])), (
            f"{fewer}/{len(comp)} fewer; {base}: {_f(b)} bits/agent; "
            + ", ".join(f"{m}: {_f(rt[m]['bits to R<=1e-10'])}" for m in comp))
    return pred


def _slower(reading: str, key: str):
    def pred(t: Table, quick: bool):
        rt = _rates(t.where(reading=reading))
        pairs = [(f"PGTC-C{j}", f"PPDC-C{j}") for j in (1, 2, 3)]
        slower = sum(rt[b][key] > rt[a][key] for a, b in pairs)
        return _verdict(slower >= 2, quick, all(rt[m]["converged"] for p in pairs for m in p)), \
            "; ".join(f"C{j}: PGTC {_f(rt[a][key])} vs PPDC {_f(rt[b][key])}"
                      for j, (a, b) in enumerate(pairs, 1))
    return pred


def _noise_free(t: Table, quick: bool):
    rows = t.where(reading="noise-free").rows
    ok = all(float(r["RK"]) <= 1e-10 * float(r["R0"]) and float(r["rate"]) < 1
             and float(r["r2"]) >= 0.9 for r in rows if r["method"].startswith(("PGTC", "PPDC")))
    return _verdict(ok, quick), "; ".join(
        f"{r['method']}: rate {_f(r['rate'], '.4f')}, ||x_K||^2 {_f(r.get('RK', 'nan'), '.1e')}"
        for r in rows)


def _gradient_ceiling(prob, directions: int = 500, radius: float = 100.0) -> float:
    """max ||grad f(radius e)|| over random unit directions e: the largest gradient of a problem
    whose gradients saturate at infinity."""
    E = torch.from_numpy(np.random.default_rng(0).standard_normal((directions, D)))
    return max(float(prob.global_grad(radius * e / e.norm()).norm()) for e in E)


def _noise_sum(s: float, q: float, purpose: str, seed: int, K: int = 100) -> float:
    """``||sum_{t<K} sum_i xi_{i,t}|| / n`` of a run's own draws (later terms are below rounding
    for q <= 0.2)."""
    lap, rng, agents = noise.Laplace(s, decay=q), Streams(seed), np.arange(N)
    # a tensor: K >= 1 terms (sum's start 0 is only its type's other case)
    return float(cast(torch.Tensor, sum(lap.sample(rng, purpose, t, agents, N, D).sum(0)
                                        for t in range(K))).norm()) / N


def _ceiling_note(report, t: Table, quick: bool) -> None:
    """Why PPDC (and reading (b)) find no limit on (37): the seed count, and the v-noise scaled
    by eta on the runs themselves."""
    sup = _gradient_ceiling(problem("37"))
    need = [OMEGA * _noise_sum(*READINGS["a"], "noise_v", seed) for seed in range(20)]
    report.note(CEILING(sup=sup, median=np.median(need), above=sum(v > sup for v in need),
                        measured="; ".join(CEILING_AT(r=r, y=_noise_sum(*READINGS[r], "noise_y", 0),
                                                      v=OMEGA * _noise_sum(*READINGS[r], "noise_v", 0))
                                           for r in READINGS)))
    K = QUICK_K if quick else HORIZON[("37", "a")]
    res = execute([_run({"eta": v}, method="PPDC-C1", which="37", s=0.1, q=0.2, K=K, seed=0,
                        v_scale=v, curve=False) for v in (1.0, 0.3, 0.1, 0.03, 0.0)])
    report.table(MECHANISM(K=K), [{"eta": r["eta"], "status": r["status"], "||grad f(xbar_K)||":
                                   r["accuracy"], "eta omega ||sum xi_v|| / n": r["eta"] * need[0]}
                                  for r in res])


def _residual_claims(which: str, axis: str) -> list[Check]:
    out = []
    for r in ("a", "b"):
        kw: dict = {"case": r, "fields": {"reading": r}}
        if which == "37":
            kw.update({"diagnosis": V_OFF} if r == "a" else {"not_applicable": "sentence-sets-a"})
        elif r == "b":
            kw["diagnosis"] = CURVATURE
        if axis == "iterations":
            out.append(Check("linear", _linear(r), **kw))
        for base in ((("DiaDSP", LAZY) if which == "38" else ("DiaDSP",))
                     if axis == "bits" else ()):
            out.append(Check("fewer-bits", _fewer_bits(r, base), **{
                **kw, "case": r + ("-w0.2" if base == LAZY else ""),
                "fields": {"reading": r, "base": base}}))
        if which == "37" and axis == "iterations":
            out.append(Check("rate-match", _rate_match(r), case=r, fields={"reading": r},
                             not_applicable=kw.get("not_applicable")))
        if which == "38":
            unit = "iteration" if axis == "iterations" else "bit"
            out.append(Check("slower", _slower(r, f"{'iterations' if unit == 'iteration' else 'bits'}"
                                               " to R<=1e-10"),
                             **{**kw, "fields": {"reading": r, "unit": unit}}))
    if which == "38" and axis == "iterations":
        out += [Check("linear-small-m", _linear("b-small-m")), Check("noise-free", _noise_free)]
    return out


def _residual_spec(name: str, which: str, axis: str) -> Spec:
    fig, main = name[-1], "a" if which == "37" else "b"
    readings = ["a", "b", "b-small-m"] if which == "38" else ["a", "b"]

    def plot(r: str):      # R_k hits exact zero once x_k = x_K in floating point: show to 1e-32
        s, q = READINGS[r[0]]
        m = f", m_i x {SMALL_M:g}" if r[1:] else ""
        return curve_figure("residual", "method", x="iteration" if axis == "iterations"
                            else "bits_per_agent", where={"reading": r}, seed=0,
                            ylabel="R_k = min_{t<=k} ||x_t - x^inf||^2",
                            title=f"({which}), reading ({r[0]}): s_xi = {s:g}, q = {q:g}{m}; seed 0",
                            caption=f"Fig. {fig}, reading ({r[0]}): s_xi = {s:g}, q = {q:g}{m}",
                            suffix="" if r == main else f"reading-{r}", floor=1e-32)

    return Spec(
        name, PROSE, _residual_runs(which), _residual_claims(which, axis), fields=_fields(fig),
        settings=_settings(
            which, readings=lambda quick: READINGS_SET(main=main),
            horizon=lambda quick: f"{QUICK_K} iterations, seed 0, both readings" if quick else
            "; ".join(f"reading ({r}): {HORIZON[(which, r)]} iterations, seeds "
                      f"{SEEDS[(which, r)]}" for r in READINGS)),
        figures=[plot(r) for r in readings],
        tables=[*map(_rate_table, readings)],
        analysis=[_ceiling_note] if which == "37" else [])


def _fields(fig) -> dict:
    return dict(fig=fig, tau=TAU, small_m=SMALL_M, k_37a=HORIZON[("37", "a")],
                k_38b=HORIZON[("38", "b")])


# ---- accuracy against q (figs 4, 7) ---------------------------------------------------------

def _acc(t: Table):
    """Median accuracy over seeds (diverged runs left out), converged runs per (method, q), the
    families, and whether every run of some methods converged."""
    qs, n = t.unique("q"), len(t.unique("seed"))
    med, conv = {}, {}
    for m in t.unique("method"):
        for q in qs:
            rows = t.where(method=m, q=q)
            vals = [v for v in rows.values("accuracy") if math.isfinite(v)]
            med[(m, q)] = float(np.median(vals)) if vals else math.nan
            conv[(m, q)] = sum(r["status"] == "converged" for r in rows)
    fam = {f: [m for m in t.unique("method") if m.startswith(f)] for f in ("PGTC", "PPDC", "DiaDSP")}
    return med, conv, qs, fam, lambda labs: all(conv[(m, q)] == n for m in labs for q in qs), \
        lambda labs: (f"{sum(conv[(m, q)] for m in labs for q in qs)}/{len(labs) * len(qs) * n} "
                      "runs converged")


def _same_as(base: str):
    def pred(t: Table, quick: bool):
        med, _, qs, fam, settled, count = _acc(t)
        dev = max(abs(med[(m, q)] / med[(base, q)] - 1) for m in fam["PGTC"] for q in qs)
        return _verdict(dev <= 0.1, quick, settled(fam["PGTC"] + [base])), (
            f"max |PGTC/{base} - 1| = {_f(dev)}; PGTC: {count(fam['PGTC'])}; {base}: "
            f"{count([base])}")
    return pred


def _spread(t: Table, quick: bool):
    med, _, qs, fam, settled, _ = _acc(t)
    spread = max((max(v) - min(v)) / min(v) for v in ([med[(m, q)] for m in fam["PGTC"]]
                                                       for q in qs))
    return _verdict(spread <= 0.1, quick, settled(fam["PGTC"])), \
        f"max relative spread over q = {_f(spread)}"


def _ppdc_worse(t: Table, quick: bool):
    med, _, qs, fam, settled, count = _acc(t)
    ratios = [min(med[(b, q)] for b in fam["PPDC"]) / max(med[(a, q)] for a in fam["PGTC"])
              for q in qs]
    return _verdict(min(ratios) > 1, quick, settled(fam["PGTC"] + fam["PPDC"])), (
        "min PPDC / max PGTC per q: " + ", ".join(f"q={q:g}: {r:.3g}" for q, r in zip(qs, ratios))
        + f"; PPDC: {count(fam['PPDC'])}")


def _degrades(t: Table, quick: bool):
    med, _, qs, fam, settled, _ = _acc(t)
    trend = {}
    for f, labs in [("PGTC", fam["PGTC"]), ("PPDC", fam["PPDC"]), *((m, [m]) for m in
                                                                    fam["DiaDSP"])]:
        y = [float(np.mean([med[(m, q)] for m in labs])) for q in qs]
        trend[f] = (float(np.corrcoef(qs, y)[0, 1]) if all(map(math.isfinite, y)) else math.nan,
                    y[-1] / y[0])
    ok = all(trend[f][0] > 0 and trend[f][1] >= 1.1 for f in ("PGTC", "PPDC"))
    return _verdict(ok, quick, settled(fam["PGTC"] + fam["PPDC"])), "; ".join(
        f"{f}: corr {_f(c, '.2f')}, value(q={qs[-1]:g})/value(q={qs[0]:g}) = {_f(r)}"
        for f, (c, r) in trend.items())


def _predicted(s: float, q: float, omega: float = 1.0) -> float:
    """RMS of ``||grad f(x^inf)||`` at a consensus fixed point: ``omega ||sum_{t,i} xi|| / n``
    with ``E||.||^2 = 2 d s^2 n / (1 - q^2)``."""
    return omega * math.sqrt(2 * D * s * s / (N * (1 - q * q)))


def _accuracy_spec(name: str, which: str, s: float) -> Spec:
    fig = int(name[-1])
    methods = [*table_i(s, 0.5), *([LAZY] if which == "38" else [])]

    def runs(quick: bool) -> list[Run]:
        return [_run(dict(method=m, q=q, seed=seed), method=m, which=which, s=s, q=q,
                     K=120 if quick else 1000, seed=seed, tol=1e-4, curve=False)
                for q in ((0.18, 0.9) if quick else Q_GRID)
                for seed in ((0,) if quick else (0, 1, 2)) for m in methods]

    def figure(t: Table, quick: bool):
        med, _, qs, _, _, _ = _acc(t)
        f, ax = report.figure(figsize=(7, 4.5))
        for m in methods:
            ax.semilogy(qs, [med[(m, q)] for q in qs], "o-" if m[:4] == "PGTC" else "s--"
                        if m[:4] == "PPDC" else "^:", label=m, ms=4)
        for omega, ls, who in ((1.0, ":", "PGTC/DiaDSP"), (OMEGA, "-.", "PPDC (x omega = 5)")):
            ax.semilogy(qs, [_predicted(s, q, omega) for q in qs], ls, color="gray", lw=2,
                        alpha=0.6, label=f"RMS prediction, {who}")
        ax.set(xlabel="noise decay q", ylabel="||grad f(x^inf)||", title=f"Fig. {fig}: ({which}),"
               f" s_xi = {s:g}, median of {len(t.unique('seed'))} seed(s)")
        ax.legend(fontsize=7)
        return f, f"Fig. {fig}: accuracy against the noise decay rate q"

    def table(t: Table, quick: bool):
        med, conv, qs, _, _, _ = _acc(t)
        return "Median accuracy ||grad f(x^inf)|| over seeds (converged runs / seeds)", [
            {"algorithm": m, **{f"q={q:g}": f"{med[(m, q)]:.3g} ({conv[(m, q)]}/"
                                f"{len(t.unique('seed'))})" for q in qs}} for m in methods]

    def prediction(report, t: Table, quick: bool):
        med, _, qs, fam, _, _ = _acc(t)
        ratio = {f: np.median([med[(m, q)] / _predicted(s, q, omega) for m in fam[f] for q in qs])
                 for f, omega in (("PGTC", 1.0), ("PPDC", OMEGA))}
        report.note(PREDICTION(pgtc=_f(ratio["PGTC"], ".2f"), ppdc=_f(ratio["PPDC"], ".2f")))

    dia = Diagnosis("unstable", lambda r: r.replace(method=LAZY)
                    if r.params["method"] == "DiaDSP" else r)
    checks = [Check("same-as", _same_as(b), dia if which == "38" and b == "DiaDSP" else None,
                    case="" if b == "DiaDSP" else "w0.2", fields={"base": b})
              for b in ("DiaDSP", LAZY)[:1 if which == "37" else 2]]
    checks += [Check("spread", _spread), Check("ppdc-worse", _ppdc_worse),
               Check("degrades", _degrades, Diagnosis("v-tenth", _on_ppdc(v_scale=0.1))
                     if which == "37" else None)]
    return Spec(
        name, PROSE, runs, checks, fields=_fields(fig),
        settings=_settings(which, noise=lambda quick: NOISE_SET(s=s, qs=[0.18, 0.9] if quick else
                                                                list(Q_GRID)),
                           horizon=lambda quick: HORIZON_SET(K=120 if quick else 1000,
                                                             seeds=[0] if quick else [0, 1, 2])),
        figures=[figure], tables=[table],
        analysis=[prediction, *([_ceiling_note] if which == "37" else [])])


register(*(_residual_spec(name, which, axis) for name, which, axis in (
    ("xie-fig2", "37", "iterations"), ("xie-fig3", "37", "bits"), ("xie-fig5", "38", "iterations"),
    ("xie-fig6", "38", "bits"))), _accuracy_spec("xie-fig4", "37", 0.1),
    _accuracy_spec("xie-fig7", "38", 5.0))
