"""dpnet across hosts: network namespaces joined by veth links and a bridge, torchrun with c10d
rendezvous, a slow link and two faults (issue 38 item 5; the CI-size checks are
``tests/test_hosts.py``).

Setting: ``tests/netns_hosts.py``'s configuration (DiaDSP, Laplace noise, quadratic problem) on a
ring of ``--agents`` agents spread over ``--hosts`` hosts, one process per host, reproducible
randomness so that every run can be compared with the single-process run to 1e-12.

Measured, each against the single-process run of the same configuration:

* ``full speed``: the veth links as they are; the wall time of the whole job (torchrun start-up,
  rendezvous, the run, the exit) and of the single-process run; an untimed job first, so that
  no timed job pays for compiling the noise kernels;
* ``slow link``: host 1's link limited both ways by a token bucket (``tbf``) to each ``--rates``
  rate; the job's wall time and its ratio to full speed; the result must be the same;
* ``killed``: host ``hosts-1`` SIGKILLed once every rank has saved a checkpoint; the seconds until
  the survivors have exited (with a line naming the dead rank), then the rerun resumes from the
  checkpoints, and its result must be the same;
* ``unplugged``: host ``hosts-1``'s link taken down (no socket closes): the seconds until the
  survivors stop, against the configured timeout.

Needs root and iproute2 (else it says so and skips); exits non-zero if any result differs.

    python benchmarks/bench_hosts.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import netns_hosts as H  # noqa: E402

from dpnet import cli  # noqa: E402


def _same(a, b) -> float:
    """Largest relative difference of two histories (inf if their shapes differ)."""
    if a.dtype.names != b.dtype.names or len(a) != len(b):
        return float("inf")
    return max(float(np.max(np.abs(a[k] - b[k]) / np.maximum(1.0, np.abs(b[k]))))
               for k in a.dtype.names)


def _ok(results) -> bool:
    return all(rc == 0 for rc, _ in results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 hosts, a short run, one slow rate")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--rates", default="100mbit,20mbit,5mbit")
    ap.add_argument("--timeout", type=int, default=10)
    args = ap.parse_args()
    if args.quick:
        args.hosts, args.agents, args.dim, args.iterations, args.rates = 3, 6, 8, 300, "1mbit"
    why = H.available()
    if why is not None:
        print(f"bench_hosts: skipped, this machine cannot make hosts: {why}")
        return 0
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = H.write_config(tmp, args.iterations, every=max(1, args.iterations // 20),
                                timeout=args.timeout, n=args.agents, dim=args.dim)
        t0 = time.perf_counter()
        assert cli.main(["run", str(config), "--out", str(tmp / "single"), "--quiet"]) == 0
        single = time.perf_counter() - t0
        ref = H.history(tmp / "single")

        def fresh() -> None:
            for p in (tmp / "ckpt").glob("*"):
                p.unlink()
        print(f"{args.hosts} hosts, ring of {args.agents} agents, d = {args.dim}, "
              f"{args.iterations} iterations (DiaDSP, reproducible randomness)")
        print(f"single process: {single:.1f} s")
        with H.Hosts(args.hosts, tmp) as hosts:
            def job(tag: str, resume: bool = False) -> tuple[float, float, bool]:
                if not resume:     # resume = "auto": another job's checkpoints would end it at once
                    fresh()
                out = tmp / tag
                j = hosts.dpnet_run(config, out, tag)
                res = j.wait(1800)
                return j.seconds, _same(H.history(out), ref) if _ok(res) else np.inf, _ok(res)

            job("warm-up")         # compiles and caches numba's kernels: later jobs read them
            fast, diff, ok = job("fast")
            failed |= not ok or diff > 1e-12
            print(f"full speed: {fast:.1f} s (job, start-up included), result differs by "
                  f"{diff:.1e}")
            for rate in args.rates.split(","):
                hosts.slow(1, rate)
                seconds, diff, ok = job(f"slow-{rate}")
                failed |= not ok or diff > 1e-12
                print(f"host 1 at {rate}: {seconds:.1f} s ({seconds / fast:.2f}x full speed), "
                      f"result differs by {diff:.1e}")
            hosts.slow(1, "10gbit")
            victim = args.hosts - 1

            def fault(tag: str, act) -> tuple[float, list]:
                """Start a job, ``act(victim)`` once every rank checkpointed; the seconds until
                the other hosts exited, and their (status, output)."""
                fresh()
                j = hosts.dpnet_run(config, tmp / tag, tag)
                j.running(tmp / "ckpt")
                t0 = time.perf_counter()
                act(j, victim)
                res = j.wait(args.timeout * 6 + 60, hosts=list(range(victim)))
                return time.perf_counter() - t0, res

            def stopped_named(res) -> bool:
                return all(rc not in (0, None) and "stopped at iteration" in log for rc, log in res)

            stopped, res = fault("killed", lambda j, h: j.kill(h))
            named = stopped_named(res)
            failed |= not named
            seconds, diff, ok = job("killed", resume=True)   # the rerun: resume = "auto"
            failed |= not ok or diff > 1e-12
            print(f"host {victim} killed mid-run: the others stopped after {stopped:.1f} s "
                  f"(named error: {named}); the rerun resumed in {seconds:.1f} s, result "
                  f"differs by {diff:.1e}")
            stopped, res = fault("unplugged", lambda j, h: hosts.unplug(h))
            named = stopped_named(res) and any("no answer within timeout" in log for _, log in res)
            failed |= not named
            print(f"host {victim} unplugged mid-run: the others stopped after {stopped:.1f} s "
                  f"(timeout = {args.timeout} s; named error: {named})")
    print("FAILED" if failed else "all results equal the single-process run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
