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
Xu & Nedic 2020). The graph must be a :class:`~dpnet.graphs.directed.DirectedGraph` satisfying
Assumption 1 with ``I - alpha L1``, ``I - beta L2`` nonnegative. Schemes S1/S2 and Assumptions
5/6: :mod:`dpnet.algorithms.cwz_schemes` (re-exported here).

Privacy: accountant ``"chen_wang_zhang"`` (the default), Lemmas 4-5
(:mod:`dpnet.privacy.chen_wang_zhang`) for the chosen form, with paper 003's
C = 2G, G bounding every gradient, given as exactly
one of the assumptions ``gradient_bound`` (G bounds the l2 norm of every sampled gradient:
l1 constant ``sqrt(d) C``) or ``l1_gradient_bound`` (G bounds its l1 norm) and the optional
``smoothness`` (the drift term Lemma 4 omits). :meth:`DirectedDPGT.mechanism` describes the same
Laplace releases (both messages at every k, Appendix F's sensitivities), so the generic
``laplace`` (= Lemma 5), ``rdp`` and ``pld`` accountants apply; ``calibrate`` scales ``noise_x``
and ``noise_y`` by one factor.
"""

from __future__ import annotations

from ..errors import ParameterError, positive, positive_int, require
from ..graphs.directed import DirectedGraph
from ..noise import Laplace, Noise, none
from ..privacy import accountants
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee
from .base import Algorithm, Context, State, register
from .cwz_schemes import Scheme, assumption5, assumption6, lemma2_matrix, scheme_s1, scheme_s2

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

    @classmethod
    def from_scheme(cls, scheme: Scheme, form: str = "compact") -> DirectedDPGT:
        """Algorithm 1 with a scheme's step sizes, batch m and noise schedules (S1 or S2)."""
        noise_x, noise_y = scheme.noises()
        return cls(scheme.alpha, scheme.beta, scheme.gamma, batch=scheme.m, noise_x=noise_x,
                   noise_y=noise_y, form=form)

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
        Hx = net.exchange(ctx.perturb(x, self.noise_x, "noise_x", k), "x", matrix="R")
        Hy = net.exchange(ctx.perturb(y, self.noise_y, "noise_y", k), "y", matrix="C")
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

    # -- privacy: accountant "chen_wang_zhang" (below) and the generic ones over mechanism() ---
    default_accountant = "chen_wang_zhang"
    # released: the state holds clean gradients and trackers: only the noisy messages are covered
    released = ("message", "x")
    noise_attributes = ("noise_x", "noise_y")

    def _lemma5_args(self, graph, iterations: int | None) -> tuple:
        """What Lemma 5 needs besides C: ``(m, sigma_zeta, sigma_eta, K)``."""
        if iterations is None or iterations < 1:
            raise ParameterError("iterations", iterations, "Lemma 5 is a finite-horizon sum: "
                                 "give the number of iterations (>= 1)")
        for nz in (self.noise_x, self.noise_y):
            if not isinstance(nz, Laplace):
                raise ParameterError("noise", nz, "Lemma 5 needs Laplace noise")
        n = graph.n
        return (self.batch or 1, lambda k: self.noise_x.scale_at(k, n),
                lambda k: self.noise_y.scale_at(k, n), iterations - 1)

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..iterations-1: agent i0's messages ``x_k + zeta_k`` and ``y_k + eta_k``,
        Laplace, with Appendix F's l1 sensitivities for this form (C from ``gradient_bound`` or
        ``l1_gradient_bound``, optional ``smoothness``): basic composition is Lemma 5."""
        m, sz, se, K = self._lemma5_args(graph, iterations)
        C, norm = cwz.definition3(assumptions, f"{self.name}'s mechanism (Lemma 4)")
        return cwz.mechanism(graph, self.alpha, self.beta, self.gamma, m, C, problem.dim, sz, se,
                             K, self.form, norm, assumptions.smoothness)


@accountants.register(DirectedDPGT, "chen_wang_zhang", pure=True)
def chen_wang_zhang_accountant(alg, problem, graph, iterations, assumptions) -> PrivacyGuarantee:
    """Lemma 5 of paper 003 over the ``iterations`` observed messages (k = 0..iterations-1) for
    the algorithm's form; C (Definition 3) from exactly one of ``gradient_bound`` (l2: l1
    constant ``sqrt(d) C``) or ``l1_gradient_bound``. Full gradients (``batch=None``) are
    accounted as m = 1 (conservative). ``smoothness=L`` adds the gradient-drift term Lemma 4
    omits (absent: the paper's lemma)."""
    m, sz, se, K = alg._lemma5_args(graph, iterations)
    C, norm = cwz.definition3(assumptions)
    return cwz.guarantee(graph, alg.alpha, alg.beta, alg.gamma, m, C, problem.dim, sz, se, K,
                         alg.form, norm, assumptions.smoothness)
