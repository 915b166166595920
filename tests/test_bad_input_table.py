"""The bad-input table of the application-layer issue: every input a new user was seen to get
wrong ends in one clear error (the parameter, its value, the condition; exit status 2 at the
command line), never a traceback, and nothing is silently accepted."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import dpnet
from dpnet import algorithms, checkpoints, cli, graphs, noise, problems
from dpnet.errors import DPNetError, NonFiniteError, ParameterError, UnknownNameError
from dpnet.lab import config

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "diadsp.toml"
TINY = ["iterations=5", "problem.samples=20"]


def _cli_error(capsys, argv, *needles, status: int = 2):
    """``dpnet ARGV`` exits with ``status`` (2: a usage error; 1: a run that failed) and one
    error line naming every needle."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == status, err
    assert "Traceback" not in err and err.startswith("dpnet: error:"), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _toml(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BASE = """
iterations = 5
seed = 0
[graph]
name = "ring"
n = 4
[problem]
name = "nonconvex_logistic"
samples = 20
dim = 3
[algorithm]
name = "diadsp"
eta = 0.1
[algorithm.noise_x]
kind = "laplace"
scale = 0.1
decay = 0.9
"""


# -- configuration files ---------------------------------------------------------------------


def test_malformed_toml_names_the_file_and_the_line(tmp_path, capsys):
    path = _toml(tmp_path, "iterations = \n[graph\n")
    _cli_error(capsys, ["run", path], "config=", "c.toml", "valid TOML", "line 1")


def test_a_folder_is_not_a_configuration(tmp_path, capsys):
    _cli_error(capsys, ["run", str(tmp_path)], "a TOML file, not a folder")


@pytest.mark.parametrize("table, key", [("graph", "nn"), ("problem", "sampels"),
                                        ("algorithm.noise_x", "scal"), ("algorithm", "etaa"),
                                        ("distributed", "timeoutt"), ("output", "folder")])
def test_unknown_keys_in_the_file_are_named_with_the_known_ones(tmp_path, capsys, table, key):
    text = BASE + f"\n[{table}]\n{key} = 1\n" if table in ("distributed", "output") else \
        BASE.replace(f"[{table}]\n", f"[{table}]\n{key} = 1\n", 1)
    err = _cli_error(capsys, ["run", _toml(tmp_path, text)], f"{table}.{key}'", "known")
    assert table.split(".")[-1] in err


@pytest.mark.parametrize("assignment, name, condition", [
    ('iterations="abc"', "iterations", "an integer >= 1"),
    ("iterations=0", "iterations", "an integer >= 1"),
    ("iterations=1.5", "iterations", "an integer >= 1"),
    ("seed=-1", "seed", "[0, 2**63 - 1]"),
    ("seed=1.5", "seed", "[0, 2**63 - 1]"),
    ("seed=1.7", "seed", "[0, 2**63 - 1]"),
    (f"seed={2 ** 70}", "seed", "[0, 2**63 - 1]"),
    ("float_bits=16", "float_bits", "32 or 64"),
    ('log_every="often"', "log_every", '"auto"'),
    ('algorithm.noise_y="big"', "algorithm.noise_y", "a noise table"),
    ("algorithm.eta=True", "eta", "a real number"),
])
def test_wrong_types_and_ranges_of_the_run_are_named(tmp_path, capsys, assignment, name,
                                                     condition):
    _cli_error(capsys, ["run", _toml(tmp_path, BASE), assignment, "--out", str(tmp_path / "o")],
               f"{name}=", condition)


def test_a_table_given_as_a_string_says_how_to_write_it(tmp_path, capsys):
    text = BASE.replace('[graph]\nname = "ring"\nn = 4\n', "").replace("iterations = 5",
                                                                      'iterations = 5\ngraph = "ring"')
    _cli_error(capsys, ["run", _toml(tmp_path, text)], "graph='ring'", "[graph] table")


@pytest.mark.parametrize("W, condition", [("[[0.5, 0.5], [1.0]]", "graph.W"),
                                          (None, "graph.W")])
def test_explicit_weights_ragged_or_missing(tmp_path, capsys, W, condition):
    graph = '[graph]\nname = "explicit"\n' + (f"W = {W}\n" if W else "")
    text = BASE.replace('[graph]\nname = "ring"\nn = 4\n', graph)
    _cli_error(capsys, ["run", _toml(tmp_path, text)], condition)


def test_run_out_that_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    _cli_error(capsys, ["run", _toml(tmp_path, BASE), "--out", str(tmp_path / "taken")],
               "--out=", "a folder")


def test_an_unwritable_out_fails_before_any_work(tmp_path, capsys):
    _cli_error(capsys, ["demo", "--out", "/dev/null/x"], "--out=", "/dev/null/x")
    _cli_error(capsys, ["compare", "--quick", "--out", "/dev/null/x"], "--out=")


def test_diverging_step_stops_with_an_error_not_nan(tmp_path, capsys):
    # a run that started and diverged: exit status 1, not a usage error's 2
    err = _cli_error(capsys, ["run", _toml(tmp_path, BASE), "algorithm.eta=1e300", "--out",
                              str(tmp_path / "o")], "non-finite", status=1)
    assert "iteration" in err


# -- other commands --------------------------------------------------------------------------


def test_privacy_misspelled_or_repeated_parameter(capsys):
    _cli_error(capsys, ["privacy", "diadsp", "--etaa", "0.1", "--noise-x", "1", "--noise-y",
                        "1", "--iterations", "5", "--gradient-bound", "1"], "etaa", "known")
    _cli_error(capsys, ["privacy", "diadsp", "--eta", "0.1", "--eta", "0.2"], "--eta",
               "given once")


@pytest.mark.parametrize("value", ["abc", "", "1,,2", "-1", "nan", "inf"])
def test_compare_epsilons(capsys, tmp_path, value):
    _cli_error(capsys, ["compare", "--quick", "--epsilons", value, "--out", str(tmp_path)],
               "--epsilons=")


@pytest.mark.parametrize("option, value, repeated", [
    ("--algorithms", "dp_sgd,dp_sgd", "dp_sgd"), ("--epsilons", "1,1.0", "1.0"),
    ("--tasks", "logistic,logistic", "logistic"), ("--seeds", "0,0", None)])
def test_compare_refuses_a_repeated_item(capsys, tmp_path, option, value, repeated):
    err = _cli_error(capsys, ["compare", "--quick", option, value, "--out", str(tmp_path)],
                     f"{option}=")
    assert repeated is None or f"{repeated} repeated" in err


def test_compare_refuses_a_dataset_no_chosen_task_reads(capsys, tmp_path):
    err = _cli_error(capsys, ["compare", "--quick", "--tasks", "nonconvex", "--dataset", "nosuch",
                              "--out", str(tmp_path)], "--dataset=", "nosuch")
    assert "logistic" in err and "nonconvex read none" in err


@pytest.mark.parametrize("argv, name", [(["--noise-factor", "-1"], "--noise-factor"),
                                        (["--noise-factor", "0"], "--noise-factor"),
                                        (["--repetitions", "0"], "--repetitions"),
                                        (["--confidence", "1.5"], "--confidence")])
def test_audit_options_out_of_range(capsys, tmp_path, argv, name):
    _cli_error(capsys, ["audit", "dpp2-theorem3", *argv, "--out", str(tmp_path)], f"{name}=")


def test_sweep_grid_too_large_is_refused_before_any_run(tmp_path, capsys):
    out = tmp_path / "sw"
    _cli_error(capsys, ["sweep", _toml(tmp_path, BASE), "--seeds", "0-1000000000", "--out",
                        str(out)], "--seeds=", "at most")
    assert not out.exists()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and dpnet.__version__ in capsys.readouterr().out


# -- the Python API ----------------------------------------------------------------------------

P = problems.NonconvexLogistic.random(n_agents=4, samples=20, dim=3, seed=0)
G = graphs.ring(4)


def test_calibrate_target_must_be_a_number():
    alg = algorithms.DiaDSP(0.1, noise.Laplace(1.0, decay=0.9), noise.Laplace(1.0, decay=0.9))
    for bad in ("1", None, -1.0, math.nan, True):
        with pytest.raises(ParameterError) as err:
            alg.calibrate(bad, P, G, iterations=5, gradient_bound=1.0)
        assert err.value.name == "epsilon"


def test_noise_must_be_a_noise_object_at_construction():
    with pytest.raises(ParameterError) as err:
        algorithms.DiaDSP(0.1, noise_x=0.1)
    assert err.value.name == "noise_x" and "dpnet.noise" in str(err.value)


def test_run_checks_its_arguments():
    alg = algorithms.DGD(0.1)
    for args, name in [((alg, None, G, 3), "problem"), ((alg, P, None, 3), "graph"),
                       ((None, P, G, 3), "algorithm"), ((alg, P, G, "3"), "iterations"),
                       ((alg, P, G, True), "iterations")]:
        with pytest.raises(ParameterError) as err:
            dpnet.run(*args)
        assert err.value.name == name


def test_a_step_that_overflows_the_objective_is_an_error():
    with pytest.raises(NonFiniteError):
        dpnet.run(algorithms.DGD(1e300), P, G, 5)


def test_checkpoint_of_random_bytes(tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(os.urandom(256))
    with pytest.raises(ParameterError) as err:
        checkpoints.load(path)
    assert "junk.pt" in str(err.value)


def test_epsilon_delta_accountants_need_delta_and_pure_ones_refuse_it():
    alg = algorithms.DiaDSP(0.1, noise.Laplace(1.0, decay=0.9), noise.Laplace(1.0, decay=0.9))
    with pytest.raises(ParameterError) as err:
        alg.privacy(P, G, 5, accountant="pld", gradient_bound=1.0)
    assert err.value.name == "delta"
    with pytest.raises(ParameterError) as err:
        alg.privacy(P, G, 5, accountant="xie", gradient_bound=1.0, delta=1e-5)
    assert err.value.name == "delta" and "pure" in str(err.value)


def test_every_configuration_error_is_a_dpnet_error():
    """Each table's constructor failure (a wrong type deep inside) comes back as a DPNetError."""
    for bad in ({"graph": {"name": "ring", "n": "four"}},
                {"graph": {"name": "ring", "n": [4]}},
                {"problem": {"name": "nonconvex_logistic", "dim": "x"}},
                {"algorithm": {"name": "diadsp", "eta": [0.1]}}):
        cfg = config.apply_overrides(config.load(EXAMPLE), TINY)
        for table, value in bad.items():
            cfg[table] = value
        with pytest.raises(DPNetError):
            config.build(config.validate(cfg))


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownNameError, match="known graphs: circulant"):
        config.validate({**config.load(EXAMPLE), "graph": {"name": "rign", "n": 4}})
    assert np.isfinite(config.validate(config.load(EXAMPLE))["iterations"])


@pytest.mark.parametrize("override", ["graph.n=1000000000", "problem.samples=300000000.0",
                                      "problem.dim=100000000"])
def test_a_size_with_extra_digits_is_refused_before_any_allocation(tmp_path, capsys, override):
    """It was OOM-killed (no message): now one line with the memory it would need."""
    err = _cli_error(capsys, ["run", _toml(tmp_path, BASE), override, "--out",
                              str(tmp_path / "o")], "GiB", "half of this machine's memory")
    assert "graph.n, problem.samples, problem.dim=" in err


@pytest.mark.parametrize("seed", [2 ** 64, 2 ** 70, -1, 1.5, True, "0"])
def test_api_seeds_outside_the_range_are_named_errors(seed):
    import dpnet
    from dpnet import algorithms, graphs, problems
    from dpnet.errors import ParameterError

    problem = problems.Quadratic.random(n_agents=3, dim=2)
    with pytest.raises(ParameterError, match=r"seed=.*\[0, 2\*\*64 - 1\]"):
        dpnet.run(algorithms.DGD(0.1), problem, graphs.ring(3), 2, seed=seed, progress=False)
