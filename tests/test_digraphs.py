"""Directed pairs (R, C) of paper 003: Laplacians, Assumption 1, Lemma 1, constructors, network."""

import numpy as np
import pytest
import torch

from dpnet import graphs
from dpnet.errors import ParameterError
from dpnet.graphs import directed
from dpnet.network import Network


def test_reexported_from_graphs():
    assert graphs.DirectedGraph is directed.DirectedGraph
    assert graphs.cwz_fig1 is directed.cwz_fig1


def test_cwz_fig1_matrices_written_out():
    g = graphs.cwz_fig1()
    R = np.zeros((5, 5))
    # R: i averages its in-neighbours; edges 0->1, 1->2, 2->3, 3->4, 4->0, 0->2, 2->4
    R[1, 0] = 1.0
    R[2, 1] = R[2, 0] = 0.5
    R[3, 2] = 1.0
    R[4, 3] = R[4, 2] = 0.5
    R[0, 4] = 1.0
    C = np.zeros((5, 5))
    # C: j splits over its out-neighbours; edges 1->0, 2->1, 3->2, 4->3, 0->4, 1->3, 3->0
    C[0, 1] = C[3, 1] = 0.5
    C[1, 2] = 1.0
    C[2, 3] = C[0, 3] = 0.5
    C[3, 4] = 1.0
    C[4, 0] = 1.0
    np.testing.assert_array_equal(g.R, R)
    np.testing.assert_array_equal(g.C, C)
    np.testing.assert_allclose(g.in_laplacian, np.diag(R.sum(1)) - R)
    np.testing.assert_allclose(g.out_laplacian, np.diag(C.sum(0)) - C)
    assert g.common_roots() == [0, 1, 2, 3, 4]
    assert g.directed and g.is_connected()
    np.testing.assert_allclose(g.row_sums("C"), [1.0, 1.0, 0.5, 1.5, 1.0])
    assert g.alpha_max() == 1.0 and g.beta_max() == 1.0
    # W is R (so the Graph Laplacian is L1) and the registered matrices are the paper's
    np.testing.assert_allclose(g.laplacian, g.in_laplacian)
    np.testing.assert_allclose(g.matrix("L2"), g.out_laplacian)


def test_diagonal_is_ignored_and_negative_rejected():
    R = np.array([[5.0, 1.0], [2.0, 7.0]])
    g = graphs.digraph(R)
    np.testing.assert_array_equal(g.R, [[0.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(g.C, g.R)
    with pytest.raises(ParameterError, match="nonnegative"):
        graphs.digraph([[0.0, -1.0], [1.0, 0.0]])
    with pytest.raises(ParameterError, match="square"):
        graphs.digraph(np.ones((2, 3)))
    with pytest.raises(ParameterError, match="shape"):
        graphs.digraph(np.ones((2, 2)), np.ones((3, 3)))


def test_assumption1_no_spanning_tree():
    R = np.zeros((4, 4))
    R[1, 0] = R[3, 2] = 1.0          # 0->1 and 2->3: two components, nobody reaches everyone
    g = graphs.digraph(R, graphs.directed_ring(4).C)
    assert g.roots("R") == []
    with pytest.raises(ParameterError, match="G_R has no spanning tree"):
        g.require_assumption1()


def test_assumption1_roots_without_common_root():
    path = [(0, 1), (1, 2)]
    g = graphs.from_edge_lists(3, path, path)
    assert g.roots("R") == [0]         # 0 reaches everyone along R
    assert g.roots("C^T") == [2]       # everyone reaches 2 along C
    with pytest.raises(ParameterError, match="none in common"):
        g.require_assumption1("DirectedDPGT")
    with pytest.raises(ParameterError, match="Assumption 1"):
        _ = g.v1


def test_spanning_tree_but_not_strongly_connected():
    # G_R: 0->1, 0->2, 1->2 (root 0); G_C: 1->0, 2->0, 2->1 (everyone reaches 0)
    g = graphs.from_edge_lists(3, [(0, 1), (0, 2), (1, 2)], [(1, 0), (2, 0), (2, 1)])
    assert g.common_roots() == [0]
    np.testing.assert_allclose(g.v1, [3.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(g.v2, [3.0, 0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("make", [graphs.cwz_fig1, lambda: graphs.random_digraph(7, 0.2, seed=3),
                                  lambda: graphs.directed_ring(6, c_reversed=True)])
def test_lemma1_vectors(make):
    g = make()
    n = g.n
    v1, v2 = g.v1, g.v2
    np.testing.assert_allclose(v1 @ g.in_laplacian, 0.0, atol=1e-12)
    np.testing.assert_allclose(g.out_laplacian @ v2, 0.0, atol=1e-12)
    assert v1.sum() == pytest.approx(n) and v2.sum() == pytest.approx(n)
    assert np.all(v1 >= 0) and np.all(v2 >= 0) and v1 @ v2 > 0
    alpha, beta = 0.5 * g.alpha_max(), 0.5 * g.beta_max()
    r1, r2 = g.rates(alpha, beta)
    M1 = np.eye(n) - alpha * g.in_laplacian - np.outer(np.ones(n), v1) / n
    assert np.max(np.abs(np.linalg.eigvals(M1))) == pytest.approx(1 - alpha * r1)
    assert r1 > 0 and r2 > 0


def test_rates_of_directed_ring_by_hand():
    n, w, alpha = 6, 0.4, 0.5
    g = graphs.directed_ring(n, r_weights=w, c_weights=w)
    np.testing.assert_allclose(g.v1, np.ones(n))       # circulant: v1 = v2 = 1
    # eigenvalues of I - alpha L1 are 1 - alpha w (1 - omega^k); k = 0 is removed by 1 v1^T/n
    omega = np.exp(2j * np.pi * np.arange(1, n) / n)
    rho = np.max(np.abs(1 - alpha * w * (1 - omega)))
    r1, r2 = g.rates(alpha, alpha)
    assert r1 == pytest.approx((1 - rho) / alpha)
    assert r2 == pytest.approx(r1)


def test_nonnegativity_of_I_minus_alpha_L():
    g = graphs.from_edge_lists(3, [(0, 1), (1, 2), (2, 0), (0, 2)], r_weights=2.0, c_weights=0.5)
    # R row sums: agent 2 receives from 1 and 0 with weight 2 each: 4 -> alpha_max = 1/4
    assert g.alpha_max() == pytest.approx(0.25)
    # C column sums: agent 0 sends to 1 and 2 with weight 0.5: 1 -> beta_max = 1
    assert g.beta_max() == pytest.approx(1.0)
    g.require_nonnegative(0.25, 1.0)
    assert np.all(np.eye(3) - 0.25 * g.in_laplacian >= 0)
    with pytest.raises(ParameterError, match="I - alpha\\*L1 is nonnegative"):
        g.require_nonnegative(0.26, 0.5)
    with pytest.raises(ParameterError, match="I - beta\\*L2 is nonnegative"):
        g.require_nonnegative(0.1, 1.5)


def test_random_digraph_deterministic_strong_and_distinct():
    a, b = graphs.random_digraph(8, 0.15, seed=5), graphs.random_digraph(8, 0.15, seed=5)
    np.testing.assert_array_equal(a.R, b.R)
    np.testing.assert_array_equal(a.C, b.C)
    assert not np.array_equal(a.R > 0, a.C > 0)
    for which in ("R", "C^T"):                    # strongly connected: everyone is a root
        assert len(a.roots(which)) == 8
    np.testing.assert_allclose(a.R.sum(1), 1.0)
    np.testing.assert_allclose(a.C.sum(0), 1.0)
    same = graphs.random_digraph(8, 0.15, seed=5, same_support=True)
    np.testing.assert_array_equal(same.R > 0, same.C > 0)


def test_directed_ring_reversed_c():
    g = graphs.directed_ring(4, c_reversed=True)
    assert g.R[1, 0] == 1.0 and g.R[0, 1] == 0.0
    assert g.C[0, 1] == 1.0 and g.C[1, 0] == 0.0


def test_network_bits_and_operators_follow_each_matrix():
    g = graphs.cwz_fig1()
    net = Network(g)
    d = 3
    H = torch.arange(15, dtype=torch.float64).reshape(5, d)
    net.exchange(H, "y", matrix="C")
    out_deg_C = (g.C > 0).sum(axis=0)
    np.testing.assert_array_equal(net.ledger.per_agent, 64 * d * out_deg_C)
    np.testing.assert_allclose(net.mix(H, "L2").numpy(), g.out_laplacian @ H.numpy())
    np.testing.assert_allclose(net.laplacian(H, "R").numpy(), net.mix(H, "L1").numpy())
