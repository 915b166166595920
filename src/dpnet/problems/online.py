"""Online (streaming) problems: every agent acquires a new batch of samples at every iteration.

Paper 002 (Chen & Wang) poses decentralized learning on serially acquired data. At iteration t
agent i acquires a batch ``xi_t^i`` of ``batch`` samples from its own stream, and the *online
empirical objective* is (eq. (4))

    f_t^i(theta) = (1/(t+1)) sum_{k=0}^t l(theta, xi_k^i),

the average loss over everything the agent has seen. :class:`OnlineProblem` keeps what each agent
has acquired and returns ``grad f_t^i`` at the current iterates through the protocol's
``stochastic_grad(X, rng, k, batch_size, agents, purpose)`` (``k`` is the iteration t), so any
algorithm that asks ``ctx.grad(x, batch_size, k)`` (DSGD, DPDO, ...) uses the all-data gradient on
an online problem without knowing it; :func:`all_data_grad` is the same for algorithms that also
run on static problems. ``grad(X)`` / ``local_loss`` / ``loss`` are the *population* objectives
``f_i = E l(., xi^i)``: the average over agent i's pool (the data its stream draws from), which is
what the paper's tracking error and objective curves measure against.

**Streams.** Agent i's pool is a set of dataset rows (``pools``: the whole dataset for every agent,
as in the paper's "20 random samples split over 10 agents" per iteration, or a partition). Its
batch at iteration t is ``batch`` i.i.d. uniform draws (with replacement, Assumption 2) from its
pool, drawn from the run's counter-based streams under ``purpose`` at iteration t: a pure function
of (seed, purpose, t, agent), so every algorithm of a comparison sees the same data.

**Modes and costs** (n agents, d parameters, B samples per batch, P the pool size):

* ``"exact"`` (default): the gradient at the current iterate over *all* acquired samples, exactly.
  The multiset of acquired samples is kept as per-agent multiplicities over the pool, so the
  memory is O(nP) and a step evaluates the per-sample gradient once per *distinct* acquired
  sample: O(min((t+1)B, P) d) per agent, or for linear models on a shared pool one dense pass
  O(P d) per agent when that is cheaper. This is exact, not approximate; its cost grows with t
  until every pool row has been seen and is O(1) in t after that. Losses with finite sufficient
  statistics (least squares, :class:`LeastSquaresSamples`) keep running sums instead: O(B d^2)
  per step to update and O(d^2) to evaluate, exactly, for any t.
* ``"window"`` (**approximate**): the gradient at the current iterate over the last ``window``
  batches only, O(window B) per-sample gradients per agent.
* ``"cached"`` (**approximate**): ``(1/(t+1)) sum_k grad l(theta_k^i, xi_k^i)``, each batch's
  gradient evaluated once, at the iterate of the iteration that acquired it (stale gradients,
  SAG-style): O(B) per-sample gradients per step. Because the stored gradients depend on the
  run's iterates, an instance serves one run at a time; iteration 0 starts a new run.

The sample models (``model``) evaluate weighted sums of per-sample gradients: row i of
``grad(X, idx, w)`` is ``sum_s w[i, s] grad l(X_i, row idx[i, s])``. :class:`LogisticSamples` and
:class:`LeastSquaresSamples` are the linear ones; a neural-network model plugs in the same way.

**Devices.** ``OnlineProblem.to(device)`` moves the pools and the sample model (its own ``to``);
the streams draw pool positions on the host, which are moved to the device (one small transfer
per acquired batch), so every device acquires the same samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import torch

from ..errors import ParameterError, positive_int, require
from ..rng import Streams
from .base import Movable, Problem, minimize_global
from .neural import FlatModule
from .stochastic import padded_index_rows

MODES = ("exact", "window", "cached")


class SampleModel(Protocol):
    """Per-sample losses over a dataset of ``n_data`` rows, parameters of dimension ``dim``."""

    dim: int
    n_data: int

    def grad(self, X: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``(n, d)``: row i is ``sum_s w[i, s] grad l(X[i], data[idx[i, s]])``."""

    def loss(self, X: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``(n,)``: ``sum_s w[i, s] l(X[i], data[idx[i, s]])``."""


# ---- linear sample models ------------------------------------------------------------------------

class LogisticSamples(Movable):
    """``l(theta, (a, b)) = log(1 + exp(-b a^T theta)) + (reg/2) ||theta||^2``, b in {-1, +1}.

    With b in {0, 1} this is paper 002's ``(1 - b) a^T theta - log s(a^T theta)`` (the two forms
    are equal under b -> 2b - 1). ``features``: ``(N, d)``; ``labels``: ``(N,)`` in {-1, +1} or
    {0, 1}. ``reg`` is the regulariser of *one batch loss* ``l(theta, xi)`` (paper 002: r^i)."""

    name = "logistic"

    def __init__(self, features, labels, reg: float = 0.0) -> None:
        A = torch.as_tensor(np.asarray(features, dtype=np.float64))
        y = np.asarray(labels, dtype=np.float64).reshape(-1)
        require(A.ndim == 2, "features", tuple(A.shape), "shape (N, d)")
        require(y.shape[0] == A.shape[0], "labels", y.shape, f"shape (N,) = ({A.shape[0]},)")
        vals = set(np.unique(y).tolist())
        require(vals <= {-1.0, 1.0} or vals <= {0.0, 1.0}, "labels", sorted(vals),
                "labels in {-1, +1} or in {0, 1}")
        if vals <= {0.0, 1.0}:
            y = 2.0 * y - 1.0
        require(reg >= 0, "reg", reg, "reg >= 0")
        self.A = A
        self.y = torch.from_numpy(y)
        self.reg = float(reg)
        self.n_data, self.dim = A.shape

    def _z(self, X, idx):
        return torch.einsum("nsd,nd->ns", self.A[idx], X) * self.y[idx]

    def grad(self, X, idx, w):
        """``(n, d)``: row i is ``sum_s w[i, s] grad l(X[i], row idx[i, s])`` for ``idx`` and ``w`` of
        shape ``(n, S)``, the regulariser's gradient weighted by ``sum_s w[i, s]``."""
        Ai, yi = self.A[idx], self.y[idx]
        z = torch.einsum("nsd,nd->ns", Ai, X) * yi
        coef = -w * yi * torch.sigmoid(-z)
        return torch.einsum("ns,nsd->nd", coef, Ai) + self.reg * X * w.sum(1, keepdim=True)

    def loss(self, X, idx, w):
        """``(n,)``: ``sum_s w[i, s] l(X[i], row idx[i, s])``, regulariser included."""
        z = self._z(X, idx)
        return (w * torch.nn.functional.softplus(-z)).sum(1) \
            + 0.5 * self.reg * (X * X).sum(1) * w.sum(1)

    def grad_dense(self, X: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """Row i: ``sum_r W[i, r] grad l(X[i], row r)`` over all N rows (one matmul pass)."""
        z = (X @ self.A.T) * self.y
        coef = -W * self.y * torch.sigmoid(-z)
        return coef @ self.A + self.reg * X * W.sum(1, keepdim=True)

    def loss_dense(self, X: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """``(n,)``: ``sum_r W[i, r] l(X[i], row r)`` over all N rows, ``W`` of shape ``(n, N)`` (one
        matmul pass; the dense twin of :meth:`loss`)."""
        z = (X @ self.A.T) * self.y
        return (W * torch.nn.functional.softplus(-z)).sum(1) \
            + 0.5 * self.reg * (X * X).sum(1) * W.sum(1)

    def data_gradient_bound(self, ord: float = 1) -> float:
        """``max_s ||a_s||_ord``: bound on the data term of ``||grad l||_ord`` (|b s(-z)| < 1).
        The regulariser adds ``reg ||theta||_ord``, unbounded without a bounded domain."""
        return float(torch.linalg.vector_norm(self.A, ord=ord, dim=1).max())

    def smoothness(self) -> float:
        """``lambda_max(A^T A / N) / 4 + reg``: a Lipschitz constant of the population gradient."""
        G = self.A.T @ self.A / self.n_data
        return float(torch.linalg.eigvalsh(G).max()) / 4 + self.reg


class LeastSquaresSamples(Movable):
    """``l(theta, (a, b)) = (1/2)(a^T theta - b)^2 + (reg/2) ||theta||^2``, with exact O(1)-in-t
    online gradients from the running sufficient statistics ``sum a a^T`` and ``sum a b``."""

    name = "least_squares"
    sufficient_statistics = True

    def __init__(self, features, targets, reg: float = 0.0) -> None:
        A = torch.as_tensor(np.asarray(features, dtype=np.float64))
        b = torch.as_tensor(np.asarray(targets, dtype=np.float64)).reshape(-1)
        require(A.ndim == 2, "features", tuple(A.shape), "shape (N, d)")
        require(b.shape[0] == A.shape[0], "targets", tuple(b.shape), f"shape ({A.shape[0]},)")
        require(reg >= 0, "reg", reg, "reg >= 0")
        self.A, self.b, self.reg = A, b, float(reg)
        self.n_data, self.dim = A.shape

    def grad(self, X, idx, w):
        """``(n, d)``: row i is ``sum_s w[i, s] grad l(X[i], row idx[i, s])`` for ``idx`` and ``w`` of
        shape ``(n, S)``, the regulariser's gradient weighted by ``sum_s w[i, s]``."""
        Ai = self.A[idx]
        r = torch.einsum("nsd,nd->ns", Ai, X) - self.b[idx]
        return torch.einsum("ns,nsd->nd", w * r, Ai) + self.reg * X * w.sum(1, keepdim=True)

    def loss(self, X, idx, w):
        """``(n,)``: ``sum_s w[i, s] l(X[i], row idx[i, s])``, regulariser included."""
        r = torch.einsum("nsd,nd->ns", self.A[idx], X) - self.b[idx]
        return 0.5 * (w * r * r).sum(1) + 0.5 * self.reg * (X * X).sum(1) * w.sum(1)

    def statistics(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sum_s a a^T, sum_s a b)`` over the rows ``idx`` (n, B) of each agent."""
        Ai = self.A[idx]
        return torch.einsum("nsd,nse->nde", Ai, Ai), torch.einsum("nsd,ns->nd", Ai, self.b[idx])

    def grad_from_statistics(self, X, S_aa, S_ab, count: int) -> torch.Tensor:
        """``(n, d)``: the gradient of the mean loss over ``count`` acquired samples from their sufficient
        statistics (:meth:`statistics`, summed), ``(S_aa[i] X[i] - S_ab[i]) / count + reg X[i]``, ``S_aa``
        of shape ``(n, d, d)`` and ``S_ab`` ``(n, d)``."""
        return (torch.einsum("nde,ne->nd", S_aa, X) - S_ab) / count + self.reg * X

    def smoothness(self) -> float:
        """``lambda_max(A^T A / N) + reg``: a Lipschitz constant of the population gradient over the whole
        dataset."""
        return float(torch.linalg.eigvalsh(self.A.T @ self.A / self.n_data).max()) + self.reg


class NeuralSamples(Movable):
    """A ``torch.nn.Module`` ``h(w; a)`` with cross-entropy per-sample losses over a dataset of
    raw inputs ``features`` (``transform`` maps a batch with any leading shape to the module's
    float input) and class ``labels``. The parameters are flattened into one float32 row per
    agent (``named_parameters()`` order); weighted gradients of all agents come from one
    ``vmap(grad(.))`` per chunk of ``chunk`` samples per agent (the weighted loss is linear in
    the samples, so chunking is exact). BatchNorm is refused (per-agent batch statistics would
    make the loss non-separable over samples)."""

    name = "neural"
    dtype = torch.float32

    def __init__(self, module: torch.nn.Module, features, labels, transform=None,
                 chunk: int = 256) -> None:
        require(not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                        for m in module.modules()), "module", type(module).__name__,
                "a module without BatchNorm layers")
        self.module = module.eval()
        self.features = torch.as_tensor(np.asarray(features))
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.int64).reshape(-1)
        require(self.features.shape[0] == self.labels.shape[0], "labels",
                tuple(self.labels.shape), f"one label per sample ({self.features.shape[0]})")
        self.transform = transform or (lambda x: x.to(torch.float32))
        self.chunk = positive_int("chunk", chunk)
        self._flat = FlatModule(self.module, self.dtype)
        self.dim = self._flat.dim
        self.n_data = int(self.labels.shape[0])
        self.x0 = self._flat.x0
        if self._flat.device != self.device:   # a module built on a device brings the data there
            self.device = self._flat.device
            self.features, self.labels = self.features.to(self.device), self.labels.to(self.device)
        self._bind()

    def _bind(self) -> None:
        """The vmap'd functions; they close over this object's module, so a moved copy binds
        its own."""
        from torch.func import grad, vmap

        exact = self._flat.in_float32
        self._wgrad = exact(vmap(grad(self._wloss), in_dims=(0, 0, 0, 0)))
        self._logits_agents = exact(vmap(self._logits, in_dims=(0, 0)))
        self._logits_shared = exact(vmap(self._logits, in_dims=(0, None)))

    def _move(self, device: torch.device, copy: bool = False) -> None:
        """Features, labels and initial row move; the module is copied to ``device`` and the
        vmap'd functions are rebuilt around the copy."""
        super()._move(device, copy)
        self._flat = FlatModule(self.module, self.dtype)
        self._bind()

    def unflatten(self, row: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parameter dict (views, by parameter name) of one flat parameter row, or of every row of a
        stack (leading axes kept)."""
        return self._flat.unflatten(row)

    def _logits(self, row, xb):
        return self._flat.logits(row, xb)

    def _wloss(self, row, xb, yb, wb):
        ce = torch.nn.functional.cross_entropy(self._logits(row, xb), yb, reduction="none")
        return (wb * ce).sum()

    def _chunks(self, idx: torch.Tensor, w: torch.Tensor):
        for s in range(0, idx.shape[1], self.chunk):
            wb = w[:, s:s + self.chunk].to(self.dtype)
            if bool((wb == 0).all()):
                continue                     # padding of the exact mode's distinct samples
            ib = idx[:, s:s + self.chunk]
            yield self.transform(self.features[ib]), self.labels[ib], wb

    def grad(self, X, idx, w):
        """``(n, d)`` float32: row i is ``sum_s w[i, s]`` times the cross-entropy gradient at ``X[i]`` of
        sample ``idx[i, s]``, by one ``vmap`` per chunk of ``chunk`` samples (a chunk whose weights are
        all 0 is skipped)."""
        X = X.to(self.dtype)
        out = torch.zeros_like(X)
        for xb, yb, wb in self._chunks(idx, w):
            out += self._wgrad(X, xb, yb, wb)
        return out

    def loss(self, X, idx, w):
        """``(n,)`` float64: ``sum_s w[i, s]`` times the cross-entropy of sample ``idx[i, s]`` under the
        parameters ``X[i]`` (evaluated without autograd)."""
        X = X.to(self.dtype)
        total = torch.zeros(X.shape[0], dtype=torch.float64, device=X.device)
        with torch.no_grad():
            for xb, yb, wb in self._chunks(idx, w):
                logits = self._logits_agents(X, xb)
                ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten(),
                                                       reduction="none").reshape(yb.shape)
                total += (wb * ce).sum(1).double()
        return total

    def evaluate(self, W: torch.Tensor, features, labels,
                 batch: int = 500) -> dict[str, np.ndarray]:
        """Loss and accuracy of every parameter row of ``W`` (``(r, d)``) on a labelled set
        (host arrays or tensors anywhere: each batch is moved to the model's device; the arrays
        come back on the host)."""
        W = torch.as_tensor(W).to(self.device, self.dtype)
        fx, fy = _as_tensor(features), _as_tensor(labels)
        loss = torch.zeros(W.shape[0], dtype=torch.float64, device=self.device)
        correct = torch.zeros(W.shape[0], dtype=torch.float64, device=self.device)
        with torch.no_grad():
            for s in range(0, fy.shape[0], batch):
                xb = self.transform(fx[s:s + batch].to(self.device))
                yb = fy[s:s + batch].to(self.device, torch.int64)
                logits = self._logits_shared(W, xb)
                ce = torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1), yb.repeat(W.shape[0]), reduction="none")
                loss += ce.reshape(W.shape[0], -1).sum(1).double()
                correct += (logits.argmax(-1) == yb).sum(1).double()
        n = fy.shape[0]
        return {"loss": (loss / n).cpu().numpy(), "accuracy": (correct / n).cpu().numpy()}


def _as_tensor(a) -> torch.Tensor:
    """A tensor stays where it is (no round trip through the host); anything else via NumPy."""
    return a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a))


# ---- the online problem --------------------------------------------------------------------------

@dataclass
class _Memory:
    """What the local agents have acquired up to iteration ``t`` (one run's stream)."""

    t: int = -1
    counts: torch.Tensor | None = None           # (n, P) multiplicities over pool positions
    order: torch.Tensor | None = None            # (n, P) distinct positions, first-seen order
    n_seen: torch.Tensor | None = None           # (n,) number of distinct positions acquired
    batches: list[torch.Tensor] = field(default_factory=list)   # window: last batches (n, B)
    S_aa: torch.Tensor | None = None
    S_ab: torch.Tensor | None = None
    cache_sum: torch.Tensor | None = None         # cached: sum of batch gradients G_k, k < grad_t
    last_grad: torch.Tensor | None = None         # cached: G_{grad_t}, the latest batch gradient
    grad_t: int = -1


class OnlineProblem(Problem):
    """Streaming version of a sample model over n agents (see the module docstring).

    ``pools``: ``None`` (every agent draws from the whole dataset), an ``(n, P)`` integer array of
    dataset rows per agent, or n row arrays of any lengths (a
    :class:`~dpnet.partitions.Partition`: agent i streams from its own ``P_i`` rows, and its
    population objective is the mean over them). ``batch``:
    samples acquired per agent per iteration. ``mode``: ``"exact"``, ``"window"`` (needs
    ``window`` batches) or ``"cached"``. ``population_subset=s``: the population objective
    (``grad``, ``local_loss``, ``loss``) is *estimated* on a fixed, evenly spaced subset of s rows
    of each pool (for models whose full-pool passes are too expensive for every metric)."""

    name = "online"

    def __init__(self, model: SampleModel, n_agents: int, batch: int = 1, pools=None,
                 mode: str = "exact", window: int | None = None, name: str | None = None,
                 population_subset: int | None = None) -> None:
        self.model = model
        self.n_agents = positive_int("n_agents", n_agents)
        self.batch = positive_int("batch", batch)
        require(mode in MODES, "mode", mode, f"one of {MODES}")
        self.mode = mode
        if mode == "window":
            require(window is not None, "window", window,
                    "a number of batches >= 1 for mode='window'")
            self.window: int | None = positive_int("window", window)
        else:
            require(window is None, "window", window, "only with mode='window'")
            self.window = None
        self.dim = int(model.dim)
        self.pool_sizes = None
        if pools is None:
            self.shared = True
            self.pools = torch.arange(model.n_data).reshape(1, -1).expand(self.n_agents, -1)
        else:
            rows, sizes = padded_index_rows(pools)
            P = torch.from_numpy(rows)
            require(P.shape[0] == self.n_agents, "pools", tuple(P.shape),
                    f"one pool per agent (n_agents={self.n_agents})")
            # unequal pools: agent i's first P_i columns, the rest padding never drawn
            self.pool_sizes = None if bool(np.all(sizes == sizes[0])) else sizes
            require(bool(((P >= 0) & (P < model.n_data)).all()), "pools", "row indices",
                    f"every index in [0, {model.n_data})")
            self.shared = bool((P == P[:1]).all())
            self.pools = P
        self.pool_size = self.pools.shape[1]
        self.dtype = getattr(model, "dtype", torch.float64)
        self.population_subset = None
        if population_subset is not None and positive_int("population_subset",
                                                          population_subset) < self.pool_size:
            self.population_subset = int(population_subset)
        if name is not None:
            self.name = name
        self._mem: dict[tuple, _Memory] = {}
        self._opt: torch.Tensor | None = None

    # -- the stream ---------------------------------------------------------------------------
    def sample_positions(self, rng: Streams, t: int, agents: np.ndarray,
                         purpose: str = "sample") -> torch.Tensor:
        """``(len(agents), batch)`` pool positions of the batch acquired at iteration t."""
        u = rng.uniform(purpose, t, agents, self.batch)
        size = self.pool_size if self.pool_sizes is None else self.pool_sizes[agents][:, None]
        pos = np.minimum((u * size).astype(np.int64), np.asarray(size) - 1)
        return torch.from_numpy(pos).to(self.device)

    def sample_rows(self, rng: Streams, t: int, agents: np.ndarray,
                    purpose: str = "sample") -> torch.Tensor:
        """Dataset rows of the batch acquired at iteration t, ``(len(agents), batch)``."""
        pos = self.sample_positions(rng, t, agents, purpose)
        return torch.gather(self._pools(agents), 1, pos)

    def _pools(self, agents: np.ndarray) -> torch.Tensor:
        """``(len(agents), P)`` pool rows of ``agents`` (host indices) on the device."""
        return self.pools[self._index(agents)]

    def _memory(self, rng: Streams, t: int, agents: np.ndarray, purpose: str) -> _Memory:
        key = (rng.seed, purpose, tuple(int(a) for a in agents))
        mem = self._mem.get(key)
        if mem is None or t < mem.t or (self.mode == "cached" and t == 0):
            if mem is not None and self.mode == "cached" and 0 < t <= mem.t:
                raise ParameterError("iteration", t, f"cached mode continues its run (last "
                                     f"iteration {mem.t}) or restarts at 0")
            mem = _Memory()
            self._mem = {key: mem}            # one stream at a time: bounded memory
        n = len(agents)
        while mem.t < t:
            s = mem.t + 1
            if self.mode == "cached":
                require(s == t, "iteration", t, f"cached mode visits every iteration in order "
                        f"(next is {s})")
                mem.t = s
                continue
            pos = self.sample_positions(rng, s, agents, purpose)
            if self.mode == "exact":
                if getattr(self.model, "sufficient_statistics", False):
                    rows = torch.gather(self._pools(agents), 1, pos)
                    aa, ab = cast(Any, self.model).statistics(rows)   # sufficient_statistics
                    mem.S_aa = aa if mem.S_aa is None else mem.S_aa + aa
                    mem.S_ab = ab if mem.S_ab is None else mem.S_ab + ab
                else:
                    if mem.counts is None:
                        mem.counts = self._zeros((n, self.pool_size), torch.float64)
                        mem.order = self._zeros((n, self.pool_size), torch.int64)
                        mem.n_seen = self._zeros((n,), torch.int64)
                    assert mem.order is not None and mem.n_seen is not None   # set with counts
                    rows = torch.arange(n, device=self.device)
                    for b in range(self.batch):   # one column at a time: repeats within a batch
                        col = pos[:, b]
                        new = mem.counts[rows, col] == 0
                        mem.order[rows[new], mem.n_seen[new]] = col[new]
                        mem.n_seen += new.to(torch.int64)
                        mem.counts[rows, col] += 1.0
            elif self.mode == "window":
                mem.batches.append(pos)
                assert self.window is not None          # mode 'window' sets it
                if len(mem.batches) > self.window:
                    mem.batches.pop(0)
            mem.t = s
        return mem

    # -- the online gradient ------------------------------------------------------------------
    def stochastic_grad(self, X, rng: Streams, k, batch_size=None, agents=None, purpose="sample"):
        """``grad f_k^i(X_i)``: the gradient at X over the data acquired at iterations 0..k (mode
        ``"exact"``), or its windowed / cached approximation. ``batch_size``, when given, must
        equal the stream's ``batch`` (the stream fixes it)."""
        require(batch_size is None or int(batch_size) == self.batch, "batch_size", batch_size,
                f"None or the stream's batch = {self.batch} (an online problem fixes the batch)")
        a = self._agents(agents)
        t = int(k)
        require(t >= 0, "iteration", t, ">= 0")
        mem = self._memory(rng, t, a, purpose)
        pools = self._pools(a)
        if self.mode == "exact":
            if mem.S_aa is not None:
                # S_aa is only kept for a model with sufficient_statistics
                return cast(Any, self.model).grad_from_statistics(X, mem.S_aa, mem.S_ab,
                                                                  (t + 1) * self.batch)
            return self._exact_grad(X, pools, mem, 1.0 / ((t + 1) * self.batch))
        if self.mode == "window":
            pos = torch.cat(mem.batches, dim=1)
            rows = torch.gather(pools, 1, pos)
            return self.model.grad(X, rows, self._full(rows.shape, 1.0 / rows.shape[1]))
        # cached: this iteration's batch at the current iterate, earlier ones as stored
        rows = torch.gather(pools, 1, self.sample_positions(rng, t, a, purpose))
        g = self.model.grad(X, rows, self._full(rows.shape, 1.0 / self.batch))
        if mem.last_grad is not None and mem.grad_t == t - 1:
            prev = mem.last_grad
            mem.cache_sum = prev if mem.cache_sum is None else mem.cache_sum + prev
        mem.last_grad, mem.grad_t = g, t      # a repeated call at t replaces G_t
        total = g if mem.cache_sum is None else mem.cache_sum + g
        return total / (t + 1)

    def _exact_grad(self, X: torch.Tensor, pools: torch.Tensor, mem: _Memory,
                    scale: float) -> torch.Tensor:
        """Exact gradient over the acquired multiset: each distinct acquired sample evaluated once
        with weight ``multiplicity * scale``, or one dense pass for a linear model on a shared
        pool once that is cheaper."""
        # exact mode without sufficient statistics: _memory acquired at least iteration 0
        assert mem.counts is not None and mem.order is not None and mem.n_seen is not None
        U = int(mem.n_seen.max())
        if self.shared and hasattr(self.model, "grad_dense") and 16 * U >= self.pool_size:
            dense = self._zeros((X.shape[0], self.model.n_data), torch.float64)
            dense[:, self.pools[0]] = mem.counts * scale
            return self.model.grad_dense(X, dense)
        order = mem.order[:, :U]
        valid = torch.arange(U, device=self.device)[None, :] < mem.n_seen[:, None]
        w = torch.where(valid, torch.gather(mem.counts, 1, order) * scale, 0.0)
        return self.model.grad(X, torch.gather(pools, 1, order), w)

    def _move(self, device: torch.device, copy: bool = False) -> None:
        """Pools and sample model move; a shared pool stays one expanded row (not n copies of
        it); the copy starts with no acquired data (the memory belongs to the original's run)."""
        shape = self.pools.shape
        if self.shared:
            self.pools = self.pools[:1]
        self._mem = {}
        super()._move(device, copy)
        if self.shared:
            self.pools = self.pools.expand(shape)

    def acquired_counts(self, rng: Streams, t: int, agents=None,
                        purpose: str = "sample") -> np.ndarray:
        """``(n, P)`` multiplicities of the pool positions acquired at iterations 0..t."""
        a = self._agents(agents)
        C = np.zeros((len(a), self.pool_size))
        for s in range(t + 1):
            pos = self.sample_positions(rng, s, a, purpose).cpu().numpy()
            for r in range(self.batch):
                np.add.at(C, (np.arange(len(a)), pos[:, r]), 1.0)
        return C

    # -- population objectives (the paper's f_i = E l(., xi^i)) -------------------------------
    def _uniform(self, a: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self._pools(a)
        if self.pool_sizes is not None:     # agent i's own P_i rows, each of weight 1/P_i
            return self._uniform_unequal(rows, self.pool_sizes[a])
        if self.population_subset is not None:
            sel = torch.linspace(0, self.pool_size - 1, self.population_subset,
                                 device=self.device).round().long()
            rows = rows[:, sel]
        return rows, self._full(rows.shape, 1.0 / rows.shape[1])

    def _uniform_unequal(self, rows: torch.Tensor, sizes: np.ndarray
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        P = torch.as_tensor(sizes, device=self.device)[:, None]
        if self.population_subset is not None:    # evenly spaced over each agent's own pool
            s = min(self.population_subset, int(sizes.min()))
            pos = (torch.linspace(0, 1, s, device=self.device, dtype=torch.float64)[None, :]
                   * (P - 1)).round().long()
            return torch.gather(rows, 1, pos), self._full(pos.shape, 1.0 / s)
        cols = torch.arange(rows.shape[1], device=self.device)[None, :]
        return rows, (cols < P).double() / P.double()

    def _zeros(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def _full(self, shape, value: float) -> torch.Tensor:
        """Sample weights: float64 on the device."""
        return torch.full(tuple(shape), value, dtype=torch.float64, device=self.device)

    def _dense_ok(self, what: str) -> bool:
        return self.shared and self.population_subset is None and hasattr(self.model, what)

    def grad(self, X, agents=None):
        a = self._agents(agents)
        if self._dense_ok("grad_dense"):
            W = self._zeros((len(a), self.model.n_data), torch.float64)
            W[:, self.pools[0]] = 1.0 / self.pool_size
            return self.model.grad_dense(X, W)
        rows, w = self._uniform(a)
        return self.model.grad(X, rows, w)

    def local_loss(self, X, agents=None):
        a = self._agents(agents)
        if self._dense_ok("loss_dense"):
            W = self._zeros((len(a), self.model.n_data), torch.float64)
            W[:, self.pools[0]] = 1.0 / self.pool_size
            return self.model.loss_dense(X, W)
        rows, w = self._uniform(a)
        return self.model.loss(X, rows, w)

    def loss(self, x):
        X = self._point(x, self.dtype)
        if self.shared:   # every f_i is the same: evaluate once
            return float(self.local_loss(X, np.zeros(1, dtype=np.int64))[0])
        return float(self.local_loss(X.expand(self.n_agents, -1)).mean())

    def global_grad(self, x):
        X = self._point(x, self.dtype)
        if self.shared:
            return self.grad(X, np.zeros(1, dtype=np.int64))[0]
        return self.grad(X.expand(self.n_agents, -1)).mean(0)

    def check_x(self, X, name: str = "x0"):
        out = super().check_x(X, name)
        return out.to(self.dtype)

    def default_x0(self, seed: int = 0):
        """The model's own initial parameters for every agent when it has them (neural
        networks), else the papers' ``U[0, 1]^d`` start."""
        x0 = getattr(self.model, "x0", None)
        if x0 is not None:
            return x0.reshape(1, -1).repeat(self.n_agents, 1)
        return super().default_x0(seed)

    @property
    def smoothness(self) -> float:
        fn = getattr(self.model, "smoothness", None)
        return float(fn()) if callable(fn) else float("inf")

    def optimum(self):
        """Minimiser of the population objective F by a noise-free centralised solver (L-BFGS)."""
        if self._opt is None:
            self._opt = minimize_global(self)
        return self._opt

    def describe(self) -> dict[str, Any]:
        """:meth:`Problem.describe <dpnet.problems.base.Problem.describe>` plus the sample ``model``'s
        name, ``population_subset``, ``batch``, whether the ``pool`` is shared or per agent, the
        ``pool_size``, the ``mode`` and the ``window``."""
        model = getattr(self.model, "name", type(self.model).__name__)
        return {**super().describe(), "model": model, "population_subset": self.population_subset,
                "batch": self.batch, "pool": "shared" if self.shared else "per agent",
                "pool_size": self.pool_size, "mode": self.mode, "window": self.window}


def all_data_grad(ctx, X: torch.Tensor, k: int) -> torch.Tensor:
    """The gradient "over all data acquired so far" at iteration k: the online gradient on an
    :class:`OnlineProblem`, the full local gradient on a static problem (where all data is
    available from the start)."""
    p = ctx.problem
    if isinstance(p, OnlineProblem):
        return p.stochastic_grad(X, ctx.rng, k, None, ctx.agents)
    return ctx.grad(X)
