"""Paper 001 (Huo, Liu, Ding, Johansson, Shi: DO-ADP), Figs. 2-4 and Table II as engine specs.

* huo-fig2a / huo-fig2b: logistic regression, suboptimality ``f(xbar_t) - f(x*)`` at epsilon =
  0.01 for the communication rates 100/80/30/24 % = ``(p, k/d) = (1, 1), (0.8, 1), (1, 0.3),
  (0.8, 0.3)``, and its final value against epsilon;
* huo-fig3: DO-ADP (24 %) against DPDO, DP-DDA (node sampling 24 %) and CPGT (k/d = 0.12);
* huo-table2 / huo-fig4: the MNIST CNN at epsilon in {1, 0.9, 0.8} and the rates 100/80/40/32 %
  (k/d = 0.4): final test accuracy beside Table II and the epsilon = 1 curves (the same runs),
  after a sweep that chooses the clipping bound G.

§VI: n = 20 agents on the circulant graph (i, i +- 1, 2, 3 mod n), W = I - L/7; Algorithm 1 with
(alpha, gamma, beta) = (0.001, 0.05, 0.15) on ``f_i(x) = (1/q) sum_j log(1 + exp(-b_j a_j^T x)) +
||x||^2/(2q)`` (one sample per active agent per step, T = 6 epochs of q steps, x_0 = 0), and
(0.01, 0.05, 0.15) for the CNN; per-sample gradients clipped per coordinate at G/sqrt(d)
(Assumption 2), noise N(0, sigma^2 I_d). a9a and w8a stand in for the epsilon dataset (400k x
2000) when it is not under $DPNET_DATA.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...privacy import huo
from .. import report, source
from . import DATA, Prose, register
from . import _huo_runs as runs
from ._huo_runs import CNN_RATES, DELTA, DELTA0, G_LR, IOTA, N_AGENTS, doadp_sigma
from .engine import Check, Diagnosis, Run, Spec, Table, all_of, changed, execute

PROSE = Prose.load(DATA / "huo.toml")
LR_SETTINGS = PROSE.group("lr", "graph", "loss", "steps", "horizon", "metric")
CNN_SETTINGS = PROSE.group("cnn", "data", "model", "graph", "steps", "training", "evaluation")
(NO_EPSILON, LR_NOTE, NOISE_CAPTION, FIG3_CAPTION, SWEEP_CAPTION, PRIVACY_CAPTION, CNN_NOTE,
 EPS_GRID_SET, FIG2B_CAPTION, FIG3_PRIVACY) = PROSE.texts(
    "no-epsilon", "lr-note", "noise-caption", "fig3-caption", "sweep-caption", "privacy-caption",
    "cnn-note", "eps-grid", "fig2b-caption", "fig3-privacy")
LR_RATES = {"100%": (1.0, 1.0), "80%": (0.8, 1.0), "30%": (1.0, 0.3), "24%": (0.8, 0.3)}
TABLE2 = {1.0: (89.58, 90.26, 90.98, 93.35), 0.9: (88.06, 90.11, 90.75, 91.27),
          0.8: (87.88, 87.91, 90.11, 90.37)}
EPS_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)
SWEEP_G = (1.0, 3.0, 10.0, 30.0)
CNN_EPOCHS, SWEEP_EPOCHS = 8, 2
FIELDS = dict(g_lr=G_LR, delta0=DELTA0, iota=IOTA, sweep_g=list(SWEEP_G), cnn_epochs=CNN_EPOCHS,
              sweep_epochs=SWEEP_EPOCHS, min_iterations=huo.theorem1_min_iterations(1.0, 1.0,
                                                                                    3000, 8))


def lr_datasets() -> list[str]:
    """The datasets of the logistic-regression figures: the paper's ``epsilon`` where it is under the data
    root, else the stand-ins ``a9a`` and ``w8a``."""
    return ["epsilon"] if source.has(["epsilon"]) else ["a9a", "w8a"]


# ---- logistic regression (Figs. 2, 3) ---------------------------------------------------------


def _lr(dataset: str, quick: bool, seed: int, kind: str = "private", method: str = "DO-ADP",
        rate: str = "100%", epsilon: float = 0.01) -> Run:
    """Every logistic run is built here, so identical runs share one cache entry across specs."""
    p, ratio = LR_RATES[rate] if method == "DO-ADP" and kind == "private" else (1.0, 1.0)
    eps = epsilon if kind == "private" else None
    return Run(runs.lr_run, dict(dataset=dataset, method=method, seed=seed, epsilon=eps, p=p,
                            ratio=ratio, accountant="theorem1",
                            clipped=kind != "noise-free, unclipped",
                            subsample=600 if quick else None, epochs=1 if quick else 6),
               {"dataset": dataset, "kind": kind, "method": method, "rate": rate, "epsilon": eps,
                "seed": seed})


def _lr_runs(quick: bool, seeds: int, cases) -> list[Run]:
    """``cases``: (label, method, rate, epsilon) of the private runs; plus the references (the
    same steps without noise, clipped and unclipped)."""
    n = range(1 if quick else seeds)
    return [Run(runs.lr_run, r.params, {**r.tags, "method": label}) for ds in lr_datasets()
            for label, m, rate, e in cases for s in n
            for r in [_lr(ds, quick, s, method=m, rate=rate, epsilon=e)]] + \
        [_lr(ds, quick, s, kind) for ds in lr_datasets() for s in n
         for kind in ("noise-free, clipped", "noise-free, unclipped")]


def _mean(t: Table) -> tuple[float, float]:
    """Mean final suboptimality over the rows (repetitions) and its standard error."""
    v = t.values("final")
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0)


def _decreasing(values: list[tuple[float, float]]):
    """Strictly decreasing: True; a rise beyond two standard errors: False; rises only within
    them: None (the repetitions cannot tell)."""
    rises = [(a, b) for a, b in zip(values, values[1:]) if b[0] >= a[0]]
    if not rises:
        return True
    return None if all(b[0] - a[0] <= 2 * math.hypot(a[1], b[1]) for a, b in rises) else False


def _each_dataset(fn):
    """A predicate over every dataset: False if one fails, else None if one is undecided."""
    def check(t: Table, quick: bool):
        res = [(ds, *fn(t.where(dataset=ds, kind="private"), t.where(dataset=ds), quick))
               for ds in t.unique("dataset")]
        oks = [ok for _, ok, _ in res]
        return all_of(oks), "; ".join(f"{ds}: {msg}" for ds, _, msg in res)
    return check


def _rate(p: Table, r: str, e: float = 0.01) -> tuple[float, float]:
    return _mean(p.where(rate=r, epsilon=e))


@_each_dataset
def _ordering(p: Table, d: Table, quick: bool):
    vals = [_rate(p, r) for r in LR_RATES]
    return _decreasing(vals), ", ".join(f"{r}: {m:.4g}" for r, (m, _) in zip(LR_RATES, vals))


@_each_dataset
def _converges(p: Table, d: Table, quick: bool):
    start, finals = d.rows[0]["start"], {r: _rate(p, r)[0] for r in LR_RATES}
    return all(v < start for v in finals.values()), f"start {start:.4g}; final " + ", ".join(
        f"{r}: {v:.4g} (walk {p.where(rate=r).rows[0]['walk']:.2g} G)" for r, v in finals.items())


_pld = changed(lambda run: run.params["method"] == "DO-ADP" and run.params["epsilon"],
               accountant="pld")
PLD = Diagnosis("pld", _pld)


def _lr_figure(x: str = "epoch", hue: str = "rate", caption: str = ""):
    def draw(t: Table, quick: bool):
        sets = t.unique("dataset")
        fig, axes = report.figure(1, len(sets), figsize=(5.4 * len(sets), 4), squeeze=False)
        for ax, ds in zip(axes[0], sets):
            d = t.where(dataset=ds)
            p = d.where(kind="private")
            for h in p.unique(hue):
                rows = p.where(**{hue: h})
                if x == "epoch":
                    ax.semilogy(rows.rows[0]["epoch"], np.maximum(
                        rows.curves("suboptimality").mean(0), 1e-12), label=h)
                else:
                    eps = rows.unique("epsilon")
                    ax.loglog(eps, [_mean(rows.where(epsilon=e))[0] for e in eps], "o-", label=h)
            for kind, ls in (("noise-free, clipped", "--"), ("noise-free, unclipped", "-.")):
                ref = d.where(kind=kind)
                if x == "epoch":
                    ax.semilogy(ref.rows[0]["epoch"], ref.curves("suboptimality").mean(0),
                                "k" + ls, lw=1, label=kind)
                else:
                    ax.axhline(_mean(ref)[0], color="k", ls=ls, lw=1, label=kind)
            ax.axhline(d.rows[0]["start"], color="0.5", ls=":", lw=1, label="x_0 = 0")
            ax.set(xlabel=x, ylabel="f(xbar) - f(x*)", title=ds)
            ax.legend(fontsize=7)
        fig.tight_layout()
        return fig, caption or "mean suboptimality over repetitions"
    return draw


def _lr_notes(report, t: Table, quick: bool) -> None:
    if "epsilon" not in t.unique("dataset"):
        report.note(NO_EPSILON())
    for ds in t.unique("dataset"):
        d = t.where(dataset=ds)
        start, p = d.rows[0]["start"], d.where(kind="private")
        c, u = (d.where(kind=f"noise-free, {k}") for k in ("clipped", "unclipped"))
        cases = {(r["method"], r["rate"], r["epsilon"]) for r in p}
        above = [f"{r if m == 'DO-ADP' else m} eps={e:g}" for m, r, e in sorted(cases) if
                 _mean(p.where(method=m, rate=r, epsilon=e))[0] > start]
        report.note(LR_NOTE(ds=ds, start=start, clipped=_mean(c)[0], unclipped=_mean(u)[0],
                            lowest=c.curves("suboptimality").mean(0).min(), above=len(above),
                            cases=len(cases), which=f" ({', '.join(above)})" if above else ""))


def _lr_settings(seeds: int, **more):
    def settings(quick: bool) -> dict:
        sizes = [f"{ds}: {pr.n_agents * pr.m} samples x {pr.dim} features, q = {pr.m} per agent"
                 for ds in lr_datasets() for pr in [runs.lr_setup(ds, 600 if quick else None)[0]]]
        return {"data": "; ".join(sizes) + (" (quick: a 600-sample subsample)" if quick else ""),
                **LR_SETTINGS(n=N_AGENTS, epochs="1 epoch (quick)" if quick else "6 epochs",
                              reps=1 if quick else seeds), **more}
    return settings


def _noise_table(t: Table, quick: bool):
    """Per configuration: the noise, its walk in xbar, the final error and (full variant) what
    the PLD account says about the same noise and the sigma it would ask for."""
    rows, nan = [], float("nan")
    for x in t.where(kind="private", seed=0):
        p, ratio = LR_RATES[x["rate"]]
        mech = huo.DOADPStep(G_LR, max(1, round(ratio * x["d"])), x["d"], p, x["q"], x["T"])
        same = t.where(kind="private", dataset=x["dataset"], rate=x["rate"], epsilon=x["epsilon"])
        acc = huo.proof_account(x["sigma"], DELTA0, mech)
        rows.append({"dataset": x["dataset"], "epsilon": x["epsilon"], "rate": x["rate"],
                     "k/d": f"{mech.k}/{mech.d}", "sigma": x["sigma"], "from": x["sigma_from"],
                     "walk (G)": x["walk"], **dict(zip(("final", "s.e."), _mean(same))),
                     "proof (eps, delta)": f"({acc.epsilon:.3g}, {acc.delta:.2g})",
                     "PLD eps": nan if quick else huo.dp_accounting_epsilon(
                         x["sigma"], DELTA, mech, "pld", activation="hidden"),   # the paper's
                     "PLD sigma": nan if quick else doadp_sigma(x["epsilon"], mech, "pld")[0]})
    return NOISE_CAPTION(), rows


FIG2A = Spec(
    "huo-fig2a", PROSE,
    lambda quick: _lr_runs(quick, 5, [("DO-ADP", "DO-ADP", r, 0.01) for r in LR_RATES]),
    [Check("rate-ordering", _ordering), Check("converges", _converges, PLD)],
    settings=_lr_settings(5, privacy=f"epsilon = 0.01 per agent, delta0 = {DELTA0:g}"),
    fields=FIELDS, figures=[_lr_figure()], tables=[_noise_table], analysis=[_lr_notes])


# ---- Fig. 2(b) ------------------------------------------------------------------------------

def _grid(quick: bool) -> tuple[float, ...]:
    return (0.01, 1.0) if quick else EPS_GRID


@_each_dataset
def _eps_monotone(p: Table, d: Table, quick: bool):
    vals = {r: [_rate(p, r, e) for e in _grid(quick)] for r in LR_RATES}
    oks = [_decreasing(v) for v in vals.values()]
    return all_of(oks), "; ".join(
        f"{r}: " + ", ".join(f"{m:.3g}+-{s:.2g}" for m, s in v) for r, v in vals.items())


@_each_dataset
def _spread(p: Table, d: Table, quick: bool):
    g = _grid(quick)
    s = [np.ptp([_rate(p, r, e)[0] for r in LR_RATES]) for e in g]
    return bool(s[0] > s[-1]), f"spread over rates at eps={g[0]}: {s[0]:.4g}, at eps={g[-1]}: " \
                               f"{s[-1]:.4g}"


FIG2B = Spec(
    "huo-fig2b", PROSE,
    lambda quick: _lr_runs(quick, 5, [("DO-ADP", "DO-ADP", r, e) for e in _grid(quick)
                                      for r in LR_RATES]),
    [Check("eps-monotone", _eps_monotone, Diagnosis(
        "clipping", lambda r: r.replace(clipped=False) if r.tags["kind"] == "private" else r)),
     Check("gap-shrinks", _spread)],
    settings=_lr_settings(5, **{"epsilon grid": EPS_GRID_SET()}), fields=FIELDS,
    figures=[_lr_figure("epsilon", caption=FIG2B_CAPTION())], tables=[_noise_table],
    analysis=[_lr_notes])


# ---- Fig. 3: baselines ----------------------------------------------------------------------

FIG3 = [("DO-ADP (24%)", "DO-ADP", "24%", 0.01), ("DPDO", "DPDO", "100%", 0.01),
        ("DP-DDA", "DP-DDA", "100%", 0.01), ("CPGT (24%)", "CPGT", "24%", 0.01)]


@_each_dataset
def _best(p: Table, d: Table, quick: bool):
    m = {label: _mean(p.where(method=label)) for label, *_ in FIG3}
    oks = [_decreasing([m[o], m["DO-ADP (24%)"]]) for o in m if o != "DO-ADP (24%)"]
    return all_of(oks), ", ".join(
        f"{k}: {v:.4g}+-{s:.2g}" for k, (v, s) in m.items())


def _fig3_table(t: Table, quick: bool):
    rows = []
    for x in t.where(kind="private", seed=0):
        d, q, T = x["d"], x["q"], x["T"]
        mech = {"DO-ADP (24%)": huo.DOADPStep(G_LR, round(0.3 * d), d, 0.8, q, T),
                "DP-DDA": huo.DOADPStep(G_LR, d, d, 0.24, q, T)}.get(x["method"])
        rows.append({"dataset": x["dataset"], "method": x["method"], "final": _mean(
            t.where(kind="private", dataset=x["dataset"], method=x["method"]))[0],
            "noise": x["sigma"], "from": x["sigma_from"], "bits/agent/step": x["bits"], **{
                f"sigma by {a}": doadp_sigma(0.01, mech, a)[0] if mech else float("nan")
                for a in ("(7)", "rdp", "pld")}})
    return FIG3_CAPTION(), rows


FIG3_SPEC = Spec(
    "huo-fig3", PROSE, lambda quick: _lr_runs(quick, 3, FIG3),
    [Check("best", _best, Diagnosis("loose-sigma", _pld))],
    settings=_lr_settings(3, privacy=FIG3_PRIVACY()), fields=FIELDS,
    figures=[_lr_figure(hue="method")], tables=[_fig3_table],
    analysis=[_lr_notes])


# ---- Table II and Fig. 4: the MNIST CNN -----------------------------------------------------


def _cnn_kw(quick: bool) -> dict:
    if quick:    # at most 8 training images per agent, 20 test images, batch 2
        return dict(batch=2, seed=0, per_agent=8, test_samples=20, eval_samples=20,
                    eval_every=2, checkpoint_every=2, accountant="proof")
    return dict(batch=8, seed=0, per_agent=None, test_samples=None, eval_samples=2000,
                eval_every=150, checkpoint_every=150, accountant="pld")


def _cnn(kind: str, quick: bool, rate: str, epsilon, G: float, clipped: bool = True) -> Run:
    full, sweep = (1, 0.5) if quick else (CNN_EPOCHS, SWEEP_EPOCHS)
    return Run(runs.cnn_run, dict(rate=rate, epsilon=epsilon, G=G, clipped=clipped,
                             epochs=sweep if kind == "sweep" else full, sigma_epochs=full,
                             **_cnn_kw(quick)),
               {"kind": kind, "epsilon": epsilon, "rate": rate, "G": G if clipped else None})


def _sweep(quick: bool) -> list[Run]:
    return [_cnn("sweep", quick, "100%", e, G) for G in (SWEEP_G[:2] if quick else SWEEP_G)
            for e in (None, 1.0)] + [_cnn("sweep", quick, "100%", None, 1.0, clipped=False)]


def chosen_G(quick: bool) -> float:
    """The stated rule: the G whose sweep run at epsilon = 1 (100 %) ends with the highest test
    accuracy (ties: the smaller G). The sweep runs first (cached)."""
    t = execute(_sweep(quick)).where(epsilon=1.0)
    return max(t.unique("G"), key=lambda g: (t.one(G=g)["test_accuracy"], -g))


def _cnn_runs(quick: bool, epsilons=(1.0, 0.9, 0.8), sweep: bool = True) -> list[Run]:
    G = chosen_G(quick)
    return (_sweep(quick) if sweep else []) + [
        _cnn("private", quick, r, e, G) for e in (epsilons[::2] if quick else epsilons)
        for r in CNN_RATES] + [_cnn("noise-free", quick, "100%", None, G)]


def _acc(t: Table, e, r) -> float:
    return 100 * t.one(kind="private", epsilon=e, rate=r)["test_accuracy"]


def _eps(t: Table) -> list[float]:
    return sorted({x["epsilon"] for x in t.where(kind="private")}, reverse=True)


def _quick_undecided(fn):
    def check(t: Table, quick: bool):
        ok, msg = fn(t)
        if quick:     # a few images per agent and 2 steps: accuracies mean nothing
            return None, "undecided: the quick variant only exercises the pipeline; " + msg
        return ok, msg
    return check


@_quick_undecided
def _by_rate(t: Table):
    rs = list(CNN_RATES)
    return all(_acc(t, e, a) <= _acc(t, e, b) for e in _eps(t) for a, b in zip(rs, rs[1:])), \
        "; ".join(f"eps={e:g}: " + ", ".join(f"{r} {_acc(t, e, r):.2f}" for r in rs)
                  for e in _eps(t))


@_quick_undecided
def _by_eps(t: Table):
    es = _eps(t)
    return all(_acc(t, a, r) >= _acc(t, b, r) for r in CNN_RATES for a, b in zip(es, es[1:])), \
        "; ".join(f"{r}: " + ", ".join(f"{_acc(t, e, r):.2f}" for e in es) for r in CNN_RATES)


@_quick_undecided
def _absolute(t: Table):
    gaps = [_acc(t, e, r) - TABLE2[e][i] for e in _eps(t) for i, r in enumerate(CNN_RATES)]
    return all(abs(g) <= 3 for g in gaps), f"measured minus paper: min {min(gaps):+.2f}, " \
                                           f"max {max(gaps):+.2f} points"


NOISE_OFF = changed(lambda run: run.tags["kind"] == "private", epsilon=None)


def _sweep_table(t: Table, quick: bool):
    s = t.where(kind="sweep")
    rows = [{"G": g, "clip G/sqrt(P)": g / math.sqrt(s.rows[0]["d"]),
             "sigma (eps = 1)": s.one(G=g, epsilon=1.0)["sigma"],
             "noise-free accuracy %": 100 * s.one(G=g, epsilon=None)["test_accuracy"],
             "private accuracy % (eps = 1)": 100 * s.one(G=g, epsilon=1.0)["test_accuracy"]}
            for g in s.unique("G") if g is not None]
    rows.append({"G": "unclipped", "noise-free accuracy %": 100 * s.one(G=None)["test_accuracy"]})
    return SWEEP_CAPTION(T=s.rows[0]["T"], full=t.one(kind="noise-free")["T"],
                         G=chosen_G(quick)), rows


def _cnn_tables(t: Table, quick: bool):
    rows: list[dict[str, Any]] = [{"epsilon": e, **{k: v for i, r in enumerate(CNN_RATES) for k, v in
                              ((f"{r} measured", round(_acc(t, e, r), 2)),
                               (f"{r} paper", TABLE2[e][i]))}} for e in _eps(t)]
    rows.append({"epsilon": "no noise", "100% measured":
                 round(100 * t.one(kind="noise-free")["test_accuracy"], 2)})
    return "Test accuracy (%) of the average model: measured beside Table II", rows


def _cnn_privacy(t: Table, quick: bool):
    return (PRIVACY_CAPTION(), [
                {"epsilon": x["epsilon"], "rate": x["rate"], "sigma": x["sigma"],
                 "from": x["sigma_from"], "T": x["T"], "PLD eps": x["pld_eps"],
                 "PLD eps, all d": x["pld_eps_all_d"], "(7)": x["theorem1_eps"]}
                for x in t.where(kind="private")])


def _cnn_notes(report, t: Table, quick: bool) -> None:
    ref = t.one(kind="noise-free")
    best = max(t.where(kind="private"), key=lambda x: x["test_accuracy"])
    report.note(CNN_NOTE(G=ref["G"], ref=100 * ref["test_accuracy"], rate=best["rate"],
                         eps=best["epsilon"], best=100 * best["test_accuracy"]))


def _cnn_settings(quick: bool) -> dict:
    kw = _cnn_kw(quick)
    return CNN_SETTINGS(split="at most 8 images per agent (quick)" if quick else "3000 each",
                        n=N_AGENTS, iota=IOTA, batch=kw["batch"], evals=kw["eval_samples"],
                        epochs=1 if quick else CNN_EPOCHS)


def _curves(t: Table, quick: bool):
    fig, ax = report.figure(figsize=(6, 3.8))
    for x in [t.one(kind="noise-free")] + [t.one(kind="private", epsilon=1.0, rate=r)
                                           for r in CNN_RATES]:
        ax.plot(x["epoch"], 100 * np.asarray(x["test_accuracy_subset"]),
                label="noise-free" if x["epsilon"] is None else x["rate"])
    ax.set(xlabel="epoch", ylabel="test accuracy (%), test subset")
    ax.legend(fontsize=7)
    return fig, "test accuracy of xbar during training, epsilon = 1"


def _by_rate_figure(t: Table, quick: bool):
    fig, ax = report.figure(figsize=(6, 3.8))
    for e in _eps(t):
        ax.plot(list(CNN_RATES), [_acc(t, e, r) for r in CNN_RATES], "o-", label=f"eps={e:g}")
        ax.plot(list(CNN_RATES), TABLE2[e], "x--", alpha=0.6, label=f"Table II eps={e:g}")
    ax.set(xlabel="communication rate", ylabel="test accuracy (%)")
    ax.legend(fontsize=7)
    return fig, "test accuracy of xbar against communication rate"


register(FIG2A, FIG2B, FIG3_SPEC, Spec(
    "huo-table2", PROSE, _cnn_runs,
    [Check("by-rate", _by_rate, Diagnosis("activation", NOISE_OFF)), Check("by-eps", _by_eps),
     Check("absolute", _absolute, Diagnosis("capped", NOISE_OFF))],
    settings=_cnn_settings, fields=dict(FIELDS, which="every epsilon"),
    figures=[_by_rate_figure], tables=[_sweep_table, _cnn_tables, _cnn_privacy],
    analysis=[_cnn_notes]), Spec(
    "huo-fig4", PROSE, lambda quick: _cnn_runs(quick, (1.0,), sweep=False),
    [Check("by-rate", _by_rate, Diagnosis("activation", NOISE_OFF))],
    settings=_cnn_settings, fields=dict(FIELDS, which="epsilon = 1"),
    figures=[_curves], analysis=[_cnn_notes]))
