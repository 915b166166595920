"""LDP decentralized online learning: Chen & Wang (paper 002), Algorithm 1.

Per agent i (m agents, W Laplacian-like: ``w_ij > 0`` on edges, ``w_ii = -sum_j w_ij``), with
``lambda_t = lambda0/(t+1)^v`` and i.i.d. ``Lap(nu_t^i)`` coordinates,
``nu_t^i = sigma0_i / (sqrt(2) (t+1)^{varsigma_i})`` (Theorem 5: ``(sigma_t^i)^2 = 2 (nu_t^i)^2``):

    y_t^j         = theta_t^j + vartheta_t^j                       (line 7; y_0 sent before t = 0)
    theta_{t+1}^i = theta_t^i + sum_{j in N_i} w_ij (y_t^j - theta_t^i)
                    - lambda_t grad f_t^i(theta_t^i)                (line 6)

with ``grad f_t^i`` the gradient at the current iterate over *all* data acquired up to t (line 4;
an :class:`~dpnet.problems.online.OnlineProblem`, or the full local gradient of a static problem).
Noise is on the transmitted message only: the agent's own state enters clean. Compact form
(Appendix A): ``theta_{t+1} = ((I + W) (x) I) theta_t + vartheta^w_t - lambda_t grad f_t(theta_t)``,
``vartheta^w_i = sum_{j in N_i} w_ij vartheta_j``; so the mean obeys (checkable claim 3.D.1)
``thetabar_{t+1} = thetabar_t + (1/m) sum_i vartheta^w_i - (lambda_t/m) sum_i grad f_t^i``.

Conditions (Assumption 4, (11)): ``v in (1/2, 1)``, every ``varsigma_i in (1/2, 1)``,
``max_i varsigma_i < v``. The graph must be undirected and connected with nonnegative weights and
``I + W`` must mix (spectral radius < 1 on the disagreement space); Assumption 3's
``delta_m > -1`` is *not* enforced, because the paper's own ring (w_ij = 0.3, delta_m = -1.2)
violates it: :func:`dpnet.privacy.chen_wang.assumption3` reports it. The graph's off-diagonal
weights are W's (``graph.laplacian_like``); e.g. ``graphs.ring(10, weight=0.3)``.
``sigma0 = 0`` is exactly the noise-free method. Privacy: accountant ``"chen_wang"`` (the
default), Lemma 1 + Theorem 5(1) (:mod:`dpnet.privacy.chen_wang`), which needs the assumption
``l1_gradient_bound`` (d); :meth:`LDPOnline.mechanism` gives the generic accountants the same
Laplace releases (their ``laplace`` composition is Theorem 5(1)). A calibration scales the noise
(every agent's sigma0_i) by one factor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import open_interval, positive, require
from ..graphs.base import off_diagonal
from ..noise import Laplace
from ..privacy import accountants, chen_wang
from ..problems.online import all_data_grad
from .base import Algorithm, Context, State, register

NEIGHBOURS = "chen_wang.neighbours"   # off-diagonal part of W: w_ij on edges, zero diagonal

PerAgent = float | Sequence[float] | np.ndarray


def register_neighbour_weights(graph, who: str) -> str:
    """Check the Laplacian-like convention's needs and register W's off-diagonal part."""
    require(not graph.directed and graph.is_symmetric(), "graph", graph.name,
            f"{who} needs an undirected graph with symmetric weights (Assumption 3)")
    graph.require_connected()
    off = off_diagonal(graph.sparse("W"))
    low = float(off.data.min()) if off.nnz else 0.0
    require(low >= 0, "graph.W", f"{graph.name} (min off-diagonal {low:.4g})",
            f"{who} needs w_ij >= 0 on edges")
    info = chen_wang.assumption3(graph)
    require(info["mixing_radius"] < 1.0, "graph.W", graph.name,
            f"{who} needs I + W to mix: spectral radius of I + W - 11^T/m on the disagreement "
            f"space < 1, got {info['mixing_radius']:.4g} (eigenvalues of W in "
            f"[{info['delta_m']:.4g}, {info['delta_2']:.4g}])")
    graph.add_matrix(NEIGHBOURS, off)
    return NEIGHBOURS


def neighbour_step(ctx: Context, H, x, deg, matrix: str = NEIGHBOURS):
    """``sum_{j in N_i} w_ij (h_j - x_i)`` from the received halo H and the own clean x."""
    return ctx.net.mix(H, matrix) - deg * x


def weight_degree(ctx: Context, matrix: str = NEIGHBOURS):
    """``-w_ii = sum_{j in N_i} w_ij`` of each local agent, ``(n_local, 1)`` (own weights)."""
    return ctx.net.mix(ctx.net.halo_zeros(1) + 1.0, matrix)


def per_agent(name: str, value: PerAgent, lo: float, hi: float) -> np.ndarray:
    """``value`` (a scalar or one value per agent) as a 1-d float array, each entry checked to lie in the
    open interval ``(lo, hi)``; raises :class:`~dpnet.errors.ParameterError` naming ``name`` otherwise."""
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    require(arr.ndim == 1 and arr.size >= 1, name, value, "a scalar or one value per agent")
    for x in arr:
        open_interval(name, float(x), lo, hi)
    return arr


@register
class LDPOnline(Algorithm):
    name = "ldp_online"
    paper = "Chen & Wang, LDP decentralized online stochastic optimization, Algorithm 1 (paper 002)"
    private = True

    def __init__(self, lambda0: float, v: float, sigma0: PerAgent, varsigma: PerAgent) -> None:
        self.lambda0 = positive("lambda0", lambda0)
        self.v = open_interval("v", v, 0.5, 1.0)
        s0 = np.atleast_1d(np.asarray(sigma0, dtype=np.float64))
        require(s0.ndim == 1 and bool(np.all(np.isfinite(s0) & (s0 >= 0))), "sigma0", sigma0,
                "sigma0_i >= 0 (0: no noise), a scalar or one per agent")
        self.sigma0 = s0 if s0.size > 1 else float(s0[0])
        vs = per_agent("varsigma", varsigma, 0.5, 1.0)
        require(float(vs.max()) < self.v, "varsigma", varsigma,
                f"max_i varsigma_i < v = {self.v:g} (condition (11))")
        self.varsigma = vs if vs.size > 1 else float(vs[0])
        if s0.size > 1 and vs.size > 1:
            require(s0.size == vs.size, "varsigma", varsigma,
                    f"as many entries as sigma0 ({s0.size})")
        self.noise = Laplace(np.asarray(self.sigma0) / math.sqrt(2.0), power=self.varsigma)

    def step_size(self, t: int) -> float:
        """The gradient step ``lambda_t = lambda0 / (t+1)^v`` of line 6 at iteration t."""
        return self.lambda0 / (t + 1.0) ** self.v

    def check_graph(self, graph) -> None:
        register_neighbour_weights(graph, "Algorithm 1 of Chen & Wang")
        self.noise.schedule.check(graph.n)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0, "deg": weight_degree(ctx)}

    def step(self, ctx: Context, state: State, t: int) -> State:
        theta, deg = state["x"], state["deg"]
        y = ctx.perturb(theta, self.noise, "noise", t)                 # y_t = theta_t + vartheta_t
        H = ctx.net.exchange(y, "y", matrix=NEIGHBOURS)
        g = all_data_grad(ctx, theta, t)                               # line 4
        theta_next = theta + neighbour_step(ctx, H, theta, deg) - self.step_size(t) * g  # line 6
        return {"x": theta_next, "deg": deg}

    # -- privacy: accountant "chen_wang" (below) and the generic ones over mechanism() -------
    default_accountant = "chen_wang"
    # released: the state holds a clean gradient step: only the noisy messages are covered
    released = ("message", "y")
    # the accountant reads sigma0, the steps noise; noise first: sigma0 may be one per agent,
    # and a calibration's zero-noise check reads the noise object first
    noise_attributes = ("noise", "sigma0")

    def mechanism(self, problem, graph, iterations, assumptions):
        """The messages y_1..y_T: Laplace ``nu_t^i`` per coordinate, l1 sensitivity ``2 d rho_t``
        ((22)); their basic composition is Theorem 5(1)."""
        return chen_wang.ldp_online_mechanism(graph, iterations, self.lambda0, self.v,
                                              self.sigma0, self.varsigma,
                                              assumptions.l1_gradient_bound)


@accountants.register(LDPOnline, "chen_wang", pure=True)
def chen_wang_accountant(alg, problem, graph, iterations, assumptions):
    """Lemma 1 + Theorem 5(1) of paper 002 over iterations = T (messages y_1..y_T); needs the
    l1_gradient_bound d of Assumption 5. Theorem 5(2) (T = inf) is not computed."""
    return chen_wang.ldp_online_guarantee(graph, iterations, alg.lambda0, alg.v, alg.sigma0,
                                          alg.varsigma, assumptions.l1_gradient_bound)
