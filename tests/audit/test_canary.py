"""The white-box canary audit of DP-SGD-type configurations: near-tight on a calibrated DP-SGD
(the Gaussian-DP estimate close to the claim, the Clopper-Pearson bound below it), a silent
noise reduction caught, DECOR's correlated noise whitened (without the whitening the estimate
would fall far below the claim), and a leaderboard row audited at its own horizon."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet import graphs
from dpnet.algorithms import DECOR, DPSGD
from dpnet.errors import ParameterError
from dpnet.lab.audit import canary
from dpnet.lab.audit.engine import LinearRecords

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

K, Q = 40, 0.05


def _calibrated(unit, graph, eps):
    records = LinearRecords(np.zeros((graph.n, 100, 1)))
    alg = unit.calibrate(eps, records, graph, K, delta=1e-5)
    return alg, alg.privacy(records, graph, K, delta=1e-5).epsilon


def test_a_calibrated_dp_sgd_is_audited_near_tight_and_a_reduction_is_caught():
    graph = graphs.ring(6)
    alg, claim = _calibrated(DPSGD(0.5, 1.0, rate=Q), graph, 2.0)
    a = canary.audit(alg, graph, K, claim, 1e-5, runs=20000, seed=1)
    assert not a["violated"] and 0 < a["lower_bound"] <= claim
    assert 0.75 * claim <= a["gdp_estimate"] <= 1.1 * claim
    assert a["caught_at"] is not None and a["caught_at"] >= 0.5


def test_decors_correlated_noise_is_whitened():
    graph = graphs.ring(4)
    alg, claim = _calibrated(DECOR(0.5, 1.0, 3.0, rate=Q), graph, 2.0)
    a = canary.audit(alg, graph, K, claim, 1e-5, runs=3000, seed=2, power=False)
    assert not a["violated"]
    assert 0.75 * claim <= a["gdp_estimate"] <= 1.1 * claim
    # the secrets matter: DP-SGD at the same independent noise claims far more, and the audit
    # of DECOR's runs stays near DECOR's own claim
    records = LinearRecords(np.zeros((graph.n, 100, 1)))
    plain = DPSGD(alg.lr, alg.noise_multiplier, rate=Q).privacy(records, graph, K, delta=1e-5)
    assert plain.epsilon > 2 * claim


def test_a_fixed_batch_is_refused_by_name():
    with pytest.raises(ParameterError, match="sampling"):
        canary.scores(DPSGD(0.5, 1.0, sampling="fixed", batch_size=4), graphs.ring(4), 5, 20)


@pytest.mark.usefixtures("small_data")
def test_a_quick_leaderboard_row_is_audited_at_its_own_horizon():
    from dpnet.lab import compare

    rows = compare.compare(["logistic"], [2.0], ["dp_sgd"], quick=True, seeds=[0],
                           dataset="a9a", tight="none", publish_start=False)
    [row] = [r for r in rows if r["status"] == "ok"]
    a = compare.audit.audit_row(row, "a9a", 100)
    assert a["method"] == "canary" and a["repetitions"] == compare.audit.CANARY_RUNS
    assert a["iterations"] == int(row["choice"].rpartition("K=")[2])
    assert a["claimed_epsilon"] == pytest.approx(row["certified_epsilon"], rel=1e-9)
    assert not a["violated"] and a["caught_at"] is not None
    assert "GDP estimate" in compare.audit.markdown([a])


def test_the_command_line_audits_and_reports_a_silent_reduction_as_a_violation(tmp_path, capsys):
    from dpnet.cli import main

    argv = ["audit", "--canary", "2", "--iterations", "40", "--rate", "0.05",
            "--repetitions", "4000", "--out", str(tmp_path), "dp_sgd"]
    assert main(argv) == 0
    assert "within claim" in (tmp_path / "canary.md").read_text()
    assert main([*argv, "--noise-factor", "0.3"]) == 0          # a mutation: reported, not an error
    assert "VIOLATED" in (tmp_path / "canary.md").read_text()
    assert main(["audit", "--canary", "2", "dpsgd", "--out", str(tmp_path)]) == 2
    assert "one of ('dp_sgd', 'decor')" in capsys.readouterr().err
