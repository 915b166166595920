"""Paper 002's experiments in their --quick variants on the tiny dataset fixtures."""

from pathlib import Path

import pytest
from _verdicts import check_verdicts  # noqa: E402  (tests/experiments on sys.path)

from dpnet import data
from dpnet.experiments import chen_wang, get

FIX = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def tiny_mushrooms(monkeypatch):
    ds = data.load_libsvm("mushrooms", root=FIX, verify=False, download=False)
    monkeypatch.setattr(chen_wang, "_load_mushrooms",
                        lambda: (ds.dense(), ds.binary_labels(), ds.notes))


def test_cw_fig1_quick(tiny_mushrooms, tmp_path):
    rep = get("cw-fig1").run(quick=True, outdir=tmp_path)
    for ext in ("md", "csv", "png", "json"):
        assert (tmp_path / f"cw-fig1.{ext}").is_file()
    text = (tmp_path / "cw-fig1.md").read_text()
    assert "-1.2" in text and "Assumption 3" in text and "C3" in text
    labels = {r["algorithm"] for r in rep.rows}
    assert {"Algorithm 1", "DSGD (no noise)", "LDOL (17)", "DOLA", "DMOD", "PDOP"} <= labels
    assert len(rep.claims) >= 7
    check_verdicts("cw-fig1", rep.claims)
    # the baselines' own budgets equal the largest among Algorithm 1's agents
    budgets = {r["method"]: r for r in rep.tables[1][1]}
    target = max(r["eps_i"] for r in rep.tables[0][1])
    for name in ("DOLA", "DMOD", "PDOP"):
        assert budgets[name]["own budget"] == pytest.approx(target, rel=1e-9)


@pytest.fixture
def tiny_images(monkeypatch):
    def load(name):
        if name == "mnist":
            return (data.load_mnist("train", root=FIX, verify=False, download=False),
                    data.load_mnist("test", root=FIX, verify=False, download=False))
        return (data.load_cifar10("train", root=FIX, verify=False, download=False),
                data.load_cifar10("test", root=FIX, verify=False, download=False))
    monkeypatch.setattr(chen_wang, "_load_images", load)


@pytest.mark.parametrize("name", ["cw-fig2", "cw-fig3"])
def test_cnn_figures_quick(tiny_images, tmp_path, name):
    rep = get(name).run(quick=True, outdir=tmp_path)
    text = (tmp_path / f"{name}.md").read_text()
    assert ("APPROXIMATE" if name == "cw-fig2" else "exact all-data gradient") in text
    labels = {r["algorithm"] for r in rep.rows}
    assert {"Algorithm 1", "DSGD (no noise)", "LDOL (17)", "DOLA", "DMOD", "PDOP"} <= labels
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in rep.rows)
    assert any("most accurate private" in c.text for c in rep.claims)
