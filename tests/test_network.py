"""The network door: neighbour sums against dense NumPy, the bit ledger, the transcript."""

import numpy as np
import pytest
import torch

from dpnet import compression, graphs
from dpnet.errors import ParameterError
from dpnet.network import BitLedger, Network


def _H(n, d, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


@pytest.mark.parametrize("g", [graphs.erdos_renyi(12, 0.3, seed=1), graphs.ring(150),
                               graphs.geometric(200, 0.15, seed=2),
                               graphs.from_edges(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)],
                                                 directed=True)])
def test_mix_and_laplacian_equal_dense_numpy(g):
    net = Network(g)
    H = _H(g.n, 4)
    Hn = H.numpy()
    np.testing.assert_allclose(net.mix(H).numpy(), g.W @ Hn, rtol=0, atol=1e-14)
    L = np.diag(g.W.sum(1) - np.diag(g.W)) - (g.W - np.diag(np.diag(g.W)))
    np.testing.assert_allclose(net.laplacian(H).numpy(), L @ Hn, rtol=0, atol=1e-14)
    # row by row: sum_{j != i} w_ij (h_i - h_j)
    i = 3
    hand = sum(g.W[i, j] * (Hn[i] - Hn[j]) for j in range(g.n) if j != i)
    np.testing.assert_allclose(net.laplacian(H).numpy()[i], hand, atol=1e-14)
    np.testing.assert_allclose(net.mix(H, "laplacian_like").numpy(), g.laplacian_like @ Hn,
                               atol=1e-14)
    np.testing.assert_allclose(net.mix(H, "I").numpy(), Hn, atol=0)
    assert net._operator("W", "mix").layout == (torch.strided if g.n <= 128 else torch.sparse_csr)


def test_bit_ledger_star_identity_and_topk():
    g = graphs.star(5)            # out-degrees: centre 4, leaves 1
    net = Network(g, record=True)
    assert net.receivers().tolist() == [4, 1, 1, 1, 1]
    X = _H(5, 3)
    net.set_iteration(0)
    out = net.exchange(X, "x")                     # 3 floats * 64 = 192 bits per message
    assert torch.equal(out, X)
    assert net.ledger.per_agent.tolist() == [768, 192, 192, 192, 192]
    assert net.ledger.total == 1536
    net.set_iteration(1)
    net.exchange(X, "y", compression.TopK(1))      # 1 * (64 + ceil(log2 3) = 2) = 66 bits
    net.exchange(X, "x")
    assert net.ledger.per_agent.tolist() == [768 + 264 + 768, 192 + 66 + 192, 450, 450, 450]
    assert net.ledger.per_iteration().tolist() == [1536, 528 + 1536]
    assert net.ledger.per_iteration(4).tolist() == [1536, 2064, 0, 0]
    assert net.ledger.per_name == {"x": 3072, "y": 528}
    assert net.ledger.total == 1536 + 2064
    np.testing.assert_array_equal(net.ledger.per_agent_iteration(),
                                  [[768, 192, 192, 192, 192], [1032, 258, 258, 258, 258]])
    assert net.ledger.as_dict() == {"total": 3600, "per_agent": [1800, 450, 450, 450, 450],
                                    "per_name": {"x": 3072, "y": 528}}


@pytest.mark.parametrize("float_bits", [32, 64])
def test_bits_are_message_bits_times_out_degree(float_bits):
    g = graphs.erdos_renyi(9, 0.4, seed=5)
    d = 20
    for comp in (compression.Identity(), compression.TopK(3), compression.NormSign(),
                 compression.BiasedQuantizer(2), compression.RandK(4)):
        net = Network(g, float_bits=float_bits)
        net.exchange(_H(9, d), "m", comp)
        deg = g.adjacency.sum(0)                   # receivers of each agent's broadcast
        per_msg = comp.bits(d, float_bits)
        assert net.ledger.per_agent.tolist() == (per_msg * deg).astype(int).tolist()
        assert net.ledger.total == comp.bits(d, float_bits) * 2 * len(g.edges)


def test_directed_graph_charges_out_neighbours():
    # 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 0
    g = graphs.from_edges(3, [(0, 1), (0, 2), (1, 2), (2, 0)], directed=True)
    net = Network(g, float_bits=32)
    net.exchange(_H(3, 2), "x")
    assert net.ledger.per_agent.tolist() == [2 * 64, 64, 64]


def test_inactive_agents_are_charged_nothing_and_send_nothing():
    g = graphs.star(5)
    net = Network(g, record=True)
    X = _H(5, 3)
    active = np.array([True, False, True, False, False])
    out = net.exchange(X, "x", active=active)
    assert net.ledger.per_agent.tolist() == [768, 0, 192, 0, 0]
    np.testing.assert_array_equal(out.numpy()[~active], 0.0)
    np.testing.assert_array_equal(out.numpy()[active], X.numpy()[active])
    e = net.transcript.entries[0]
    assert e.senders.tolist() == [0, 2]
    np.testing.assert_array_equal(e.messages.numpy(), X.numpy()[[0, 2]])
    net.exchange(X, "x", active=torch.zeros(5, dtype=torch.bool))
    assert net.ledger.total == 960
    assert net.transcript.entries[1].senders.tolist() == []


def test_transcript_records_each_broadcast_once_as_decoded():
    g = graphs.ring(4)
    net = Network(g, record=True)
    X = torch.tensor([[1.0, -5.0, 2.0], [0.0, 3.0, -1.0], [4.0, 4.5, 0.1], [0.2, 0.1, 9.0]])
    for k in range(3):
        net.set_iteration(k)
        net.exchange(X * (k + 1), "x", compression.TopK(1))
        if k != 1:
            net.exchange(X, "y", active=np.array([True, True, False, True]))
    tr = net.transcript
    assert len(tr) == 5 and tr.names() == ["x", "y"]
    assert [(e.iteration, e.name) for e in tr.entries] == [(0, "x"), (0, "y"), (1, "x"),
                                                           (2, "x"), (2, "y")]
    sx = tr.stacked("x")
    assert sx.shape == (3, 4, 3)
    top1 = np.array([[0, -5.0, 0], [0, 3.0, 0], [0, 4.5, 0], [0, 0, 9.0]])
    for k in range(3):
        np.testing.assert_array_equal(sx[k], top1 * (k + 1))
    sy = tr.stacked("y", n=4)
    assert np.isnan(sy[:, 2]).all() and np.array_equal(sy[0, [0, 1, 3]], X.numpy()[[0, 1, 3]])
    # the transcript holds copies, not views of the sender's state
    X.mul_(0)
    assert tr.entries[1].messages.abs().sum() > 0
    with pytest.raises(ParameterError, match="transcript name"):
        tr.stacked("z")
    assert Network(g).transcript is None


def test_layout_helpers_and_guards():
    g = graphs.ring(5)
    net = Network(g)
    X = _H(5, 2)
    assert net.n_local == 5 and net.agents.tolist() == [0, 1, 2, 3, 4]
    assert net.own(X) is X and torch.equal(net.gather(X), X)
    assert torch.equal(net.halo_zeros(2), torch.zeros(5, 2, dtype=torch.float64))
    np.testing.assert_allclose(net.sum_agents(X).numpy(), X.numpy().sum(0))
    with pytest.raises(ParameterError, match="messages"):
        net.exchange(_H(4, 2), "x")
    with pytest.raises(ParameterError, match="float_bits"):
        Network(g, float_bits=8)
    with pytest.raises(ParameterError, match=r"shape \(n_local=5, d=3\)"):
        net.check_shape("x0", X, 3)
    with pytest.raises(ParameterError, match="record=True"):
        net.ledger.per_agent_iteration()


def test_ledger_merge():
    a, b = BitLedger(3, detailed=True), BitLedger(3, detailed=True)
    a.charge(0, "x", np.array([0, 1]), np.array([10, 20]))
    b.charge(0, "x", np.array([2]), np.array([5]))
    b.charge(1, "y", np.array([0, 0]), np.array([1, 2]))   # repeated agent accumulates
    a.merge(b)
    assert a.per_agent.tolist() == [13, 20, 5]
    assert a.per_iteration().tolist() == [35, 3]
    assert a.per_name == {"x": 35, "y": 3}
    assert a.per_agent_iteration().tolist() == [[10, 20, 5], [3, 0, 0]]


def test_charging_every_agent_in_order_equals_charging_each_id():
    # the fast path (one vector add, no np.add.at) must give the per-id ledger exactly
    n, rng = 50, np.random.default_rng(3)
    fast, slow = BitLedger(n, detailed=True), BitLedger(n, detailed=True)
    for k in range(3):
        bits = rng.integers(0, 1000, n)
        fast.charge(k, "x", slice(None), bits)
        slow.charge(k, "x", np.arange(n), bits)
    some = np.array([4, 4, 9])                  # repeated ids add up on the general path
    fast.charge(3, "y", some, [1, 2, 3])
    slow.charge(3, "y", some, [1, 2, 3])
    assert np.array_equal(fast.per_agent, slow.per_agent) and fast.per_agent[4] >= 3
    assert fast.per_name == slow.per_name and fast.total == slow.total
    assert np.array_equal(fast.per_iteration(), slow.per_iteration())
    assert all(np.array_equal(fast._detail[k], slow._detail[k]) for k in range(4))


def test_ledgers_of_other_agents_or_detail_do_not_merge():
    a, b = BitLedger(4), BitLedger(4)
    b.charge(0, "x", np.arange(4), np.full(4, 64))
    a.merge(b)
    assert a.total == b.total == 4 * 64
    with pytest.raises(ParameterError, match="ledger=.*same agents and detail"):
        a.merge(BitLedger(5))
    with pytest.raises(ParameterError, match="detailed=True"):
        a.merge(BitLedger(4, detailed=True))
