"""Several hosts on one Linux machine: network namespaces joined by veth links to a bridge.

Each host is a network namespace with its own interface ``eth0`` and address ``10.R.0.(i+1)``; a
switch namespace bridges them. A job on the hosts is one ``torchrun`` per host with c10d
rendezvous at host 0 (``--rdzv-conf is_host=1`` there: the namespaces share one hostname, so
torchrun cannot tell the store's host from its name), ``--local-addr`` its own address and
``GLOO_SOCKET_IFNAME=eth0``, so every byte between ranks crosses a veth link and the bridge.
A slow link is a token bucket (``tbf``) on both ends of a host's veth pair: this machine's
kernel has ``tbf`` and ``htb`` but not ``netem``.

Needs root and iproute2 (``ip netns``); :func:`available` says whether this machine allows it.
Used by ``tests/test_hosts.py`` (the CI size) and ``benchmarks/bench_hosts.py`` (the larger figure).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PORT = 29431

#: a dpnet configuration small enough for CI: DiaDSP on a ring of 6 agents, 2 per host
CONFIG = """
seed = 3
randomness = "reproducible"
iterations = {iterations}
log_every = {log_every}
[graph]
name = "ring"
n = {n}
[problem]
name = "quadratic"
dim = {dim}
[algorithm]
name = "diadsp"
eta = 0.1
noise_x = {{ kind = "laplace", scale = 0.1, decay = 0.999 }}
[distributed]
timeout = {timeout}
checkpoint_dir = "{ckpt}"
checkpoint_every = {every}
resume = "auto"
"""


#: what ``secret=True`` changes: the deployment's randomness, both messages noisy, and the
#: gradient bound Theorem 3's account needs, so that the run has a finite epsilon
SECRET = {'randomness = "reproducible"': 'randomness = "secret"',
          "[distributed]": 'noise_y = { kind = "laplace", scale = 0.1, decay = 0.999 }\n'
                           "[privacy]\ngradient_bound = 1.0\n[distributed]"}


def write_config(folder: Path, iterations: int, every: int = 0, timeout: int = 20, n: int = 6,
                 dim: int = 8, secret: bool = False) -> Path:
    """:data:`CONFIG` as ``folder/run.toml``, checkpoints (every ``every`` iterations, 0: none)
    in ``folder/ckpt``; ``secret``: with the changes of :data:`SECRET`."""
    path = Path(folder) / "run.toml"
    text = CONFIG.format(iterations=iterations, log_every=max(1, iterations // 10),
                         timeout=timeout, ckpt=Path(folder) / "ckpt", every=every, n=n, dim=dim)
    for old, new in SECRET.items() if secret else ():
        text = text.replace(old, new)
    path.write_text(text)
    return path


def history(out: Path):
    """The ``result.csv`` a ``dpnet run`` wrote to ``out``, as a structured array."""
    import numpy as np

    return np.genfromtxt(Path(out) / "result.csv", delimiter=",", names=True)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available() -> str | None:
    """``None`` if this process may create network namespaces and veth links, else why not."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"dpnetprobe{os.getpid()}"
    probe = _ip("netns", "add", name, check=False)
    if probe.returncode != 0:
        return f"ip netns add failed: {probe.stderr.strip()}"
    try:
        veth = _ip("-n", name, "link", "add", "a0", "type", "veth", "peer", "name", "a1",
                   check=False)
        if veth.returncode != 0:
            return f"veth links are not allowed: {veth.stderr.strip()}"
        tbf = _ip("-n", name, "link", "set", "a0", "up", check=False)
        tc = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "a0",
                             "root", "tbf", "rate", "1mbit", "burst", "32kbit", "latency",
                             "100ms"], capture_output=True, text=True)
        if tbf.returncode != 0 or tc.returncode != 0:
            return f"tbf is not available: {tc.stderr.strip()}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


@dataclass
class Job:
    """One ``torchrun`` per host; :meth:`wait` collects each host's exit status and output."""

    hosts: Hosts
    procs: list[subprocess.Popen]
    logs: list[Path]
    started: float = field(default_factory=time.perf_counter)

    def running(self, ckpt: Path, timeout: float = 120) -> None:
        """Wait until every rank has saved a checkpoint in ``ckpt``: the run is under way on
        every host (and a fault now hits it mid-run)."""
        deadline = time.perf_counter() + timeout
        while len({p.name.split(".")[1] for p in Path(ckpt).glob("ckpt-*.pt")}) < self.hosts.n:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("a host ended before every rank saved a checkpoint")
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no checkpoint of every rank within {timeout} s")
            time.sleep(0.05)

    def kill(self, host: int) -> None:
        """SIGKILL every process of host ``host`` (torchrun starts its worker in a session of
        its own, so the whole namespace's processes, as if the machine died; its sockets close)."""
        for pid in self.hosts.pids(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def wait(self, timeout: float, hosts: list[int] | None = None) -> list[tuple[int | None, str]]:
        """``(exit status or None if still running at timeout, output)`` of each of ``hosts``
        (default all); one still running at ``timeout`` is killed."""
        end = time.perf_counter() + timeout
        out = []
        for i in range(self.hosts.n) if hosts is None else hosts:
            p, log = self.procs[i], self.logs[i]
            try:
                rc = p.wait(max(0.1, end - time.perf_counter()))
            except subprocess.TimeoutExpired:
                self.kill(i)
                p.wait()
                rc = None
            out.append((rc, log.read_text()))
        self.seconds = time.perf_counter() - self.started
        return out


class Hosts:
    """``n`` hosts (network namespaces) on one bridge; a context manager that removes them."""

    def __init__(self, n: int, workdir: Path, subnet: int | None = None) -> None:
        self.n = n
        self.workdir = Path(workdir)
        tag = os.getpid() % 100000
        self.subnet = 10 + tag % 200 if subnet is None else subnet
        self.names = [f"dpnet{tag}h{i}" for i in range(n)]
        self.switch = f"dpnet{tag}sw"
        self.links = [(f"dn{tag}h{i}", f"dn{tag}s{i}") for i in range(n)]   # <= 15 characters

    def address(self, i: int) -> str:
        return f"10.{self.subnet}.0.{i + 1}"

    def __enter__(self) -> Hosts:
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i, (ns, (host_end, switch_end)) in enumerate(zip(self.names, self.links,
                                                                  strict=True)):
                _ip("netns", "add", ns)
                _ip("link", "add", host_end, "type", "veth", "peer", "name", switch_end)
                _ip("link", "set", host_end, "netns", ns)
                _ip("link", "set", switch_end, "netns", self.switch)
                _ip("-n", ns, "link", "set", host_end, "name", "eth0")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", self.switch, "link", "set", switch_end, "master", "br0")
                _ip("-n", self.switch, "link", "set", switch_end, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for host in range(self.n):      # a deleted namespace does not stop its processes
            for pid in self.pids(host):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for ns in [*self.names, self.switch]:
            _ip("netns", "del", ns, check=False)

    def pids(self, host: int) -> list[int]:
        """The processes running in host ``host``'s namespace."""
        out = _ip("netns", "pids", self.names[host], check=False).stdout
        return [int(p) for p in out.split()]

    def unplug(self, host: int) -> None:
        """Take host ``host``'s link down: its processes live on, but nothing reaches them (a
        cable pulled or a machine frozen: no socket closes, the peers hear only silence)."""
        _ip("-n", self.names[host], "link", "set", "eth0", "down")

    def slow(self, host: int, rate: str, burst: str = "64kbit", latency: str = "2s") -> None:
        """Limit host ``host``'s link to ``rate`` both ways (a token bucket on each end)."""
        for ns, dev in ((self.names[host], "eth0"), (self.switch, self.links[host][1])):
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev,
                            "root", "tbf", "rate", rate, "burst", burst, "latency", latency],
                           check=True, capture_output=True, text=True)

    def dpnet_run(self, config: Path, out: Path, tag: str) -> Job:
        """``dpnet run CONFIG --backend distributed --out OUT`` on every host."""
        return self.torchrun(["dpnet.cli", "run", str(config), "--backend", "distributed",
                              "--out", str(out)], tag=tag)

    def torchrun(self, args: list[str], tag: str = "job", env: dict | None = None) -> Job:
        """Start ``torchrun ... -m <args>`` on every host (one process per host)."""
        procs, logs = [], []
        base = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1", **(env or {})}
        for i, ns in enumerate(self.names):
            cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "torch.distributed.run",
                   f"--nnodes={self.n}", "--nproc-per-node=1", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint={self.address(0)}:{PORT}", f"--rdzv-id={tag}",
                   f"--local-addr={self.address(i)}", "--max-restarts=0",
                   "--monitor-interval=0.2"]
            if i == 0:
                cmd.append("--rdzv-conf=is_host=1")
            log = self.workdir / f"{tag}.host{i}.log"
            fh = log.open("w")
            procs.append(subprocess.Popen([*cmd, "-m", *args], stdout=fh, stderr=subprocess.STDOUT,
                                          env=base, start_new_session=True, cwd=self.workdir))
            fh.close()
            logs.append(log)
        return Job(self, procs, logs)
