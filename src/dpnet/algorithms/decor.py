"""DECOR (Allouah, Koloskova, El Firdoussi, Jaggi & Guerraoui, "The privacy power of correlated
noise in decentralized learning", ICML 2024): decentralized DP-SGD whose noise is the sum of an
independent part and pairwise-cancelling parts shared by the two ends of each edge.

Per agent i at step k, with the batch and clipping of :class:`~dpnet.algorithms.DPSGD`, the
independent ``vbar_{i,k} ~ N(0, z_cdp^2 C^2 I_d)`` and, per edge {i, j}, one secret draw
``v_{ij,k} = -v_{ji,k} ~ N(0, z_cor^2 C^2 I_d)``:

    g~_{i,k}    = (sum_{s in S_{i,k}} clip_C(grad l(x_{i,k}; s)) + vbar_{i,k}
                   + sum_{j in N(i)} v_{ij,k}) / b                                 (Alg. 1, line 5)
    x_{i,k+1/2} = x_{i,k} - lr g~_{i,k}                          (broadcast to neighbours)
    x_{i,k+1}   = sum_j w_ij x_{j,k+1/2}                         (gossip step gamma = 1)

The pairwise parts cancel in the sum over agents, so the average model carries only the
independent noise, while each message carries ``z_cdp^2 + deg(i) z_cor^2`` of it. The pairwise
draws are stacked per edge (purpose ``"pair_noise"``, the edge's index in ``graph.edges`` as
its stream key) and reach the agents through the signed incidence matrix, one sparse product.
``ema_decay > 0`` publishes DP-SGD's moving average (4) of the iterates instead of the last one.

Privacy (:mod:`dpnet.privacy.decor`): against an eavesdropper of every message who knows no
pairwise secret, agent i's records get DP-SGD's account at ``z_eff,i = 1/sqrt((M^{-1})_ii)``,
``M = z_cdp^2 I + z_cor^2 L``; accountants ``"pld"`` (default) and ``"rdp"``, constant delta.
Calibration scales both multipliers by one factor (their ratio is a choice of the user).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import nonnegative, require
from ..privacy import accountants, decor
from .base import Context, State, register
from .dp_sgd import DPSGD, account, rdp_curve


@register
class DECOR(DPSGD):
    # the pairwise secrets live on the fixed graph's edges and its account reads its Laplacian
    time_varying_graphs = False
    pairwise_secrets = True             # both ends of an edge draw its pairwise part
    name = "decor"
    paper = ("Allouah et al., ICML 2024 (DECOR: decentralized DP-SGD with pairwise-cancelling "
             "correlated noise)")

    def __init__(self, lr: float, noise_multiplier: float, pair_multiplier: float,
                 clip: float = 1.0, sampling: str = "poisson", rate: float | None = None,
                 batch_size: int | None = None, ema_decay: float = 0.0) -> None:
        super().__init__(lr, noise_multiplier, clip, sampling, rate, batch_size, ema_decay)
        self.pair_multiplier = nonnegative("pair_multiplier", pair_multiplier)

    def check_graph(self, graph) -> None:
        super().check_graph(graph)
        require(not graph.directed, "graph", graph.name, "an undirected graph (a pairwise "
                "secret is shared by the two ends of an edge)")

    def init(self, ctx: Context, x0) -> State:
        edges = np.asarray(ctx.net.graph.edges, dtype=np.int64).reshape(-1, 2)
        # only the edges at this process's agents: a rank draws (and, with secret randomness,
        # knows the key of) its own edges' parts; each is keyed by its edge id
        e = np.flatnonzero(np.isin(edges, np.asarray(ctx.agents)).any(axis=1))
        col = np.arange(len(e))
        # signed incidence (n, E_local): +1 at an edge's lower end, -1 at its upper end
        index = torch.from_numpy(np.stack([np.concatenate([edges[e, 0], edges[e, 1]]),
                                           np.concatenate([col, col])]))
        values = torch.cat([torch.ones(len(e)), -torch.ones(len(e))]).to(ctx.net.dtype)
        self._incidence = torch.sparse_coo_tensor(index, values, (ctx.n, len(e)),
                                                  check_invariants=True).coalesce()
        self._incidence = self._incidence.to(ctx.net.device)
        self._edge_keys = e
        self._degree = np.bincount(edges.reshape(-1), minlength=ctx.n)[ctx.agents]
        return super().init(ctx, x0)

    def release(self, ctx: Context, total: torch.Tensor, k: int) -> torch.Tensor:
        """``total`` plus :meth:`step_noise` (its own and its pairwise parts): on a lattice in
        secret mode (:meth:`Context.add_gaussian` at DP-SGD's floor C, each row at the lattice
        of its noise's standard deviation ``C sqrt(z_cdp^2 + deg(i) z_cor^2)``). Rounding moves
        only the protected agent's row by ``g sqrt(d)`` more, and row i's raised noise pays for
        it whatever the other rows do, so the correlated account holds (``docs/deploying.md``)."""
        std = self.clip.bound * np.sqrt(self.noise_multiplier ** 2
                                        + self._degree * self.pair_multiplier ** 2)
        return ctx.add_gaussian(total, self.step_noise(ctx, k), std, k)

    def step_noise(self, ctx: Context, k: int) -> torch.Tensor:
        own = super().step_noise(ctx, k)
        if self.pair_multiplier == 0 or len(self._edge_keys) == 0:
            return own
        pairs = ctx.rng.gaussian_tensor("pair_noise", k, self._edge_keys, ctx.dim,
                                        ctx.net.device, ctx.net.dtype)
        scale = self.pair_multiplier * self.clip.bound
        shared = torch.sparse.mm(self._incidence, pairs)[torch.as_tensor(ctx.agents)]
        return own + scale * shared.to(own.dtype)

    # -- privacy: accountants "pld" (default) and "rdp", against an eavesdropper without the
    # pairwise secrets ------------------------------------------------------------------------
    noise_attributes = ("noise_multiplier", "_noise", "pair_multiplier")


def _multipliers(alg: DECOR, graph) -> np.ndarray:
    require(graph is not None, "graph", None, "the graph (DECOR's guarantee depends on it)")
    return decor.effective_multipliers(alg.noise_multiplier, alg.pair_multiplier,
                                       graph.sparse("unweighted_laplacian"))


@accountants.register_rdp_curve(DECOR)
def _rdp_curve(alg, problem, graph, iterations, assumptions, orders):
    return rdp_curve(alg, problem, graph, iterations, orders, _multipliers(alg, graph))


def _account(alg: DECOR, problem, graph, iterations, assumptions, method: str,
             pld_discretization: float | None = None):
    z = _multipliers(alg, graph)
    return account(alg, problem, graph, iterations, assumptions, method, pld_discretization, z,
                   "DECOR step (effective multiplier 1/sqrt((M^-1)_ii), "
                   "M = z_cdp^2 I + z_cor^2 L)",
                   ("threat model: an eavesdropper of every message who knows no pairwise "
                    "secret; an agent that knows its own edges' secrets is not covered",))


@accountants.register(DECOR, "pld")
def pld_accountant(alg, problem, graph, iterations, assumptions,
                   pld_discretization: float | None = None):
    """dp-accounting PLD of T DECOR steps at each agent's effective multiplier, against an
    eavesdropper without the pairwise secrets (delta given: none is assumed)."""
    return _account(alg, problem, graph, iterations, assumptions, "pld", pld_discretization)


@accountants.register(DECOR, "rdp")
def rdp_accountant(alg, problem, graph, iterations, assumptions):
    """dp-accounting RDP of T DECOR steps at each agent's effective multiplier, against an
    eavesdropper without the pairwise secrets (delta given: none is assumed)."""
    return _account(alg, problem, graph, iterations, assumptions, "rdp")
