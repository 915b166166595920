"""OnlineProblem: the all-data online gradient against a literal loop over the stored samples,
its windowed and cached approximations, the streams, the population objective, bad inputs."""

import numpy as np
import pytest
import torch

from dpnet.errors import ParameterError
from dpnet.problems.online import LeastSquaresSamples, LogisticSamples, OnlineProblem, all_data_grad
from dpnet.rng import Streams

import reference

N, D, n = 60, 5, 4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.random((N, D)) < 0.4).astype(float)
    b = rng.choice([-1.0, 1.0], N)
    return A, b


def _literal(problem, A, b, reg, X, t, seed, window=None):
    pools = problem.pools.numpy()
    g = []
    for i in range(problem.n_agents):
        fn = reference.online_gradient(reference.logistic_sample_grad(A, b, reg), pools[i],
                                       problem.batch, i, seed, window=window)
        g.append(fn(X[i], t))
    return np.stack(g)


@pytest.mark.parametrize("pools", ["shared", "partition"])
def test_exact_online_gradient_equals_the_literal_average_over_acquired_samples(pools):
    A, b = _data()
    parts = None if pools == "shared" else np.arange(N).reshape(n, N // n)
    p = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=3, pools=parts)
    X = np.random.default_rng(1).standard_normal((n, D))
    rng = Streams(7)
    # t = 30 acquires 93 samples per agent: beyond the pool size, so the dense path is used too
    for t in [0, 1, 2, 5, 11, 30]:
        g = p.stochastic_grad(torch.from_numpy(X), rng, t).numpy()
        np.testing.assert_allclose(g, _literal(p, A, b, 0.1, X, t, 7), rtol=0, atol=1e-13)


def test_the_stream_is_a_function_of_seed_agent_and_iteration_only():
    A, b = _data()
    p = OnlineProblem(LogisticSamples(A, b), n, batch=2)
    X = torch.zeros(n, D, dtype=torch.float64) + 0.3
    late = p.stochastic_grad(X, Streams(3), 9)
    early = p.stochastic_grad(X, Streams(3), 4)        # going back rebuilds the memory
    fresh = OnlineProblem(LogisticSamples(A, b), n, batch=2)
    torch.testing.assert_close(fresh.stochastic_grad(X, Streams(3), 4), early, rtol=0, atol=0)
    torch.testing.assert_close(fresh.stochastic_grad(X, Streams(3), 9), late, rtol=0, atol=0)
    # agents' streams are independent of which agents are evaluated
    sub = fresh.sample_rows(Streams(3), 6, np.array([2]))
    assert torch.equal(sub[0], fresh.sample_rows(Streams(3), 6, np.arange(n))[2])
    other = OnlineProblem(LogisticSamples(A, b), n, batch=2).stochastic_grad(X, Streams(4), 9)
    assert not torch.allclose(other, late)


def test_acquired_counts_and_sample_rows_agree():
    A, b = _data()
    p = OnlineProblem(LogisticSamples(A, b), n, batch=4, pools=np.arange(N).reshape(n, -1))
    C = p.acquired_counts(Streams(0), 5)
    assert C.shape == (n, N // n) and np.all(C.sum(1) == 24)
    rows = np.concatenate([p.sample_rows(Streams(0), s, np.arange(n)).numpy()
                           for s in range(6)], axis=1)
    assert np.all(rows // (N // n) == np.arange(n)[:, None])     # each agent's own part
    for i in range(n):
        np.testing.assert_array_equal(np.bincount(rows[i] % (N // n), minlength=N // n), C[i])


def test_least_squares_running_statistics_are_exact():
    rng = np.random.default_rng(2)
    A, y = rng.standard_normal((N, D)), rng.standard_normal(N)
    model = LeastSquaresSamples(A, y, reg=0.2)
    p = OnlineProblem(model, n, batch=2)
    X = rng.standard_normal((n, D))
    for t in [0, 3, 17]:
        g = p.stochastic_grad(torch.from_numpy(X), Streams(5), t).numpy()
        ref = []
        for i in range(n):
            rows = np.concatenate([reference.online_rows(5, "sample", s, i, np.arange(N), 2)
                                   for s in range(t + 1)])
            r = A[rows] @ X[i] - y[rows]
            ref.append(A[rows].T @ r / len(rows) + 0.2 * X[i])
        np.testing.assert_allclose(g, np.stack(ref), rtol=0, atol=1e-12)


def test_window_mode_uses_the_last_batches_at_the_current_iterate():
    A, b = _data()
    p = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=2, mode="window", window=3)
    X = np.random.default_rng(1).standard_normal((n, D))
    for t in [0, 1, 2, 6]:
        g = p.stochastic_grad(torch.from_numpy(X), Streams(2), t).numpy()
        np.testing.assert_allclose(g, _literal(p, A, b, 0.1, X, t, 2, window=3), atol=1e-13)


def test_cached_mode_keeps_stale_batch_gradients():
    A, b = _data()
    model = LogisticSamples(A, b, reg=0.1)
    p = OnlineProblem(model, n, batch=2, mode="cached")
    rng = np.random.default_rng(4)
    Xs = [rng.standard_normal((n, D)) for _ in range(5)]
    grad = reference.logistic_sample_grad(A, b, 0.1)
    for t, X in enumerate(Xs):
        g = p.stochastic_grad(torch.from_numpy(X), Streams(1), t).numpy()
        ref = np.zeros((n, D))
        for i in range(n):
            for s in range(t + 1):
                rows = reference.online_rows(1, "sample", s, i, np.arange(N), 2)
                ref[i] += sum(grad(Xs[s][i], r) for r in rows) / 2
        np.testing.assert_allclose(g, ref / (t + 1), rtol=0, atol=1e-13)
    # a repeated call at the same iteration replaces that iteration's batch gradient
    again = p.stochastic_grad(torch.from_numpy(Xs[4]), Streams(1), 4).numpy()
    np.testing.assert_allclose(again, g, atol=1e-14)
    with pytest.raises(ParameterError, match="iteration"):
        p.stochastic_grad(torch.from_numpy(Xs[0]), Streams(1), 2)
    p.stochastic_grad(torch.from_numpy(Xs[0]), Streams(1), 0)     # iteration 0 restarts


def test_population_objective_is_the_pool_average_and_has_an_optimum():
    A, b = _data()
    p = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=2,
                      pools=np.arange(N).reshape(n, -1))
    X = np.random.default_rng(3).standard_normal((n, D))
    grad = reference.logistic_sample_grad(A, b, 0.1)
    pools = p.pools.numpy()
    ref = np.stack([np.mean([grad(X[i], r) for r in pools[i]], axis=0) for i in range(n)])
    np.testing.assert_allclose(p.grad(torch.from_numpy(X)).numpy(), ref, atol=1e-13)
    x = p.optimum()
    assert float(p.global_grad(x).norm()) < 1e-6
    shared = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=2)
    z = torch.from_numpy(X[0])
    full = np.mean([np.log1p(np.exp(-b[r] * A[r] @ X[0])) for r in range(N)]) \
        + 0.05 * X[0] @ X[0]
    assert shared.loss(z) == pytest.approx(full, rel=1e-12)
    np.testing.assert_allclose(shared.global_grad(z).numpy(),
                               np.mean([grad(X[0], r) for r in range(N)], axis=0), atol=1e-13)


def test_labels_in_zero_one_are_the_papers_form():
    A, b = _data()
    zero_one = LogisticSamples(A, (b + 1) / 2, reg=0.0)
    X = torch.randn(1, D, dtype=torch.float64)
    idx = torch.arange(N).reshape(1, -1)
    w = torch.full((1, N), 1.0 / N, dtype=torch.float64)
    z = A @ X[0].numpy()
    paper = np.mean((1 - (b + 1) / 2) * z - np.log(1 / (1 + np.exp(-z))))
    assert float(zero_one.loss(X, idx, w)[0]) == pytest.approx(paper, rel=1e-12)
    assert zero_one.data_gradient_bound(1) == A.sum(1).max()


def test_all_data_grad_on_a_static_problem_is_the_full_gradient():
    from dpnet.algorithms.base import Context
    from dpnet.graphs import ring
    from dpnet.network import Network
    from dpnet.problems import Quadratic

    q = Quadratic.random(4, 3, seed=0)
    ctx = Context(q, Network(ring(4)), Streams(0))
    X = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(all_data_grad(ctx, X, 5), q.grad(X))


def test_bad_inputs_name_the_parameter():
    A, b = _data()
    m = LogisticSamples(A, b)
    with pytest.raises(ParameterError, match="mode"):
        OnlineProblem(m, n, mode="stale")
    with pytest.raises(ParameterError, match="window"):
        OnlineProblem(m, n, mode="window")
    with pytest.raises(ParameterError, match="window"):
        OnlineProblem(m, n, window=3)
    with pytest.raises(ParameterError, match="pools"):
        OnlineProblem(m, n, pools=np.full((n, 3), N))
    with pytest.raises(ParameterError, match="batch_size"):
        OnlineProblem(m, n, batch=2).stochastic_grad(torch.zeros(n, D, dtype=torch.float64),
                                                     Streams(0), 0, batch_size=5)
    with pytest.raises(ParameterError, match="labels"):
        LogisticSamples(A, np.full(N, 2.0))


def _tiny_net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, 3))


def test_neural_exact_online_gradient_equals_autograd_over_the_stored_samples():
    from dpnet.problems.online import NeuralSamples

    g = torch.Generator().manual_seed(0)
    feats = torch.randn(30, 3, 4, generator=g)
    labels = torch.randint(0, 3, (30,), generator=g)
    net = _tiny_net()
    model = NeuralSamples(net, feats, labels, chunk=4)       # small chunks: padding is skipped
    parts = np.arange(30).reshape(3, 10)
    p = OnlineProblem(model, 3, batch=2, pools=parts)
    X = p.default_x0().clone()
    X += 0.1 * torch.randn(X.shape, generator=g)
    assert X.dtype == torch.float32 and X.shape == (3, model.dim)
    for t in [0, 3, 12]:
        got = p.stochastic_grad(X, Streams(2), t)
        for i in range(3):
            rows = np.concatenate([reference.online_rows(2, "sample", s, i, parts[i], 2)
                                   for s in range(t + 1)])
            ref_net = _tiny_net()
            with torch.no_grad():
                for prm, v in zip(ref_net.parameters(), model.unflatten(X[i]).values()):
                    prm.copy_(v)
            loss = torch.nn.functional.cross_entropy(ref_net(feats[rows]), labels[rows])
            ref = torch.cat([q.reshape(-1) for q in torch.autograd.grad(loss,
                                                                        ref_net.parameters())])
            torch.testing.assert_close(got[i], ref, rtol=1e-5, atol=1e-6)
    ev = model.evaluate(X, feats, labels)
    acc0 = (ref_net(feats).argmax(1) == labels).double().mean()
    assert ev["accuracy"][2] == pytest.approx(float(acc0))


def test_population_subset_estimates_on_fixed_rows():
    A, b = _data()
    full = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=2)
    sub = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=2, population_subset=7)
    X = torch.randn(n, D, dtype=torch.float64)
    rows = torch.linspace(0, N - 1, 7).round().long()
    model = sub.model
    w = torch.full((n, 7), 1 / 7, dtype=torch.float64)
    torch.testing.assert_close(sub.grad(X), model.grad(X, rows.expand(n, -1), w))
    assert not torch.allclose(sub.grad(X), full.grad(X))


def test_unequal_pools_draw_from_and_average_over_each_agents_own_rows():
    A, b = _data()
    from dpnet import partitions

    own = partitions.given_sizes(N, n, seed=2, sizes=[5, 20, 9, 14])
    p = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=3, pools=own)
    X = np.random.default_rng(1).standard_normal((n, D))
    rng = Streams(7)
    for t in [0, 3, 12]:                                   # the streams: each agent's own pool
        g = p.stochastic_grad(torch.from_numpy(X), rng, t).numpy()
        want = [reference.online_gradient(reference.logistic_sample_grad(A, b, 0.1), own[i],
                                          3, i, 7)(X[i], t) for i in range(n)]
        np.testing.assert_allclose(g, np.stack(want), rtol=0, atol=1e-13)
    # the population objective: each agent's mean over its own P_i rows
    pop = p.grad(torch.from_numpy(X)).numpy()
    sg = reference.logistic_sample_grad(A, b, 0.1)
    np.testing.assert_allclose(pop, [np.mean([sg(X[i], r) for r in own[i]], axis=0)
                                     for i in range(n)], rtol=0, atol=1e-13)
    sub = OnlineProblem(LogisticSamples(A, b, reg=0.1), n, batch=3, pools=own,
                        population_subset=4)
    rows, w = sub._uniform(np.arange(n))
    assert rows.shape == (n, 4) and torch.allclose(w.sum(1), torch.ones(n, dtype=w.dtype))
    assert all(set(rows[i].tolist()) <= set(own[i].tolist()) for i in range(n))
