"""Paper 000's figures (xie-fig2 ... xie-fig7): the quick variants write their reports with pinned
verdicts; Table I and the graph against the paper; the rate fit on a known sequence; and the
mechanism behind PPDC's failures on (37) and reading (b)'s on (38), on the runs themselves (the
counterfactuals the full reports apply)."""

import json

import numpy as np
import pytest
from _verdicts import check_verdicts  # noqa: E402  (tests/reproduce on sys.path)

from dpnet.lab import reproduce as experiments
from dpnet.lab.reproduce import Run, Verdict, xie

NAMES = [f"xie-fig{i}" for i in range(2, 8)]


@pytest.mark.parametrize("name", NAMES)
def test_quick_variant_writes_a_report_with_pinned_verdicts(name, tmp_path):
    report = experiments.reproduce(name, quick=True, outdir=tmp_path)
    for ext in ("md", "png", "csv", "json"):
        assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
    check_verdicts(name, report.claims)
    text = (tmp_path / f"{name}.md").read_text()
    assert "## Claims" in text and "## Choices where the paper is silent" in text
    assert "prism" in text and "32-bit floats" in text
    summary = json.loads((tmp_path / f"{name}.json").read_text())
    assert summary["quick"] is True and len(summary["claims"]) == len(report.claims)
    if name in ("xie-fig2", "xie-fig3"):
        # reading (b) of Figs. 2-3 is ruled out by §V's text: not applicable, yet measured
        na = [c for c in report.claims if "reading (b)" in c.text]
        assert na and all(c.verdict is Verdict.NOT_APPLICABLE for c in na)
        assert all("s_xi = 0.1 and q = 0.2" in c.measured and "measured anyway" in c.measured
                   for c in na)
        assert "19 of the 20" in text          # seeds whose v-noise exceeds the ceiling


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
    # the counterfactual's knob touches PPDC's xi_v only
    off = xie.table_i(0.1, 0.2, v_scale=0.0)
    assert off["PPDC-C1"].noise_v.is_zero and not off["PPDC-C1"].noise_x.is_zero
    assert off["PGTC-C1"].noise_y.scale_at(0, 6).tolist() == pytest.approx([0.1] * 6)
    tenth = xie.table_i(0.1, 0.2, v_scale=0.1)["PPDC-C2"]
    assert tenth.noise_v.scale_at(2, 6)[0] == pytest.approx(0.01 * 0.2**2)
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
    assert np.allclose(xie.problem("38", xie.SMALL_M).m.numpy(), 0.01 * m)
    assert xie.HORIZON[("38", "b")] == 6000 and xie.HORIZON[("37", "a")] == 10000


def test_residual_and_rate_fit_on_a_known_sequence():
    R = 10.0 * 0.9 ** np.arange(400)
    R[-1] = 0.0
    fit = xie.fit_rate(R)
    assert fit["rate"] == pytest.approx(0.9, rel=1e-9) and fit["r2"] > 0.999999
    assert fit["k_tau"] == int(np.ceil(np.log(xie.TAU / 10) / np.log(0.9)))
    assert np.isnan(xie.fit_rate(np.ones(50))["rate"])          # no decay, no rate


def test_ppdc_on_37_has_no_fixed_point_above_the_gradient_ceiling(one_thread):
    """omega ||sum_t sum_i xi_v|| / n against the largest gradient of (37); on the run itself:
    the v-noise off removes the drift, and xi_v x eta leaves ||grad f(x^inf)|| = eta x that."""
    ceiling = xie._gradient_ceiling(xie.problem("37"))
    assert ceiling == pytest.approx(0.437, abs=5e-4)
    need = [xie.OMEGA * xie._noise_sum(0.1, 0.2, "noise_v", seed) for seed in range(20)]
    assert need[0] == pytest.approx(0.931, abs=5e-4)
    assert sum(v > ceiling for v in need) == 19
    # PGTC's need (xi_y, without omega) is below the ceiling: it has a fixed point
    assert xie._noise_sum(0.1, 0.2, "noise_y", 0) == pytest.approx(0.218, abs=5e-4)
    run = dict(method="PPDC-C1", which="37", s=0.1, q=0.2, K=3000, seed=0, curve=False)
    drift = xie.simulate(**run)
    assert drift["status"] == "no limit" and drift["accuracy"] > 0.4
    tenth = xie.simulate(**run, v_scale=0.1)
    assert tenth["accuracy"] == pytest.approx(0.1 * need[0], rel=1e-3)
    assert xie.simulate(**run, v_scale=0.0)["accuracy"] < 1e-4


def test_the_counterfactuals_change_one_thing_on_the_runs_they_name(one_thread):
    runs = xie._residual_runs("38")(True)
    assert {r.tags["reading"] for r in runs} == {"a", "b", "b-small-m", "noise-free"}
    off = [xie.V_OFF.counterfactual(r) for r in runs]
    assert all((a.params["v_scale"] == 0.0) == a.params["method"].startswith("PPDC")
               for a in off)
    small = [xie.CURVATURE.counterfactual(r) for r in runs]
    assert all((a.params != r.params) == (r.tags["reading"] == "b") for a, r in zip(small, runs))
    assert all(a.params["m_scale"] == xie.SMALL_M for a, r in zip(small, runs)
               if r.tags["reading"] == "b")
    # the counterfactual runs of reading (b) are the m_i x 0.01 sensitivity runs themselves
    sens = {r.key for r in runs if r.tags["reading"] == "b-small-m"}
    assert {a.key for a, r in zip(small, runs) if r.tags["reading"] == "b"} == sens
    # the cause on one run: at (38), reading (b), PGTC-C1 keeps bouncing; with m_i x 0.01 it
    # converges linearly (rate ~ 0.964)
    b = Run(xie.simulate, dict(method="PGTC-C1", which="38", s=100.0, q=0.1, K=1500, seed=0,
                               v_scale=1.0, m_scale=1.0), {"reading": "b"})
    bouncing, fixed = experiments.execute([b, xie.CURVATURE.counterfactual(b)]).rows
    assert bouncing["status"] == "no limit" and min(bouncing["residual"]) > 1.0   # k <= 0.9 K
    assert fixed["status"] == "converged" and float(fixed["rate"]) == pytest.approx(0.964,
                                                                                 abs=2e-3)
    # which claims carry which diagnosis
    fig5 = experiments.get("xie-fig5").spec
    assert [c.diagnosis and c.diagnosis.name for c in fig5.checks] == \
        [None, None, "curvature", "curvature", None, None]
    fig2 = experiments.get("xie-fig2").spec
    assert [c.diagnosis and c.diagnosis.name for c in fig2.checks] == ["v-off", None, None, None]
    assert [bool(c.not_applicable) for c in fig2.checks] == [False, False, True, True]
