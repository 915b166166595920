"""The :class:`Graph` base: a sparse weight matrix and what algorithms ask of it.

Convention: ``W[i, j] != 0`` (i != j) means that agent i receives from agent j, so an update
``x_i <- sum_j W[i, j] x_j`` is one row of ``W @ X``. Undirected graphs have symmetric support.

Storage is sparse (a SciPy CSR array with explicit zeros removed, so the stored entries are the
support): constructors, checks and the network's operators cost O(n + edges). Dense views
(:attr:`Graph.W`, :attr:`Graph.laplacian`, :meth:`Graph.matrix`, ...) are there for small graphs
and for tests written against the papers' matrices; they refuse above :data:`DENSE_MAX` agents
with an error that names the sparse accessor. Spectral quantities come from
:mod:`dpnet.graphs.spectral` (exact dense LAPACK for small n, shift-invert Lanczos or Arnoldi
above) and are cached: a graph is immutable once built, except for :meth:`Graph.add_matrix`,
which only adds named matrices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError, UnknownNameError, require
from . import spectral

if TYPE_CHECKING:   # networkx and csgraph are imported where used: `import dpnet` stays fast
    import networkx as nx

_TOL = 1e-10
#: largest n for which a dense (n, n) view is handed out (128 MiB of float64)
DENSE_MAX = 4096


def as_sparse(M: Any, name: str = "W") -> sp.csr_array:
    """CSR float64 copy of a dense or sparse square matrix, explicit zeros removed."""
    S = sp.csr_array(M, dtype=np.float64, copy=True)
    require(S.ndim == 2 and S.shape[0] == S.shape[1], name, S.shape, "must be a square (n, n) array")
    require(bool(np.all(np.isfinite(S.data))), name, "array with non-finite entries", "all finite")
    S.sum_duplicates()
    S.eliminate_zeros()
    S.sort_indices()
    return S


def off_diagonal(S: sp.csr_array) -> sp.csr_array:
    """S without its diagonal (sparse, O(nnz))."""
    coo = S.tocoo()
    keep = coo.row != coo.col
    return sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=S.shape)


def support(S: sp.csr_array) -> sp.csr_array:
    """0/1 matrix of S's off-diagonal nonzeros."""
    off = off_diagonal(S)
    return sp.csr_array((np.ones_like(off.data), off.indices, off.indptr), shape=S.shape)


def laplacian_of(S: sp.csr_array) -> sp.csr_array:
    """``diag(sum_{j != i} s_ij) - S_offdiag`` (row sums)."""
    off = off_diagonal(S)
    return (sp.diags_array(np.asarray(off.sum(axis=1)).ravel()) - off).tocsr()


def _readonly(A: np.ndarray) -> np.ndarray:
    A.flags.writeable = False
    return A


#: the matrices every graph serves by name (:meth:`Graph.sparse`); :meth:`Graph.add_matrix` refuses
#: these names
BUILTIN_MATRICES = ("W", "L", "laplacian", "laplacian_like", "unweighted_laplacian", "I", "A")

class Graph:
    """A graph on agents ``0..n-1`` with a sparse weight matrix (and optional extra matrices).

    ``W`` may be given dense or sparse; it is stored as :attr:`weights` (CSR). ``g.W`` is the
    dense view (small n)."""

    def __init__(self, W: Any, name: str = "graph", scheme: str = "explicit",
                 meta: dict[str, Any] | None = None, matrices: dict[str, Any] | None = None) -> None:
        self.weights = as_sparse(W, "W")
        self.name, self.scheme = name, scheme
        self.meta: dict[str, Any] = dict(meta or {})
        self.matrices: dict[str, sp.csr_array] = {}
        self._cache: dict[str, Any] = {}
        #: first row of W when the constructor knows W is circulant (spectra by FFT), else None
        self.circulant_row: np.ndarray | None = None
        for key, M in (matrices or {}).items():
            self.add_matrix(key, M)

    # -- storage ----------------------------------------------------------------------------
    def _cached(self, key: str, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _dense(self, key: str, S: sp.sparray) -> np.ndarray:
        if self.n > DENSE_MAX:
            raise ParameterError(key, f"graph with n = {self.n}",
                                 f"a dense view only for n <= {DENSE_MAX}; use "
                                 f"graph.sparse({key!r}) (a SciPy CSR array)")
        return self._cached("dense:" + key, lambda: _readonly(S.toarray()))

    def sparse(self, name: str = "W") -> sp.csr_array:
        """A named matrix as a CSR array: ``W``, ``L``/``laplacian``, ``laplacian_like``,
        ``unweighted_laplacian``, ``I``, ``A`` (0/1 support), or one added by :meth:`add_matrix`."""
        if name in self.matrices:
            return self.matrices[name]
        builtin = {
            "W": lambda: self.weights,
            "L": lambda: self._cached("L", lambda: laplacian_of(self.weights)),
            "laplacian": lambda: self.sparse("L"),
            "laplacian_like": lambda: self._cached("laplacian_like", lambda: -self.sparse("L")),
            "unweighted_laplacian": lambda: self._cached(
                "unweighted_laplacian", lambda: laplacian_of(self.support_matrix)),
            "I": lambda: sp.identity(self.n, format="csr"),
            "A": lambda: self.support_matrix,
        }
        if name not in builtin:
            raise UnknownNameError("matrix", name, list(builtin) + list(self.matrices))
        return builtin[name]()

    def matrix(self, name: str) -> np.ndarray:
        """A named matrix, dense (small n): see :meth:`sparse` for the names."""
        return self._dense(name, self.sparse(name))

    def add_matrix(self, name: str, M: Any) -> Graph:
        """Register ``M`` (dense or sparse, ``(n, n)``, finite) under ``name``, for :meth:`sparse`,
        :meth:`matrix` and the network's ``exchange(..., matrix=name)``/``mix``: its off-diagonal nonzeros
        must lie on the graph's edges (raises :class:`~dpnet.errors.ParameterError` otherwise). Replaces a
        matrix registered under the same name; returns the graph, so calls chain."""
        # a built-in name would be served from matrices while weights, support and caches stay
        require(name not in BUILTIN_MATRICES, "name", name,
                f"a name that is not a built-in matrix ({', '.join(BUILTIN_MATRICES)})")
        S = as_sparse(M, f"matrices[{name!r}]")
        require(S.shape == (self.n, self.n), f"matrices[{name!r}]", S.shape,
                f"shape ({self.n}, {self.n})")
        outside = support(S) - support(S).multiply(self.support_matrix)
        require(outside.nnz == 0, f"matrices[{name!r}]", "support",
                "nonzero off-diagonal entries only on the graph's edges (neighbour-sparse)")
        self.matrices[name] = S
        self._cache.pop("dense:" + name, None)   # a re-registered name must not serve the old view
        return self

    # -- structure --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of agents (nodes)."""
        return self.weights.shape[0]

    @property
    def W(self) -> np.ndarray:
        """Dense, read-only ``(n, n)`` weight matrix (n <= DENSE_MAX)."""
        return self._dense("W", self.weights)

    @property
    def support_matrix(self) -> sp.csr_array:
        """Sparse 0/1 matrix: ``A[i, j] = 1`` iff i receives from j (i != j)."""
        return self._cached("support", lambda: support(self.weights))

    @property
    def adjacency(self) -> np.ndarray:
        """Dense 0/1 :attr:`support_matrix` (small n)."""
        return self._dense("A", self.support_matrix)

    @property
    def n_edges(self) -> int:
        """Number of edges (undirected: each counted once; directed: arcs)."""
        A = self.support_matrix
        return int(A.nnz if self.directed else A.nnz // 2)

    @property
    def directed(self) -> bool:
        """Whether the support is asymmetric: some agent receives from one that does not receive from it
        (the weights' values do not count). Cached."""
        def make():
            A = self.support_matrix
            return bool((A != A.T).nnz)
        return self._cached("directed", make)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """Edges as (i, j) pairs; undirected graphs list each edge once with i < j, directed ones
        as (sender, receiver)."""
        A = self.support_matrix.tocoo()
        if self.directed:
            order = np.lexsort((A.col, A.row))  # receiver-major, as a dense row scan lists them
            return list(zip(A.col[order].tolist(), A.row[order].tolist()))
        upper = A.row < A.col
        r, c = A.row[upper], A.col[upper]
        order = np.lexsort((c, r))
        return list(zip(r[order].tolist(), c[order].tolist()))

    @property
    def degrees(self) -> np.ndarray:
        """In-degree of each agent (number of agents it receives from)."""
        return np.asarray(self.support_matrix.sum(axis=1), dtype=np.float64).ravel()

    def out_degrees(self, matrix: str = "W") -> np.ndarray:
        """Number of receivers of each agent's broadcast under ``matrix``'s support."""
        return np.asarray(support(self.sparse(matrix)).sum(axis=0), dtype=np.float64).ravel()

    def neighbors(self, i: int) -> list[int]:
        """In-neighbours of agent i."""
        A = self.support_matrix
        return A.indices[A.indptr[i]:A.indptr[i + 1]].tolist()

    # -- derived matrices (dense views, small n) ---------------------------------------------
    @property
    def laplacian(self) -> np.ndarray:
        """Weighted Laplacian ``diag(sum_{j != i} w_ij) - W_offdiag`` (``I - W`` when W is
        row-stochastic)."""
        return self.matrix("L")

    @property
    def laplacian_like(self) -> np.ndarray:
        """Paper 002's convention: off-diagonal ``w_ij``, diagonal ``w_ii = -sum_j w_ij``
        (the negative weighted Laplacian); the mixing matrix is ``I + laplacian_like``."""
        return self.matrix("laplacian_like")

    @property
    def unweighted_laplacian(self) -> np.ndarray:
        """Dense Laplacian of the 0/1 support, ``diag(in-degree) - A`` (small n): the weights ignored."""
        return self.matrix("unweighted_laplacian")

    # -- checks (O(edges)) ------------------------------------------------------------------
    def row_sums(self, which: str = "W") -> np.ndarray:
        """``(n,)`` row sums of a named matrix (default W; names as in :meth:`sparse`), diagonal included:
        each agent's total in-weight."""
        return np.asarray(self.sparse(which).sum(axis=1)).ravel()

    def column_sums(self, which: str = "W") -> np.ndarray:
        """``(n,)`` column sums of a named matrix (default W; names as in :meth:`sparse`), diagonal
        included: column j is the total weight the agents put on agent j's value, its own included."""
        return np.asarray(self.sparse(which).sum(axis=0)).ravel()

    def is_symmetric(self, tol: float = _TOL) -> bool:
        """Whether W equals its transpose, entrywise to ``tol`` (default 1e-10)."""
        D = self.weights - self.weights.T
        return bool(D.nnz == 0 or abs(D).max() <= tol)

    def is_row_stochastic(self, tol: float = _TOL) -> bool:
        """Whether every row of W sums to 1, to ``tol`` (default 1e-10); the signs of the entries are not
        checked (:meth:`is_nonnegative`)."""
        return bool(np.all(np.abs(self.row_sums() - 1) <= tol))

    def is_column_stochastic(self, tol: float = _TOL) -> bool:
        """Whether every column of W sums to 1, to ``tol`` (default 1e-10); the signs of the entries are
        not checked (:meth:`is_nonnegative`)."""
        return bool(np.all(np.abs(self.column_sums() - 1) <= tol))

    def is_doubly_stochastic(self, tol: float = _TOL) -> bool:
        """Whether every row and every column of W sums to 1, to ``tol`` (default 1e-10); the signs of the
        entries are not checked (:meth:`is_nonnegative`)."""
        return self.is_row_stochastic(tol) and self.is_column_stochastic(tol)

    def is_nonnegative(self, tol: float = _TOL) -> bool:
        """Whether no stored entry of W (diagonal included) is below ``-tol`` (default 1e-10)."""
        return bool(self.weights.nnz == 0 or self.weights.data.min() >= -tol)

    def components(self) -> int:
        """Number of (strongly) connected components."""
        if self.n == 1:
            return 1
        import scipy.sparse.csgraph as csgraph

        return int(csgraph.connected_components(self.support_matrix, directed=True,
                                                connection="strong")[0])

    def is_connected(self) -> bool:
        """Connected (undirected) or strongly connected (directed)."""
        return self.components() == 1

    # -- spectral quantities (cached) --------------------------------------------------------
    def _symmetric_ds(self) -> bool:
        return self.is_symmetric() and self.is_doubly_stochastic()

    def gap_sides(self) -> tuple[float, float] | None:
        """``(1 - lambda_2(W), 1 + lambda_min(W))`` of a symmetric doubly stochastic W, each
        computed without cancellation (see :func:`dpnet.graphs.spectral.gap_sides`); None
        otherwise. Cached."""
        return self._cached("gap_sides", lambda: spectral.gap_sides(
            self.weights, self.is_symmetric(), self.is_doubly_stochastic(), self.circulant_row))

    def consensus_contraction(self) -> float:
        """``rho(W - 11^T/n)``: the spectral radius of W on the disagreement subspace (closed
        form or one FFT for circulant weights, LAPACK for n <= 256, shift-invert Lanczos /
        Arnoldi above; see :mod:`dpnet.graphs.spectral`)."""
        return self._cached("rho", lambda: spectral.consensus_contraction(
            self.weights, self.is_symmetric(), self.is_doubly_stochastic(), self.circulant_row))

    def spectral_gap(self) -> float:
        """``1 - rho(W - 11^T/n)``; positive iff consensus by W converges (paper 000's rho).
        For symmetric doubly stochastic W it is ``min`` of :meth:`gap_sides`, accurate even
        where it is far below the rounding of 1 (large rings)."""
        sides = self.gap_sides()
        return min(sides) if sides is not None else 1.0 - self.consensus_contraction()

    def laplacian_eigenvalues(self) -> np.ndarray:
        """Every eigenvalue of the weighted Laplacian, sorted (small n)."""
        return self._cached("laplacian_eigenvalues", lambda: spectral.eigenvalues(
            self.sparse("L"), self.is_symmetric()))

    def _laplacian_extremes(self) -> tuple[float, float]:
        L = self.sparse("L")
        if not self.is_symmetric():
            ev = self.laplacian_eigenvalues()
            return float(ev[0]), float(ev[-1])
        radius = float(abs(L).sum(axis=1).max()) if L.nnz else 0.0
        return self._cached("laplacian_extremes",
                            lambda: spectral.symmetric_extremes(L, 0.0, radius))

    def largest_laplacian_eigenvalue(self) -> float:
        """Largest eigenvalue of the weighted Laplacian L (:attr:`laplacian`). For symmetric W: exact
        (LAPACK) for n <= 256, shift-invert Lanczos above, cached; otherwise the largest real part of L's
        eigenvalues (dense, n <= 256 only)."""
        return self._laplacian_extremes()[1]

    def smallest_nonzero_laplacian_eigenvalue(self, tol: float = 1e-9) -> float:
        """Smallest eigenvalue of the weighted Laplacian above ``tol``: for a connected undirected graph,
        the algebraic connectivity ``lambda_2(L)``.

        For n <= 256 or a nonsymmetric W, from the whole spectrum (real parts; a nonsymmetric W only up to
        n = 256). Above, for symmetric W, the second smallest eigenvalue by shift-invert Lanczos (cached),
        which requires a connected graph (:meth:`require_connected`) and does not read ``tol``."""
        if self.n <= spectral.DENSE_SPECTRAL_MAX or not self.is_symmetric():
            ev = self.laplacian_eigenvalues()
            require(bool(np.any(ev > tol)), "graph", self.name, f"a Laplacian eigenvalue above "
                    f"tol = {tol:g} (every one is 0 to tol: one agent, or no weighted edge)")
            return float(np.min(ev[ev > tol]))
        self.require_connected()
        return self._cached("algebraic_connectivity",
                            lambda: spectral.laplacian_second_smallest(self.sparse("L")))

    # -- requirements used by algorithms -----------------------------------------------------
    def require_connected(self) -> None:
        """Raise :class:`~dpnet.errors.ParameterError` unless the graph is connected (strongly connected
        when directed); the message gives the number of components."""
        kind = "strongly connected" if self.directed else "connected"
        ncomp = self.components()
        if ncomp != 1:
            raise ParameterError("graph", self.name, f"the graph must be {kind}",
                                 f"it has {ncomp} components")

    def require_doubly_stochastic(self, who: str = "this algorithm") -> None:
        """Raise :class:`~dpnet.errors.ParameterError` naming ``who`` unless W is doubly stochastic
        (:meth:`is_doubly_stochastic`; the message gives the ranges of the row and column sums) and
        nonnegative (:meth:`is_nonnegative`)."""
        rows, cols = self.row_sums(), self.column_sums()
        if not self.is_doubly_stochastic():
            raise ParameterError(
                "graph.W", f"{self.name} (row sums in [{rows.min():.4g}, {rows.max():.4g}], "
                f"column sums in [{cols.min():.4g}, {cols.max():.4g}])",
                f"{who} needs a doubly stochastic W (W1 = 1 and 1^T W = 1^T)")
        require(self.is_nonnegative(), "graph.W",
                f"{self.name} (min entry {self.weights.data.min():.4g})",
                f"{who} needs nonnegative weights")

    def require_mixing(self, who: str = "this algorithm") -> None:
        """Doubly stochastic, connected and ``rho = 1 - rho(W - 11^T/n) > 0``."""
        self.require_doubly_stochastic(who)
        self.require_connected()
        sides = self.gap_sides()
        if sides is not None and sides[0] <= 0:
            raise ParameterError("graph.W", self.name, f"{who} needs rho = 1 - rho(W - 11^T/n) > 0",
                                 f"the graph is connected but 1 - lambda_2(W) = {sides[0]:.3g} is "
                                 "not resolved in float64 (too many agents for this topology)")
        # a connected symmetric W has 1 - lambda_2 > 0 exactly; the only other way to fail is an
        # eigenvalue at -1, which rounding leaves a few ulp away from it
        gap = sides[1] if sides is not None else self.spectral_gap()
        if gap <= 1e-12:
            raise ParameterError(
                "graph.W", self.name,
                f"{who} needs rho = 1 - rho(W - 11^T/n) > 0, got {self.spectral_gap():.3g}",
                "W has an eigenvalue -1 on the disagreement space (a zero-diagonal W on a "
                "bipartite graph does this); add self-weights, e.g. Metropolis weights")

    # -- conversions ------------------------------------------------------------------------
    def to_networkx(self) -> nx.Graph | nx.DiGraph:
        """A ``nx.Graph`` when W is symmetric, else a ``nx.DiGraph`` (edge j -> i carrying
        ``W[i, j]``), so asymmetric weights on a symmetric support (row-stochastic schemes)
        survive the round trip through ``from_networkx(weights="attribute")``."""
        directed = not self.is_symmetric()
        import networkx as nx

        G = nx.DiGraph() if directed else nx.Graph()
        G.add_nodes_from(range(self.n))
        off = off_diagonal(self.weights).tocoo()
        for i, j, w in zip(off.row.tolist(), off.col.tolist(), off.data.tolist()):
            if directed:
                G.add_edge(j, i, weight=w)  # i receives from j
            elif i < j:
                G.add_edge(i, j, weight=w)
        for i, w in enumerate(self.weights.diagonal().tolist()):
            G.nodes[i]["self_weight"] = w
        return G

    def summary(self) -> dict[str, Any]:
        """What a report states about the graph: ``name``, ``n``, ``edges``, ``directed``, the weight
        ``scheme``, ``connected``, the ``spectral_gap`` (undirected graphs only) and the entries of
        ``meta``."""
        out = {"name": self.name, "n": self.n, "edges": self.n_edges, "directed": self.directed,
               "scheme": self.scheme, "connected": self.is_connected()}
        if not self.directed:
            out["spectral_gap"] = self.spectral_gap()
        out.update(self.meta)
        return out

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return f"Graph({self.name!r}, n={self.n}, {self.n_edges} {kind} edges, weights={self.scheme})"
