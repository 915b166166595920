"""Three hosts as network namespaces (issue 38 item 5): torchrun with c10d rendezvous across veth
links reproduces the single-process run; a host killed mid-run stops the others with a named
error, and the rerun resumes from the per-rank checkpoints to the same result; a slow link
changes the time, not the result. Skipped where the machine refuses namespaces (not root)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import netns_hosts as H
import numpy as np
import pytest

from dpnet import cli

REASON = H.available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no network namespaces: {REASON}")

def _single(config: Path, out: Path) -> np.ndarray:
    assert cli.main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    return H.history(out)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype.names == b.dtype.names and len(a) == len(b)
    for key in a.dtype.names:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-12, err_msg=key)


def _ok(results) -> None:
    for i, (rc, log) in enumerate(results):
        assert rc == 0, f"host {i} exited {rc}:\n{log[-3000:]}"


def test_three_hosts_reproduce_the_single_process_run_and_a_slow_link_only_costs_time(tmp_path):
    config = H.write_config(tmp_path, 200)
    ref = _single(config, tmp_path / "single")
    with H.Hosts(3, tmp_path) as hosts:
        job = hosts.dpnet_run(config, tmp_path / "hosts", "fast")
        _ok(job.wait(180))
        _same(H.history(tmp_path / "hosts"), ref)
        hosts.slow(1, "200kbit")         # host 1's link, both ways
        slow = hosts.dpnet_run(config, tmp_path / "slow", "slow")
        _ok(slow.wait(300))
        _same(H.history(tmp_path / "slow"), ref)
    # every iteration sends host 1's boundary rows across the slow link: time, not result
    assert slow.seconds > job.seconds


def test_a_killed_host_stops_the_others_and_the_rerun_resumes_to_the_same_result(tmp_path):
    iterations, every = 6000, 200
    config = H.write_config(tmp_path, iterations, every, timeout=20)
    ref = _single(config, tmp_path / "single")
    for stale in (tmp_path / "ckpt").glob("*"):      # the single-process run's own checkpoints
        stale.unlink()
    with H.Hosts(3, tmp_path) as hosts:
        job = hosts.dpnet_run(config, tmp_path / "hosts", "killed")
        ckpt = tmp_path / "ckpt"
        job.running(ckpt)
        killed_at = time.perf_counter()
        job.kill(2)
        results = job.wait(60)
        stopped = time.perf_counter() - killed_at
        assert results[2][0] != 0
        named, survivors = set(), set()
        for rc, log in results[:2]:          # exit 1 and a line naming the dead peer
            assert rc not in (0, None), log[-3000:]
            said = re.search(r"dpnet: error: rank (\d) of 3 stopped at iteration (\d+): "
                             r"exchange '\w+' failed \w+ (?:to|from) rank (\d) \(the connection "
                             r"was closed", log)
            assert said, log[-3000:]
            own, at, peer = map(int, said.groups())
            assert peer != own and 0 < at < iterations
            named.add(peer)
            survivors.add(own)
        # the first to notice names the killed host's rank; the other may name that rank or
        # the first, which stopped (and closed its sockets) on noticing
        assert named - survivors == {0, 1, 2} - survivors
        assert stopped < 20 + 15, f"the survivors took {stopped:.1f} s to stop"
        assert not (tmp_path / "hosts" / "result.csv").exists()
        saved = sorted(int(p.name[5:14]) for p in ckpt.glob("ckpt-*.pt"))
        assert 0 < saved[0] < iterations
        rerun = hosts.dpnet_run(config, tmp_path / "hosts", "resumed")
        results = rerun.wait(180)
        _ok(results)
        _same(H.history(tmp_path / "hosts"), ref)
        said = [log for _, log in results if "resuming from iteration" in log]
        assert len(said) == 1 and f"of {iterations}" in said[0]   # rank 0 says where it resumed


def test_a_killed_secret_host_resumes_and_pays_for_what_went_out_twice(tmp_path):
    """Secret randomness: the rerun draws fresh noise, so the iterations the killed attempt sent
    after its last checkpoint go out twice. The ranks' release ledgers (leases fsynced before
    sending, so a SIGKILL loses none) count them, and the printed epsilon is the layered charge:
    DiaDSP's pure epsilon times the largest count, counted here from the ledger files."""
    iterations, every = 6000, 200
    config = H.write_config(tmp_path, iterations, every, timeout=20, secret=True)
    assert cli.main(["run", str(config), "--out", str(tmp_path / "single"), "--quiet"]) == 0
    alone = json.loads((tmp_path / "single" / "summary.json").read_text())["privacy"]
    assert 0 < float(alone["epsilon"]) < math.inf
    ckpt = tmp_path / "ckpt"
    for stale in ckpt.glob("*"):                     # the single-process run's own checkpoints
        stale.unlink()
    with H.Hosts(3, tmp_path) as hosts:
        job = hosts.dpnet_run(config, tmp_path / "hosts", "killed")
        job.running(ckpt)
        job.kill(2)
        assert all(rc != 0 for rc, _ in job.wait(60))
        rerun = hosts.dpnet_run(config, tmp_path / "hosts", "resumed")
        _ok(rerun.wait(180))
    counts = np.zeros((3, iterations), dtype=int)
    for r in range(3):
        for line in (ckpt / f"released.rank{r}-of-3.txt").read_text().split("\n")[:-1]:
            a, b = map(int, line.split())
            counts[r, a:min(b, iterations)] += 1
    assert counts.min() == 1                         # every iteration went out, from every rank
    layers = int(counts.max())
    assert layers == 2                               # the killed attempt had passed its checkpoint
    summary = json.loads((tmp_path / "hosts" / "summary.json").read_text())
    assert summary["randomness"] == "secret"
    printed = summary["privacy"]
    assert float(printed["epsilon"]) == pytest.approx(layers * float(alone["epsilon"]),
                                                      rel=1e-12)
    again = int(counts.max(axis=0).sum()) - iterations
    assert any(f"{again} iterations were sent again" in note for note in printed["notes"])


def test_an_unplugged_host_is_silence_and_the_others_stop_after_the_timeout(tmp_path):
    """No socket closes when a cable is pulled: the peers hear nothing and must not wait forever."""
    iterations, timeout = 6000, 6
    config = H.write_config(tmp_path, iterations, 200, timeout=timeout)
    with H.Hosts(3, tmp_path) as hosts:
        job = hosts.dpnet_run(config, tmp_path / "hosts", "unplugged")
        job.running(tmp_path / "ckpt")
        unplugged = time.perf_counter()
        hosts.unplug(2)
        results = job.wait(timeout * 4 + 30, hosts=[0, 1])
        for rc, log in results:              # every survivor stops with a named error ...
            assert rc not in (0, None), log[-3000:]
            assert re.search(r"dpnet: error: rank \d of 3 stopped at iteration \d+: ", log), log
        # ... and the first to give up says it heard nothing (a peer that gave up second may
        # instead hear the first one close its sockets, as after a kill)
        assert any(re.search(rf"no answer within timeout = {timeout} s", log)
                   for _, log in results), [log[-2000:] for _, log in results]
        assert time.perf_counter() - unplugged < timeout * 4 + 30
