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

from typing import Any

from ..errors import ParameterError, positive
from ..noise import Laplace, Noise, none
from ..privacy import xie
from ..privacy.guarantee import PrivacyGuarantee
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
        xa = x + ctx.noise(self.noise_x, "noise_x", k)
        ya = y + ctx.noise(self.noise_y, "noise_y", k)
        x_next = ctx.net.mix(ctx.net.exchange(xa, "x")) - self.eta * y
        g_next = ctx.grad(x_next)
        y_next = ctx.net.mix(ctx.net.exchange(ya, "y")) + g_next - g
        return {"x": x_next, "y": y_next, "g": g_next}

    # -- privacy ----------------------------------------------------------------------------
    def privacy(self, problem, graph, iterations: int | None = None, gradient_bound: float | None = None,
                adjacency: float | None = None, variant: str = "printed", **_: Any) -> PrivacyGuarantee:
        """Theorem 3 of paper 000 for a finite horizon (gradient bound M, from the problem when it
        knows one), Proposition 1 for ``iterations=None`` (adjacency radius delta required)."""
        return xie_guarantee(self.name, "pgtc", problem, graph, iterations, self.eta,
                             self.noise_x, self.noise_y, gradient_bound=gradient_bound,
                             adjacency=adjacency, variant=variant)


@register
class GradientTracking(DiaDSP):
    """Noise-free gradient tracking (DIGing / NEXT form): DiaDSP with noise scale 0."""

    name = "gradient_tracking"
    paper = "Nedic, Olshevsky & Shi (2017); Qu & Li (2018)"
    private = False

    def __init__(self, eta: float) -> None:
        super().__init__(eta)

    def privacy(self, problem, graph, iterations=None, **_):
        return PrivacyGuarantee.none("gradient tracking adds no privacy noise", iterations)


def _geometric_laplace(noise: Noise, label: str, n: int) -> list[tuple[float, float]]:
    if noise.is_zero:
        return [(0.0, 0.5)] * n
    if not isinstance(noise, Laplace) or noise.schedule.decay is None:
        raise ParameterError(label, repr(noise), "paper 000's accounting needs Laplace noise with "
                             "a geometric decay s*q^k (Laplace(scale, decay=q))")
    return [(p["scale"], p["decay"]) for p in (noise.per_agent_params(i, n) for i in range(n))]


def xie_guarantee(name: str, which: str, problem, graph, iterations, eta: float, noise_x: Noise,
                  noise_2: Noise, gradient_bound=None, adjacency=None, variant="printed",
                  omega: float = 1.0) -> PrivacyGuarantee:
    """Per-agent guarantee by paper 000's formulas; ``which`` is "pgtc" (noise_2 = y noise) or
    "ppdc" (noise_2 = v noise). The q of agent i must be the same for both of its noises."""
    n, d = graph.n, problem.dim
    px, p2 = _geometric_laplace(noise_x, "noise_x", n), _geometric_laplace(noise_2, "noise_2", n)
    if noise_x.is_zero and noise_2.is_zero:
        return PrivacyGuarantee.none(f"{name} with noise scale 0 is not private", iterations)
    qs = []
    for i in range(n):
        qx, q2 = px[i][1], p2[i][1]
        if not (noise_x.is_zero or noise_2.is_zero) and abs(qx - q2) > 1e-15:
            raise ParameterError("decay", (qx, q2), "paper 000 uses one decay q_i per agent for "
                                 f"both noises (agent {i})")
        qs.append(q2 if noise_x.is_zero else qx)
    label = "Theorem 3" if which == "pgtc" else "Theorem 6"
    if iterations is None:
        label = "Proposition 1" if which == "pgtc" else "Proposition 2"
        if adjacency is None:
            raise ParameterError("adjacency", None, f"{label} of paper 000 needs the adjacency "
                                 "radius delta (bound on the gradient difference of f_i0's two "
                                 "versions, constant under Assumption 6)")
        L = problem.smoothness
        fn = xie.pgtc_infinite_horizon if which == "pgtc" else xie.ppdc_infinite_horizon
        per = [fn(eta, L, px[i][0], p2[i][0], qs[i], adjacency) for i in range(n)]
        assumptions = ("Assumption 6: grad f_i0^(1) - grad f_i0^(2) is constant",
                       f"adjacency radius delta = {adjacency:g}", f"L_f = {L:.6g}",
                       f"eta < 1/(2 L_f) and q in the interval of {label}")
    else:
        M = gradient_bound if gradient_bound is not None else problem.gradient_bound()
        if M is None:
            raise ParameterError("gradient_bound", None, f"{label} of paper 000 needs M with "
                                 "||grad f_i(x)|| <= M for all x (Assumption 7); this problem "
                                 "has no global bound, give one")
        if which == "pgtc":
            per = [xie.pgtc_finite_horizon(d, M, eta, px[i][0], p2[i][0], qs[i], iterations,
                                           variant) for i in range(n)]
        else:
            per = [xie.ppdc_finite_horizon(d, M, eta, omega, px[i][0], p2[i][0], qs[i],
                                           iterations, variant) for i in range(n)]
        src = "user-supplied" if gradient_bound is not None else "computed from the problem's data"
        assumptions = (f"Assumption 7: ||grad f_i|| <= M = {M:.6g} ({src})",
                       f"sum over k = 0..K ({iterations + 1} terms)",
                       f"variant: {variant} ({'sqrt(eta)' if variant == 'printed' else 'eta'})")
    return PrivacyGuarantee.from_per_agent(
        per, horizon=iterations, theorem=f"{label} of Xie et al. (paper 000), applied to {name}",
        assumptions=assumptions)
