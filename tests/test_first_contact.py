"""First contact: the README's Python quick start runs as printed, reaches epsilon <= 10 (the text
says 1) and lowers its objective; the example configurations state their epsilon; a run that
makes things worse or has epsilon > 10 says so (Result.diagnosis, RunDiagnosis warnings); the
command line starts without its heavy optional imports."""

import re
import tomllib
import warnings
from pathlib import Path

import pytest

import dpnet
from dpnet.runner import RunDiagnosis

ROOT = Path(__file__).resolve().parents[1]


def _quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick start (Python)"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_quick_start_runs_private_and_learning(capsys):
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunDiagnosis)   # no diagnosis line may fire
        exec(compile(_quick_start(), "README.md", "exec"), ns)
    res = ns["res"]
    eps = res.privacy.epsilon
    assert 0.99 <= eps <= 1.0 and res.privacy.delta == 1e-5    # the stated epsilon = 1
    obj = res.history["objective"]
    assert obj[-1] < obj[0] - 0.05                               # clearly learns
    assert f"{obj[0]:.3f} -> {obj[-1]:.3f}" == "0.955 -> 0.852"   # the numbers the README states
    assert res.diagnosis() == []
    out = capsys.readouterr().out
    assert "epsilon=1, delta=1e-05 per agent" in out
    text = (ROOT / "README.md").read_text()
    assert "**epsilon = 1 (delta = 1e-5) per agent**" in text and "0.955\nto 0.852" in text


def test_the_example_configurations_state_their_epsilon():
    for path, stated in (("quickstart.toml", "epsilon = 1, delta = 1e-5"),
                         ("diadsp.toml", "epsilon = 1.7e9")):
        text = (ROOT / "examples" / path).read_text()
        assert stated in text
        tomllib.loads(text)


def test_the_quickstart_configuration_is_the_readme_run():
    cfg = tomllib.loads((ROOT / "examples" / "quickstart.toml").read_text())
    problem = dpnet.problems.NonconvexLogistic.random(n_agents=6, samples=200, dim=10, seed=0)
    graph = dpnet.graphs.ring(6)
    params = {k: v for k, v in cfg["algorithm"].items() if k != "name"}
    alg = dpnet.algorithms.DOADP(**params)
    res = dpnet.run(alg, problem, graph, cfg["iterations"], seed=cfg["seed"],
                    privacy=cfg["privacy"], log_every=cfg["log_every"])
    assert res.privacy.epsilon <= 1.0
    assert res.history["objective"][-1] < res.history["objective"][0] - 0.05
    assert res.diagnosis() == []


def test_a_bad_run_is_diagnosed_and_warns():
    """The old quick start: DiaDSP with Lap(0.1 * 0.9^k) noise on both messages gets worse
    (0.955 -> 2.219) and its Theorem 3 epsilon is 2.97e17."""
    problem = dpnet.problems.NonconvexLogistic.random(n_agents=6, samples=200, dim=10, seed=0)
    alg = dpnet.algorithms.DiaDSP(eta=0.15, noise_x=dpnet.noise.Laplace(scale=0.1, decay=0.9),
                                  noise_y=dpnet.noise.Laplace(scale=0.1, decay=0.9))
    with pytest.warns(RunDiagnosis) as caught:
        res = dpnet.run(alg, problem, dpnet.graphs.ring(6), iterations=300, seed=0)
    lines = res.diagnosis()
    assert lines == [
        "objective ended above its start (0.9555 -> 2.219 over 300 iterations): the run made "
        "things worse; try a smaller step or less noise",
        "epsilon = 2.97e+17 per agent exceeds 10: the guarantee is close to none (calibrate the "
        "noise: alg.calibrate(target, ...))"]
    assert [str(w.message) for w in caught] == [f"diadsp: {line}" for line in lines]


def test_diagnosis_thresholds_and_fallback_metrics():
    """Epsilon exactly 10 passes, above it warns, inf (a non-private run) does not; without a
    finite objective the distance (then the gradient norm) is compared."""
    problem = dpnet.problems.Quadratic.random(6, 3, seed=0)
    res = dpnet.run(dpnet.algorithms.DGD(eta=0.05), problem, dpnet.graphs.ring(6), iterations=20)
    assert res.privacy.epsilon == float("inf") and res.diagnosis() == []
    worse = dict(res.history, objective=res.history["objective"] * float("nan"))
    worse["distance"] = res.history["distance"][::-1].copy()
    res.history = worse
    assert res.diagnosis()[0].startswith("distance ended above its start")
    res.privacy = dpnet.privacy.PrivacyGuarantee.none("x", 20)
    for eps, n in ((10.0, 1), (10.5, 2)):
        res.privacy = type(res.privacy)(**{**vars(res.privacy), "epsilon": eps})
        assert len(res.diagnosis()) == n


def test_the_command_line_starts_without_its_heavy_optional_imports():
    """`dpnet --help` and `dpnet list` import the CLI, the library and the application layer,
    but none of the imports that are paid only where used (numba's kernels, dp-accounting,
    matplotlib, scipy.optimize/signal/stats): each costs 0.1-0.3 s of a start-up that
    benchmarks/RESULTS.md measures (a structural check; no wall-clock limit)."""
    import subprocess
    import sys

    lazy = ("numba", "dp_accounting", "matplotlib", "scipy.optimize", "scipy.signal",
            "scipy.stats")
    code = ("import sys, dpnet.cli; "
            f"print(','.join(m for m in {lazy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == "", f"imported at start-up: {out}"
