"""Baseline [41] of paper 003: Chen, Wang & Zhang (arXiv:2403.18254), DP distributed stochastic
nonconvex optimization with quantized communication. [RECONSTRUCTED from its abstract and paper
003's summary; the arXiv text was not available offline.] Each agent adds time-varying Laplace
noise to its state, quantizes the perturbed state with an unbiased probabilistic quantizer
(:class:`ProbabilisticRounding`, post-processing) and sends it; two-time-scale step sizes:

    x_{i,k+1} = x_{i,k} + alpha_k sum_{j in N_i} w_ij (Q(x_{j,k} + zeta_{j,k}) - x_{i,k})
                - beta_k g_i(x_{i,k})

``alpha_k = alpha0/(k+1)^p_alpha``, ``beta_k = beta0/(k+1)^p_beta``, ``zeta ~ Lap(sigma0 (k+1)^p_sigma)``
per coordinate, g the m-sample minibatch gradient (the subsampling that controls privacy).
Undirected graph. Privacy: accountant ``"chen_wang_zhang"`` (the default), the Lemma 5-type sum
``sum_k Delta_k / sigma_k`` with the state sensitivity of
:func:`dpnet.privacy.chen_wang_zhang.dsgd_state_sensitivity` (pure epsilon), paper 003's
C = 2G, G bounding every gradient, given as
exactly one of ``gradient_bound`` (l2: l1 constant ``sqrt(d) C``) or ``l1_gradient_bound``.
:meth:`CWZQuantized.mechanism` describes the same Laplace releases of the state (the quantizer is
post-processing), so the generic ``laplace`` (= the sum above), ``rdp`` and ``pld`` accountants
apply; ``calibrate`` scales ``sigma0`` and the noise it builds by one factor.
"""

from __future__ import annotations

import numpy as np
import torch

from ..compression import Compressor
from ..errors import ParameterError, nonnegative, positive, positive_int
from ..noise import Laplace
from ..privacy import accountants
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee, per_agent_unique
from ..privacy.mechanism import Mechanism, Releases
from .base import Algorithm, Context, State, register
from .wang_basar_ternary import NEIGHBOURS, neighbour_pull, register_offdiagonal


class ProbabilisticRounding(Compressor):
    """``Q(v) = r (floor(v/r) + Bernoulli(frac(v/r)))``: unbiased, error below r; one 32-bit
    integer per coordinate."""

    name = "probabilistic_rounding"
    randomized = True

    def __init__(self, resolution: float) -> None:
        self.resolution = positive("resolution", resolution)

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        agents = np.arange(X.shape[0]) if agents is None else np.asarray(agents)
        t = X.double().cpu().numpy() / self.resolution
        low = np.floor(t)
        u = rng.uniform(purpose, k, agents, X.shape[1])
        return torch.from_numpy(self.resolution * (low + (u < t - low))).to(X.device, X.dtype)

    def bits(self, d, float_bits=64):
        return 32 * d


@register
class CWZQuantized(Algorithm):
    name = "cwz_quantized"
    paper = "Chen, Wang & Zhang, arXiv:2403.18254; [41] of paper 003 (reconstructed)"
    private = True

    def __init__(self, alpha0: float, p_alpha: float, beta0: float, p_beta: float, batch: int,
                 sigma0: float, p_sigma: float = 0.0, resolution: float = 2.0 ** -8) -> None:
        self.alpha0, self.beta0 = positive("alpha0", alpha0), positive("beta0", beta0)
        self.p_alpha, self.p_beta = nonnegative("p_alpha", p_alpha), nonnegative("p_beta", p_beta)
        self.batch = positive_int("batch", batch)
        self.sigma0, self.p_sigma = nonnegative("sigma0", sigma0), float(p_sigma)
        self.noise = Laplace(self.sigma0, power=-self.p_sigma)
        self.quantizer = ProbabilisticRounding(resolution)

    def check_graph(self, graph) -> None:
        register_offdiagonal(graph, self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        xh = ctx.perturb(x, self.noise, "noise_x", k)
        H = ctx.net.exchange(xh, "x", self.quantizer, matrix=NEIGHBOURS)
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        alpha, beta = self.alpha0 / (k + 1.0) ** self.p_alpha, self.beta0 / (k + 1.0) ** self.p_beta
        return {"x": x + alpha * neighbour_pull(ctx, H, x) - beta * g}

    # -- privacy: accountant "chen_wang_zhang" (below) and the generic ones over mechanism() ---
    default_accountant = "chen_wang_zhang"
    # released: the state holds a clean gradient step: only the noisy, quantized messages are
    # covered
    released = ("message", "x")
    noise_attributes = ("sigma0", "noise")      # the scale and the noise it builds, together

    def _releases(self, problem, graph, iterations, assumptions):
        """``(row sums, Delta(row_sum) -> sensitivities, sigma, C, norm)`` of the state releases
        at k = 0..iterations-1."""
        if iterations is None or iterations < 1:
            raise ParameterError("iterations", iterations, "a finite horizon (>= 1): the bound "
                                 "sums over the state releases")
        if self.sigma0 == 0:
            raise ParameterError("sigma0", self.sigma0, "sigma0 > 0 (no noise, no guarantee)")
        C, norm = cwz.definition3(assumptions, f"{self.name}'s accountant")
        ks = np.arange(iterations - 1)
        C1m = cwz.l1_constant(C, problem.dim, norm) / self.batch
        sigma = self.sigma0 * (np.arange(iterations) + 1.0) ** self.p_sigma

        def sensitivity(row_sum: float) -> np.ndarray:
            return cwz.dsgd_state_sensitivity(self.alpha0 / (ks + 1.0) ** self.p_alpha,
                                              self.beta0 / (ks + 1.0) ** self.p_beta, row_sum,
                                              C1m)

        # sum_{j != i} w_ij is the Laplacian's diagonal; agents sharing it share their epsilon
        return graph.sparse("L").diagonal(), sensitivity, sigma, C, norm

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..iterations-1: agent i0's perturbed state ``x_k + zeta_k`` (Laplace, l1
        sensitivity ``Delta_k`` of the Appendix F-type recursion); the rounding is
        post-processing. Basic composition is the ``chen_wang_zhang`` accountant's sum."""
        rows, sensitivity, sigma, C, norm = self._releases(problem, graph, iterations,
                                                           assumptions)
        levels, inverse = np.unique(np.asarray(rows, dtype=np.float64), return_inverse=True)
        return [(np.flatnonzero(inverse.reshape(-1) == g), Mechanism(
            (Releases("x", "laplace", sensitivity(float(r)), sigma),),
            adjacency="record (paper 003's Definition 3: one sample of agent i0 replaced)",
            horizon=iterations,
            source=f"Appendix F-type state recursion [reconstructed], C = {C:g} ({norm}), "
                   f"m = {self.batch}, d = {problem.dim}", relation="replace_one"))
            for g, r in enumerate(levels.tolist())]


@accountants.register(CWZQuantized, "chen_wang_zhang", pure=True)
def chen_wang_zhang_accountant(alg, problem, graph, iterations, assumptions) -> PrivacyGuarantee:
    """Laplace on the state, ``sum_k Delta_k/sigma_k`` over k = 0..iterations-1 (Appendix F-type
    recursion, reconstructed); C = 2G, G from exactly one of ``gradient_bound`` (l2: l1 constant
    ``sqrt(d) C``) or ``l1_gradient_bound``."""
    rows, sensitivity, sigma, C, norm = alg._releases(problem, graph, iterations, assumptions)
    per = per_agent_unique(lambda r: float((sensitivity(r) / sigma).sum()), rows)
    described = ("(l2, l1 constant sqrt(d) C)" if norm == "l2" else "(l1)")
    return PrivacyGuarantee.from_per_agent(
        per, delta=0.0, horizon=iterations,
        theorem="Laplace on the state, sum_k Delta_k/sigma_k (Appendix F-type recursion) "
                "[reconstructed]",
        assumptions=(f"paper 003's Definition 3 with C = {C:g} {described}",))
