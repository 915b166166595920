"""Undirected graphs and their weight schemes, built sparse in O(n + edges).

Weight schemes (all doubly stochastic when valid):

* ``"metropolis"`` (default): ``w_ij = 1 / (1 + max(deg_i, deg_j))`` on edges, ``w_ii = 1 - sum``.
* ``"constant"``: ``w_ij = c`` on every edge, ``w_ii = 1 - deg_i * c`` (paper 002 writes the ring
  with ``c = 0.3``; its Laplacian-like matrix is :attr:`Graph.laplacian_like`).
* ``"laplacian"``: ``W = I - L / iota`` with the unweighted Laplacian ``L`` and ``iota > d_max``
  (paper 001's suggestion).
* ``"uniform"``: ``1 / (deg_i + 1)`` on the closed neighbourhood (row-stochastic only).
* an explicit ``(n, n)`` array (dense or SciPy sparse).

Random constructors (:func:`erdos_renyi`, :func:`geometric`) redraw a disconnected sample: attempt
``a`` uses the seed sequence ``(seed, a)``, so the result is a deterministic function of ``seed``;
the number of attempts is stored in ``graph.meta["attempts"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError, UnknownNameError, positive_int, require
from ..registry import Registry, resolve
from .base import Graph

if TYPE_CHECKING:   # networkx, scipy.spatial and csgraph are imported where used (import time)
    import networkx as nx

#: above this many agents the random constructors draw edges without forming an n x n array
_DENSE_DRAW_MAX = 2048


def _symmetric_support(n: int, rows: np.ndarray, cols: np.ndarray) -> sp.csr_array:
    """Sparse symmetric 0/1 matrix with the given (i, j) edges (duplicates and loops dropped)."""
    keep = rows != cols
    r, c = np.concatenate([rows[keep], cols[keep]]), np.concatenate([cols[keep], rows[keep]])
    A = sp.csr_array((np.ones(r.size), (r, c)), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1.0
    return A


def _closed(off: sp.csr_array, diagonal: np.ndarray) -> sp.csr_array:
    return (off + sp.diags_array(diagonal)).tocsr()


def weights_from_adjacency(A: Any, weights: str | float | np.ndarray = "metropolis",
                           iota: float | None = None) -> tuple[Any, str]:
    """Weight matrix for a symmetric 0/1 adjacency under a named scheme: sparse (CSR) for a
    sparse adjacency, a dense array for a dense one."""
    W, scheme = _sparse_weights(sp.csr_array(A, dtype=np.float64), weights, iota)
    return (W if sp.issparse(A) else W.toarray()), scheme


def _sparse_weights(A: sp.csr_array, weights: Any, iota: float | None) -> tuple[sp.csr_array, str]:
    n = A.shape[0]
    deg = np.asarray(A.sum(axis=1)).ravel()
    if isinstance(weights, np.ndarray | list) or sp.issparse(weights):
        W = sp.csr_array(np.asarray(weights, dtype=np.float64) if not sp.issparse(weights)
                         else weights, dtype=np.float64)
        require(W.shape == (n, n), "weights", W.shape, f"an explicit W must have shape ({n}, {n})")
        return W, "explicit"
    if isinstance(weights, int | float) and not isinstance(weights, bool):
        c = float(weights)
        require(c > 0, "weight", c, "weight > 0")
        return _closed(c * A, 1.0 - deg * c), f"constant({c:g})"
    if weights == "metropolis":
        coo = A.tocoo()
        w = 1.0 / (1.0 + np.maximum(deg[coo.row], deg[coo.col]))
        off = sp.csr_array((w, (coo.row, coo.col)), shape=(n, n))
        return _closed(off, 1.0 - np.asarray(off.sum(axis=1)).ravel()), "metropolis"
    if weights == "laplacian":
        dmax = float(deg.max()) if n else 0.0
        iota = float(dmax + 1 if iota is None else iota)
        require(iota > dmax, "iota", iota, f"iota > d_max = {dmax:g}")
        return _closed(A / iota, 1.0 - deg / iota), f"I-L/{iota:g}"
    if weights == "uniform":  # 1/(deg+1) on the closed neighbourhood: row-stochastic only
        inv = 1.0 / (deg + 1.0)
        return _closed(sp.diags_array(inv) @ A, inv), "uniform"
    raise UnknownNameError("weight scheme", str(weights), ["metropolis", "laplacian", "uniform",
                                                          "<float>", "<array>"])


def _from_adjacency(A: Any, name: str, weights: Any = "metropolis", iota: float | None = None,
                    meta: dict | None = None) -> Graph:
    W, scheme = _sparse_weights(sp.csr_array(A, dtype=np.float64), weights, iota)
    return Graph(W, name=name, scheme=scheme, meta=dict(meta or {}))


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
    idx = np.arange(n)
    rows = np.tile(idx, len(offs))
    cols = np.concatenate([(idx + o) % n for o in offs])
    g = _from_adjacency(_symmetric_support(n, rows, cols), f"circulant{tuple(offs)}",
                        weight if weight is not None else weights, iota, {"offsets": offs})
    scheme = weight if weight is not None else weights
    if isinstance(scheme, str | int | float):
        # every agent has the same degree, so every named scheme gives the same weights on
        # every row, shifted: W is circulant and its spectrum is one FFT of its first row
        g.circulant_row = g.weights[[0], :].toarray().ravel()
    return g


def ring(n: int, weight: float | None = None, hops: int = 1, weights: Any = "metropolis") -> Graph:
    """Ring; ``hops`` > 1 links each agent to its ``hops`` nearest on each side.

    ``weight=c`` gives ``w_ij = c`` on every edge (paper 002's ``ring(10, weight=0.3)``)."""
    hops = positive_int("hops", hops)
    g = circulant(n, tuple(range(1, hops + 1)), weights=weights, weight=weight)
    g.name = f"ring({n})" if hops == 1 else f"ring({n}, hops={hops})"
    return g


def complete(n: int, weights: Any = "metropolis") -> Graph:
    """Every pair of agents linked (n^2 entries: dense by nature)."""
    n = _check_n(n)
    return _from_adjacency(np.ones((n, n)) - np.eye(n), f"complete({n})", weights)


def star(n: int, weights: Any = "metropolis") -> Graph:
    """Agent 0 linked to every other agent."""
    n = _check_n(n, 2)
    leaves = np.arange(1, n)
    return _from_adjacency(_symmetric_support(n, np.zeros_like(leaves), leaves), f"star({n})",
                           weights)


def path(n: int, weights: Any = "metropolis") -> Graph:
    """Agents 0-1-2-...-(n-1) in a line."""
    n = _check_n(n, 2)
    i = np.arange(n - 1)
    return _from_adjacency(_symmetric_support(n, i, i + 1), f"path({n})", weights)


def grid(rows: int, cols: int, weights: Any = "metropolis") -> Graph:
    """2-d lattice of rows x cols agents (row-major numbering)."""
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    idx = np.arange(rows * cols).reshape(rows, cols)
    r = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    c = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return _from_adjacency(_symmetric_support(rows * cols, r, c), f"grid({rows}x{cols})", weights)


def _connected(A: sp.csr_array) -> bool:
    import scipy.sparse.csgraph as csgraph

    return csgraph.connected_components(A, directed=False)[0] == 1


def _redraw(n: int, seed: int, name: str, draw, weights: Any, max_attempts: int = 1000) -> Graph:
    for attempt in range(max_attempts):
        rng = np.random.default_rng([seed, attempt])
        A = draw(rng)
        if _connected(A):
            return _from_adjacency(A, name, weights, meta={"seed": seed, "attempts": attempt + 1})
    raise ParameterError(name, f"seed={seed}", f"no connected draw in {max_attempts} attempts",
                         "increase the edge probability or radius")


def _random_pairs(n: int, p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each of the n(n-1)/2 pairs i < j independently with probability p, in O(n + edges):
    the number of pairs is Binomial, the pairs a uniform sample without replacement of the
    linear pair indices (the same law as n^2/2 coin flips, a different stream)."""
    total = n * (n - 1) // 2
    m = int(rng.binomial(total, p))
    flat = rng.choice(total, size=m, replace=False) if m else np.zeros(0, dtype=np.int64)
    def start(i):  # linear index of the pair (i, i + 1)
        return i * n - i * (i + 1) // 2

    i = (n - 0.5 - np.sqrt((n - 0.5) ** 2 - 2.0 * flat)).astype(np.int64)
    i -= start(i) > flat            # the float root may land one row off either way
    i += start(i + 1) <= flat
    j = flat - start(i) + i + 1
    return i, j


def erdos_renyi(n: int, p: float, seed: int = 0, weights: Any = "metropolis") -> Graph:
    """G(n, p), redrawn until connected (see the module docstring). Up to 2048 agents the draw
    flips n x n coins (the stream earlier dpnet versions used); above, it samples the edge set
    directly in O(n + edges)."""
    n = _check_n(n, 2)
    require(0 < p <= 1, "p", p, "0 < p <= 1")

    def draw(rng):
        if n <= _DENSE_DRAW_MAX:
            U = rng.random((n, n))
            r, c = np.nonzero(np.triu(U < p, 1))
        else:
            r, c = _random_pairs(n, p, rng)
        return _symmetric_support(n, r, c)

    return _redraw(n, seed, f"erdos_renyi({n}, {p:g})", draw, weights)


def geometric(n: int, radius: float, seed: int = 0, weights: Any = "metropolis") -> Graph:
    """Random geometric graph in the unit square (Euclidean distance <= radius), redrawn until
    connected; positions are kept in ``meta["positions"]``. Neighbours come from a k-d tree:
    O(n log n + edges)."""
    n = _check_n(n, 2)
    require(radius > 0, "radius", radius, "radius > 0")

    drawn: dict[str, np.ndarray] = {}                   # the positions of the latest draw

    def draw(rng):
        pos = rng.random((n, 2))
        from scipy.spatial import cKDTree

        pairs = cKDTree(pos).query_pairs(radius, output_type="ndarray")
        drawn["pos"] = pos
        return _symmetric_support(n, pairs[:, 0], pairs[:, 1])

    g = _redraw(n, seed, f"geometric({n}, r={radius:g})", draw, weights)
    g.meta["positions"] = drawn["pos"].tolist()
    return g


def watts_strogatz(n: int, k: int = 4, p: float = 0.1, seed: int = 0,
                   weights: Any = "metropolis") -> Graph:
    """Watts & Strogatz (1998) small world, redrawn until connected (networkx's
    ``connected_watts_strogatz_graph``): the ring lattice where each agent links to its ``k/2``
    nearest neighbours on each side, then each lattice edge ``(u, u + j)`` (u in order, j = 1 ..
    k/2) is rewired with probability ``p`` to ``(u, w)``, w uniform among the agents that are
    neither u nor already its neighbours. The edge count stays ``n k / 2``; ``p = 0`` is the
    lattice (``circulant(n, offsets=range(1, k/2 + 1))``)."""
    n = _check_n(n, 3)
    k = positive_int("k", k)
    require(k % 2 == 0 and 2 <= k < n, "k", k, f"an even number of neighbours in [2, n = {n})")
    require(0 <= p <= 1, "p", p, "0 <= p <= 1")

    def draw(rng):
        nbrs = [set() for _ in range(n)]
        for u in range(n):
            for j in range(1, k // 2 + 1):
                nbrs[u].add((u + j) % n)
                nbrs[(u + j) % n].add(u)
        for j in range(1, k // 2 + 1):     # networkx's order: by offset, then by agent
            for u in range(n):
                v = (u + j) % n
                if rng.random() < p and len(nbrs[u]) < n - 1:
                    free = np.setdiff1d(np.arange(n), [u, *nbrs[u]])
                    w = int(free[rng.integers(free.size)])
                    nbrs[u].discard(v)
                    nbrs[v].discard(u)
                    nbrs[u].add(w)
                    nbrs[w].add(u)
        r = np.array([u for u in range(n) for v in nbrs[u] if u < v], dtype=np.int64)
        c = np.array([v for u in range(n) for v in nbrs[u] if u < v], dtype=np.int64)
        return _symmetric_support(n, r, c)

    return _redraw(n, seed, f"watts_strogatz({n}, k={k}, p={p:g})", draw, weights)


def _edge_array(n: int, edges: Iterable[tuple[int, int]], what: str = "edge") -> np.ndarray:
    """(m, 2) int array of edges, each checked ``0 <= i != j < n``."""
    E = np.asarray(list(edges) if not isinstance(edges, np.ndarray) else edges, dtype=np.int64)
    E = E.reshape(-1, 2)
    bad = (E[:, 0] < 0) | (E[:, 0] >= n) | (E[:, 1] < 0) | (E[:, 1] >= n) | (E[:, 0] == E[:, 1])
    if bad.any():
        i, j = E[np.argmax(bad)]
        require(False, what, (int(i), int(j)), f"0 <= i != j < {n}")
    return E


def from_edges(n: int, edges: Iterable[tuple[int, int]], directed: bool = False,
               weights: Any = "metropolis") -> Graph:
    """Graph from an edge list; for directed graphs ``(i, j)`` means i sends to j and the weights
    are uniform over each agent's closed in-neighbourhood (row-stochastic) unless explicit."""
    n = _check_n(n)
    E = _edge_array(n, edges)
    if directed:
        A = sp.csr_array((np.ones(len(E)), (E[:, 1], E[:, 0])), shape=(n, n))
        A.sum_duplicates()
        A.data[:] = 1.0
        if isinstance(weights, str) and weights == "metropolis":
            weights = "uniform"
        W, scheme = _sparse_weights(A, weights, None)
        return Graph(W, name=f"digraph({n})", scheme=scheme)
    return _from_adjacency(_symmetric_support(n, E[:, 0], E[:, 1]), f"graph({n})", weights)


def from_weights(W: Any, name: str = "explicit") -> Graph:
    """Graph whose weight matrix is ``W`` (dense or sparse; directed when its support is
    asymmetric)."""
    return Graph(W, name=name, scheme="explicit")


def from_networkx(G: nx.Graph, weights: Any = "metropolis", weight_attr: str = "weight") -> Graph:
    """From networkx: ``weights="attribute"`` reads edge attribute ``weight_attr`` and the node
    attribute ``self_weight`` (what :meth:`Graph.to_networkx` writes); any other value is a scheme."""
    nodes = sorted(G.nodes())
    index = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    pairs = np.asarray([(index[u], index[v]) for u, v in G.edges()], dtype=np.int64).reshape(-1, 2)
    if weights == "attribute":
        w = np.asarray([float(d.get(weight_attr, 1.0)) for _, _, d in G.edges(data=True)])
        loop = pairs[:, 0] == pairs[:, 1]   # a self-weight is the node attribute, not a loop
        pairs, w = pairs[~loop], w[~loop]
        r, c = pairs[:, 1], pairs[:, 0]     # edge u -> v: v receives from u
        if not G.is_directed():
            r, c, w = np.concatenate([r, c]), np.concatenate([c, r]), np.concatenate([w, w])
        diag = np.asarray([float(G.nodes[v].get("self_weight", 0.0)) for v in nodes])
        W = sp.csr_array((w, (r, c)), shape=(n, n)) + sp.diags_array(diag)
        return Graph(W, name="networkx", scheme="explicit")
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    if G.is_directed():
        return from_edges(n, pairs, directed=True, weights=weights)
    return _from_adjacency(_symmetric_support(n, pairs[:, 0], pairs[:, 1]), "networkx", weights)


#: the named graph constructors of a configuration's ``[graph]`` table
CONSTRUCTORS: Registry = Registry("graph", "dpnet.graphs")
for _fn in (ring, circulant, complete, star, path, grid, erdos_renyi, geometric,
            watts_strogatz):
    CONSTRUCTORS.register(_fn.__name__, _fn)


def from_spec(spec: dict) -> Graph:
    """Build a graph from a config table ``{"name": "ring", "n": 6, ...}``, or by a user's
    factory: ``{"name": "package.module:factory", ...}`` calls ``factory(**rest)``, which must
    return a :class:`Graph`."""
    spec = dict(spec)
    name = spec.pop("name", None)
    if isinstance(name, str) and ":" in name:
        graph = resolve(name, "graph.name")(**spec)
        require(isinstance(graph, Graph), "graph.name", name, "a factory returning a Graph")
        return graph
    if name == "explicit":
        require("W" in spec, "graph.W", None, "an explicit weight matrix, W = [[...], ...]")
        try:
            W = np.asarray(spec["W"], dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError("graph.W", spec["W"], "a square matrix of numbers (rows of "
                                 "equal length)") from None
        return from_weights(W)
    if not isinstance(name, str) or name not in CONSTRUCTORS:
        raise UnknownNameError("graph", str(name), list(CONSTRUCTORS) + ["explicit"])
    if "offsets" in spec:
        spec["offsets"] = tuple(spec["offsets"])
    return CONSTRUCTORS[name](**spec)
