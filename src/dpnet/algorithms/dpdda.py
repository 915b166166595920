"""DP-DDA: differentially private distributed dual averaging with node sampling (Liu, Johansson &
Shi, "Distributed empirical risk minimization with differential privacy", Automatica 162, 2024;
arXiv 2302.10520), a baseline of paper 001 (Fig. 3).

Per node i at iteration t, with activity ``eta_{i,t} ~ Bern(p)`` (node sampling), a stochastic
gradient ``g_{i,t}`` of one (``batch_size``) local sample at ``x_{i,t}`` (``sampling="poisson"``:
each record with probability ``B/q``, the sum divided by B), clipped to l2 norm G,
and ``nu_{i,t} ~ N(0, sigma^2 I_d)``:

    z_{i,t+1} = sum_j w_ij z_{j,t} + eta_{i,t} (g_{i,t} + nu_{i,t})     (every node sends z)
    x_{i,t+1} = Pi_X[ -z_{i,t+1} / beta_{t+1} ],   beta_t = beta0 sqrt(t + 1)
    xbar_{i,t+1} = (1/(t+1)) sum_{s=1}^{t+1} x_{i,s}                      (the output)

with ``z_{i,0} = 0``: dual averaging with the prox function ``(1/2)||x||^2`` (Nesterov 2009;
Duchi, Agarwal & Wainwright 2012), where only active nodes perturb and add their subgradient and
inactive nodes still transmit (paper 001: "inactive nodes do not update using gradient but still
transmit"). ``iterate`` is the running average ``xbar``, the quantity DDA's guarantees are about.

Privacy: the same per-record mechanism as DO-ADP with all d coordinates sent (k = d): activation
p, one of q records, Gaussian noise on a gradient of l2 sensitivity 2G, T compositions; accounted
by :mod:`dpnet.privacy.huo` through DPDDA's registered accountants ``"proof"`` (default),
``"theorem1"`` (Huo et al.'s (7) with k = d, which is how paper 001 matches DP-DDA's "node
subsampling ratio" to its own noise reduction), ``"rdp"`` and ``"pld"`` (the default under Poisson
sampling); constants
``gradient_bound`` (default: the l2 clipping bound) and ``delta``. :meth:`DPDDA.mechanism`
describes the releases for the generic accountants.

Gaps (the original could not be consulted beyond its abstract while writing this): the step
sequence (``beta_t ~ sqrt(t)``, the general convex case; the paper also has a strongly convex
schedule with weighted averages, not implemented), the prox centre (0), no regulariser h (the
problem's regulariser stays inside the sampled loss), the constraint set (a box of ``radius``,
or R^d), and the original's privacy theorem (a moments-accountant bound with unstated
constants, replaced by the accountants above).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..errors import nonnegative, positive, positive_int, require
from ..noise import Gaussian
from ..privacy import accountants, huo
from ..privacy.mechanism import Mechanism, Releases
from ..problems.base import equal_local_size
from ..problems.stochastic import clip_argument, clipped_stochastic_grad
from .base import Algorithm, BoxConstrained, Context, State, register
from .doadp import (
    check_poisson_batch,
    generic_sampler,
    huo_account,
    huo_lattice_floor,
    huo_notes,
    huo_rdp_curve,
    minibatch_sampling,
)


@register
class DPDDA(BoxConstrained, Algorithm):
    name = "dp_dda"
    paper = "Liu, Johansson & Shi, Automatica 2024 (DP-DDA with node sampling)"
    private = True
    identical_steps = True          # sigma, 2G/B and the batch rate are the same every step

    def __init__(self, beta0: float, sigma: float = 0.0, p: float = 1.0,
                 clip: float | None = None, batch_size: int = 1,
                 radius: float | None = None, sampling: str = "fixed",
                 coordinate_clip: float | None = None) -> None:
        self.beta0 = positive("beta0", beta0)
        self.sigma = nonnegative("sigma", sigma)
        require(0 < p <= 1, "p", p, "0 < p <= 1 (node sampling ratio)")
        self.p = float(p)
        self.clip = clip_argument(clip, coordinate_clip)
        self.batch_size = positive_int("batch_size", batch_size)
        self.sampling = minibatch_sampling(sampling, self.clip, self)
        self.radius = None if radius is None else positive("radius", radius)
        self._noise = Gaussian(self.sigma)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def check_problem(self, problem) -> None:
        super().check_problem(problem)
        check_poisson_batch(self, problem)

    def beta(self, t: int) -> float:
        """``beta_t = beta0 sqrt(t + 1)``, the dual-averaging scale: iteration t sets
        ``x_{i,t+1} = Pi_X[-z_{i,t+1} / beta_{t+1}]``."""
        return self.beta0 * math.sqrt(t + 1.0)

    def iterate(self, state: State) -> torch.Tensor:
        """The running average ``xbar_{i,t}`` of the iterates (``state['x_avg']``), DDA's output."""
        return state["x_avg"]

    def init(self, ctx: Context, x0) -> State:
        x0 = self._project(x0)
        return {"x": x0, "z": torch.zeros_like(x0), "x_avg": x0.clone(),
                "active": torch.ones(x0.shape[0], dtype=torch.bool, device=x0.device)}

    def step(self, ctx: Context, state: State, t: int) -> State:
        x, z = state["x"], state["z"]
        active = torch.from_numpy(ctx.rng.bernoulli("activation", t, ctx.agents, self.p)).to(ctx.net.device)
        rows = active.nonzero().flatten()
        upd = torch.zeros_like(x)
        if len(rows):
            g = clipped_stochastic_grad(ctx.problem, x[rows], ctx.rng, t, self.batch_size,
                                        ctx.agents[rows.cpu().numpy()], clip=self.clip,
                                        sampling=self.sampling)
            upd[rows] = ctx.perturb(g.to(x.dtype), self._noise, "noise", t, rows)   # g + nu
        z_next = ctx.net.mix(ctx.net.exchange(z, "z")) + upd
        x_next = self._project(-z_next / self.beta(t + 1))
        # xbar_{t+1} = mean of x_1 .. x_{t+1}
        x_avg = x_next if t == 0 else state["x_avg"] + (x_next - state["x_avg"]) / (t + 1)
        return {"x": x_next, "z": z_next, "x_avg": x_avg, "active": active}

    # -- privacy: accountants "proof" (default), "theorem1", "rdp", "pld" (below) -------------
    default_accountant = "proof"
    # released: a function of the noisy gradients the accountant charges (z sums them)
    released = ("state", "x_avg")
    noise_attributes = ("sigma", "_noise")      # the accountants read sigma, the steps _noise

    def huo_mechanism(self, problem, iterations: int,
                      gradient_bound: float | None = None) -> huo.DOADPStep:
        """DO-ADP's per-agent mechanism with k = d (G: the ``gradient_bound`` assumption, else
        the l2 clipping bound)."""
        G = gradient_bound if gradient_bound is not None else (
            self.clip.bound if self.clip is not None else None)
        require(G is not None, "clip", None, "an l2 clipping bound G (or gradient_bound) for "
                "DP-DDA's accounting")
        assert G is not None                            # the require above raised otherwise
        q = equal_local_size(problem, "DP-DDA's account (paper 001's q)")
        d = problem.dim
        return huo.DOADPStep(G=float(G), k=d, d=d, p=self.p, q=int(q), T=int(iterations),
                             batch_size=self.batch_size, sampler=self.sampling)

    def lattice_floor(self, problem, graph, iterations, assumptions) -> np.ndarray:
        """``G / B`` at every step: half the sensitivity ``2G/B`` every accountant assumes (G: the
        run's ``gradient_bound``, else the clip bound; half: a Poisson pair's per-record bound)."""
        return huo_lattice_floor(self, problem, iterations, assumptions)

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per step t = 1..T: the clipped minibatch gradient plus ``N(0, sigma^2 I_d)`` added to
        z (every node sends z), l2 sensitivity ``2G/B``, each record used with probability
        ``B/q`` at every step (as DO-ADP's with k = d; an inactive node's innovation is exactly
        zero, so the node sampling is visible and every step is charged)."""
        m = self.huo_mechanism(problem, iterations, assumptions.gradient_bound)
        generic_sampler(m)
        n = graph.n if graph is not None else problem.n_agents
        release = Releases("g + nu (added to the dual z)", "gaussian", m.sensitivity("full"),
                           np.full(m.T, self.sigma), m.batch_size / m.q, "without_replacement")
        return [(np.arange(n), Mechanism(
            (release,), "record", m.T, "paper 001's mechanism with k = d (Lemma 1, Lemma 4)",
            notes=(huo_notes(m),), relation="replace_one"))]


def _dpdda(alg, problem, graph, iterations, assumptions, accountant, delta0=1e-5,
           activation="visible", **kw):
    g = huo_account(alg, problem, graph, iterations, assumptions, accountant, delta0,
                    activation=activation, **kw)
    if not g.is_private:
        return g
    return dataclasses.replace(g, theorem=g.theorem + ", applied to DP-DDA's mechanism (k = d)")


accountants.register_rdp_curve(DPDDA)(huo_rdp_curve)


@accountants.register(DPDDA, "theorem1")
def theorem1_accountant(alg, problem, graph, iterations, assumptions, delta0: float = 1e-5,
                        activation: str = "visible"):
    """Huo et al.'s Theorem 1 (eq. (7)) with k = d (raises when a hypothesis fails); options
    delta0, activation ("visible" | "hidden")."""
    return _dpdda(alg, problem, graph, iterations, assumptions, "theorem1", delta0, activation)


@accountants.register(DPDDA, "proof")
def proof_accountant(alg, problem, graph, iterations, assumptions, delta0: float = 1e-5,
                     amplification: str = "exact", activation: str = "visible"):
    """The step-by-step accountant of Huo et al.'s proof (Lemmas 1, 4, 5) with k = d, at the
    assumptions' delta; options delta0, amplification, activation."""
    return _dpdda(alg, problem, graph, iterations, assumptions, "proof", delta0, activation,
                  amplification=amplification)


@accountants.register(DPDDA, "rdp")
def rdp_accountant(alg, problem, graph, iterations, assumptions, activation: str = "visible"):
    """dp-accounting RDP over T subsampled Gaussian steps at the assumptions' delta (given: none
    is assumed); option activation."""
    return _dpdda(alg, problem, graph, iterations, assumptions, "rdp", activation=activation)


@accountants.register(DPDDA, "pld")
def pld_accountant(alg, problem, graph, iterations, assumptions, activation: str = "visible",
                   pld_discretization: float | None = None):
    """dp-accounting PLD over T subsampled Gaussian steps at the assumptions' delta (given: none
    is assumed); options activation, pld_discretization."""
    return _dpdda(alg, problem, graph, iterations, assumptions, "pld", activation=activation,
                  pld_discretization=pld_discretization)
