"""The model each private algorithm publishes (``released``): a function of what its guarantee
covers, never a clean internal state. Checked against the runs' transcripts and, for DPP2, the
noisy model x^k + w^k drawn by hand."""

from __future__ import annotations

import numpy as np
import pytest

import dpnet
from dpnet import algorithms, graphs
from dpnet.errors import ParameterError
from dpnet.noise import Laplace
from dpnet.problems import LogisticRegression
from dpnet.rng import Streams

import reference

N, D = 5, 3


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    problem = LogisticRegression(rng.standard_normal((N, 20, D)),
                                 rng.choice([-1.0, 1.0], (N, 20)), reg=0.1)
    return problem, graphs.ring(N), rng.standard_normal((N, D))


def test_every_private_algorithm_declares_what_it_publishes():
    for name, cls in algorithms.available().items():
        if getattr(cls, "private", False):
            assert cls.released is not None, name
            if isinstance(cls.released, property):      # depends on a parameter: below
                assert issubclass(cls, algorithms.DPSGD), name
                continue
            kind, key = cls.released
            assert kind in ("state", "message") and key, name
    # DP-SGD (and DECOR) publish their iterates, or their moving average (4) when asked
    for cls, extra in ((algorithms.DPSGD, ()), (algorithms.DECOR, (1.0,))):
        assert cls(0.1, 1.0, *extra, rate=0.1).released == ("state", "x")
        assert cls(0.1, 1.0, *extra, rate=0.1, ema_decay=0.5).released == ("state", "x_ema")


def test_a_message_release_is_each_agents_last_broadcast_not_its_clean_state(setup):
    problem, graph, x0 = setup
    alg = algorithms.DiaDSP(0.1, Laplace(0.3), Laplace(0.3))
    res = dpnet.run(alg, problem, graph, 6, x0=x0, seed=2, record=True, reference=None)
    sent = res.transcript.stacked("x", N)
    np.testing.assert_array_equal(alg.released_model(res), sent[-1])
    # the last message is x^5 plus its noise: not the clean state x^6
    before = dpnet.run(alg, problem, graph, 5, x0=x0, seed=2, reference=None)
    noise = np.stack([reference.agent_noise(Streams(2), "noise_x", 5, i, D, 0.3)
                      for i in range(N)])
    np.testing.assert_allclose(alg.released_model(res), before.x + noise, rtol=1e-12)
    assert not np.allclose(alg.released_model(res), res.x)
    with pytest.raises(ParameterError, match="record=True"):
        alg.released_model(dpnet.run(alg, problem, graph, 2, x0=x0, reference=None))


def test_dpp2_publishes_the_noisy_model_inside_its_last_message(setup):
    problem, graph, x0 = setup
    alg = algorithms.DPP2(0.1, 0.04, 10.0, noise_w=0.5, noise_e=0.5, r=0.9, eta=0.6)
    res = dpnet.run(alg, problem, graph, 7, x0=x0, seed=3, record=True, reference=None)
    before = dpnet.run(alg, problem, graph, 6, x0=x0, seed=3, reference=None)   # x^6
    w = np.stack([reference.agent_noise(Streams(3), "noise_w", 6, i, D, 0.5 * 0.9 ** 6)
                  for i in range(N)])
    np.testing.assert_allclose(alg.released_model(res), before.x + w, rtol=1e-9, atol=1e-12)


def test_state_releases(setup):
    problem, graph, x0 = setup
    sgd = algorithms.DPSGD(0.3, 1.0, sampling="poisson", rate=0.3)
    res = dpnet.run(sgd, problem, graph, 4, x0=x0, seed=1, reference=None)
    np.testing.assert_array_equal(sgd.released_model(res), res.x)   # gossip of the half-steps
    # DO-ADP publishes the public copies: with k = d and p = 1 they are the states
    full = algorithms.DOADP(0.1, 0.4, 0.3, sigma=0.2, clip=1.0, batch_size=2)
    res = dpnet.run(full, problem, graph, 4, x0=x0, seed=1, reference=None)
    np.testing.assert_allclose(full.released_model(res), res.x, rtol=1e-12, atol=1e-12)
    sparse = algorithms.DOADP(0.1, 0.4, 0.3, sigma=0.2, k=1, clip=1.0,
                              batch_size=2)
    res = dpnet.run(sparse, problem, graph, 4, x0=x0, seed=1, reference=None)
    np.testing.assert_array_equal(sparse.released_model(res), res.state["x_hat"])
    assert not np.allclose(sparse.released_model(res), res.x)
