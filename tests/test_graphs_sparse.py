"""Sparse graphs: checks and spectral quantities equal the dense ones; large graphs stay sparse."""

import numpy as np
import pytest
import scipy.sparse as sp

from dpnet import graphs
from dpnet.errors import ParameterError
from dpnet.graphs import spectral

SMALL = [
    lambda: graphs.ring(40),
    lambda: graphs.ring(41, hops=3),
    lambda: graphs.grid(6, 7),
    lambda: graphs.erdos_renyi(45, 0.1, seed=3),
    lambda: graphs.geometric(50, 0.3, seed=1),
    lambda: graphs.star(30),
    lambda: graphs.path(33),
    lambda: graphs.circulant(36, (1, 5), weights="laplacian"),
    lambda: graphs.ring(30, weight=0.3),
]


def _dense_rho(W):
    n = len(W)
    return np.abs(np.linalg.eigvals(W - np.full((n, n), 1.0 / n))).max()


@pytest.fixture
def iterative(monkeypatch):
    """Force the iterative (large-n) spectral path on small graphs."""
    monkeypatch.setattr(spectral, "DENSE_SPECTRAL_MAX", 4)


@pytest.mark.parametrize("make", SMALL)
def test_iterative_spectral_quantities_equal_dense(make, iterative):
    g = make()
    W = g.weights.toarray()
    rho = _dense_rho(W)
    g.circulant_row = None   # the FFT shortcut is tested below: here the Lanczos path
    assert g.consensus_contraction() == pytest.approx(rho, abs=1e-10)
    ev = np.linalg.eigvalsh(np.diag(W.sum(1) - np.diag(W)) - (W - np.diag(np.diag(W))))
    assert g.largest_laplacian_eigenvalue() == pytest.approx(ev[-1], abs=1e-10)
    assert g.smallest_nonzero_laplacian_eigenvalue() == pytest.approx(ev[1], rel=1e-8)


@pytest.mark.parametrize("n, offsets", [(50, (1,)), (64, (1, 2, 3)), (37, (2, 7))])
def test_circulant_fft_spectrum_equals_dense(n, offsets):
    for weights in ("metropolis", "laplacian", 0.1):
        g = graphs.circulant(n, offsets, weights=weights)
        assert g.circulant_row is not None
        assert g.consensus_contraction() == pytest.approx(_dense_rho(g.weights.toarray()),
                                                          abs=1e-13)


def test_explicit_weights_are_not_assumed_circulant():
    W = graphs.ring(8).weights.toarray()
    W[0, 1] = W[1, 0] = 0.5
    W[0, 0] = W[1, 1] = 1 / 6
    g = graphs.circulant(8, (1,), weights=W)
    assert g.circulant_row is None
    assert g.spectral_gap() == pytest.approx(1 - _dense_rho(W), abs=1e-12)


def test_nonsymmetric_deflated_arnoldi_equals_dense(iterative):
    # a doubly stochastic but nonsymmetric W: 0.5 I + 0.5 P for a directed cycle permutation P
    n = 30
    W = 0.5 * np.eye(n) + 0.5 * np.roll(np.eye(n), 1, axis=1)
    W[[0, 0, 1, 1], [1, 2, 2, 3]] += [0.1, -0.1, -0.1, 0.1]   # break the circulant structure
    W[[0, 0, 1, 1], [0, 1, 1, 2]] += 0.0
    g = graphs.from_weights(W)
    assert g.consensus_contraction() == pytest.approx(_dense_rho(W), abs=1e-9)


@pytest.mark.parametrize("make", SMALL + [graphs.cwz_fig1, lambda: graphs.random_digraph(20, 0.2)])
def test_sparse_checks_equal_dense(make):
    g = make()
    W = g.weights.toarray()
    A = (np.abs(W) > 0).astype(float)
    if isinstance(g, graphs.DirectedGraph):        # the support is the union of R's and C's
        A = ((A > 0) | (g.C > 0)).astype(float)
    np.fill_diagonal(A, 0)
    np.testing.assert_array_equal(g.adjacency, A)
    np.testing.assert_array_equal(g.degrees, A.sum(1))
    Aw = (np.abs(W) > 0).astype(float)
    np.fill_diagonal(Aw, 0)
    np.testing.assert_array_equal(g.out_degrees(), Aw.sum(0))
    assert g.is_symmetric() == bool(np.allclose(W, W.T, atol=1e-10, rtol=0))
    assert g.is_row_stochastic() == bool(np.all(np.abs(W.sum(1) - 1) <= 1e-10))
    assert g.is_column_stochastic() == bool(np.all(np.abs(W.sum(0) - 1) <= 1e-10))
    assert g.directed == (not np.array_equal(A, A.T))
    Woff = W - np.diag(np.diag(W))
    np.testing.assert_allclose(g.laplacian, np.diag(Woff.sum(1)) - Woff, atol=1e-15)
    assert g.n_edges == (int(A.sum()) if g.directed else int(A.sum()) // 2)
    for i in range(g.n):
        assert g.neighbors(i) == np.nonzero(A[i])[0].tolist()


@pytest.mark.parametrize("make", [graphs.cwz_fig1, lambda: graphs.random_digraph(25, 0.15, seed=2),
                                  lambda: graphs.directed_ring(12, c_reversed=True)])
def test_directed_lemma1_iterative_equals_dense(make, monkeypatch):
    g = make()
    v1, v2 = g.v1, g.v2
    alpha, beta = 0.5 * g.alpha_max(), 0.5 * g.beta_max()
    r_dense = g.rates(alpha, beta)
    h = make()
    monkeypatch.setattr(spectral, "DENSE_SPECTRAL_MAX", 2)
    np.testing.assert_allclose(h.v1, v1, atol=1e-10)
    np.testing.assert_allclose(h.v2, v2, atol=1e-10)
    np.testing.assert_allclose(h.rates(alpha, beta), r_dense, rtol=1e-8)


def test_roots_by_condensation_equal_reachability():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(2, 12))
        M = (rng.random((n, n)) < 0.2).astype(float)
        np.fill_diagonal(M, 0)
        reach = np.linalg.matrix_power(np.eye(n) + M, n) > 0   # reach[i, j]: j reaches i
        expected = [r for r in range(n) if reach[:, r].all()]
        assert graphs.directed._roots(M) == expected


def test_large_graphs_are_built_sparse_and_refuse_dense_views():
    n = 200_000
    g = graphs.ring(n)
    assert isinstance(g.weights, sp.csr_array) and g.weights.nnz == 3 * n
    assert g.is_doubly_stochastic() and g.is_connected() and g.n_edges == n
    lam = (2 / 3) * (1 - np.cos(2 * np.pi / n))          # closed form of the ring's gap
    assert g.spectral_gap() == pytest.approx(lam, rel=1e-6)
    with pytest.raises(ParameterError, match=r"graph.sparse\('W'\)"):
        _ = g.W
    grid = graphs.grid(300, 300)
    assert grid.n_edges == 2 * 300 * 299 and grid.is_connected()
    # Lanczos on the grid's Laplacian against its closed form 2 sin^2-sum (Metropolis is not
    # uniform on the boundary, so compare the unweighted Laplacian instead)
    L = grid.sparse("unweighted_laplacian")
    lam2 = spectral.laplacian_second_smallest(L)
    assert lam2 == pytest.approx(4 * np.sin(np.pi / 600) ** 2, rel=1e-6)


def test_large_random_graphs_sample_edges_directly():
    n, p = 20_000, 8e-4
    g = graphs.erdos_renyi(n, p, seed=1)
    m, mean = g.n_edges, p * n * (n - 1) / 2
    assert abs(m - mean) < 5 * np.sqrt(mean)
    A = g.support_matrix
    assert (A != A.T).nnz == 0 and A.diagonal().sum() == 0
    h = graphs.geometric(n, 0.02, seed=0)
    pos = np.asarray(h.meta["positions"])
    i, j = h.support_matrix.nonzero()
    assert np.all(np.linalg.norm(pos[i] - pos[j], axis=1) <= 0.02)
    d = graphs.random_digraph(5000, 2e-4, seed=4)
    assert d.satisfies_assumption1() and d.is_connected()


def test_dense_view_is_read_only():
    g = graphs.ring(5)
    with pytest.raises(ValueError):
        g.W[0, 0] = 3.0


@pytest.mark.parametrize("n", [10, 1000, 100_000, 3_000_000])
def test_ring_gap_is_accurate_far_below_the_rounding_of_one(n):
    # 1 - rho would cancel to ~1e-16 absolute; the closed form keeps full relative accuracy
    g = graphs.ring(n)
    exact = (2 / 3) * 2 * np.sin(np.pi / n) ** 2
    assert g.spectral_gap() == pytest.approx(exact, rel=1e-12)
    if n >= 100_000:
        g.require_mixing("DiaDSP")        # refused at n = 10^7 when the gap came from 1 - rho


def test_lanczos_gap_sides_equal_dense_on_a_non_circulant_graph(iterative):
    g = graphs.grid(9, 11)
    L = np.eye(g.n) - g.weights.toarray()
    ev = np.linalg.eigvalsh(L)
    low, high = g.gap_sides()
    assert low == pytest.approx(ev[1], rel=1e-9) and high == pytest.approx(2 - ev[-1], rel=1e-9)
