"""dpnet.run: metrics, divergence detection, saving, bits history, the run's privacy."""

import csv
import json
import math
import re

import numpy as np
import pytest
import torch

import dpnet
from dpnet import graphs, noise, problems
from dpnet.algorithms import DGD, DiaDSP, GradientTracking
from dpnet.errors import NonFiniteError, ParameterError

import reference

G = graphs.ring(6)


def _quad():
    return problems.Quadratic.random(6, 3, seed=0)


def _diadsp():
    return DiaDSP(eta=0.1, noise_x=noise.Laplace(0.5, decay=0.9),
                  noise_y=noise.Laplace(0.5, decay=0.9))


def test_non_finite_iterate_names_iteration_and_variable():
    p = problems.SinCos.random(6, 4, seed=1)
    x0 = p.default_x0(0).numpy()
    with pytest.raises(NonFiniteError) as err:
        dpnet.run(DGD(eta=1e3), p, G, 500, x0=x0)
    # the first iteration at which the reference loop leaves the floats
    with np.errstate(all="ignore"):
        traj = reference.dgd(G.W, reference.local_gradients(p), x0, 1e3, 200)
    first = int(np.argmax(~np.isfinite(traj).all(axis=(1, 2))))
    assert 10 < first < 200
    assert err.value.iteration == first and err.value.variable == "x"
    msg = str(err.value)
    assert f"'x' at iteration {first}" in msg and "diverged" in msg
    assert isinstance(err.value, FloatingPointError)


def test_non_finite_tracking_variable_is_named():
    p = problems.SinCos.random(6, 4, seed=1)
    with pytest.raises(NonFiniteError) as err:
        dpnet.run(GradientTracking(eta=1e3), p, G, 500)
    assert err.value.variable in ("x", "y", "g") and err.value.iteration > 1


def test_history_metrics_against_hand_computation():
    p = _quad()
    K, log_every = 23, 5
    states = {}
    res = dpnet.run(GradientTracking(0.2), p, G, K, log_every=log_every,
                    callback=lambda k, s: states.__setitem__(k, s["x"].numpy().copy()),
                    metrics={"y_sq": lambda s, k: float((s["y"] ** 2).sum())})
    h = res.history
    assert h["iteration"].tolist() == [0, 5, 10, 15, 20, 23]
    assert set(h) == {"iteration", "objective", "grad_norm_sq", "consensus", "distance", "bits",
                      "bits_per_agent", "y_sq"}
    x_star = p.optimum()
    for row, k in enumerate(h["iteration"][1:], start=1):
        X = states[k]
        xbar = X.mean(0)
        assert h["objective"][row] == pytest.approx(p.loss(torch.from_numpy(xbar)), rel=1e-12)
        gx = p.global_grad(torch.from_numpy(xbar)).numpy()
        assert h["grad_norm_sq"][row] == pytest.approx((gx**2).sum(), rel=1e-10)
        assert h["consensus"][row] == pytest.approx(((X - xbar) ** 2).sum(), rel=1e-10)
        assert h["distance"][row] == pytest.approx(((X - x_star.numpy()) ** 2).sum(), rel=1e-10)
    np.testing.assert_array_equal(res.x, states[K])
    assert h["y_sq"][-1] == pytest.approx(float((res.state["y"] ** 2).sum()))
    assert h["distance"][-1] < h["distance"][0]
    # x0 as a (d,) vector is every agent's start; the default start is U[0,1]^d from the seed
    r1 = dpnet.run(GradientTracking(0.2), p, G, 0, x0=np.ones(3))
    assert r1.history["consensus"].tolist() == [0.0] and r1.iterations == 0
    r2 = dpnet.run(GradientTracking(0.2), p, G, 0, seed=4)
    np.testing.assert_array_equal(r2.x, p.default_x0(4).numpy())
    # no known optimum: distance is NaN unless a reference point is given
    r3 = dpnet.run(GradientTracking(0.2), p, G, 2, reference=None)
    assert np.isnan(r3.history["distance"]).all()
    r4 = dpnet.run(GradientTracking(0.2), p, G, 2, reference=torch.zeros(3), x0=np.ones(3))
    assert r4.history["distance"][0] == pytest.approx(18.0)


def test_bits_history_and_ledger():
    p = _quad()
    K = 9
    res = dpnet.run(_diadsp(), p, G, K, log_every=3, record=True, float_bits=32)
    per_iter = 2 * 3 * 32 * 2 * 6          # two broadcasts of 3 floats to 2 neighbours, 6 agents
    assert res.history["bits"].tolist() == [0, 3 * per_iter, 6 * per_iter, 9 * per_iter]
    np.testing.assert_allclose(res.history["bits_per_agent"], res.history["bits"] / 6)
    assert res.bits["total"] == K * per_iter
    assert res.bits["per_agent"] == [K * per_iter // 6] * 6
    assert res.ledger.per_iteration().tolist() == [per_iter] * K
    assert res.ledger.per_agent_iteration().shape == (K, 6)
    assert len(res.transcript) == 2 * K


def test_run_privacy_and_reproducibility():
    p = problems.NonconvexLogistic.random(6, 20, 4, seed=0)
    alg = _diadsp()
    res = dpnet.run(alg, p, G, 12, seed=3, reference=None)
    assert res.privacy == alg.privacy(p, G, iterations=12)
    assert res.privacy.is_private and "Theorem 3" in res.privacy.theorem
    given = dpnet.run(alg, p, G, 12, seed=3, privacy={"gradient_bound": 5.0}, reference=None)
    assert given.privacy.epsilon == pytest.approx(
        alg.privacy(p, G, iterations=12, gradient_bound=5.0).epsilon)
    np.testing.assert_array_equal(given.x, res.x)                     # same seed, same run
    other = dpnet.run(alg, p, G, 12, seed=4, reference=None)
    assert np.abs(other.x - res.x).max() > 1e-6
    # constants given explicitly and rejected: the error reaches the user
    with pytest.raises(ParameterError, match="gradient_bound"):
        dpnet.run(alg, p, G, 2, privacy={"gradient_bound": -1.0}, reference=None)
    # no constants and no bound available (SinCos): a run without a guarantee, saying why
    s = problems.SinCos.random(6, 4)
    r = dpnet.run(alg, s, G, 2)
    assert not r.privacy.is_private and "gradient_bound" in r.privacy.theorem
    assert not dpnet.run(GradientTracking(0.1), p, G, 2, reference=None).privacy.is_private


def test_csv_and_json_round_trip(tmp_path):
    p = _quad()
    res = dpnet.run(_diadsp(), p, G, 6, log_every=2, privacy={"gradient_bound": 1.0})
    assert res.privacy.is_private
    path = res.to_csv(tmp_path / "out" / "run.csv")
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(res.history)
    assert len(rows) == len(res.history["iteration"]) == 4
    for key, col in res.history.items():
        np.testing.assert_allclose([float(r[key]) for r in rows], col, rtol=1e-15)

    jpath = res.to_json(tmp_path / "run.json")
    summary = json.loads(jpath.read_text())
    assert summary["algorithm"] == "diadsp" and summary["iterations"] == 6
    assert summary["bits"] == res.bits
    assert summary["privacy"]["epsilon"] == pytest.approx(res.privacy.epsilon)
    assert summary["final"]["iteration"] == 6
    assert summary["final"]["objective"] == pytest.approx(res.history["objective"][-1])
    assert summary["params"]["eta"] == 0.1


def test_json_is_strict_even_without_a_guarantee(tmp_path):
    """An infinite epsilon is the string "inf" and an untracked metric null, never a bare
    Infinity/NaN."""
    p = _quad()
    res = dpnet.run(GradientTracking(0.1), p, G, 3, reference=None)
    text = res.to_json(tmp_path / "gt.json").read_text()

    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    summary = json.loads(text, parse_constant=reject)
    assert summary["privacy"]["epsilon"] == "inf"
    assert summary["final"]["distance"] is None
    assert math.isinf(float(summary["privacy"]["epsilon"]))


def test_run_validates_its_arguments():
    p = _quad()
    with pytest.raises(ParameterError) as err:
        dpnet.run(DGD(0.1), p, graphs.ring(5), 3)
    assert err.value.name == "graph.n" and "n_agents = 6" in str(err.value)
    for kw, name in (({"iterations": -1}, "iterations"), ({"iterations": 2.5}, "iterations"),
                     ({"iterations": 3, "log_every": 0}, "log_every")):
        with pytest.raises(ParameterError) as err:
            dpnet.run(DGD(0.1), p, G, **kw)
        assert err.value.name == name
    with pytest.raises(ParameterError) as err:
        dpnet.run(DGD(0.1), p, G, 3, x0=np.zeros((6, 4)))
    assert err.value.name == "x0" and "(6, 4)" in str(err.value)


def test_a_run_without_a_terminal_logs_where_it_is(monkeypatch, caplog):
    """Issue 39: a piped `dpnet run` was silent, so a mistyped horizon ran without a word; the
    runner logs its progress ("dpnet.run", every PROGRESS_EVERY_S seconds) when no bar shows."""
    import logging

    from dpnet import runner

    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)
    problem = dpnet.problems.Quadratic.random(n_agents=3, dim=2, seed=0)
    with caplog.at_level(logging.INFO, logger="dpnet.run"):
        dpnet.run(dpnet.algorithms.DGD(0.1), problem, dpnet.graphs.ring(3), 4, progress=None)
    lines = [r.getMessage() for r in caplog.records if r.name == "dpnet.run"]
    assert len(lines) == 4 and lines[-1].startswith("dgd: iteration 4 of 4 (100 %)")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dpnet.run"):       # progress=False: silent
        dpnet.run(dpnet.algorithms.DGD(0.1), problem, dpnet.graphs.ring(3), 4, progress=False)
    assert not [r for r in caplog.records if r.name == "dpnet.run"]


def test_a_run_that_will_take_long_says_so_at_its_start(monkeypatch, caplog):
    """Issue 39: a horizon of 10^9 iterations (a typo for 10^3) ran for hours without a word. After
    FORECAST_AFTER_S seconds of steps the runner forecasts the whole run and warns, once, if it
    exceeds LONG_RUN_S. Here both thresholds are 0: every run forecasts at its first step."""
    import logging

    from dpnet import runner

    problem = dpnet.problems.Quadratic.random(n_agents=3, dim=2, seed=0)
    monkeypatch.setattr(runner, "FORECAST_AFTER_S", 0.0)
    monkeypatch.setattr(runner, "LONG_RUN_S", 0.0)
    with caplog.at_level(logging.INFO, logger="dpnet.run"):
        dpnet.run(dpnet.algorithms.DGD(0.1), problem, dpnet.graphs.ring(3), 6, progress=None)
    warned = [r for r in caplog.records if r.name == "dpnet.run" and r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert re.fullmatch(r"dgd: 6 iterations will take about \d+ min at this pace \(\S+ s each\); "
                        r"interrupt \(Ctrl-C\) if that is not what you meant", warned[0].getMessage())
    caplog.clear()
    monkeypatch.setattr(runner, "LONG_RUN_S", 1e9)       # a short run: no forecast line
    with caplog.at_level(logging.INFO, logger="dpnet.run"):
        dpnet.run(dpnet.algorithms.DGD(0.1), problem, dpnet.graphs.ring(3), 6, progress=None)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
