"""Baseline [37] of paper 003: Yan, Li, Wu & Song (2024), quantization achieves privacy in
distributed learning: SGD whose gradients are sent as stochastically quantized level indices plus
binomial noise (:class:`BinomialQuantizer`), averaged at a server (emulated as in
:mod:`dpnet.algorithms.kang_wddp`):

    x_{k+1} = x_k - eta_k sum_i p_i Q_B(g_i(x_k)),   Q_B(g) = -X + s (U + Z - N p),

``U`` the unbiased stochastic rounding of ``(clip_X(g) + X)/s`` to ``{0..levels-1}``,
``s = 2X/(levels-1)``, ``Z ~ Bin(N, p)`` per coordinate, ``eta_k = eta/(k+1)^power``. Privacy:
accountant ``"yan"`` (the default), :mod:`dpnet.privacy.yan` (cpSGD's binomial mechanism per
iteration, composed), paper 003's
C = 2G, G bounding every gradient, given as exactly one of ``gradient_bound`` (G bounds the l2
norm) or ``l1_gradient_bound``; options ``delta0`` (per iteration) and ``delta_prime`` (advanced
composition's slack). No :meth:`~dpnet.algorithms.base.Algorithm.mechanism`: the binomial
quantizer is neither a Laplace nor a Gaussian release, so the generic accountants do not apply.
``calibrate`` scales the binomial noise's standard deviation ``sqrt(N p (1-p))`` (in level units)
by one factor: N becomes ``ceil(N t^2)`` (an integer, so the epsilon it reaches is at most the
target, not equal to it).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..compression import Compressor
from ..errors import ParameterError, nonnegative, open_interval, positive, positive_int, require
from ..privacy import accountants, yan
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee
from .base import Algorithm, Context, State, register
from .kang_wddp import require_server


class BinomialQuantizer(Compressor):
    """Unbiased stochastic uniform quantizer on ``[-X, X]`` with ``levels`` levels and additive
    ``Bin(N, p) - N p`` noise on the level index (``quantizer_range``: X; each coordinate is
    clamped to ``[-X, X]`` first, a per-coordinate bound at X itself, unlike ``coordinate_clip``'s
    G/sqrt(d)); a message is one integer in ``[0, levels-1+N]`` per coordinate."""

    name = "binomial_quantizer"
    randomized = True

    def __init__(self, levels: int, quantizer_range: float, trials: int, p: float = 0.5) -> None:
        self.levels = positive_int("levels", levels)
        require(self.levels >= 2, "levels", levels, "levels >= 2")
        self.quantizer_range = positive("quantizer_range", quantizer_range)
        self.trials = positive_int("trials", trials)
        self.p = open_interval("p", p, 0.0, 1.0)
        self.step = 2.0 * self.quantizer_range / (self.levels - 1)

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        agents = np.arange(X.shape[0]) if agents is None else np.asarray(agents)
        d = X.shape[1]
        r = self.quantizer_range
        t = (X.clamp(-r, r) + r).double().cpu().numpy() / self.step
        low = np.floor(t)
        u = rng.uniform(purpose + "/round", k, agents, d)
        U = low + (u < t - low)
        from scipy import stats  # ~0.8 s to import: only where binomial noise is drawn

        z = stats.binom.ppf(rng.uniform(purpose + "/binomial", k, agents, d), self.trials, self.p)
        out = -self.quantizer_range + self.step * (U + z - self.trials * self.p)
        return torch.from_numpy(out).to(X.device, X.dtype)

    def bits(self, d, float_bits=64):
        return d * math.ceil(math.log2(self.levels + self.trials))

    def scaled(self, factor: float) -> BinomialQuantizer:
        """The quantizer whose binomial noise has ``factor`` times this one's standard deviation,
        rounded up to whole trials: ``N -> ceil(N factor^2)``."""
        positive("factor", factor)
        trials = max(1, math.ceil(self.trials * factor * factor * (1 - 1e-15)))
        return BinomialQuantizer(self.levels, self.quantizer_range, trials, self.p)

    def __mul__(self, factor: float) -> BinomialQuantizer:   # a calibration's common factor
        return self.scaled(factor)

    __rmul__ = __mul__


@register
class YanBinomial(Algorithm):
    name = "yan_binomial"
    paper = "Yan, Li, Wu & Song (2024), quantization + binomial noise; [37] of paper 003"
    private = True

    def __init__(self, eta: float, batch: int, levels: int, quantizer_range: float, trials: int,
                 p: float = 0.5, power: float = 0.0) -> None:
        self.eta, self.power = positive("eta", eta), nonnegative("power", power)
        self.batch = positive_int("batch", batch)
        self.quantizer = BinomialQuantizer(levels, quantizer_range, trials, p)

    def check_graph(self, graph) -> None:
        require_server(graph, self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        H = ctx.net.exchange(g, "g", self.quantizer)
        return {"x": x - self.eta / (k + 1.0) ** self.power * ctx.net.mix(H, "W")}

    # -- privacy: accountant "yan" (below); no mechanism() (see the module docstring) -----------
    default_accountant = "yan"
    # released: x0 minus the mixed quantized gradients: a function of the messages
    released = ("state", "x")
    noise_attributes = ("quantizer",)           # its binomial standard deviation, by scaled()


@accountants.register(YanBinomial, "yan")
def yan_accountant(alg, problem, graph, iterations, assumptions, delta0: float | None = None,
                   delta_prime: float | None = None) -> PrivacyGuarantee:
    """cpSGD's binomial mechanism per iteration (at ``delta0``), T-fold composition (advanced
    with slack ``delta_prime``, or basic when smaller); C = 2G, G from exactly one of
    ``gradient_bound`` (l2) or ``l1_gradient_bound``. Without the assumption ``delta``: ``delta0 = 1e-6``,
    ``delta_prime = 1e-5``; with it, the ones not given default to ``delta/(2T)`` and
    ``delta/2`` and the reported delta must not exceed it."""
    if iterations is None or iterations < 1:
        raise ParameterError("iterations", iterations, "a finite horizon (>= 1): the per-"
                             "iteration budgets are composed")
    C, norm = cwz.definition3(assumptions, f"{alg.name}'s accountant")
    target = assumptions.delta
    if delta0 is None:
        delta0 = 1e-6 if target is None else target / (2.0 * iterations)
    if delta_prime is None:
        delta_prime = 1e-5 if target is None else target / 2.0
    q = alg.quantizer
    d = problem.dim
    D_inf, D1, D2 = yan.sensitivities(C, alg.batch, q.step, d, norm)
    e0 = yan.binomial_epsilon(delta0, q.trials, q.p, d, D_inf, D1, D2)
    eps, delta = yan.compose(e0, delta0, iterations, delta_prime)
    if target is not None and delta > target * (1 + 1e-12):
        raise ParameterError("delta", target, f"at least the delta the composition reports, "
                             f"{delta:.6g} = composed delta0 = {delta0:g} (x {iterations}) and "
                             f"delta_prime = {delta_prime:g}", "lower delta0 / delta_prime or "
                             "leave them to be derived from delta")
    return PrivacyGuarantee.from_per_agent(
        [eps] * graph.n, delta=delta, horizon=iterations,
        theorem="cpSGD binomial mechanism (Agarwal et al. 2018, Thm 1) per iteration, "
                "advanced/basic composition",
        assumptions=(f"paper 003's Definition 3 with C = {C:g} ({norm})",),
        notes=(f"per-iteration epsilon {e0:.6g} at delta0 = {delta0:g}",))
