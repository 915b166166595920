"""Decentralized DP-SGD: the practitioner's recipe (local DP-SGD, then one gossip step).

Per agent i at step k, with a batch ``S_{i,k}`` of its local records, per-record l2 clipping
``clip_C`` and Gaussian noise ``xi_{i,k} ~ N(0, z^2 C^2 I_d)`` (``z`` the noise multiplier):

    g~_{i,k}    = (sum_{s in S_{i,k}} clip_C(grad l(x_{i,k}; s)) + xi_{i,k}) / b          (1)
    x_{i,k+1/2} = x_{i,k} - lr g~_{i,k}                          (broadcast to neighbours)  (2)
    x_{i,k+1}   = sum_j w_ij x_{j,k+1/2}                                                 (3)
    x~_{i,k+1}  = rho x~_{i,k} + (1 - rho) x_{i,k+1},   x~_{i,0} = x_{i,0}                  (4)

(4) is optional (``ema_decay`` rho > 0): each agent publishes the exponential moving average of
its iterates instead of its last iterate, the parameter averaging of high-accuracy DP training
(De et al. 2022, "Unlocking high-accuracy differentially private image classification through
scale"). It reads only iterates, which are functions of the messages, so it is
post-processing and leaves the guarantee unchanged; with few hundred noisy steps it averages
out part of the last steps' noise.

Sampling (``sampling``): ``"poisson"`` includes each local record independently with
probability ``rate`` and divides by the expected batch ``b_i = rate * m_i`` (Abadi et al. 2016,
as Opacus does); ``"fixed"`` draws ``batch_size`` records without replacement,
``b = batch_size``, so agent i samples at rate ``batch_size / m_i``. Local sizes ``m_i`` may
differ between agents (they are public, as the batch normaliser is).
This is adapt-then-combine D-SGD with local DP (the baseline of DECOR, Allouah et al. 2024, with
gossip weight 1); with the identity graph it is local-only DP-SGD, and on one agent holding all
records it is central DP-SGD. The half-step (2) is the only message; the next iterate is a
function of messages, so each step is one Gaussian release of the clipped sum, whatever the
graph.

Privacy (:mod:`dpnet.privacy.dp_sgd`): accountants ``"pld"`` (the default; dp-accounting's PLD
under ``REPLACE_ONE`` for Poisson sampling, the symmetrised pair that covers both step types for
the fixed batch) and ``"rdp"``; constant ``delta``. Agent i's records get the epsilon of its own
rate: the same for every agent with Poisson sampling at one ``rate``, larger for smaller local
sets with a fixed batch.
Streams: ``"sample"`` (batches) and ``"noise"``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from ..errors import ParameterError, positive, positive_int, require
from ..noise import Gaussian
from ..privacy import accountants, dp_sgd
from ..privacy.guarantee import PrivacyGuarantee
from ..problems.stochastic import Clip, clip_argument, clipped_grad_sum, poisson_indices, sample_indices
from .base import Algorithm, Context, State, register


@register
class DPSGD(Algorithm):
    name = "dp_sgd"
    paper = "Abadi et al. 2016 (DP-SGD) with one gossip step per round (D-SGD with local DP)"
    private = True
    # D-SGD's analysis (Koloskova et al. 2020) allows doubly stochastic W_k; the account is a
    # post-processing of each agent's noisy sums, whatever the graph of each round
    time_varying_graphs = True
    identical_steps = True          # one noise multiplier and sampling rate at every step
    clip: Clip                      # never None: the constructor requires a bound
    rate: float | None              # Poisson sampling rate (None with sampling='fixed')
    batch_size: int | None          # fixed batch size (None with sampling='poisson')

    def __init__(self, lr: float, noise_multiplier: float, clip: float = 1.0,
                 sampling: str = "poisson", rate: float | None = None,
                 batch_size: int | None = None, ema_decay: float = 0.0) -> None:
        self.lr = positive("lr", lr)
        require(0 <= ema_decay < 1, "ema_decay", ema_decay,
                "0 <= ema_decay < 1 (0 publishes the last iterate)")
        self.ema_decay = float(ema_decay)
        require(noise_multiplier >= 0, "noise_multiplier", noise_multiplier, "z >= 0")
        self.noise_multiplier = float(noise_multiplier)
        clip_bound = clip_argument(clip, None)
        require(clip_bound is not None, "clip", clip, "an l2 bound C > 0")
        assert clip_bound is not None                   # the require above raised otherwise
        self.clip = clip_bound
        require(sampling in dp_sgd.SAMPLERS, "sampling", sampling, f"one of {dp_sgd.SAMPLERS}")
        self.sampling = sampling
        if sampling == "poisson":
            require(rate is not None and 0 < rate <= 1 and batch_size is None, "rate", rate,
                    "0 < rate <= 1 with sampling='poisson' (and no batch_size)")
            assert rate is not None                     # the require above raised otherwise
            self.rate, self.batch_size = float(rate), None
        else:
            require(rate is None, "rate", rate, "None with sampling='fixed' (give batch_size)")
            self.rate, self.batch_size = None, positive_int("batch_size", batch_size)
        self._noise = Gaussian(self.noise_multiplier * self.clip.bound)

    def records_per_step(self, problem) -> float | None:
        if self.rate is not None:
            sizes = problem.local_sizes()
            return None if sizes is None else self.rate * float(sizes.mean())
        assert self.batch_size is not None              # sampling 'fixed' sets it
        return float(self.batch_size)

    def check_graph(self, graph) -> None:
        # doubly stochastic keeps the average; connectivity is not required: the identity graph
        # gives local-only DP-SGD, one agent central DP-SGD
        graph.require_doubly_stochastic(self.name)

    def check_problem(self, problem) -> None:
        sizes = problem.local_sizes()
        require(sizes is not None and getattr(problem, "supports_clip", False), "problem",
                type(problem).__name__, "a finite-sum problem with per-sample gradients")
        if self.batch_size is not None:
            require(self.batch_size <= int(sizes.min()), "batch_size", self.batch_size,
                    f"batch_size <= the smallest local size m_i = {int(sizes.min())}")

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0, "x_ema": x0.clone()} if self.ema_decay else {"x": x0}

    def _batch(self, ctx: Context, k: int) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        """``(idx, weights, b)``: the step's records, their weights (1 or 0 for padding) and
        the public normaliser b of (1)."""
        device = ctx.net.device
        sizes = ctx.problem.local_sizes()
        assert sizes is not None                        # check_problem requires local records
        m = sizes[ctx.agents]
        if self.sampling == "poisson":
            idx, included = poisson_indices(ctx.rng, k, ctx.agents, m, self.rate, "sample",
                                            device)
            b = self.rate * m[0] if bool(np.all(m == m[0])) else torch.as_tensor(
                self.rate * m[:, None], dtype=ctx.net.dtype, device=device)
            return idx, included.to(ctx.net.dtype), b
        assert self.batch_size is not None              # sampling 'fixed' sets it
        idx = sample_indices(ctx.rng, k, ctx.agents, m, self.batch_size, "sample", device)
        return idx, torch.ones(idx.shape, dtype=ctx.net.dtype, device=device), self.batch_size

    def step_noise(self, ctx: Context, k: int) -> torch.Tensor:
        """``xi_{i,k}`` of (1), every local agent's row."""
        return ctx.noise(self._noise, "noise", k)

    def release(self, ctx: Context, total: torch.Tensor, k: int) -> torch.Tensor:
        """The noisy clipped sum of (1), ``total + xi_{i,k}`` (:meth:`Context.perturb`: on a
        lattice in secret mode, at :meth:`lattice_floor`)."""
        return ctx.perturb(total, self._noise, "noise", k)

    def lattice_floor(self, problem, graph, iterations, assumptions) -> np.ndarray:
        """The clip bound C at every step: the per-record bound of every DP-SGD account (its
        sensitivity under add-or-remove; replace-one's 2C is two records' worth)."""
        return np.full(int(iterations), self.clip.bound)

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        idx, weights, b = self._batch(ctx, k)
        total = clipped_grad_sum(ctx.problem, x, idx, weights, self.clip, ctx.agents)
        noisy = self.release(ctx, total.to(x.dtype), k) / b                                 # (1)
        half = x - self.lr * noisy                                                           # (2)
        x_next = ctx.net.mix(ctx.net.exchange(half, "x"))                                    # (3)
        if not self.ema_decay:
            return {"x": x_next}
        rho = self.ema_decay
        return {"x": x_next, "x_ema": rho * state["x_ema"] + (1 - rho) * x_next}            # (4)

    # -- privacy: accountants "pld" (default) and "rdp" ---------------------------------------
    default_accountant = "pld"
    @property
    def released(self) -> tuple[str, str]:  # type: ignore[override]  # property over a class attribute
        """The published model: ``("state", "x_ema")``, the moving average (4), when ``ema_decay`` is set,
        else ``("state", "x")``; both are post-processing of the broadcast half-steps."""
        # gossip averages of the broadcast half-steps, a function of the messages, or their
        # moving average (4)
        return ("state", "x_ema") if self.ema_decay else ("state", "x")

    noise_attributes: ClassVar[tuple[str, ...]] = ("noise_multiplier", "_noise")

    def sampling_rate(self, problem) -> np.ndarray:
        """``(n,)`` each agent's sampling rate: ``rate``, or ``batch_size / m_i``."""
        sizes = problem.local_sizes()
        if self.sampling == "poisson":
            return np.full(sizes.shape, self.rate)
        assert self.batch_size is not None              # sampling 'fixed' sets it
        require(self.batch_size <= int(sizes.min()), "batch_size", self.batch_size,
                f"batch_size <= the smallest local size m_i = {int(sizes.min())}")
        return self.batch_size / sizes


def account(alg: DPSGD, problem, graph, iterations, assumptions, method: str,
            pld_discretization: float | None = None, multipliers: np.ndarray | None = None,
            theorem: str = "DP-SGD step", notes: tuple[str, ...] = (),
            relation: str = "replace_one") -> PrivacyGuarantee:
    """The guarantee of T DP-SGD-like steps whose agent i adds noise of multiplier
    ``multipliers[i]`` (default: the algorithm's own for every agent) to its clipped sum, under
    ``relation`` (:data:`dpnet.privacy.dp_accounting_bridge.RELATIONS`)."""
    if alg.noise_multiplier == 0:
        return PrivacyGuarantee.none(f"{alg.name} with noise multiplier 0 adds no noise",
                                     iterations)
    require(iterations is not None, "iterations", iterations, "a finite horizon T")
    sizes = problem.local_sizes()
    if sizes is None:
        raise ParameterError("problem", type(problem).__name__, "a finite-sum problem with m_i "
                             "local records per agent")
    delta = accountants.required_delta(assumptions, method)
    q = alg.sampling_rate(problem)
    n = graph.n if graph is not None else problem.n_agents
    z = np.full(n, alg.noise_multiplier) if multipliers is None else multipliers
    # one evaluation per distinct (multiplier, rate): agents differ only through these two
    zq = np.stack([np.asarray(z, dtype=float), q], axis=1)
    _, first, where = np.unique(np.round(zq, 12), axis=0, return_index=True,
                                return_inverse=True)
    dp_sgd.check_relation(relation, alg.sampling)
    eps = np.array([dp_sgd.epsilon(float(v), alg.sampling, float(r), int(iterations), delta,
                                   method, pld_discretization, relation)
                    for v, r in zq[first]])[where.reshape(-1)]
    rates = (f"rate {q[0]:.6g} of m = {sizes[0]} records per agent" if np.all(sizes == sizes[0])
             else f"rates {q.min():.6g} to {q.max():.6g} of local sizes m_i = {sizes.min()} to "
                  f"{sizes.max()} (agent i accounted at its own rate)")
    pair = ("ADD_OR_REMOVE (Poisson-subsampled Gaussian)" if relation == "add_remove" else
            "REPLACE_ONE (Poisson mixture against mixture)" if alg.sampling == "poisson"
            else "replace-one, batch without replacement: the symmetrised pair of Dong, Roth & "
            "Su's subsampling theorem")
    return PrivacyGuarantee.from_per_agent(
        eps, delta=delta, horizon=int(iterations),
        theorem=f"{theorem} composed {iterations} times, dp-accounting {method.upper()}, "
                f"{pair}",
        assumptions=(f"per-record l2 clipping at C = {alg.clip.bound:g} (the sensitivity of the "
                     "clipped sum is " + ("C under add-or-remove)" if relation == "add_remove"
                                          else "2C under replace-one)"),
                     f"{alg.sampling} sampling, {rates}",
                     ("add-or-remove" if relation == "add_remove" else "replace-one")
                     + " adjacency of one record of one agent"),
        notes=notes or ("every message is a post-processing of the noisy clipped sums, so the "
                        "graph does not change the per-record guarantee",))


def rdp_curve(alg: DPSGD, problem, graph, iterations, orders,
              multipliers: np.ndarray | None = None) -> np.ndarray:
    """RDP at ``orders`` of T DP-SGD-like steps, the largest over agents whose agent i adds
    noise of multiplier ``multipliers[i]`` (default: the algorithm's own)."""
    a = np.asarray(orders, dtype=float)
    if alg.noise_multiplier == 0:
        return np.full(a.shape, np.inf)
    q = alg.sampling_rate(problem)
    z = np.full(q.shape, alg.noise_multiplier) if multipliers is None else np.broadcast_to(
        np.asarray(multipliers, dtype=float), q.shape)
    zq = np.stack([z, q], axis=1)
    _, first = np.unique(np.round(zq, 12), axis=0, return_index=True)
    return np.max([dp_sgd.rdp_curve(float(v), alg.sampling, float(r), int(iterations), a)
                   for v, r in zq[first]], axis=0)


@accountants.register_rdp_curve(DPSGD)
def _rdp_curve(alg, problem, graph, iterations, assumptions, orders):
    return rdp_curve(alg, problem, graph, iterations, orders)


@accountants.register(DPSGD, "pld")
def pld_accountant(alg, problem, graph, iterations, assumptions,
                   pld_discretization: float | None = None, relation: str = "replace_one"):
    """dp-accounting PLD of the T DP-SGD steps under replace-one (option ``relation=
    "add_remove"``: Opacus's relation, Poisson only), at the assumptions' delta (given: none is
    assumed); option pld_discretization."""
    return account(alg, problem, graph, iterations, assumptions, "pld", pld_discretization,
                   relation=relation)


@accountants.register(DPSGD, "rdp")
def rdp_accountant(alg, problem, graph, iterations, assumptions, relation: str = "replace_one"):
    """RDP of the T DP-SGD steps under replace-one (Poisson: the mixture pair's own divergence
    or the group-of-two bound, whichever is smaller; option ``relation="add_remove"``:
    dp-accounting's Poisson-subsampled Gaussian), at the assumptions' delta (given: none is
    assumed)."""
    return account(alg, problem, graph, iterations, assumptions, "rdp", relation=relation)
