"""DiaDSP (Ding et al. 2021) as written in paper 000 (Xie et al.), eqs. (8)-(11).

Per agent i, with Laplace noise ``xi_{x_i,k} ~ Lap_d(s_x q^k)``, ``xi_{y_i,k} ~ Lap_d(s_y q^k)``:

    x^a_{i,k} = x_{i,k} + xi_{x_i,k},    y^a_{i,k} = y_{i,k} + xi_{y_i,k}          (8)-(9)
    x_{i,k+1} = sum_j w_ij x^a_{j,k} - eta y_{i,k}                                  (10)
    y_{i,k+1} = sum_j w_ij y^a_{j,k} + grad f_i(x_{i,k+1}) - grad f_i(x_{i,k})      (11)

with ``y_{i,0} = grad f_i(x_{i,0})``. The noise enters the state and is carried forward; only
``x^a`` and ``y^a`` cross the network. W must be doubly stochastic with ``rho(W - 11^T/n) < 1``
(self-weights included: the sum over j covers j = i). Tracking identity (paper 000 (51)):
``sum_i y_{i,k} = sum_i grad f_i(x_{i,k}) + sum_{t<k} sum_i xi_{y_i,t}``.

With noise scale 0 this is gradient tracking (:class:`GradientTracking`). Privacy: paper 000's
Theorem 3 / Proposition 1 with gamma = 1 and the identity compressor (DiaDSP is PGTC there).
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import positive
from ..noise import Noise, none
from ..privacy.xie import xie_mechanism
from ._xie import register_xie_accountant
from .base import Algorithm, Context, State, register


@register
class DiaDSP(Algorithm):
    name = "diadsp"
    paper = "Ding et al. (2021), eqs. (8)-(11) of Xie et al. (paper 000)"
    private = True

    def __init__(self, eta: float, noise_x: Noise | None = None,
                 noise_y: Noise | None = None) -> None:
        self.eta = positive("eta", eta)
        self.noise_x = noise_x if noise_x is not None else none()
        self.noise_y = noise_y if noise_y is not None else none()

    def check_graph(self, graph):
        graph.require_mixing(self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0, "y": ctx.grad(x0), "g": ctx.grad(x0)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x, y, g = state["x"], state["y"], state["g"]
        # the draws and the neighbour sums are fresh tensors: updating them in place saves an
        # (n, d) allocation and pass per term, which is most of a step at small d
        xa = ctx.perturb(x, self.noise_x, "noise_x", k)                              # (8)
        ya = ctx.perturb(y, self.noise_y, "noise_y", k)                              # (9)
        x_next = ctx.net.mix(ctx.net.exchange(xa, "x")).sub_(y, alpha=self.eta)       # (10)
        g_next = ctx.grad(x_next)
        y_next = ctx.net.mix(ctx.net.exchange(ya, "y")).add_(g_next).sub_(g)          # (11)
        return {"x": x_next, "y": y_next, "g": g_next}

    # -- privacy: accountant "xie" (below) and the generic ones over mechanism() -------------
    default_accountant: str | None = "xie"
    # released: the state holds clean gradients and trackers: only the noisy messages are covered
    released = ("message", "x")
    noise_attributes: ClassVar[tuple[str, ...]] = ("noise_x", "noise_y")

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..K: x^a and y^a, Laplace, sensitivities of paper 000's appendix."""
        return xie_mechanism("pgtc", problem, graph, iterations, self.eta, self.noise_x,
                             self.noise_y, assumptions.gradient_bound)


@register
class GradientTracking(DiaDSP):
    """Noise-free gradient tracking (DIGing / NEXT form): DiaDSP with noise scale 0."""

    name = "gradient_tracking"
    paper = "Nedic, Olshevsky & Shi (2017); Qu & Li (2018)"
    private = False

    def __init__(self, eta: float) -> None:
        super().__init__(eta)

    default_accountant = None       # not private: privacy() says so (and checks the names)
    noise_attributes = ()


register_xie_accountant(DiaDSP, "pgtc", "noise_y", "Theorem 3 / Proposition 1")
