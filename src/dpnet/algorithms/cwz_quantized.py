"""Baseline [41] of paper 003: Chen, Wang & Zhang (arXiv:2403.18254), DP distributed stochastic
nonconvex optimization with quantized communication. [RECONSTRUCTED from its abstract and paper
003's summary; the arXiv text was not available offline.] Each agent adds time-varying Laplace
noise to its state, quantizes the perturbed state with an unbiased probabilistic quantizer
(:class:`ProbabilisticRounding`, post-processing) and sends it; two-time-scale step sizes:

    x_{i,k+1} = x_{i,k} + alpha_k sum_{j in N_i} w_ij (Q(x_{j,k} + zeta_{j,k}) - x_{i,k})
                - beta_k g_i(x_{i,k})

``alpha_k = alpha0/(k+1)^p_alpha``, ``beta_k = beta0/(k+1)^p_beta``, ``zeta ~ Lap(sigma0 (k+1)^p_sigma)``
per coordinate, g the m-sample minibatch gradient (the subsampling that controls privacy).
Undirected graph. Privacy: Lemma 5-type sum ``sum_k Delta_k / sigma_k`` with the state
sensitivity of :func:`dpnet.privacy.chen_wang_zhang.dsgd_state_sensitivity` (pure epsilon).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..compression import Compressor
from ..errors import ParameterError, nonnegative, positive, positive_int
from ..noise import Laplace
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee, per_agent_unique
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
        xh = x + ctx.noise(self.noise, "noise_x", k)
        H = ctx.net.exchange(xh, "x", self.quantizer, matrix=NEIGHBOURS)
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        alpha, beta = self.alpha0 / (k + 1.0) ** self.p_alpha, self.beta0 / (k + 1.0) ** self.p_beta
        return {"x": x + alpha * neighbour_pull(ctx, H, x) - beta * g}

    def privacy(self, problem, graph, iterations: int | None = None, C: float | None = None,
                **_: Any) -> PrivacyGuarantee:
        if iterations is None or C is None or self.sigma0 == 0:
            raise ParameterError("iterations/C/sigma0", (iterations, C, self.sigma0),
                                 "a horizon, paper 003's C and sigma0 > 0")
        ks = np.arange(iterations - 1)
        C1m = cwz.l1_constant(C, problem.dim) / self.batch
        sigma = self.sigma0 * (np.arange(iterations) + 1.0) ** self.p_sigma
        def epsilon(row_sum: float) -> float:
            delta = cwz.dsgd_state_sensitivity(self.alpha0 / (ks + 1.0) ** self.p_alpha,
                                               self.beta0 / (ks + 1.0) ** self.p_beta, row_sum, C1m)
            return float((delta / sigma).sum())

        # sum_{j != i} w_ij is the Laplacian's diagonal; agents sharing it share their epsilon
        per = per_agent_unique(epsilon, graph.sparse("L").diagonal())
        return PrivacyGuarantee.from_per_agent(
            per, delta=0.0, horizon=iterations,
            theorem="Laplace on the state, sum_k Delta_k/sigma_k (Appendix F-type recursion) "
                    "[reconstructed]",
            assumptions=(f"paper 003's Definition 3 with C = {C:g} (l2, l1 constant sqrt(d) C)",))
