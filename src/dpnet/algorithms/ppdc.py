"""PPDC: differentially private primal-dual method with compressed communication (Xie et al.,
paper 000, Algorithm 2, eqs. (31)-(32) with (14) and (16)).

Per agent i at iteration k, with ``xi_{x_i,k} ~ Lap_d(s_{x_i} q_i^k)``, ``xi_{v_i,k} ~
Lap_d(s_{v_i} q_i^k)``, a compressor C and ``L = I - W`` (``sum_j L_ij h_j = sum_j w_ij (h_i -
h_j)``):

    broadcast C(x_{i,k} + xi_{x_i,k} - x^c_{i,k})                        (the only message)
    x_hat_{j,k} = x^c_{j,k} + C(x_{j,k} + xi_{x_j,k} - x^c_{j,k})                           (14)
    x_{i,k+1} = x_{i,k} + xi_{x_i,k}
                - eta (gamma sum_j L_ij x_hat_{j,k} + omega v_{i,k} + grad f_i(x_{i,k}))     (31)
    v_{i,k+1} = v_{i,k} + xi_{v_i,k} + eta omega sum_j L_ij x_hat_{j,k}                      (32)
    x^c_{j,k+1} = (1 - alpha_x) x^c_{j,k} + alpha_x x_hat_{j,k}                              (16)

with ``x^c_{i,0} = 0`` and ``v_{i,0} = 0``. ``v`` never crosses the network, yet its noise is
needed for privacy. With C = identity this is (29)-(30); with noise scale 0 as well it is the
primal-dual method (27)-(28) of Yi et al. Invariant (79): ``sum_i v_{i,k} = sum_{t<k} sum_i
xi_{v_i,t}``; at a consensus fixed point ``sum_i grad f_i(x) = -omega sum_t sum_i xi_{v_i,t}``.
Requirements: W doubly stochastic, graph connected, ``rho > 0``; ``alpha_x in (0, 1/r)`` for the
compressor's ``(r, phi)`` unless ``check_theory=False`` (Table I's norm-sign row: ``alpha_x =
0.2 = 1/r`` for d = 10, on the boundary of the open interval).

Noise: ``noise_x``/``noise_v`` are noise objects or Laplace scales with the common decay ``q``.
Privacy: Theorem 6 (finite K, gradient bound M; "printed", "derived", or the default "sound"
max of the two) and Proposition 2 (``iterations=None``, adjacency radius, the paper's delta; only
``variant="printed"``: an audit finds it exceeded when eta > q, see privacy/xie.py).
"""

from __future__ import annotations

import torch

from .. import compression
from ..errors import positive
from ..noise import Noise, PerAgent
from ..privacy import xie
from . import _xie
from .base import Algorithm, Context, State, register


@register
class PPDC(Algorithm):
    name = "ppdc"
    paper = "Xie, Yi, Wang, Cao, Ren: Algorithm 2, eqs. (14), (16), (31)-(32) (paper 000)"
    private = True

    def __init__(self, eta: float, gamma: float, omega: float, alpha_x: float,
                 compressor: compression.Compressor | dict | str | None = None,
                 noise_x: Noise | PerAgent | None = None, noise_v: Noise | PerAgent | None = None,
                 q: PerAgent | None = None, check_theory: bool = True) -> None:
        self.eta, self.gamma = positive("eta", eta), positive("gamma", gamma)
        self.omega, self.alpha_x = positive("omega", omega), positive("alpha_x", alpha_x)
        self.compressor = compression.from_spec(compressor)
        self.q = _xie.decay(q)
        self.noise_x = _xie.laplace_noise("noise_x", noise_x, q)
        self.noise_v = _xie.laplace_noise("noise_v", noise_v, q)
        self.check_theory = bool(check_theory)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def check_problem(self, problem) -> None:
        self.compressor.check_dim(problem.dim)
        if self.check_theory:
            _xie.check_alpha("alpha_x", self.alpha_x, self.compressor, problem.dim)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0, "v": torch.zeros_like(x0), "g": ctx.grad(x0),
                "xc": ctx.net.halo_zeros(ctx.dim)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        net, xc = ctx.net, state["xc"]
        xa = ctx.perturb(state["x"], self.noise_x, "noise_x", k)
        x_hat = xc + net.exchange(xa - net.own(xc), "x", self.compressor)               # (14)
        Lx = net.laplacian(x_hat)                                      # sum_j L_ij x_hat_j
        x_next = xa - self.eta * (self.gamma * Lx + self.omega * state["v"] + state["g"])  # (31)
        v_next = (ctx.perturb(state["v"], self.noise_v, "noise_v", k)
                  + self.eta * self.omega * Lx)                                         # (32)
        return {"x": x_next, "v": v_next, "g": ctx.grad(x_next),
                "xc": (1 - self.alpha_x) * xc + self.alpha_x * x_hat}                   # (16)

    # -- privacy: accountant "xie" (below) and the generic ones over mechanism() -------------
    default_accountant = "xie"
    # released: the public copies: a function of the (noisy, compressed) messages
    released = ("state", "xc")
    noise_attributes = ("noise_x", "noise_v")

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..K: the x and v messages, Laplace, sensitivities of paper 000's appendix."""
        return xie.xie_mechanism("ppdc", problem, graph, iterations, self.eta, self.noise_x,
                                 self.noise_v, assumptions.gradient_bound, self.omega)


_xie.register_xie_accountant(PPDC, "ppdc", "noise_v", "Theorem 6 / Proposition 2")
