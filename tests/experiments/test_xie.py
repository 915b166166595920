"""Paper 000's figures (xie-fig2 ... xie-fig7) in their --quick form: each writes its CSV, PNG
and markdown report and evaluates the paper's claims with measured numbers (whether the claims
pass is the full run's business, not this test's)."""

import json

import numpy as np
import pytest
from _verdicts import check_verdicts  # noqa: E402  (tests/experiments on sys.path)

from dpnet import experiments
from dpnet.experiments import xie

NAMES = [f"xie-fig{i}" for i in range(2, 8)]


@pytest.mark.parametrize("name", NAMES)
def test_quick_variant_writes_a_report_with_evaluated_claims(name, tmp_path):
    report = experiments.reproduce(name, quick=True, outdir=tmp_path)
    for ext in ("md", "png", "csv", "json"):
        assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
    assert report.claims, "every figure checks at least one claim"
    check_verdicts(name, report.claims)
    text = (tmp_path / f"{name}.md").read_text()
    assert "## Claims" in text and "## Choices where the paper is silent" in text
    assert "prism" in text and "32-bit floats" in text
    summary = json.loads((tmp_path / f"{name}.json").read_text())
    assert summary["quick"] is True and len(summary["claims"]) == len(report.claims)
    assert len(report.rows) > 0


def test_table_i_and_the_paper_settings():
    algs = xie.table_i(0.1, 0.2)
    assert list(algs) == ["PGTC-C1", "PGTC-C2", "PGTC-C3", "DiaDSP", "PPDC-C1", "PPDC-C2",
                          "PPDC-C3"]
    assert (algs["PGTC-C3"].eta, algs["PGTC-C3"].gamma, algs["PGTC-C3"].alpha_x) == (0.15, 0.1,
                                                                                    0.5)
    assert (algs["PPDC-C1"].gamma, algs["PPDC-C1"].omega, algs["PPDC-C1"].eta) == (45, 5, 0.015)
    assert algs["PPDC-C3"].gamma == 25 and not algs["PPDC-C3"].check_theory
    assert algs["DiaDSP"].eta == 0.15
    assert algs["PGTC-C1"].noise_y.scale_at(3, 6).tolist() == pytest.approx([0.1 * 0.2**3] * 6)
    g = xie.graph()
    assert np.allclose(np.diag(g.W), 0) and g.is_doubly_stochastic()
    assert g.spectral_gap() == pytest.approx(1 / 3)
    # W_0.2 = 0.8 I + 0.2 W: disagreement eigenvalues 0.8 + 0.2 {1/3, 0, -2/3}
    assert xie.lazy_graph().spectral_gap() == pytest.approx(0.2 * (1 - 1 / 3))
    assert xie.Q_GRID == (0.18, 0.26, 0.34, 0.42, 0.5, 0.58, 0.66, 0.74, 0.82, 0.9)
    p = xie.problem("37")
    assert (p.n_agents, p.dim, p.m, p.lam, p.alpha) == (6, 10, 200, 1e-3, 1.0)
    m = xie.problem("38").m.numpy()
    assert abs(m.sum()) < 1e-12 and np.all(np.abs(m) > 0)


def test_residual_and_rate_fit_on_a_known_sequence():
    R = 10.0 * 0.9 ** np.arange(400)
    R[-1] = 0.0
    fit = xie.fit_rate(R)
    assert fit["rate"] == pytest.approx(0.9, rel=1e-9) and fit["r2"] > 0.999999
    assert fit["k_tau"] == int(np.ceil(np.log(xie.TAU / 10) / np.log(0.9)))
    assert np.isnan(xie.fit_rate(np.ones(50))["rate"])          # no decay, no rate
