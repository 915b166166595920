"""Communication graphs and their weight matrices.

Convention: ``W[i, j] != 0`` (i != j) means that agent i receives from agent j, so an update
``x_i <- sum_j W[i, j] x_j`` is one row of ``W @ X``. Undirected graphs have symmetric support.

Weight schemes for undirected graphs (all doubly stochastic when valid):

* ``"metropolis"`` (default): ``w_ij = 1 / (1 + max(deg_i, deg_j))`` on edges, ``w_ii = 1 - sum``.
* ``"constant"``: ``w_ij = c`` on every edge, ``w_ii = 1 - deg_i * c`` (paper 002 writes the ring
  with ``c = 0.3``; its Laplacian-like matrix is :attr:`Graph.laplacian_like`).
* ``"laplacian"``: ``W = I - L / iota`` with the unweighted Laplacian ``L`` and ``iota > d_max``
  (paper 001's suggestion).
* an explicit ``(n, n)`` array.

Random constructors (:func:`erdos_renyi`, :func:`geometric`) redraw a disconnected sample: attempt
``a`` uses the seed sequence ``(seed, a)``, so the result is a deterministic function of ``seed``;
the number of attempts is stored in ``graph.meta["attempts"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from .errors import ParameterError, UnknownNameError, positive_int, require

_TOL = 1e-10


@dataclass
class Graph:
    """A graph on agents ``0..n-1`` with a weight matrix ``W`` (and optional extra matrices)."""

    W: np.ndarray
    name: str = "graph"
    scheme: str = "explicit"
    meta: dict[str, Any] = field(default_factory=dict)
    matrices: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        W = np.asarray(self.W, dtype=np.float64)
        require(W.ndim == 2 and W.shape[0] == W.shape[1], "W", W.shape, "must be a square (n, n) array")
        require(bool(np.all(np.isfinite(W))), "W", "array with non-finite entries", "all finite")
        self.W = W

    # -- structure --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.W.shape[0]

    @property
    def adjacency(self) -> np.ndarray:
        """0/1 matrix: ``A[i, j] = 1`` iff i receives from j (i != j)."""
        A = (np.abs(self.W) > 0).astype(np.float64)
        np.fill_diagonal(A, 0.0)
        return A

    @property
    def directed(self) -> bool:
        A = self.adjacency
        return not np.array_equal(A, A.T)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """Edges as (i, j) pairs; undirected graphs list each edge once with i < j."""
        A = self.adjacency
        if self.directed:
            # (j, i): j sends to i
            return [(int(j), int(i)) for i, j in zip(*np.nonzero(A))]
        iu = np.triu_indices(self.n, 1)
        mask = A[iu] > 0
        return list(zip(iu[0][mask].tolist(), iu[1][mask].tolist()))

    @property
    def degrees(self) -> np.ndarray:
        """In-degree of each agent (number of agents it receives from)."""
        return self.adjacency.sum(axis=1)

    def out_degrees(self, matrix: str = "W") -> np.ndarray:
        """Number of receivers of each agent's broadcast under ``matrix``'s support."""
        M = self.matrix(matrix)
        A = (np.abs(M) > 0).astype(np.float64)
        np.fill_diagonal(A, 0.0)
        return A.sum(axis=0)

    def neighbors(self, i: int) -> list[int]:
        """In-neighbours of agent i."""
        return np.nonzero(self.adjacency[i])[0].tolist()

    # -- derived matrices -------------------------------------------------------------------
    @property
    def laplacian(self) -> np.ndarray:
        """Weighted Laplacian ``diag(sum_{j != i} w_ij) - W_offdiag`` (``I - W`` when W is
        row-stochastic)."""
        Woff = self.W.copy()
        np.fill_diagonal(Woff, 0.0)
        return np.diag(Woff.sum(axis=1)) - Woff

    @property
    def laplacian_like(self) -> np.ndarray:
        """Paper 002's convention: off-diagonal ``w_ij``, diagonal ``w_ii = -sum_j w_ij``
        (the negative weighted Laplacian); the mixing matrix is ``I + laplacian_like``."""
        return -self.laplacian

    @property
    def unweighted_laplacian(self) -> np.ndarray:
        A = self.adjacency
        return np.diag(A.sum(axis=1)) - A

    def matrix(self, name: str) -> np.ndarray:
        """A named matrix: ``W``, ``L`` (weighted Laplacian), ``laplacian_like``,
        ``unweighted_laplacian``, ``I``, or one registered in ``self.matrices``."""
        builtin = {
            "W": lambda: self.W,
            "L": lambda: self.laplacian,
            "laplacian": lambda: self.laplacian,
            "laplacian_like": lambda: self.laplacian_like,
            "unweighted_laplacian": lambda: self.unweighted_laplacian,
            "I": lambda: np.eye(self.n),
        }
        if name in self.matrices:
            return self.matrices[name]
        if name in builtin:
            return builtin[name]()
        raise UnknownNameError("matrix", name, list(builtin) + list(self.matrices))

    def add_matrix(self, name: str, M: np.ndarray) -> Graph:
        M = np.asarray(M, dtype=np.float64)
        require(M.shape == (self.n, self.n), f"matrices[{name!r}]", M.shape, f"shape ({self.n}, {self.n})")
        A = (np.abs(M) > 0)
        np.fill_diagonal(A, False)
        require(not np.any(A & (self.adjacency == 0)), f"matrices[{name!r}]", "support",
                "nonzero off-diagonal entries only on the graph's edges (neighbour-sparse)")
        self.matrices[name] = M
        return self

    # -- checks -----------------------------------------------------------------------------
    def is_symmetric(self, tol: float = _TOL) -> bool:
        return bool(np.allclose(self.W, self.W.T, atol=tol, rtol=0))

    def is_row_stochastic(self, tol: float = _TOL) -> bool:
        return bool(np.all(np.abs(self.W.sum(axis=1) - 1) <= tol))

    def is_column_stochastic(self, tol: float = _TOL) -> bool:
        return bool(np.all(np.abs(self.W.sum(axis=0) - 1) <= tol))

    def is_doubly_stochastic(self, tol: float = _TOL) -> bool:
        return self.is_row_stochastic(tol) and self.is_column_stochastic(tol)

    def is_connected(self) -> bool:
        """Connected (undirected) or strongly connected (directed)."""
        if self.n == 1:
            return True
        ncomp = csgraph.connected_components(sp.csr_matrix(self.adjacency), directed=True,
                                             connection="strong")[0]
        return ncomp == 1

    def consensus_contraction(self) -> float:
        """``rho(W - 11^T/n)``: the spectral radius of W on the disagreement subspace."""
        J = np.full((self.n, self.n), 1.0 / self.n)
        return float(np.max(np.abs(np.linalg.eigvals(self.W - J))))

    def spectral_gap(self) -> float:
        """``1 - rho(W - 11^T/n)``; positive iff consensus by W converges (paper 000's rho)."""
        return 1.0 - self.consensus_contraction()

    def laplacian_eigenvalues(self) -> np.ndarray:
        L = self.laplacian
        if self.is_symmetric():
            return np.linalg.eigvalsh(L)
        return np.sort(np.linalg.eigvals(L).real)

    def largest_laplacian_eigenvalue(self) -> float:
        return float(np.max(self.laplacian_eigenvalues()))

    def smallest_nonzero_laplacian_eigenvalue(self, tol: float = 1e-9) -> float:
        ev = self.laplacian_eigenvalues()
        return float(np.min(ev[ev > tol]))

    # -- requirements used by algorithms -----------------------------------------------------
    def require_connected(self) -> None:
        kind = "strongly connected" if self.directed else "connected"
        if not self.is_connected():
            ncomp = csgraph.connected_components(sp.csr_matrix(self.adjacency), directed=True,
                                                 connection="strong")[0]
            raise ParameterError("graph", self.name, f"the graph must be {kind}",
                                 f"it has {ncomp} components")

    def require_doubly_stochastic(self, who: str = "this algorithm") -> None:
        rows, cols = self.W.sum(axis=1), self.W.sum(axis=0)
        if not self.is_doubly_stochastic():
            raise ParameterError(
                "graph.W", f"{self.name} (row sums in [{rows.min():.4g}, {rows.max():.4g}], "
                f"column sums in [{cols.min():.4g}, {cols.max():.4g}])",
                f"{who} needs a doubly stochastic W (W1 = 1 and 1^T W = 1^T)")
        require(bool(np.all(self.W >= -_TOL)), "graph.W", f"{self.name} (min entry {self.W.min():.4g})",
                f"{who} needs nonnegative weights")

    def require_mixing(self, who: str = "this algorithm") -> None:
        """Doubly stochastic, connected and ``rho = 1 - rho(W - 11^T/n) > 0``."""
        self.require_doubly_stochastic(who)
        self.require_connected()
        gap = self.spectral_gap()
        if gap <= 1e-12:
            raise ParameterError(
                "graph.W", self.name, f"{who} needs rho = 1 - rho(W - 11^T/n) > 0, got {gap:.3g}",
                "W has an eigenvalue -1 on the disagreement space (a zero-diagonal W on a "
                "bipartite graph does this); add self-weights, e.g. Metropolis weights")

    # -- conversions ------------------------------------------------------------------------
    def to_networkx(self) -> nx.Graph | nx.DiGraph:
        """A ``nx.Graph`` when W is symmetric, else a ``nx.DiGraph`` (edge j -> i carrying
        ``W[i, j]``), so asymmetric weights on a symmetric support (row-stochastic schemes)
        survive the round trip through :func:`from_networkx` with ``weights="attribute"``."""
        directed = not self.is_symmetric()
        G = nx.DiGraph() if directed else nx.Graph()
        G.add_nodes_from(range(self.n))
        if directed:
            for i, j in zip(*np.nonzero(self.adjacency)):  # i receives from j
                G.add_edge(int(j), int(i), weight=float(self.W[i, j]))
        else:
            for i, j in self.edges:
                G.add_edge(i, j, weight=float(self.W[i, j]))
        for i in range(self.n):
            G.nodes[i]["self_weight"] = float(self.W[i, i])
        return G

    def summary(self) -> dict[str, Any]:
        out = {"name": self.name, "n": self.n, "edges": len(self.edges), "directed": self.directed,
               "scheme": self.scheme, "connected": self.is_connected()}
        if not self.directed:
            out["spectral_gap"] = self.spectral_gap()
        out.update(self.meta)
        return out

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return f"Graph({self.name!r}, n={self.n}, {len(self.edges)} {kind} edges, weights={self.scheme})"


# ---- weights ----------------------------------------------------------------------------------

def weights_from_adjacency(A: np.ndarray, weights: str | float | np.ndarray = "metropolis",
                           iota: float | None = None) -> tuple[np.ndarray, str]:
    """Weight matrix for a symmetric 0/1 adjacency under a named scheme."""
    A = np.asarray(A, dtype=np.float64)
    n = A.shape[0]
    deg = A.sum(axis=1)
    if isinstance(weights, np.ndarray) or (isinstance(weights, list)):
        W = np.asarray(weights, dtype=np.float64)
        require(W.shape == (n, n), "weights", W.shape, f"an explicit W must have shape ({n}, {n})")
        return W, "explicit"
    if isinstance(weights, int | float) and not isinstance(weights, bool):
        c = float(weights)
        require(c > 0, "weight", c, "weight > 0")
        W = c * A
        np.fill_diagonal(W, 1.0 - deg * c)
        return W, f"constant({c:g})"
    if weights == "metropolis":
        dmax = np.maximum(deg[:, None], deg[None, :])
        W = np.where(A > 0, 1.0 / (1.0 + dmax), 0.0)
        np.fill_diagonal(W, 1.0 - W.sum(axis=1))
        return W, "metropolis"
    if weights == "laplacian":
        iota = float(deg.max() + 1 if iota is None else iota)
        require(iota > deg.max(), "iota", iota, f"iota > d_max = {deg.max():g}")
        L = np.diag(deg) - A
        return np.eye(n) - L / iota, f"I-L/{iota:g}"
    if weights == "uniform":  # 1/(deg+1) on the closed neighbourhood: row-stochastic only
        W = (A + np.eye(n)) / (deg + 1)[:, None]
        return W, "uniform"
    raise UnknownNameError("weight scheme", str(weights), ["metropolis", "laplacian", "uniform",
                                                          "<float>", "<array>"])


def _from_adjacency(A: np.ndarray, name: str, weights: Any = "metropolis", iota: float | None = None,
                    meta: dict | None = None) -> Graph:
    W, scheme = weights_from_adjacency(A, weights, iota)
    g = Graph(W, name=name, scheme=scheme, meta=dict(meta or {}))
    return g


def _check_n(n: int, minimum: int = 1) -> int:
    n = positive_int("n", n)
    require(n >= minimum, "n", n, f"n >= {minimum}")
    return n


# ---- constructors -----------------------------------------------------------------------------

def circulant(n: int, offsets: Sequence[int] = (1,), weights: Any = "metropolis",
              weight: float | None = None, iota: float | None = None) -> Graph:
    """Agent i linked to ``i +- o mod n`` for every offset o (paper 001: offsets (1, 2, 3))."""
    n = _check_n(n, 2)
    offs = sorted({int(o) % n for o in offsets} - {0})
    require(len(offs) > 0, "offsets", offsets, "at least one offset not divisible by n")
    A = np.zeros((n, n))
    idx = np.arange(n)
    for o in offs:
        A[idx, (idx + o) % n] = 1
        A[idx, (idx - o) % n] = 1
    return _from_adjacency(A, f"circulant{tuple(offs)}", weight if weight is not None else weights,
                           iota, {"offsets": offs})


def ring(n: int, weight: float | None = None, hops: int = 1, weights: Any = "metropolis") -> Graph:
    """Ring; ``hops`` > 1 links each agent to its ``hops`` nearest on each side.

    ``weight=c`` gives ``w_ij = c`` on every edge (paper 002's ``ring(10, weight=0.3)``)."""
    hops = positive_int("hops", hops)
    g = circulant(n, tuple(range(1, hops + 1)), weights=weights, weight=weight)
    g.name = f"ring({n})" if hops == 1 else f"ring({n}, hops={hops})"
    return g


def complete(n: int, weights: Any = "metropolis") -> Graph:
    """Every pair of agents linked."""
    n = _check_n(n)
    return _from_adjacency(np.ones((n, n)) - np.eye(n), f"complete({n})", weights)


def star(n: int, weights: Any = "metropolis") -> Graph:
    """Agent 0 linked to every other agent."""
    n = _check_n(n, 2)
    A = np.zeros((n, n))
    A[0, 1:] = A[1:, 0] = 1
    return _from_adjacency(A, f"star({n})", weights)


def path(n: int, weights: Any = "metropolis") -> Graph:
    """Agents 0-1-2-...-(n-1) in a line."""
    n = _check_n(n, 2)
    A = np.zeros((n, n))
    i = np.arange(n - 1)
    A[i, i + 1] = A[i + 1, i] = 1
    return _from_adjacency(A, f"path({n})", weights)


def grid(rows: int, cols: int, weights: Any = "metropolis") -> Graph:
    """2-d lattice of rows x cols agents (row-major numbering)."""
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    G = nx.grid_2d_graph(rows, cols)
    A = nx.to_numpy_array(G, nodelist=sorted(G.nodes()), weight=None)
    return _from_adjacency(A, f"grid({rows}x{cols})", weights)


def _redraw(n: int, seed: int, name: str, draw, weights: Any, max_attempts: int = 1000) -> Graph:
    for attempt in range(max_attempts):
        rng = np.random.default_rng([seed, attempt])
        A = draw(rng)
        if csgraph.connected_components(sp.csr_matrix(A), directed=False)[0] == 1:
            return _from_adjacency(A, name, weights, meta={"seed": seed, "attempts": attempt + 1})
    raise ParameterError(name, f"seed={seed}", f"no connected draw in {max_attempts} attempts",
                         "increase the edge probability or radius")


def erdos_renyi(n: int, p: float, seed: int = 0, weights: Any = "metropolis") -> Graph:
    """G(n, p), redrawn until connected (see module docstring)."""
    n = _check_n(n, 2)
    require(0 < p <= 1, "p", p, "0 < p <= 1")

    def draw(rng):
        U = rng.random((n, n))
        A = np.triu(U < p, 1).astype(np.float64)
        return A + A.T

    return _redraw(n, seed, f"erdos_renyi({n}, {p:g})", draw, weights)


def geometric(n: int, radius: float, seed: int = 0, weights: Any = "metropolis") -> Graph:
    """Random geometric graph in the unit square (Euclidean distance < radius), redrawn until
    connected; positions are kept in ``meta["positions"]``."""
    n = _check_n(n, 2)
    require(radius > 0, "radius", radius, "radius > 0")

    def draw(rng):
        pos = rng.random((n, 2))
        D = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
        A = (D <= radius).astype(np.float64)
        np.fill_diagonal(A, 0.0)
        draw.pos = pos
        return A

    g = _redraw(n, seed, f"geometric({n}, r={radius:g})", draw, weights)
    g.meta["positions"] = draw.pos.tolist()
    return g


def from_edges(n: int, edges: Iterable[tuple[int, int]], directed: bool = False,
               weights: Any = "metropolis") -> Graph:
    """Graph from an edge list; for directed graphs ``(i, j)`` means i sends to j and the weights
    are uniform over each agent's closed in-neighbourhood (row-stochastic) unless explicit."""
    n = _check_n(n)
    A = np.zeros((n, n))
    for i, j in edges:
        require(0 <= i < n and 0 <= j < n and i != j, "edge", (i, j), f"0 <= i != j < {n}")
        if directed:
            A[j, i] = 1
        else:
            A[i, j] = A[j, i] = 1
    if directed:
        if isinstance(weights, str) and weights == "metropolis":
            weights = "uniform"
        W, scheme = weights_from_adjacency(A, weights)
        return Graph(W, name=f"digraph({n})", scheme=scheme)
    return _from_adjacency(A, f"graph({n})", weights)


def from_weights(W: np.ndarray, name: str = "explicit") -> Graph:
    """Graph whose weight matrix is ``W`` (directed when W's support is asymmetric)."""
    return Graph(np.asarray(W, dtype=np.float64), name=name, scheme="explicit")


def from_networkx(G: nx.Graph, weights: Any = "metropolis", weight_attr: str = "weight") -> Graph:
    """From networkx: ``weights="attribute"`` reads edge attribute ``weight_attr`` and the node
    attribute ``self_weight`` (what :meth:`Graph.to_networkx` writes); any other value is a scheme."""
    nodes = sorted(G.nodes())
    index = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    if weights == "attribute":
        W = np.zeros((n, n))
        for u, v, data in G.edges(data=True):
            w = float(data.get(weight_attr, 1.0))
            if G.is_directed():
                W[index[v], index[u]] = w
            else:
                W[index[u], index[v]] = W[index[v], index[u]] = w
        for v in nodes:
            W[index[v], index[v]] = float(G.nodes[v].get("self_weight", 0.0))
        return Graph(W, name="networkx", scheme="explicit")
    A = nx.to_numpy_array(G, nodelist=nodes, weight=None)
    np.fill_diagonal(A, 0.0)
    if G.is_directed():
        return from_edges(n, [(index[u], index[v]) for u, v in G.edges()], directed=True,
                          weights=weights)
    return _from_adjacency(A, "networkx", weights)


CONSTRUCTORS = {
    "ring": ring, "circulant": circulant, "complete": complete, "star": star, "path": path,
    "grid": grid, "erdos_renyi": erdos_renyi, "geometric": geometric,
}


def from_spec(spec: dict) -> Graph:
    """Build a graph from a config table ``{"name": "ring", "n": 6, ...}``."""
    spec = dict(spec)
    name = spec.pop("name", None)
    if name == "explicit":
        return from_weights(np.asarray(spec["W"], dtype=np.float64))
    if name not in CONSTRUCTORS:
        raise UnknownNameError("graph", str(name), list(CONSTRUCTORS) + ["explicit"])
    if "offsets" in spec:
        spec["offsets"] = tuple(spec["offsets"])
    return CONSTRUCTORS[name](**spec)


# Directed pairs (R, C) of paper 003 live in their own module and are re-exported here.
from .digraphs import (  # noqa: E402, F401
    DirectedGraph,
    cwz_fig1,
    digraph,
    directed_ring,
    from_edge_lists,
    random_digraph,
)
