"""LDOL: locally differentially private decentralized online learning with a weakening factor,
Chen & Wang's earlier method ([47] of paper 002), as written in paper 002's eq. (17).

Per agent i, with ``gamma_t = gamma0/(t+1)^u``, ``lambdachk_t = lambda0/(t+1)^v`` and noise
``varthetachk_t^j`` of i.i.d. Laplace coordinates whose level *increases*,
``E||varthetachk_t^i||^2``-parameter ``sigmachk_t^i = sigma0_i (t+1)^{varsigma_i}`` (per-coordinate
Laplace scale ``sigmachk_t^i / sqrt(2)``, the convention of Algorithm 1's Theorem 5):

    theta_{t+1}^i = Pi_Theta[ theta_t^i + gamma_t sum_{j in N_i} w_ij (theta_t^j + varthetachk_t^j
                              - theta_t^i) - lambdachk_t grad f_t^i(theta_t^i) ]          (17)

``grad f_t^i`` is the all-data online gradient (paper 002 lets LDOL use it). Conditions
(§IV-B): ``varsigma_i in (0, 1/2)`` and ``v > u > max_i varsigma_i + 1/2``; ``v <= 1``.
Filled in where paper 002 is silent (catalogue 3.A, ``[MISSING]``): Theta is the box
``[-radius, radius]^n`` (``radius=None``: no projection), which keeps the gradients bounded and is
l1-nonexpansive (used by the accountant); the noise is Laplace. Privacy:
accountant ``"chen_wang"`` (the default), :func:`dpnet.privacy.chen_wang.ldol_epsilons`
(Theorem 5(1)'s argument applied to (17), ``[DERIVED]``; [47]'s own theorem was not consulted;
assumption ``l1_gradient_bound``), and :meth:`LDOL.mechanism` for the generic accountants.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError, open_interval, positive, require
from ..noise import Laplace
from ..privacy import accountants, chen_wang
from ..privacy.guarantee import PrivacyGuarantee
from ..problems.online import all_data_grad
from .base import Algorithm, BoxConstrained, Context, State, register
from .ldp_online import (
    NEIGHBOURS,
    PerAgent,
    neighbour_step,
    per_agent,
    register_neighbour_weights,
    weight_degree,
)


@register
class LDOL(BoxConstrained, Algorithm):
    name = "ldol"
    paper = "Chen & Wang [47], eq. (17) of paper 002"
    private = True

    def __init__(self, lambda0: float, v: float, gamma0: float, u: float, sigma0: PerAgent,
                 varsigma: PerAgent, radius: float | None = None) -> None:
        self.lambda0 = positive("lambda0", lambda0)
        self.gamma0 = positive("gamma0", gamma0)
        self.v = positive("v", v)
        require(self.v <= 1.0, "v", v, "0 < v <= 1")
        self.u = open_interval("u", u, 0.5, self.v)
        s0 = np.atleast_1d(np.asarray(sigma0, dtype=np.float64))
        require(s0.ndim == 1 and bool(np.all(np.isfinite(s0) & (s0 >= 0))), "sigma0", sigma0,
                "sigma0_i >= 0, a scalar or one per agent")
        vs = per_agent("varsigma", varsigma, 0.0, 0.5)
        if not self.u > float(vs.max()) + 0.5:
            raise ParameterError("u", u, f"v > u > max_i varsigma_i + 1/2 = {vs.max() + 0.5:g}")
        self.sigma0 = s0 if s0.size > 1 else float(s0[0])
        self.varsigma = vs if vs.size > 1 else float(vs[0])
        self.radius = None if radius is None else positive("radius", radius)
        self.noise = Laplace(np.asarray(self.sigma0) / math.sqrt(2.0), power=-vs)

    def coupling(self, t: int) -> float:
        """The consensus weight ``gamma_t = gamma0 / (t+1)^u`` of (17) at iteration t."""
        return self.gamma0 / (t + 1.0) ** self.u

    def step_size(self, t: int) -> float:
        """The gradient step ``lambdachk_t = lambda0 / (t+1)^v`` of (17) at iteration t."""
        return self.lambda0 / (t + 1.0) ** self.v

    def check_graph(self, graph) -> None:
        register_neighbour_weights(graph, "LDOL (17)")
        self.noise.schedule.check(graph.n)

    def init(self, ctx: Context, x0) -> State:
        return {"x": self._project(x0), "deg": weight_degree(ctx)}

    def step(self, ctx: Context, state: State, t: int) -> State:
        theta, deg = state["x"], state["deg"]
        H = ctx.net.exchange(ctx.perturb(theta, self.noise, "noise", t), "y",
                             matrix=NEIGHBOURS)
        g = all_data_grad(ctx, theta, t)
        inner = theta + self.coupling(t) * neighbour_step(ctx, H, theta, deg) \
            - self.step_size(t) * g
        return {"x": self._project(inner), "deg": deg}

    # -- privacy: accountant "chen_wang" (below) and the generic ones over mechanism() -------
    default_accountant = "chen_wang"
    # released: the state holds a clean gradient step: only the noisy messages are covered
    released = ("message", "y")
    noise_attributes = ("noise", "sigma0")      # as LDPOnline's: sigma0 may be per agent

    def mechanism(self, problem, graph, iterations, assumptions):
        """The messages theta_t + varthetachk_t, t = 1..T: Laplace ``sigma0_i (t+1)^varsigma_i /
        sqrt(2)`` per coordinate, l1 sensitivity ``2 d rho_t`` (``[DERIVED]``, module
        docstring); their basic composition is the ``"chen_wang"`` account."""
        return chen_wang.ldol_mechanism(graph, iterations, self.lambda0, self.v, self.gamma0,
                                        self.u, self.sigma0, self.varsigma,
                                        assumptions.l1_gradient_bound)


@accountants.register(LDOL, "chen_wang", pure=True)
def chen_wang_accountant(alg, problem, graph, iterations, assumptions):
    """[DERIVED] Theorem 5(1)'s argument (paper 002) applied to LDOL (17), finite horizon; needs
    the l1_gradient_bound d."""
    d = assumptions.l1_gradient_bound
    if iterations is None or d is None:
        raise ParameterError("iterations/l1_gradient_bound", (iterations, d),
                             "a finite horizon and the l1 gradient bound d")
    deg = np.abs(graph.sparse("laplacian_like").diagonal())
    eps = chen_wang.ldol_epsilons(alg.lambda0, alg.v, alg.gamma0, alg.u, alg.sigma0,
                                  alg.varsigma, deg, d, iterations)
    return PrivacyGuarantee.from_per_agent(
        eps, delta=0.0, horizon=int(iterations),
        theorem="[DERIVED] Theorem 5(1)'s sensitivity argument applied to (17): rho_t = "
                "max_i|1 - gamma_{t-1}|w_ii|| rho_{t-1} + lambda_{t-1}, eps_i = "
                "sum_t 2 d rho_t / nu_t",
        assumptions=(f"||grad l||_1 <= d = {d:g}",
                     "projection onto a box (l1-nonexpansive) or none"),
        notes=("not [47]'s own theorem, which was not available",))
