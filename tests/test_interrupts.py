"""A sweep stopped by Ctrl-C ends within seconds with one line (exit status 130), keeps only
finished points, and resumes; its workers die with it, also when it is killed outright. A
command whose reader leaves (`| head`) ends quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="reads worker processes from /proc (Linux)")

#: points of many seconds each on any machine (an H200 host finished 60,000 iterations' points
#: within the second the test waits), so that the signal lands while they compute
CONFIG = """
iterations = {iterations}
log_every = {iterations}
[graph]
name = "ring"
n = 4
[problem]
name = "nonconvex_logistic"
samples = 10
dim = 3
[algorithm]
name = "dgd"
eta = 0.05
"""
CLI = "import sys; from dpnet.cli import main; sys.exit(main(sys.argv[1:]))"


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path: Path, seeds: str = "0-3") -> tuple[subprocess.Popen, list[int]]:
    (tmp_path / "c.toml").write_text(CONFIG.format(iterations=300_000))
    env = {**os.environ, "DPNET_RUNS": str(tmp_path / "runs")}
    proc = subprocess.Popen([sys.executable, "-c", CLI, "sweep", str(tmp_path / "c.toml"),
                             "--seeds", seeds, "--jobs", "2", "--out", str(tmp_path / "sw"),
                             "--quiet"], env=env, start_new_session=True,
                            # a process started with SIGINT ignored keeps ignoring it (Python
                            # installs no KeyboardInterrupt handler then): pytest-xdist's workers
                            # ignore it, so the sweep is given the terminal's default disposition
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = _children(proc.pid)
        if len(workers) >= 2:
            time.sleep(1.0)          # the workers are computing their first points
            return proc, _children(proc.pid)
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the sweep started no workers")


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_ctrl_c_stops_the_sweep_with_one_line_and_it_resumes(tmp_path):
    proc, workers = _start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)               # what Ctrl-C sends: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpnet: interrupted"), err
    assert _wait_gone(workers) == []
    # nothing half-written counts as done: no point of the interrupted batch has a result
    assert not list((tmp_path / "runs").glob("*.json"))
    assert not list((tmp_path / "runs").glob("*.tmp"))
    env = {**os.environ, "DPNET_RUNS": str(tmp_path / "runs")}
    (tmp_path / "short.toml").write_text(CONFIG.format(iterations=20_000))   # same store, out
    again = subprocess.run([sys.executable, "-c", CLI, "sweep", str(tmp_path / "short.toml"),
                            "--seeds", "0-1", "--jobs", "2", "--out", str(tmp_path / "sw"),
                            "--quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "2 points (2 ran, 0 cached, 0 failed)" in again.stdout


def test_workers_die_with_a_killed_sweep(tmp_path):
    proc, workers = _start(tmp_path)
    assert workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _wait_gone(workers) == []


def test_a_reader_that_leaves_ends_the_command_quietly():
    """`dpnet list algorithms | head -0`: the pipe is closed before dpnet writes, so its first
    write fails; it ends with the shell's SIGPIPE status (141) and no traceback."""
    read, write = os.pipe()
    os.close(read)                               # the reader is gone before dpnet starts
    proc = subprocess.run([sys.executable, "-c", CLI, "list", "algorithms"], stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr
