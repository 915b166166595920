"""The runner on any torch device, its default log cadence, its timing, and config keys."""

import numpy as np
import pytest
import torch

import dpnet
from dpnet import compression, graphs, noise, problems
from dpnet.algorithms import DGD, DPSGD, DSGD, PGTC, DiaDSP
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.lab import config
from dpnet.runner import AUTO_LOG_ROWS, METRIC_SHARE, log_cadence, metric_cost_ratio

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))]

N, D = 12, 5
PROBLEM = problems.NonconvexLogistic.random(n_agents=N, samples=6, dim=D, seed=1)
RECORDLESS = problems.Quadratic.random(n_agents=N, dim=D, seed=1)
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


def test_auto_cadence_without_a_cost_logs_every_iteration_on_short_runs_and_500_rows_beyond():
    assert log_cadence("auto", 0) == 1 and log_cadence("auto", 500) == 1
    assert log_cadence("auto", 499) == 1 and log_cadence("auto", 10_000) == 20
    assert log_cadence(7, 10_000) == 7
    with pytest.raises(ParameterError, match="log_every"):
        log_cadence("sometimes", 10)
    # a problem without records: a row costs two steps; 1,003 steps pay for 50.15 rows
    res = dpnet.run(DiaDSP(0.1), RECORDLESS, GRAPH, 2 * AUTO_LOG_ROWS + 3)
    assert res.history["iteration"].tolist() == list(range(0, 1003, 21)) + [1003]
    assert log_cadence("auto", 100_000, 1.0) == 200         # the 500-row bound again


LOGISTIC = problems.LogisticRegression(
    np.random.default_rng(0).normal(size=(4, 50, 3)),
    np.where(np.random.default_rng(1).random((4, 50)) < 0.5, -1.0, 1.0))


def test_metric_cost_ratio_counts_a_rows_records_over_a_steps():
    # a metrics row reads all 4 x 50 records; a full-gradient step reads as many
    assert metric_cost_ratio(DGD(0.1), LOGISTIC) == 1.0
    assert metric_cost_ratio(DSGD(0.1, batch_size=5), LOGISTIC) == 10.0
    # Poisson DP-SGD at rate q reads q m records per agent in expectation
    assert metric_cost_ratio(DPSGD(0.1, 1.0, rate=0.08), LOGISTIC) == pytest.approx(1 / 0.08)
    assert metric_cost_ratio(DPSGD(0.1, 1.0, sampling="fixed", batch_size=4), LOGISTIC) == 12.5
    # a batch larger than the local set reads the local set
    assert metric_cost_ratio(DSGD(0.1, batch_size=500), LOGISTIC) == 1.0
    # no records declared: a row costs two full-gradient steps (objective and gradient)
    assert RECORDLESS.local_sizes() is None
    assert metric_cost_ratio(DiaDSP(0.1), RECORDLESS) == 2.0
    # the nonconvex logistic problem's records are counted (one fused pass per row)
    assert PROBLEM.local_sizes().tolist() == [6] * N
    assert metric_cost_ratio(DiaDSP(0.1), PROBLEM) == 1.0
    # unequal local sizes: a row reads every record, a step q m_i of agent i
    uneven = problems.LogisticRegression(LOGISTIC.A, LOGISTIC.b, sizes=[50, 10, 30, 10])
    assert uneven.metric_records() == 100
    assert metric_cost_ratio(DPSGD(0.1, 1.0, rate=0.1), uneven) == pytest.approx(100 / (4 * 2.5))


def test_auto_cadence_keeps_the_metrics_records_within_their_share_of_the_steps():
    assert METRIC_SHARE == 0.1
    # K = 100 steps at one step per row pay for 10 rows: 0, 12, ..., 96, 100
    assert log_cadence("auto", 100, 1.0) == 12 and log_cadence("auto", 100, 0.5) == 6
    assert log_cadence("auto", 100, 1.01) == 13               # 9.9 rows: 9 of them
    assert log_cadence("auto", 10_000, 0.5) == 20             # the 500-row bound is the larger
    assert log_cadence("auto", 400, 1 / 0.08) == 200           # 3.2 rows: 0, 200, 400
    assert log_cadence("auto", 400, 100.0) == 400              # first and last only
    assert log_cadence(3, 400, 1 / 0.08) == 3                  # an explicit cadence is kept
    for K in (35, 100, 999):
        res = dpnet.run(DGD(0.1), LOGISTIC, graphs.ring(4), K)
        rows = res.history["iteration"]
        # the records the metrics read are at most 10 % of the steps', and one row more breaks it
        assert len(rows) * LOGISTIC.metric_records() <= METRIC_SHARE * K * 4 * 50
        every = rows[1]
        assert (1 + -(-K // (every - 1))) * LOGISTIC.metric_records() > METRIC_SHARE * K * 4 * 50
    assert dpnet.run(DGD(0.1), LOGISTIC, graphs.ring(4), 35).history["iteration"].tolist() == \
        [0, 18, 35]


def test_a_neural_problems_metrics_read_a_fixed_sample_by_default():
    from dpnet.problems.neural import DEFAULT_METRIC_SAMPLES, NeuralProblem
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(3000, 4)).astype(np.float32), rng.integers(0, 3, 3000)
    parts = np.arange(3000).reshape(3, 1000)
    p = NeuralProblem(model, X, y, parts)
    # the loss and the gradient are two passes over the sample
    assert p.metric_samples == DEFAULT_METRIC_SAMPLES == 2048 and p.metric_records() == 2 * 2048
    full = NeuralProblem(model, X, y, parts, metric_samples=None)
    assert full.metric_records() == 2 * 3000
    assert LOGISTIC.metric_records() == 4 * 50          # one fused pass
    # the sample's loss is the mean over exactly those 2,048 evenly spaced training records
    x = p.x0.double()
    sel = np.round(np.linspace(0, 2999, 2048)).astype(int)
    logits = torch.as_tensor(X[sel]) @ model[1].weight.detach().T + model[1].bias.detach()
    want = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[sel])).item()
    assert p.loss(x) == pytest.approx(want, rel=1e-5)
    assert full.loss(x) != pytest.approx(want, rel=1e-5)
    # DP-SGD at rate 0.1: a row of 2 x 2,048 records against steps of 300; 2,000 steps pay
    # for 14.6 rows: every 154 iterations
    assert log_cadence("auto", 2000, metric_cost_ratio(DPSGD(0.1, 1.0, rate=0.1), p)) == 154


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
