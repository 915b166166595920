"""Privacy noise: distributions at the scheduled scale, per-agent scales, reproducible streams."""

import numpy as np
import pytest
import torch
from scipy import stats

from dpnet import noise
from dpnet.errors import ParameterError
from dpnet.rng import Streams

N_DRAWS = 20_000
P_MIN = 1e-3  # seeds are fixed, so these tests are deterministic; the threshold is a sanity bar


def _draw(nz, k, agents=(0,), n=1, dim=N_DRAWS, seed=0, purpose="noise_x"):
    return nz.sample(Streams(seed), purpose, k, np.asarray(agents), n, dim).numpy()


def _ks(sample, dist, scale):
    return stats.kstest(sample, dist(scale=scale).cdf).pvalue


SCHEDULES = [
    # (noise kwargs, iteration k, scale at k)
    (dict(scale=2.0), 7, 2.0),
    (dict(scale=2.0, decay=0.5), 3, 2.0 * 0.5**3),
    (dict(scale=3.0, decay=0.9), 10, 3.0 * 0.9**10),
    (dict(scale=2.0, power=0.5), 3, 2.0 / 4**0.5),
    (dict(scale=1.5, power=1.0), 9, 0.15),
    (dict(scale=1.0, schedule=lambda k: 1.0 / (k + 2)), 2, 0.25),
]


@pytest.mark.parametrize("kwargs, k, scale", SCHEDULES)
def test_laplace_matches_its_scheduled_scale(kwargs, k, scale):
    nz = noise.Laplace(**kwargs)
    assert nz.scale_at(k, 1)[0] == pytest.approx(scale, rel=1e-15)
    z = _draw(nz, k)[0]
    assert _ks(z, stats.laplace, scale) > P_MIN
    # and the test has power: 20% off in scale is rejected
    assert _ks(z, stats.laplace, 1.2 * scale) < 1e-6
    assert _ks(z, stats.norm, scale * np.sqrt(2)) < 1e-6      # same variance, wrong shape
    assert nz.variance_at(k, 1)[0] == pytest.approx(2 * scale**2)
    assert z.var() == pytest.approx(2 * scale**2, rel=0.05)


@pytest.mark.parametrize("kwargs, k, scale", SCHEDULES)
def test_gaussian_matches_its_scheduled_scale(kwargs, k, scale):
    nz = noise.Gaussian(**kwargs)
    z = _draw(nz, k, purpose="noise_y")[0]
    assert _ks(z, stats.norm, scale) > P_MIN
    assert _ks(z, stats.norm, 1.2 * scale) < 1e-6
    assert nz.variance_at(k, 1)[0] == pytest.approx(scale**2)


def test_per_agent_scales_and_decays():
    scales, decays = [0.5, 1.0, 4.0], [0.9, 0.5, 0.99]
    nz = noise.Laplace(scales, decay=decays)
    k = 4
    expected = np.array(scales) * np.array(decays) ** k
    np.testing.assert_allclose(nz.scale_at(k, 3), expected, rtol=1e-15)
    Z = _draw(nz, k, agents=range(3), n=3, dim=10_000)
    for i in range(3):
        assert _ks(Z[i], stats.laplace, expected[i]) > P_MIN
    g = noise.Gaussian([1.0, 3.0], power=[0.0, 1.0])
    np.testing.assert_allclose(g.scale_at(2, 2), [1.0, 1.0])
    assert g.per_agent_params(1, 2) == {"scale": 3.0, "power": 1.0}
    assert nz.per_agent_params(2, 3) == {"scale": 4.0, "decay": 0.99}


def test_scale_zero_is_exactly_zero():
    for nz in (noise.Laplace(0.0), noise.Gaussian(0.0, decay=0.5), noise.none()):
        assert nz.is_zero
        z = _draw(nz, 3, agents=range(4), n=4, dim=7)
        assert z.shape == (4, 7) and np.all(z == 0.0)
    mixed = noise.Laplace([0.0, 1.0, 0.0], decay=0.5)
    assert not mixed.is_zero
    z = _draw(mixed, 2, agents=range(3), n=3, dim=50)
    assert np.all(z[[0, 2]] == 0.0) and np.all(z[1] != 0.0)


def test_draws_are_a_function_of_seed_agent_purpose_iteration_only():
    nz = noise.Laplace(1.0, decay=0.8)
    full = _draw(nz, 5, agents=range(8), n=8, dim=6, seed=3)
    # agent 5 alone, or in any other company, draws the same row
    for agents in ([5], [7, 5, 0], [5, 2]):
        part = _draw(nz, 5, agents=agents, n=8, dim=6, seed=3)
        np.testing.assert_array_equal(part[agents.index(5)], full[5])
    # a fresh Streams object gives the same numbers (no hidden state)
    np.testing.assert_array_equal(_draw(nz, 5, agents=range(8), n=8, dim=6, seed=3), full)
    # the hand formula of the reference loops: standard draw times the scheduled scale
    hand = Streams(3).laplace("noise_x", 5, [5], 6)[0] * (1.0 * 0.8**5)
    np.testing.assert_array_equal(full[5], hand)
    # every key field matters
    others = [_draw(nz, 5, agents=range(8), n=8, dim=6, seed=4),
              _draw(nz, 5, agents=range(8), n=8, dim=6, seed=3, purpose="noise_y"),
              _draw(nz, 6, agents=range(8), n=8, dim=6, seed=3) / 0.8]
    for other in others:
        assert not np.any(np.isclose(other, full))
    # different agents are different streams
    assert len({tuple(r) for r in full}) == 8


def test_sample_dtype_and_shape():
    z = noise.Laplace(1.0).sample(Streams(0), "p", 0, np.arange(3), 3, 4, dtype=torch.float32)
    assert z.dtype == torch.float32 and tuple(z.shape) == (3, 4)


def test_rng_uniform_never_hits_the_endpoints_and_is_uniform():
    u = Streams(1).uniform("u", 0, np.arange(4), 25_000).ravel()
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    b = Streams(1).bernoulli("b", 0, np.arange(20_000), 0.3)
    assert b.mean() == pytest.approx(0.3, abs=0.015)


def test_from_spec_and_repr():
    nz = noise.from_spec({"kind": "gaussian", "scale": 2.0, "decay": 0.5})
    assert isinstance(nz, noise.Gaussian) and nz.scale_at(1, 1)[0] == 1.0
    assert repr(nz) == "Gaussian(scale=2.0, decay=0.5)"
    assert noise.from_spec(None).is_zero
    assert isinstance(noise.from_spec(0.5), noise.Laplace)
    assert repr(noise.Laplace([1, 2], power=1)) == "Laplace(scale=[1.0, 2.0], power=1.0)"
    with pytest.raises(ParameterError, match="gaussian, laplace"):
        noise.from_spec({"kind": "cauchy", "scale": 1})


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5, 1.5, [0.5, 1.0]])
def test_decay_outside_the_open_unit_interval_raises(decay):
    with pytest.raises(ParameterError) as err:
        noise.Laplace(1.0, decay=decay)
    assert err.value.name == "decay"
    assert str(decay) in str(err.value) and "0 < decay < 1" in str(err.value)


@pytest.mark.parametrize("cls", [noise.Laplace, noise.Gaussian])
@pytest.mark.parametrize("scale", [-1.0, [1.0, -0.1]])
def test_negative_scale_raises(cls, scale):
    with pytest.raises(ParameterError) as err:
        cls(scale)
    assert err.value.name == "scale"
    assert str(scale) in str(err.value) and "scale >= 0" in str(err.value)


def test_other_bad_inputs():
    with pytest.raises(ParameterError, match="at most one of decay"):
        noise.Laplace(1.0, decay=0.5, power=1.0)
    with pytest.raises(ParameterError, match="finite"):
        noise.Laplace(float("inf"))
    with pytest.raises(ParameterError, match=r"one entry per agent \(n=4\)"):
        noise.Laplace([1.0, 2.0, 3.0]).scale_at(0, 4)
    with pytest.raises(ParameterError, match="1-d"):
        noise.Laplace([[1.0, 2.0]])
