"""Secret randomness (issue 38 item 1): the seed no longer strips the noise.

The attack is issue 38's: a DP-SGD run's first messages minus the noise regenerated from the
seed alone give back the clean messages when the streams are reproducible, and miss them by the
noise when they are secret."""

import pickle

import numpy as np
import pytest
import torch
from scipy import stats

import dpnet
from dpnet import graphs
from dpnet.algorithms import DGD, DPSGD
from dpnet.errors import UnknownNameError
from dpnet.problems import LogisticRegression
from dpnet.rng import Streams
from dpnet.secret_rng import SecretStreams

N, M, D, LR, Z = 6, 40, 5, 0.5, 2.0


@pytest.fixture(scope="module")
def setting():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((N, M, D)) / np.sqrt(D)
    b = rng.choice([-1.0, 1.0], (N, M))
    return LogisticRegression(A, b, reg=1e-3), graphs.ring(N)


def _first_messages(problem, graph, z: float, randomness: str) -> np.ndarray:
    alg = DPSGD(LR, z, clip=1.0, rate=0.25)
    res = dpnet.run(alg, problem, graph, 1, seed=0, record=True, log_every=1,
                    randomness=randomness, progress=False)
    return res.transcript.stacked("x", N)[0]


def _attack(problem, graph, messages: np.ndarray) -> np.ndarray:
    """What an eavesdropper who knows the seed (0) computes: each message plus the step times
    the noise regenerated from the seed over the public normaliser b = rate m."""
    noise = DPSGD(LR, Z, clip=1.0, rate=0.25)._noise.sample(Streams(0), "noise", 0, np.arange(N),
                                                           N, D)
    return messages + LR * noise.numpy() / (0.25 * M)


def test_the_seed_strips_reproducible_noise_and_not_secret_noise(setting):
    problem, graph = setting
    clean = _first_messages(problem, graph, 0.0, "reproducible")
    noisy = _first_messages(problem, graph, Z, "reproducible")
    assert np.abs(noisy - clean).max() > 0.1                  # the noise is there ...
    np.testing.assert_allclose(_attack(problem, graph, noisy), clean, rtol=0, atol=1e-12)
    secret = _first_messages(problem, graph, Z, "secret")
    missed = _attack(problem, graph, secret) - clean
    # ... and in secret mode the attacker is off by two independent noises' difference (std
    # sqrt(2) lr z C / b = 0.14 per coordinate), not by rounding
    assert missed.std() > 0.5 * LR * Z / (0.25 * M)


def test_two_secret_runs_with_one_seed_differ_and_reproducible_ones_agree(setting):
    problem, graph = setting
    a, b = (_first_messages(problem, graph, Z, "secret") for _ in range(2))
    assert not np.allclose(a, b)
    c, d = (_first_messages(problem, graph, Z, "reproducible") for _ in range(2))
    np.testing.assert_array_equal(c, d)


def test_a_run_says_which_randomness_it_used(setting):
    problem, graph = setting
    res = dpnet.run(DGD(0.1), problem, graph, 2, randomness="secret", progress=False)
    assert res.randomness == "secret" and res.summary()["randomness"] == "secret"
    with pytest.raises(UnknownNameError, match="reproducible"):
        dpnet.run(DGD(0.1), problem, graph, 2, randomness="secrets", progress=False)


def test_secret_rows_depend_on_their_key_alone_and_not_on_the_draws_beside_them():
    s = SecretStreams(0)
    block = s.uniform("noise", 3, np.arange(8), 7)
    np.testing.assert_array_equal(s.uniform("noise", 3, [5], 7)[0], block[5])
    np.testing.assert_array_equal(s.uniform("noise", 3, [2, 5, 6], 7), block[[2, 5, 6]])
    # a row is a prefix of a wider row: the counter layout keeps agents apart, not widths
    assert not np.array_equal(s.uniform("noise", 4, [5], 7), block[5:6])
    assert not np.array_equal(s.uniform("sample", 3, [5], 7), block[5:6])
    np.testing.assert_array_equal(s.uniform("noise", 3, [5], 7), s.uniform("noise", 3, [5], 7))


def test_public_purposes_stay_on_the_seed_and_secret_ones_do_not():
    s, seeded = SecretStreams(4), Streams(4)
    np.testing.assert_array_equal(s.uniform("eta", 9, [0], 1), seeded.uniform("eta", 9, [0], 1))
    np.testing.assert_array_equal(s.permutation_keys("x/randk", 2, [1, 2], 6),
                                  seeded.permutation_keys("x/randk", 2, [1, 2], 6))
    assert not np.array_equal(s.uniform("noise", 9, [0], 4), seeded.uniform("noise", 9, [0], 4))


def test_secret_draws_follow_their_laws():
    s = SecretStreams(0)
    u = s.uniform("noise", 0, np.arange(100), 1000).ravel()
    g = s.gaussian("noise", 1, np.arange(100), 1000).ravel()
    lap = s.laplace("noise", 2, np.arange(100), 1000).ravel()
    # 10^5 draws each: a KS test at level 1e-3 detects a shift of about 0.006 in the CDF
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert stats.kstest(g, "norm").pvalue > 1e-3
    assert stats.kstest(lap, "laplace").pvalue > 1e-3
    assert 0 < u.min() and u.max() < 1
    t = s.gaussian_tensor("noise", 1, np.arange(100), 1000)
    torch.testing.assert_close(t, torch.from_numpy(s.gaussian("noise", 1, np.arange(100), 1000)))


def test_the_key_never_leaves_the_object():
    s = SecretStreams(3)
    assert "key=<os.urandom" in repr(s) and "seed=3" in repr(s)
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(s)
    # another process (a rank, an eavesdropper) with the same seed draws other noise
    other = SecretStreams(3)
    assert not np.array_equal(s.gaussian("noise", 0, [0], 8), other.gaussian("noise", 0, [0], 8))


def test_decors_pairwise_parts_cancel_in_one_secret_process(setting):
    """One process holds both ends of every edge: the parts come from its own key and cancel in
    the average exactly as seeded ones do."""
    from dpnet.algorithms import DECOR

    problem, graph = setting
    decor = dpnet.run(DECOR(LR, 0.0, 100.0, rate=1.0), problem, graph, 1, randomness="secret",
                      progress=False, log_every=1)
    plain = dpnet.run(DPSGD(LR, 0.0, rate=1.0), problem, graph, 1, progress=False, log_every=1)
    np.testing.assert_allclose(decor.x.mean(axis=0), plain.x.mean(axis=0), rtol=0, atol=1e-9)
    assert np.abs(decor.x - plain.x).max() > 0.1            # the parts are there, per agent
