"""Paper 002 (Chen & Wang, LDP decentralized online learning): Figs. 1-3 of §VI as engine specs.

m = 10 agents on a ring, w_ij = 0.3 (w_ii = -0.6, mixing matrix I + W), parameters theta in R^n.
Algorithm 1: ``lambda_t = (t+1)^-v``, Laplace message noise ``nu_t^i = sigma0/(sqrt 2
(t+1)^varsigma_i)``, ``varsigma_i = 0.5 + 0.01 i``, all-data gradient ``grad f_t^i``. Baselines:
LDOL (17) (``gamma_t = (t+1)^-0.7``, ``lambda_t = (t+1)^-0.71``); DOLA, DMOD (``alpha0/sqrt t``,
noise with the same decay) and PDOP (``c p^k``, noise ``M q^k``), each calibrated by its own
accountant to the largest budget among Algorithm 1's agents; noise-free DSGD.

* cw-fig1: online logistic regression on mushrooms (v = 0.71, sigma0 = 0.1 sqrt 2): tracking error
  ``(1/m) sum_i ||theta_t^i - theta*||^2`` and average objective against t;
* cw-fig2 / cw-fig3: online CNN training on MNIST (v = 0.68, sigma0 = 0.02) / CIFAR-10 (v = 0.7,
  sigma0 = 0.1): accuracy of the agents' average model against t.

The runs themselves are in :mod:`._chen_wang_runs` (so that editing a claim here recomputes
nothing). Where the paper is silent: LDOL's noise decays at ``0.7 - varsigma_i`` (§IV-B(i)'s
comparison), the mushrooms baselines' steps follow the paper's own rule (the step just below the
first non-convergent one on a doubling grid), and a CNN claim is undecided while Algorithm 1 is
at chance.
"""

from __future__ import annotations

import math

import numpy as np

from ... import graphs, models
from ...algorithms.ldp_online import LDPOnline
from ...privacy import chen_wang as cw
from .. import source
from . import DATA, Prose, register
from . import _chen_wang_runs as cwr
from ._chen_wang_runs import BASELINES, M_AGENTS, VS, mushrooms
from .engine import Check, Diagnosis, Run, Spec, Table, changed, curve_figure, execute

PROSE = Prose.load(DATA / "chen_wang.toml")
FIG1_SETTINGS = PROSE.group("fig1", "data", "agents / graph", "stream", "loss", "gradient",
                            "Algorithm 1", "horizon / seeds", "theta*", "x0", "gradient bounds")
CNN_SETTINGS = PROSE.group("cnn", "data", "pixels", "model", "stream", "gradient", "Algorithm 1",
                           "metric")
(BUDGETS, BASELINES_CAPTION, SEARCH, LAST_STEPS, THEOREM1, LARGEST, OUTSIDE, MATCHED,
 CNN_CAPTION, CNN_BUDGETS, DEGRADED, ORIGINAL) = PROSE.texts(
    "budgets", "baselines-caption", "search", "last-steps", "theorem1", "largest", "outside",
    "matched", "cnn-caption", "cnn-budgets", "degraded", "original")
METHODS = ("Algorithm 1", "DSGD", "LDOL", "DOLA", "DMOD", "PDOP")
GRID = [2.0 ** k for k in range(-2, 13)]                  # doubling grid of the baselines' steps


# ---- Fig. 1: mushrooms --------------------------------------------------------------------------

def _fig1_horizon(quick: bool) -> tuple[int, list[int], int]:     # T, seeds, logging cadence
    return (60, [0], 2) if quick else (3000, [0, 1, 2], 10)


def _converges(row: dict) -> bool:
    return math.isfinite(row["tracking"][-1]) and row["tracking"][-1] < row["tracking"][0]


def paper_step(method: str, quick: bool) -> tuple[float, list[Run]]:
    """The paper's rule, "near-optimal stepsizes, ensuring that doubling stepsizes would lead to
    non-convergent behaviors": up the doubling grid (seed 0, horizon T) to the first step whose
    run does not converge (final tracking error not below the initial one); the step below it."""
    T, _, every = _fig1_horizon(quick)
    tried, chosen = [], GRID[0]
    for a in GRID:
        r = Run(cwr.mushrooms_run, dict(method=method, T=T, seed=0, every=every, step=a),
                {"method": method, "seed": 0, "stage": "grid", "step": a})
        tried.append(r)
        if not _converges(execute([r]).rows[0]):
            break
        chosen = a
    return chosen, tried


def _fig1_runs(quick: bool) -> list[Run]:
    T, seeds, every = _fig1_horizon(quick)
    out, steps = [], {}
    for m in BASELINES:
        steps[m], grid = paper_step(m, quick)
        out += grid
    return out + [Run(cwr.mushrooms_run, dict(method=m, T=T, seed=s, every=every,
                                              step=steps.get(m, 1.0), noise_x=1.0),
                      {"method": m, "seed": s, "stage": "main"}) for m in METHODS for s in seeds]


def _curve(t: Table, method: str, column: str = "tracking") -> np.ndarray:
    return t.where(stage="main", method=method).curves(column).mean(axis=0)


def _beats(base: str):
    def check(t: Table, quick: bool):
        a, b = _curve(t, "Algorithm 1"), _curve(t, base)
        h = len(a) // 2
        return bool(a[-1] < b[-1] and a[h:].mean() < b[h:].mean()), (
            f"final {a[-1]:.4g} vs {b[-1]:.4g}; second-half mean {a[h:].mean():.4g} vs "
            f"{b[h:].mean():.4g} (mean over seeds; {base} step {_step(t, base):g})")
    return check


def _negligible(panel: str | None = None) -> Diagnosis:
    change = changed(lambda run: run.tags.get("method") in BASELINES and run.tags.get("stage")
                     != "grid" and run.tags.get("panel") == panel, noise_x=1e4)
    return Diagnosis("negligible-panel" if panel else "negligible", change)


LONGER = Diagnosis("longer", changed(lambda run: run.tags.get("stage") == "main",
                                     T=lambda T: 4 * T))


def _dsgd(t: Table, quick: bool):
    ratio = _curve(t, "Algorithm 1")[-1] / _curve(t, "DSGD")[-1]
    return bool(ratio <= 1.5), f"final tracking error ratio Algorithm 1 / DSGD = {ratio:.4f}"


def _no_floor(t: Table, quick: bool):
    it, a = np.asarray(t.where(stage="main").rows[0]["iteration"], float), _curve(t, "Algorithm 1")
    sel = (it >= 0.5 * it[-1]) & (it > 0)
    slope = float(np.polyfit(np.log(it[sel]), np.log(a[sel]), 1)[0])
    q = len(a) // 4
    return bool(slope < -0.05 and a[-q:].mean() < a[q:2 * q].mean()), (
        f"slope {slope:.3f} (Theorem 2's guaranteed exponent -beta = -0.165 for v = 0.71, "
        f"varsigma = 0.51); quarter means {a[q:2 * q].mean():.4g} -> {a[-q:].mean():.4g}")


def _ring(t: Table, quick: bool):
    a3, a = cw.assumption3(graphs.ring(M_AGENTS, weight=0.3)), _curve(t, "Algorithm 1")
    return bool(a[-1] < 0.1 * a[0] and a[-1] < a[len(a) // 2]), (
        f"tracking error {a[0]:.4g} -> {a[len(a) // 2]:.4g} (half-way) -> {a[-1]:.4g}; I + W "
        f"has eigenvalues in [{1 + a3['delta_m']:.2g}, 1], spectral radius "
        f"{a3['mixing_radius']:.4f} on the disagreement space")


def _step(t: Table, method: str) -> float:
    return t.where(stage="main", method=method).rows[0]["step"]


FIG1_CHECKS = [Check("beats", _beats(b), LONGER if b == "LDOL" else _negligible(), case=b,
                     fields={"base": b}) for b in ("LDOL",) + BASELINES] + [
    Check("near-dsgd", _dsgd, LONGER), Check("no-floor", _no_floor, LONGER),
    Check("ring", _ring, LONGER)]


def _fig1_settings(quick: bool) -> dict:
    problem, graph, theta, d, L = mushrooms()
    a3, (T, seeds, _) = cw.assumption3(graph), _fig1_horizon(quick)
    return FIG1_SETTINGS(N=problem.model.n_data, n=problem.dim, m=M_AGENTS, **a3, T=T,
                         seeds=seeds, batch=cwr.BATCH, reg=cwr.REG, norm=float(theta.norm()),
                         loss=problem.loss(theta), d=d, L=L, R=cwr.RADIUS)


def _fig1_budgets(t: Table, quick: bool):
    problem, graph, _, d, _ = mushrooms()
    T = _fig1_horizon(quick)[0]
    eps = LDPOnline(1.0, 0.71, 0.1 * math.sqrt(2), VS).privacy(
        problem, graph, iterations=T, l1_gradient_bound=d).per_agent
    return BUDGETS(T=T, d=d, no_c3=cw.NO_C3), [
        {"agent i": i + 1, "varsigma_i": v, "eps_i": e, "eps_i / d": e / d}
        for i, (v, e) in enumerate(zip(VS, eps))]


def _fig1_baselines(t: Table, quick: bool):
    main = t.where(stage="main", seed=0)
    target = main.one(method="Algorithm 1")["own_budget"]
    return BASELINES_CAPTION(), [
        {"method": m, "step": r["step"], "noise": r["noise"], "own budget": r["own_budget"],
         "matched to": target if m in BASELINES else ""}
        for m in METHODS if m != "DSGD" for r in [main.one(method=m)]]


def _fig1_search(t: Table, quick: bool):
    grid, T = t.where(stage="grid"), _fig1_horizon(quick)[0]
    return SEARCH(T=T, a1=t.one(stage="main", method="Algorithm 1", seed=0)["tracking"][-1]), [
        {"method": r["method"], "step": r["step"], "initial": r["tracking"][0],
         f"tracking error at t={T}": r["tracking"][-1], "converges": _converges(r),
         "chosen": r["step"] == _step(t, r["method"])} for r in grid]


def _fig1_notes(report, t: Table, quick: bool):
    problem, graph, _, _, _ = mushrooms()
    T, main = _fig1_horizon(quick)[0], t.where(stage="main")
    a3, mu = cw.assumption3(graph), cwr.REG
    last = {"Algorithm 1": T ** -0.71, "DOLA": _step(t, "DOLA") / math.sqrt(T),
            "DMOD": _step(t, "DMOD") / math.sqrt(T), "PDOP": _step(t, "PDOP") * 0.999 ** (T - 1)}
    report.note(LAST_STEPS(steps=", ".join(f"{k} {v:.3g}" for k, v in last.items())))
    lam = -a3["delta_2"] * mu / (2 * mu * mu + 16 * problem.smoothness ** 2)
    report.note(THEOREM1(lam=lam, mu=mu, L=problem.smoothness))
    big, R = max(main.values("max_abs")), cwr.RADIUS
    report.note(LARGEST(big=big, R=R) + ("" if big <= R else OUTSIDE()))
    grid = t.where(stage="grid")
    best = {m: min(grid.where(method=m), key=lambda r: r["tracking"][-1]) for m in BASELINES}
    report.note(MATCHED(best=", ".join(f"{m} {r['tracking'][-1]:.3g} (step {r['step']:g})"
                                       for m, r in best.items()),
                        a1=t.one(stage="main", method="Algorithm 1", seed=0)["tracking"][-1]))


FIG1 = Spec(
    "cw-fig1", PROSE, _fig1_runs, FIG1_CHECKS, settings=_fig1_settings,
    fields={"radius": cwr.RADIUS},
    figures=[curve_figure("tracking", "method", where={"stage": "main"}, ylabel="(1/m) sum_i "
                          "||theta_t^i - theta*||^2", title="(a) average tracking error",
                          caption="Average tracking error (geometric mean over seeds)"),
             curve_figure("avg_objective", "method", where={"stage": "main"}, logy=False,
                          ylabel="(1/m) sum_i F(theta_t^i)", title="(b) average objective",
                          caption="Average objective (geometric mean over seeds)",
                          suffix="objective")],
    tables=[_fig1_budgets, _fig1_baselines, _fig1_search], analysis=[_fig1_notes])


# ---- Figs. 2 and 3: online CNN training ----------------------------------------------------------

PANELS = {"exact": "exact all-data gradient",
          "window": "APPROXIMATE: gradient over the last 2 batches at the current iterate"}


def _late(t: Table, panel: str, method: str) -> list[float]:
    """Test accuracy of the last 3 evaluations per seed (nan for a seed that diverged)."""
    return [math.nan if r["diverged_at"] is not None else float(np.mean(r["test_accuracy"][-3:]))
            for r in sorted(t.where(panel=panel, method=method), key=lambda r: r["seed"])]


def _beyond_noise(a: list[float], b: list[float]) -> bool:
    """Whether the mean of the paired seed differences a - b is more than 2 standard errors from
    0 (a difference inside that band is one the seeds cannot tell; one seed cannot tell)."""
    d = np.subtract(a, b)
    return len(d) > 1 and bool(abs(d.mean()) > 2 * d.std(ddof=1) / math.sqrt(len(d)))


def _cnn_check(panel: str, what: str):
    def check(t: Table, quick: bool):
        seeds = {m: _late(t, panel, m) for m in METHODS}
        acc = {m: float(np.mean(v)) for m, v in seeds.items()}          # nan if any diverged
        sub = t.where(panel=panel)
        chance = 0.1 + 3 * math.sqrt(0.09 / sub.rows[0]["n_test"])     # 3 binomial sd above 10 %

        def show(m):
            div = [r["diverged_at"] for r in sub.where(method=m) if r["diverged_at"] is not None]
            return f"{m} diverged at t = {div}" if div else f"{m} {acc[m]:.4f}"

        a1 = acc["Algorithm 1"]
        head = (f"T = {max(r['iteration'][-1] for r in sub)}, seeds {sub.unique('seed')}, chance "
                f"band <= {chance:.3f}: ")
        if not a1 > chance:
            return None, head + f"{show('Algorithm 1')} is at chance, so no comparison decides"
        low = lambda m: -1.0 if math.isnan(acc[m]) else acc[m]   # noqa: E731  (diverged: lowest)
        if what in BASELINES:
            bar = max(chance, 0.5 * a1)
            return bool(low(what) <= bar), head + (f"{show(what)} vs the bar max(chance, half "
                                                   f"of Algorithm 1's {a1:.4f}) = {bar:.4f}")
        if what == "DSGD":
            return acc["DSGD"] - a1 <= 0.03, head + f"{show('DSGD')} vs {show('Algorithm 1')}"
        rival = "LDOL" if what == "LDOL" else max(("LDOL",) + BASELINES, key=low)
        text = head + f"{show('Algorithm 1')} vs {show(rival)}" + ("" if what == "LDOL" else
                                                                    " (best other private)")
        if math.isnan(acc[rival]) or _beyond_noise(seeds["Algorithm 1"], seeds[rival]):
            return a1 > low(rival), text
        return None, text + ": the difference is within 2 standard errors of the paired seed " \
            "differences (or one seed), so the runs cannot tell"
    return check


def _cnn_checks() -> list[Check]:
    out = []
    for p, label in PANELS.items():
        f = {"label": label, "panel": p}
        out.append(Check("cnn-ldol", _cnn_check(p, "LDOL"), case=p, fields=f))
        out += [Check("cnn-fails", _cnn_check(p, b), _negligible(p), case=f"{p}-{b}",
                      fields={**f, "base": b}) for b in BASELINES]
        out.append(Check("cnn-best", _cnn_check(p, "best"), _negligible(p), case=p, fields=f))
        out.append(Check("cnn-dsgd", _cnn_check(p, "DSGD"), Diagnosis("slowed", changed(
            lambda r, p=p: r.tags.get("panel") == p,  # type: ignore[misc]  # a default binds p
            T=lambda T: 2 * T)), case=p, fields=f))
    return out


def _cnn_spec(name: str, fig: str, title: str, full: dict, quick: dict) -> Spec:
    """``full`` / ``quick``: panel -> (T, evaluation every, seeds), plus "batch" and "evals"."""
    def runs(q: bool) -> list[Run]:
        c = quick if q else full
        return [Run(cwr.cnn_run, dict(name=name, method=m, mode=p, T=T, every=e, seed=s,
                                      batch=c["batch"], evals=c["evals"], noise_x=1.0),
                    {"panel": p, "method": m, "seed": s})
                for p, (T, e, seeds) in c["panels"].items() for s in seeds for m in METHODS]

    def settings(q: bool) -> dict:
        c, (v, sigma0) = quick if q else full, cwr.CNN[name]
        train, parts, evalsets = cwr.images(str(source._SOURCE["root"]), name, c["evals"])
        module = models.mnist_cnn() if name == "mnist" else models.cifar_cnn()
        return CNN_SETTINGS(
            title=title, images=len(train.y), m=M_AGENTS, train=len(evalsets["train"][1]),
            test=len(evalsets["test"][1]), pixels=(DEGRADED if train.degraded else ORIGINAL)(),
            model=type(module).__name__, params=sum(p.numel() for p in module.parameters()),
            layers=" -> ".join(repr(m) for m in module.modules() if not list(m.children())),
            batch=c["batch"], v=v, sigma0=sigma0, panels="; ".join(
                f"{PANELS[p]}: T = {T}, evaluated every {e}, seeds {s}"
                for p, (T, e, s) in c["panels"].items()))

    def table(t: Table, q: bool):
        rows = []
        for p in t.unique("panel"):
            T = max(x["iteration"][-1] for x in t.where(panel=p))
            for m in METHODS:
                sub = t.where(panel=p, method=m)
                r = sub.rows[0]
                rows.append({"panel": p, "method": m, "T": T, "seeds": len(sub),
                             "late test accuracy": float(np.mean(_late(t, p, m))),
                             "final train accuracy (seed 0)": r["train_accuracy"][-1],
                             "agents' own test accuracy (seed 0)": r["agents_test_accuracy"],
                             "diverged at": [x["diverged_at"] for x in sub
                                             if x["diverged_at"] is not None] or "",
                             "noise parameter": r["noise"],
                             "own budget / d": float(r["own_budget"]) / math.sqrt(r["dim"]),
                             "wall seconds (mean)": float(np.mean(sub.values("seconds")))})
        return CNN_CAPTION(), rows

    def notes(report, t: Table, q: bool):
        for note in source.images(name)[0].notes:
            report.note(note)
        wbar, (v, sigma0) = cw.wbar(graphs.ring(M_AGENTS, weight=0.3)), cwr.CNN[name]
        for p, (T, _, _) in (quick if q else full)["panels"].items():
            e = cw.ldp_online_epsilons(1.0, v, sigma0, VS, wbar, 1.0, T)
            mu = t.where(panel=p, method="DOLA").rows[0]["noise"]
            report.note(CNN_BUDGETS(p=p, T=T, lo=e.min(), hi=e.max(), mu=mu))

    return Spec(
        fig, PROSE, runs, _cnn_checks(), settings=settings,
        fields={"seeds": sorted({s for _, _, ss in full["panels"].values() for s in ss})},
        figures=[curve_figure(y, "method", panels="panel", logy=False, seed=0, ylabel=y,
                              caption=f"{title}: {y} of the agents' average model (seed 0)",
                              suffix="" if y == "test_accuracy" else "train")
                 for y in ("test_accuracy", "train_accuracy")],
        tables=[table], analysis=[notes])


register(FIG1, _cnn_spec(
    "mnist", "cw-fig2", "MNIST",
    {"panels": {"exact": (20, 4, [0, 1, 2]), "window": (100, 10, [0, 1, 2])}, "batch": 32,
     "evals": 1000},
    {"panels": {"exact": (2, 1, [0]), "window": (3, 1, [0])}, "batch": 2, "evals": 10}), _cnn_spec(
    "cifar10", "cw-fig3", "CIFAR-10 (JPEG-degraded copy)",
    {"panels": {"exact": (6, 2, [0]), "window": (120, 10, [0, 1, 2])}, "batch": 32,
     "evals": 1000},
    {"panels": {"exact": (2, 1, [0]), "window": (3, 1, [0])}, "batch": 1, "evals": 4}))
