"""The eavesdropper's lab: what a transcript gives away, with and without privacy noise.

An eavesdropper on every link sees the transcript (``run(..., record=True)``) and knows the
algorithm, its public parameters (step sizes, W, public sequences) and the public start. For the
non-private methods the papers say the local gradients leak exactly; the inversions here make
that concrete:

* **DGD / DSGD** (``x_{k+1} = W x_k - eta_k g_k``): ``g_{i,k} = ((W x_k)_i - x_{i,k+1}) /
  eta_k`` from two consecutive broadcasts (:func:`invert_dgd`).
* **Gradient tracking** (``y_{k+1} = W y_k + g_{k+1} - g_k``, ``y_0 = g_0``): ``g_0 = y_0``,
  ``g_{k+1} = g_k + y_{k+1} - W y_k`` (:func:`invert_tracking`); the same arithmetic on the
  public copies of PGTC with ``W_gamma = I - gamma (I - W)``.
* **Momentum DSGD**, DO-ADP's base method (2), the inversion of Section II-C of Huo et al.:
  ``m_{t+1} = (x_t - x_{t+1} + gamma sum_j w_ij (x_j,t - x_i,t)) / alpha``,
  ``g_t = m_{t+1} - beta m_t`` (:func:`invert_momentum`).
* **DPP2**: with the public eta^k and ``d^0 = q^0 = 0`` the duals replay from the messages
  (``d^{k+1} = eta^k d^k + y^k``, ``q^{k+1} = eta^k q^k + rho P y^k``), so
  ``g^k = z^k - eta^k q^k - rho P y^k - e^k`` and ``x^k = y^k - (1 - eta^k) d^k - w^k``
  (:func:`invert_dpp2`): the first tier hides nothing from an eavesdropper who knows eta^k, and
  once the Laplace noise ``u r^k`` has decayed the gradients are exposed.

:func:`lab` runs the scenarios of :data:`SCENARIOS` (a small nonconvex logistic problem, n = 6
agents on a ring) and reports the relative reconstruction error
``||g_hat - g|| / ||g||`` (and for states ``||x_hat - x|| / ||x||``) per iteration and overall.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ... import algorithms, graphs
from ...algorithms.base import Algorithm
from ...compression import Identity, TopK
from ...errors import UnknownNameError
from ...noise import Laplace
from ...problems import LogisticRegression, NonconvexLogistic
from ...problems.base import Problem
from ...registry import Registry
from ...rng import Streams
from ...runner import run
from .. import report

# ---- inversions (pure functions of the transcript and public parameters) ----------------------


def _mix(M: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``M`` applied to the agent axis of ``V`` (``(..., n, d)``)."""
    return np.einsum("ij,...jd->...id", M, V)


def invert_dgd(x: np.ndarray, W: np.ndarray, step: Callable[[int], float] | float
               ) -> np.ndarray:
    """DGD/DSGD gradients ``(T-1, n, d)`` from broadcast states ``x`` ``(T, n, d)``."""
    step_at = step if callable(step) else (lambda k: step)
    etas = np.array([step_at(k) for k in range(x.shape[0] - 1)])[:, None, None]
    return (_mix(W, x[:-1]) - x[1:]) / etas


def invert_tracking(y: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Gradient-tracking gradients ``(T, n, d)`` from the broadcast trackers ``y`` ``(T, n, d)``
    (``M``: the mixing of y, W or ``W_gamma``)."""
    g = np.empty_like(y)
    g[0] = y[0]
    for k in range(1, y.shape[0]):
        g[k] = g[k - 1] + y[k] - _mix(M, y[k - 1])
    return g


def decode_copies(messages: np.ndarray, alpha: float) -> np.ndarray:
    """Paper 000's public copies ``h_hat_k = h^c_k + msg_k``, ``h^c_{k+1} = (1-alpha) h^c_k +
    alpha h_hat_k``, ``h^c_0 = 0`` (every neighbour can compute them, so can the eavesdropper)."""
    hat = np.empty_like(messages)
    hc = np.zeros_like(messages[0])
    for k in range(messages.shape[0]):
        hat[k] = hc + messages[k]
        hc = (1 - alpha) * hc + alpha * hat[k]
    return hat


def invert_momentum(x: np.ndarray, W: np.ndarray, alpha: float, beta: float,
                    gamma: float) -> np.ndarray:
    """Section II-C of Huo et al. for momentum DSGD (2), ``m_0 = 0``: gradients ``(T-1, n, d)``
    from the states ``x`` ``(T, n, d)`` (``sum_j w_ij (x_j - x_i) = (W x)_i - x_i`` for a
    row-stochastic W)."""
    m = np.zeros_like(x[0])
    g = np.empty_like(x[:-1])
    for t in range(x.shape[0] - 1):
        m_next = (x[t] - x[t + 1] + gamma * (_mix(W, x[t]) - x[t])) / alpha
        g[t] = m_next - beta * m
        m = m_next
    return g


def invert_dpp2(y: np.ndarray, z: np.ndarray, P: np.ndarray, rho: float,
                eta: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DPP2's gradients and states ``(T, n, d)`` each, from the messages and the eta^k used by
    the attacker (the true public ones, or a guess): replays ``d^k, q^k`` from zero."""
    d, q = np.zeros_like(y[0]), np.zeros_like(y[0])
    g, x = np.empty_like(y), np.empty_like(y)
    for k in range(y.shape[0]):
        e = float(eta[k])
        Py = _mix(P, y[k])
        g[k] = z[k] - e * q - rho * Py
        x[k] = y[k] - (1 - e) * d
        d, q = e * d + y[k], e * q + rho * Py
    return g, x


# ---- ground truth from a run ---------------------------------------------------------------------


@dataclass
class Trace:
    """A recorded run: transcript views ``(T, n, d)``, the clean states ``x_0..x_K`` and the
    gradients the agents actually used."""

    views: dict[str, np.ndarray]
    states: np.ndarray
    grads: np.ndarray


def record(algorithm: Algorithm, problem: Problem, graph, iterations: int, x0, seed: int = 0,
           batch_size: int | None = None) -> Trace:
    """Run with the transcript and keep every state; ``grads[k]`` is ``grad f_i(x_{i,k})`` (the
    minibatch gradient of iteration k's draw when ``batch_size`` is given)."""
    states: list[torch.Tensor] = []
    res = run(algorithm, problem, graph, iterations, x0=x0, seed=seed, record=True,
              log_every=iterations, reference=None,
              callback=lambda k, s: states.append(algorithm.iterate(s).detach().clone()))
    X0 = problem.check_x(x0)
    X = torch.stack([X0] + states)
    rng, agents = Streams(seed), np.arange(problem.n_agents)
    if batch_size is None:
        G = torch.stack([problem.grad(Xk) for Xk in X])
    else:
        G = torch.stack([problem.stochastic_grad(Xk, rng, k, batch_size, agents, "sample")
                         for k, Xk in enumerate(X)])
    assert res.transcript is not None       # record=True keeps the transcript
    views = {name: res.transcript.stacked(name, graph.n) for name in res.transcript.names()}
    return Trace(views, X.numpy(), G.numpy())


# ---- the lab ----------------------------------------------------------------------------------


def relative_error(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per iteration ``||est_k - truth_k|| / ||truth_k||`` (Frobenius norm over agents and
    coordinates)."""
    num = np.linalg.norm((estimate - truth).reshape(truth.shape[0], -1), axis=1)
    den = np.linalg.norm(truth.reshape(truth.shape[0], -1), axis=1)
    return num / np.maximum(den, 1e-300)


@dataclass
class Attack:
    """One reconstruction: what was attacked, how, and the error per iteration."""

    scenario: str
    method: str
    mechanism: str
    target: str
    errors: np.ndarray

    @property
    def error(self) -> float:
        """Median over iterations of the relative error."""
        return float(np.median(self.errors))

    @property
    def final_error(self) -> float:
        """Relative error of the reconstruction at the last iteration."""
        return float(self.errors[-1])


@dataclass
class LabResult:
    """One scenario of the eavesdropper's lab: its name, a description of the algorithms and the
    inversions used, and one :class:`Attack` per reconstruction."""
    scenario: str
    description: str
    attacks: list[Attack] = field(default_factory=list)


def _algorithm(name: str) -> Any:
    """The registered class ``name``; its constructor's parameters are its own, so: Any."""
    return algorithms.get(name)


def _setting(n: int = 6, dim: int = 5, seed: int = 0):
    problem = NonconvexLogistic.random(n_agents=n, samples=50, dim=dim, seed=seed)
    return problem, graphs.ring(n), problem.default_x0(seed)


def _scenario_dgd(K: int, seed: int) -> LabResult:
    problem, g, x0 = _setting(seed=seed)
    out = LabResult("dgd", "DGD (nonconvex logistic) and DSGD (logistic regression, minibatch "
                    "of 5 of 50 local samples): g_k = (W x_k - x_{k+1}) / eta_k")
    rng = np.random.default_rng(seed)
    samples = LogisticRegression(rng.standard_normal((g.n, 50, problem.dim)),
                                 rng.choice([-1.0, 1.0], size=(g.n, 50)), reg=0.01)
    for name, alg, prob, batch in (("DGD", _algorithm("dgd")(0.2), problem, None),
                                   ("DSGD", _algorithm("dsgd")(0.2, batch_size=5), samples,
                                    5)):
        tr = record(alg, prob, g, K, x0, seed, batch)
        est = invert_dgd(tr.views["x"], g.W, alg.step_size)
        out.attacks.append(Attack("dgd", name, "none", "local gradients",
                                  relative_error(est, tr.grads[:K - 1])))
    return out


def _tracking(name: str, alg: Algorithm, mech: str, problem, g, x0, K, seed,
              M: np.ndarray, alpha: tuple[float, float] | None = None) -> list[Attack]:
    tr = record(alg, problem, g, K, x0, seed)
    x, y = tr.views["x"], tr.views["y"]
    if alpha is not None:
        x, y = decode_copies(x, alpha[0]), decode_copies(y, alpha[1])
    g_hat = invert_tracking(y, M)
    return [Attack("tracking", name, mech, "local gradients", relative_error(g_hat, tr.grads[:K])),
            Attack("tracking", name, mech, "local states", relative_error(x, tr.states[:K]))]


def _scenario_tracking(K: int, seed: int) -> LabResult:
    problem, g, x0 = _setting(seed=seed)
    out = LabResult("tracking", "gradient tracking, DiaDSP and PGTC: g_0 = y_0, g_{k+1} = g_k + "
                    "y_{k+1} - W y_k (PGTC: on the decoded public copies, W_gamma = I - "
                    "gamma (I - W))")
    eta, s, q = 0.1, 1.0, 0.9
    out.attacks += _tracking("gradient tracking", _algorithm("gradient_tracking")(eta),
                             "none", problem, g, x0, K, seed, g.W)
    out.attacks += _tracking("DiaDSP", _algorithm("diadsp")(
        eta, Laplace(s, decay=q), Laplace(s, decay=q)), f"Laplace s={s:g}, q={q:g}",
        problem, g, x0, K, seed, g.W)
    if "pgtc" in algorithms.available():
        gamma, a = 0.5, 0.5
        Wg = np.eye(g.n) - gamma * (np.eye(g.n) - g.W)
        pgtc = _algorithm("pgtc")
        for comp, noise, mech in ((Identity(), 0.0, "none"), (TopK(2), 0.0, "Top-2 only"),
                                  (TopK(2), s, f"Top-2 + Laplace s={s:g}, q={q:g}")):
            alg = pgtc(eta, gamma, a, a, comp, noise, noise, q=q)
            out.attacks += _tracking(f"PGTC ({comp!r})", alg, mech, problem, g, x0, K, seed, Wg,
                                     (a, a))
    return out


def _scenario_dpp2(K: int, seed: int) -> LabResult:
    problem, g, x0 = _setting(seed=seed)
    out = LabResult("dpp2", "DPP2: duals replayed from the messages with the public eta^k; "
                    "'eta unknown' replays with eta = 1/2 instead (first tier alone)")
    if "dpp2" not in algorithms.available():
        return out
    rng = np.random.default_rng(seed)
    etas = rng.uniform(0.0, 1.0, K)
    P = g.laplacian
    rho = 1.0
    for u, r in ((0.0, 0.5), (1.0, 0.5)):
        alg = _algorithm("dpp2")(alpha=0.1, beta=0.05, rho=rho, eta=etas,
                                     noise_w=u or None, noise_e=u or None,
                                     r=r if u else None)
        tr = record(alg, problem, g, K, x0, seed)
        mech = "none" if u == 0 else f"Laplace u={u:g}, r={r:g}"
        for who, eta_used in (("eta known", etas), ("eta unknown", np.full(K, 0.5))):
            g_hat, x_hat = invert_dpp2(tr.views["y"], tr.views["z"], P, rho, eta_used)
            out.attacks.append(Attack("dpp2", f"DPP2 ({who})", mech, "local gradients",
                                      relative_error(g_hat, tr.grads[:K])))
            out.attacks.append(Attack("dpp2", f"DPP2 ({who})", mech, "local states",
                                      relative_error(x_hat, tr.states[:K])))
    return out


def _scenario_momentum(K: int, seed: int) -> LabResult:
    out = LabResult("momentum", "momentum DSGD (2) and DO-ADP (5), minibatch of 1 of 50 local "
                    "samples: Section II-C of Huo et al. on the broadcast states (DO-ADP: the "
                    "public copies x_hat_{t+1} = x_hat_t + s_t, exact states when p = 1, k = d)")
    if "doadp" not in algorithms.available():
        return out
    rng = np.random.default_rng(seed)
    n, d = 6, 5
    problem = LogisticRegression(rng.standard_normal((n, 50, d)),
                                 rng.choice([-1.0, 1.0], size=(n, 50)), reg=0.01)
    g = graphs.ring(n)
    x0 = np.full(d, 0.5)           # a common start: the consensus term vanishes at t = 0
    alpha, beta, gamma = 0.1, 0.15, 0.3
    tr = record(_algorithm("momentum_dsgd")(alpha, gamma, beta), problem, g, K, x0, seed, 1)
    est = invert_momentum(tr.views["x"], g.W, alpha, beta, gamma)
    out.attacks.append(Attack("momentum", "momentum DSGD", "none", "local gradients",
                              relative_error(est, tr.grads[:K - 1])))
    doadp = _algorithm("doadp")
    for sigma, k, mech in ((0.0, None, "none"), (0.0, 2, "Top-2 only"),
                           (1.0, None, "Gaussian sigma=1")):
        tr = record(doadp(alpha, gamma, beta, sigma=sigma, p=1.0, k=k), problem, g, K, x0, seed,
                    1)
        hat = np.concatenate([tr.states[:1], np.cumsum(tr.views["s"], axis=0)])
        est = invert_momentum(hat, g.W, alpha, beta, gamma)
        out.attacks.append(Attack("momentum", f"DO-ADP (k={k or d})", mech, "local gradients",
                                  relative_error(est, tr.grads[:K])))
        out.attacks.append(Attack("momentum", f"DO-ADP (k={k or d})", mech, "local states",
                                  relative_error(hat, tr.states)))
    return out


SCENARIOS: Registry[Callable[[int, int], LabResult]] = Registry("attack scenario",
                                                                "dpnet.lab.audit")
for _name, _fn in (("dgd", _scenario_dgd), ("tracking", _scenario_tracking),
                   ("dpp2", _scenario_dpp2), ("momentum", _scenario_momentum)):
    SCENARIOS.register(_name, _fn)


def lab(names: Sequence[str] | str = "all", iterations: int = 40, seed: int = 0
        ) -> list[LabResult]:
    """Run the attack scenarios (``"all"`` or names of :data:`SCENARIOS`)."""
    names = list(SCENARIOS) if names == "all" else ([names] if isinstance(names, str) else names)
    for n in names:
        if n not in SCENARIOS:
            raise UnknownNameError("attack scenario", n, list(SCENARIOS) + ["all"])
    return [SCENARIOS[n](iterations, seed) for n in names]


def lab_table(results: Sequence[LabResult]) -> str:
    """The lab's results as a Markdown table (lines joined): one row per attack, with its scenario,
    method, privacy mechanism, what it reconstructs and its median and final relative errors."""
    return "\n".join(report.md_table([
        {"scenario": a.scenario, "method": a.method, "privacy mechanism": a.mechanism,
         "reconstructs": a.target, "median rel. error": f"{a.error:.3g}",
         "final rel. error": f"{a.final_error:.3g}"} for res in results for a in res.attacks]))


def write_lab_report(results: Sequence[LabResult], out: str | Path) -> tuple[Path, Path]:
    """``attacks.md`` (table and the inversions used) and ``attacks.png`` (relative error per
    iteration, log scale, one panel per scenario) in folder ``out``."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, png = out / "attacks.md", out / "attacks.png"
    fig, axes = report.figure(1, len(results), figsize=(5.5 * len(results), 4), squeeze=False)
    for ax, res in zip(axes[0], results):
        for a in res.attacks:
            ls = "-" if a.target == "local gradients" else ":"
            ax.semilogy(np.maximum(a.errors, 1e-17), ls, label=f"{a.method}, {a.mechanism} "
                        f"({a.target.split()[-1]})")
        ax.set_title(res.scenario)
        ax.set_xlabel("iteration")
        ax.set_ylabel("relative reconstruction error")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    lines = ["# Eavesdropper lab", "", "Relative error ||estimate - truth|| / ||truth|| of what "
             "an eavesdropper on every link reconstructs from the transcript (median over "
             "iterations, and at the last one).", "", lab_table(results), ""]
    lines += [f"- **{r.scenario}**: {r.description}" for r in results]
    lines += ["", f"![errors]({png.name})", ""]
    md.write_text("\n".join(lines))
    return md, png
