"""Empirical privacy auditing: a lower bound on epsilon from what an eavesdropper sees.

The claim ``alg.privacy(...)`` says: for two *adjacent* inputs (the paper's adjacency: two function
sets differing in agent ``i0``'s objective, or two datasets differing in one sample), the
distributions of the transcript (every message on the wire) are within ``e^eps`` (plus ``delta``)
of each other on every event. An audit tests that on one event it chooses:

1. run the algorithm on the two adjacent inputs ``A`` and ``B``, ``R`` times each with independent
   noise (run ``c`` of world ``w`` uses its own seed), and record the transcripts;
2. reduce each transcript to a scalar statistic ``T`` (default: the coordinate-wise Laplace
   log-likelihood ratio of per-target *features*, e.g. the innovations ``m_{k+1} - W m_k`` in
   which each Laplace draw appears alone);
3. on a *selection* half of the runs, choose the event ``S = {T >= t}`` or ``{T <= t}`` and the
   direction (A over B or B over A) with the largest lower bound;
4. on the held-out half, bound ``p_A = P_A(S)`` from below and ``p_B = P_B(S)`` from above with
   one-sided Clopper-Pearson intervals at level ``(1 - confidence)/2`` each; then, with the stated
   confidence, ``eps >= log((p_A_lower - delta) / p_B_upper)``.

The result is a statistically valid lower bound on the true epsilon of *this* pair of inputs, so
it can never exceed a correct claim (except with probability ``1 - confidence``). An audited
epsilon above the claim is a bug in the code or in the accounting. ``audited / claimed`` measures
how tight the accounting is for the chosen inputs (a loose ratio may also mean the inputs or the
statistic are not the worst case).

Vectorised over repetitions: ``R`` runs of an ``n``-agent algorithm are one run on the disjoint
union of ``R`` copies of the graph (:class:`BatchNetwork` mixes block-wise, :class:`BatchStreams`
draws for row ``c*n + i`` exactly what agent ``i`` draws in ``dpnet.run(..., seed=seeds[c])``,
:class:`BatchProblem` gives each copy its world's objectives), so copy ``c`` of a batch equals a
single run with seed ``seeds[c]`` (a test checks this) while a whole audit is a few tensor
operations on ``(R n, d)`` arrays.

Adding an algorithm is one :class:`AuditTarget` registered with :func:`register_target`: how to
build the algorithm and the two adjacent inputs, the small configuration, the constants its
``privacy()`` needs, which transcript names the adversary reads, and optional features. See
``docs/auditing.md`` and the entries at the end of this module.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ... import algorithms
from ...algorithms.base import Algorithm, Context
from ...errors import NonFiniteError, UnknownNameError, positive_int, require
from ...graphs import Graph
from ...network import BitLedger, Network
from ...noise import Noise
from ...privacy.guarantee import PrivacyGuarantee
from ...problems.base import Problem
from ...problems.online import OnlineProblem
from ...problems.stochastic import as_clip, sample_indices
from ...registry import Registry, calling_module
from ...rng import GOLDEN, Streams, purpose_key, splitmix64
from ...threads import torch_threads
from .. import report
from .estimators import epsilon_bound

Features = Callable[[dict[str, np.ndarray]], np.ndarray]

# ---- a problem with exactly known sensitivity ------------------------------------------------


class LinearRecords(Problem):
    """``q`` records per agent, record r of agent i with the constant gradient ``c[i, r]``:
    ``f_i(x) = (1/q) sum_r c_{i,r}^T x`` (``c`` of shape ``(n, q, d)``, or ``(n, d)`` for one
    record per agent).

    The cleanest adjacency fixture: ``||grad f_i|| <= max ||c_{i,r}||`` everywhere (paper 000's
    Assumption 7 with M attained); the gradient difference of two versions of ``f_i0`` is the
    constant ``(c_i0 - c'_i0)/q`` (Assumption 6 / paper 004's adjacency radius, attained), and
    the transcript of a tracking method then depends on the data only through it.
    :meth:`stochastic_grad` averages ``batch_size`` distinct records drawn uniformly without
    replacement (:func:`~dpnet.problems.stochastic.sample_indices`), so a replace-one pair (one
    record of one agent changed) is an exact fixture for minibatch accounting: the minibatch mean
    moves by ``(c - c')/B`` when the record is drawn, with probability ``B/q``. ``smoothness`` is
    a *declared* Lipschitz constant of the gradients: any value >= 0 is valid (the true one is
    0), for accountants that need ``L > 0``."""

    name = "linear_records"

    def __init__(self, c, smoothness: float = 0.0) -> None:
        C = torch.as_tensor(np.asarray(c, dtype=np.float64))
        require(C.ndim in (2, 3), "c", tuple(C.shape), "shape (n_agents, dim) or (n_agents, "
                "q records, dim)")
        require(smoothness >= 0, "smoothness", smoothness, "a Lipschitz constant >= 0")
        self.c = C[:, None, :] if C.ndim == 2 else C
        self.n_agents, self.m, self.dim = self.c.shape
        self._L = float(smoothness)

    def local_sizes(self) -> np.ndarray:
        return np.full(self.n_agents, self.m, dtype=np.int64)

    def grad(self, X, agents=None):
        return self.c[self._agents(agents)].mean(1).to(X.dtype).expand_as(X).clone()

    def local_loss(self, X, agents=None):
        return (self.c[self._agents(agents)].mean(1) * X).sum(dim=1)

    #: per-record gradients exist (the records themselves): DP-SGD's clipping applies
    supports_clip = True

    def per_sample_grads_at(self, X, idx, agents=None):
        """``(n, B, d)``: the records ``idx`` of each agent (their gradients at any x)."""
        rows = torch.from_numpy(self._agents(agents))[:, None].expand_as(idx)
        return self.c[rows, idx.cpu()].to(X.dtype)

    def stochastic_grad(self, X, rng, k, batch_size, agents=None, purpose="sample"):
        a = self._agents(agents)
        idx = sample_indices(rng, k, a, self.m, batch_size, purpose)         # (len(a), B)
        rows = torch.from_numpy(a)[:, None].expand_as(idx)
        return self.c[rows, idx].mean(1).to(X.dtype)

    @property
    def smoothness(self) -> float:
        return self._L

    def gradient_bound(self) -> float:
        return float(torch.linalg.vector_norm(self.c, dim=2).max())


class LinearSamples:
    """A sample model (:class:`~dpnet.problems.online.SampleModel`) whose row r has the constant
    gradient ``c[r]``: ``l(x; r) = c_r^T x``. On a one-pass stream it makes a record's step
    the only place the record shows (the stream relation's exact fixture)."""

    name = "linear_samples"

    def __init__(self, c) -> None:
        self.c = torch.as_tensor(np.asarray(c, dtype=np.float64))
        require(self.c.ndim == 2, "c", tuple(self.c.shape), "shape (N rows, dim)")
        self.n_data, self.dim = self.c.shape

    def grad(self, X, idx, w):
        """``(n, d)``: row i is ``sum_s w[i, s] c[idx[i, s]]``, the weighted sum of the drawn rows'
        constant gradients."""
        return torch.einsum("ns,nsd->nd", w.to(X.dtype), self.c[idx.cpu()].to(X.dtype))

    def loss(self, X, idx, w):
        """``(n,)``: ``sum_s w[i, s] c[idx[i, s]]^T X[i]``."""
        return (w.to(X.dtype) * torch.einsum("nsd,nd->ns", self.c[idx.cpu()].to(X.dtype),
                                             X)).sum(1)

    def smoothness(self) -> float:
        """0: every gradient is constant."""
        return 0.0


class RecordPair(Problem):
    """``m`` records per agent; record 0 of agent ``agent`` has the constant per-record gradient
    ``sign R u``, every other record of that agent ``rest R u`` (``rest`` 0 or 1), every record
    of the other agents 0: ``grad f_i = (sign + rest (m - 1)) R u / m`` for that agent.

    A minibatch of B distinct records holds record 0 with probability ``B/m``, drawn here as that
    one Bernoulli ``b`` (the exact law of what the mean can show, since the other records are all
    alike), and averages to ``(b sign + (B - b) rest) R u / B``. With ``rest = 0`` the replace
    pair ``sign = +-1`` is a mixture against a mixture; with ``rest = 1`` world A's mean is
    ``R u`` whether or not the record is drawn and world B's drops by ``2 R u / B`` when it is: the
    add-or-remove pair at sensitivity ``2R/B``, the worst case of a fixed batch under replace-one
    (the record's inclusion decides how many others are drawn)."""

    name = "record_pair"
    supports_clip = True

    def __init__(self, n_agents: int, m: int, u: np.ndarray, R: float, sign: float,
                 smoothness: float, agent: int = 0, rest: float = 0.0) -> None:
        require(rest in (0.0, 1.0), "rest", rest, "0 or 1 (the other records' gradient, in R u)")
        self.n_agents, self.m, self.dim = int(n_agents), int(m), int(u.size)
        self.record = torch.as_tensor(sign * R * u, dtype=torch.float64)
        self.others = torch.as_tensor(rest * R * u, dtype=torch.float64)
        self.agent, self._L = int(agent), float(smoothness)

    def local_sizes(self) -> np.ndarray:
        return np.full(self.n_agents, self.m, dtype=np.int64)

    def _rows(self, agents, X):
        a = self._agents(agents)
        return a, X.new_zeros(X.shape), torch.from_numpy(a == self.agent)

    def grad(self, X, agents=None):
        _, out, hit = self._rows(agents, X)
        out[hit] = (self.record + (self.m - 1) * self.others) / self.m
        return out

    def local_loss(self, X, agents=None):
        return (self.grad(X, agents) * X).sum(dim=1)       # linear: f_i(x) = grad f_i^T x

    def stochastic_grad(self, X, rng, k, batch_size, agents=None, purpose="sample", clip=None):
        a, out, hit = self._rows(agents, X)
        drawn = torch.from_numpy(rng.bernoulli(purpose, k, a, batch_size / self.m)) & hit
        clip = as_clip(clip)
        g, o = ((self.record, self.others) if clip is None else
                clip.apply(torch.stack([self.record, self.others])))
        out[hit] = o
        out[drawn] = (g + (batch_size - 1) * o) / batch_size
        return out

    @property
    def smoothness(self) -> float:
        return self._L

    def gradient_bound(self) -> float:
        return float((self.record + (self.m - 1) * self.others).norm()) / self.m


def linear_pair(n: int, dim: int = 1, agent: int = 0, M: float = 1.0,
                smoothness: float = 0.0) -> tuple[LinearRecords, LinearRecords]:
    """Adjacent linear problems: agent ``agent`` has gradient ``+M u`` in A and ``-M u`` in B with
    ``u = (1, ..., 1)/sqrt(d)`` (l2 norm M, so ``||Delta||_2 = 2M`` and ``||Delta||_1 = 2 M
    sqrt(d)``, the l1/l2 worst case); the other agents' gradients are fixed, of norm M/2."""
    require(0 <= agent < n, "agent", agent, f"0 <= agent < n = {n}")
    u = np.ones(dim) / math.sqrt(dim)
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    c = 0.5 * M * signs[:, None] * u[None, :]
    ca, cb = c.copy(), c.copy()
    ca[agent], cb[agent] = M * u, -M * u
    return LinearRecords(ca, smoothness), LinearRecords(cb, smoothness)


# ---- R runs as one: the batch machinery --------------------------------------------------------


class BatchStreams(Streams):
    """Random streams of ``len(seeds)`` independent runs at once: row ``c*n + i`` draws exactly
    what agent ``i`` draws in a run with ``Streams(seeds[c])`` (same hash chain as
    :class:`~dpnet.rng.Streams`, with the seed key varying by row). A draw made for agent 0 alone
    (a public per-run quantity, e.g. DPP2's random eta^k) comes from copy 0's stream."""

    def __init__(self, seeds: Sequence[int] | np.ndarray, n: int) -> None:
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        require(seeds.size >= 1 and bool(np.all(seeds >= 0)), "seeds", seeds[:4].tolist(),
                "at least one seed, all >= 0")
        super().__init__(int(seeds[0]))
        self.seeds, self.n = seeds, int(n)
        with np.errstate(over="ignore"):
            self._keys = splitmix64(seeds.astype(np.uint64))

    def _bits(self, purpose: str, iteration: int, agents: np.ndarray, width: int) -> np.ndarray:
        agents = np.asarray(agents, dtype=np.int64)
        copies, local = np.divmod(agents, self.n)
        with np.errstate(over="ignore"):
            h = self._keys ^ np.uint64(purpose_key(purpose))
            h = splitmix64(splitmix64(h) ^ np.uint64(iteration & (2**64 - 1)))
            a = splitmix64(h[copies][:, None] ^ local.astype(np.uint64)[:, None])
            cols = np.arange(width, dtype=np.uint64)[None, :]
            return splitmix64(a ^ (cols * GOLDEN))


class _RowStreams:
    """A view of a stream that draws for fixed global rows whatever local agent ids it is handed
    (a copy's problem indexes its data by local agent, its random draws by global row)."""

    def __init__(self, base: Streams, rows: np.ndarray) -> None:
        self._base, self._rows = base, rows

    def _swap(self, agents) -> np.ndarray:
        agents = np.asarray(agents).reshape(-1)
        require(agents.size == self._rows.size, "agents", agents.size,
                f"one id per row of the batch block ({self._rows.size})")
        return self._rows

    def uniform(self, purpose, iteration, agents, width):
        return self._base.uniform(purpose, iteration, self._swap(agents), width)

    def laplace(self, purpose, iteration, agents, width):
        return self._base.laplace(purpose, iteration, self._swap(agents), width)

    def gaussian(self, purpose, iteration, agents, width):
        return self._base.gaussian(purpose, iteration, self._swap(agents), width)

    def bernoulli(self, purpose, iteration, agents, p):
        return self._base.bernoulli(purpose, iteration, self._swap(agents), p)

    def permutation_keys(self, purpose, iteration, agents, width):
        return self._base.permutation_keys(purpose, iteration, self._swap(agents), width)

    def __getattr__(self, name: str):
        return getattr(self._base, name)


class BatchProblem(Problem):
    """``copies`` copies of an n-agent problem; copy ``c`` uses ``problems[world[c]]``."""

    name = "batch"

    def __init__(self, problems: Sequence[Problem], world: np.ndarray, n: int) -> None:
        self.problems = list(problems)
        require(all(p.dim == self.problems[0].dim and p.n_agents == n for p in self.problems),
                "problems", [f"{p.name}(n={p.n_agents}, d={p.dim})" for p in self.problems],
                f"the same n = {n} and dimension")
        self.world = np.asarray(world, dtype=np.int64)
        self.base_n = int(n)
        self.n_agents = self.base_n * self.world.size
        self.dim = self.problems[0].dim
        self.convention = self.problems[0].convention

    def local_sizes(self) -> np.ndarray | None:
        """Copy c's agents hold what ``problems[world[c]]``'s agents hold."""
        sizes = [p.local_sizes() for p in self.problems]
        if any(s is None for s in sizes):
            return None
        return np.stack(cast(list[np.ndarray], sizes))[self.world].reshape(-1)   # no None: above

    def _blocks(self, agents):
        a = self._agents(agents)
        copies, local = np.divmod(a, self.base_n)
        w = self.world[copies]
        for p, prob in enumerate(self.problems):
            rows = np.nonzero(w == p)[0]
            if rows.size:
                yield prob, torch.from_numpy(rows), local[rows], a[rows]

    def grad(self, X, agents=None):
        out = torch.empty_like(X)
        for prob, rows, local, _ in self._blocks(agents):
            out[rows] = prob.grad(X[rows], local)
        return out

    def local_loss(self, X, agents=None):
        out = X.new_empty(X.shape[0])
        for prob, rows, local, _ in self._blocks(agents):
            out[rows] = prob.local_loss(X[rows], local)
        return out

    def stochastic_grad(self, X, rng, k, batch_size, agents=None, purpose="sample", clip=None):
        out = torch.empty_like(X)
        extra = {} if clip is None else {"clip": clip}      # only clipping problems take it
        for prob, rows, local, glob in self._blocks(agents):
            out[rows] = prob.stochastic_grad(X[rows], _RowStreams(rng, glob), k, batch_size,
                                             local, purpose, **extra)
        return out

    def per_sample_grads_at(self, X, idx, agents=None):
        """``(rows, B, d)``: each row's records ``idx`` (Poisson batches draw them)."""
        out = X.new_empty((*idx.shape, X.shape[1]))
        for prob, rows, local, _ in self._blocks(agents):
            out[rows] = prob.per_sample_grads_at(X[rows], idx[rows], local).to(X.dtype)
        return out

    @property
    def supports_clip(self) -> bool:
        """Whether every world's problem has per-sample gradients to clip."""
        return all(getattr(p, "supports_clip", False) for p in self.problems)

    @property
    def m(self) -> int | None:
        """The records per agent, where every world's problem has the same count."""
        counts = {getattr(p, "m", None) for p in self.problems}
        return counts.pop() if len(counts) == 1 else None

    @property
    def smoothness(self) -> float:
        return max(p.smoothness for p in self.problems)

    def gradient_bound(self):
        bounds = [p.gradient_bound() for p in self.problems]
        return None if any(b is None for b in bounds) else max(bounds)

    def __getattr__(self, name: str):
        # problem-specific attributes (sample counts, ...) of the copies' common structure
        if name.startswith("__") or "problems" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["problems"][0], name)



# BatchProblem's stochastic_grad is the one called, and callers always pass batch_size (None for
# a stream): OnlineProblem's default for it is never used
class BatchOnlineProblem(BatchProblem, OnlineProblem):  # type: ignore[misc]
    """Copies of online problems are an online problem: the stream methods ask for "the gradient
    over all data acquired so far" (:func:`~dpnet.problems.online.all_data_grad`) of an
    :class:`~dpnet.problems.online.OnlineProblem` through ``stochastic_grad`` with no batch,
    which :class:`BatchProblem` forwards to each copy's own stream. Nothing of
    :class:`OnlineProblem`'s own state is built: every method an algorithm calls is
    :class:`BatchProblem`'s."""

    def __init__(self, problems: Sequence[Problem], world: np.ndarray, n: int) -> None:
        BatchProblem.__init__(self, problems, world, n)

class BatchNetwork(Network):
    """The simulated network of ``copies`` disjoint copies of ``graph`` (rows ``c*n .. c*n+n-1``
    are copy c): mixing is block-wise with the small graph's matrices, bits and transcript cover
    all copies. ``self.graph`` stays the small graph, so algorithms that read it see the graph
    of one run."""

    def __init__(self, graph: Graph, copies: int, rng: Streams, record: bool = True,
                 float_bits: int = 64) -> None:
        super().__init__(graph, record=record, float_bits=float_bits, rng=rng)
        self.base_n, self.copies = graph.n, int(copies)
        self.n = graph.n * self.copies
        self.ledger = BitLedger(self.n, detailed=False)

    def receivers(self, matrix: str = "W") -> np.ndarray:
        if matrix not in self._receivers:
            self._receivers[matrix] = np.tile(self.graph.out_degrees(matrix).astype(np.int64),
                                              self.copies)
        return self._receivers[matrix]

    def _blockwise(self, M: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
        d = H.shape[-1]
        M = M.to_dense() if M.layout != torch.strided else M
        return (M @ H.reshape(self.copies, self.base_n, d)).reshape(self.n, d)

    def mix(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        return self._blockwise(self._operator(matrix, "mix"), H)

    def laplacian(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        return self._blockwise(self._operator(matrix, "laplacian"), H)


def run_copies(algorithm: Algorithm, problems: Sequence[Problem], graph: Graph, iterations: int,
               x0, seeds: Sequence[int] | np.ndarray, world: Sequence[int] | np.ndarray,
               names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``len(seeds)`` independent copies in one batch: copy c runs ``problems[world[c]]`` with
    seed ``seeds[c]`` from ``x0`` (``(n, d)`` or ``(d,)``). Returns, per transcript name,
    an array ``(copies, T, n, d)`` of the payloads (NaN where an agent was silent); copy c's
    transcript is exactly that of ``dpnet.run(..., seed=seeds[c], record=True)``."""
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
    world = np.asarray(world, dtype=np.int64).reshape(-1)
    require(world.size == seeds.size, "world", world.size, f"one world per seed ({seeds.size})")
    n, copies = graph.n, seeds.size
    algorithm.check_graph(graph)
    for p in problems:
        algorithm.check_problem(p)
    rng = BatchStreams(seeds, n)
    net = BatchNetwork(graph, copies, rng)
    batch = (BatchOnlineProblem if all(isinstance(p, OnlineProblem) for p in problems)
             else BatchProblem)
    ctx = Context(batch(problems, world, n), net, rng)
    X = problems[0].check_x(x0).repeat(copies, 1)
    net.set_iteration(0)
    state = algorithm.init(ctx, X)
    for k in range(iterations):
        net.set_iteration(k)
        state = algorithm.step(ctx, state, k)
    x = algorithm.iterate(state)
    if not bool(torch.isfinite(x).all()):
        raise NonFiniteError(iterations, "x", "in an audit batch")
    out = {}
    assert net.transcript is not None     # BatchNetwork records (record=True above)
    for name in (names or net.transcript.names()):
        arr = net.transcript.stacked(name, net.n)                    # (T, copies*n, d)
        T, _, d = arr.shape
        out[name] = arr.reshape(T, copies, n, d).transpose(1, 0, 2, 3)
    return out


# ---- features and statistics ------------------------------------------------------------------


def flatten(views: dict[str, np.ndarray], names: Sequence[str] | None = None) -> np.ndarray:
    """Default features: every observed payload, ``(copies, F)``; a silent agent's NaN becomes 0
    plus an indicator column (silence is observable too)."""
    cols = []
    for name in (names or sorted(views)):
        v = views[name].reshape(views[name].shape[0], -1)
        nan = np.isnan(v)
        cols.append(np.where(nan, 0.0, v))
        if nan.any():
            cols.append(nan[:, nan.any(axis=0)].astype(np.float64))
    return np.concatenate(cols, axis=1)


def innovations(M: np.ndarray, names: Sequence[str]) -> Features:
    """Features ``m_0, m_1 - M m_0, m_2 - M m_1, ...`` per name (``M``: the public matrix by which
    the broadcast quantity evolves, e.g. W): each fresh Laplace draw then appears alone."""
    M = np.asarray(M, dtype=np.float64)

    def features(views):
        cols = []
        for name in names:
            v = views[name]                                          # (R, T, n, d)
            inn = v.copy()
            inn[:, 1:] -= np.einsum("ij,rtjd->rtid", M, v[:, :-1])
            cols.append(inn.reshape(v.shape[0], -1))
        return np.concatenate(cols, axis=1)

    return features


@dataclass
class LaplaceLLR:
    """Coordinate-wise Laplace log-likelihood ratio ``sum_f (|v_f - m_B,f| - |v_f - m_A,f|)/b_f``
    fitted on the selection half (medians per world, pooled mean absolute deviation): the exact
    LLR when the features are independent Laplace shifts, a sound statistic in any case. Features
    whose two medians differ by less than ``prune`` standard errors are dropped (they only add
    noise); the fit sees the selection half only, so the held-out test stays valid. Positive
    values favour world A."""

    center_a: np.ndarray
    center_b: np.ndarray
    scale: np.ndarray
    keep: np.ndarray

    @staticmethod
    def fit(fa: np.ndarray, fb: np.ndarray, prune: float = 4.0) -> LaplaceLLR:
        """The statistic fitted on the selection samples ``fa`` (world A) and ``fb`` (world B), each
        ``(runs, F)``: per-world medians, the pooled mean absolute deviation as scale, and only the
        features whose medians differ by more than ``prune`` standard errors (the most separated one when
        none does)."""
        ma, mb = np.median(fa, axis=0), np.median(fb, axis=0)
        b = 0.5 * (np.abs(fa - ma).mean(axis=0) + np.abs(fb - mb).mean(axis=0))
        tiny = 1e-12 * max(1.0, float(np.abs(np.concatenate([ma, mb])).max(initial=0.0)))
        b = np.maximum(b, tiny)
        # a Laplace median has standard error ~ b / sqrt(n); two of them differ by ~ b sqrt(2/n)
        z = np.abs(ma - mb) / (b * math.sqrt(2.0 / min(fa.shape[0], fb.shape[0])))
        keep = z > prune
        if not keep.any():
            keep = z >= z.max()
        return LaplaceLLR(ma[keep], mb[keep], b[keep], keep)

    def __call__(self, f: np.ndarray) -> np.ndarray:
        f = f[:, self.keep]
        return ((np.abs(f - self.center_b) - np.abs(f - self.center_a)) / self.scale).sum(axis=1)


@dataclass
class Projection:
    """Linear statistic ``(v - mid) . w`` with ``w = (mean_A - mean_B)/var`` (a Gaussian LLR with
    diagonal covariance), for Gaussian mechanisms."""

    mid: np.ndarray
    weight: np.ndarray

    @staticmethod
    def fit(fa: np.ndarray, fb: np.ndarray) -> Projection:
        """The statistic fitted on the selection samples ``fa`` (world A) and ``fb`` (world B), each
        ``(runs, F)``: ``mid`` the midpoint of the two means, ``weight`` their difference over the pooled
        per-feature variance (0 for a feature without variance)."""
        mu_a, mu_b = fa.mean(axis=0), fb.mean(axis=0)
        var = 0.5 * (fa.var(axis=0) + fb.var(axis=0))
        w = (mu_a - mu_b) / np.maximum(var, 1e-300)
        return Projection(0.5 * (mu_a + mu_b), np.where(var > 0, w, 0.0))

    def __call__(self, f: np.ndarray) -> np.ndarray:
        return (f - self.mid) @ self.weight


@dataclass
class Fisher(Projection):
    """Fisher's linear discriminant ``(v - mid) . S^-1 (mean_A - mean_B)`` with the pooled
    covariance S: the exact LLR of two Gaussians with a common covariance, for correlated
    features (e.g. raw messages of a Gaussian mechanism whose noise is carried forward)."""

    @staticmethod
    def fit(fa: np.ndarray, fb: np.ndarray) -> Fisher:
        """The discriminant fitted on the selection samples ``fa`` (world A) and ``fb`` (world B), each
        ``(runs, F)``: ``weight = S^-1 (mean_A - mean_B)`` by least squares, the pooled covariance S with
        a ridge of ``1e-12 trace(S)``."""
        mu_a, mu_b = fa.mean(axis=0), fb.mean(axis=0)
        S = 0.5 * (np.atleast_2d(np.cov(fa, rowvar=False))
                   + np.atleast_2d(np.cov(fb, rowvar=False)))
        S = S + 1e-12 * max(float(np.trace(S)), 1e-300) * np.eye(S.shape[0])
        return Fisher(0.5 * (mu_a + mu_b), np.linalg.lstsq(S, mu_a - mu_b, rcond=None)[0])


#: the test statistics a target names
STATISTICS: Registry = Registry("audit statistic", "dpnet.lab.audit")
for _name, _cls in (("laplace_llr", LaplaceLLR), ("projection", Projection), ("fisher", Fisher)):
    STATISTICS.register(_name, _cls)


# ---- the test ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """The chosen test: ``S = {T >= t}`` (``upper``) or ``{T <= t}``; ``a_over_b``: the bound is
    on ``P_A(S)/P_B(S)`` (else the reverse)."""

    threshold: float
    upper: bool
    a_over_b: bool

    def hits(self, t: np.ndarray) -> int:
        """Number of the statistic values ``t`` that fall in the event S."""
        return int(np.count_nonzero(t >= self.threshold if self.upper else t <= self.threshold))

    def __str__(self) -> str:
        s = f"T {'>=' if self.upper else '<='} {self.threshold:.6g}"
        return f"{s}, bound on P_A/P_B" if self.a_over_b else f"{s}, bound on P_B/P_A"


def choose_event(ta: np.ndarray, tb: np.ndarray, alpha: float, delta: float = 0.0,
                 candidates: int = 400) -> tuple[Event, float]:
    """The event with the largest CP lower bound on the selection samples ``ta`` (world A) and
    ``tb`` (world B); candidate thresholds are quantiles of the pooled statistic plus its
    extremes."""
    pooled = np.concatenate([ta, tb])
    qs = np.quantile(pooled, np.linspace(0.0, 1.0, candidates))
    cand = np.unique(np.concatenate([qs, [pooled.min(), pooled.max(), ta.max(), ta.min(),
                                          tb.max(), tb.min()]]))
    sa, sb = np.sort(ta), np.sort(tb)
    na, nb = sa.size, sb.size
    ge_a = na - np.searchsorted(sa, cand, "left")
    ge_b = nb - np.searchsorted(sb, cand, "left")
    le_a = np.searchsorted(sa, cand, "right")
    le_b = np.searchsorted(sb, cand, "right")
    best, best_eps = Event(float(cand[0]), True, True), -1.0
    for upper, (ha, hb) in ((True, (ge_a, ge_b)), (False, (le_a, le_b))):
        for a_over_b in (True, False):
            eps = (epsilon_bound(ha, na, hb, nb, alpha, delta) if a_over_b
                   else epsilon_bound(hb, nb, ha, na, alpha, delta))
            i = int(np.argmax(eps))
            if eps[i] > best_eps:
                best, best_eps = Event(float(cand[i]), upper, a_over_b), float(eps[i])
    return best, best_eps


# ---- targets and results ----------------------------------------------------------------------


@dataclass
class AuditTarget:
    """One registry entry: everything needed to audit one algorithm's claim.

    ``algorithm()`` builds the configured algorithm; ``problems()`` the two adjacent inputs (A, B)
    per the paper's adjacency; ``graph()`` the small graph; ``x0`` the common start;
    ``constants`` go to ``alg.privacy(problem, graph, iterations=..., **constants)``;
    ``claim_iterations``: ``"run"`` (the audited horizon) or ``None`` (an infinite-horizon
    claim); ``observe``: transcript names the adversary reads (default all); ``features``: map
    ``{name: (R, T, n, d)}`` to ``(R, F)`` (default :func:`flatten`); ``statistic``:
    ``"laplace_llr"``, ``"projection"`` or ``"fisher"``; ``requires``: the algorithm's registry
    name (the entry is skipped while that module is absent); ``expected_violation``: non-empty
    when this entry documents a known failure of the accounting (a finding, explained there)."""

    name: str
    algorithm: Callable[[], Algorithm]
    problems: Callable[[], tuple[Problem, Problem]]
    graph: Callable[[], Graph]
    iterations: int
    x0: Any
    constants: dict[str, Any] = field(default_factory=dict)
    claim_iterations: int | None | str = "run"
    observe: tuple[str, ...] | None = None
    features: Callable[[], Features] | None = None
    statistic: str = "laplace_llr"
    agent: int = 0
    repetitions: int = 100_000
    adjacency: str = ""
    note: str = ""
    expected_violation: str = ""
    requires: str = ""

    @property
    def available(self) -> bool:
        """Whether the target can run: it requires no algorithm, or its algorithm (``requires``) is
        registered."""
        return not self.requires or self.requires in algorithms.available()


#: the audit targets by name (registered by :mod:`.targets` and by a user's module)
TARGETS: Registry[AuditTarget] = Registry("audit target", "dpnet.lab.audit")


def register_target(target: AuditTarget) -> AuditTarget:
    """Add ``target`` to :data:`TARGETS` under its name and return it. Raises
    :class:`~dpnet.errors.ParameterError` if its ``statistic`` is not one of :data:`STATISTICS`, or if
    another module registered the name."""
    require(target.statistic in STATISTICS, "statistic", target.statistic,
            f"one of {sorted(STATISTICS)}")
    return TARGETS.register(target.name, target,
                            registrant=calling_module())


def get_target(name: str) -> AuditTarget:
    """The registered target called ``name``. Raises :class:`~dpnet.errors.UnknownNameError` for an
    unknown name, :class:`~dpnet.errors.ParameterError` when its algorithm is not registered."""
    if name not in TARGETS:
        raise UnknownNameError("audit target", name, TARGETS)
    target = TARGETS[name]
    require(target.available, "target", name,
            f"its algorithm {target.requires!r} is registered in dpnet.algorithms")
    return target


def available_targets() -> list[str]:
    """Names of the registered targets whose algorithm exists."""
    return [name for name, t in TARGETS.items() if t.available]


@dataclass
class AuditResult:
    """Outcome of :func:`audit`. ``epsilon`` is the lower bound (holds with ``confidence``),
    ``claimed`` the accountant's epsilon for the protected agent, ``tightness = epsilon /
    claimed``; ``violated`` when ``epsilon > claimed``."""

    name: str
    epsilon: float
    claimed: float
    delta: float
    confidence: float
    repetitions: int
    event: Event
    hits_a: int
    hits_b: int
    n_eval: int
    point_estimate: float
    selection_epsilon: float
    guarantee: PrivacyGuarantee
    noise_factor: float = 1.0
    stat_a: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    stat_b: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    config: dict[str, Any] = field(default_factory=dict)
    wall_time: float = 0.0

    @property
    def tightness(self) -> float:
        """``epsilon / claimed``, the audited share of the claim (inf where the claim is 0)."""
        return self.epsilon / self.claimed if self.claimed > 0 else math.inf

    @property
    def violated(self) -> bool:
        """Whether the audited lower bound exceeds the claimed epsilon: a bug in the code or the
        accounting."""
        return self.epsilon > self.claimed

    def row(self) -> dict[str, Any]:
        """The result as one flat row (audited and claimed epsilon, delta, tightness, verdict, noise
        factor, point estimate, repetitions, confidence) for tables and CSV files."""
        return {"target": self.name, "audited_eps": self.epsilon, "claimed_eps": self.claimed,
                "delta": self.delta, "tightness": self.tightness, "violated": self.violated,
                "noise_factor": self.noise_factor, "point_estimate": self.point_estimate,
                "repetitions": self.repetitions, "confidence": self.confidence}


_CLAIMS: dict[tuple, PrivacyGuarantee] = {}


def _signature(p: Problem) -> tuple:
    """What accountants read from a problem (two inputs with equal signatures get one claim)."""
    sizes = p.local_sizes()
    # every agent's m_i: per-record accounts read each (two unequal splits share no claim)
    return (type(p).__name__, p.n_agents, p.dim, p.smoothness, p.gradient_bound(),
            None if sizes is None else tuple(int(m) for m in sizes))


def claimed_guarantee(target: AuditTarget, algorithm: Algorithm | None = None
                      ) -> PrivacyGuarantee:
    """The accountant's guarantee for the target (worse of the two inputs' accountings; memoised,
    some accountants take seconds)."""
    alg = algorithm or target.algorithm()
    # not "run" in the else branch: an int or None
    K = cast(int | None, target.iterations if target.claim_iterations == "run"
             else target.claim_iterations)
    g = target.graph()
    out = []
    for p in target.problems():
        key = (repr(alg), repr(sorted(target.constants.items())), K, repr(g.W.tolist()),
               _signature(p))
        if key not in _CLAIMS:
            _CLAIMS[key] = alg.privacy(p, g, iterations=K, **target.constants)
        out.append(_CLAIMS[key])
    return max(out, key=lambda c: (_agent_eps(c, target.agent), c.delta))


def _agent_eps(g: PrivacyGuarantee, agent: int) -> float:
    return g.per_agent[agent] if len(g.per_agent) > agent else g.epsilon


def silently_scaled(algorithm: Algorithm, factor: float) -> Algorithm:
    """A copy of ``algorithm`` whose every noise draws ``factor`` times the noise it reports: the
    schedule (what ``privacy()`` reads) is unchanged, so the claim stays the original one. The
    mutation an audit must catch."""
    def scaled(noise: Noise) -> Noise:
        cls = type(noise)
        liar = copy.copy(noise)

        def sample(self, *args, **kwargs):
            return cls.sample(self, *args, **kwargs) * factor

        liar.__class__ = type(f"Silently{cls.__name__}", (cls,), {"sample": sample})
        return liar

    clone = copy.copy(algorithm)
    for key, value in vars(algorithm).items():
        if isinstance(value, Noise) and not value.is_zero:
            setattr(clone, key, scaled(value))
        elif isinstance(value, list | tuple) and value and all(isinstance(v, Noise) for v in value):
            setattr(clone, key, type(value)(scaled(v) for v in value))
    return clone


def sample_statistic_inputs(target: AuditTarget, repetitions: int, seed: int = 0,
                            noise_factor: float = 1.0, chunk_rows: int = 200_000
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Features ``(R, F)`` of ``R`` runs in world A and ``R`` in world B (run c of world w has seed
    ``2 R seed + w R + c``)."""
    alg = target.algorithm()
    if noise_factor != 1.0:
        alg = silently_scaled(alg, noise_factor)
    problems, graph = target.problems(), target.graph()
    feats = target.features() if target.features is not None else None
    per_chunk = max(1, chunk_rows // graph.n)
    out = []
    # ~1e5-row element-wise ops: intra-op threads cost more than they save (3-10x on 2 shared cores)
    with torch_threads(1):
        for w in (0, 1):
            out.append(_world_features(alg, problems, graph, target, feats, repetitions, seed, w,
                                       per_chunk))
    return out[0], out[1]


def _world_features(alg, problems, graph, target, feats, repetitions, seed, w, per_chunk):
    parts = []
    for start in range(0, repetitions, per_chunk):
        c = np.arange(start, min(repetitions, start + per_chunk))
        seeds = 2 * repetitions * seed + w * repetitions + c
        views = run_copies(alg, problems, graph, target.iterations, target.x0, seeds,
                           np.full(c.size, w), target.observe)
        parts.append(feats(views) if feats is not None else flatten(views))
    return np.concatenate(parts, axis=0)


def _quantize(t: np.ndarray, step: float) -> np.ndarray:
    return np.round(t / step) * step if step > 0 else t


def audit(target: AuditTarget | str, repetitions: int | None = None, seed: int = 0,
          confidence: float = 0.95, noise_factor: float = 1.0,
          resolution: float = 1e-9) -> AuditResult:
    """Audit ``target`` (a registered name or an :class:`AuditTarget`): the lower bound on epsilon
    that holds with probability ``confidence`` (module docstring). ``noise_factor != 1`` runs the
    silently mutated algorithm (:func:`silently_scaled`) against the original claim.

    ``resolution``: the statistic is rounded to this fraction of its spread before thresholding.
    The claims are about real-valued noise; float64 Laplace samples ``c + xi`` carry the shift c
    in their low-order bits (Mironov, CCS 2012), and an exact-threshold test on an atom of the
    LLR picks that up (it reported eps >= 2.3 against a true 1.0 before rounding). Rounding
    audits the mathematical mechanism; ``resolution=0`` audits the float implementation."""
    target = get_target(target) if isinstance(target, str) else target
    R = positive_int("repetitions", repetitions or target.repetitions)
    require(R >= 20, "repetitions", R, ">= 20 (half of the runs select the test, half evaluate it)")
    require(0 < confidence < 1, "confidence", confidence, "0 < confidence < 1")
    start = time.perf_counter()
    guarantee = claimed_guarantee(target)
    claimed, delta = _agent_eps(guarantee, target.agent), float(guarantee.delta)
    fa, fb = sample_statistic_inputs(target, R, seed, noise_factor)
    test = threshold_test(fa, fb, confidence, delta, target.statistic, resolution)
    return AuditResult(
        name=target.name, claimed=float(claimed), delta=delta, confidence=confidence,
        repetitions=R, guarantee=guarantee, noise_factor=noise_factor,
        config=describe_target(target), wall_time=time.perf_counter() - start, **test)


def threshold_test(fa: np.ndarray, fb: np.ndarray, confidence: float = 0.95, delta: float = 0.0,
                   statistic: str = "laplace_llr", resolution: float = 1e-9) -> dict[str, Any]:
    """The audit's test on features ``fa`` (world A runs) and ``fb`` (world B), ``(R, F)`` each:
    fit the statistic and choose the event on the first halves, bound on the second halves.
    Returns the :class:`AuditResult` fields ``epsilon, event, hits_a, hits_b, n_eval,
    point_estimate, selection_epsilon, stat_a, stat_b``."""
    half = min(fa.shape[0], fb.shape[0]) // 2
    require(half >= 10, "repetitions", 2 * half, ">= 20 runs per input")
    stat = STATISTICS[statistic].fit(fa[:half], fb[:half])
    sel_a, sel_b = stat(fa[:half]), stat(fb[:half])
    step = resolution * max(float(np.std(np.concatenate([sel_a, sel_b]))), 1e-300)
    sel_a, sel_b = _quantize(sel_a, step), _quantize(sel_b, step)
    alpha = 1.0 - confidence
    event, sel_eps = choose_event(sel_a, sel_b, alpha, delta)
    ev_a, ev_b = _quantize(stat(fa[half:2 * half]), step), _quantize(stat(fb[half:2 * half]), step)
    ha, hb = event.hits(ev_a), event.hits(ev_b)
    if not event.a_over_b:
        ha, hb = hb, ha
    n_eval = ev_a.size
    pa, pb = ha / n_eval, hb / n_eval
    return {"epsilon": float(epsilon_bound(ha, n_eval, hb, n_eval, alpha, delta)),
            "event": event, "hits_a": ha, "hits_b": hb, "n_eval": n_eval,
            "point_estimate": math.log((pa - delta) / max(pb, 0.5 / n_eval)) if pa > delta
            else 0.0, "selection_epsilon": sel_eps, "stat_a": ev_a, "stat_b": ev_b}


def describe_target(target: AuditTarget) -> dict[str, Any]:
    """What a report states about a target's setting: the algorithm and graph (their reprs), n, d,
    iterations, the protected agent, the adjacency, the transcript names observed, the statistic, the
    privacy constants, the claim's horizon, the note and, where one is documented, the known accounting
    failure. Builds the algorithm, the graph and the inputs to read them."""
    alg, g = target.algorithm(), target.graph()
    a, _ = target.problems()
    return {"algorithm": repr(alg), "graph": repr(g), "n": g.n, "dim": a.dim,
            "iterations": target.iterations, "protected agent": target.agent,
            "adjacency": target.adjacency, "observed": ", ".join(target.observe or ["all"]),
            "statistic": target.statistic, "privacy constants": target.constants,
            "claim horizon": ("audited horizon" if target.claim_iterations == "run"
                              else "any number of iterations" if target.claim_iterations is None
                              else target.claim_iterations),
            "note": target.note,
            **({"known accounting failure": target.expected_violation}
               if target.expected_violation else {})}


# ---- reports ----------------------------------------------------------------------------------


def table(results: Sequence[AuditResult]) -> str:
    """Markdown table: audited vs claimed."""
    return "\n".join(report.md_table([
        {"target": r.name,
         "noise": "as claimed" if r.noise_factor == 1.0 else f"x{r.noise_factor:g} (mutated)",
         "audited eps (lower bound)": f"{r.epsilon:.4g}", "claimed eps": f"{r.claimed:.4g}",
         "delta": f"{r.delta:.3g}", "audited/claimed": f"{r.tightness:.3f}",
         "verdict": "**VIOLATION**" if r.violated else "ok"} for r in results]))


def write_report(result: AuditResult, out: str | Path) -> tuple[Path, Path]:
    """``NAME.md`` (configuration, claim, bound, counts) and ``NAME.png`` (the statistic's two
    held-out distributions with the chosen threshold) in folder ``out``."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = result.name if result.noise_factor == 1.0 else f"{result.name}-x{result.noise_factor:g}"
    png, md = out / f"{stem}.png", out / f"{stem}.md"
    fig, ax = report.figure(figsize=(7, 4))
    both = np.concatenate([result.stat_a, result.stat_b])
    lo, hi = np.quantile(both, [0.001, 0.999]) if both.size else (0.0, 1.0)
    bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 80)
    ax.hist(np.clip(result.stat_a, lo, hi), bins=bins, alpha=0.55, density=True,
            label="input A (held-out runs)")
    ax.hist(np.clip(result.stat_b, lo, hi), bins=bins, alpha=0.55, density=True,
            label="input B (held-out runs)")
    ax.axvline(result.event.threshold, color="k", ls="--",
               label=f"threshold ({'T >=' if result.event.upper else 'T <='} t)")
    ax.set_xlabel("test statistic T")
    ax.set_ylabel("density")
    ax.set_title(f"{stem}: audited eps >= {result.epsilon:.3g} "
                 f"({result.confidence:.0%}), claimed {result.claimed:.3g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    noise = ("as claimed" if result.noise_factor == 1
             else f"silently x{result.noise_factor:g}")
    verdict = ("**VIOLATION: the audited lower bound exceeds the claim** (a bug in the code or the "
               "accounting)" if result.violated else "consistent with the claim")
    lines = [f"# Privacy audit: {stem}", "",
             f"- audited epsilon (lower bound, {result.confidence:.0%} confidence): "
             f"**{result.epsilon:.4g}**",
             f"- claimed epsilon (protected agent): **{result.claimed:.4g}**"
             + (f", delta = {result.delta:.3g}" if result.delta else " (pure DP)"),
             f"- audited / claimed: {result.tightness:.3f}; verdict: {verdict}",
             f"- point estimate of the chosen event's log ratio: {result.point_estimate:.4g}",
             f"- runs: {result.repetitions} per input (half select the test, half evaluate it); "
             f"noise: {noise}",
             f"- event: {result.event}; held-out hits: A {result.hits_a}/{result.n_eval}, "
             f"B {result.hits_b}/{result.n_eval}", "", "## Configuration", ""]
    lines += [f"- {k}: {v}" for k, v in result.config.items()]
    lines += ["", "## Claim", "", "```", str(result.guarantee), "```", "",
              f"![statistic]({png.name})", ""]
    md.write_text("\n".join(lines))
    return md, png
