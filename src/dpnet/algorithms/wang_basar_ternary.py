"""Baseline [36] of paper 003: Wang & Basar (IEEE TAC 2023), quantization-enabled privacy in
decentralized stochastic optimization. [RECONSTRUCTED from the abstract and paper 003's summary;
[36]'s text was not available offline.] Decentralized SGD with a decaying coupling weight that
makes it robust to quantization errors, the shared states passing through a stochastic ternary
quantizer (:class:`TernaryDP`) that is itself the privacy mechanism:

    x_{i,k+1} = x_{i,k} + gamma_k sum_{j in N_i} w_ij (psi_{j,k} - x_{i,k}) - lambda_k g_i(x_{i,k})

with ``psi_j = TernaryDP(x_j)``, ``gamma_k = gamma0/(k+1)^v``, ``lambda_k = lambda0/(k+1)^u`` and g
the m-sample minibatch gradient. Undirected graph, ``w_ij >= 0`` on edges (diagonal unused).
Privacy: accountant ``"wang_basar"`` (the default), :mod:`dpnet.privacy.wang_basar` with the state
sensitivity of :func:`dpnet.privacy.chen_wang_zhang.dsgd_state_sensitivity`, basic composition;
paper 003's C = 2G, G bounding every gradient, given as exactly one of ``gradient_bound`` (l2: l1
constant ``sqrt(d) C``) or ``l1_gradient_bound``. No
:meth:`~dpnet.algorithms.base.Algorithm.mechanism`: the ternary quantizer is the privacy mechanism,
neither a Laplace nor a Gaussian release, so the generic accountants do not apply. ``calibrate``
scales the quantizer's margin ``b - a`` (its noise scale: the bound is ``Delta_1/(b - a)`` per
release) by one factor."""

from __future__ import annotations

import numpy as np
import torch

from ..compression import Compressor
from ..errors import ParameterError, nonnegative, positive, positive_int, require
from ..graphs.base import off_diagonal
from ..privacy import accountants, wang_basar
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee, per_agent_unique
from .base import Algorithm, Context, State, register

NEIGHBOURS = "dsgd.offdiagonal"


def register_offdiagonal(graph, who: str) -> str:
    """Check an undirected graph with nonnegative weights and register W's off-diagonal part."""
    require(graph.is_symmetric() and not graph.directed, "graph", graph.name,
            f"{who} needs an undirected graph with symmetric weights")
    graph.require_connected()
    off = off_diagonal(graph.sparse("W"))
    require(bool(off.nnz == 0 or off.data.min() >= 0), "graph.W", graph.name,
            f"{who} needs w_ij >= 0 on edges")
    graph.add_matrix(NEIGHBOURS, off)
    return NEIGHBOURS


def neighbour_pull(ctx: Context, H, x):
    """``sum_{j in N_i} w_ij (h_j - x_i)`` (own weights ``sum_j w_ij`` are local constants)."""
    deg = ctx.net.mix(ctx.net.halo_zeros(1) + 1.0, NEIGHBOURS)
    return ctx.net.mix(H, NEIGHBOURS) - deg * x


class TernaryDP(Compressor):
    """Clamp to ``[-a, a]``, send ``+b`` w.p. ``(b + x)/(4b)``, ``-b`` w.p. ``(b - x)/(4b)``, ``0``
    w.p. 1/2; the receiver decodes twice the symbol (unbiased for the clamped value). Two bits per
    coordinate."""

    name = "ternary_dp"
    randomized = True

    def __init__(self, a: float, b: float) -> None:
        self.a, self.b = positive("a", a), positive("b", b)
        require(self.b > self.a, "b", b, f"b > a = {a:g} (every symbol keeps positive probability)")

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        agents = np.arange(X.shape[0]) if agents is None else np.asarray(agents)
        x = X.clamp(-self.a, self.a).double().cpu().numpy()
        u = rng.uniform(purpose, k, agents, X.shape[1])
        up = (self.b + x) / (4 * self.b)
        down = (self.b - x) / (4 * self.b)
        sym = np.where(u < up, self.b, np.where(u > 1.0 - down, -self.b, 0.0))
        return torch.from_numpy(2.0 * sym).to(X.device, X.dtype)

    def bits(self, d, float_bits=64):
        return 2 * d

    def scaled(self, factor: float) -> TernaryDP:
        """The quantizer whose margin ``b - a`` (the noise scale of the privacy bound
        ``Delta_1/(b - a)``) is ``factor`` times this one's; the clamp a is kept."""
        positive("factor", factor)
        return TernaryDP(self.a, self.a + factor * (self.b - self.a))

    def __mul__(self, factor: float) -> TernaryDP:     # what a calibration's common factor does
        return self.scaled(factor)

    __rmul__ = __mul__


@register
class WangBasarTernary(Algorithm):
    name = "wang_basar_ternary"
    paper = "Wang & Basar (2023), quantization-enabled privacy; [36] of paper 003 (reconstructed)"
    private = True

    def __init__(self, lambda0: float, u: float, gamma0: float, v: float, batch: int, a: float,
                 b: float) -> None:
        self.lambda0, self.gamma0 = positive("lambda0", lambda0), positive("gamma0", gamma0)
        self.u, self.v = nonnegative("u", u), nonnegative("v", v)
        self.batch = positive_int("batch", batch)
        self.quantizer = TernaryDP(a, b)

    def check_graph(self, graph) -> None:
        register_offdiagonal(graph, self.name)
        W = graph.sparse("W")
        top = 1.0 / np.asarray(W.maximum(0).sum(axis=1)).max()
        require(self.gamma0 <= top, "gamma0", self.gamma0,
                f"gamma0 * max_i sum_j w_ij <= 1 (here gamma0 <= {top:.4g})")

    def coupling(self, k: int) -> float:
        """The coupling weight ``gamma_k = gamma0 / (k+1)^v`` at iteration k."""
        return self.gamma0 / (k + 1.0) ** self.v

    def step_size(self, k: int) -> float:
        """The gradient step ``lambda_k = lambda0 / (k+1)^u`` at iteration k."""
        return self.lambda0 / (k + 1.0) ** self.u

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        H = ctx.net.exchange(x, "x", self.quantizer, matrix=NEIGHBOURS)
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        return {"x": x + self.coupling(k) * neighbour_pull(ctx, H, x) - self.step_size(k) * g}

    # -- privacy: accountant "wang_basar" (below); no mechanism() (see the module docstring) ---
    default_accountant = "wang_basar"
    # released: the state holds a clean gradient step: only the quantized messages are covered
    released = ("message", "x")
    noise_attributes = ("quantizer",)           # its margin b - a, by TernaryDP.scaled


@accountants.register(WangBasarTernary, "wang_basar", pure=True)
def wang_basar_accountant(alg, problem, graph, iterations, assumptions) -> PrivacyGuarantee:
    """Releases at k = 0..iterations-1, each ``Delta_1/(b - a)``-DP, basic composition; C from
    exactly one of ``gradient_bound`` (l2: l1 constant ``sqrt(d) C``) or ``l1_gradient_bound``
    [reconstructed]."""
    if iterations is None or iterations < 1:
        raise ParameterError("iterations", iterations, "a finite horizon (>= 1): basic "
                             "composition of the releases")
    C, norm = cwz.definition3(assumptions, f"{alg.name}'s accountant")
    ks = np.arange(iterations - 1)
    C1m = cwz.l1_constant(C, problem.dim, norm) / alg.batch

    def epsilon(row_sum: float) -> float:
        delta = cwz.dsgd_state_sensitivity(alg.gamma0 / (ks + 1.0) ** alg.v,
                                           alg.lambda0 / (ks + 1.0) ** alg.u, row_sum, C1m)
        return float(wang_basar.release_epsilon(delta, alg.quantizer.a, alg.quantizer.b).sum())

    # sum_{j != i} w_ij is the Laplacian's diagonal; agents sharing it share their epsilon
    per = per_agent_unique(epsilon, graph.sparse("L").diagonal())
    described = "(l2, l1 constant sqrt(d) C)" if norm == "l2" else "(l1)"
    return PrivacyGuarantee.from_per_agent(
        per, delta=0.0, horizon=iterations,
        theorem="ternary quantizer ratio bound Delta_1/(b - a) per release, basic composition "
                "[reconstructed]",
        assumptions=(f"paper 003's Definition 3 with C = {C:g} {described}",))
