"""The reproductions index: one row per report JSON, claim verdicts counted."""

from __future__ import annotations

import json

from dpnet.lab.reproduce.report import Report, write_index


def _report(name: str, verdicts, quick=False, paper="A, B: Title (paper 001), Fig. 2(a)"):
    rep = Report(name, "a title", paper, quick)
    for i, v in enumerate(verdicts):
        rep.claim(f"claim {i}", v, "x")
    return rep


def test_index_counts_every_report_claims(tmp_path):
    _report("b-fig1", [True, False, None, True]).write(tmp_path)
    _report("a-fig2", [False], quick=True, paper="C: D (paper 004), §VI, Fig. 2").write(tmp_path)
    (tmp_path / "unrelated.json").write_text(json.dumps({"x": 1}))
    text = write_index(tmp_path).read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| [")]
    assert rows == [
        "| [a-fig2](a-fig2.md) | paper 004, §VI, Fig. 2 | --quick | 0 | 1 | 0 | 0 | 0 | a title |",
        "| [b-fig1](b-fig1.md) | paper 001, Fig. 2(a) | full | 2 | 1 | 0 | 1 | 0 | a title |",
    ]


def test_reproduce_writes_the_index(tmp_path, capsys):
    from dpnet.cli import main
    from dpnet.lab.store import cache_at

    with cache_at(tmp_path / "cache"):
        # ou-fig1 --quick: r in {0, 0.5, 0.9}, one seed each
        assert main(["reproduce", "ou-fig1", "--quick", "--plan"]) == 0
        assert "ou-fig1: 3 runs, 0 cached, 3 to compute" in capsys.readouterr().out
        assert not (tmp_path / "README.md").exists()
        assert main(["reproduce", "ou-fig1", "--quick", "--out", str(tmp_path)]) == 0
        assert "index:" in capsys.readouterr().out
        assert main(["reproduce", "ou-fig1", "--quick", "--plan"]) == 0
        assert "ou-fig1: 3 runs, 3 cached, 0 to compute" in capsys.readouterr().out
    text = (tmp_path / "README.md").read_text()
    assert "| [ou-fig1](ou-fig1.md) | paper 004, §VI, Fig. 1 | --quick |" in text
