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

Everything is sparse and O(edges) except the rates at large n (Arnoldi on the deflated operator,
:mod:`dpnet.graphs.spectral`). The underlying :class:`~dpnet.graphs.Graph` has ``W = R`` (so
``graph.laplacian`` is ``L1``) and the union of both edge sets as its support; bits are charged
per matrix (an exchange under ``matrix="C"`` reaches C's out-neighbours only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# csgraph and scipy.sparse.linalg are imported in the functions that use them, so that `import dpnet`
# stays within 0.5 s of `import torch` (benchmarks/bench_startup.py)
import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError, positive_int, require
from . import spectral
from .base import Graph, as_sparse, laplacian_of, off_diagonal, support
from .undirected import _edge_array

_DENSE_DRAW_MAX = 2048


def _weights(name: str, M: Any, n: int | None = None) -> sp.csr_array:
    S = as_sparse(M, name)
    if n is not None:
        require(S.shape[0] == n, name, S.shape, f"shape ({n}, {n}) like R")
    require(bool(S.nnz == 0 or S.data.min() >= 0), name,
            f"min entry {S.data.min() if S.nnz else 0:.4g}",
            "nonnegative weights (paper 003, Section II-A)")
    return off_diagonal(S)


def _roots(M: Any) -> list[int]:
    """Agents from which every agent is reachable in ``G_M`` (edge j -> i iff M[i, j] > 0).

    O(edges): the roots are the members of the strongly connected component that is the only
    source of the condensation (every component of a DAG is reached from some source, so with a
    single source it reaches everything; with several, nobody reaches all)."""
    S = support(sp.csr_array(M, dtype=np.float64))
    n = S.shape[0]
    if n == 1:
        return [0]
    import scipy.sparse.csgraph as csgraph

    ncomp, label = csgraph.connected_components(S, directed=True, connection="strong")
    coo = S.tocoo()                       # (i, j): edge j -> i
    cross = label[coo.row] != label[coo.col]
    has_input = np.zeros(ncomp, dtype=bool)
    has_input[label[coo.row[cross]]] = True
    sources = np.flatnonzero(~has_input)
    if sources.size != 1:
        return []
    return np.flatnonzero(label == sources[0]).tolist()


class DirectedGraph(Graph):
    """A pair of digraphs ``G_R``, ``G_C`` on the same n agents (see the module docstring)."""

    def __init__(self, R: Any, C: Any | None = None, name: str = "digraph",
                 scheme: str = "explicit", meta: dict[str, Any] | None = None) -> None:
        Rs = _weights("R", R)
        Cs = Rs.copy() if C is None else _weights("C", C, Rs.shape[0])
        self._union = support(Rs) + support(Cs)
        super().__init__(Rs, name=name, scheme=scheme, meta=meta)
        self.add_matrix("R", Rs).add_matrix("C", Cs)
        self.add_matrix("L1", laplacian_of(Rs))
        self.add_matrix("L2", (sp.diags_array(np.asarray(Cs.sum(axis=0)).ravel()) - Cs).tocsr())

    # -- structure --------------------------------------------------------------------------
    @property
    def support_matrix(self) -> sp.csr_array:
        """Union of both edge sets: ``A[i, j] = 1`` iff i receives anything from j."""
        return self._cached("support", lambda: support(self._union))

    @property
    def directed(self) -> bool:
        """Always True: a pair of digraphs, whatever the symmetry of their supports."""
        return True

    @property
    def R(self) -> np.ndarray:
        """Dense ``(n, n)`` state weights R, zero diagonal: ``R[i, j] > 0`` iff agent i receives j's state
        (small n)."""
        return self.matrix("R")

    @property
    def C(self) -> np.ndarray:
        """Dense ``(n, n)`` tracking weights C, zero diagonal: ``C[i, j] > 0`` iff agent i receives j's
        tracking variable (small n)."""
        return self.matrix("C")

    @property
    def in_laplacian(self) -> np.ndarray:
        """``L1 = diag(R 1) - R``."""
        return self.matrix("L1")

    @property
    def out_laplacian(self) -> np.ndarray:
        """``L2 = diag(1^T C) - C``."""
        return self.matrix("L2")

    def row_sums(self, which: str = "R") -> np.ndarray:
        """``sum_{j in N^-_i} M_ij`` for every agent i (the factors of Appendix F)."""
        require(which in ("R", "C", "W"), "which", which, "'R', 'C' or 'W'")
        return super().row_sums(which)

    # -- Assumption 1 -----------------------------------------------------------------------
    def roots(self, which: str = "R") -> list[int]:
        """Roots of spanning trees of ``G_R`` (``"R"``) or of ``G_{C^T}`` (``"C^T"``)."""
        require(which in ("R", "C^T"), "which", which, "'R' or 'C^T'")
        return self._cached("roots:" + which, lambda: _roots(
            self.sparse("R") if which == "R" else self.sparse("C").T))

    def common_roots(self) -> list[int]:
        """The agents that root spanning trees of both ``G_R`` and ``G_{C^T}`` (Assumption 1's common
        roots), sorted; empty when there is none."""
        return sorted(set(self.roots("R")) & set(self.roots("C^T")))

    def satisfies_assumption1(self) -> bool:
        """Whether Assumption 1 holds: ``G_R`` and ``G_{C^T}`` contain spanning trees with a common root
        (:meth:`require_assumption1` raises with the reason instead)."""
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
        d = self.row_sums("R").max()
        return float("inf") if d == 0 else float(1.0 / d)

    def beta_max(self) -> float:
        """Largest beta with ``I - beta L2 >= 0`` entrywise: ``1 / max_j sum_i C_ij``."""
        d = self.column_sums("C").max()
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
        return self._cached("v1", lambda: spectral.null_vector(self.sparse("L1").T.tocsr(),
                                                               self.n, "v1"))

    @property
    def v2(self) -> np.ndarray:
        """Right null vector of L2 (``(I - beta L2) v2 = v2``), ``1^T v2 = n``."""
        self.require_assumption1("v2")
        return self._cached("v2", lambda: spectral.null_vector(self.sparse("L2"), self.n, "v2"))

    def rates(self, alpha: float, beta: float) -> tuple[float, float]:
        """``(r_L1, r_L2)`` of Lemma 1 at these step sizes (exact for n <= 256, Arnoldi with
        relative tolerance :data:`dpnet.graphs.spectral.TOLERANCE` above)."""
        self.require_nonnegative(alpha, beta)
        n, one = self.n, np.ones(self.n)
        I = sp.identity(n, format="csr")
        M1, M2 = I - alpha * self.sparse("L1"), I - beta * self.sparse("L2")
        v1, v2 = self.v1, self.v2
        if n <= spectral.DENSE_SPECTRAL_MAX:
            rho1 = float(np.max(np.abs(np.linalg.eigvals(M1.toarray() - np.outer(one, v1) / n))))
            rho2 = float(np.max(np.abs(np.linalg.eigvals(M2.toarray() - np.outer(v2, one) / n))))
        else:
            import scipy.sparse.linalg as spla

            op1 = spla.LinearOperator((n, n), dtype=np.float64,
                                      matvec=lambda x: M1 @ np.ravel(x) - one * (v1 @ np.ravel(x)) / n)
            op2 = spla.LinearOperator((n, n), dtype=np.float64,
                                      matvec=lambda x: M2 @ np.ravel(x) - v2 * np.ravel(x).sum() / n)
            rho1, rho2 = spectral.spectral_radius(op1), spectral.spectral_radius(op2)
        return (1.0 - rho1) / alpha, (1.0 - rho2) / beta

    def summary(self) -> dict[str, Any]:
        """:meth:`Graph.summary <dpnet.graphs.base.Graph.summary>` plus the arc counts of R and C
        (``edges_R``, ``edges_C``) and the roots of ``G_R`` and ``G_{C^T}`` (``roots_R``, ``roots_CT``)."""
        out = super().summary()
        out.update({"edges_R": int(self.sparse("R").nnz), "edges_C": int(self.sparse("C").nnz),
                    "roots_R": self.roots("R"), "roots_CT": self.roots("C^T")})
        return out

    def __repr__(self) -> str:
        return (f"DirectedGraph({self.name!r}, n={self.n}, {self.sparse('R').nnz} R-edges, "
                f"{self.sparse('C').nnz} C-edges)")


# ---- constructors -----------------------------------------------------------------------------

def _matrix_from_edges(n: int, edges: Iterable[tuple[int, int]], weights: str | float,
                       what: str) -> sp.csr_array:
    """``(s, r)``: r receives from s, i.e. ``M[r, s] > 0``. ``weights``: ``"in"`` (each agent
    splits weight 1 over its in-neighbours: rows sum to 1), ``"out"`` (each sender splits weight
    1 over its out-neighbours: columns sum to 1) or a constant."""
    E = _edge_array(n, edges, f"{what} edge")
    A = sp.csr_array((np.ones(len(E)), (E[:, 1], E[:, 0])), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1.0
    if weights in ("in", "out"):
        axis = 1 if weights == "in" else 0
        deg = np.asarray(A.sum(axis=axis)).ravel()
        inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
        D = sp.diags_array(inv)
        return (D @ A if weights == "in" else A @ D).tocsr()
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
    r_edges = _edge_array(n, r_edges, "R edge")
    R = _matrix_from_edges(n, r_edges, r_weights, "R")
    C = _matrix_from_edges(n, r_edges if c_edges is None else c_edges, c_weights, "C")
    return DirectedGraph(R, C, name=name or f"digraph({n})",
                         scheme=f"R:{r_weights}, C:{c_weights}")


def digraph(R: Any, C: Any | None = None, name: str = "explicit") -> DirectedGraph:
    """Explicit nonnegative matrices, dense or sparse (``C=None``: C = R)."""
    return DirectedGraph(R, C, name=name)


def directed_ring(n: int, r_weights: str | float = "in", c_weights: str | float = "out",
                  c_reversed: bool = False) -> DirectedGraph:
    """Agent i receives from i-1 (mod n) in both graphs (``c_reversed``: C runs the other way)."""
    n = positive_int("n", n)
    require(n >= 2, "n", n, "n >= 2")
    i = np.arange(n)
    ring = np.stack([i, (i + 1) % n], axis=1)
    c_edges = ring[:, ::-1] if c_reversed else ring
    return from_edge_lists(n, ring, c_edges, r_weights, c_weights,
                           name=f"directed_ring({n}{', C reversed' if c_reversed else ''})")


def _random_strong_edges(n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """A random Hamiltonian cycle (strong connectivity) plus each other arc with probability p.
    Up to 2048 agents the arcs come from n x n coin flips (the stream earlier versions used),
    above from a Binomial count of uniformly chosen arcs (the same law, O(n + edges))."""
    order = rng.permutation(n)
    cycle = np.stack([order, np.roll(order, -1)], axis=1)
    if n <= _DENSE_DRAW_MAX:
        s, r = np.nonzero(rng.random((n, n)) < p)
    else:
        m = int(rng.binomial(n * n, p))
        flat = rng.choice(n * n, size=m, replace=False)
        s, r = flat // n, flat % n
    extra = np.stack([s, r], axis=1)[s != r]
    return np.unique(np.concatenate([cycle, extra]), axis=0)


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
