"""DOLA: differentially private distributed online learning (Li, Zhou, Xiong, Wang & Wang, IEEE
TKDE 30(8), 2018, Algorithm 1), a baseline of paper 002.

Per agent i, with a doubly stochastic A (``graph.W``, self-weight included) and i.i.d. Laplace
noise ``sigma_t^j ~ Lap(mu_t)`` on the broadcast state:

    b_t^i     = sum_j a_ij (w_t^j + sigma_t^j)      (line 4: received noisy states, own included)
    g_t^i     = grad f_t^i(b_t^i)                   (line 5)
    w_{t+1}^i = Pi_W[ b_t^i - alpha_{t+1} g_t^i ]   (line 6); then broadcast w_{t+1} + sigma_{t+1}

Step ``alpha_k = alpha0 / k^p`` (k >= 1; DOLA's ``1/sqrt(t)`` for convex losses is p = 1/2, its
``1/(H t)`` for H-strongly convex ones p = 1). Noise (DOLA's (11)): ``mu_k = Delta_k / eps`` with
``Delta_k = 2 alpha_k sqrt(n) L``, i.e. ``mu_k = noise_scale * k^{-p}`` (``mu_0 = mu_1``: w_0
carries no data) with ``noise_scale = 2 alpha0 sqrt(n) L / eps``: the noise decays at the step
size's rate, which paper 002 blames for DOLA's poor accuracy. Privacy: accountant ``"li"`` (the
default; DMOD's ``"yuan"`` is the same computation), :func:`dpnet.privacy.chen_wang.dola_epsilon`
with option ``variant`` and the assumption ``gradient_bound`` (L); a budget's scale comes from
:meth:`~dpnet.algorithms.base.Algorithm.calibrate` over ``noise_scale``. :meth:`DOLA.mechanism`
gives the generic accountants the all-data releases (their ``laplace`` composition is
``variant="all-data"``, above the published account, which charges one release).

Filled in (``[MISSING]`` in what was available of the original): W is the box
``[-radius, radius]^n`` (``radius=None``: no projection); on an online problem the gradient is
paper 002's all-data gradient (the paper lets DOLA use it), else the full local gradient. The
update was taken from the published Algorithm 1; the original paper's text beyond Algorithm 1 and
its noise rule (11) could not be consulted while writing this, so the step-size constants and the
exact form of the sensitivity lemma are from the authors' stated results as recalled here.
"""

from __future__ import annotations

from ..errors import nonnegative, positive
from ..noise import Laplace
from ..privacy import accountants, chen_wang
from ..problems.online import all_data_grad
from .base import Algorithm, BoxConstrained, Context, State, register


@register
class DOLA(BoxConstrained, Algorithm):
    name = "dola"
    paper = "Li, Zhou, Xiong, Wang & Wang, TKDE 2018, Algorithm 1 (DOLA)"
    private = True
    reference = "Li et al. (TKDE 2018), DOLA Lemma/Theorem on Lap(mu) noise (11)"

    def __init__(self, alpha0: float, power: float = 0.5, noise_scale: float = 0.0,
                 radius: float | None = None) -> None:
        self.alpha0 = positive("alpha0", alpha0)
        self.power = nonnegative("power", power)
        self.noise_scale = nonnegative("noise_scale", noise_scale)
        self.radius = None if radius is None else positive("radius", radius)
        p = self.power
        self.noise = Laplace(self.noise_scale, schedule=lambda k: max(k, 1) ** (-p))

    def step_size(self, k: int) -> float:
        """``alpha_k = alpha0 / k^p`` (k >= 1); iteration t uses ``alpha_{t+1}``."""
        return self.alpha0 / max(k, 1) ** self.power

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def _gradient_point(self, w, b):
        return b                                               # DOLA: at the mixed point b_t^i

    def step(self, ctx: Context, state: State, t: int) -> State:
        w = state["x"]
        H = ctx.net.exchange(ctx.perturb(w, self.noise, "noise", t), "w")
        b = ctx.net.mix(H)
        g = all_data_grad(ctx, self._gradient_point(w, b), t)
        return {"x": self._project(b - self.step_size(t + 1) * g)}

    # -- privacy: accountant "li" (below; DMOD: "yuan") and the generic ones ------------------
    default_accountant = "li"
    # released: the state holds a clean gradient step: only the noisy messages are covered
    released = ("message", "w")
    noise_attributes = ("noise_scale", "noise")   # the accountant reads noise_scale

    def mechanism(self, problem, graph, iterations, assumptions):
        """The broadcasts w_t + Lap(mu_t), t = 1..T, as a sample drawn at the first iteration
        reaches them through the all-data gradient (l1 sensitivity ``2 alpha_t sqrt(n) L / t``):
        their basic composition is the ``variant="all-data"`` account, above the published one,
        which charges a sample to the one iteration it is drawn in."""
        n = graph.n if graph is not None else problem.n_agents
        return chen_wang.dola_mechanism(n, self.alpha0, self.power, self.noise_scale,
                                        assumptions.gradient_bound, problem.dim, iterations,
                                        self.name.upper())

    def params(self):
        out = super().params()
        out.pop("noise", None)
        return out


def own_accountant(alg, problem, graph, iterations, assumptions, variant: str = "published"):
    """The baseline's own budget (Li et al. 2018 for DOLA; the same Laplace argument for DMOD):
    ``variant`` "published" (each sample in one iteration) or "all-data" (basic composition over
    the iterations a sample enters); gradient_bound is the l2 bound L."""
    n = graph.n if graph is not None else problem.n_agents
    return chen_wang.dola_guarantee(alg.name.upper(), alg.alpha0, alg.noise_scale,
                                    assumptions.gradient_bound, problem.dim, iterations, variant,
                                    alg.reference, n)


accountants.register(DOLA, "li", pure=True)(own_accountant)
