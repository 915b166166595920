"""Baseline [37] of paper 003: Yan, Li, Wu & Song (2024), quantization achieves privacy in
distributed learning: SGD whose gradients are sent as stochastically quantized level indices plus
binomial noise (:class:`BinomialQuantizer`), averaged at a server (emulated as in
:mod:`dpnet.algorithms.kang_wddp`):

    x_{k+1} = x_k - eta_k sum_i p_i Q_B(g_i(x_k)),   Q_B(g) = -X + s (U + Z - N p),

``U`` the unbiased stochastic rounding of ``(clip_X(g) + X)/s`` to ``{0..levels-1}``,
``s = 2X/(levels-1)``, ``Z ~ Bin(N, p)`` per coordinate, ``eta_k = eta/(k+1)^power``. Privacy:
:mod:`dpnet.privacy.yan` (cpSGD's binomial mechanism per iteration, composed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy import stats

from ..compression import Compressor
from ..errors import ParameterError, nonnegative, open_interval, positive, positive_int, require
from ..privacy import yan
from ..privacy.guarantee import PrivacyGuarantee
from .base import Algorithm, Context, State, register
from .kang_wddp import require_server


class BinomialQuantizer(Compressor):
    """Unbiased stochastic uniform quantizer on ``[-X, X]`` with ``levels`` levels and additive
    ``Bin(N, p) - N p`` noise on the level index; a message is one integer in ``[0, levels-1+N]``
    per coordinate."""

    name = "binomial_quantizer"
    randomized = True

    def __init__(self, levels: int, clip: float, trials: int, p: float = 0.5) -> None:
        self.levels = positive_int("levels", levels)
        require(self.levels >= 2, "levels", levels, "levels >= 2")
        self.clip, self.trials = positive("clip", clip), positive_int("trials", trials)
        self.p = open_interval("p", p, 0.0, 1.0)
        self.step = 2.0 * self.clip / (self.levels - 1)

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        agents = np.arange(X.shape[0]) if agents is None else np.asarray(agents)
        d = X.shape[1]
        t = (X.clamp(-self.clip, self.clip) + self.clip).double().cpu().numpy() / self.step
        low = np.floor(t)
        u = rng.uniform(purpose + "/round", k, agents, d)
        U = low + (u < t - low)
        z = stats.binom.ppf(rng.uniform(purpose + "/binomial", k, agents, d), self.trials, self.p)
        out = -self.clip + self.step * (U + z - self.trials * self.p)
        return torch.from_numpy(out).to(X.device, X.dtype)

    def bits(self, d, float_bits=64):
        return d * math.ceil(math.log2(self.levels + self.trials))


@register
class YanBinomial(Algorithm):
    name = "yan_binomial"
    paper = "Yan, Li, Wu & Song (2024), quantization + binomial noise; [37] of paper 003"
    private = True

    def __init__(self, eta: float, batch: int, levels: int, clip: float, trials: int,
                 p: float = 0.5, power: float = 0.0) -> None:
        self.eta, self.power = positive("eta", eta), nonnegative("power", power)
        self.batch = positive_int("batch", batch)
        self.quantizer = BinomialQuantizer(levels, clip, trials, p)

    def check_graph(self, graph) -> None:
        require_server(graph, self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        H = ctx.net.exchange(g, "g", self.quantizer)
        return {"x": x - self.eta / (k + 1.0) ** self.power * ctx.net.mix(H, "W")}

    def privacy(self, problem, graph, iterations: int | None = None, C: float | None = None,
                delta0: float = 1e-6, delta_prime: float = 1e-5, **_: Any) -> PrivacyGuarantee:
        if iterations is None or C is None:
            raise ParameterError("iterations/C", (iterations, C), "a horizon and paper 003's C")
        q = self.quantizer
        d = problem.dim
        D_inf, D1, D2 = yan.sensitivities(C, self.batch, q.step, d)
        e0 = yan.binomial_epsilon(delta0, q.trials, q.p, d, D_inf, D1, D2)
        eps, delta = yan.compose(e0, delta0, iterations, delta_prime)
        return PrivacyGuarantee.from_per_agent(
            [eps] * graph.n, delta=delta, horizon=iterations,
            theorem="cpSGD binomial mechanism (Agarwal et al. 2018, Thm 1) per iteration, "
                    "advanced/basic composition",
            assumptions=(f"paper 003's Definition 3 with C = {C:g} (l2)",),
            notes=(f"per-iteration epsilon {e0:.6g} at delta0 = {delta0:g}",))
