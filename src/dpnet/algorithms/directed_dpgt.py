"""DP gradient tracking over directed graphs (Chen, Wang & Zhang, paper 003), Algorithm 1.

Per agent i at iteration k, with Laplace noise ``zeta_{i,k} ~ Lap_d(sigma^zeta_k)``,
``eta_{i,k} ~ Lap_d(sigma^eta_k)``: ``x^_{i,k} = x_{i,k} + zeta_{i,k}`` is sent over G_R and
``y^_{i,k} = y_{i,k} + eta_{i,k}`` over G_C; ``g_{i,k}`` is the average gradient over m distinct
samples of D_i drawn at iteration k (returned afterwards) and ``y_{i,0} = g_{i,0}``.

The paper's per-agent rules and its compact forms are different algorithms (catalogue 4.A):

* ``form="compact"`` (default; the convergence proof, Appendix B, uses it), eqs. (7)-(8)::

      x_{k+1} = x_k - alpha L1 (x_k + zeta_k) - gamma y_k                          (7)
      y_{k+1} = y_k - beta  L2 (y_k + eta_k) + g_{k+1} - g_k                       (8)

  Agent i mixes its *own perturbed* state and uses the column sum ``sum_j C_ji`` as the
  self-weight of L2, so ``v1^T x`` and ``1^T y`` are untouched by noise and
  ``sum_i y_{i,k} = sum_i g_{i,k}`` exactly.
* ``form="per-agent"`` (Algorithm 1's text), eqs. (4) and (6)::

      x_{i,k+1} = (1 - alpha sum_j R_ij) x_{i,k} + alpha sum_j R_ij x^_{j,k} - gamma y_{i,k}   (4)
      y_{i,k+1} = (1 - beta sum_j C_ij) y_{i,k} + beta sum_j C_ij y^_{j,k} + g_{i,k+1} - g_{i,k} (6)

  (row sums, own clean state); noise accumulates in ``sum_i y_i``, and with a C whose row and
  column sums differ the gradient-sum tracking is lost even without noise.

Noise-free (scale 0, full gradients) the compact form is push-pull gradient tracking (Pu, Shi,
Xu & Nedic 2020). The graph must be a :class:`~dpnet.digraphs.DirectedGraph` satisfying
Assumption 1 with ``I - alpha L1``, ``I - beta L2`` nonnegative. Privacy: Lemmas 4-5
(:mod:`dpnet.privacy.chen_wang_zhang`) for the chosen form. Schemes S1/S2 and Assumptions 5/6:
:mod:`dpnet.algorithms._cwz` (re-exported here).
"""

from __future__ import annotations

from typing import Any

from ..digraphs import DirectedGraph
from ..errors import ParameterError, positive, positive_int, require
from ..noise import Laplace, Noise, none
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee
from ._cwz import Scheme, assumption5, assumption6, lemma2_matrix, scheme_s1, scheme_s2
from .base import Algorithm, Context, State, register

__all__ = ["DirectedDPGT", "Scheme", "scheme_s1", "scheme_s2", "assumption5", "assumption6",
           "lemma2_matrix"]


@register
class DirectedDPGT(Algorithm):
    name = "directed_dpgt"
    paper = "Chen, Wang & Zhang (paper 003), Algorithm 1, eqs. (4)-(8)"
    private = True
    FORMS = cwz.FORMS

    def __init__(self, alpha: float, beta: float, gamma: float, batch: int | None = None,
                 noise_x: Noise | None = None, noise_y: Noise | None = None,
                 form: str = "compact") -> None:
        self.alpha, self.beta = positive("alpha", alpha), positive("beta", beta)
        self.gamma = positive("gamma", gamma)
        self.batch = None if batch is None else positive_int("batch", batch)
        self.noise_x = noise_x if noise_x is not None else none()
        self.noise_y = noise_y if noise_y is not None else none()
        require(form in self.FORMS, "form", form, f"one of {self.FORMS}")
        self.form = form

    def check_graph(self, graph) -> None:
        if not isinstance(graph, DirectedGraph):
            raise ParameterError("graph", getattr(graph, "name", graph),
                                 f"{self.name} needs a DirectedGraph with matrices R and C",
                                 "build one with dpnet.graphs.digraph(R, C), directed_ring, "
                                 "random_digraph or cwz_fig1")
        graph.require_assumption1(self.name)
        graph.require_nonnegative(self.alpha, self.beta)

    def _grad(self, ctx: Context, X, k: int):
        return ctx.grad(X, self.batch, k=k, purpose="sample")

    def init(self, ctx: Context, x0) -> State:
        g = self._grad(ctx, x0, 0)
        return {"x": x0, "y": g.clone(), "g": g}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x, y, g = state["x"], state["y"], state["g"]
        net = ctx.net
        Hx = net.exchange(x + ctx.noise(self.noise_x, "noise_x", k), "x", matrix="R")
        Hy = net.exchange(y + ctx.noise(self.noise_y, "noise_y", k), "y", matrix="C")
        if self.form == "compact":
            x_next = x - self.alpha * net.mix(Hx, "L1") - self.gamma * y               # (7)
        else:
            dR = net.mix(net.halo_zeros(1) + 1.0, "R")      # own in-weights sum_j R_ij
            x_next = x - self.alpha * (dR * x - net.mix(Hx, "R")) - self.gamma * y      # (4)
        g_next = self._grad(ctx, x_next, k + 1)
        if self.form == "compact":
            y_next = y - self.beta * net.mix(Hy, "L2") + g_next - g                     # (8)
        else:
            dC = net.mix(net.halo_zeros(1) + 1.0, "C")
            y_next = y - self.beta * (dC * y - net.mix(Hy, "C")) + g_next - g            # (6)
        return {"x": x_next, "y": y_next, "g": g_next}

    # -- privacy ----------------------------------------------------------------------------
    def privacy(self, problem, graph, iterations: int | None = None, C: float | None = None,
                norm: str = "l2", smoothness: float | None = None, **_: Any) -> PrivacyGuarantee:
        """Lemma 5 over the ``iterations`` observed messages (k = 0..iterations-1) for this form;
        C (Definition 3) must be given, in the ``norm`` it bounds (``"l2"``: l1 constant
        ``sqrt(d) C``). Full gradients (``batch=None``) are accounted as m = 1 (conservative).
        ``smoothness=L`` adds the gradient-drift term Lemma 4 omits."""
        if iterations is None or iterations < 1:
            raise ParameterError("iterations", iterations, "Lemma 5 is a finite-horizon sum: "
                                 "give the number of iterations (>= 1)")
        for nz in (self.noise_x, self.noise_y):
            if not isinstance(nz, Laplace):
                raise ParameterError("noise", nz, "Lemma 5 needs Laplace noise")
        n = graph.n
        return cwz.guarantee(graph, self.alpha, self.beta, self.gamma, self.batch or 1, C,
                             problem.dim, lambda k: self.noise_x.scale_at(k, n),
                             lambda k: self.noise_y.scale_at(k, n), iterations - 1,
                             self.form, norm, smoothness)
