"""The distribution (issue 39 item 6): the wheel builds, installs into a fresh virtual environment
and runs the quick start and the command line from there, not from this checkout.

The fresh environment gets the wheel and nothing else of dpnet; its dependencies (torch and the
rest, gigabytes) come from this test environment's site-packages through a ``.pth`` line, which
adds them to ``sys.path`` without the editable install's own hooks."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

QUICK_START = """
import sys, dpnet
assert "/fresh/" in dpnet.__file__, dpnet.__file__           # the wheel, not the checkout
problem = dpnet.problems.NonconvexLogistic.random(n_agents=4, samples=50, dim=5, seed=0)
graph = dpnet.graphs.ring(4)
alg = dpnet.algorithms.DPSGD(lr=0.1, noise_multiplier=1.0, clip=1.0, rate=0.2)
res = dpnet.run(alg, problem, graph, iterations=20, privacy={"delta": 1e-5})
assert res.privacy.is_private and res.history["objective"][-1] < res.history["objective"][0]
print("ok", dpnet.__version__)
"""


def test_the_wheel_installs_in_a_fresh_environment_and_runs(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(wheels)], check=True,
                   capture_output=True, text=True)
    (wheel,) = wheels.glob("dpnet-*.whl")
    env = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(env)
    py = env / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "deps-from-tests.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True, text=True)
    files = subprocess.run([str(py), "-m", "pip", "show", "-f", "dpnet"], check=True,
                           capture_output=True, text=True).stdout
    for needed in ("dpnet/py.typed", "licenses/LICENSE", "dpnet/lab/reproduce/data/huo.toml"):
        assert needed in files, needed
    done = subprocess.run([str(py), "-c", QUICK_START], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok 0.")
    # the console script, and the reproductions' claim files (package data) it reads
    cli = subprocess.run([str(env / "bin" / "dpnet"), "list", "experiments"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert cli.returncode == 0 and "huo-fig2a" in cli.stdout, cli.stderr[-2000:]
