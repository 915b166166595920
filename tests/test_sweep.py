"""Command-line overrides and sweeps (issue 16): overrides set nested values without touching the
input, unknown keys fail naming them, a sweep's points equal single runs, the cache reruns
nothing, and a failing point is recorded without stopping the others."""

import copy
import csv
import json
from pathlib import Path

import pytest

from dpnet import cli
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.lab import config
from dpnet.lab.config import apply_overrides
from dpnet.lab.sweep import config_hash, parse_seeds, parse_set

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "diadsp.toml"
TINY = ["iterations=5", "graph.n=4", "problem.samples=20", "log_every=1"]


@pytest.fixture(autouse=True)
def own_run_cache(tmp_path, monkeypatch):
    """Each test starts from an empty run store: 'ran' and 'cached' mean this test's runs."""
    monkeypatch.setenv("DPNET_RUNS", str(tmp_path / "run-cache"))


@pytest.fixture
def base():
    return config.load(EXAMPLE)


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _summaries(out):
    return {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/summary.json")}


# -- overrides -------------------------------------------------------------------------------


def test_overrides_set_nested_values_and_leave_the_input_unchanged(base):
    before = copy.deepcopy(base)
    cfg = apply_overrides(base, ["algorithm.eta=0.2", "iterations=500", "graph.n=20", "seed=3",
                                 "algorithm.noise_x.scale=0.3", "graph.name='complete'",
                                 "privacy.variant=sound"])
    assert base == before
    assert cfg["algorithm"]["eta"] == 0.2 and cfg["iterations"] == 500 and cfg["seed"] == 3
    assert cfg["graph"] == {"name": "complete", "n": 20}
    assert cfg["algorithm"]["noise_x"] == {"kind": "laplace", "scale": 0.3, "decay": 0.97}
    assert cfg["privacy"]["variant"] == "sound"
    assert cfg["algorithm"]["noise_y"] is not base["algorithm"]["noise_y"]   # a deep copy


def test_unknown_top_level_key_names_it_and_the_known_ones(base):
    with pytest.raises(UnknownNameError) as err:
        apply_overrides(base, ["iteratons=5"])
    assert "iteratons" in str(err.value) and "iterations" in str(err.value)


@pytest.mark.parametrize("assignment, key", [("algorithm.noise_z.scale=1", "algorithm.noise_z"),
                                             ("seed.x=1", "seed.x"), ("eta", "eta")])
def test_missing_or_non_table_path_names_the_dotted_key(base, assignment, key):
    with pytest.raises(ParameterError) as err:
        apply_overrides(base, [assignment])
    assert key in str(err.value)


def test_misspelled_algorithm_key_fails_naming_it(base, tmp_path, capsys):
    cfg = apply_overrides(base, [*TINY, "algorithm.etaa=0.2"])   # passed on by apply_overrides
    with pytest.raises(UnknownNameError, match="algorithm.etaa"):      # ... and refused by
        config.run(cfg, tmp_path / "out", quiet=True)              # config.validate
    assert cli.main(["run", str(EXAMPLE), *TINY, "algorithm.etaa=0.2", "--out",
                     str(tmp_path / "o"), "--quiet"]) == 2
    msg = capsys.readouterr().err
    assert "etaa" in msg and "eta" in msg
    assert not (tmp_path / "o").exists()


def test_run_with_overrides_from_the_command_line(tmp_path):
    out = tmp_path / "o"
    assert cli.main(["run", str(EXAMPLE), *TINY, "algorithm.eta=0.2", "--out", str(out),
                     "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == 5 and summary["params"]["eta"] == 0.2


def test_overrides_may_follow_the_options(tmp_path, capsys):
    out = tmp_path / "o"
    assert cli.main(["run", str(EXAMPLE), "--out", str(out), "--quiet", *TINY,
                     "algorithm.eta=0.2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == 5 and summary["params"]["eta"] == 0.2
    # a misspelled key after the options is still an error naming it
    assert cli.main(["run", str(EXAMPLE), "--out", str(out), "--quiet", "iteratons=5"]) == 2
    assert "unknown configuration key 'iteratons'" in capsys.readouterr().err
    # a stray word that is no override is refused, not dropped
    with pytest.raises(SystemExit):
        cli.main(["run", str(EXAMPLE), "--quiet", "stray"])


def test_parsers():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,2,7") == [0, 2, 7]
    assert parse_set("algorithm.eta=0.05,0.1") == ("algorithm.eta", [0.05, 0.1])
    assert parse_set("graph.name=ring,star") == ("graph.name", ["ring", "star"])
    assert parse_set("graph.offsets=[1,2],[1]") == ("graph.offsets", [[1, 2], [1]])
    for bad in ("4-0", "a", "1,1"):
        with pytest.raises(ParameterError, match="--seeds"):
            parse_seeds(bad)


def test_cache_key_covers_the_whole_config(base):
    a = apply_overrides(base, TINY)
    assert config_hash(a) == config_hash(copy.deepcopy(a))
    assert config_hash(a) != config_hash(apply_overrides(a, ["iterations=6"]))
    assert config_hash(a) == config_hash(apply_overrides(a, ["output.dir='elsewhere'"]))


# -- sweeps ----------------------------------------------------------------------------------


def test_sweep_runs_in_parallel_matches_single_runs_and_is_resumable(tmp_path):
    out = tmp_path / "sw"
    argv = ["sweep", str(EXAMPLE), *TINY, "--set", "algorithm.eta=0.1,0.2", "--seeds", "0-1",
            "--jobs", "2", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    rows = _rows(out / "sweep.csv")
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ran"}
    assert len(_summaries(out)) == 4 and (out / "sweep.png").stat().st_size > 0
    for row in rows:   # each point equals a single run of the same overridden configuration
        single = tmp_path / f"single-{row['algorithm.eta']}-{row['seed']}"
        assert cli.main(["run", str(EXAMPLE), *TINY, f"algorithm.eta={row['algorithm.eta']}",
                         f"seed={row['seed']}", "--out", str(single), "--quiet"]) == 0
        final = json.loads((single / "summary.json").read_text())["final"]
        for key in ("objective", "grad_norm_sq", "consensus"):
            assert float(row[key]) == pytest.approx(final[key], rel=1e-12), key

    stamps = _summaries(out)
    assert cli.main(argv) == 0   # second invocation: everything comes from the cache
    assert _summaries(out) == stamps
    assert {r["status"] for r in _rows(out / "sweep.csv")} == {"cached"}

    longer = [a if a != "iterations=5" else "iterations=6" for a in argv]
    assert cli.main(longer) == 0   # another configuration: new keys, old ones untouched
    after = _summaries(out)
    assert len(after) == 8 and all(after[k] == v for k, v in stamps.items())


def test_failing_point_is_recorded_and_the_others_complete(tmp_path, capsys):
    out = tmp_path / "sw"
    code = cli.main(["sweep", str(EXAMPLE), *TINY, "--set", "algorithm.eta=0.1,-1",
                     "--seeds", "0", "--jobs", "1", "--out", str(out)])
    assert code != 0
    rows = {r["algorithm.eta"]: r for r in _rows(out / "sweep.csv")}
    assert rows["0.1"]["status"] == "ran" and float(rows["0.1"]["grad_norm_sq"]) > 0
    assert rows["-1"]["status"] == "failed" and "eta" in rows["-1"]["error"]
    assert "failed" in capsys.readouterr().err


@pytest.mark.parametrize("setting, name", [("algorithm.etaa=0.1,0.2", "etaa"),
                                           ("iteratons=3,4", "iteratons"),
                                           ("graph.nn=4,5", "graph.nn")])
def test_sweep_key_errors_come_before_any_run(tmp_path, capsys, setting, name):
    out = tmp_path / "sw"
    assert cli.main(["sweep", str(EXAMPLE), *TINY, "--set", setting, "--out", str(out)]) == 2
    assert name in capsys.readouterr().err
    assert not out.exists()


def test_jobs_beyond_the_cores_are_capped_with_a_line(capsys):
    """Issue 38 item 6: --jobs 1000 forked 1,000 workers (10x slower); it is capped, and says so."""
    import os

    from dpnet.errors import ParameterError
    from dpnet.lab import store

    cores = len(os.sched_getaffinity(0))
    assert store.worker_count(1) == 1
    assert store.worker_count(1000) == cores
    assert f"--jobs 1000 capped at {cores}" in capsys.readouterr().err
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ParameterError, match="jobs"):
            store.worker_count(bad)
