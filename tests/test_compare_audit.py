"""The audit of calibrated leaderboard configurations: the worst-case record pair realises the
relation's sensitivity exactly, a calibrated configuration stays within its claim, the same test
catches a silently under-noised run, and the CLI writes the audit and fails on a violation."""

import csv
import json
import math

import numpy as np
import pytest
import torch

from dpnet.cli import main
from dpnet.errors import ParameterError
from dpnet.lab.compare import audit, entries, tasks
from dpnet.problems.stochastic import Clip
from dpnet.rng import Streams

pytestmark = pytest.mark.usefixtures("small_data")


def test_the_record_pair_moves_agent_0s_gradient_by_exactly_the_sensitivity():
    t = tasks.build("logistic", "a9a")
    a, b = audit.pair(t)
    X = torch.randn(t.problem.n_agents, t.problem.dim, dtype=torch.float64)
    diff = a.grad(X) - b.grad(X)
    assert float(diff[0].norm()) == pytest.approx(t.sensitivity, rel=1e-12)
    assert float(diff[1:].abs().max()) == 0.0
    # minibatch: record 0 is in agent 0's batch with probability B/m, then moves the mean by
    # 2R/B; per-record clipping at G = R leaves the record as it is
    B, draws = 4, 4000
    hits = sum(bool(a.stochastic_grad(X, Streams(s), 0, B, clip=Clip(1.0, "l2"))[0].any())
               for s in range(draws))
    p = B / t.m
    assert abs(hits / draws - p) < 4 * np.sqrt(p * (1 - p) / draws)
    g = a.stochastic_grad(X, Streams(0), 0, t.m)          # a full batch always holds it
    assert float(g[0].norm()) == pytest.approx(t.R / t.m, rel=1e-12)


def test_a_calibrated_configuration_is_within_its_claim_and_a_thousandfold_underfit_is_caught():
    row = {"task": "logistic", "algorithm": "diadsp", "accountant": "xie",
           "target_epsilon": 1.0, "choice": "eta=0.3, q=0.95"}
    out = audit.audit_row(row, "a9a", repetitions=600)
    assert out["status"] == "ok" and out["claimed_epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert out["delta"] == 0.0
    assert not out["violated"] and out["audited_epsilon"] <= out["claimed_epsilon"]
    # the resolution found on the fixture: x0.1 and x0.01 are not caught, x0.001 is
    assert out["caught_at"] == 0.001 and out["mutated_audited_epsilon"] > 1.0


def test_the_sample_takes_each_algorithms_smallest_epsilon_default_row_and_every_canary_row():
    rows = [{"task": "logistic", "algorithm": n, "accountant": acc, "target_epsilon": e,
             "status": st, "choice": "x=1", "certified_epsilon": e}
            for n in ("diadsp", "doadp") for e in (0.5, 2.0)
            for acc in (entries.entry(n).default, "rdp") for st in ("ok",)]
    for r, trial in zip(rows, [{"eta": 0.3, "q": 0.95}] * 4 + [{"alpha": 0.1, "batch": 16}] * 4):
        r["choice"] = ", ".join(f"{k}={v:g}" for k, v in trial.items())
    # a DP-SGD-type row is audited at every epsilon (its canary audit is cheap)
    rows += [{"task": "logistic", "algorithm": "dp_sgd", "accountant": "pld", "target_epsilon": e,
              "status": "ok", "choice": "lr=1, batch=16, horizon=1, K=40", "certified_epsilon": e}
             for e in (1.0, 2.0)]
    rows.append({"task": "logistic", "algorithm": "dpp2", "accountant": "ou",
                 "target_epsilon": 0.5, "status": "not applicable: x", "choice": "",
                 "certified_epsilon": float("nan")})
    # a row that published x0 (K = 0) released nothing about the data: nothing to audit
    rows.append({"task": "logistic", "algorithm": "dp_sgd", "accountant": "pld",
                 "target_epsilon": 0.5, "status": "ok", "choice": "K=0 (x0 published)",
                 "certified_epsilon": 0.0})
    picked = audit.sample(rows)
    # DiaDSP: its default row at its smallest epsilon; DO-ADP's clipped fixed batch and DP-SGD
    # are covered by the canary audit: every epsilon and every accountant
    assert [(r["algorithm"], r["accountant"], r["target_epsilon"]) for r in picked] == [
        ("diadsp", "xie", 0.5), ("doadp", "proof", 0.5), ("doadp", "rdp", 0.5),
        ("dp_sgd", "pld", 1.0), ("doadp", "proof", 2.0), ("doadp", "rdp", 2.0),
        ("dp_sgd", "pld", 2.0)]
    assert len(audit.sample(rows, per_task=1)) == 1
    # every row: DiaDSP at both epsilons and both accountants too; still nothing for x0 or n/a
    every = {(r["algorithm"], r["accountant"], r["target_epsilon"])
             for r in audit.sample(rows, every=True)}
    assert every == {(r["algorithm"], r["accountant"], r["target_epsilon"]) for r in rows
                     if r["status"] == "ok" and r["certified_epsilon"] > 0}
    assert len(every) == 10 and ("diadsp", "rdp", 2.0) in every


def test_cli_compare_with_audit_writes_the_audit(tmp_path, capsys):
    assert main(["compare", "--quick", "--tasks", "logistic", "--dataset", "a9a",
                 "--algorithms", "dpp2", "--epsilons", "2", "--seeds", "0", "--tight", "none",
                 "--without-x0", "--audit", "100", "--silent", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "leaderboard.md").read_text()
    assert "## Audit of a sample of calibrated configurations" in text
    assert "| logistic | dpp2 | ou | record pair | 3 | 100 |" in text and "within claim" in text
    assert (tmp_path / "audit.csv").is_file()


def test_a_leaderboards_audits_are_stored_runs_read_back_on_a_rerun(monkeypatch):
    """``compare --audit`` audits through the run store: a rerun (or a resumed, interrupted
    audit) reads a finished audit back instead of recomputing it, to the bit."""
    row = {"task": "logistic", "algorithm": "diadsp", "accountant": "xie",
           "target_epsilon": 1.0, "choice": "eta=0.3, q=0.95", "status": "ok", "seeds": 2}
    first = audit.audit_rows([row], "a9a", 100)
    assert first[0]["status"] == "ok" and first[0]["algorithm"] == "diadsp"

    def recomputed(*args, **kwargs):
        raise AssertionError("a stored audit was recomputed")

    monkeypatch.setattr(audit, "threshold_test", recomputed)
    assert audit.audit_rows([row], "a9a", 100) == first
    # another number of runs is another audit
    with pytest.raises(AssertionError, match="recomputed"):
        audit.audit_rows([row], "a9a", 101)


def test_a_stored_results_non_finite_numbers_come_back_as_floats():
    from dpnet.lab import store

    back = store.restored(json.loads(json.dumps(store._jsonable(
        {"a": math.inf, "b": [{"c": math.nan}], "status": "ok", "d": 1.5}))))
    assert back["a"] == math.inf and math.isnan(back["b"][0]["c"])
    assert (back["status"], back["d"]) == ("ok", 1.5)


def test_the_stream_pair_differs_at_its_records_one_step_only():
    """One record of agent 0's one-pass stream replaced (the stream relation): its gradient
    moves by exactly 2R u at step 0, the record's step, and nowhere else."""
    t = tasks.build("logistic_stream", "a9a")
    a, b = audit.pair(t)
    X = torch.randn(t.problem.n_agents, t.problem.dim, dtype=torch.float64)
    for k in range(t.spec.horizon):
        diff = a.stochastic_grad(X, Streams(0), k, None) - b.stochastic_grad(X, Streams(0), k, None)
        if k == 0:
            assert float(diff[0].norm()) == pytest.approx(2 * t.R, rel=1e-12)
            assert float(diff[0].abs().sum()) == pytest.approx(2 * t.R * np.sqrt(t.problem.dim))
            assert float(diff[1:].abs().max()) == 0.0
        else:
            assert float(diff.abs().max()) == 0.0


@pytest.mark.parametrize("name", ["dola", "dmod"])
def test_a_stream_row_is_audited_with_the_stream_pair(name):
    """A stream row's claim holds against the stream pair, and the same test catches its noise
    silently divided by 100 (the Laplace releases' pure claims are loose for a record whose l1
    sensitivity is spread over d coordinates: docs/auditing.md)."""
    e = entries.entry(name)
    row = {"task": "logistic_stream", "algorithm": name, "accountant": e.default,
           "target_epsilon": 1.0, "choice": ", ".join(
               f"{k}={v:g}" for k, v in {**e.grid[0], "horizon": 1.0}.items())}
    out = audit.audit_row(row, "a9a", repetitions=1000)
    assert out["status"] == "ok" and out["claimed_epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert not out["violated"] and out["caught_at"] in (0.1, 0.01)


def test_a_published_leaderboard_is_audited_from_its_csv(tmp_path, capsys):
    """``compare --audit-csv``: the sample of a published leaderboard.csv is audited without
    recomputing the leaderboard, with the same numbers as the audit of the rows it came from."""
    lb, out = tmp_path / "lb", tmp_path / "audit"
    argv = ["compare", "--quick", "--tasks", "logistic", "--dataset", "a9a", "--algorithms",
            "dpp2,dp_sgd", "--epsilons", "2", "--seeds", "0", "--tight", "none", "--without-x0",
            "--silent"]
    assert main([*argv, "--audit", "100", "--out", str(lb)]) == 0
    assert main(["compare", "--audit", "100", "--audit-csv", str(lb / "leaderboard.csv"),
                 "--dataset", "a9a", "--silent", "--out", str(out)]) == 0
    with (lb / "audit.csv").open() as a, (out / "audit.csv").open() as b:
        assert list(csv.DictReader(a)) == list(csv.DictReader(b))
    text = (out / "audit.md").read_text()
    assert "# Audit of" in text and "--audit-csv" in text and "| dp_sgd | pld | canary |" in text
    assert main(["compare", "--audit", "0", "--audit-csv", str(lb / "leaderboard.csv"),
                 "--out", str(out)]) == 2
    assert "--audit=0" in capsys.readouterr().err
    assert main(["compare", "--audit", "10", "--audit-csv", str(tmp_path / "none.csv"),
                 "--out", str(out)]) == 2
    assert "--audit-csv=" in (err := capsys.readouterr().err) and "that exists" in err
    # --tasks/--algorithms/--epsilons select published rows; a value the CSV lacks is an error
    # naming the ones it has, and the options of computing a leaderboard are refused
    assert main(["compare", "--audit", "100", "--audit-csv", str(lb / "leaderboard.csv"),
                 "--algorithms", "dp_sgd", "--dataset", "a9a", "--silent", "--out",
                 str(tmp_path / "one")]) == 0
    def filled(rows):     # the columns of the record-pair rows are empty for the canary rows
        return [{k: v for k, v in r.items() if v != ""} for r in rows]
    with (lb / "audit.csv").open() as a, (tmp_path / "one" / "audit.csv").open() as b:
        assert filled(r for r in csv.DictReader(a) if r["algorithm"] == "dp_sgd") == filled(
            csv.DictReader(b)) != []
    for extra, said in ((["--algorithms", "dp_sgd,dpsgd"], "--algorithms='dpsgd'"),
                        (["--epsilons", "3"], "column: 2"), (["--quick"], "--quick=True"),
                        (["--tight", "pld"], "--tight='pld'"), (["--tight=rdp"], "--tight='rdp'")):
        assert main(["compare", "--audit", "100", "--audit-csv", str(lb / "leaderboard.csv"),
                     *extra, "--out", str(out)]) == 2
        assert said in capsys.readouterr().err
    # the sample's options are refused without --audit (nothing silently ignored)
    assert main([*argv, "--audit-every-row", "--out", str(out)]) == 2
    assert "--audit-every-row=True" in (err := capsys.readouterr().err) and "--audit RUNS" in err
    assert main([*argv, "--audit-per-task", "2", "--out", str(out)]) == 2
    assert "--audit-per-task=2" in capsys.readouterr().err


def test_the_sample_takes_a_streams_rows_too():
    rows = [{"task": "logistic_stream", "algorithm": "dola", "accountant": acc,
             "target_epsilon": e, "status": "ok", "certified_epsilon": e,
             "choice": "alpha0=0.03, power=0.5, horizon=1, K=20"}
            for e in (1.0, 2.0) for acc in ("laplace", "pld")]
    assert [(r["algorithm"], r["accountant"], r["target_epsilon"])
            for r in audit.sample(rows, dataset="a9a")] == [("dola", "laplace", 1.0)]


def test_published_rows_are_selected_by_task_algorithm_and_epsilon():
    rows = [{"task": t, "algorithm": a, "target_epsilon": e} for t in ("logistic", "nonconvex")
            for a in ("dp_sgd", "dola") for e in (0.5, 2.0)]
    assert audit.selected(rows, tasks=None, algorithms=["dola"], epsilons=[2.0]) == [
        {"task": "logistic", "algorithm": "dola", "target_epsilon": 2.0},
        {"task": "nonconvex", "algorithm": "dola", "target_epsilon": 2.0}]
    with pytest.raises(ParameterError, match="--epsilons='3'.*column: 0.5, 2"):
        audit.selected(rows, epsilons=[3.0])
    with pytest.raises(ParameterError, match="selection='seeds'"):
        audit.selected(rows, seeds=[0])
