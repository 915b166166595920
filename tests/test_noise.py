"""Privacy noise: distributions at the scheduled scale, per-agent scales, reproducible streams."""

import numpy as np
import pytest
import torch
from scipy import stats

from dpnet import noise
from dpnet.errors import ParameterError, UnknownNameError
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
    with pytest.raises(UnknownNameError, match="known noise kinds: gaussian, laplace"):
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


# ---- devices and paths --------------------------------------------------------------------------

NOISES = [noise.Laplace([0.5, 1.0, 0.0, 4.0], decay=0.9), noise.Gaussian([1.0, 3.0, 0.5, 2.0])]


@pytest.mark.parametrize("nz", NOISES, ids=["laplace", "gaussian"])
@pytest.mark.parametrize("device", [None, "cpu", torch.device("cpu")])
def test_cpu_sample_is_the_standard_draw_times_the_scale(nz, device):
    rng, agents = Streams(11), np.array([3, 0, 2])
    z = nz.sample(rng, "noise_x", 4, agents, 4, 300, device=device)
    assert z.device.type == "cpu" and z.dtype == torch.float64
    draw = rng.laplace if isinstance(nz, noise.Laplace) else rng.gaussian
    hand = draw("noise_x", 4, agents, 300) * nz.scale_at(4, 4)[agents][:, None]
    assert np.array_equal(z.numpy().view(np.int64), hand.view(np.int64))


@pytest.mark.parametrize("nz", NOISES, ids=["laplace", "gaussian"])
def test_sample_without_the_kernels_is_bit_identical(nz, monkeypatch):
    from dpnet import rng as rng_module

    monkeypatch.setattr(rng_module, "_KERNELS_AFTER", 0)   # the kernels from the first draw
    fast = nz.sample(Streams(2), "noise_y", 7, np.arange(4), 4, 5000).numpy()
    monkeypatch.setattr(rng_module, "_USE_KERNELS", False)
    slow = nz.sample(Streams(2), "noise_y", 7, np.arange(4), 4, 5000).numpy()
    assert np.array_equal(fast.view(np.int64), slow.view(np.int64))


@pytest.mark.parametrize("nz", NOISES, ids=["laplace", "gaussian"])
def test_the_torch_path_agrees_with_the_cpu_path(nz):
    """What a GPU would run, forced on the CPU: same uniforms, transforms equal up to rounding."""
    rng, agents = Streams(5), np.arange(4)
    cpu = nz.sample(rng, "noise_x", 3, agents, 4, 2000).numpy()
    scale = nz.scale_at(3, 4)[agents]
    dev = nz._sample_tensor(rng, "noise_x", 3, agents, 2000, scale, torch.device("cpu"))
    assert dev.dtype == torch.float64
    np.testing.assert_array_max_ulp(dev.numpy(), cpu, 4)
    assert np.all(dev.numpy()[2] == 0.0) == np.all(cpu[2] == 0.0)


def test_zero_noise_lands_on_the_requested_device():
    z = noise.Laplace(0.0).sample(Streams(0), "p", 0, np.arange(2), 2, 3, dtype=torch.float32,
                                  device="cpu")
    assert z.device.type == "cpu" and z.dtype == torch.float32 and not z.any()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("nz", NOISES, ids=["laplace", "gaussian"])
def test_cuda_sample_stays_on_the_device_and_matches_the_cpu(nz):
    rng, agents = Streams(8), np.arange(4)
    gpu = nz.sample(rng, "noise_x", 2, agents, 4, 1000, dtype=torch.float64, device="cuda")
    assert gpu.device.type == "cuda" and gpu.dtype == torch.float64
    cpu = nz.sample(rng, "noise_x", 2, agents, 4, 1000).numpy()
    np.testing.assert_array_max_ulp(gpu.cpu().numpy(), cpu, 8)
    g32 = nz.sample(rng, "noise_x", 2, agents, 4, 1000, dtype=torch.float32, device="cuda")
    assert g32.dtype == torch.float32 and g32.device.type == "cuda"
    zero = noise.Gaussian(0.0).sample(rng, "p", 0, agents, 4, 3, device="cuda")
    assert zero.device.type == "cuda" and not zero.any()


def test_a_subclass_without_a_torch_path_still_samples_on_any_device():
    class Uniformish(noise.Noise):
        def _standard(self, rng, purpose, k, agents, dim, scale=None):
            z = rng.uniform(purpose, k, agents, dim) - 0.5
            return z if scale is None else z * scale[:, None]

        def variance_at(self, k, n):
            return self.scale_at(k, n) ** 2 / 12.0

    nz, rng, agents = Uniformish(2.0), Streams(4), torch.arange(3)
    cpu = nz.sample(rng, "u", 1, agents, 3, 6)
    forced = nz._sample_tensor(rng, "u", 1, agents.numpy(), 6, nz.scale_at(1, 3), torch.device("cpu"))
    assert torch.equal(cpu, forced)


def test_a_million_gaussian_draws_are_standard_normal():
    """Box-Muller with dpnet's own cos(2 pi u) (see dpnet.rng): mean, variance, fourth moment and
    a KS test against N(0, 1) at 10^6 draws (1000 agents x 1000), which has the power to reject
    a 2% error in the scale."""
    from dpnet import rng as rng_module

    z = Streams(17).gaussian("noise_x", 0, np.arange(1000), 1000).ravel()
    n = z.size
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * np.sqrt(2.0 / n)
    assert abs(np.mean(z**4) - 3.0) < 5 * np.sqrt(96.0 / n)       # Var(z^4) = 105 - 9
    assert stats.kstest(z, "norm").pvalue > P_MIN
    assert stats.kstest(z, stats.norm(scale=1.02).cdf).pvalue < 1e-6
    assert abs(np.mean(z > 0) - 0.5) < 5 * 0.5 / np.sqrt(n)
    # the cosine alone: cos(2 pi u) of a uniform u has the arcsine law, P(c <= x) = 1 - acos(x)/pi
    c = rng_module.cos_2pi(Streams(18).uniform("angle", 0, np.arange(1000), 1000).ravel())
    assert stats.kstest(c, lambda x: 1.0 - np.arccos(x) / np.pi).pvalue > P_MIN


@pytest.mark.parametrize("kw", [{}, {"decay": 0.9}, {"decay": [0.9, 0.5, 0.8]}, {"power": 0.6},
                                {"schedule": lambda k: 1.0 / (k + 1)},
                                {"schedule": lambda k: np.array([1.0, 0.5, 0.25]) ** k}])
@pytest.mark.parametrize("scale", [2.0, [0.5, 1.0, 4.0]])
def test_a_shared_scale_stays_one_number_and_equals_the_per_agent_one(scale, kw):
    # a shared value is kept as one entry (an (n,) power over 10^7 agents cost 0.4 s a draw);
    # broadcast, it is the per-agent schedule exactly, and a draw with it is the same bits
    nz = noise.Laplace(scale, **kw)
    for k in (0, 3, 17):
        shared = nz.schedule.shared_at(k, 3)
        per_agent = np.broadcast_to(np.asarray(scale, dtype=float), (3,)).copy()
        if "decay" in kw:
            per_agent = per_agent * np.broadcast_to(np.asarray(kw["decay"]), (3,)) ** k
        elif "power" in kw:
            per_agent = per_agent / (k + 1.0) ** kw["power"]
        elif "schedule" in kw:
            per_agent = per_agent * np.broadcast_to(kw["schedule"](k), (3,))
        one_number = (np.ndim(scale) == 0 and np.ndim(kw.get("decay", 0)) == 0
                      and np.ndim(kw["schedule"](k) if "schedule" in kw else 0) == 0)
        assert shared.size == (1 if one_number else 3)
        assert np.array_equal(nz.scale_at(k, 3), per_agent)
        agents = np.array([2, 0])
        hand = Streams(4).laplace("p", k, agents, 50) * per_agent[agents][:, None]
        got = nz.sample(Streams(4), "p", k, agents, 3, 50).numpy()
        assert np.array_equal(got.view(np.int64), hand.view(np.int64))
        dev = nz._sample_tensor(Streams(4), "p", k, agents, 50,
                                shared if shared.size == 1 else shared[agents], torch.device("cpu"))
        np.testing.assert_array_max_ulp(dev.numpy(), hand, 4)


def test_a_custom_schedule_of_the_wrong_length_is_named():
    nz = noise.Gaussian(1.0, schedule=lambda k: np.ones(2))
    with pytest.raises(ParameterError, match=r"schedule.*one value or one per agent \(n=3\)"):
        nz.sample(Streams(0), "p", 0, np.arange(3), 3, 4)
