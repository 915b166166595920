"""Time-varying graphs: each schedule's W_k against its definition, the run against a per-round
reference loop of DGD's update, and the refusals (an algorithm whose theorems assume one W, a
round that is not doubly stochastic, the distributed backend)."""

from __future__ import annotations

import numpy as np
import pytest

import dpnet
from dpnet import distributed, graphs, problems
from dpnet.algorithms import DECOR, DGD, DPSGD, DiaDSP
from dpnet.errors import ParameterError


def _W(g):
    return g.sparse("W").toarray()


def test_cyclic_repeats_its_list():
    a, b = graphs.ring(6), graphs.complete(6)
    s = graphs.cyclic([a, b])
    assert [s.at(k) for k in range(4)] == [a, b, a, b]
    np.testing.assert_array_equal(_W(s.base) != 0, (_W(a) + _W(b)) != 0)


def test_random_matchings_pair_agents_and_average():
    s = graphs.random_matchings(7, seed=3)
    for k in range(5):
        W = _W(s.at(k))
        np.testing.assert_allclose(W, W.T)
        np.testing.assert_allclose(W.sum(0), 1.0)
        assert sorted(np.diag(W).tolist()) == [0.5] * 6 + [1.0]       # one agent sits out
    assert not np.array_equal(_W(s.at(0)), _W(s.at(1)))
    np.testing.assert_array_equal(_W(s.at(2)), _W(graphs.random_matchings(7, seed=3).at(2)))


def test_one_peer_exponential_averages_exactly_over_a_period():
    s = graphs.one_peer_exponential(8)
    P = np.eye(8)
    for k in range(3):
        W = _W(s.at(k))
        hop = 2 ** k
        assert all(W[i, (i + hop) % 8] == 0.5 and W[i, i] == 0.5 for i in range(8))
        P = W @ P
    np.testing.assert_allclose(P, np.full((8, 8), 1 / 8), atol=1e-15)   # Ying et al. 2021
    with pytest.raises(ParameterError, match="power of two"):
        graphs.one_peer_exponential(6)


def test_link_failures_drop_edges_at_rate_p_with_metropolis_weights():
    base = graphs.erdos_renyi(30, 0.3, seed=1)
    s = graphs.link_failures(base, 0.25, seed=2)
    edges = (np.triu(_W(base), 1) != 0).sum()
    kept = [(np.triu(_W(s.at(k)), 1) != 0).sum() / edges for k in range(200)]
    assert abs(np.mean(kept) - 0.75) < 4 * np.sqrt(0.25 * 0.75 / (edges * 200))
    W = _W(s.at(7))
    deg = (W != 0).sum(1) - 1
    i, j = np.nonzero(np.triu(W, 1))
    np.testing.assert_allclose(W[i, j], 1 / (1 + np.maximum(deg[i], deg[j])))   # Metropolis
    assert all((np.triu(_W(s.at(k)), 1) != 0).sum() <= edges for k in range(5))


def test_a_run_mixes_with_each_rounds_matrix():
    prob = problems.NonconvexLogistic.random(6, samples=8, dim=3, seed=0)
    s = graphs.link_failures(graphs.complete(6), 0.5, seed=4)
    res = dpnet.run(DGD(0.2), prob, s, 6, seed=0, log_every=6, progress=False)
    import torch

    x = prob.default_x0(0).numpy().copy()
    for k in range(6):                       # x_{k+1} = W_k x_k - eta grad f(x_k)
        g = prob.grad(torch.as_tensor(x)).numpy()
        x = _W(s.at(k)) @ x - 0.2 * g
    np.testing.assert_allclose(res.x, x, rtol=1e-12, atol=1e-12)
    fixed = dpnet.run(DGD(0.2), prob, graphs.complete(6), 6, seed=0, log_every=6,
                      progress=False)
    assert not np.allclose(fixed.x, res.x)


def test_dp_sgd_runs_on_a_schedule_and_its_account_is_the_fixed_graphs():
    prob = problems.NonconvexLogistic.random(8, samples=[10, 20, 15, 10, 30, 12, 18, 25],
                                             dim=3, seed=0)
    s = graphs.random_matchings(8, seed=0)
    alg = DPSGD(0.1, 1.5, clip=1.0, rate=0.2)
    res = dpnet.run(alg, prob, s, 5, seed=1, progress=False)
    assert np.isfinite(res.x).all()
    assert alg.privacy(prob, s, 5, delta=1e-5).epsilon == \
        alg.privacy(prob, graphs.ring(8), 5, delta=1e-5).epsilon


def test_refusals_name_the_reason():
    prob = problems.NonconvexLogistic.random(6, samples=8, dim=3, seed=0)
    s = graphs.random_matchings(6, seed=0)
    with pytest.raises(ParameterError, match="time-varying W: dgd, dp_sgd, dsgd"):
        dpnet.run(DiaDSP(0.1), prob, s, 3, progress=False)
    with pytest.raises(ParameterError, match="a fixed graph for decor"):
        dpnet.run(DECOR(0.1, 1.0, 1.0, rate=0.5), prob, s, 3, progress=False)
    W = np.full((6, 6), 1 / 6)
    W[0, 0], W[0, 1] = 2 / 6, 0.0                   # row sums 1, column sums not
    bad = graphs.cyclic([graphs.complete(6), graphs.from_weights(W)])
    with pytest.raises(ParameterError, match="round 1"):
        dpnet.run(DGD(0.1), prob, bad, 3, progress=False)
    with pytest.raises(ParameterError, match="fixed graph"):
        distributed.run(DGD(0.1), prob, s, 3)


def test_a_configuration_names_a_schedule():
    from dpnet.lab import config

    cfg = config.validate({
        "iterations": 4,
        "graph": {"name": "link_failures", "base": {"name": "watts_strogatz", "n": 8, "k": 4},
                  "p": 0.3, "seed": 1},
        "problem": {"name": "nonconvex_logistic", "n_agents": 8, "samples": 10, "dim": 3},
        "algorithm": {"name": "dgd", "eta": 0.1}})
    graph, _, _ = config.build(cfg)
    assert isinstance(graph, graphs.GraphSchedule) and graph.meta["p"] == 0.3
    np.testing.assert_array_equal(
        _W(graph.at(2)), _W(graphs.link_failures(graphs.watts_strogatz(8, 4), 0.3, 1).at(2)))
    cyc = graphs.from_spec({"name": "cyclic", "graphs": [{"name": "ring", "n": 4},
                                                          {"name": "complete", "n": 4}]})
    assert cyc.period == 2
    with pytest.raises(Exception, match="random_matchings"):
        config.validate({**cfg, "graph": {"name": "random_matching", "n": 8}})
