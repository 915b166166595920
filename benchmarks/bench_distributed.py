"""Distributed backend at n = 64 agents on 2 processes against the simulated backend.

Per iteration: wall and CPU time of an algorithm step, and the bytes that actually crossed between
the processes against the bit ledger (what a wire between every pair of agents would carry).

* ``simulated``: :class:`dpnet.Network`, all 64 agents in one process;
* ``2 ranks``: :class:`dpnet.distributed.DistributedNetwork` on a local gloo group of 2 processes
  (:func:`dpnet.distributed.launch`), agents 0-31 and 32-63; time = the slower rank's.

Setting: NonconvexLogistic with 4 samples per agent and d = 10 (a cheap gradient, so the numbers
are about the network), Laplace noise 0.1 * 0.99^k, one intra-op thread per process; DiaDSP
(identity compressor) and PGTC with TopK(2), on a ring (2 boundary edges between the blocks) and a
random geometric graph (radius 0.25, many boundary edges). Steps are driven through
``init``/``step`` as in ``bench_diadsp.py`` (no metrics; a logged step adds one all-reduce).

Bytes: ``wire`` counts the payload bytes of the point-to-point messages (each boundary agent's
decoded row goes once to each neighbouring *process*, as d float64, whatever the compressor);
``ledger`` is the ledger's bits / 8 (one copy per receiving *agent*, compressed sizes). Links
inside a process cost nothing on the wire. The run checks that both backends end at the same
iterate (1e-12) and that the wire bytes equal the count predicted from the graph and the blocks;
it exits non-zero otherwise.

    python benchmarks/bench_distributed.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

import dpnet
from dpnet import distributed as D
from dpnet.algorithms.base import Context
from dpnet.rng import Streams

N, DIM, SEED, WORLD = 64, 10, 0, 2
CASES = [("ring", "diadsp"), ("ring", "pgtc"), ("geometric", "diadsp"), ("geometric", "pgtc")]


def _graph(kind: str):
    return dpnet.graphs.ring(N) if kind == "ring" else dpnet.graphs.geometric(N, 0.25, seed=1)


def _algorithm(kind: str):
    nz = dpnet.noise.Laplace(0.1, decay=0.99)
    if kind == "diadsp":
        return dpnet.algorithms.DiaDSP(eta=0.05, noise_x=nz, noise_y=nz)
    return dpnet.algorithms.PGTC(eta=0.05, gamma=0.3, alpha_x=0.5, alpha_y=0.5,
                                 compressor=dpnet.compression.TopK(2), noise_x=nz, noise_y=nz,
                                 check_theory=False)


def _steps(net, graph_kind: str, alg_kind: str, iters: int, warm: int,
           barrier=lambda: None) -> dict:
    torch.set_num_threads(1)
    problem = dpnet.problems.NonconvexLogistic.random(N, samples=4, dim=DIM, seed=0)
    alg = _algorithm(alg_kind)
    ctx = Context(problem, net, net.rng)
    state = alg.init(ctx, problem.default_x0(SEED)[torch.as_tensor(net.agents)])
    for k in range(warm):
        net.set_iteration(k)
        state = alg.step(ctx, state, k)
    wire0 = dict(getattr(net, "wire", {}))
    barrier()
    w0, c0 = time.perf_counter(), time.process_time()
    for k in range(warm, warm + iters):
        net.set_iteration(k)
        state = alg.step(ctx, state, k)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    wire = {k: v - wire0[k] for k, v in getattr(net, "wire", {}).items()}
    return {"wall": wall / iters, "cpu": cpu / iters, "x": net.gather(state["x"]).numpy(),
            "ledger_bits": net.sum_scalar(float(net.ledger.total)) / (warm + iters),
            "wire_bytes": wire.get("p2p_bytes", 0) / iters,
            "wire_messages": wire.get("p2p_messages", 0) / iters}


def _rank_job(graph_kind: str, alg_kind: str, iters: int, warm: int) -> dict:
    net = D.DistributedNetwork(_graph(graph_kind), rng=Streams(SEED), timeout=120)
    out = _steps(net, graph_kind, alg_kind, iters, warm,
                 barrier=lambda: torch.distributed.barrier(group=net.group))
    net.close()
    return out


def _predicted_wire_bytes(graph, exchanges: int) -> float:
    """Per iteration: every agent with an out-neighbour in the other block sends its row (d
    float64) once to that block, for each exchange."""
    A = graph.adjacency > 0                          # A[i, j]: i receives from j
    off = D.block_offsets(N, WORLD)
    rows = 0
    for r in range(WORLD):
        for p in range(WORLD):
            if p != r:
                rows += int(A[off[p]:off[p + 1], off[r]:off[r + 1]].any(axis=0).sum())
    return rows * DIM * 8 * exchanges


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations (a smoke test)")
    args = p.parse_args(argv)
    iters, warm = (50, 5) if args.quick else (400, 20)
    print(f"n = {N} agents, d = {DIM}, {iters} timed iterations after {warm} warm-up, "
          f"{WORLD} processes (gloo, 127.0.0.1), 1 thread each")
    head = (f"{'graph':10s} {'alg':7s} {'backend':10s} {'ms/it':>7s} {'cpu ms/it':>9s} "
            f"{'wire B/it':>10s} {'msgs/it':>7s} {'ledger B/it':>11s} {'wire/ledger':>11s}")
    print(head)
    print("-" * len(head))
    ok = True
    for graph_kind, alg_kind in CASES:
        sim = _steps(dpnet.Network(_graph(graph_kind), rng=Streams(SEED)), graph_kind, alg_kind,
                     iters, warm)
        outs = D.launch(_rank_job, WORLD, graph_kind, alg_kind, iters, warm, timeout=120)
        ranks = [o.unwrap() for o in outs]
        wall = max(r["wall"] for r in ranks)
        cpu = max(r["cpu"] for r in ranks)
        wire = sum(r["wire_bytes"] for r in ranks)
        msgs = sum(r["wire_messages"] for r in ranks)
        ledger = ranks[0]["ledger_bits"] / 8
        predicted = _predicted_wire_bytes(_graph(graph_kind), exchanges=2)
        err = max(float(np.abs(r["x"] - sim["x"]).max()) for r in ranks)
        print(f"{graph_kind:10s} {alg_kind:7s} {'simulated':10s} {sim['wall'] * 1e3:7.3f} "
              f"{sim['cpu'] * 1e3:9.3f} {'-':>10s} {'-':>7s} {sim['ledger_bits'] / 8:11.0f}"
              f" {'-':>11s}")
        print(f"{graph_kind:10s} {alg_kind:7s} {'2 ranks':10s} {wall * 1e3:7.3f} "
              f"{cpu * 1e3:9.3f} {wire:10.0f} {msgs:7.0f} {ledger:11.0f} {wire / ledger:11.3f}"
              f"   (max |x - x_sim| = {err:.1e})")
        if err > 1e-12 or wire != predicted or ledger != sim["ledger_bits"] / 8:
            ok = False
            print(f"  CHECK FAILED: |x - x_sim| = {err:.3g}, wire {wire} vs predicted "
                  f"{predicted}, ledger {ledger} vs {sim['ledger_bits'] / 8}")
    print("checks (same iterates to 1e-12, wire bytes = boundary rows x d x 8 per exchange, "
          f"same ledger): {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
