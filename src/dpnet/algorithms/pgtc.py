"""PGTC: differentially private gradient tracking with compressed communication (Xie et al.,
paper 000, Algorithm 1, eqs. (8)-(17)).

Per agent i at iteration k, with ``xi_{x_i,k} ~ Lap_d(s_{x_i} q_i^k)``, ``xi_{y_i,k} ~
Lap_d(s_{y_i} q_i^k)`` and a compressor C:

    x^a_{i,k} = x_{i,k} + xi_{x_i,k},    y^a_{i,k} = y_{i,k} + xi_{y_i,k}                  (8)-(9)
    broadcast C(x^a_{i,k} - x^c_{i,k}) and C(y^a_{i,k} - y^c_{i,k})          (the only messages)
    x_hat_{j,k} = x^c_{j,k} + C(x^a_{j,k} - x^c_{j,k})   (y_hat likewise)                  (14)-(15)
    x_{i,k+1} = x^a_{i,k} + gamma sum_j w_ij (x_hat_{j,k} - x_hat_{i,k}) - eta y_{i,k}        (12)
    y_{i,k+1} = y^a_{i,k} + gamma sum_j w_ij (y_hat_{j,k} - y_hat_{i,k})
                + grad f_i(x_{i,k+1}) - grad f_i(x_{i,k})                                    (13)
    x^c_{j,k+1} = (1 - alpha_x) x^c_{j,k} + alpha_x x_hat_{j,k}  (y^c: alpha_y)      (16)-(17)

with ``x^c_{i,0} = y^c_{i,0} = 0`` and ``y_{i,0} = grad f_i(x_{i,0})``. The noise enters the
state and is carried forward; the gradient step uses the clean ``y``. Every holder of agent j's
copy ``x^c_j`` computes the same values, so the copies are one halo tensor. Requirements: W
doubly stochastic, graph connected, ``rho = 1 - rho(W - 11^T/n) > 0`` (the update does not read
``w_ii``); ``alpha_x, alpha_y in (0, 1/r)`` for the compressor's ``(r, phi)`` (Assumption 5)
unless ``check_theory=False`` (Table I's norm-sign row has ``alpha = 0.5 > 1/r = 0.2``).

Identity (51): ``sum_i y_{i,k} = sum_i grad f_i(x_{i,k}) + sum_{t<k} sum_i xi_{y_i,t}`` for any C.
With ``gamma = 1`` and C = identity this is DiaDSP (eqs. (10)-(11)) for any self-weights.

Noise: ``noise_x``/``noise_y`` are noise objects or Laplace scales ``s`` (numbers, or one per
agent) with the common decay ``q``. ``batch_size`` replaces every ``grad f_i`` by a minibatch
gradient of that many local samples (drawn at iteration k+1 for ``x_{k+1}``, at 0 for
``x_0``), each per-sample gradient clipped when given (``clip`` in l2, ``coordinate_clip`` per
coordinate): the stochastic PGTC that
paper 001 runs as its CPGT baseline. Privacy: Theorem 3 (finite K, gradient bound M; "printed"
sqrt(eta), "derived" eta, or the default "sound" max of the two) and Proposition 1
(``iterations=None``, adjacency radius, the paper's delta; "sound" = "derived", see privacy/xie.py).
"""

from __future__ import annotations

from .. import compression
from ..errors import positive, positive_int
from ..noise import Noise, PerAgent
from ..privacy import xie
from ..problems.stochastic import clip_argument, clipped_stochastic_grad
from . import _xie
from .base import Algorithm, Context, State, register


@register
class PGTC(Algorithm):
    name = "pgtc"
    paper = "Xie, Yi, Wang, Cao, Ren: Algorithm 1, eqs. (8)-(17) (paper 000)"
    private = True

    def __init__(self, eta: float, gamma: float, alpha_x: float, alpha_y: float,
                 compressor: compression.Compressor | dict | str | None = None,
                 noise_x: Noise | PerAgent | None = None, noise_y: Noise | PerAgent | None = None,
                 q: PerAgent | None = None, check_theory: bool = True,
                 batch_size: int | None = None, clip: float | None = None,
                 coordinate_clip: float | None = None) -> None:
        self.eta, self.gamma = positive("eta", eta), positive("gamma", gamma)
        self.alpha_x, self.alpha_y = positive("alpha_x", alpha_x), positive("alpha_y", alpha_y)
        self.compressor = compression.from_spec(compressor)
        self.q = _xie.decay(q)
        self.noise_x = _xie.laplace_noise("noise_x", noise_x, q)
        self.noise_y = _xie.laplace_noise("noise_y", noise_y, q)
        self.check_theory = bool(check_theory)
        self.batch_size = None if batch_size is None else positive_int("batch_size", batch_size)
        self.clip = clip_argument(clip, coordinate_clip)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def check_problem(self, problem) -> None:
        self.compressor.check_dim(problem.dim)
        if self.check_theory:
            _xie.check_alpha("alpha_x", self.alpha_x, self.compressor, problem.dim)
            _xie.check_alpha("alpha_y", self.alpha_y, self.compressor, problem.dim)

    def _grad(self, ctx: Context, x, k: int):
        if self.batch_size is None:
            return ctx.grad(x)
        return clipped_stochastic_grad(ctx.problem, x, ctx.rng, k, self.batch_size, ctx.agents,
                                       clip=self.clip)

    def init(self, ctx: Context, x0) -> State:
        g = self._grad(ctx, x0, 0)
        return {"x": x0, "y": g, "g": g, "xc": ctx.net.halo_zeros(ctx.dim),
                "yc": ctx.net.halo_zeros(ctx.dim)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        net, C = ctx.net, self.compressor
        xc, yc = state["xc"], state["yc"]
        xa = ctx.perturb(state["x"], self.noise_x, "noise_x", k)                       # (8)
        ya = ctx.perturb(state["y"], self.noise_y, "noise_y", k)                       # (9)
        x_hat = xc + net.exchange(xa - net.own(xc), "x", C)                             # (14)
        y_hat = yc + net.exchange(ya - net.own(yc), "y", C)                             # (15)
        # gamma sum_j w_ij (h_j - h_i) = -gamma [L h]_i
        x_next = xa - self.gamma * net.laplacian(x_hat) - self.eta * state["y"]         # (12)
        g_next = self._grad(ctx, x_next, k + 1)
        y_next = ya - self.gamma * net.laplacian(y_hat) + g_next - state["g"]           # (13)
        return {"x": x_next, "y": y_next, "g": g_next,
                "xc": (1 - self.alpha_x) * xc + self.alpha_x * x_hat,                   # (16)
                "yc": (1 - self.alpha_y) * yc + self.alpha_y * y_hat}                   # (17)

    # -- privacy: accountant "xie" (below) and the generic ones over mechanism() -------------
    default_accountant = "xie"
    # released: the public copies: a function of the (noisy, compressed) messages
    released = ("state", "xc")
    noise_attributes = ("noise_x", "noise_y")

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..K: the x and y messages, Laplace, sensitivities of paper 000's appendix."""
        return xie.xie_mechanism("pgtc", problem, graph, iterations, self.eta, self.noise_x,
                                 self.noise_y, assumptions.gradient_bound)


_xie.register_xie_accountant(PGTC, "pgtc", "noise_y", "Theorem 3 / Proposition 1")
