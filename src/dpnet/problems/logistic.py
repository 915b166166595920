"""Finite-sum l2-regularised logistic regression over data partitioned across agents.

The papers' regularisers are all ``(r/2)||x||^2``: paper 001 (Huo et al.) uses ``r = 1/q`` with q
the local sample count (``reg="1/m"``), paper 002 (Chen & Wang) an ``r`` "inversely proportional
to N^i" (again ``reg="1/m"`` or a number)."""

from __future__ import annotations

import numpy as np
import torch

from ..data import split_by_label, split_even
from ..errors import positive_int, require
from ..rng import Streams
from .base import Problem, check_agent_indices, logistic_curvature, minimize_global
from .stochastic import Clip, as_clip, sample_indices


class LogisticRegression(Problem):
    """``f_i(x) = (1/m) sum_j log(1 + exp(-b_ij a_ij^T x)) + (reg/2) ||x||^2``.

    ``features``: ``(n, m, d)`` (agent i holds ``m`` samples), ``labels``: ``(n, m)`` in {-1, +1}.
    Full gradients use every local sample; :meth:`stochastic_grad` draws ``batch_size`` distinct
    local samples per agent and iteration from that agent's own stream and can clip each
    per-sample gradient ``grad l(x, zeta) = -sigmoid(-b a^T x) b a + reg x`` (the regulariser is
    part of every sample's loss, as in paper 001's ``l_i``). ``reg="1/m"`` gives ``1/m``."""

    name = "logistic_regression"
    supports_clip = True

    def __init__(self, features, labels, reg: float | str = 0.0,
                 convention: str = "average") -> None:
        A = torch.as_tensor(np.asarray(features), dtype=torch.float64)
        b = torch.as_tensor(np.asarray(labels), dtype=torch.float64)
        require(A.ndim == 3, "features", tuple(A.shape), "shape (n_agents, samples, dim)")
        require(tuple(b.shape) == tuple(A.shape[:2]), "labels", tuple(b.shape),
                f"shape (n_agents, samples) = {tuple(A.shape[:2])}")
        require(bool(torch.all(b.abs() == 1)), "labels", "values", "every label is -1 or +1")
        if isinstance(reg, str):
            require(reg == "1/m", "reg", reg, "a number >= 0 or '1/m'")
            reg = 1.0 / A.shape[1]
        require(reg >= 0, "reg", reg, "reg >= 0")
        require(convention in ("average", "sum"), "convention", convention, "'average' or 'sum'")
        self.A, self.b = A, b
        self.BA = b[:, :, None] * A
        self.reg = float(reg)
        self.n_agents, self.m, self.dim = A.shape
        self.convention = convention
        self._L: float | None = None
        self._opt: torch.Tensor | None = None

    @classmethod
    def partition(cls, X: np.ndarray, y: np.ndarray, n_agents: int, seed: int = 0,
                  reg: float | str = 0.0, shuffle: bool = True,
                  how: str = "even", agents=None) -> LogisticRegression:
        """Split a dataset ``(N, d)`` (dense or scipy sparse), labels in {-1, +1} (or {0, 1}),
        over agents: ``how="even"`` evenly at random (the last ``N mod n`` samples of the shuffled
        order are dropped), ``"label"`` by label (:func:`dpnet.data.split_by_label`).
        ``agents``: hold only these agents' samples (one rank of a distributed run; the split
        is the same on every rank, drawn from ``seed``)."""
        n = positive_int("n_agents", n_agents)
        X = X.toarray() if hasattr(X, "toarray") else X
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        y = np.where(y > 0, 1.0, -1.0)
        if how == "label":
            idx = split_by_label(y, n, seed=seed)
        else:
            require(how == "even", "how", how, "'even' or 'label'")
            require(len(y) // n >= 1, "n_agents", n,
                    f"at most {len(y)} agents for {len(y)} samples")
            idx = split_even(len(y), n, seed, shuffle)
        if agents is None:
            return cls(X[idx], y[idx], reg=reg)
        return cls._holding(X, y, idx, reg, agents)

    @classmethod
    def _holding(cls, X, y, idx, reg, agents) -> LogisticRegression:
        """Only ``agents``' rows of the partition ``idx``, with the global smoothness computed a
        block of agents at a time (never the whole ``(n, m, d)`` tensor at once)."""
        n = idx.shape[0]
        a = check_agent_indices(agents, n)
        out = cls(X[idx[a]], y[idx[a]], reg=reg)
        curv = max(logistic_curvature(torch.as_tensor(X[idx[block]]))
                   for block in np.array_split(np.arange(n), max(1, n // 64)))
        out._L = curv + out.reg
        out.n_agents, out.held = n, a
        out._frozen = {"smoothness": out._L, "gradient_bound": None, "optimum": None}
        return out

    def records_per_agent(self) -> int:
        return self.m

    def _data(self, agents):
        return self._rows(self.BA, agents)

    def _keep(self, slots):
        s = self._index(slots)
        self.A, self.b, self.BA = self.A[s], self.b[s], self.BA[s]

    def _grad_on(self, BA: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        z = torch.einsum("nmd,nd->nm", BA, X)
        s = torch.sigmoid(-z)
        return -torch.einsum("nm,nmd->nd", s, BA) / BA.shape[1] + self.reg * X

    def grad(self, X, agents=None):
        return self._grad_on(self._data(agents), X)

    def stochastic_grad(self, X, rng: Streams, k, batch_size, agents=None, purpose="sample",
                        clip: Clip | float | None = None):
        a = self._agents(agents)
        B = positive_int("batch_size", batch_size)
        require(B <= self.m, "batch_size", B, f"batch_size <= local samples m = {self.m}")
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
        return sample_indices(rng, k, agents, self.m, batch_size, purpose, device=self.device)

    def loss_and_grad(self, x):
        """One pass over every agent's data at a single point (a logged metrics row):
        ``z = b a^T x`` serves the loss and the gradient."""
        self._require_all("the global objective")
        x = self._point(x).reshape(-1)
        z = torch.einsum("nmd,d->nm", self.BA, x)
        scale = self._scale()
        ridge = 0.5 * self.reg * float(x @ x)
        loss = (float(torch.nn.functional.softplus(-z).mean(dim=1).sum())
                + self.n_agents * ridge) * scale
        s = torch.sigmoid(-z).mul_(-1.0 / self.m)
        # one matvec over all records (einsum "nm,nmd->d" took 8x longer at 8e6 records)
        g = s.reshape(-1) @ self.BA.reshape(-1, self.dim) + self.n_agents * self.reg * x
        return loss, g * scale

    def local_loss(self, X, agents=None):
        BA = self._data(agents)
        z = torch.einsum("nmd,nd->nm", BA, X)
        return torch.nn.functional.softplus(-z).mean(1) + 0.5 * self.reg * (X * X).sum(1)

    @property
    def smoothness(self) -> float:
        if self._L is None:
            self._L = logistic_curvature(self.A) + self.reg
        return self._L

    def optimum(self):
        if self._opt is None and self.held is not None:
            return None  # a subset of the data cannot find it; restrict() keeps one computed before
        if self._opt is None:
            self._opt = minimize_global(self)
        return self._opt

    def describe(self):
        return {**super().describe(), "samples_per_agent": self.m, "reg": self.reg}
