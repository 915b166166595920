"""Paper 003's experiments in their --quick variants on the tiny image fixtures."""

from pathlib import Path

import pytest
from _verdicts import check_verdicts  # noqa: E402  (tests/experiments on sys.path)

from dpnet import data
from dpnet.experiments import chen_wang_zhang as cwz
from dpnet.experiments import get

FIX = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def tiny_images(monkeypatch):
    def load(name):
        if name == "mnist":
            return (data.load_mnist("train", root=FIX, verify=False, download=False),
                    data.load_mnist("test", root=FIX, verify=False, download=False))
        return (data.load_cifar10("train", root=FIX, verify=False, download=False),
                data.load_cifar10("test", root=FIX, verify=False, download=False))
    monkeypatch.setattr(cwz, "_load_images", load)
    monkeypatch.delenv("DPNET_CHECKPOINT_DIR", raising=False)


def _check_common(rep, tmp_path, name, datasets=("mnist", "cifar10")):
    for ext in ("md", "csv", "png", "json"):
        assert (tmp_path / f"{name}.{ext}").is_file()
    assert {r["dataset"] for r in rep.rows} == set(datasets)
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in rep.rows)
    check_verdicts(name, rep.claims)
    text = (tmp_path / f"{name}.md").read_text()
    assert "REDUCED" in text and "cwz_fig1" in text


def test_fig2_quick(tiny_images, tmp_path, capsys):
    rep = get("cwz-fig2").run(quick=True, outdir=tmp_path)
    _check_common(rep, tmp_path, "cwz-fig2")
    printed = capsys.readouterr().out
    assert "alpha=0.04 beta=0.00497029 gamma=0.05 m=57" in printed
    claims = {c.text: c for c in rep.claims}
    assert next(c for t, c in claims.items() if t.startswith("S1 step sizes")).passed
    assert not next(c for t, c in claims.items() if "smaller cumulative epsilon" in t).passed
    assert next(c for t, c in claims.items() if t.startswith("Lemma 5")).passed
    eps = {r["run"]: r for r in rep.tables[0][1]} if rep.tables[0][0].startswith("Cumul") \
        else {r["run"]: r for cap, rows in rep.tables if cap.startswith("Cumul") for r in rows}
    assert eps["S1 p=-0.1"]["eps compact form (run)"] > eps["S1 p=0.2"]["eps compact form (run)"]


def test_fig3_quick(tiny_images, tmp_path, capsys):
    rep = get("cwz-fig3").run(quick=True, outdir=tmp_path)
    _check_common(rep, tmp_path, "cwz-fig3")
    printed = capsys.readouterr().out
    for sigma in ("0.301086", "0.449257", "0.670293"):
        assert f"sigma_0={sigma}" in printed
    assert "m=55" in printed
    assert next(c for c in rep.claims if c.text.startswith("S2: m")).passed
    assert any(cap.startswith("Assumption 6 for S2") for cap, _ in rep.tables)


def test_fig4_quick(tiny_images, tmp_path):
    rep = get("cwz-fig4").run(quick=True, outdir=tmp_path)
    _check_common(rep, tmp_path, "cwz-fig4")
    assert {"S1 steps, no noise", "S2 steps, no noise"} <= {r["run"] for r in rep.rows}
    s1_smaller = next(c for c in rep.claims if c.text.startswith("S1 has the smaller"))
    assert s1_smaller.passed in (True, False) and "compact form" in s1_smaller.measured


def test_fig5_quick(tiny_images, tmp_path):
    rep = get("cwz-fig5").run(quick=True, outdir=tmp_path)
    _check_common(rep, tmp_path, "cwz-fig5", ("mnist",))
    runs = {r["run"] for r in rep.rows}
    assert {"S2 p=0.9996", "S1 p=0.1", "[33] Kang et al.", "[36] Wang & Basar",
            "[37] Yan et al.", "[39] LDOL", "[41] Chen, Wang & Zhang"} <= runs
    assert sum("converges faster" in c.text for c in rep.claims) == 2


def test_fig6_quick(tmp_path):
    rep = get("cwz-fig6").run(quick=True, outdir=tmp_path)
    final = {r["method"]: r for cap, rows in rep.tables if cap.startswith("(epsilon")
             for r in rows}
    assert final["[33] Kang et al."]["delta"] == pytest.approx(1e-5)
    assert final["[36] Wang & Basar"]["delta"] == 0.0
    # Lemma 5 with factors 1 (compact form) is the larger bound
    assert final["S2 p=0.9996 (compact)"]["epsilon"] > final["S2 p=0.9996 (per-agent)"]["epsilon"]
    assert len(rep.claims) == 4 and all(c.measured for c in rep.claims)
    assert {r["iterations"] for r in rep.rows} == {1, 1001, 2001}
