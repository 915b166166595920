"""The stacked-gradient problem protocol.

A problem holds the local objectives ``f_1..f_n`` of all agents. Its central method is
``grad(X)``: row i of the result is ``grad f_i(x_i)`` for row i of X, computed for all agents in a
few tensor operations. The global objective follows ``convention``: ``"average"``
``f = (1/n) sum_i f_i`` (papers 000-003) or ``"sum"`` ``f = sum_i f_i`` (paper 004).

Agents are always named by their global index ``0..n-1``. A problem may hold the data of only some
agents (``held``, set by :meth:`Problem.restrict` or a constructor's ``agents=``): that is what one
rank of a distributed run keeps. Its gradients and local losses answer for the held agents only;
the global objective is then a sum over ranks (:class:`dpnet.runner.Metrics` all-reduces it).
"""

from __future__ import annotations

import copy
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
    #: global indices of the agents whose data this object holds, in row order (None: all)
    held: np.ndarray | None = None
    #: whether :meth:`optimum` is cheap enough to evaluate before dropping other agents' data
    cheap_optimum: bool = False

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

    def _slot(self, agents: np.ndarray | None) -> np.ndarray:
        """Rows of the per-agent data that hold ``agents`` (global indices): the identity unless
        this problem holds a subset (:meth:`restrict`)."""
        if self.held is None:
            return self._agents(agents)
        if agents is None:
            return np.arange(self.held.size)
        a = np.asarray(agents, dtype=np.int64)
        if a.size == self.held.size and np.array_equal(a, self.held):
            return np.arange(a.size)  # every step of a rank asks for exactly its held agents
        pos = np.full(self.n_agents, -1, dtype=np.int64)
        pos[self.held] = np.arange(self.held.size)
        s = pos[a]
        if (s < 0).any():
            missing = a[s < 0][:5].tolist()
            raise ParameterError("agents", missing, "agents whose data this problem holds "
                                 f"(held: {ranges_text(self.held)} of {self.n_agents})")
        return s

    def _rows(self, T: torch.Tensor, agents: np.ndarray | None) -> torch.Tensor:
        """The rows of per-agent data ``T`` that belong to ``agents``. All held agents in order
        (every gradient call of the simulated network) returns T itself: indexing would copy the
        whole dataset on each call."""
        s = self._slot(agents)
        if len(s) == T.shape[0] and np.array_equal(s, np.arange(T.shape[0])):
            return T
        return T[torch.from_numpy(s)]

    # -- holding a subset of the agents -------------------------------------------------------------
    def restrict(self, agents) -> Problem:
        """A copy that holds only ``agents``' data (global indices keep their meaning): what one
        rank of a distributed run needs. Constants that depend on every agent's data (smoothness,
        gradient bound, and the optimum when already computed) are evaluated first, so every
        rank's accountant sees the same values; the other agents' data is then dropped."""
        a = check_agent_indices(agents, self.n_agents)
        if self.held is not None:
            self._slot(a)  # every requested agent must be held already
        constants = self._global_constants()
        out = copy.copy(self)
        out._keep(self._slot(a))
        out.held = a
        out._frozen = constants
        return out

    def _global_constants(self) -> dict:
        """Values computed from all agents' data that a restricted copy must keep."""
        if getattr(self, "_frozen", None) is not None:
            return self._frozen
        opt = getattr(self, "_opt", None)
        if opt is None and self.cheap_optimum:
            opt = self.optimum()
        return {"smoothness": self.smoothness, "gradient_bound": self.gradient_bound(),
                "optimum": opt}

    def _held_constant(self, key: str):
        """A restricted copy's value of a global constant (see :meth:`restrict`)."""
        return self._frozen[key]

    def _keep(self, slots: np.ndarray) -> None:
        """Replace every per-agent tensor by its rows ``slots`` (on a shallow copy)."""
        raise ParameterError("problem", type(self).__name__, "a problem class that can hold a "
                             "subset of the agents (it implements _keep)")

    def _require_all(self, what: str) -> None:
        if self.held is not None:
            raise ParameterError("problem", f"holding agents {ranges_text(self.held)} of "
                                 f"{self.n_agents}", f"a problem holding every agent's data for "
                                 f"{what} (sum local_loss / grad over the ranks instead)")

    def _scale(self) -> float:
        return 1.0 / self.n_agents if self.convention == "average" else 1.0

    def loss(self, x: torch.Tensor) -> float:
        """Global objective at one point x (shape (d,))."""
        self._require_all("the global objective")
        X = torch.as_tensor(x, dtype=torch.float64).reshape(1, -1).expand(self.n_agents, -1)
        return float(self.local_loss(X).sum()) * self._scale()

    def global_grad(self, x: torch.Tensor) -> torch.Tensor:
        self._require_all("the global gradient")
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
        out = {"name": self.name, "n_agents": self.n_agents, "dim": self.dim,
               "convention": self.convention, "smoothness": self.smoothness}
        if self.held is not None:
            out["held_agents"] = ranges_text(self.held)
        return out


def logistic_curvature(V: torch.Tensor) -> float:
    """``max_i lambda_max(V_i^T V_i) / (4 m)`` for per-agent samples ``V`` of shape ``(n, m, d)``:
    the curvature bound of a mean logistic loss (its second derivative is at most 1/4)."""
    G = torch.einsum("nmd,nme->nde", V, V) / (4 * V.shape[1])
    return float(torch.linalg.eigvalsh(G).max())


def check_agent_indices(agents, n: int) -> np.ndarray:
    """``agents`` as increasing int64 indices in ``[0, n)`` (at least one), or a ParameterError."""
    a = np.asarray(agents, dtype=np.int64).reshape(-1)
    require(a.size >= 1 and bool(np.all(np.diff(a) > 0)) and a[0] >= 0 and a[-1] < n, "agents",
            ranges_text(a) if a.size else [], f"increasing agent indices in [0, {n})")
    return a


def ranges_text(a: np.ndarray) -> str:
    """``[0..3, 7]``: compact text for a set of agent indices in messages."""
    a = np.asarray(a, dtype=np.int64)
    parts, start = [], None
    for i, v in enumerate(a):
        if start is None:
            start = v
        if i + 1 == a.size or a[i + 1] != v + 1:
            parts.append(f"{start}" if start == v else f"{start}..{v}")
            start = None
    return "[" + ", ".join(parts) + "]"


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
