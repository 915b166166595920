"""The stacked-gradient problem protocol.

A problem holds the local objectives ``f_1..f_n`` of all agents. Its central method is
``grad(X)``: row i of the result is ``grad f_i(x_i)`` for row i of X, computed for all agents in a
few tensor operations. The global objective follows ``convention``: ``"average"``
``f = (1/n) sum_i f_i`` (papers 000-003) or ``"sum"`` ``f = sum_i f_i`` (paper 004).

Every problem lives on one torch device (:attr:`Problem.device`, the CPU unless moved by
:meth:`Problem.to`): its data tensors are there, and its methods take and return tensors there.
Agent indices stay NumPy arrays on the host; they become index tensors on the device only where
data is indexed.

Agents are always named by their global index ``0..n-1``. A problem may hold the data of only some
agents (``held``, set by :meth:`Problem.restrict` or a constructor's ``agents=``): that is what one
rank of a distributed run keeps. Its gradients and local losses answer for the held agents only;
the global objective is then a sum over ranks (:class:`dpnet.runner.Metrics` all-reduces it).
"""

from __future__ import annotations

import copy as _copy
from abc import ABC, abstractmethod
from typing import Any, Self

import numpy as np
import torch

from ..errors import ParameterError, require
from ..rng import Streams


class Movable:
    """An object whose tensors live on one device (:attr:`device`) and that :meth:`to` copies to
    another: problems and the sample models of online problems."""

    #: where the data tensors live and where every method computes (see :meth:`to`)
    device: torch.device = torch.device("cpu")

    def to(self, device: torch.device | str, copy: bool = False) -> Self:
        """A copy whose data lives on ``device`` (``self`` when already there, unless ``copy``):
        a shallow copy with every tensor attribute moved (and modules, nested problems,
        containers of them, see :func:`moved`), so the original stays usable where it was. The
        runner calls this once before a run; the copy's methods take and return tensors on
        ``device``. ``copy=True`` (as in ``Tensor.to``) makes the copy even on the same device:
        the CPU exercises the whole moving path that way."""
        dev = canonical_device(device)
        if dev == self.device and not copy:
            return self
        out = _copy.copy(self)
        out._move(dev, copy)
        out.device = dev
        return out

    def _move(self, device: torch.device, copy: bool = False) -> None:
        """Move this (freshly copied) object's attributes to ``device`` (``copy``: nested movable
        objects are copied too). Subclasses extend it for state that is not a plain attribute
        (closures bound to the old object, caches)."""
        for name, value in list(vars(self).items()):
            setattr(self, name, moved(value, device, copy))


class Problem(Movable, ABC):
    """Local objectives of n agents over R^d."""

    n_agents: int
    dim: int
    convention: str = "average"
    name: str = "problem"
    #: global indices of the agents whose data this object holds, in row order (None: all)
    held: np.ndarray | None = None
    #: whether :meth:`optimum` is cheap enough to evaluate before dropping other agents' data
    cheap_optimum: bool = False
    #: a restricted copy's global constants (set by :meth:`restrict`; unset on a full problem)
    _frozen: dict

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

    def local_sizes(self) -> np.ndarray | None:
        """``(n_agents,)`` records each agent holds, ``m_i`` (every agent, also on a copy that
        holds a subset); None for a problem that declares none (its metrics row is counted as
        :data:`dpnet.runner.RECORDLESS_ROW_COST` steps). Not read from an attribute ``m``:
        :class:`SinCos` names a parameter vector so."""
        return None

    def metric_records(self) -> int | None:
        """The records one metrics row of :func:`dpnet.run` reads (the global objective and
        its gradient at the average iterate), counted once per pass: two passes over every
        agent's records unless the problem fuses them in :meth:`loss_and_grad`; None for a
        problem without records. The runner's ``"auto"`` cadence compares it with the records
        a step reads."""
        sizes = self.local_sizes()
        return None if sizes is None else self.metric_passes() * int(sizes.sum())

    def metric_passes(self) -> int:
        """Passes over the data of one :meth:`loss_and_grad`: 1 where a subclass fuses the
        objective and the gradient, else 2."""
        return 1 if type(self).loss_and_grad is not Problem.loss_and_grad else 2

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
        return T[self._index(s)]

    def _index(self, a) -> torch.Tensor:
        """Host indices (NumPy or a tensor) as an int64 index tensor on this problem's device:
        agent and sample indices are drawn on the host, the data they index lives here."""
        if isinstance(a, torch.Tensor):
            return a.to(device=self.device, dtype=torch.int64)
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)

    # -- holding a subset of the agents -------------------------------------------------------------
    def restrict(self, agents) -> Self:
        """A copy that holds only ``agents``' data (global indices keep their meaning): what one
        rank of a distributed run needs. Constants that depend on every agent's data (smoothness,
        gradient bound, and the optimum when already computed) are evaluated first, so every
        rank's accountant sees the same values; the other agents' data is then dropped."""
        a = check_agent_indices(agents, self.n_agents)
        if self.held is not None:
            self._slot(a)  # every requested agent must be held already
        constants = self._global_constants()
        out = _copy.copy(self)
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
        """Global objective at one point x (shape (d,), any device or a NumPy array)."""
        self._require_all("the global objective")
        X = self._point(x).expand(self.n_agents, -1)
        return float(self.local_loss(X).sum()) * self._scale()

    def global_grad(self, x: torch.Tensor) -> torch.Tensor:
        """Gradient of the global objective at one point x, on this problem's device."""
        self._require_all("the global gradient")
        X = self._point(x).expand(self.n_agents, -1)
        return self.grad(X).sum(dim=0) * self._scale()

    def loss_and_grad(self, x: torch.Tensor) -> tuple[float, torch.Tensor]:
        """``(loss(x), global_grad(x))``: what a logged metrics row needs. Problems whose loss and
        gradient share their expensive part (a pass over every agent's data) override it to make
        that pass once."""
        return self.loss(x), self.global_grad(x)

    def _point(self, x, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """One point as a ``(1, d)`` row on this problem's device."""
        return torch.as_tensor(x, dtype=dtype, device=self.device).reshape(1, -1)

    def check_x(self, X: torch.Tensor, name: str = "x0") -> torch.Tensor:
        """``X`` (``(d,)`` for all agents or ``(n, d)``) as a fresh float64 ``(n, d)`` tensor on
        this problem's device."""
        X = torch.as_tensor(X, dtype=torch.float64, device=self.device)
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
        return torch.from_numpy(u).to(self.device)

    def describe(self) -> dict:
        """What a report states about the problem: ``name``, ``n_agents``, ``dim``, the ``convention`` of
        the global objective and the ``smoothness``; on a copy that holds some agents only, those agents
        as ranges (``held_agents``). Subclasses add their own entries."""
        out = {"name": self.name, "n_agents": self.n_agents, "dim": self.dim,
               "convention": self.convention, "smoothness": self.smoothness}
        if self.held is not None:
            out["held_agents"] = ranges_text(self.held)
        return out


def canonical_device(device: torch.device | str) -> torch.device:
    """``device`` as the ``torch.device`` its tensors report (``"cuda"`` becomes ``cuda:0``), so
    ``problem.device == tensor.device`` holds; a device this machine lacks is a ParameterError."""
    try:
        return torch.empty(0, device=device).device
    except (RuntimeError, AssertionError, TypeError) as e:
        raise ParameterError("device", device, "a torch device available here "
                             f"(cpu, or cuda when torch.cuda.is_available()): {e}") from None


def moved(value: Any, device: torch.device, copy: bool = False) -> Any:
    """``value`` with its tensors on ``device``: a tensor is moved (shared when already there),
    an ``nn.Module`` copied and moved (the original keeps its device), a :class:`Movable`
    (problem, sample model) by its own ``to(device, copy)``, a plain tuple, list or dict
    element-wise; anything else is returned as is (shared with the original)."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, torch.nn.Module):
        return _copy.deepcopy(value).to(device)
    if isinstance(value, Movable):
        return value.to(device, copy)
    if type(value) in (tuple, list):
        return type(value)(moved(v, device, copy) for v in value)
    if type(value) is dict:
        return {k: moved(v, device, copy) for k, v in value.items()}
    return value


def logistic_curvature(V: torch.Tensor, sizes: np.ndarray | None = None) -> float:
    """``max_i lambda_max(V_i^T V_i) / (4 m_i)`` for per-agent samples ``V`` of shape
    ``(n, m, d)`` (zero rows beyond ``sizes[i]``): the curvature bound of a mean logistic loss
    (its second derivative is at most 1/4)."""
    G = torch.einsum("nmd,nme->nde", V, V)
    if sizes is None or bool(np.all(np.asarray(sizes) == V.shape[1])):
        G = G / (4 * V.shape[1])
    else:
        G = G / (4 * torch.as_tensor(np.asarray(sizes), dtype=G.dtype))[:, None, None]
    return float(torch.linalg.eigvalsh(G).max())


def equal_local_size(problem, who: str) -> int:
    """The one local size ``m`` of a problem whose agents all hold m records: a named error for
    a problem without records, or with unequal sizes, where ``who`` (an algorithm or an
    account) has one ``m`` for every agent."""
    sizes = problem.local_sizes() if hasattr(problem, "local_sizes") else None
    require(sizes is not None, "problem", type(problem).__name__,
            f"a finite-sum problem with m local records per agent ({who} reads m)")
    assert sizes is not None                            # the require above raised otherwise
    require(bool(np.all(sizes == sizes[0])), "problem",
            f"{type(problem).__name__} with local sizes m_i from {int(sizes.min())} to "
            f"{int(sizes.max())}", f"equal local sizes: {who} has one m for every agent",
            "DP-SGD, DECOR and their anchors account each agent at its own m_i")
    return int(sizes[0])


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
    device = getattr(problem, "device", torch.device("cpu"))   # L-BFGS iterates on the host

    def fun(z):
        x = torch.from_numpy(z).to(device)
        return problem.loss(x), problem.global_grad(x).cpu().numpy()

    start = np.zeros(d) if x0 is None else np.asarray(torch.as_tensor(x0).cpu(), dtype=np.float64)
    res = minimize(fun, start, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15, "maxcor": 30})
    return torch.from_numpy(res.x).to(device)


class ProblemConstants:
    """The constants an accountant reads from a problem (dimension, smoothness, gradient bound),
    without data: ``dpnet privacy`` uses it to evaluate a guarantee before any run."""

    convention = "average"
    name = "constants"

    def __init__(self, n_agents: int, dim: int, smoothness: float = float("inf"),
                 gradient_bound: float | None = None,
                 records_per_agent=None) -> None:
        require(n_agents >= 1, "n_agents", n_agents, "n_agents >= 1")
        require(dim >= 1, "dim", dim, "dim >= 1")
        self.n_agents, self.dim = int(n_agents), int(dim)
        self.smoothness = float(smoothness)
        self._M = gradient_bound
        self._sizes = None
        if records_per_agent is not None:   # m_i: what per-record accountants read (rates B/m_i)
            sizes = np.asarray(records_per_agent, dtype=np.float64).reshape(-1)
            require(sizes.size in (1, self.n_agents) and bool(np.all(sizes >= 1))
                    and bool(np.all(sizes == np.floor(sizes))), "records_per_agent",
                    records_per_agent, f"an integer >= 1, or {self.n_agents} of them (one per "
                    "agent)")
            sizes = np.broadcast_to(sizes, (self.n_agents,)).astype(np.int64)
            self._sizes = sizes
            self.m = int(sizes[0]) if bool(np.all(sizes == sizes[0])) else None
            self.supports_clip = True

    def local_sizes(self) -> np.ndarray | None:
        """``(n_agents,)`` int64 records per agent ``m_i`` from ``records_per_agent``, or None when it was
        not given."""
        return self._sizes

    def gradient_bound(self) -> float | None:
        """The ``gradient_bound`` given to the constructor (None: not given)."""
        return self._M

    def optimum(self) -> None:
        """None: a problem without data has no known minimiser."""
        return None
