"""Problems: gradients against autograd and finite differences, constants, optima, sampling."""

import math

import numpy as np
import pytest
import torch

from dpnet import problems
from dpnet.errors import ParameterError
from dpnet.rng import Streams

from reference import local_gradients, minibatch


def _logreg(n=4, m=30, d=5, seed=0, reg=0.1):
    rng = np.random.default_rng(seed)
    return problems.LogisticRegression(rng.standard_normal((n, m, d)),
                                       rng.choice([-1.0, 1.0], (n, m)), reg=reg)


PROBLEMS = {
    "nonconvex_logistic": lambda: problems.NonconvexLogistic.random(5, 40, 6, seed=1, lam=0.1),
    "sincos": lambda: problems.SinCos.random(5, 6, seed=2),
    "quadratic": lambda: problems.Quadratic.random(5, 6, seed=3),
    "logistic_regression": lambda: _logreg(5, 40, 6, seed=4),
}


@pytest.fixture(params=list(PROBLEMS))
def problem(request):
    return PROBLEMS[request.param]()


def _points(p, seed, scale=2.0):
    z = np.random.default_rng(seed).standard_normal((p.n_agents, p.dim))
    return torch.from_numpy(scale * z)


def test_grad_equals_autograd_of_local_loss(problem):
    X = _points(problem, 0).requires_grad_(True)
    problem.local_loss(X).sum().backward()
    np.testing.assert_allclose(problem.grad(X.detach()).numpy(), X.grad.numpy(), rtol=1e-12,
                               atol=1e-13)


def test_grad_equals_hand_written_per_agent_gradient(problem):
    X = _points(problem, 1)
    grads = local_gradients(problem)
    hand = np.stack([grads[i](X[i].numpy(), 0) for i in range(problem.n_agents)])
    np.testing.assert_allclose(problem.grad(X).numpy(), hand, rtol=1e-12, atol=1e-13)
    # a subset of agents, in any order
    agents = np.array([3, 0])
    np.testing.assert_allclose(problem.grad(X[agents], agents).numpy(), hand[agents], atol=1e-13)


def test_global_grad_equals_central_differences_of_loss(problem):
    x = _points(problem, 2)[0]
    h = 1e-6
    fd = np.array([(problem.loss(x + h * e) - problem.loss(x - h * e)) / (2 * h)
                   for e in torch.eye(problem.dim, dtype=torch.float64)])
    np.testing.assert_allclose(problem.global_grad(x).numpy(), fd, rtol=1e-6, atol=1e-7)
    # average convention: f = (1/n) sum_i f_i
    X = x.expand(problem.n_agents, -1)
    assert problem.loss(x) == pytest.approx(float(problem.local_loss(X).mean()), rel=1e-14)


def _lipschitz_ratios(p, grad, seed, scale):
    X, Y = _points(p, seed, scale), _points(p, seed + 100, scale)
    dg = torch.linalg.vector_norm(grad(X) - grad(Y), dim=1)
    return (dg / torch.linalg.vector_norm(X - Y, dim=1)).numpy()


@pytest.mark.parametrize("name", ["nonconvex_logistic", "quadratic", "logistic_regression"])
def test_smoothness_is_an_upper_bound_and_tight_at_zero(name):
    p = PROBLEMS[name]()
    L = p.smoothness
    for seed, scale in ((0, 0.01), (1, 1.0), (2, 10.0)):
        assert _lipschitz_ratios(p, p.grad, seed, scale).max() <= L * (1 + 1e-12)
    # the Hessian's largest eigenvalue over agents at 0 (or anywhere, for the quadratic) is L
    H = torch.stack([torch.autograd.functional.hessian(
        lambda x, i=i: p.local_loss(x[None], np.array([i]))[0],
        torch.zeros(p.dim, dtype=torch.float64)) for i in range(p.n_agents)])
    assert float(torch.linalg.eigvalsh(H).max()) == pytest.approx(L, rel=1e-10)


def test_sincos_constants_and_optimum():
    p = problems.SinCos.random(8, 10, seed=5)
    m = p.m.numpy()
    assert abs(m.sum()) < 1e-12 and np.all(np.abs(m) >= 0.1)
    assert p.smoothness == float("inf") and p.gradient_bound() is None
    # global objective ||x||^2 + 3||sin x||^2: minimum 0 at 0 and a zero gradient there
    zero = p.optimum()
    assert p.loss(zero) == 0.0
    assert float(p.global_grad(zero).abs().max()) < 1e-15   # sum m_i = 0 up to rounding
    # every local gradient at 0 is m_i * 1 (nonzero): the agents disagree
    np.testing.assert_allclose(p.grad(torch.zeros(8, 10)).numpy(), np.outer(m, np.ones(10)))
    X = _points(p, 3, 3.0)
    assert all(p.loss(x) > 0 for x in X)
    hand = (X**2).sum(1) + 3 * (torch.sin(X) ** 2).sum(1)
    np.testing.assert_allclose([p.loss(x) for x in X], hand.numpy(), rtol=1e-12)
    # the global gradient is 8-Lipschitz (Hessian diag(2 + 6 cos 2x))
    Y = _points(p, 4, 3.0)
    ratios = [float((p.global_grad(x) - p.global_grad(y)).norm() / (x - y).norm())
              for x, y in zip(X, Y)]
    assert max(ratios) <= p.global_smoothness
    s = problems.SinCos([1.0, -3.0, 2.0], dim=4)
    assert s.n_agents == 3 and s.dim == 4


def test_nonconvex_logistic_gradient_bound_holds():
    p = problems.NonconvexLogistic.random(6, 50, 8, seed=0, lam=0.5, alpha=2.0)
    M = p.gradient_bound()
    peak = 1 / np.sqrt(3 * 2.0)   # the regulariser's derivative peaks here
    pts = [_points(p, s, sc) for s, sc in ((0, 0.1), (1, 1.0), (2, 100.0))]
    pts.append(torch.full((6, 8), peak, dtype=torch.float64))
    pts.append(-torch.full((6, 8), peak, dtype=torch.float64))
    for X in pts:
        assert float(torch.linalg.vector_norm(p.grad(X), dim=1).max()) <= M
    hand = (np.linalg.norm(p.V.numpy(), axis=2).mean(1).max()
            + np.sqrt(8) * 9 / 8 * 0.5 * np.sqrt(2.0 / 3))
    assert M == pytest.approx(hand, rel=1e-14)


def test_quadratic_optimum_solves_the_stationarity_condition():
    p = problems.Quadratic.random(7, 5, seed=1, mu=0.5, L=3.0)
    x = p.optimum()
    X = x.expand(7, -1)
    assert float(p.grad(X).sum(0).abs().max()) < 1e-12
    ev = torch.linalg.eigvalsh(p.A)
    assert p.mu == pytest.approx(float(ev.min())) and p.smoothness == pytest.approx(float(ev.max()))
    assert 0.5 <= p.mu <= p.smoothness <= 3.0
    np.testing.assert_allclose(problems.minimize_global(p).numpy(), x.numpy(), atol=1e-7)


def test_nonconvex_logistic_optimum_is_stationary_and_computed_once():
    p = problems.NonconvexLogistic.random(6, 50, 5, seed=2, lam=0.01)
    x = p.optimum()
    assert float(p.global_grad(x).norm()) < 1e-7
    x[:] = 0.0                          # callers get a copy
    again = p.optimum()
    assert float(p.global_grad(again).norm()) < 1e-7 and p._opt is not again


def test_logistic_regression_optimum_and_partition():
    p = _logreg(4, 30, 5, reg=0.1)
    x = p.optimum()
    assert float(p.global_grad(x).norm()) < 1e-8
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((103, 3)), rng.integers(0, 2, 103)
    q = problems.LogisticRegression.partition(X, y, 5, seed=1)
    assert (q.n_agents, q.m, q.dim) == (5, 20, 3)
    assert set(np.unique(q.b.numpy())) == {-1.0, 1.0}
    rows = {tuple(r) for r in q.A.numpy().reshape(-1, 3)}
    assert len(rows) == 100 and rows <= {tuple(r) for r in X}


def test_logistic_regression_minibatches():
    p = _logreg(6, 25, 4, reg=0.05)
    rng, agents = Streams(9), np.arange(6)
    idx = p.sample_indices(rng, 3, agents, 7).numpy()
    assert idx.shape == (6, 7)
    assert all(len(set(r)) == 7 for r in idx) and idx.min() >= 0 and idx.max() < 25
    np.testing.assert_array_equal(p.sample_indices(Streams(9), 3, agents, 7).numpy(), idx)
    assert not np.array_equal(np.sort(p.sample_indices(rng, 4, agents, 7).numpy()), np.sort(idx))
    # agent 4's batch does not depend on who else draws
    alone = p.sample_indices(Streams(9), 3, np.array([4]), 7).numpy()[0]
    assert set(alone) == set(idx[4]) == set(minibatch(rng, "sample", 3, 4, 25, 7))
    one = p.sample_indices(rng, 0, agents, 1).numpy()
    assert one.shape == (6, 1)
    assert [minibatch(rng, "sample", 0, i, 25, 1)[0] for i in range(6)] == one[:, 0].tolist()
    # the minibatch gradient is the full-gradient formula on those samples
    X = _points(p, 0)
    G = p.stochastic_grad(X, rng, 3, 7, agents).numpy()
    grads = local_gradients(p, batch_size=7, seed=9)
    np.testing.assert_allclose(G, np.stack([grads[i](X[i].numpy(), 3) for i in range(6)]),
                               atol=1e-14)
    # all samples = the exact gradient
    np.testing.assert_allclose(p.stochastic_grad(X, rng, 0, 25).numpy(), p.grad(X).numpy(),
                               atol=1e-14)
    with pytest.raises(ParameterError, match="batch_size <= the smallest local size m_i = 25"):
        p.stochastic_grad(X, rng, 0, 26)
    # problems without samples return exact gradients
    q = problems.Quadratic.random(6, 4)
    assert torch.equal(q.stochastic_grad(X, rng, 0, 3), q.grad(X))


def test_random_constructors_are_deterministic_and_follow_the_papers():
    a = problems.NonconvexLogistic.random(6, 200, 10, seed=3)
    b = problems.NonconvexLogistic.random(6, 200, 10, seed=3)
    assert torch.equal(a.V, b.V) and torch.equal(a.u, b.u)
    assert a.V.shape == (6, 200, 10) and set(np.unique(a.u.numpy())) == {-1.0, 1.0}
    assert abs(float(a.V.mean())) < 0.02 and float(a.V.std()) == pytest.approx(1.0, abs=0.02)
    assert (a.lam, a.alpha, a.convention) == (1e-3, 1.0, "average")
    s = problems.NonconvexLogistic.random(6, 20, 3, seed=3, convention="sum")
    x = torch.ones(3, dtype=torch.float64)
    assert s.loss(x) == pytest.approx(float(s.local_loss(x.expand(6, -1)).sum()))
    assert torch.allclose(s.global_grad(x), s.grad(x.expand(6, -1)).sum(0))
    assert problems.from_spec({"name": "quadratic", "n_agents": 3, "dim": 2}).n_agents == 3


def test_default_x0_is_uniform_on_the_unit_cube():
    p = problems.Quadratic.random(50, 20)
    x0 = p.default_x0(seed=1).numpy()
    assert x0.shape == (50, 20) and x0.min() > 0 and x0.max() < 1
    assert x0.mean() == pytest.approx(0.5, abs=0.03)
    assert np.array_equal(x0, p.default_x0(seed=1).numpy())


def test_check_x(problem):
    n, d = problem.n_agents, problem.dim
    x = torch.arange(d, dtype=torch.float64)
    np.testing.assert_array_equal(problem.check_x(x).numpy(), np.tile(np.arange(d), (n, 1)))
    X = _points(problem, 0)
    out = problem.check_x(X)
    assert torch.equal(out, X) and out is not X
    for bad in (torch.zeros(d + 1), torch.zeros(n, d + 1), torch.zeros(n + 1, d),
                torch.zeros(1, n, d)):
        with pytest.raises(ParameterError) as err:
            problem.check_x(bad)
        assert err.value.name == "x0" and f"({n}, {d})" in str(err.value)
        assert str(tuple(bad.shape)) in str(err.value)
    with pytest.raises(ParameterError, match="finite"):
        problem.check_x(torch.full((n, d), float("nan")))


@pytest.mark.parametrize("call, name", [
    (lambda: problems.SinCos([1.0, 1.0]), "m"),
    (lambda: problems.SinCos([1.0, 0.0, -1.0]), "m"),
    (lambda: problems.SinCos([1.0]), "m"),
    (lambda: problems.Quadratic(-np.eye(2)[None], np.zeros((1, 2))), "A"),
    (lambda: problems.Quadratic(np.eye(2)[None], np.zeros((1, 3))), "b"),
    (lambda: problems.NonconvexLogistic(np.zeros((2, 3, 4)), np.ones((2, 2))), "labels"),
    (lambda: problems.NonconvexLogistic(np.zeros((2, 3, 4)), np.zeros((2, 3))), "labels"),
    (lambda: problems.NonconvexLogistic(np.zeros((3, 4)), np.ones(3)), "features"),
    (lambda: problems.NonconvexLogistic.random(2, 3, 0), "dim"),
    (lambda: problems.LogisticRegression(np.zeros((2, 3, 4)), np.ones((2, 3)), reg=-1), "reg"),
])
def test_problem_bad_inputs(call, name):
    with pytest.raises(ParameterError) as err:
        call()
    assert err.value.name == name


def test_nonconvex_logistic_loss_and_grad_in_one_pass_equals_the_two_calls():
    from dpnet import problems as P
    for convention in ("average", "sum"):
        p = P.NonconvexLogistic.random(n_agents=5, samples=7, dim=4, seed=2, lam=0.3,
                                       convention=convention)
        x = torch.randn(4, dtype=torch.float64)
        loss, grad = p.loss_and_grad(x)
        assert loss == pytest.approx(p.loss(x), rel=1e-13)
        torch.testing.assert_close(grad, p.global_grad(x), rtol=1e-13, atol=1e-15)


def test_logistic_regression_loss_and_grad_in_one_pass_equals_the_two_calls():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((4, 9, 3))
    for convention in ("average", "sum"):
        p = problems.LogisticRegression(A, np.sign(A[:, :, 0] + 0.1), reg=0.2,
                                        convention=convention)
        x = torch.randn(3, dtype=torch.float64)
        loss, grad = p.loss_and_grad(x)
        assert loss == pytest.approx(p.loss(x), rel=1e-13)
        torch.testing.assert_close(grad, p.global_grad(x), rtol=1e-13, atol=1e-15)


def test_nonconvex_logistic_clipped_minibatch_matches_the_per_record_equations():
    """(37) as a finite sum over records: each sampled record's gradient is its loss term plus
    the data-free regulariser, clipped in l2 before averaging (what DO-ADP needs)."""
    from dpnet.problems.stochastic import Clip, clipped_stochastic_grad, sample_indices

    p = problems.NonconvexLogistic.random(3, 20, 4, seed=2, lam=0.5, alpha=2.0)
    rng = np.random.default_rng(1)
    X = torch.from_numpy(rng.standard_normal((3, 4)))
    streams = Streams(4)
    idx = sample_indices(streams, 7, np.arange(3), 20, 5)
    G = clipped_stochastic_grad(p, X, streams, 7, 5, np.arange(3), clip=Clip(0.4, "l2"))
    V, u = p.V.numpy(), p.u.numpy()
    for i in range(3):
        x = X[i].numpy()
        reg = 2 * 0.5 * 2.0 * x / (1 + 2.0 * x * x) ** 2
        per = []
        for j in idx[i].tolist():
            g = -u[i, j] * V[i, j] / (1 + math.exp(u[i, j] * V[i, j] @ x)) + reg
            per.append(g * min(1.0, 0.4 / np.linalg.norm(g)))
        np.testing.assert_allclose(G[i].numpy(), np.mean(per, 0), rtol=1e-12)
    # the per-sample gradients over every record average to the full local gradient
    every = p.UV
    np.testing.assert_allclose(p.per_sample_grads(every, X).mean(1).numpy(), p.grad(X).numpy(),
                               rtol=1e-12, atol=1e-15)
