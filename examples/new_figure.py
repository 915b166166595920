"""A new figure with the experiment engine: DiaDSP's accuracy against its noise scale.

At a consensus fixed point of DiaDSP, sum_i grad f_i(x) = -sum_t sum_i xi_y,t, so the final
accuracy ||grad f(xbar_K)|| should grow linearly with the Laplace scale s (noise s q^k). The spec
names its runs, settings, one claim with a diagnosis, a figure and a table; what the report says
(title, choices, the claim's text, the diagnosis's cause and change) is in new_figure.toml beside
this file, joined by id. The engine runs the spec through its cache and writes
NAME.md/.csv/.png/.json: ``dpnet reproduce --with examples/new_figure.py example-noise [--quick]
--out OUT`` or ``python examples/new_figure.py OUT [--quick]``.
"""

import sys
from pathlib import Path

import numpy as np
import torch

from dpnet import graphs, noise, problems, run
from dpnet.algorithms import DiaDSP
from dpnet.lab.reproduce import Check, Diagnosis, Prose, Run, Spec, Table, changed, get, register
from dpnet.lab.reproduce.engine import curve_figure

SCALES, Q = (0.01, 0.1, 1.0), 0.5
PROSE = Prose.load(Path(__file__).with_suffix(".toml"))


def accuracy(s: float, K: int, seed: int) -> dict:
    """One DiaDSP run (eta = 0.15) on problem (37) over a 6-agent ring; ||grad f(xbar_k)||."""
    problem = problems.NonconvexLogistic.random(6, 200, 10, seed=0)
    alg = DiaDSP(0.15, noise.Laplace(s, decay=Q), noise.Laplace(s, decay=Q))
    grad = {"accuracy": lambda state, k: float(problem.global_grad(state["x"].mean(0)).norm())}
    res = run(alg, problem, graphs.ring(6), K, seed=seed, log_every=K // 20, metrics=grad)
    return {"iteration": res.history["iteration"], "accuracy": res.history["accuracy"],
            "noise_scale": s}


def linear_in_s(t: Table, quick: bool):
    scales = [t.where(s=s).rows[0]["noise_scale"] for s in SCALES]     # as run (counterfactual)
    final = [float(t.where(s=s).gmean("accuracy")[-1]) for s in SCALES]
    slope = float(np.polyfit(np.log10(scales), np.log10(final), 1)[0])
    return bool(0.8 <= slope <= 1.2), f"log-log slope {slope:.3f}; finals " + ", ".join(
        f"s={s:g}: {f:.3g}" for s, f in zip(scales, final))


register(Spec(
    "example-noise", PROSE,
    runs=lambda quick: [Run(accuracy, dict(s=s, K=200 if quick else 2000, seed=seed),
                            {"s": s, "seed": seed})
                        for s in SCALES for seed in ((0,) if quick else (0, 1, 2))],
    checks=[Check("linear-in-s", linear_in_s, Diagnosis("ceiling", changed(s=lambda s: s / 10)))],
    settings=lambda quick: {"problem": "(37), 6 agents, d = 10", "graph": "ring, Metropolis",
                            "noise": f"Laplace s q^k, q = {Q}", "seeds": 1 if quick else 3},
    figures=[curve_figure("accuracy", "s", caption="||grad f(xbar_k)|| (geometric mean of seeds)")],
    tables=[lambda t, quick: ("Final accuracy per run", [
        {"s": r["s"], "seed": r["seed"], "final": r["accuracy"][-1]} for r in t])]))

if __name__ == "__main__":
    torch.set_num_threads(1)
    report = get("example-noise").run(quick="--quick" in sys.argv, outdir=sys.argv[1])
    print("\n".join(f"{c.verdict.value}: {c.text} ({c.measured})" for c in report.claims))
