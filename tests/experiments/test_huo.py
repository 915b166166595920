"""Paper 001's experiments in their --quick variants on the tiny dataset fixtures."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from _verdicts import check_verdicts  # noqa: E402  (tests/experiments on sys.path)

from dpnet import data
from dpnet.experiments import get, huo
from dpnet.privacy import huo as huo_privacy

FIX = Path(__file__).resolve().parents[1] / "data"
torch.set_num_threads(1)


@pytest.fixture
def fixtures(monkeypatch, tmp_path):
    ds = data.load_libsvm("a9a", root=FIX, verify=False, download=False)
    monkeypatch.setattr(huo, "load_binary", lambda name: (ds.dense(), ds.binary_labels(),
                                                          ds.notes))
    monkeypatch.setattr(huo, "lr_datasets", lambda: (["a9a"], "fixture stand-in for epsilon"))
    monkeypatch.setattr(huo, "load_images", lambda name, split: data.load_mnist(
        split, root=FIX, verify=False, download=False))
    monkeypatch.setenv("DPNET_RUNS", str(tmp_path / "runs"))
    return tmp_path


def _check(rep, out: Path, name: str, n_claims: int) -> str:
    for ext in ("md", "csv", "png", "json"):
        assert (out / f"{name}.{ext}").is_file()
    assert len(rep.claims) >= n_claims
    check_verdicts(name, rep.claims)
    return (out / f"{name}.md").read_text()


def test_fig2a_quick(fixtures):
    rep = get("huo-fig2a").run(quick=True, outdir=fixtures)
    text = _check(rep, fixtures, "huo-fig2a", 1)
    assert "fixture stand-in for epsilon" in text and "Theorem 1 (7)" in text
    sigmas = {r["rate"]: r["sigma"] for r in rep.tables[0][1]}
    # sigma^2 scales as k p^2 (Remark 1): 24% has sqrt(0.3) * 0.8 of 100%'s noise
    assert sigmas["24%"] / sigmas["100%"] == pytest.approx(0.8 * (37 / 123) ** 0.5, rel=1e-9)
    # the reference lines: f(0) = log 2 for the logistic loss, and the noise-free run
    s = huo.lr_setup("a9a", True)
    assert s.start_gap == pytest.approx(math.log(2) - s.f_star, rel=1e-12)
    ref, curve = huo.noise_free_lr(s, quick=True)
    assert curve.suboptimality[0] == pytest.approx(s.start_gap, rel=1e-12)
    assert 0 < ref < s.start_gap     # without noise the same steps make progress
    assert f"x_0 = 0 starts at suboptimality {s.start_gap:.4g}" in text
    assert f"without noise end at {ref:.4g} with the private runs' clipping" in text
    unclipped, _ = huo.noise_free_lr(s, quick=True, clipped=False)
    assert unclipped != ref and f"and at {unclipped:.4g} unclipped" in text


def test_fig2b_quick(fixtures):
    rep = get("huo-fig2b").run(quick=True, outdir=fixtures)
    _check(rep, fixtures, "huo-fig2b", 2)
    eps = {r["epsilon"] for r in rep.rows}
    assert eps == {0.01, 1.0}
    # eps = 1 is outside Theorem 1's T-condition here: sigma comes from the proof accountant
    how = {(r["epsilon"], r["rate"]): r["sigma from"] for r in rep.rows}
    assert how[(1.0, "100%")] == "proof accountant"


def test_fig3_quick(fixtures):
    rep = get("huo-fig3").run(quick=True, outdir=fixtures)
    text = _check(rep, fixtures, "huo-fig3", 1)
    methods = {r["method"] for r in rep.rows}
    assert methods == {"DO-ADP (24%)", "DPDO", "DP-DDA", "CPGT (24%)"}
    assert "Theorem 3" in text and "GPGT" in text


def test_table2_and_fig4_quick(fixtures):
    rep = get("huo-table2").run(quick=True, outdir=fixtures)
    text = _check(rep, fixtures, "huo-table2", 3)
    assert "93.35" in text and "Theorem 1 cannot apply" in text
    assert len(rep.rows) == 8                     # 2 epsilons x 4 rates
    runs = list((fixtures / "runs" / "huo-table2").glob("*.done.pt"))
    assert len(runs) == 9                         # and the noise-free reference
    reference = torch.load(next((fixtures / "runs" / "huo-table2").glob("quick-nonoise-*")),
                           weights_only=False)
    assert reference["sigma"] == 0 and math.isnan(reference["privacy"]["PLD eps"])  # no claim
    assert f"test accuracy {100 * reference['test_accuracy']:.2f} %" in text
    rep4 = get("huo-fig4").run(quick=True, outdir=fixtures)   # reuses the finished runs
    _check(rep4, fixtures, "huo-fig4", 1)


def test_cnn_run_resumes_exactly(fixtures):
    spec = huo.cnn_spec(True)
    spec.epochs, spec.checkpoint_every, spec.eval_every = 4.0, 1, 1
    problem = huo.cnn_problem(spec)
    graph = huo.circulant_graph()
    full = huo.cnn_run(spec, problem, graph, 1.0, "80%", 0.8, 1.0, True, log=lambda m: None)
    folder = fixtures / "runs" / "huo-table2"
    done = next(folder.glob("*.done.pt"))
    done.unlink()
    # interrupt after iteration 2: keep only that checkpoint, then resume
    snaps = []

    def stop(msg):
        if "checkpoint at iteration 2/" in msg:
            snaps.append(torch.load(next(folder.glob("*.ckpt.pt")), weights_only=False))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        huo.cnn_run(spec, problem, graph, 1.0, "80%", 0.8, 1.0, True, log=stop)
    assert snaps[0]["iteration"] == 2
    resumed = huo.cnn_run(spec, problem, graph, 1.0, "80%", 0.8, 1.0, True, log=lambda m: None)
    assert resumed["test_accuracy"] == full["test_accuracy"]
    np.testing.assert_equal(resumed["history"], full["history"])
    assert resumed["bits"] == full["bits"]


def test_full_sensitivity_column_charges_all_coordinates():
    """Table II's sound column: with k = d it is the calibration's own account (the target
    epsilon); with k < d the same sigma certifies a larger epsilon, by exactly the account with
    k = d (all coordinates charged)."""
    spec = huo.cnn_spec(False)

    class Problem:
        m = 400

    run = {"sigma": 0.0, "k": 30, "d": 100, "p": 0.8, "T": 40}
    mech = huo_privacy.Mechanism(G=spec.G, k=30, d=100, p=0.8, q=400, T=40, batch_size=spec.batch_size)
    run["sigma"] = huo_privacy.calibrate_sigma(1.0, mech, "pld", delta=spec.delta, rel_tol=1e-3)
    full = huo._full_sensitivity_eps(spec, Problem, run, quick=False)
    dense = huo_privacy.Mechanism(G=spec.G, k=100, d=100, p=0.8, q=400, T=40, batch_size=spec.batch_size)
    assert full == pytest.approx(huo_privacy.dp_accounting_epsilon(run["sigma"], spec.delta, dense, "pld"),
                                 rel=1e-9)
    assert full > 1.5    # sensitivity grows by sqrt(d/k) = 1.83
    assert math.isnan(huo._full_sensitivity_eps(spec, Problem, run, quick=True))  # not computed
