"""The runner on any torch device, its default log cadence, its timing, and config keys."""

import numpy as np
import pytest
import torch

import dpnet
from dpnet import compression, graphs, noise, problems
from dpnet.algorithms import PGTC, DiaDSP
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.lab import config
from dpnet.runner import AUTO_LOG_ROWS, log_cadence

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))]

N, D = 12, 5
PROBLEM = problems.NonconvexLogistic.random(n_agents=N, samples=6, dim=D, seed=1)
GRAPH = graphs.ring(N)


def _algorithms():
    lap = noise.Laplace(0.05, decay=0.95)
    return [DiaDSP(0.1, lap, lap),
            PGTC(eta=0.1, gamma=0.3, alpha_x=0.5, alpha_y=0.5, compressor=compression.RandK(2),
                 noise_x=lap, noise_y=lap, check_theory=False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", [0, 1])
def test_run_on_a_device_equals_the_default_run_and_returns_cpu_numpy(device, which):
    base = dpnet.run(_algorithms()[which], PROBLEM, GRAPH, 20, seed=3, record=True)
    res = dpnet.run(_algorithms()[which], PROBLEM, GRAPH, 20, seed=3, record=True, device=device)
    assert isinstance(res.x, np.ndarray) and all(isinstance(v, np.ndarray)
                                                 for v in res.state.values())
    np.testing.assert_allclose(res.x, base.x, rtol=1e-12, atol=1e-12)
    for key, v in base.history.items():
        np.testing.assert_allclose(res.history[key], v, rtol=1e-10, atol=1e-12, err_msg=key)
    for a, b in zip(base.transcript.entries, res.transcript.entries):
        assert b.messages.device.type == "cpu"
        torch.testing.assert_close(b.messages, a.messages, rtol=1e-12, atol=1e-12)
    assert res.ledger.total == base.ledger.total
    assert res.privacy.epsilon == base.privacy.epsilon


def test_device_mismatch_with_a_given_network_is_refused():
    net = dpnet.network.Network(GRAPH, device="cpu")
    with pytest.raises(ParameterError, match="device"):
        dpnet.run(_algorithms()[0], PROBLEM, GRAPH, 2, network=net, device="meta")


def test_auto_cadence_logs_every_iteration_on_short_runs_and_500_rows_on_long_ones():
    assert log_cadence("auto", 0) == 1 and log_cadence("auto", 500) == 1
    assert log_cadence("auto", 499) == 1 and log_cadence("auto", 10_000) == 20
    assert log_cadence(7, 10_000) == 7
    with pytest.raises(ParameterError, match="log_every"):
        log_cadence("sometimes", 10)
    res = dpnet.run(DiaDSP(0.1), PROBLEM, GRAPH, 2 * AUTO_LOG_ROWS + 3)
    assert res.history["iteration"].tolist() == list(range(0, 1003, 2)) + [1003]


def test_timing_splits_the_run_and_metrics_are_measured():
    res = dpnet.run(DiaDSP(0.1), PROBLEM, GRAPH, 30)
    t = res.timing
    assert set(t) == {"setup", "steps", "metrics", "privacy"}
    assert all(v >= 0 for v in t.values())
    assert t["steps"] + t["metrics"] == pytest.approx(res.wall_time, rel=1e-9)
    assert res.summary()["timing_s"] == t


def test_config_device_and_unknown_top_level_key(tmp_path):
    cfg = {"graph": {"name": "ring", "n": 4}, "iterations": 3, "device": "cpu",
           "problem": {"name": "nonconvex_logistic", "samples": 5, "dim": 3},
           "algorithm": {"name": "diadsp", "eta": 0.1}}
    res = config.run(cfg, tmp_path / "a", quiet=True)
    assert res.iterations == 3 and (tmp_path / "a" / "summary.json").is_file()
    with pytest.raises(UnknownNameError, match="itertions") as err:
        config.run({**cfg, "itertions": 5}, tmp_path / "b", quiet=True)
    assert "iterations" in str(err.value) and "device" in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_a_device_this_machine_lacks_is_a_clear_error():
    with pytest.raises(ParameterError) as err:
        dpnet.run(_algorithms()[0], PROBLEM, GRAPH, 2, device="cuda")
    assert err.value.name == "device" and "available" in str(err.value)
