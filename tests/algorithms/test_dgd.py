"""DGD / DSGD against the per-agent reference loop, DGD's fixed point, validation."""

import numpy as np
import pytest

import dpnet
from dpnet import graphs, problems
from dpnet.algorithms import DGD, DSGD
from dpnet.errors import ParameterError

import reference

GRAPH = graphs.erdos_renyi(10, 0.35, seed=11)


def _problem(name):
    if name == "nonconvex_logistic":
        return problems.NonconvexLogistic.random(10, 30, 6, seed=2, lam=0.05)
    return problems.Quadratic.random(10, 6, seed=3)


@pytest.mark.parametrize("name", ["nonconvex_logistic", "quadratic"])
@pytest.mark.parametrize("power", [0.0, 0.6])
def test_dgd_equals_the_reference_loop(name, power):
    p = _problem(name)
    x0 = np.random.default_rng(5).standard_normal((10, 6))
    K = 60
    traj = []
    res = dpnet.run(DGD(eta=0.2, power=power), p, GRAPH, K, x0=x0, seed=1, reference=None,
                    callback=lambda k, s: traj.append(s["x"].numpy().copy()))
    ref = reference.dgd(GRAPH.W, reference.local_gradients(p), x0, 0.2, K, power=power)
    np.testing.assert_allclose(np.stack(traj), ref[1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.x, ref[-1], rtol=0, atol=1e-12)
    assert np.abs(ref[-1] - ref[0]).max() > 0.1    # the runs moved


def test_dsgd_equals_the_reference_loop_with_the_same_minibatches():
    rng = np.random.default_rng(0)
    p = problems.LogisticRegression(rng.standard_normal((10, 40, 5)),
                                    rng.choice([-1.0, 1.0], (10, 40)), reg=0.01)
    x0 = rng.standard_normal((10, 5))
    K, seed = 40, 17
    for batch in (1, 8):
        res = dpnet.run(DSGD(eta=0.3, batch_size=batch, power=0.5), p, GRAPH, K, x0=x0, seed=seed)
        grads = reference.local_gradients(p, batch_size=batch, seed=seed)
        ref = reference.dgd(GRAPH.W, grads, x0, 0.3, K, power=0.5)
        np.testing.assert_allclose(res.x, ref[-1], rtol=0, atol=1e-12)
    # a different seed draws different minibatches
    other = dpnet.run(DSGD(eta=0.3, batch_size=8, power=0.5), p, GRAPH, K, x0=x0, seed=seed + 1)
    assert np.abs(other.x - res.x).max() > 1e-6


def test_dgd_converges_to_its_fixed_point_on_a_quadratic():
    # constant-step DGD stops at x with (I - W) x + eta (A x - b) = 0 (stacked), not at x*
    p = problems.Quadratic.random(10, 3, seed=4)
    eta, n, d = 0.1, 10, 3
    A = np.zeros((n * d, n * d))
    for i in range(n):
        A[i * d:(i + 1) * d, i * d:(i + 1) * d] = p.A[i].numpy()
    M = np.kron(np.eye(n) - GRAPH.W, np.eye(d)) + eta * A
    fixed = np.linalg.solve(M, eta * p.b.numpy().ravel()).reshape(n, d)
    res = dpnet.run(DGD(eta=eta), p, GRAPH, 600, x0=np.zeros(d), log_every=600)
    np.testing.assert_allclose(res.x, fixed, atol=1e-10)
    x_star = p.optimum().numpy()
    bias = np.abs(fixed - x_star).max()
    assert 1e-4 < bias < 0.5   # the O(eta) bias of DGD, which gradient tracking removes


def test_dgd_exchanges_x_once_per_iteration():
    p = _problem("quadratic")
    res = dpnet.run(DGD(eta=0.1), p, GRAPH, 5, float_bits=32, log_every=1)
    per_iter = 6 * 32 * 2 * len(GRAPH.edges)
    assert res.bits["total"] == 5 * per_iter
    assert res.history["bits"].tolist() == [k * per_iter for k in range(6)]
    assert res.bits["per_name"] == {"x": 5 * per_iter}
    assert not res.privacy.is_private


def test_dgd_parameters_are_validated():
    for kw, name in (({"eta": 0.0}, "eta"), ({"eta": -1.0}, "eta"),
                     ({"eta": 0.1, "power": -0.5}, "power"),
                     ({"eta": 0.1, "batch_size": 0}, "batch_size")):
        with pytest.raises(ParameterError) as err:
            DGD(**kw)
        assert err.value.name == name
    alg = dpnet.algorithms.get("dgd")(eta=0.5, power=1.0)
    assert alg.step_size(3) == pytest.approx(0.125)
    assert dpnet.algorithms.get("DSGD") is DSGD and DSGD(eta=0.1).batch_size == 1
