"""DO-ADP (Huo, Liu, Ding, Johansson, Shi; paper 001), Algorithm 1 / eq. (5), and the momentum
DSGD (2) it builds on.

Per agent i at iteration t, with activity ``eta_{i,t} ~ Bern(p)``, a stochastic gradient
``g_{i,t}`` of ``batch_size`` local samples (each per-sample gradient clipped: ``clip`` in l2 at
G, or ``coordinate_clip`` per coordinate at ``G/sqrt(d)``, the paper's, with one sample;
``sampling="poisson"``: each record independently with probability ``B/q``, the clipped sum
divided by B) and noise
``theta_{i,t} ~ N(0, sigma^2 I_d)``:

    m_{i,t+1} = eta_{i,t} (g_{i,t} + theta_{i,t}) + beta m_{i,t}                         (5a)
    x_{i,t+1} = x_{i,t} - eta_{i,t} alpha m_{i,t+1} + gamma sum_j w_ij (x^_{j,t} - x^_{i,t})  (5b)
    s_{i,t}   = Top_k(x_{i,t+1} - x^_{i,t})            (sent only when eta_{i,t} = 1)   (5c)
    x^_{j,t+1} = x^_{j,t} + eta_{j,t} s_{j,t}            (every holder of j's copy)      (5d)

with ``x_{i,0} = x_0``, ``x^_{i,0} = 0``, ``m_{i,0} = 0``. The consensus term reads the public
copies before this round's messages; Top-k compresses the new state minus the old public copy;
noise enters only through active agents' momentum. Inactive agents compute no gradient, draw no
noise that is used, send nothing and are charged no bits (``exchange(active=...)``). Gradients,
activation and noise come from the run's streams under the purposes ``"sample"``,
``"activation"`` and ``"noise"``.

Invariant (W symmetric, doubly stochastic): ``xbar_{t+1} = xbar_t - (alpha/n) sum_i eta_{i,t}
m_{i,t+1}`` (the consensus term on the copies sums to zero). With ``p = 1``, ``k = d`` and
``sigma = 0``, ``x^_{i,t} = x_{i,t}`` for t >= 1 and DO-ADP is momentum DSGD (2)
(:class:`MomentumDSGD`) from t = 1 on (from t = 0 when all agents start at the same x_0).

Privacy: :mod:`dpnet.privacy.huo`, registered as DOADP's accountants ``"theorem1"`` (default:
eq. (7) solved for epsilon), ``"proof"`` (Theorem 1's step-by-step accountant), ``"rdp"`` and
``"pld"`` (dp-accounting over the subsampled Gaussian steps, the default under Poisson sampling,
which the paper's two do not account; these shadow the generic accountants
of the same names, which lack the ``sensitivity``/``activation`` options and the extra RDP
orders); constants: ``gradient_bound`` (G; default the clipping bound) and ``delta``; options
``delta0``, ``sensitivity``, ``activation``, ``amplification``. :meth:`DOADP.mechanism` describes
the releases (Gaussian, l2 sensitivity 2G/B, sampling pB/q) for the generic accountants.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from ..compression import TopK
from ..errors import ParameterError, nonnegative, positive, positive_int, require
from ..noise import Gaussian
from ..privacy import accountants, huo
from ..privacy.guarantee import PrivacyGuarantee
from ..privacy.mechanism import Mechanism, Releases
from ..problems.base import equal_local_size
from ..problems.stochastic import SAMPLERS, clip_argument, clipped_stochastic_grad
from .base import Algorithm, Context, State, register


def minibatch_sampling(sampling: str, clip, alg: Algorithm) -> str:
    """Checks ``sampling``; Poisson batches make dp-accounting's PLD the default accountant
    (the paper's Theorem 1 and proof account sampling without replacement only)."""
    require(sampling in SAMPLERS, "sampling", sampling, f"one of {SAMPLERS}")
    if sampling == "poisson":
        require(clip is not None, "clip", clip, "a clipping bound (clip or coordinate_clip) "
                "with sampling='poisson'")
        alg.default_accountant = "pld"
    return sampling


def _momentum_params(alpha, gamma, beta, batch_size):
    beta = nonnegative("beta", beta)
    require(beta < 1, "beta", beta, "0 <= beta < 1 (momentum factor)")
    return (positive("alpha", alpha), positive("gamma", gamma), beta,
            positive_int("batch_size", batch_size))


@register
class DOADP(Algorithm):
    name = "doadp"
    paper = "Huo, Liu, Ding, Johansson, Shi: Algorithm 1, eq. (5) (paper 001)"
    private = True
    identical_steps = True          # sigma, G/B and the batch rate are the same every step

    def __init__(self, alpha: float, gamma: float, beta: float, sigma: float = 0.0,
                 p: float = 1.0, k: int | None = None, clip: float | None = None,
                 batch_size: int = 1, sampling: str = "fixed",
                 coordinate_clip: float | None = None) -> None:
        self.alpha, self.gamma, self.beta, self.batch_size = _momentum_params(
            alpha, gamma, beta, batch_size)
        self.clip = clip_argument(clip, coordinate_clip)
        self.sampling = minibatch_sampling(sampling, self.clip, self)
        self.sigma = nonnegative("sigma", sigma)
        require(0 < p <= 1, "p", p, "0 < p <= 1 (activation probability; Theorem 2: p >= 1/2)")
        self.p = float(p)
        self.k = None if k is None else positive_int("k", k)
        self._noise = Gaussian(self.sigma)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)
        require(graph.is_symmetric(), "graph.W", graph.name, "DO-ADP needs a symmetric W "
                "(Assumption 3)")

    def check_problem(self, problem) -> None:
        if self.k is not None:
            TopK(self.k).check_dim(problem.dim)
        check_poisson_batch(self, problem)

    def compressor(self, d: int) -> TopK:
        """The Top-k compressor of (5c) for dimension d: ``Top_k`` with the configured k, or ``Top_d``
        (every coordinate sent) when ``k`` is None."""
        return TopK(d if self.k is None else self.k)

    def init(self, ctx: Context, x0) -> State:
        zeros = torch.zeros_like(x0)
        return {"x": x0, "m": zeros, "x_hat": ctx.net.halo_zeros(ctx.dim).to(x0.dtype),
                "active": torch.ones(x0.shape[0], dtype=torch.bool, device=x0.device)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        net = ctx.net
        x, m, x_hat = state["x"], state["m"], state["x_hat"]
        active = torch.from_numpy(ctx.rng.bernoulli("activation", k, ctx.agents, self.p)).to(ctx.net.device)
        rows = active.nonzero().flatten()
        upd = torch.zeros_like(x)                      # g + theta on active rows, 0 elsewhere
        if len(rows):
            g = clipped_stochastic_grad(ctx.problem, x[rows], ctx.rng, k, self.batch_size,
                                        ctx.agents[rows.cpu().numpy()], clip=self.clip,
                                        sampling=self.sampling)
            upd[rows] = ctx.perturb(g.to(x.dtype), self._noise, "noise", k, rows)  # g + theta
        m_next = upd + self.beta * m                                                   # (5a)
        # gamma sum_j w_ij (x^_j - x^_i) = -gamma [L x^]_i, on the copies before this round
        x_next = (x - self.alpha * active[:, None].to(x.dtype) * m_next
                  - self.gamma * net.laplacian(x_hat))                                  # (5b)
        s = net.exchange(x_next - net.own(x_hat), "s", self.compressor(x.shape[1]),
                         active=active.cpu().numpy())                                        # (5c)
        return {"x": x_next, "m": m_next, "x_hat": x_hat + s, "active": active}         # (5d)

    # -- privacy: accountants "theorem1" (default), "proof", "rdp", "pld" (below) -------------
    default_accountant = "theorem1"
    # released: the agents' public copies: sums of the messages (with k = d, the states themselves)
    released = ("state", "x_hat")
    noise_attributes = ("sigma", "_noise")      # the accountants read sigma, the steps _noise

    def huo_mechanism(self, problem, iterations: int, gradient_bound: float | None = None
                      ) -> huo.DOADPStep:
        """The per-agent mechanism of :mod:`dpnet.privacy.huo` for this run (G: the
        ``gradient_bound`` assumption, else the clipping bound)."""
        d = problem.dim
        if self.clip is not None:
            require(self.clip.kind == "coordinate" or gradient_bound is not None, "clip",
                    self.clip, "per-coordinate clipping (Assumption 2), or a gradient_bound G "
                    "for which |grad_j| <= G/sqrt(d) is known to hold")
        G = gradient_bound if gradient_bound is not None else (
            self.clip.bound if self.clip is not None else None)
        if G is None:
            raise ParameterError("clip", None, "a clipping bound G (Assumption 2) or an explicit "
                                 "gradient_bound for DO-ADP's accounting")
        q = equal_local_size(problem, "DO-ADP's account (paper 001's q)")
        return huo.DOADPStep(G=float(G), k=d if self.k is None else self.k, d=d, p=self.p,
                             q=int(q), T=int(iterations), batch_size=self.batch_size,
                             sampler=self.sampling)

    def lattice_floor(self, problem, graph, iterations, assumptions) -> np.ndarray:
        """Half eq. (6)'s Top-k sensitivity, ``G sqrt(k/d) / B`` at every step (G: the run's
        ``gradient_bound``, else the clip bound): below every accountant's sensitivity (``"topk"``
        assumes ``2G sqrt(k/d)/B``, ``"full"`` ``2G/B``; a Poisson pair's per-record bound is
        half)."""
        return huo_lattice_floor(self, problem, iterations, assumptions)

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per step t = 1..T: the minibatch mean of clipped gradients plus ``N(0, sigma^2 I_d)``,
        l2 sensitivity ``2G/B`` (all d coordinates: every noisy coordinate reaches the state
        through the momentum, the default ``sensitivity="full"``), each record used with
        probability ``B/q`` at every step (sampling without replacement under replace-one
        adjacency: the symmetrised pair of :mod:`dpnet.privacy.without_replacement`,
        :mod:`dpnet.privacy.huo`'s account 3). The activation is visible (an inactive agent
        sends nothing), so it is not counted as subsampling: charging all T steps bounds the
        public Binomial number of active ones."""
        m = self.huo_mechanism(problem, iterations, assumptions.gradient_bound)
        generic_sampler(m)
        n = graph.n if graph is not None else problem.n_agents
        release = Releases("g + theta (momentum, then Top-k of the state)", "gaussian",
                           m.sensitivity("full"), np.full(m.T, self.sigma),
                           m.batch_size / m.q, "without_replacement")
        return [(np.arange(n), Mechanism(
            (release,), "record", m.T, "paper 001: Lemma 1 with eq. (6) for k = d, sampling "
            "p B / q (Lemma 4)", notes=(huo_notes(m),), relation="replace_one"))]


def huo_lattice_floor(alg, problem, iterations: int, assumptions) -> np.ndarray:
    """A paper-001 mechanism's sensitivity floor (:meth:`DOADP.lattice_floor`) at every step."""
    m = alg.huo_mechanism(problem, iterations, assumptions.gradient_bound)
    return np.full(int(iterations), m.sensitivity("topk") / 2)


def check_poisson_batch(alg, problem) -> None:
    """A Poisson batch's expected size B needs B <= m (the rate B/m is a probability)."""
    if alg.sampling == "poisson":
        m = equal_local_size(problem, f"{alg.name}'s Poisson rate B/m")
        require(alg.batch_size <= m, "batch_size", alg.batch_size,
                f"batch_size <= local records m = {m} with sampling='poisson'")


def generic_sampler(m: huo.DOADPStep) -> None:
    """The generic accountants express the fixed batch's replace-one pair (sampling without
    replacement); the Poisson replace-one pair (a mixture against a mixture) they do not."""
    require(m.sampler == "fixed", "sampling", m.sampler, "'fixed' for the generic accountants "
            "(the Poisson replace-one pair is accounted by the algorithm's own 'pld' and 'rdp')")


def huo_notes(m: huo.DOADPStep) -> str:
    """The notes line of a DO-ADP step's :class:`~dpnet.privacy.mechanism.Mechanism`: its constants (G, q
    records per agent, batch size, p) and how the accountant treats the sampling (replace-one, sampling
    without replacement) and the activation (visible, every step charged)."""
    return (f"G = {m.G:g}, q = {m.q} records per agent, batch {m.batch_size}, p = {m.p:g}; "
            "sampling without replacement under replace-one adjacency: the symmetrised pair "
            "covering the add and the remove type of every step (Dong, Roth & Su's subsampling "
            "theorem); activation visible (who sends is public), so every step is charged")


ACTIVATIONS = ("visible", "hidden")


def huo_account(alg, problem, graph, iterations, assumptions, accountant: str,
                delta0: float = 1e-5, sensitivity: str | None = None,
                activation: str = "visible", **kw: Any) -> PrivacyGuarantee:
    """The guarantee of a paper-001 Gaussian mechanism (DO-ADP, or DP-DDA with
    ``sensitivity=None``) by one of :mod:`dpnet.privacy.huo`'s accountants; ``delta`` is the
    assumptions' (the proof's and the dp-accounting ones; Theorem 1 reports its own delta).

    ``activation``: ``"visible"`` (default, sound): an inactive DO-ADP agent sends nothing and
    an inactive DP-DDA agent's innovation is exactly zero, so the eavesdropper sees who is
    active; the paper's own accounts (Theorem 1, its proof) are then evaluated at p = 1 (the
    silent steps are public and only remove releases), dp-accounting's RDP and PLD compose the
    Binomial mixture of active steps. ``"hidden"``: the paper's Lemma 4, activation counted as
    subsampling, which under-reports epsilon for p < 1 against that eavesdropper (at n = 10,
    q = 1000, B = 10, G = 1, sigma = 0.2, T = 500: PLD 0.233 against 0.72 at p = 0.2)."""
    if alg.sigma == 0:
        label = {"doadp": "DO-ADP", "dp_dda": "DP-DDA"}.get(alg.name, alg.name)
        return PrivacyGuarantee.none(f"{label} with sigma = 0 adds no noise", iterations)
    require(iterations is not None, "iterations", iterations, "a finite horizon T")
    require(activation in ACTIVATIONS, "activation", activation, f"one of {ACTIVATIONS}")
    mech = alg.huo_mechanism(problem, iterations, assumptions.gradient_bound)
    activation_note = None
    if mech.p < 1:
        if activation == "hidden":
            activation_note = ("activation hidden (the paper's Lemma 4): counted as subsampling, "
                               "p B / q; inactive agents send nothing, so an eavesdropper who "
                               "sees every message sees who is active and this under-reports")
        elif accountant in ("theorem1", "proof"):
            mech = dataclasses.replace(mech, p=1.0)
            activation_note = (f"activation visible (who sends is public): the paper's account "
                               f"is evaluated at p = 1, the silent steps (p = {alg.p:g}) "
                               "only removing releases")
    if accountant in ("rdp", "pld"):
        kw["activation"] = activation
    sparse = False
    if sensitivity is not None:
        require(sensitivity in ("full", "topk"), "sensitivity", sensitivity, "'full' or 'topk'")
        sparse = mech.k < mech.d
        if sensitivity == "full":  # the Top-k account with k = d is the full-sensitivity one
            mech = dataclasses.replace(mech, k=mech.d)
        if accountant in ("rdp", "pld"):  # names the sensitivity in the guarantee's text
            kw["sensitivity"] = sensitivity
    g = huo.guarantee(alg.sigma, mech, accountant, delta0, assumptions.delta, name=alg.name,
                      **kw)
    if sparse:
        note = ("sensitivity: all d coordinates (2G/B), not eq. (6)'s Top-k 2G sqrt(k/d)/B, "
                "which an audit finds exceeded" if sensitivity == "full" else
                "sensitivity: eq. (6)'s Top-k 2G sqrt(k/d)/B as in the paper; an audit finds "
                "it exceeded (dpnet audit doadp-top1): use sensitivity='full' for a bound")
        g = dataclasses.replace(g, notes=(*g.notes, note))
    if activation_note is not None:
        g = dataclasses.replace(g, notes=(*g.notes, activation_note))
    n = graph.n if graph is not None else problem.n_agents
    return dataclasses.replace(g, per_agent=(g.epsilon,) * n)


# ``sensitivity``: "full" (default) charges all d coordinates of the noisy gradient (2G/B): they
# all reach the state through the momentum and are sent in later rounds, and an audit finds eq.
# (6)'s Top-k sensitivity 2G sqrt(k/d)/B exceeded (``dpnet audit doadp-top1``); "topk" gives the
# paper's account (every accountant, Theorem 1 included, then uses k/d); they agree when k = d.

def huo_rdp_curve(alg, problem, graph, iterations, assumptions, orders) -> np.ndarray:
    """RDP at ``orders`` of a paper-001 Gaussian mechanism's run (DO-ADP or DP-DDA), as its
    ``rdp`` accountant composes it: activation visible, every coordinate's sensitivity, the
    batch's own replace-one pair (Poisson or without replacement)."""
    if alg.sigma == 0:
        return np.full(np.shape(orders), np.inf)
    mech = alg.huo_mechanism(problem, iterations, assumptions.gradient_bound)
    return huo.rdp_curve(alg.sigma, mech, orders, "visible", "full")


accountants.register_rdp_curve(DOADP)(huo_rdp_curve)


@accountants.register(DOADP, "theorem1")
def theorem1_accountant(alg, problem, graph, iterations, assumptions, delta0: float = 1e-5,
                        sensitivity: str = "full", activation: str = "visible"):
    """Theorem 1 of paper 001: eq. (7) solved for epsilon (raises when another hypothesis fails;
    delta: the proof's construction); options delta0, sensitivity ("full" | "topk"),
    activation ("visible" | "hidden")."""
    return huo_account(alg, problem, graph, iterations, assumptions, "theorem1", delta0,
                       sensitivity, activation)


@accountants.register(DOADP, "proof")
def proof_accountant(alg, problem, graph, iterations, assumptions, delta0: float = 1e-5,
                     sensitivity: str = "full", amplification: str = "exact",
                     activation: str = "visible"):
    """The step-by-step accountant of Theorem 1's proof (Lemmas 1, 4, 5), at the assumptions'
    delta (none: delta_hat = sqrt(S)); options delta0, sensitivity, amplification, activation."""
    return huo_account(alg, problem, graph, iterations, assumptions, "proof", delta0,
                       sensitivity, activation, amplification=amplification)


@accountants.register(DOADP, "rdp")
def rdp_accountant(alg, problem, graph, iterations, assumptions, sensitivity: str = "full",
                   activation: str = "visible"):
    """dp-accounting RDP over T subsampled Gaussian steps (orders to 16384), epsilon at the
    assumptions' delta (given: none is assumed); options sensitivity, activation ("visible" |
    "hidden")."""
    return huo_account(alg, problem, graph, iterations, assumptions, "rdp", 1e-5, sensitivity,
                       activation)


@accountants.register(DOADP, "pld")
def pld_accountant(alg, problem, graph, iterations, assumptions, sensitivity: str = "full",
                   activation: str = "visible", pld_discretization: float | None = None):
    """dp-accounting PLD over T subsampled Gaussian steps (adaptive pessimistic discretisation),
    epsilon at the assumptions' delta (given: none is assumed); options sensitivity, activation,
    pld_discretization."""
    return huo_account(alg, problem, graph, iterations, assumptions, "pld", 1e-5, sensitivity,
                       activation, pld_discretization=pld_discretization)


@register
class MomentumDSGD(Algorithm):
    """Decentralized momentum SGD, eq. (2) of paper 001 (Yu, Jin & Yang 2019):

        m_{i,t+1} = g_{i,t} + beta m_{i,t}
        x_{i,t+1} = x_{i,t} - alpha m_{i,t+1} + gamma sum_j w_ij (x_{j,t} - x_{i,t})

    with minibatch gradients of ``batch_size`` samples (optionally clipped per sample), drawn like
    DO-ADP's (purpose ``"sample"``), and ``m_{i,0} = 0`` unless the start gives ``m``."""

    name = "momentum_dsgd"
    paper = "eq. (2) of Huo et al. (paper 001); Yu, Jin & Yang (2019)"

    def __init__(self, alpha: float, gamma: float, beta: float, batch_size: int = 1,
                 clip: float | None = None, coordinate_clip: float | None = None) -> None:
        self.alpha, self.gamma, self.beta, self.batch_size = _momentum_params(
            alpha, gamma, beta, batch_size)
        self.clip = clip_argument(clip, coordinate_clip)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0, "m": torch.zeros_like(x0)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        g = clipped_stochastic_grad(ctx.problem, x, ctx.rng, k, self.batch_size,
                                    np.asarray(ctx.agents), clip=self.clip)
        m_next = g.to(x.dtype) + self.beta * state["m"]
        x_next = x - self.alpha * m_next - self.gamma * ctx.net.laplacian(ctx.net.exchange(x, "x"))
        return {"x": x_next, "m": m_next}
