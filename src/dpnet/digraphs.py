"""Directed graphs with two weight matrices: R (states) and C (tracking variables).

Paper 003 (Chen, Wang & Zhang) runs gradient tracking over two digraphs on the same agents:
``R[i, j] > 0`` iff agent i receives agent j's state, ``C[i, j] > 0`` iff i receives j's tracking
variable. Neither matrix needs to be stochastic and their diagonals play no role (the sums in the
paper run over ``j in N^-_i``, ``j != i``), so both are stored with a zero diagonal.

* in-Laplacian ``L1 = diag(R 1) - R`` (row sums), out-Laplacian ``L2 = diag(1^T C) - C`` (column
  sums). Both are registered as named matrices ``"L1"`` and ``"L2"`` (and ``"R"``, ``"C"``), so an
  algorithm computes ``L2 H`` with ``ctx.net.mix(H, "L2")``: the network's own ``laplacian`` uses
  row sums, and the column-sum self-weight of ``L2`` is a constant each agent knows (the weights
  its out-neighbours put on it), not something to index out of other agents' rows.
* Assumption 1: ``G_R`` and ``G_{C^T}`` each contain a spanning tree and a common root exists.
  ``G_M`` has an edge ``j -> i`` iff ``M[i, j] > 0``; a root of ``G_R`` reaches every agent
  along R's edges, a root of ``G_{C^T}`` is reached by every agent along C's edges (push-pull).
* Lemma 1: ``I - alpha L1`` and ``I - beta L2`` nonnegative (``alpha <= 1/max_i L1_ii``,
  ``beta <= 1/max_i L2_ii``), then unique ``v1, v2 >= 0`` with ``v1^T L1 = 0``, ``L2 v2 = 0``,
  ``1^T v1 = 1^T v2 = n``, and ``rho(I - alpha L1 - 1 v1^T/n) = 1 - alpha r_L1``,
  ``rho(I - beta L2 - v2 1^T/n) = 1 - beta r_L2`` (so r_L1, r_L2 depend on alpha, beta).

The underlying :class:`~dpnet.graphs.Graph` has ``W = R`` (so ``graph.laplacian`` is ``L1``) and
the union of both edge sets as its adjacency; bits are charged per matrix (an exchange under
``matrix="C"`` reaches C's out-neighbours only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from .errors import ParameterError, positive_int, require
from .graphs import Graph

_TOL = 1e-10


def _weights(name: str, M: Any, n: int | None = None) -> np.ndarray:
    M = np.asarray(M, dtype=np.float64)
    require(M.ndim == 2 and M.shape[0] == M.shape[1], name, M.shape, "a square (n, n) array")
    if n is not None:
        require(M.shape[0] == n, name, M.shape, f"shape ({n}, {n}) like R")
    require(bool(np.all(np.isfinite(M))), name, "array with non-finite entries", "all finite")
    require(bool(np.all(M >= 0)), name, f"min entry {M.min():.4g}",
            "nonnegative weights (paper 003, Section II-A)")
    M = M.copy()
    np.fill_diagonal(M, 0.0)
    return M


def _roots(M: np.ndarray) -> list[int]:
    """Agents from which every agent is reachable in ``G_M`` (edge j -> i iff M[i, j] > 0)."""
    n = M.shape[0]
    A = sp.csr_matrix((M > 0).T.astype(np.float64))   # row = sender, column = receiver
    return [r for r in range(n)
            if len(csgraph.breadth_first_order(A, r, directed=True,
                                               return_predecessors=False)) == n]


def _null_vector(M: np.ndarray, n: int, what: str) -> np.ndarray:
    """The nonnegative vector spanning the (one-dimensional) null space of M, summing to n."""
    N = scipy.linalg.null_space(M, rcond=1e-10)
    require(N.shape[1] == 1, what, f"null space of dimension {N.shape[1]}",
            "dimension 1 (Assumption 1: a spanning tree)")
    v = N[:, 0] / N[:, 0].sum() * n
    require(bool(np.all(v >= -1e-9 * n)), what, v.tolist(), "a nonnegative vector (Lemma 1)")
    return np.clip(v, 0.0, None)


class DirectedGraph(Graph):
    """A pair of digraphs ``G_R``, ``G_C`` on the same n agents (see the module docstring)."""

    def __init__(self, R: Any, C: Any | None = None, name: str = "digraph",
                 scheme: str = "explicit", meta: dict[str, Any] | None = None) -> None:
        R = _weights("R", R)
        C = R.copy() if C is None else _weights("C", C, R.shape[0])
        self.R, self.C = R, C
        super().__init__(R, name=name, scheme=scheme, meta=dict(meta or {}), matrices={})
        self.add_matrix("R", R).add_matrix("C", C)
        self.add_matrix("L1", self.in_laplacian).add_matrix("L2", self.out_laplacian)

    # -- structure --------------------------------------------------------------------------
    @property
    def adjacency(self) -> np.ndarray:
        """Union of both edge sets: ``A[i, j] = 1`` iff i receives anything from j."""
        A = ((self.R > 0) | (self.C > 0)).astype(np.float64)
        np.fill_diagonal(A, 0.0)
        return A

    @property
    def directed(self) -> bool:
        return True

    @property
    def in_laplacian(self) -> np.ndarray:
        """``L1 = diag(R 1) - R``."""
        return np.diag(self.R.sum(axis=1)) - self.R

    @property
    def out_laplacian(self) -> np.ndarray:
        """``L2 = diag(1^T C) - C``."""
        return np.diag(self.C.sum(axis=0)) - self.C

    def row_sums(self, which: str = "R") -> np.ndarray:
        """``sum_{j in N^-_i} M_ij`` for every agent i (the factors of Appendix F)."""
        return self._pick(which).sum(axis=1)

    def _pick(self, which: str) -> np.ndarray:
        require(which in ("R", "C"), "which", which, "'R' or 'C'")
        return self.R if which == "R" else self.C

    # -- Assumption 1 -----------------------------------------------------------------------
    def roots(self, which: str = "R") -> list[int]:
        """Roots of spanning trees of ``G_R`` (``"R"``) or of ``G_{C^T}`` (``"C^T"``)."""
        require(which in ("R", "C^T"), "which", which, "'R' or 'C^T'")
        return _roots(self.R if which == "R" else self.C.T)

    def common_roots(self) -> list[int]:
        return sorted(set(self.roots("R")) & set(self.roots("C^T")))

    def satisfies_assumption1(self) -> bool:
        return len(self.common_roots()) > 0

    def require_assumption1(self, who: str = "this algorithm") -> None:
        """Raise unless ``G_R`` and ``G_{C^T}`` contain spanning trees with a common root."""
        rr, rc = self.roots("R"), self.roots("C^T")
        if not rr or not rc:
            bad = [f"G_{w} has no spanning tree (no agent reaches all others)"
                   for w, r in (("R", rr), ("C^T", rc)) if not r]
            raise ParameterError("graph", self.name, f"{who} needs Assumption 1 of Chen, Wang & "
                                 "Zhang: G_R and G_{C^T} each contain a spanning tree",
                                 "; ".join(bad))
        if not set(rr) & set(rc):
            raise ParameterError("graph", self.name, f"{who} needs Assumption 1 of Chen, Wang & "
                                 "Zhang: a common root of spanning trees of G_R and G_{C^T}",
                                 f"roots of G_R: {rr}, roots of G_(C^T): {rc}, none in common")

    # -- Lemma 1 ----------------------------------------------------------------------------
    def alpha_max(self) -> float:
        """Largest alpha with ``I - alpha L1 >= 0`` entrywise: ``1 / max_i sum_j R_ij``."""
        d = self.R.sum(axis=1).max()
        return float("inf") if d == 0 else float(1.0 / d)

    def beta_max(self) -> float:
        """Largest beta with ``I - beta L2 >= 0`` entrywise: ``1 / max_j sum_i C_ij``."""
        d = self.C.sum(axis=0).max()
        return float("inf") if d == 0 else float(1.0 / d)

    def require_nonnegative(self, alpha: float, beta: float) -> None:
        """Lemma 1's hypothesis: ``I - alpha L1`` and ``I - beta L2`` are nonnegative."""
        for sym, val, top, lap in (("alpha", alpha, self.alpha_max(), "L1"),
                                   ("beta", beta, self.beta_max(), "L2")):
            require(0 < val <= top * (1 + 1e-12), sym, val,
                    f"0 < {sym} <= {top:.6g} so that I - {sym}*{lap} is nonnegative (Lemma 1)")

    @property
    def v1(self) -> np.ndarray:
        """Left null vector of L1 (``v1^T (I - alpha L1) = v1^T``), ``1^T v1 = n``."""
        self.require_assumption1("v1")
        return _null_vector(self.in_laplacian.T, self.n, "v1")

    @property
    def v2(self) -> np.ndarray:
        """Right null vector of L2 (``(I - beta L2) v2 = v2``), ``1^T v2 = n``."""
        self.require_assumption1("v2")
        return _null_vector(self.out_laplacian, self.n, "v2")

    def rates(self, alpha: float, beta: float) -> tuple[float, float]:
        """``(r_L1, r_L2)`` of Lemma 1 at these step sizes."""
        self.require_nonnegative(alpha, beta)
        n, one = self.n, np.ones(self.n)
        M1 = np.eye(n) - alpha * self.in_laplacian - np.outer(one, self.v1) / n
        M2 = np.eye(n) - beta * self.out_laplacian - np.outer(self.v2, one) / n
        rho1 = float(np.max(np.abs(np.linalg.eigvals(M1))))
        rho2 = float(np.max(np.abs(np.linalg.eigvals(M2))))
        return (1.0 - rho1) / alpha, (1.0 - rho2) / beta

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out.update({"edges_R": int((self.R > 0).sum()), "edges_C": int((self.C > 0).sum()),
                    "roots_R": self.roots("R"), "roots_CT": self.roots("C^T")})
        return out

    def __repr__(self) -> str:
        return (f"DirectedGraph({self.name!r}, n={self.n}, {int((self.R > 0).sum())} R-edges, "
                f"{int((self.C > 0).sum())} C-edges)")


# ---- constructors -----------------------------------------------------------------------------

def _matrix_from_edges(n: int, edges: Iterable[tuple[int, int]], weights: str | float,
                       what: str) -> np.ndarray:
    """``(s, r)``: r receives from s, i.e. ``M[r, s] > 0``. ``weights``: ``"in"`` (each agent
    splits weight 1 over its in-neighbours: rows sum to 1), ``"out"`` (each sender splits weight
    1 over its out-neighbours: columns sum to 1) or a constant."""
    A = np.zeros((n, n))
    for s, r in edges:
        require(0 <= s < n and 0 <= r < n and s != r, f"{what} edge", (s, r), f"0 <= s != r < {n}")
        A[r, s] = 1.0
    if weights == "in":
        deg = A.sum(axis=1, keepdims=True)
        return np.divide(A, deg, out=np.zeros_like(A), where=deg > 0)
    if weights == "out":
        deg = A.sum(axis=0, keepdims=True)
        return np.divide(A, deg, out=np.zeros_like(A), where=deg > 0)
    if isinstance(weights, int | float) and not isinstance(weights, bool):
        require(weights > 0, f"{what} weight", weights, "weight > 0")
        return float(weights) * A
    raise ParameterError(f"{what} weights", weights, "'in', 'out' or a positive number")


def from_edge_lists(n: int, r_edges: Iterable[tuple[int, int]],
                    c_edges: Iterable[tuple[int, int]] | None = None,
                    r_weights: str | float = "in", c_weights: str | float = "out",
                    name: str | None = None) -> DirectedGraph:
    """Pair of digraphs from edge lists ``(sender, receiver)``. Defaults: R's rows and C's columns
    sum to 1 (pull weights for states, push weights for tracking variables, as in push-pull);
    ``c_edges=None`` reuses R's edges."""
    n = positive_int("n", n)
    r_edges = list(r_edges)
    R = _matrix_from_edges(n, r_edges, r_weights, "R")
    C = _matrix_from_edges(n, r_edges if c_edges is None else c_edges, c_weights, "C")
    return DirectedGraph(R, C, name=name or f"digraph({n})",
                         scheme=f"R:{r_weights}, C:{c_weights}")


def digraph(R: Any, C: Any | None = None, name: str = "explicit") -> DirectedGraph:
    """Explicit nonnegative matrices (``C=None``: C = R)."""
    return DirectedGraph(R, C, name=name)


def directed_ring(n: int, r_weights: str | float = "in", c_weights: str | float = "out",
                  c_reversed: bool = False) -> DirectedGraph:
    """Agent i receives from i-1 (mod n) in both graphs (``c_reversed``: C runs the other way)."""
    n = positive_int("n", n)
    require(n >= 2, "n", n, "n >= 2")
    ring = [(i, (i + 1) % n) for i in range(n)]
    c_edges = [((i + 1) % n, i) for i in range(n)] if c_reversed else ring
    g = from_edge_lists(n, ring, c_edges, r_weights, c_weights,
                        name=f"directed_ring({n}{', C reversed' if c_reversed else ''})")
    return g


def _random_strong_edges(n: int, p: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """A random Hamiltonian cycle (strong connectivity) plus each other arc with probability p."""
    order = rng.permutation(n)
    edges = {(int(order[i]), int(order[(i + 1) % n])) for i in range(n)}
    extra = rng.random((n, n)) < p
    edges |= {(int(s), int(r)) for s, r in zip(*np.nonzero(extra)) if s != r}
    return sorted(edges)


def random_digraph(n: int, p: float = 0.3, seed: int = 0, r_weights: str | float = "in",
                   c_weights: str | float = "out", same_support: bool = False) -> DirectedGraph:
    """Random strongly connected digraphs G_R and G_C (drawn independently unless
    ``same_support``): a random Hamiltonian cycle plus every other arc with probability p. A
    deterministic function of ``seed`` (R from the seed sequence ``(seed, 0)``, C from
    ``(seed, 1)``)."""
    n = positive_int("n", n)
    require(n >= 2, "n", n, "n >= 2")
    require(0 <= p <= 1, "p", p, "0 <= p <= 1")
    r_edges = _random_strong_edges(n, p, np.random.default_rng([seed, 0]))
    c_edges = r_edges if same_support else _random_strong_edges(n, p,
                                                                np.random.default_rng([seed, 1]))
    g = from_edge_lists(n, r_edges, c_edges, r_weights, c_weights,
                        name=f"random_digraph({n}, p={p:g}, seed={seed})")
    g.meta["seed"] = seed
    return g


# The paper's Fig. 1 is not in the text: these are our two 5-agent digraphs (sender, receiver).
CWZ_FIG1_R_EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2), (2, 4)]
CWZ_FIG1_C_EDGES = [(1, 0), (2, 1), (3, 2), (4, 3), (0, 4), (1, 3), (3, 0)]


def cwz_fig1() -> DirectedGraph:
    """Our stand-in for Fig. 1 of Chen, Wang & Zhang (the figure is not in the text).

    ``G_R``: the ring 0->1->2->3->4->0 with chords 0->2 and 2->4; ``G_C``: the reverse ring
    0->4->3->2->1->0 with chords 1->3 and 3->0. Both strongly connected (every agent is a common
    root) with different edge sets. Weights: each agent averages its R-in-neighbours
    (``R_ij = 1/|N^-_{R,i}|``, rows sum to 1) and each agent splits its tracking variable evenly
    over its C-out-neighbours (``C_ij = 1/|N^+_{C,j}|``, columns sum to 1). Neither matrix is
    doubly stochastic."""
    return from_edge_lists(5, CWZ_FIG1_R_EDGES, CWZ_FIG1_C_EDGES, "in", "out", name="cwz_fig1")
