"""The experiment engine: one cache keyed by the run, parallel execution, the results table, the
four verdicts, counterfactual diagnoses and the index that counts them."""

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from _engine_runs import cleared_midway, square  # noqa: E402  (tests/reproduce on sys.path)

from dpnet.errors import ParameterError
from dpnet.lab import store
from dpnet.lab.reproduce import Check, Diagnosis, Prose, Report, Run, Spec, Table, Verdict, execute, register
from dpnet.lab.reproduce.engine import evaluate
from dpnet.lab.reproduce.report import write_index
from dpnet.lab.store import cache_at


def _runs(calls, xs=(1.0, 2.0, 3.0)):
    return [Run(square, {"x": x, "calls": str(calls)}, {"x": x}) for x in xs]


def test_cache_reads_back_and_the_key_follows_the_arguments(tmp_path):
    calls = tmp_path / "calls"
    with cache_at(tmp_path / "cache"):
        t1 = execute(_runs(calls))
        t2 = execute(_runs(calls))                   # all three read back
        assert len(calls.read_text().split()) == 3
        execute(_runs(calls, (4.0,)))                 # a new argument is a new run
        assert len(calls.read_text().split()) == 4
    assert t1.rows == t2.rows
    assert t1.values("value").tolist() == [1.0, 4.0, 9.0]
    assert _runs(calls)[0].key != _runs(calls)[1].key
    assert _runs(calls)[0].key == Run(square, {"calls": str(calls), "x": 1.0}).key  # order-free


def test_a_batch_says_what_it_reads_back_and_what_it_computes_with_the_time_left(tmp_path,
                                                                                  caplog,
                                                                                  monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setattr(store, "BATCH_PROGRESS_EVERY_S", 0.0)      # every computed run
    with cache_at(tmp_path / "cache"), caplog.at_level(logging.INFO, logger="dpnet"):
        execute(_runs(calls, (1.0,)))
        caplog.clear()
        execute(_runs(calls))                         # 1 cached, 2 to compute
        lines = [r.getMessage() for r in caplog.records if r.name == "dpnet.lab"]
        assert lines[0] == "square: 3 run(s), 1 in the cache, 2 to compute"
        assert re.fullmatch(r"\[\d/3\] square: x=\d\.0: computed \(\d+ s so far, about \d+ s "
                            r"left\)", lines[1]), lines[1]
        assert re.fullmatch(r"\[3/3\] square: x=\d\.0: computed \(\d+ s so far\)", lines[2])
        assert len(lines) == 3                         # the cached run counts, without a line
        caplog.clear()
        said = []
        execute(_runs(calls), log=said.append)         # a caller's own sink instead
        assert said == ["square: 3 run(s), all in the cache"]
        assert not [r for r in caplog.records if r.name == "dpnet.lab"]
        monkeypatch.setattr(store, "BATCH_PROGRESS_EVERY_S", 1e9)  # periodic: the last only
        said.clear()
        execute(_runs(calls, (5.0, 6.0, 7.0)), log=said.append)
        assert len(said) == 2 and said[1].startswith("[3/3] square: x=7.0: computed")


def test_parallel_execution_gives_the_same_table(tmp_path):
    with cache_at(tmp_path / "a"):
        serial = execute(_runs(tmp_path / "c1"))
    with cache_at(tmp_path / "b"):
        parallel = execute(_runs(tmp_path / "c2"), jobs=2)
    assert serial.rows == parallel.rows


def test_run_arguments_must_be_json_and_changes_must_name_arguments(tmp_path):
    with pytest.raises(ParameterError, match="JSON-able"):
        _ = Run(square, {"x": object(), "calls": "c"}).key
    with pytest.raises(ParameterError, match="counterfactual change.*'y'"):
        _runs(tmp_path / "c")[0].replace(y=1)
    with pytest.raises(ParameterError, match="jobs"):
        execute([], jobs=0)


def test_table_selects_aggregates_and_explodes_curves():
    t = Table([{"m": "a", "seed": 0, "c": [1.0, 4.0]}, {"m": "a", "seed": 1, "c": [4.0, 1.0]},
               {"m": "b", "seed": 0, "c": [2.0, 2.0], "f": "nan"}])
    assert t.unique("m") == ["a", "b"] and len(t.where(m="a")) == 2
    np.testing.assert_allclose(t.where(m="a").gmean("c"), [2.0, 2.0])
    assert np.isnan(t.where(m="b").values("f")[0])
    assert len(t.long()) == 6 and t.long()[0] == {"m": "a", "seed": 0, "c": 1.0}
    with pytest.raises(ParameterError, match="exactly one row"):
        t.one(m="a")
    with pytest.raises(ParameterError, match="column.*'mm'"):
        t.where(mm="a")


PROSE = {"paper": "paper 999",
         "texts": {"reading-a": "the text puts the figure at reading (a)"},
         "specs": {"t-fig1": {"title": "a {what}", "choices": ["all"], "notes": ["a note"]}},
         "choices": {"all": ["x in {{1, 2, 3}}"]},
         "claims": {"increasing": {"text": "the values are increasing"},
                    "below": {"text": "every value is below {bound}"},
                    "undecidable": {"text": "undecidable here"},
                    "reading-b": {"text": "reading (b) claim"},
                    "no-cause": {"text": "no cause known", "settle": "a longer run"}},
         "diagnoses": {"too-large": {"cause": "x = 3 is too large", "change": "x halved"}}}


def _checks():
    big = Check("below", lambda t, q: (bool(t.values("value").max() < 5),
                                       f"max {t.values('value').max():g}"),
                Diagnosis("too-large", lambda r: r.replace(x=r.params["x"] / 2)),
                fields={"bound": 5})
    return [Check("increasing", lambda t, q: (bool(np.all(np.diff(t.values("value")) > 0)), "ok")),
            big, Check("undecidable", lambda t, q: (None, "chance level")),
            Check("reading-b", lambda t, q: (False, "fails"), not_applicable="reading-a"),
            Check("no-cause", lambda t, q: (False, "fails"))]


def _spec(calls, prose=PROSE, checks=None):
    return Spec("t-fig1", Prose(prose, "t.toml"), lambda quick: _runs(calls),
                _checks() if checks is None else checks, fields={"what": "test"})


def test_prose_joins_the_claims_by_id_and_refuses_an_id_on_one_side(tmp_path):
    spec = _spec(tmp_path)
    assert (spec.title, spec.paper, spec.choices, spec.notes) == \
        ("a test", "paper 999", ("x in {1, 2, 3}",), ("a note",))
    assert [c.text for c in spec.checks][:2] == ["the values are increasing",
                                                 "every value is below 5"]
    spec.prose.verify([spec])                                       # every entry used
    with pytest.raises(ParameterError, match=r"claim id='missing'.*t\.toml.*known: below"):
        _spec(tmp_path, checks=[*_checks(), Check("missing", lambda t, q: (True, ""))])
    orphan = {**PROSE, "claims": {**PROSE["claims"], "orphan": {"text": "never checked"}}}
    with pytest.raises(ParameterError, match=r"claim id='orphan'.*t\.toml.*no spec of t-fig1 uses it"):
        register(_spec(tmp_path, orphan))
    with pytest.raises(ParameterError, match="diagnosis id='gone'"):
        _spec(tmp_path, checks=[Check("below", lambda t, q: (True, ""), Diagnosis(
            "gone", lambda r: r), fields={"bound": 1})])
    with pytest.raises(ParameterError, match="prose field='bound'"):
        _spec(tmp_path, checks=[Check("below", lambda t, q: (True, ""))])
    with pytest.raises(ParameterError, match="claim id='increasing'.*unique"):
        _spec(tmp_path, checks=[*_checks(), _checks()[0]])
    with pytest.raises(ParameterError, match="prose file"):
        Prose.load(tmp_path / "none.toml")


def test_prose_texts_fill_computed_wording_and_are_checked_on_both_sides(tmp_path):
    texts = {"reading-a": "the text puts the figure at reading (a)", "set-n": "n = {n}",
             "set-rho": "rho = {rho:.2f}", "note": "{n} agents; {reading-a}"}
    prose = Prose({**PROSE, "texts": texts}, "t.toml")
    note, = prose.texts("note")
    assert note(n=3) == "3 agents; the text puts the figure at reading (a)"
    assert prose.group("set", "n", "rho")(n=3, rho=0.5) == {"n": "n = 3", "rho": "rho = 0.50"}
    prose.verify([_spec(tmp_path, prose=PROSE)])                      # every snippet used
    with pytest.raises(ParameterError, match=r"text id='gone'.*t\.toml.*known: note"):
        prose.texts("gone")
    unused = Prose({**PROSE, "texts": texts}, "t.toml")
    with pytest.raises(ParameterError, match=r"text id='note'.*no spec of t-fig1 uses it"):
        unused.verify([_spec(tmp_path)])


def test_spec_evaluation_gives_four_verdicts_and_a_counterfactual(tmp_path):
    report = Report("t-fig1", "a test", "A: B (paper 999), Fig. 1")
    with cache_at(tmp_path / "cache"):
        evaluate(_spec(tmp_path / "calls"), report, quick=True)
    v = [c.verdict for c in report.claims]
    assert v == [Verdict.REPRODUCED, Verdict.NOT_REPRODUCED, Verdict.UNDECIDED,
                 Verdict.NOT_APPLICABLE, Verdict.NOT_REPRODUCED]
    assert [c.id for c in report.claims] == ["increasing", "below", "undecidable", "reading-b",
                                             "no-cause"]
    d = report.claims[1].diagnosis
    # halving x gives values 0.25, 1, 2.25: the claim holds in the counterfactual
    assert d == {"cause": "x = 3 is too large", "change": "x halved", "verdict": "reproduced",
                 "measured": "max 2.25"}
    assert report.claims[4].diagnosis["settle"] == "a longer run"
    assert "the text puts the figure at reading (a)" in report.claims[3].measured
    paths = report.write(tmp_path / "out")
    text = paths["md"].read_text()
    assert "counterfactual (one change: x halved)" in text and "**reproduced** there" in text
    assert "2 reproduced" not in text and "1 reproduced, 2 not reproduced, 1 not applicable, " \
        "1 undecided" in text
    claims = json.loads(paths["json"].read_text())["claims"]
    assert [c["id"] for c in claims] == [c.id for c in report.claims]
    index = write_index(tmp_path / "out").read_text()
    assert "| [t-fig1](t-fig1.md) | paper 999, Fig. 1 | full | 1 | 2 | 1 | 1 | 1 | a test |" \
        in index
    assert "1 of the 2 not-reproduced claims have a counterfactual diagnosis" in index


def test_the_new_figure_example_runs_and_its_counterfactual_finds_the_cause(tmp_path, one_thread):
    """examples/new_figure.py: a whole figure in ~50 lines (runs, claim, diagnosis, figure,
    table). Its claim fails at s = 1, where (37)'s gradient ceiling caps the accuracy; with every
    s x 0.1 the slope is 1 (the counterfactual reproduces it)."""
    import importlib.util
    from pathlib import Path

    from dpnet.lab import reproduce as experiments

    path = Path(__file__).resolve().parents[2] / "examples" / "new_figure.py"
    spec = importlib.util.spec_from_file_location("new_figure", path)
    module = importlib.util.module_from_spec(spec)
    with experiments.EXPERIMENTS.restoring():
        spec.loader.exec_module(module)
        with cache_at(tmp_path / "cache"):
            report = experiments.get("example-noise").run(quick=True, outdir=tmp_path)
    (claim,) = report.claims
    assert claim.verdict is Verdict.NOT_REPRODUCED and "s=1: 0.38" in claim.measured
    assert claim.diagnosis["verdict"] == "reproduced" and "slope 1.00" in claim.diagnosis["measured"]
    assert {p.suffix for p in tmp_path.glob("example-noise*")} == {".md", ".csv", ".png", ".json"}


def test_cache_prune_removes_what_was_not_used_and_reading_marks_use(tmp_path, capsys):
    import os
    import time

    from dpnet.cli import main
    from dpnet.lab import store as engine

    calls = tmp_path / "calls"
    with cache_at(tmp_path / "cache"):
        runs = _runs(calls)
        execute(runs)
        (tmp_path / "cache" / "x.partial").mkdir()                  # an interrupted run
        (tmp_path / "cache" / "x.partial" / "snapshot.pt").write_bytes(b"0" * 10)
        old = time.time() - 3 * 86400
        for p in (tmp_path / "cache").rglob("*"):
            os.utime(p, (old, old))
        execute(runs[:1])                                            # read back: used now
        assert engine.cache_usage()["results"] == 3 and engine.cache_usage()["unfinished"] == 1
        assert engine.prune(2.0) == 3                                # two results, the partial
        assert engine.cache_usage()["results"] == 1
        execute(runs)
        assert len(calls.read_text().split()) == 5                   # the pruned two recomputed
        with pytest.raises(ParameterError, match="days=-1"):
            engine.prune(-1)
        assert main(["cache", "--clear"]) == 0
        assert "removed 3 cached run(s)" in capsys.readouterr().out
        usage = engine.cache_usage()
        assert (usage["results"], usage["unfinished"], usage["bytes"]) == (0, 0, 0)


def test_clearing_the_cache_leaves_a_run_being_computed_alone(tmp_path):
    """A clear while a run computes (here: from inside it) removes the other results and a dead
    process's leftovers, not the running run's snapshot, lock or result."""
    import socket
    import subprocess
    import sys

    from dpnet.lab import store as engine

    with cache_at(tmp_path / "cache"):
        execute(_runs(tmp_path / "calls", (1.0, 2.0)))                 # two other results
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.split()[0]
        (tmp_path / "cache" / "gone.lock").write_text(f"{socket.gethostname()} {dead}")
        (tmp_path / "cache" / "gone.partial").mkdir()                  # its process died
        (row,) = execute([Run(cleared_midway, {"x": 5.0})]).rows
        assert row["removed_midway"] == 4                               # 2 results, gone.*
        assert row["snapshot_kept"] is True and row["value"] == 5.0
        assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == \
            [f"{Run(cleared_midway, {'x': 5.0}).key}.json"]              # no lock, no partial
        usage = engine.cache_usage()
        assert (usage["results"], usage["unfinished"], usage["running"]) == (1, 0, 0)


def test_plan_counts_runs_and_never_computes_even_where_a_spec_needs_results(tmp_path):
    from dpnet.lab.store import plan

    calls = tmp_path / "calls"

    def chooser():          # a spec whose runs depend on results (a sweep choosing a parameter)
        best = execute(_runs(calls, (1.0, 2.0))).values("value").max()
        return _runs(calls, (best,))

    with cache_at(tmp_path / "cache"):
        assert plan(lambda: _runs(calls)).startswith("3 runs, 0 cached, 3 to compute")
        assert plan(chooser).startswith("its runs depend on results: first 2 preliminary run(s) "
                                        "(0 of 2 cached)")
        assert not calls.exists()                                   # nothing was computed
        execute(_runs(calls, (1.0, 2.0)))
        assert plan(chooser).startswith("1 runs, 0 cached")         # the chosen run, x = 4
        assert plan(lambda: _runs(calls)).startswith("3 runs, 2 cached, 1 to compute")
        doubled = Diagnosis("doubled", lambda r: r.replace(x=2 * r.params["x"]))
        same = Diagnosis("same", lambda r: r)
        # x = 2 doubled is x = 4, a run of the spec itself: not counted again
        assert plan(lambda: _runs(calls), [doubled, same]).endswith(
            "; up to 2 counterfactual run(s) (0 cached) for claims that do not reproduce")
        later = Diagnosis("later",           # its own sweep, not cached
                          lambda r: _runs(calls, (execute(_runs(calls, (7.0, 8.0)))
                                                  .values("value").max(),))[0])
        assert plan(lambda: _runs(calls, (5.0,)), [later]).endswith(
            "(0 cached) for claims that do not reproduce, and 1 counterfactual(s) that choose "
            "their runs from results")
        assert len(calls.read_text().split()) == 2                  # still nothing computed


def test_reproduce_with_a_users_file_plans_and_runs_its_spec(tmp_path, capsys):
    """``dpnet reproduce --with examples/new_figure.py example-noise``: the user's spec goes
    through the same plan, cache, report and index as the papers' ones."""
    import sys

    from dpnet.cli import main
    from dpnet.lab import reproduce as experiments

    path = Path(__file__).resolve().parents[2] / "examples" / "new_figure.py"
    with experiments.EXPERIMENTS.restoring():
        with cache_at(tmp_path / "cache"):
            assert main(["reproduce", "--with", str(path), "example-noise", "--quick",
                         "--plan"]) == 0
            # s x 0.1 maps 1 and 0.1 onto runs of the spec: only s = 0.001 is new
            assert "example-noise: 3 runs, 0 cached, 3 to compute; up to 1 counterfactual " \
                   "run(s) (0 cached)" in capsys.readouterr().out
            assert main(["reproduce", "--with", str(path), "example-noise", "--quick", "--out",
                         str(tmp_path)]) == 0
            # the claim fails at s = 1 (the example's finding), through the CLI too
            assert f"example-noise: wrote {tmp_path}/example-noise.md (not reproduced)" in \
                capsys.readouterr().out
        assert "[example-noise](example-noise.md)" in (tmp_path / "README.md").read_text()
    sys.modules.pop("new_figure", None)
    assert main(["reproduce", "--with", "no_such_module_here", "ou-fig1", "--plan"]) == 2
    assert "--with" in capsys.readouterr().err


def test_a_killed_runs_lock_is_reported_and_pruned_whatever_its_age(tmp_path, capsys):
    import socket
    import subprocess
    import sys

    from dpnet.cli import main
    from dpnet.lab import store as engine

    with cache_at(tmp_path / "cache"):
        execute(_runs(tmp_path / "calls", (1.0,)))
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.split()[0]
        (tmp_path / "cache" / "killed.lock").write_text(f"{socket.gethostname()} {dead}")
        assert engine.cache_usage()["stale_locks"] == 1
        assert main(["cache"]) == 0 and "1 stale lock(s)" in capsys.readouterr().out
        assert engine.prune(30.0) == 1                       # the fresh result stays
        assert engine.cache_usage()["stale_locks"] == 0 and engine.cache_usage()["results"] == 1


def test_an_unusable_run_cache_is_named_before_any_work(tmp_path):
    import os

    calls = tmp_path / "calls"
    (tmp_path / "file").write_text("")
    with cache_at(tmp_path / "file"):
        with pytest.raises(ParameterError, match=r"\$DPNET_RUNS=.*it is a file"):
            execute(_runs(calls, (1.0,)))
    assert not calls.exists()                                # nothing ran
    if os.geteuid() != 0:                                    # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with cache_at(ro), pytest.raises(ParameterError, match="not cached yet"):
            execute(_runs(calls, (1.0,)))
