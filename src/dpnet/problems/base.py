"""The stacked-gradient problem protocol.

A problem holds the local objectives ``f_1..f_n`` of all agents. Its central method is
``grad(X)``: row i of the result is ``grad f_i(x_i)`` for row i of X, computed for all agents in a
few tensor operations. The global objective follows ``convention``: ``"average"``
``f = (1/n) sum_i f_i`` (papers 000-003) or ``"sum"`` ``f = sum_i f_i`` (paper 004).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch

from ..errors import ParameterError, require
from ..rng import Streams


class Problem(ABC):
    """Local objectives of n agents over R^d."""

    n_agents: int
    dim: int
    convention: str = "average"
    name: str = "problem"

    # -- required ---------------------------------------------------------------------------
    @abstractmethod
    def grad(self, X: torch.Tensor, agents: np.ndarray | None = None) -> torch.Tensor:
        """``(len(agents), d)``: row r is ``grad f_{agents[r]}(X[r])`` (all agents by default)."""

    @abstractmethod
    def local_loss(self, X: torch.Tensor, agents: np.ndarray | None = None) -> torch.Tensor:
        """``(len(agents),)``: ``f_{agents[r]}(X[r])``."""

    # -- optional refinements -------------------------------------------------------------------
    @property
    def smoothness(self) -> float:
        """A Lipschitz constant of every ``grad f_i`` (``inf`` if none exists globally)."""
        return float("inf")

    def gradient_bound(self) -> float | None:
        """``M >= sup_x max_i ||grad f_i(x)||_2`` where one exists (paper 000's Assumption 7)."""
        return None

    def optimum(self) -> torch.Tensor | None:
        """A minimiser (or the stationary point) of the global objective, when known."""
        return None

    def stochastic_grad(self, X: torch.Tensor, rng: Streams, k: int, batch_size: int,
                        agents: np.ndarray | None = None, purpose: str = "sample") -> torch.Tensor:
        """Minibatch gradient; problems without samples return the exact gradient."""
        return self.grad(X, agents)

    # -- derived ----------------------------------------------------------------------------
    def _agents(self, agents: np.ndarray | None) -> np.ndarray:
        return np.arange(self.n_agents) if agents is None else np.asarray(agents, dtype=np.int64)

    def _rows(self, T: torch.Tensor, agents: np.ndarray | None) -> torch.Tensor:
        """The rows of per-agent data ``T`` that belong to ``agents``. All agents in order (every
        gradient call of the simulated network) returns T itself: indexing would copy the whole
        dataset on each call."""
        a = self._agents(agents)
        if len(a) == self.n_agents and np.array_equal(a, np.arange(self.n_agents)):
            return T
        return T[torch.from_numpy(a)]

    def _scale(self) -> float:
        return 1.0 / self.n_agents if self.convention == "average" else 1.0

    def loss(self, x: torch.Tensor) -> float:
        """Global objective at one point x (shape (d,))."""
        X = torch.as_tensor(x, dtype=torch.float64).reshape(1, -1).expand(self.n_agents, -1)
        return float(self.local_loss(X).sum()) * self._scale()

    def global_grad(self, x: torch.Tensor) -> torch.Tensor:
        X = torch.as_tensor(x, dtype=torch.float64).reshape(1, -1).expand(self.n_agents, -1)
        return self.grad(X).sum(dim=0) * self._scale()

    def check_x(self, X: torch.Tensor, name: str = "x0") -> torch.Tensor:
        X = torch.as_tensor(X, dtype=torch.float64)
        if X.ndim == 1:
            require(X.shape[0] == self.dim, name, tuple(X.shape),
                    f"shape (d,) = ({self.dim},) or (n, d) = ({self.n_agents}, {self.dim})")
            return X.reshape(1, -1).repeat(self.n_agents, 1)
        if tuple(X.shape) != (self.n_agents, self.dim):
            raise ParameterError(name, tuple(X.shape),
                                 f"shape (d,) = ({self.dim},) or (n, d) = ({self.n_agents}, {self.dim})")
        require(bool(torch.isfinite(X).all()), name, "tensor with non-finite entries", "finite")
        return X.clone()

    def default_x0(self, seed: int = 0) -> torch.Tensor:
        """The papers' usual start: ``x_i(0) ~ U[0, 1]^d`` independently per agent."""
        u = Streams(seed).uniform("x0", 0, np.arange(self.n_agents), self.dim)
        return torch.from_numpy(u)

    def describe(self) -> dict:
        return {"name": self.name, "n_agents": self.n_agents, "dim": self.dim,
                "convention": self.convention, "smoothness": self.smoothness}


def minimize_global(problem: Problem, x0: torch.Tensor | None = None, tol: float = 1e-12,
                    max_iter: int = 10_000) -> torch.Tensor:
    """Centralised reference solution by L-BFGS on the global objective (float64)."""
    from scipy.optimize import minimize

    d = problem.dim

    def fun(z):
        x = torch.from_numpy(z)
        return problem.loss(x), problem.global_grad(x).numpy()

    start = np.zeros(d) if x0 is None else np.asarray(x0, dtype=np.float64)
    res = minimize(fun, start, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15, "maxcor": 30})
    return torch.from_numpy(res.x)


class ProblemConstants:
    """The constants an accountant reads from a problem (dimension, smoothness, gradient bound),
    without data: ``dpnet privacy`` uses it to evaluate a guarantee before any run."""

    convention = "average"
    name = "constants"

    def __init__(self, n_agents: int, dim: int, smoothness: float = float("inf"),
                 gradient_bound: float | None = None) -> None:
        require(n_agents >= 1, "n_agents", n_agents, "n_agents >= 1")
        require(dim >= 1, "dim", dim, "dim >= 1")
        self.n_agents, self.dim = int(n_agents), int(dim)
        self.smoothness = float(smoothness)
        self._M = gradient_bound

    def gradient_bound(self) -> float | None:
        return self._M

    def optimum(self) -> None:
        return None
