"""Finite-sum l2-regularised logistic regression over data partitioned across agents.

The papers' regularisers are all ``(r/2)||x||^2``: paper 001 (Huo et al.) uses ``r = 1/q`` with q
the local sample count (``reg="1/m"``), paper 002 (Chen & Wang) an ``r`` "inversely proportional
to N^i" (again ``reg="1/m"`` or a number)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import positive_int, require
from ..partitions import partition
from ..rng import Streams
from .base import Problem, check_agent_indices, logistic_curvature, minimize_global
from .stochastic import Clip, LocalRecords, as_clip, sample_indices, stack_parts


class LogisticRegression(LocalRecords, Problem):
    """``f_i(x) = (1/m_i) sum_j log(1 + exp(-b_ij a_ij^T x)) + (reg/2) ||x||^2``.

    ``features``: ``(n, m, d)`` (agent i holds ``m`` samples), ``labels``: ``(n, m)`` in {-1, +1};
    ``sizes``: optional ``(n,)`` local sizes ``m_i <= m``, agent i's records being its first
    ``m_i`` rows (the rest is padding and is never read; :meth:`from_parts` builds it from a
    dataset and a :class:`~dpnet.partitions.Partition`). Full gradients use every local sample;
    :meth:`stochastic_grad` draws ``batch_size`` distinct local samples per agent and iteration
    from that agent's own stream and can clip each per-sample gradient
    ``grad l(x, zeta) = -sigmoid(-b a^T x) b a + reg x`` (the regulariser is part of every
    sample's loss, as in paper 001's ``l_i``). ``reg="1/m"`` gives ``1/m``."""

    name = "logistic_regression"
    supports_clip = True

    def __init__(self, features, labels, reg: float | str = 0.0,
                 convention: str = "average", sizes=None) -> None:
        A = torch.as_tensor(np.asarray(features), dtype=torch.float64)
        b = torch.as_tensor(np.asarray(labels), dtype=torch.float64)
        require(A.ndim == 3, "features", tuple(A.shape), "shape (n_agents, samples, dim)")
        require(tuple(b.shape) == tuple(A.shape[:2]), "labels", tuple(b.shape),
                f"shape (n_agents, samples) = {tuple(A.shape[:2])}")
        self._set_sizes(sizes, A.shape[0], A.shape[1])
        A, b = self._clean_padding(A, b)
        require(bool(torch.all(b.abs() == 1)), "labels", "values", "every label is -1 or +1")
        if isinstance(reg, str):
            require(reg == "1/m", "reg", reg, "a number >= 0 or '1/m'")
            require(self.m is not None, "reg", reg, "a number with unequal local sizes "
                    f"{self.sizes.tolist()} ('1/m' is paper 001's one regulariser for one m)")
            reg = 1.0 / int(A.shape[1])
        require(reg >= 0, "reg", reg, "reg >= 0")
        require(convention in ("average", "sum"), "convention", convention, "'average' or 'sum'")
        self.A, self.b = A, b
        self.BA = b[:, :, None] * A
        self.reg = float(reg)
        self.n_agents, _, self.dim = A.shape
        self.convention = convention
        self._L: float | None = None
        self._opt: torch.Tensor | None = None

    @classmethod
    def partition(cls, X: np.ndarray, y: np.ndarray, n_agents: int, seed: int = 0,
                  reg: float | str = 0.0, how: str = "even", agents=None,
                  **params) -> LogisticRegression:
        """Split a dataset ``(N, d)`` (dense or scipy sparse), labels in {-1, +1} (or {0, 1}),
        over agents by the partitioner ``how`` of :mod:`dpnet.partitions` (``params``: its
        parameters): ``"even"`` evenly at random (the last ``N mod n`` samples of the shuffled
        order are dropped), ``"label"`` by label, ``"dirichlet"``, ``"quantity_skew"``, ...
        (unequal local sizes). ``agents``: hold only these agents' samples (one rank of a
        distributed run; the split is the same on every rank, drawn from ``seed``)."""
        n = positive_int("n_agents", n_agents)
        y = np.where(np.asarray(y, dtype=np.float64) > 0, 1.0, -1.0)
        return cls.from_parts(X, y, partition(y, n, how=how, seed=seed, **params), reg=reg,
                              agents=agents)

    @classmethod
    def from_parts(cls, X, y, parts, reg: float | str = 0.0,
                   agents=None) -> LogisticRegression:
        """Agent i holds the records ``parts[i]`` of ``(X, y)`` (a
        :class:`~dpnet.partitions.Partition`, index arrays of any lengths, or ``(n, m)``)."""
        X = X.toarray() if hasattr(X, "toarray") else X
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        y = np.where(y > 0, 1.0, -1.0)
        sizes, (A, b) = stack_parts(parts, X, y)
        if agents is None:
            return cls(A, b, reg=reg, sizes=sizes)
        return cls._holding(A, b, sizes, reg, agents)

    @classmethod
    def _holding(cls, A, b, sizes, reg, agents) -> LogisticRegression:
        """Only ``agents``' rows of the stacked partition, with the global smoothness computed a
        block of agents at a time (never the whole ``(n, m, d)`` tensor at once)."""
        n = A.shape[0]
        a = check_agent_indices(agents, n)
        require(not isinstance(reg, str) or bool(np.all(sizes == sizes[0])), "reg", reg,
                f"a number with unequal local sizes {sizes.tolist()}")
        width = int(sizes[a].max())
        out = cls(A[a][:, :width], b[a][:, :width], reg=reg, sizes=sizes[a])
        curv = max(logistic_curvature(torch.as_tensor(A[block]), sizes[block])
                   for block in np.array_split(np.arange(n), max(1, n // 64)))
        out._L = curv + out.reg
        out.n_agents, out.held, out.sizes = n, a, sizes
        out._frozen = {"smoothness": out._L, "gradient_bound": None, "optimum": None}
        return out

    def _data(self, agents):
        return self._rows(self.BA, agents)

    def _keep(self, slots):
        s = self._index(slots)
        self.A, self.b, self.BA = self.A[s], self.b[s], self.BA[s]
        self._keep_sizes(slots)

    def _grad_on(self, BA: torch.Tensor, X: torch.Tensor, weights=None) -> torch.Tensor:
        """The mean over BA's rows (``weights``: per-row weights, 1/m_i and 0 on padding)."""
        z = torch.einsum("nmd,nd->nm", BA, X)
        s = torch.sigmoid(-z)
        if weights is None or isinstance(weights, float):
            return -torch.einsum("nm,nmd->nd", s, BA) / BA.shape[1] + self.reg * X
        return -torch.einsum("nm,nmd->nd", s * weights, BA) + self.reg * X

    def grad(self, X, agents=None):
        return self._grad_on(self._data(agents), X, self._record_weights(agents))

    def stochastic_grad(self, X, rng: Streams, k, batch_size, agents=None, purpose="sample",
                        clip: Clip | float | None = None):
        a = self._agents(agents)
        B = positive_int("batch_size", batch_size)
        low = int(self.sizes[a].min())
        require(B <= low, "batch_size", B, f"batch_size <= the smallest local size m_i = {low}")
        idx = self.sample_indices(rng, k, a, B, purpose)
        # index the B rows directly: self.BA[a] would copy every local sample of every agent
        BA = self.BA[self._index(self._slot(a))[:, None], idx]
        clip = as_clip(clip)
        if clip is None:
            return self._grad_on(BA, X)
        return clip.apply(self.per_sample_grads(BA, X)).mean(dim=1)

    def per_sample_grads_at(self, X: torch.Tensor, idx: torch.Tensor, agents=None) -> torch.Tensor:
        """``(n, B, d)`` per-sample gradients of the local records ``idx`` (unclipped)."""
        a = self._agents(agents)
        return self.per_sample_grads(self.BA[self._index(self._slot(a))[:, None], idx], X)

    def per_sample_grads(self, BA: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """``(n, B, d)``: ``grad l(x_i, zeta) = -sigmoid(-b a^T x_i) b a + reg x_i`` for the
        samples ``b a`` in BA."""
        s = torch.sigmoid(-torch.einsum("nbd,nd->nb", BA, X))
        return -s[:, :, None] * BA + self.reg * X[:, None, :]

    def sample_indices(self, rng: Streams, k: int, agents: np.ndarray, batch_size: int,
                       purpose: str = "sample") -> torch.Tensor:
        """``(len(agents), batch_size)`` distinct local sample indices per agent, on this
        problem's device (drawn on the host by the run's streams)."""
        return sample_indices(rng, k, agents, self.sizes[np.asarray(agents)], batch_size, purpose,
                              device=self.device)

    def loss_and_grad(self, x):
        """One pass over every agent's data at a single point (a logged metrics row):
        ``z = b a^T x`` serves the loss and the gradient."""
        self._require_all("the global objective")
        x = self._point(x).reshape(-1)
        z = torch.einsum("nmd,d->nm", self.BA, x)
        scale = self._scale()
        ridge = 0.5 * self.reg * float(x @ x)
        loss = (float(self._record_mean(torch.nn.functional.softplus(-z)).sum())
                + self.n_agents * ridge) * scale
        s = torch.sigmoid(-z).mul_(-self._record_weights())
        # one matvec over all records (einsum "nm,nmd->d" took 8x longer at 8e6 records)
        g = s.reshape(-1) @ self.BA.reshape(-1, self.dim) + self.n_agents * self.reg * x
        return loss, g * scale

    def local_loss(self, X, agents=None):
        BA = self._data(agents)
        z = torch.einsum("nmd,nd->nm", BA, X)
        return (self._record_mean(torch.nn.functional.softplus(-z), agents)
                + 0.5 * self.reg * (X * X).sum(1))

    @property
    def smoothness(self) -> float:
        if self._L is None:
            self._L = logistic_curvature(self.A, self.sizes) + self.reg
        return self._L

    def optimum(self):
        if self._opt is None and self.held is not None:
            return None  # a subset of the data cannot find it; restrict() keeps one computed before
        if self._opt is None:
            self._opt = minimize_global(self)
        return self._opt

    def describe(self):
        """:meth:`Problem.describe <dpnet.problems.base.Problem.describe>` plus the records per agent
        (``samples_per_agent``: m, or the list of the ``m_i``) and the regulariser ``reg``."""
        return {**super().describe(), "samples_per_agent": self._sizes_text(), "reg": self.reg}
