"""Graphs: constructors, weight schemes, derived matrices, spectra, checks, conversions."""

import networkx as nx
import numpy as np
import pytest

from dpnet import graphs
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.graphs.base import BUILTIN_MATRICES


def _ring_adjacency(n):
    A = np.zeros((n, n))
    for i in range(n):
        A[i, (i + 1) % n] = A[i, (i - 1) % n] = 1
    return A


def _metropolis(A):
    """Metropolis-Hastings weights written entry by entry."""
    n = len(A)
    deg = A.sum(1)
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j and A[i, j]:
                W[i, j] = 1.0 / (1.0 + max(deg[i], deg[j]))
        W[i, i] = 1.0 - W[i].sum()
    return W


# ---- constructors -----------------------------------------------------------------------------

@pytest.mark.parametrize("make, n, edges", [
    (lambda: graphs.ring(7), 7, 7),
    (lambda: graphs.ring(10, hops=2), 10, 20),
    (lambda: graphs.circulant(20, offsets=(1, 2, 3)), 20, 60),
    (lambda: graphs.complete(5), 5, 10),
    (lambda: graphs.star(6), 6, 5),
    (lambda: graphs.path(5), 5, 4),
    (lambda: graphs.grid(3, 4), 12, 17),
    (lambda: graphs.erdos_renyi(12, 0.3, seed=1), 12, None),
    (lambda: graphs.geometric(15, 0.4, seed=2), 15, None),
    (lambda: graphs.from_edges(4, [(0, 1), (1, 2), (2, 3)]), 4, 3),
])
def test_constructors_give_connected_metropolis_graphs(make, n, edges):
    g = make()
    assert g.n == n
    assert not g.directed and g.is_symmetric() and g.is_connected()
    if edges is not None:
        assert len(g.edges) == edges
    np.testing.assert_allclose(g.W, _metropolis(g.adjacency), atol=1e-15)
    assert g.is_doubly_stochastic()
    assert np.all(g.W >= 0)
    g.require_mixing()


def test_ring_and_circulant_neighbours():
    g = graphs.ring(6)
    assert g.neighbors(0) == [1, 5]
    assert np.array_equal(g.adjacency, _ring_adjacency(6))
    c = graphs.circulant(8, offsets=(1, 3))
    assert c.neighbors(0) == [1, 3, 5, 7]
    assert np.array_equal(c.degrees, np.full(8, 4.0))
    # hops=2 is the circulant with offsets (1, 2)
    assert np.array_equal(graphs.ring(9, hops=2).W, graphs.circulant(9, (1, 2)).W)


def test_star_path_grid_complete_degrees():
    assert graphs.star(5).degrees.tolist() == [4, 1, 1, 1, 1]
    assert graphs.path(4).degrees.tolist() == [1, 2, 2, 1]
    assert sorted(graphs.grid(3, 3).degrees.tolist()) == [2, 2, 2, 2, 3, 3, 3, 3, 4]
    W = graphs.complete(4).W
    np.testing.assert_allclose(W, np.full((4, 4), 0.25))  # Metropolis on K_n is 11^T/n


def test_from_edges_directed_is_row_stochastic_and_strongly_connected():
    g = graphs.from_edges(3, [(0, 1), (1, 2), (2, 0)], directed=True)
    assert g.directed
    # (i, j) means i sends to j: agent 1 receives from 0
    assert g.neighbors(1) == [0]
    np.testing.assert_allclose(g.W.sum(1), 1.0)
    assert g.is_connected()
    assert g.edges == [(2, 0), (0, 1), (1, 2)]
    assert g.out_degrees().tolist() == [1, 1, 1]
    chain = graphs.from_edges(3, [(0, 1), (1, 2)], directed=True)
    assert not chain.is_connected()


def test_from_weights_keeps_W_and_detects_direction():
    W = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    g = graphs.from_weights(W)
    assert g.directed and g.is_doubly_stochastic() and g.scheme == "explicit"
    assert np.array_equal(g.W, W)


# ---- weight schemes ---------------------------------------------------------------------------

def test_metropolis_is_doubly_stochastic_on_irregular_graphs():
    for g in (graphs.star(7), graphs.path(6), graphs.erdos_renyi(20, 0.2, seed=4),
              graphs.geometric(25, 0.35, seed=5)):
        assert g.is_doubly_stochastic(tol=1e-13)
        assert g.is_symmetric(tol=0)
    # star(n): centre degree n-1 so every edge weight is 1/n, centre self-weight 1/n
    W = graphs.star(5).W
    np.testing.assert_allclose(W[0], [0.2] * 5)
    np.testing.assert_allclose(W[1], [0.2, 0.8, 0, 0, 0])


def test_constant_weight_ring_laplacian_like():
    g = graphs.ring(10, weight=0.3)
    assert g.scheme == "constant(0.3)"
    off = g.W - np.diag(np.diag(g.W))
    assert set(np.unique(off)) == {0.0, 0.3}
    np.testing.assert_allclose(np.diag(g.W), 0.4)
    LL = g.laplacian_like
    np.testing.assert_allclose(np.diag(LL), -0.6, atol=1e-15)
    np.testing.assert_allclose(LL - np.diag(np.diag(LL)), off)
    np.testing.assert_allclose(LL.sum(1), 0.0, atol=1e-15)
    ev = np.linalg.eigvalsh(LL)
    # eigenvalues -0.3 (2 - 2 cos(2 pi k / 10)) fill [-1.2, 0]
    assert ev.min() == pytest.approx(-1.2, abs=1e-12)
    assert ev.max() == pytest.approx(0.0, abs=1e-12)
    hand = np.sort(-0.3 * (2 - 2 * np.cos(2 * np.pi * np.arange(10) / 10)))
    np.testing.assert_allclose(ev, hand, atol=1e-12)
    np.testing.assert_allclose(np.eye(10) + LL, g.W, atol=1e-15)


def test_laplacian_scheme_is_I_minus_L_over_iota():
    g = graphs.star(5, weights="laplacian")  # default iota = d_max + 1 = 5
    L = g.unweighted_laplacian
    np.testing.assert_allclose(g.W, np.eye(5) - L / 5.0)
    assert g.scheme == "I-L/5"
    h = graphs.circulant(8, (1, 2), weights="laplacian", iota=10)
    np.testing.assert_allclose(h.W, np.eye(8) - h.unweighted_laplacian / 10)
    assert h.is_doubly_stochastic()
    with pytest.raises(ParameterError, match="iota"):
        graphs.circulant(6, (1,), weights="laplacian", iota=2)


def test_explicit_and_uniform_schemes():
    A = _ring_adjacency(5)
    W = _metropolis(A)
    Wx, scheme = graphs.weights_from_adjacency(A, W)
    assert scheme == "explicit" and np.array_equal(Wx, W)
    Wu, scheme = graphs.weights_from_adjacency(graphs.star(4).adjacency, "uniform")
    np.testing.assert_allclose(Wu.sum(1), 1.0)
    assert not np.allclose(Wu.sum(0), 1.0)  # row-stochastic only
    with pytest.raises(UnknownNameError, match="metropolis"):
        graphs.weights_from_adjacency(A, "nope")


# ---- spectra ----------------------------------------------------------------------------------

def test_spectral_gap_against_closed_forms():
    # ring(n) with Metropolis weights 1/3: eigenvalues 1/3 + 2/3 cos(2 pi k / n)
    for n in (5, 10, 11):
        lam = 1 / 3 + 2 / 3 * np.cos(2 * np.pi * np.arange(1, n) / n)
        assert graphs.ring(n).spectral_gap() == pytest.approx(1 - np.abs(lam).max(), abs=1e-12)
    assert graphs.ring(10).spectral_gap() == pytest.approx(0.12732200375003505, abs=1e-12)
    assert graphs.complete(6).spectral_gap() == pytest.approx(1.0, abs=1e-12)
    g = graphs.erdos_renyi(15, 0.3, seed=3)
    J = np.full((15, 15), 1 / 15)
    rho = np.abs(np.linalg.eigvalsh(g.W - J)).max()
    assert g.consensus_contraction() == pytest.approx(rho, abs=1e-12)
    assert g.spectral_gap() == pytest.approx(1 - rho, abs=1e-12)


def test_laplacian_and_its_largest_eigenvalue():
    g = graphs.ring(10)
    np.testing.assert_allclose(g.laplacian, np.eye(10) - g.W, atol=1e-15)
    # I - W on the Metropolis ring: 2/3 (1 - cos(2 pi k/n)), largest 4/3 for even n
    assert g.largest_laplacian_eigenvalue() == pytest.approx(4 / 3, abs=1e-12)
    # weighted star with edge weight 1/n: eigenvalues 0, 1/n (n-2 times), 1
    s = graphs.star(6)
    np.testing.assert_allclose(s.laplacian_eigenvalues(), [0] + [1 / 6] * 4 + [1], atol=1e-12)
    assert s.largest_laplacian_eigenvalue() == pytest.approx(1.0, abs=1e-12)
    assert s.smallest_nonzero_laplacian_eigenvalue() == pytest.approx(1 / 6, abs=1e-12)
    # constant-weight ring: Laplacian = -laplacian_like, largest eigenvalue 4c
    assert graphs.ring(10, weight=0.3).largest_laplacian_eigenvalue() == pytest.approx(1.2)
    np.testing.assert_allclose(g.unweighted_laplacian, 2 * np.eye(10) - _ring_adjacency(10))


def test_matrix_lookup_and_add_matrix():
    g = graphs.ring(5)
    assert np.array_equal(g.matrix("W"), g.W)
    assert np.array_equal(g.matrix("L"), g.laplacian)
    assert np.array_equal(g.matrix("I"), np.eye(5))
    g.add_matrix("P", g.laplacian * 2)
    assert np.array_equal(g.matrix("P"), 2 * g.laplacian)
    with pytest.raises(UnknownNameError, match="laplacian_like"):
        g.matrix("nope")
    bad = np.zeros((5, 5))
    bad[0, 2] = 1.0  # not an edge of the ring
    with pytest.raises(ParameterError, match="neighbour-sparse"):
        g.add_matrix("Q", bad)


# ---- checks -----------------------------------------------------------------------------------

def test_connectivity_checks():
    B = np.zeros((4, 4))
    B[:2, :2] = B[2:, 2:] = 0.5
    g = graphs.from_weights(B)
    assert g.is_doubly_stochastic() and not g.is_connected()
    with pytest.raises(ParameterError, match="must be connected.*2 components"):
        g.require_connected()
    with pytest.raises(ParameterError, match="connected"):
        g.require_mixing()


def test_zero_diagonal_bipartite_W_is_rejected_by_require_mixing():
    W = 0.5 * _ring_adjacency(4)  # doubly stochastic, w_ii = 0, bipartite: eigenvalue -1
    g = graphs.from_weights(W)
    assert g.is_doubly_stochastic() and g.is_connected()
    assert g.spectral_gap() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ParameterError, match=r"rho = 1 - rho\(W - 11\^T/n\) > 0") as err:
        g.require_mixing("DiaDSP")
    assert err.value.name == "graph.W"
    assert "bipartite" in str(err.value)


def test_require_doubly_stochastic_reports_sums_and_sign():
    g = graphs.from_edges(4, [(0, 1), (1, 2), (2, 3)], weights="uniform")
    with pytest.raises(ParameterError, match="doubly stochastic") as err:
        g.require_doubly_stochastic("DGD")
    # column sums: 1/2 + 1/3 (agent 0) and 1/2 + 1/3 + 1/3 (agent 1)
    assert "column sums in [0.8333, 1.167]" in str(err.value)
    neg = graphs.ring(4, weight=0.6)  # self-weight 1 - 2*0.6 < 0
    assert neg.is_doubly_stochastic()
    with pytest.raises(ParameterError, match="nonnegative"):
        neg.require_doubly_stochastic()


# ---- random graphs ----------------------------------------------------------------------------

def test_random_graphs_are_deterministic_in_the_seed_and_redrawn_until_connected():
    a, b = graphs.erdos_renyi(12, 0.2, seed=7), graphs.erdos_renyi(12, 0.2, seed=7)
    assert np.array_equal(a.W, b.W) and a.meta == b.meta
    assert not np.array_equal(a.W, graphs.erdos_renyi(12, 0.2, seed=8).W)
    sparse = graphs.erdos_renyi(10, 0.1, seed=0)  # G(10, 0.1) is rarely connected
    assert sparse.meta["attempts"] > 1 and sparse.is_connected()
    # attempt a is the draw of np.random.default_rng([seed, a])
    rng = np.random.default_rng([0, sparse.meta["attempts"] - 1])
    A = np.triu(rng.random((10, 10)) < 0.1, 1).astype(float)
    assert np.array_equal(sparse.adjacency, A + A.T)

    g1, g2 = graphs.geometric(30, 0.2, seed=3), graphs.geometric(30, 0.2, seed=3)
    assert np.array_equal(g1.W, g2.W) and g1.meta["positions"] == g2.meta["positions"]
    assert g1.meta["attempts"] > 1 and g1.is_connected()
    pos = np.asarray(g1.meta["positions"])
    D = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    assert np.array_equal(g1.adjacency, ((D <= 0.2) & ~np.eye(30, dtype=bool)).astype(float))
    with pytest.raises(ParameterError, match="no connected draw"):
        graphs.erdos_renyi(30, 0.001, seed=0)


# ---- conversions ------------------------------------------------------------------------------

@pytest.mark.parametrize("g", [
    graphs.ring(6), graphs.erdos_renyi(9, 0.4, seed=2), graphs.ring(10, weight=0.3),
    graphs.from_edges(4, [(0, 1), (1, 2), (2, 0), (2, 3)], weights="uniform"),
    graphs.from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], directed=True),
])
def test_networkx_round_trip(g):
    G = g.to_networkx()
    back = graphs.from_networkx(G, weights="attribute")
    np.testing.assert_array_equal(back.W, g.W)
    assert back.directed == g.directed


def test_from_networkx_with_a_scheme():
    G = nx.cycle_graph(["a", "b", "c", "d", "e"])
    g = graphs.from_networkx(G)
    np.testing.assert_allclose(g.W, graphs.ring(5).W)
    D = nx.DiGraph([(0, 1), (1, 2), (2, 0)])
    d = graphs.from_networkx(D)
    assert d.directed and d.neighbors(1) == [0]


def test_from_spec_and_summary():
    g = graphs.from_spec({"name": "circulant", "n": 8, "offsets": [1, 2]})
    assert np.array_equal(g.W, graphs.circulant(8, (1, 2)).W)
    s = graphs.ring(10).summary()
    assert s["n"] == 10 and s["edges"] == 10 and s["connected"]
    assert s["spectral_gap"] == pytest.approx(0.1273220037500351)
    with pytest.raises(UnknownNameError, match="ring"):
        graphs.from_spec({"name": "torus", "n": 4})


@pytest.mark.parametrize("call, name", [
    (lambda: graphs.ring(1), "n"),
    (lambda: graphs.ring(5, hops=0), "hops"),
    (lambda: graphs.circulant(4, offsets=(4,)), "offsets"),
    (lambda: graphs.erdos_renyi(5, 0.0), "p"),
    (lambda: graphs.geometric(5, -0.1), "radius"),
    (lambda: graphs.ring(5, weight=-0.1), "weight"),
    (lambda: graphs.from_edges(3, [(0, 3)]), "edge"),
    (lambda: graphs.from_weights(np.ones((2, 3))), "W"),
])
def test_constructor_bad_inputs(call, name):
    with pytest.raises(ParameterError) as err:
        call()
    assert err.value.name == name


def test_watts_strogatz_lattice_rewiring_and_networkx_law():
    lattice = graphs.watts_strogatz(12, k=4, p=0.0)
    np.testing.assert_array_equal(lattice.W, graphs.circulant(12, offsets=(1, 2)).W)
    g = graphs.watts_strogatz(30, k=4, p=0.3, seed=2)
    A = (g.W != 0) & ~np.eye(30, dtype=bool)
    assert A.sum() // 2 == 30 * 4 // 2                     # rewiring keeps the edge count
    np.testing.assert_allclose(g.W.sum(1), 1.0)            # Metropolis weights: stochastic
    # the share of rewired lattice edges matches networkx's law (each edge w.p. p)
    ours, theirs = [], []
    lattice_edges = {(u, (u + j) % 30) for u in range(30) for j in (1, 2)}
    lattice_edges = {tuple(sorted(e)) for e in lattice_edges}
    for s in range(40):
        A = (graphs.watts_strogatz(30, k=4, p=0.3, seed=s).W != 0)
        ours.append(sum(not A[u, v] for u, v in lattice_edges) / len(lattice_edges))
        G = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=s)
        theirs.append(sum(not G.has_edge(u, v) for u, v in lattice_edges) / len(lattice_edges))
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.03
    with pytest.raises(ParameterError, match="even number"):
        graphs.watts_strogatz(10, k=3)
    assert graphs.from_spec({"name": "watts_strogatz", "n": 10, "k": 4, "p": 0.2}).n == 10


def test_add_matrix_refuses_a_built_in_name_and_every_built_in_name_is_served():
    """A matrix added as "W" would be served by sparse("W") while the weights, the support and
    every cached spectral quantity stayed the old ones: refused, naming the built-in names."""
    g = graphs.ring(5)
    for name in BUILTIN_MATRICES:
        assert g.sparse(name).shape == (5, 5)
        with pytest.raises(ParameterError, match=f"name='{name}' violates"):
            g.add_matrix(name, g.sparse("W"))
    g.add_matrix("P", g.sparse("W"))                 # any other name is fine
    assert (g.sparse("P") != g.sparse("W")).nnz == 0


def test_a_graph_without_a_nonzero_laplacian_eigenvalue_says_so():
    with pytest.raises(ParameterError, match="a Laplacian eigenvalue above tol"):
        graphs.complete(1).smallest_nonzero_laplacian_eigenvalue()
    assert graphs.ring(6).smallest_nonzero_laplacian_eigenvalue() > 0
