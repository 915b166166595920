"""The network contract over ``torch.distributed``: agents spread over processes and machines.

Each process (rank) owns a contiguous block of agents, ``agents = lo..hi-1`` (uneven blocks are
allowed: ``split=[sizes]``), and holds only their rows of every state tensor. The same algorithm
code runs unchanged because it only ever talks to :class:`~dpnet.network.Network`'s contract:

* **halo**: a rank's halo tensors hold its local rows followed by the rows of every remote agent
  that one of its agents receives from (the graph's adjacency; for a
  :class:`~dpnet.graphs.directed.DirectedGraph` the union of R's and C's edges), sorted by global index;
* ``exchange(rows, name, compressor, matrix, active)`` compresses and charges exactly like the
  simulated network (same code, same counter-based draws keyed by global agent index), then sends
  each peer rank, point to point, only the rows its agents receive under ``matrix`` (one batched
  set of ``isend``/``irecv`` between ranks that share edges; halo rows a matrix does not deliver
  are zero); the full state is never gathered during iterations;
* ``mix``/``laplacian`` multiply by the rank's slice of the matrix, whose columns index the halo;
* metrics use one all-reduce per logged step (:meth:`DistributedNetwork.moments`); the bit ledger
  and the transcript are kept per rank and merged at the end of :func:`run`.

Hence the distributed run of a configuration reproduces the single-process run with the same seed:
the same draws, the same messages, the same bits, iterates equal up to summation order (~1e-12 in
float64).

Faults. All communication goes through one gloo group created with ``timeout`` seconds: a peer
that dies closes its sockets and the others stop at once; a peer that hangs makes the others stop
after ``timeout``. Either way they raise :class:`DistributedError` naming the peer, the message
and the iteration, instead of waiting forever. ``checkpoint_every`` writes per-rank checkpoints
and ``resume`` continues from the newest iteration every rank has saved; with reproducible
randomness draws are keyed by iteration and the resumed run is bit-for-bit the uninterrupted one;
with secret randomness it draws afresh, and the iterations sent twice are charged to the
guarantee (:meth:`RankCheckpoints.lease`, :func:`dpnet.runner.charge_repeated_releases`).

Launch: ``torchrun --nproc-per-node N -m dpnet.cli run config.toml --backend distributed``, or
from Python :func:`run` inside any initialised process group, or :func:`launch` for a local
multi-process group (tests, benchmarks). See ``docs/distributed.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import multiprocessing
import os
import pickle
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

from . import checkpoints, pair_keys, runner
from .errors import DPNetError, ParameterError, UnknownNameError, positive, require
from .graphs import Graph
from .graphs.base import laplacian_of, support
from .network import BitLedger, Network, Transcript, TranscriptEntry, torch_operator
from .rng import Streams
from .secret_rng import RANDOMNESS, SecretStreams

DEFAULT_TIMEOUT = 60.0  # seconds a rank waits for a peer before declaring it dead or hung

__all__ = ["DistributedNetwork", "DistributedError", "RankCheckpoints", "RankOutcome",
           "block_offsets", "is_rank0", "rank_agents", "init_from_env", "launch", "run", "DEFAULT_TIMEOUT"]


class DistributedError(DPNetError, RuntimeError):
    """A peer process died, hung past the timeout, or stopped with its own error."""


def block_offsets(n: int, world_size: int, split: Sequence[int] | None = None) -> np.ndarray:
    """``(world_size + 1,)`` offsets of the contiguous agent blocks: rank r owns agents
    ``offsets[r]..offsets[r+1]-1``. ``split`` gives the block sizes (default: as even as
    possible, the first ``n % world_size`` ranks one agent more)."""
    if split is None:
        require(n >= world_size, "world_size", world_size,
                f"at most n = {n} processes (every rank owns at least one agent)")
        sizes = np.full(world_size, n // world_size, dtype=np.int64)
        sizes[: n % world_size] += 1
    else:
        sizes = np.asarray(split)
        require(sizes.ndim == 1 and sizes.size == world_size, "split", split,
                f"one block size per rank ({world_size} ranks)")
        require(bool(np.all(np.equal(np.mod(sizes, 1), 0))) and bool(np.all(sizes >= 1)), "split",
                split, "integer block sizes >= 1 (every rank owns at least one agent)")
        require(int(sizes.sum()) == n, "split", split, f"block sizes summing to n = {n}")
        sizes = sizes.astype(np.int64)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@dataclass
class _Plan:
    """Who gets which rows under one matrix: ``send`` (peer, local row indices), ``recv`` (peer,
    halo positions)."""

    send: list[tuple[int, torch.Tensor]]
    recv: list[tuple[int, torch.Tensor]]


class DistributedNetwork(Network):
    """:class:`~dpnet.network.Network` over ``torch.distributed`` (see the module docstring).

    Needs an initialised default process group (any backend); communication runs in a dedicated
    group with ``timeout`` seconds on the device's backend: NCCL for CUDA state, gloo otherwise
    (pass ``group=`` to use your own). A rank holds only its rows of the sparse operators."""

    backend = "distributed"

    def __init__(self, graph: Graph, record: bool = False, float_bits: int = 64,
                 rng: Streams | None = None, dtype: torch.dtype = torch.float64,
                 split: Sequence[int] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 group: Any = None, device: torch.device | str = "cpu") -> None:
        super().__init__(graph, record=record, float_bits=float_bits, rng=rng, dtype=dtype,
                         device=device)
        require(dist.is_available() and dist.is_initialized(), "torch.distributed", "uninitialised",
                "an initialised process group (launch with torchrun, or dpnet.distributed.launch)")
        self.timeout = positive("timeout", timeout)
        #: called with k before iteration k's messages can go out (None: nothing)
        self.before_iteration: Callable[[int], None] | None = None
        self._own_group = group is None
        self.group = group if group is not None else dist.new_group(
            backend="nccl" if self.device.type == "cuda" else "gloo",
            timeout=datetime.timedelta(seconds=self.timeout))
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        self._global_rank = [dist.get_global_rank(self.group, r) for r in range(self.world_size)]
        self.offsets = block_offsets(self.n, self.world_size, split)
        self.lo, self.hi = int(self.offsets[self.rank]), int(self.offsets[self.rank + 1])
        self._agents = np.arange(self.lo, self.hi)
        need = np.zeros(self.n, dtype=bool)
        need[graph.support_matrix[self.lo:self.hi].indices] = True
        need[self.lo:self.hi] = False
        self.halo_agents = np.concatenate([self._agents, np.nonzero(need)[0]])
        self._pos = np.full(self.n, -1, dtype=np.int64)
        self._pos[self.halo_agents] = np.arange(self.halo_agents.size)
        self._plans: dict[str, _Plan] = {}
        # what actually crossed between processes (payload bytes), for benchmarks and reports
        self.wire = {"p2p_bytes": 0, "p2p_messages": 0, "collective_bytes": 0, "collectives": 0}

    # -- layout -----------------------------------------------------------------------------
    @property
    def agents(self) -> np.ndarray:
        """Global indices of this rank's agents, its block ``lo..hi-1``."""
        return self._agents

    @property
    def n_local(self) -> int:
        """Number of agents this rank owns, ``hi - lo`` (the rows of a local tensor)."""
        return self.hi - self.lo

    @property
    def n_halo(self) -> int:
        """Number of rows of this rank's halo tensors: its own agents, then every remote agent one of them
        receives from under the graph's adjacency."""
        return int(self.halo_agents.size)

    def own(self, H: torch.Tensor) -> torch.Tensor:
        """The local rows of a halo tensor: its first ``n_local`` rows."""
        return H[: self.n_local]

    def halo_zeros(self, d: int) -> torch.Tensor:
        """A zero halo tensor, ``(n_halo, d)``, in the network's dtype and on its device."""
        return torch.zeros(self.n_halo, d, dtype=self.dtype, device=self.device)

    def describe(self) -> dict[str, Any]:
        """This rank's layout for logs and reports: ``rank``, ``world_size``, its agent block
        ``agents = (lo, hi)``, the global indices of its ``halo`` rows, the ``peers`` it exchanges with
        under the matrices used so far, and the group's ``timeout_s``."""
        peers = sorted({p for plan in self._plans.values() for p, _ in plan.send + plan.recv})
        return {"rank": self.rank, "world_size": self.world_size, "agents": (self.lo, self.hi),
                "halo": self.halo_agents.tolist(), "peers": peers, "timeout_s": self.timeout}

    # -- communication ----------------------------------------------------------------------
    def _plan(self, matrix: str) -> _Plan:
        if matrix not in self._plans:
            S = support(self.graph.sparse(matrix)).tocsc()
            lo, hi, off = self.lo, self.hi, self.offsets
            need = np.zeros(self.n, dtype=bool)
            need[S[lo:hi].tocsr().indices] = True
            need[lo:hi] = False
            if np.any(need & (self._pos < 0)):
                raise ParameterError("matrix", matrix, "off-diagonal support on the graph's edges "
                                     "(the distributed halo follows graph.adjacency)")
            send, recv = [], []
            for peer in range(self.world_size):
                if peer == self.rank:
                    continue
                a, b = off[peer], off[peer + 1]
                rows = np.nonzero(need[a:b])[0] + a
                if rows.size:
                    recv.append((peer, torch.from_numpy(self._pos[rows]).to(self.device)))
                mine = np.unique(S[:, lo:hi][a:b].tocoo().col)   # my agents peer's rows read
                if mine.size:
                    send.append((peer, torch.from_numpy(mine).to(self.device)))
            self._plans[matrix] = _Plan(send, recv)
        return self._plans[matrix]

    def _to_halo(self, payload: torch.Tensor, name: str, matrix: str) -> torch.Tensor:
        plan = self._plan(matrix)
        d = payload.shape[1]
        H = payload.new_zeros(self.n_halo, d)
        H[: self.n_local] = payload
        sends = [(peer, payload[rows].contiguous()) for peer, rows in plan.send]
        recvs = [(peer, payload.new_empty(len(pos), d)) for peer, pos in plan.recv]
        self._p2p(sends, recvs, f"exchange {name!r}")
        for (_, pos), (_, buf) in zip(plan.recv, recvs):
            H[pos] = buf
        return H

    def _p2p(self, sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]],
             what: str) -> None:
        ops = [dist.P2POp(dist.isend, t, self._global_rank[p], self.group) for p, t in sends]
        ops += [dist.P2POp(dist.irecv, t, self._global_rank[p], self.group) for p, t in recvs]
        if not ops:
            return
        labels = [("sending to", p) for p, _ in sends] + [("receiving from", p) for p, _ in recvs]
        with self._guard(what, "posting messages to", None):
            works = dist.batch_isend_irecv(ops)
        for (verb, peer), work in zip(labels, works):
            with self._guard(what, verb, peer):
                work.wait()
        self.wire["p2p_messages"] += len(sends)
        self.wire["p2p_bytes"] += sum(t.numel() * t.element_size() for _, t in sends)

    @contextlib.contextmanager
    def _guard(self, what: str, verb: str = "waiting for",
               peer: int | None = None) -> Iterator[None]:
        try:
            yield
        except DistributedError:
            raise
        except RuntimeError as err:  # gloo reports peer failures as RuntimeError/DistBackendError
            raise DistributedError(self._explain(what, verb, peer, err)) from err

    def _explain(self, what: str, verb: str, peer: int | None, err: Exception) -> str:
        text = str(err)
        if re.search(r"timed out|timeout", text, re.IGNORECASE):
            cause = f"no answer within timeout = {self.timeout:g} s: the peer hung or fell behind"
        elif re.search(r"closed|reset|broken pipe|connection", text, re.IGNORECASE):
            cause = "the connection was closed: the peer stopped (exited, was killed or raised)"
        else:
            cause = "the operation failed"
        who = f"rank {peer}" if peer is not None else "a peer rank"
        detail = text.strip().splitlines()[0][:240] if text.strip() else type(err).__name__
        return (f"rank {self.rank} of {self.world_size} stopped at iteration {self.iteration}: "
                f"{what} failed {verb} {who} ({cause}). This rank stops instead of waiting "
                f"forever; see {who}'s own output for its error. [{detail}]")

    # -- neighbour sums ---------------------------------------------------------------------
    def _operator(self, matrix: str, kind: str) -> torch.Tensor:
        key = (matrix, kind)
        if key not in self._ops:
            M = self.graph.sparse(matrix)
            rows = (laplacian_of(M) if kind == "laplacian" else M)[self.lo:self.hi]
            outside = np.ones(self.n, dtype=bool)
            outside[self.halo_agents] = False
            if outside[sp.csr_array(rows).indices].any():
                raise ParameterError("matrix", matrix, "off-diagonal support on the graph's edges "
                                     "(the distributed halo follows graph.adjacency)")
            self._ops[key] = torch_operator(rows[:, self.halo_agents], self.dtype, self.device)
        return self._ops[key]

    def set_iteration(self, k: int) -> None:
        """:meth:`Network.set_iteration`, after :attr:`before_iteration` (a secret run's
        release lease, :meth:`RankCheckpoints.lease`) when one is set."""
        if self.before_iteration is not None:
            self.before_iteration(int(k))
        super().set_iteration(k)

    def _check_halo(self, H: torch.Tensor) -> torch.Tensor:
        if H.ndim < 1 or H.shape[0] != self.n_halo:
            raise ParameterError("H", tuple(H.shape), f"a halo tensor with n_halo = {self.n_halo} "
                                 "rows (from exchange() or halo_zeros()): local rows must go "
                                 "through exchange() before a neighbour sum")
        return H

    def mix(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        return self._operator(matrix, "mix") @ self._check_halo(H)

    def laplacian(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        return self._operator(matrix, "laplacian") @ self._check_halo(H)

    # -- collectives (metrics and results only) ---------------------------------------------
    def _all_reduce(self, t: torch.Tensor, what: str) -> torch.Tensor:
        with self._guard(what):
            dist.all_reduce(t, group=self.group)
        self.wire["collectives"] += 1
        self.wire["collective_bytes"] += t.numel() * t.element_size()
        return t

    def sum_agents(self, X: torch.Tensor) -> torch.Tensor:
        return self._all_reduce(X.sum(dim=0).clone(), "sum over agents")

    def sum_scalar(self, value: float) -> float:
        """Sum of ``value`` over all ranks, as a float (one all-reduce, collective)."""
        return float(self._all_reduce(torch.tensor([float(value)], dtype=torch.float64,
                                                   device=self.device), "scalar sum")[0])

    def moments(self, X: torch.Tensor, scalars: list[float] | tuple[float, ...] = ()
                ) -> tuple[torch.Tensor, float, list[float]]:
        """One all-reduce of a ``(world, 2 + d + s)`` table whose row r rank r fills with its
        count, its block's squared deviations from the block mean, its block sum and its scalars;
        the spread is then combined exactly (Chan et al.'s pairwise formula), never as
        ``sum ||x||^2 - n ||xbar||^2``, which cancels catastrophically near consensus."""
        dtype, X = X.dtype, X.to(torch.float64)
        d, s = X.shape[1], len(scalars)
        table = torch.zeros(self.world_size, 2 + d + s, dtype=torch.float64, device=X.device)
        block_sum = X.sum(dim=0)
        table[self.rank, 0] = self.n_local
        table[self.rank, 1] = ((X - block_sum / self.n_local) ** 2).sum()
        table[self.rank, 2:2 + d] = block_sum
        table[self.rank, 2 + d:] = torch.tensor([float(v) for v in scalars], dtype=torch.float64,
                                                device=X.device)
        self._all_reduce(table, "metrics")
        counts, sums = table[:, 0], table[:, 2:2 + d]
        xbar = sums.sum(dim=0) / self.n
        between = (counts * ((sums / counts[:, None] - xbar) ** 2).sum(dim=1)).sum()
        spread = float(table[:, 1].sum() + between)
        return xbar.to(dtype), spread, table[:, 2 + d:].sum(dim=0).tolist()

    def gather(self, X: torch.Tensor) -> torch.Tensor:
        """Full tensor of all agents' rows from local rows (or a halo tensor's own rows), on every
        rank: results only, never inside an iteration."""
        X = X[: self.n_local]
        as_bool = X.dtype == torch.bool
        src = X.to(torch.int64) if as_bool else X
        full = torch.zeros((self.n, *src.shape[1:]), dtype=src.dtype, device=src.device)
        full[self.lo:self.hi] = src
        self._all_reduce(full, "gathering results")
        return full.bool() if as_bool else full

    def _all_gather_object(self, obj: Any, what: str) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        with self._guard(what):
            dist.all_gather_object(out, obj, group=self.group)
        return out

    def agree_pair_keys(self) -> dict[int, bytes]:
        """The keys of the pairwise secrets on this rank's edges, agreed by X25519 with each
        neighbouring rank over the group (:mod:`dpnet.pair_keys`; collective)."""
        owner = np.searchsorted(self.offsets, np.arange(self.n), side="right") - 1
        return pair_keys.agree(np.asarray(self.graph.edges, dtype=np.int64), owner, self.rank,
                               lambda mine: self._all_gather_object(mine, "agreeing pair keys"))

    def merged_ledger(self) -> BitLedger:
        """The bits of all ranks in one ledger (collective)."""
        return _merge_ledgers(self._all_gather_object(self.ledger, "merging the bit ledger"))

    def merged_transcript(self) -> Transcript | None:
        """All ranks' transcript entries, message by message in the order sent (collective)."""
        if self.transcript is None:
            return None
        return _merge_transcripts(self._all_gather_object(self.transcript.entries,
                                                          "merging the transcript"))

    def merged_result(self, res: runner.Result) -> runner.Result:
        """``res`` with every rank's ledger, transcript and per-agent state rows merged, in one
        collective (results only): each state tensor whose leading dimension is its rank's
        ``n_local`` or ``n_halo`` on every rank is per-agent and gathered to all agents' rows."""
        entries = None if self.transcript is None else [  # NumPy pickles much faster
            # NumPy on the wire; _merge_transcripts turns it back into a tensor
            TranscriptEntry(e.iteration, e.name, e.senders,
                            e.messages.numpy())  # type: ignore[arg-type]
            for e in self.transcript.entries]
        mine = {"ledger": self.ledger, "entries": entries, "state": res.state,
                "wall": res.wall_time, "rows": (self.n_local, self.n_halo)}
        parts = self._all_gather_object(mine, "merging the results")
        res.ledger = _merge_ledgers([p["ledger"] for p in parts])
        if self.transcript is not None:
            res.transcript = _merge_transcripts([p["entries"] for p in parts])
        res.state = {name: np.concatenate([p["state"][name][: p["rows"][0]] for p in parts])
                     if all(_leading(p["state"][name]) in p["rows"] for p in parts) else v
                     for name, v in res.state.items()}
        res.wall_time = max(p["wall"] for p in parts)
        return res

    def latest_common(self, store: RankCheckpoints) -> int | None:
        """Newest iteration that every rank has a checkpoint of (collective)."""
        sets = self._all_gather_object(store.iterations(), "agreeing on a checkpoint")
        common = set(sets[0]).intersection(*map(set, sets[1:]))
        return max(common) if common else None

    def abort(self) -> None:
        """Drop the communication group after an error on this rank: its connections close, so
        peers waiting on this rank stop at once with :class:`DistributedError`."""
        if self._own_group and self.group is not None:
            with contextlib.suppress(Exception):
                dist.destroy_process_group(self.group)
            self.group = None

    def close(self) -> None:
        """Release the communication group (after a successful run)."""
        if self._own_group and self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None


# -- checkpoints ----------------------------------------------------------------------------
class RankCheckpoints:
    """This rank's checkpoint files ``DIR/ckpt-{iteration:09d}.rank{r}-of-{R}.pt``; the newest
    ``keep`` are kept. Each holds the runner's snapshot (local and halo rows of the state, the
    history, this rank's ledger and transcript) plus the agent blocks, checked on load.
    Files are :mod:`dpnet.checkpoints` files: loading one never executes code from it."""

    def __init__(self, directory: str | Path, rank: int, world_size: int, offsets: np.ndarray,
                 keep: int = 2) -> None:
        require(isinstance(keep, int) and keep >= 1, "keep_checkpoints", keep, "an integer >= 1")
        self.dir = Path(directory)
        self.rank, self.world_size, self.keep = rank, world_size, keep
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, k: int) -> Path:
        """The file of this rank's checkpoint at iteration k (whether or not it exists)."""
        return self.dir / f"ckpt-{k:09d}.rank{self.rank}-of-{self.world_size}.pt"

    def iterations(self) -> list[int]:
        """The iterations this rank has checkpoint files of in the folder, oldest first."""
        pat = re.compile(rf"ckpt-(\d+)\.rank{self.rank}-of-{self.world_size}\.pt$")
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := pat.match(p.name)))

    def other_layouts(self) -> list[str]:
        """Checkpoint files in the folder written by a different number of ranks."""
        pat = re.compile(r"ckpt-\d+\.rank\d+-of-(\d+)\.pt$")
        return sorted(p.name for p in self.dir.iterdir()
                      if (m := pat.match(p.name)) and int(m.group(1)) != self.world_size)

    def save(self, snapshot: dict) -> Path:
        """Write the runner's ``snapshot`` (with this rank, the number of ranks and the agent blocks
        added) to the file of its iteration, atomically, then delete all but the newest ``keep`` of this
        rank's checkpoints. Returns the path written."""
        k = int(snapshot["iteration"])
        path = checkpoints.save({**snapshot, "rank": self.rank, "world_size": self.world_size,
                                 "offsets": self.offsets.tolist()}, self.path(k))  # atomic
        for old in self.iterations()[: -self.keep]:
            self.path(old).unlink(missing_ok=True)
        return path

    # -- what this rank may have sent: secret runs resumed after a fault release again ------
    @property
    def ledger(self) -> Path:
        """``DIR/released.rank{r}-of-{R}.txt``: one line ``start end`` per lease, the iterations
        ``[start, end)`` whose messages this rank may have sent (written before it sends them)."""
        return self.dir / f"released.rank{self.rank}-of-{self.world_size}.txt"

    def open_ledger(self, start: int, span: int, fresh: bool) -> None:
        """Start leasing from iteration ``start``, ``span`` iterations a lease; a ``fresh`` run
        (not resumed) clears the ledger of an earlier run in the folder."""
        if fresh:
            self.ledger.unlink(missing_ok=True)
        self._leased, self._span = int(start), max(1, int(span))

    def lease(self, k: int) -> None:
        """Before iteration k sends: if k is past the current lease, append and fsync the next
        one, so that a process killed at any point has recorded every iteration it sent."""
        if k < self._leased:
            return
        start, self._leased = k, k + self._span
        with open(self.ledger, "a") as f:
            f.write(f"{start} {self._leased}\n")
            f.flush()
            os.fsync(f.fileno())

    def release_counts(self, iterations: int) -> np.ndarray:
        """``(iterations,)``: how many leases of the ledger cover each iteration (0 where none:
        no ledger, or the run did not lease), each lease clipped to the horizon."""
        counts = np.zeros(iterations + 1, dtype=np.int64)
        if not self.ledger.exists():
            return counts[:-1]
        for line in self.ledger.read_text().splitlines():
            parts = line.split()
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise ParameterError("checkpoint_dir", str(self.ledger), "a release ledger of "
                                     f"'start end' lines (damaged: {line!r})")
            a, b = (min(int(p), iterations) for p in parts)
            if a < b:
                counts[a] += 1
                counts[b] -= 1
        return np.cumsum(counts)[:-1]

    def load(self, k: int) -> dict:
        """This rank's snapshot at iteration k.

        Raises :class:`~dpnet.errors.ParameterError` if the file is missing or not a dpnet checkpoint, or
        if it was written with other agent blocks (another ``split``)."""
        snap = checkpoints.load(self.path(k))
        if snap["offsets"] != self.offsets.tolist():
            raise ParameterError("split", self.offsets.tolist(), "the agent blocks of the "
                                 f"checkpointed run ({snap['offsets']})")
        return snap


# -- runs -----------------------------------------------------------------------------------
def is_rank0() -> bool:
    """Whether this process writes a run's files: rank 0 of the group, or no group at all."""
    return not dist.is_initialized() or dist.get_rank() == 0


def rank_agents(n: int, split: Sequence[int] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> np.ndarray:
    """The agents this rank owns in :func:`run` with the same ``n`` and ``split``: load only
    their data (``problem.restrict(...)``, or a constructor's ``agents=``). Initialises the
    group from torchrun's environment if needed."""
    init_from_env(timeout)
    offsets = block_offsets(n, dist.get_world_size(), split)
    r = dist.get_rank()
    return np.arange(offsets[r], offsets[r + 1])


def init_from_env(timeout: float = DEFAULT_TIMEOUT, backend: str = "gloo") -> None:
    """Initialise the default process group from torchrun's environment (``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) unless one exists already."""
    if dist.is_initialized():
        return
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
               if v not in os.environ]
    require(not missing, "environment", missing, "torchrun's variables RANK, WORLD_SIZE, "
            "MASTER_ADDR, MASTER_PORT (launch with torchrun --nproc-per-node N ...)")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=positive("timeout",
                                                                                 timeout)))


def run(algorithm, problem, graph: Graph, iterations: int, *, split: Sequence[int] | None = None,
        timeout: float = DEFAULT_TIMEOUT, checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 0, keep_checkpoints: int = 2, resume: bool | str = False,
        seed: int = 0, record: bool = False, float_bits: int = 64,
        progress: bool | None = None, device: torch.device | str = "cpu",
        randomness: str = "secret", **kwargs: Any) -> runner.Result:
    """:func:`dpnet.run` with the agents spread over the ranks of a process group.

    Every rank calls it with the same arguments (SPMD) and gets the same merged
    :class:`~dpnet.runner.Result` (iterates, state, history, bits, transcript of all agents).
    Outside an initialised group it initialises one from torchrun's environment.
    ``split``: agents per rank (default even blocks). ``timeout``: seconds before a silent peer
    counts as hung. ``device``: where the rank's rows live (``"cuda"`` exchanges over NCCL; with
    several GPUs per machine pass ``f"cuda:{local_rank}"``). ``checkpoint_dir`` +
    ``checkpoint_every``: per-rank checkpoints;
    ``resume=True`` continues from the newest iteration all ranks saved (``"auto"``: if there is
    one, else from the start, for restarts under ``torchrun --max-restarts``).
    ``randomness``: ``"secret"`` by default (each rank draws the noise and batches of its agents
    from its own key, :mod:`dpnet.secret_rng`); ``"reproducible"`` makes every draw a function of
    ``seed`` (the simulated run's, to 1e-12) and warns that whoever knows the seed strips the
    noise. Other keyword arguments are :func:`dpnet.run`'s."""
    require(not getattr(graph, "time_varying", False), "graph", getattr(graph, "name", graph),
            "a fixed graph: the distributed backend's halo exchange is built once for one "
            "neighbourhood (time-varying graphs run on the simulated network, dpnet.run)")
    if randomness not in RANDOMNESS:
        raise UnknownNameError("randomness", randomness, RANDOMNESS)
    if randomness == "reproducible":
        warnings.warn(REPRODUCIBLE_WARNING.format(seed=seed), ReproducibleRandomness,
                      stacklevel=2)
    init_from_env(timeout)
    require(resume in (True, False, "auto"), "resume", resume, "True, False or 'auto'")
    rng = SecretStreams(seed) if randomness == "secret" else Streams(seed)
    net = DistributedNetwork(graph, record=record, float_bits=float_bits, rng=rng,
                             split=split, timeout=timeout, device=device)
    if randomness == "secret" and algorithm.pairwise_secrets:
        cast(SecretStreams, rng).set_pair_keys(net.agree_pair_keys())    # randomness 'secret'
    store = None
    if checkpoint_dir is not None:
        store = RankCheckpoints(checkpoint_dir, net.rank, net.world_size, net.offsets,
                                keep_checkpoints)
    require(not checkpoint_every or store is not None, "checkpoint_every", checkpoint_every,
            "a checkpoint_dir to write to")
    snapshot = None
    if resume:
        require(store is not None, "resume", resume, "a checkpoint_dir to resume from")
        assert store is not None                        # the require above raised otherwise
        k = net.latest_common(store)
        others = store.other_layouts()
        if k is None and others:  # never restart from scratch next to another layout's run
            raise ParameterError("resume", resume, f"checkpoints of {net.world_size} ranks; "
                                 f"{store.dir} holds {others[0]} (another number of ranks)")
        if k is None and resume is True:
            raise ParameterError("resume", resume, f"a checkpoint saved by all {net.world_size} "
                                 f"ranks in {store.dir}")
        snapshot = store.load(k) if k is not None else None
        if snapshot is not None and net.rank == 0:
            runner.LOG.info("resuming from iteration %d of %d (checkpoints of %d ranks in %s)",
                            k, iterations, net.world_size, store.dir)
    if randomness == "secret" and store is not None:
        # a resumed secret run sends again, with fresh noise, what the failed attempt sent
        # after its last checkpoint: a ledger written before each send says how much
        # (leases as long as the checkpoint interval; without checkpoints, one for the run)
        store.open_ledger(int(snapshot["iteration"]) if snapshot is not None else 0,
                          checkpoint_every or iterations, fresh=snapshot is None)
        net.before_iteration = store.lease
    try:
        res = runner.run(algorithm, problem, graph, iterations, seed=seed, record=record,
                         float_bits=float_bits, network=net, device=device,
                         progress=progress if net.rank == 0 else False,
                         checkpoint=store.save if store is not None else None,
                         checkpoint_every=checkpoint_every, resume=snapshot,
                         randomness=randomness, **kwargs)
    except BaseException:
        net.abort()  # peers learn of it now, not after the timeout, even if this process lives on
        raise
    res = net.merged_result(res)
    if randomness == "secret" and store is not None:
        counts = np.max(net._all_gather_object(store.release_counts(iterations),
                                               "counting the iterations sent"), axis=0)
        k0 = int(snapshot["iteration"]) if snapshot is not None else 0
        if not counts[:k0].all():
            # the ledger of the attempts before the checkpoint is gone (deleted, or written by
            # an older dpnet): they may have sent every later iteration too
            counts[:k0] = np.maximum(counts[:k0], 1)
            counts[k0:] += 1
        res = dataclasses.replace(res, privacy=runner.charge_repeated_releases(
            res.privacy, algorithm, problem, graph, iterations, counts, kwargs.get("privacy")))
    net.close()
    return res


class ReproducibleRandomness(UserWarning):
    """A distributed run whose every draw is a public function of its seed."""


REPRODUCIBLE_WARNING = (
    "randomness='reproducible' across processes: every noise draw and batch of this run is a "
    "function of seed={seed}, which every rank's configuration holds; anyone who knows or "
    "guesses it regenerates the noise and strips it from the messages, so the run's privacy "
    "guarantee does not hold against them (use it to test, not to deploy)")


def _leading(v: np.ndarray) -> int:
    return v.shape[0] if v.ndim >= 1 else -1


def _merge_ledgers(parts: list[BitLedger]) -> BitLedger:
    out = BitLedger(parts[0].n, detailed=parts[0].detailed)
    for part in parts:
        out.merge(part)
    return out


def _merge_transcripts(parts: list[list[TranscriptEntry]]) -> Transcript:
    if len({len(p) for p in parts}) != 1:
        raise DistributedError(f"ranks sent different numbers of messages "
                               f"({[len(p) for p in parts]}): an algorithm's exchanges must "
                               "not depend on which agents a rank holds")
    out = Transcript()
    for entries in zip(*parts):
        first = entries[0]
        if any((e.iteration, e.name) != (first.iteration, first.name) for e in entries):
            raise DistributedError(f"ranks disagree on the message sequence at "
                                   f"{[(e.iteration, e.name) for e in entries]}")
        out.append(TranscriptEntry(first.iteration, first.name,
                                   np.concatenate([e.senders for e in entries]),
                                   torch.cat([torch.as_tensor(e.messages) for e in entries])))
    return out


# -- local multi-process launcher (tests, benchmarks, notebooks) ----------------------------
@dataclass
class RankOutcome:
    """What one rank of :func:`launch` returned or raised."""

    rank: int
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    traceback: str | None = None
    exitcode: int | None = None
    seconds: float = float("nan")

    @property
    def ok(self) -> bool:
        """Whether the rank finished without an error."""
        return self.error is None

    def unwrap(self) -> Any:
        """The rank's return value; raises :class:`DistributedError` with the rank's error and traceback
        if it failed."""
        if not self.ok:
            raise DistributedError(f"rank {self.rank} failed: {self.error}\n{self.traceback or ''}")
        return self.value


def launch(fn: Callable[..., Any], nprocs: int, *args: Any, timeout: float = 30.0,
           wait: float = 600.0, grace: float = 5.0, start_method: str = "forkserver",
           threads: int = 1) -> list[RankOutcome]:
    """Run ``fn(*args)`` in ``nprocs`` local processes joined in a gloo group on 127.0.0.1.

    ``fn`` must be importable (a module-level function). Returns one :class:`RankOutcome` per rank
    (its return value, or the error it raised). The group's rendezvous store lives in this process
    on a free port the OS picks, so concurrent launches never collide. ``timeout``: the group's
    timeout; once a rank has failed, ranks still running ``timeout + grace`` s later are killed
    (they had that long to notice), and all are killed after ``wait`` s.
    ``start_method="forkserver"`` forks every group from one server that imported dpnet once
    (~0.2 s per group instead of a fresh interpreter per rank); ``"spawn"`` is the portable
    fallback."""
    nprocs = int(positive("nprocs", nprocs))
    import torch.multiprocessing as tmp

    if start_method == "forkserver":
        # a script's own functions live in __main__: the server imports it too (as spawn does)
        main = ["__main__"] if getattr(fn, "__module__", None) == "__main__" else []
        multiprocessing.set_forkserver_preload(["dpnet.distributed", *main])
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout))
    with tempfile.TemporaryDirectory(prefix="dpnet-launch-") as out:
        ctx = tmp.start_processes(_child, args=(nprocs, store.port, out, fn, args, timeout,
                                                threads),
                                  nprocs=nprocs, join=False, start_method=start_method)
        procs = ctx.processes
        start, failed_at = time.monotonic(), None
        while any(p.is_alive() for p in procs):
            now = time.monotonic()
            if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                failed_at = now
            if now - start > wait or (failed_at is not None and now - failed_at > timeout + grace):
                break
            time.sleep(0.02)
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
        outcomes = []
        for r, p in enumerate(procs):
            path = Path(out) / f"rank{r}.pkl"
            if path.exists():
                with path.open("rb") as fh:
                    o = pickle.load(fh)
            else:
                o = RankOutcome(r, error=f"process exited with code {p.exitcode} before "
                                f"reporting (killed, crashed, or still running after the wait)",
                                error_type="ProcessExit")
            o.exitcode = p.exitcode
            outcomes.append(o)
    return outcomes


def _child(rank: int, world: int, port: int, out: str, fn: Callable[..., Any], args: tuple,
           timeout: float, threads: int) -> None:
    code = 1
    try:
        torch.set_num_threads(threads)
        td = datetime.timedelta(seconds=timeout)
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=td)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=td)
        start = time.perf_counter()
        try:
            outcome = RankOutcome(rank, value=fn(*args))
            code = 0
        except BaseException as err:  # reported to the parent, never swallowed
            outcome = RankOutcome(rank, error=f"{type(err).__name__}: {err}",
                                  error_type=type(err).__name__, traceback=traceback.format_exc())
        outcome.seconds = time.perf_counter() - start
        path = Path(out) / f"rank{rank}.pkl"
        try:
            data = pickle.dumps(outcome)
        except Exception as err:
            code = 1
            data = pickle.dumps(RankOutcome(rank, error=f"unpicklable result: {err}",
                                            error_type=type(err).__name__))
        tmp_path = path.with_suffix(".tmp")
        tmp_path.write_bytes(data)
        os.replace(tmp_path, path)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # skip interpreter teardown: destroying a group whose peers died can block
        os._exit(code)
