"""The one door between agents.

Algorithms never index another agent's row. They hand the rows they want to send to
:meth:`Network.exchange`, which compresses them, charges the bits a real wire would carry, records
the transcript an eavesdropper on every link would see, and returns what the receivers decode.
Weighted sums over neighbours (:meth:`Network.mix`, :meth:`Network.laplacian`) act only on such
received tensors.

Two kinds of tensors appear in algorithm code:

* **local** tensors, ``(n_local, d)``: one row per agent held by this process;
* **halo** tensors, ``(n_halo, d)``: rows of the local agents and of every agent they receive
  from, in the network's halo order. :meth:`exchange` returns one; copies that every holder keeps
  of its neighbours (paper 000's ``x^c``, paper 001's public ``x_hat``) are halo tensors too, and
  ordinary tensor arithmetic between halo tensors is allowed. :meth:`own` extracts the local rows.

In this simulated network every process holds all agents, so ``n_local = n_halo = n`` and the
halo order is the identity; :mod:`dpnet.distributed` implements the same contract over
``torch.distributed`` where a rank holds a block of agents.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch

from .compression import Compressor, Identity
from .errors import ParameterError, require
from .graphs import Graph, GraphSchedule
from .graphs.base import laplacian_of
from .rng import Streams

_DENSE_LIMIT = 128  # below this many agents a dense matmul beats sparse CSR


@dataclass
class TranscriptEntry:
    """One broadcast on the wire: at ``iteration``, message ``name`` sent by ``senders`` (global agent
    indices) with the decoded payloads ``messages``, one row per sender, ``(len(senders), d)``."""
    iteration: int
    name: str
    senders: np.ndarray           # global indices of the agents that sent
    messages: torch.Tensor        # decoded payloads, one row per sender


@dataclass
class Transcript:
    """Every message on the wire: each broadcast appears once (the same payload reaches every
    out-neighbour)."""

    entries: list[TranscriptEntry] = field(default_factory=list)

    def append(self, entry: TranscriptEntry) -> None:
        """Record one more broadcast, after those already recorded."""
        self.entries.append(entry)

    def names(self) -> list[str]:
        """The message names that appear in the transcript, sorted, each once."""
        return sorted({e.name for e in self.entries})

    def stacked(self, name: str, n: int | None = None) -> np.ndarray:
        """``(iterations, n, d)`` array of the payloads named ``name``; NaN where an agent was
        silent."""
        sel = [e for e in self.entries if e.name == name]
        if not sel:
            raise ParameterError("name", name, f"a transcript name among {self.names()}")
        n = n or 1 + max(int(e.senders.max()) for e in sel if len(e.senders))
        d = sel[0].messages.shape[1]
        out = np.full((len(sel), n, d), np.nan)
        for t, e in enumerate(sel):
            out[t, e.senders] = e.messages.numpy()
        return out

    def __len__(self) -> int:
        return len(self.entries)

    def to_state(self) -> dict:
        """The entries as plain data (see :mod:`dpnet.checkpoints`)."""
        return {"entries": [{"iteration": int(e.iteration), "name": str(e.name),
                             "senders": torch.from_numpy(np.asarray(e.senders, np.int64).copy()),
                             "messages": torch.as_tensor(e.messages).detach().clone()}
                            for e in self.entries]}

    @classmethod
    def from_state(cls, state: dict) -> Transcript:
        """A fresh transcript equal to the one :meth:`to_state` saw."""
        _require_keys("network.transcript", state, ("entries",))
        out = cls()
        for i, e in enumerate(state["entries"]):
            _require_keys(f"network.transcript.entries[{i}]", e,
                          ("iteration", "name", "senders", "messages"))
            out.append(TranscriptEntry(int(e["iteration"]), str(e["name"]), _int64(e["senders"]),
                                       torch.as_tensor(e["messages"]).clone()))
        return out


def _add_slice(out: np.ndarray, where: slice, values: np.ndarray) -> None:
    out[where] += values


class BitLedger:
    """Bits on the wire: per agent (sender), per iteration, per message name, and in total.

    A broadcast of a b-bit payload to r out-neighbours costs ``b * r`` bits (one copy per link)."""

    def __init__(self, n: int, detailed: bool = False) -> None:
        self.n = n
        self.per_agent = np.zeros(n, dtype=np.int64)
        self.per_name: dict[str, int] = {}
        self._iter: dict[int, int] = {}
        self.detailed = detailed
        self._detail: dict[int, np.ndarray] = {}

    def charge(self, iteration: int, name: str, agents: np.ndarray | slice,
               bits: np.ndarray) -> None:
        """Charge ``bits[j]`` to sender ``agents[j]``; ``agents = slice(None)``: every agent,
        in order. That case is one vector add: ``np.add.at`` (which allows repeated ids) took
        0.2 s per message at 10^7 agents, more than a GPU's whole step."""
        bits = np.asarray(bits, dtype=np.int64)
        add: Callable[..., None] = np.add.at if isinstance(agents, np.ndarray) else _add_slice
        add(self.per_agent, agents, bits)
        total = int(bits.sum())
        self.per_name[name] = self.per_name.get(name, 0) + total
        self._iter[iteration] = self._iter.get(iteration, 0) + total
        if self.detailed:
            row = self._detail.setdefault(iteration, np.zeros(self.n, dtype=np.int64))
            add(row, agents, bits)

    @property
    def total(self) -> int:
        """Bits charged so far, over all agents, iterations and message names."""
        return int(self.per_agent.sum())

    def per_iteration(self, iterations: int | None = None) -> np.ndarray:
        """``(iterations,)`` int64: the bits charged at each iteration k, summed over agents and message
        names (zero where nothing was sent). ``iterations`` defaults to one past the last iteration
        charged; later iterations are cut off."""
        K = iterations if iterations is not None else (max(self._iter) + 1 if self._iter else 0)
        out = np.zeros(K, dtype=np.int64)
        for k, b in self._iter.items():
            if k < K:
                out[k] = b
        return out

    def per_agent_iteration(self, iterations: int | None = None) -> np.ndarray:
        """``(iterations, n)`` int64: the bits each sender was charged at each iteration k (``iterations``
        as in :meth:`per_iteration`).

        Kept only by a detailed ledger (a run with ``record=True``); raises
        :class:`~dpnet.errors.ParameterError` otherwise."""
        require(self.detailed, "ledger.detailed", self.detailed,
                "per-agent-per-iteration bits are kept only with record=True")
        K = iterations if iterations is not None else (max(self._detail) + 1 if self._detail else 0)
        out = np.zeros((K, self.n), dtype=np.int64)
        for k, row in self._detail.items():
            if k < K:
                out[k] = row
        return out

    def merge(self, other: BitLedger) -> None:
        """Add ``other``'s counts (per agent, per message name, per iteration and, where ``other`` kept
        them, per agent and iteration) into this ledger, in place: how the distributed backend sums its
        ranks' ledgers. Both must count the same agents and keep the same detail."""
        require(other.n == self.n and other.detailed == self.detailed, "ledger",
                f"n={other.n}, detailed={other.detailed}",
                f"a ledger of the same agents and detail (n={self.n}, detailed={self.detailed})")
        self.per_agent += other.per_agent
        for name, v in other.per_name.items():
            self.per_name[name] = self.per_name.get(name, 0) + v
        for k, v in other._iter.items():
            self._iter[k] = self._iter.get(k, 0) + v
        for k, row in other._detail.items():
            self._detail.setdefault(k, np.zeros(self.n, dtype=np.int64))
            self._detail[k] += row

    def as_dict(self) -> dict:
        """A JSON-ready summary: ``total`` bits, ``per_agent`` bits (a list, one per sender) and
        ``per_name`` bits by message name."""
        return {"total": self.total, "per_agent": self.per_agent.tolist(),
                "per_name": dict(self.per_name)}

    def to_state(self) -> dict:
        """A copy of the counts as plain data (see :mod:`dpnet.checkpoints`): the ledger is
        rebuilt from exactly them by :meth:`from_state`."""
        return {"n": int(self.n), "detailed": bool(self.detailed),
                "per_agent": torch.from_numpy(self.per_agent.copy()),
                "per_name": {str(k): int(v) for k, v in self.per_name.items()},
                "per_iteration": {int(k): int(v) for k, v in self._iter.items()},
                "detail": {int(k): torch.from_numpy(row.copy()) for k, row in self._detail.items()}}

    @classmethod
    def from_state(cls, state: dict) -> BitLedger:
        """A fresh ledger equal to the one :meth:`to_state` saw (own arrays: the ledger adds into
        them in place, the state may be resumed from again)."""
        _require_keys("network.ledger", state, ("n", "detailed", "per_agent", "per_name",
                                                "per_iteration", "detail"))
        ledger = cls(int(state["n"]), detailed=bool(state["detailed"]))
        ledger.per_agent = _int64(state["per_agent"])
        ledger.per_name = {str(k): int(v) for k, v in state["per_name"].items()}
        ledger._iter = {int(k): int(v) for k, v in state["per_iteration"].items()}
        ledger._detail = {int(k): _int64(row) for k, row in state["detail"].items()}
        return ledger


def torch_operator(M: sp.sparray, dtype: torch.dtype, device: torch.device | str = "cpu"
                   ) -> torch.Tensor:
    """A SciPy sparse (rows, n) matrix as a torch operator on ``device``: dense when it has at
    most :data:`_DENSE_LIMIT` columns (a small dense matmul beats CSR), else CSR, built from the
    CSR arrays directly (never through a dense n x n)."""
    M = sp.csr_array(M)
    if M.shape[1] <= _DENSE_LIMIT:
        return torch.from_numpy(M.toarray()).to(dtype=dtype, device=device)
    with warnings.catch_warnings():  # torch flags CSR as beta; CSR @ dense is all we use of it
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", message="Sparse invariant checks")
        return torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                       torch.from_numpy(M.indices.astype(np.int64)),
                                       torch.from_numpy(M.data), size=M.shape,
                                       dtype=dtype, device=device)


class Network:
    """Simulated network: all n agents in this process (see the module docstring)."""

    backend = "simulated"

    def __init__(self, graph: Graph | GraphSchedule, record: bool = False, float_bits: int = 64,
                 rng: Streams | None = None, dtype: torch.dtype = torch.float64,
                 device: torch.device | str = "cpu") -> None:
        require(float_bits in (16, 32, 64), "float_bits", float_bits, "one of 16, 32, 64")
        self.device = torch.device(device)
        # a time-varying graph: the round's graph is set by set_iteration
        self.schedule: GraphSchedule | None = (cast(GraphSchedule, graph)
                                               if getattr(graph, "time_varying", False) else None)
        self.graph: Graph = self.schedule.at(0) if self.schedule is not None else cast(Graph, graph)
        self.n = graph.n
        self.float_bits = float_bits
        self.rng = rng if rng is not None else Streams(0)
        self.dtype = dtype
        self.iteration = 0
        self.record = record
        self.ledger = BitLedger(self.n, detailed=record)
        self.transcript = Transcript() if record else None
        self._ops: dict[tuple[str, str], torch.Tensor] = {}
        self._receivers: dict[str, np.ndarray] = {}

    # -- layout -----------------------------------------------------------------------------
    @property
    def agents(self) -> np.ndarray:
        """Global indices of the local rows."""
        return np.arange(self.n)

    @property
    def n_local(self) -> int:
        """Number of agents this process holds (the rows of a local tensor); here all n."""
        return self.n

    def own(self, H: torch.Tensor) -> torch.Tensor:
        """Local rows of a halo tensor."""
        return H

    def halo_zeros(self, d: int) -> torch.Tensor:
        """A zero halo tensor, ``(n_halo, d)``, in the network's dtype and on its device (here
        ``n_halo = n``)."""
        return torch.zeros(self.n, d, dtype=self.dtype, device=self.device)

    def set_iteration(self, k: int) -> None:
        """Enter iteration k: messages and bits from now on are charged to it, and on a time-varying graph
        (a :class:`~dpnet.graphs.schedule.GraphSchedule`) the round's graph ``schedule.at(k)`` replaces
        the current one (its operators are rebuilt on first use)."""
        self.iteration = int(k)
        if self.schedule is not None:
            graph = self.schedule.at(self.iteration)
            if graph is not self.graph:       # the round's operators are built on first use
                self.graph = graph
                self._ops.clear()
                self._receivers.clear()

    # -- communication ----------------------------------------------------------------------
    def receivers(self, matrix: str = "W") -> np.ndarray:
        """Out-degree of every agent under ``matrix``'s support (who hears its broadcast)."""
        if matrix not in self._receivers:
            self._receivers[matrix] = self.graph.out_degrees(matrix).astype(np.int64)
        return self._receivers[matrix]

    def exchange(self, messages: torch.Tensor, name: str, compressor: Compressor | None = None,
                 matrix: str = "W", active: torch.Tensor | np.ndarray | None = None) -> torch.Tensor:
        """Broadcast each local agent's row to its out-neighbours under ``matrix``.

        Returns the halo tensor of decoded payloads (zero rows for agents that were not
        ``active``). Bits: ``compressor.bits(d) * receivers`` per active sender."""
        compressor = compressor or Identity()
        require(messages.ndim == 2 and messages.shape[0] == self.n_local, "messages",
                tuple(messages.shape), f"shape (n_local={self.n_local}, d)")
        d = messages.shape[1]
        payload = compressor.compress(messages, rng=self.rng, purpose=f"compress/{name}",
                                      k=self.iteration, agents=self.agents)
        agents = self.agents
        if active is not None:
            mask_np = np.asarray(active.cpu() if torch.is_tensor(active) else active,
                                 dtype=bool).reshape(-1)
            mask = torch.from_numpy(mask_np).to(payload.device)
            payload = torch.where(mask[:, None], payload, torch.zeros_like(payload))
            senders = agents[mask_np]
        else:
            senders = agents
        # every agent sent, and the local rows are all agents in order: charge without indexing
        charged = slice(None) if active is None and self.n_local == self.n else senders
        per_msg = compressor.bits(d, self.float_bits)
        self.ledger.charge(self.iteration, name, charged,
                           per_msg * self.receivers(matrix)[charged])
        if self.transcript is not None:
            rows = payload if active is None else payload[mask]
            # the transcript is a result: it lives on the CPU whatever the run's device
            self.transcript.append(TranscriptEntry(self.iteration, name, senders.copy(),
                                                   rows.detach().to("cpu", copy=True)))
        return self._to_halo(payload, name, matrix)

    def _to_halo(self, payload: torch.Tensor, name: str, matrix: str) -> torch.Tensor:
        """Deliver the local payload rows to the receivers under ``matrix`` (here: all local)."""
        return payload

    # -- neighbour sums ---------------------------------------------------------------------
    def _operator(self, matrix: str, kind: str) -> torch.Tensor:
        key = (matrix, kind)
        if key not in self._ops:
            M = self.graph.sparse(matrix)
            if kind == "laplacian":
                M = laplacian_of(M)
            self._ops[key] = torch_operator(M, self.dtype, self.device)
        return self._ops[key]

    def mix(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        """``sum_j M_ij h_j`` over in-neighbours, self included where M has a diagonal: local rows."""
        return self._operator(matrix, "mix") @ H

    def laplacian(self, H: torch.Tensor, matrix: str = "W") -> torch.Tensor:
        """``sum_{j != i} M_ij (h_i - h_j)``: local rows."""
        return self._operator(matrix, "laplacian") @ H

    # -- collectives (metrics and results only, never inside an algorithm step) -------------
    def sum_agents(self, X: torch.Tensor) -> torch.Tensor:
        """Sum over all agents of local rows (an all-reduce in the distributed backend)."""
        return X.sum(dim=0)

    def sum_scalar(self, value: float) -> float:
        """Sum of ``value`` over all processes (an all-reduce in the distributed backend; here the value
        itself, as a float)."""
        return float(value)

    def moments(self, X: torch.Tensor, scalars: list[float] | tuple[float, ...] = ()
                ) -> tuple[torch.Tensor, float, list[float]]:
        """``(xbar, sum_i ||x_i - xbar||^2, [sum over processes of each scalar])`` for local rows
        X: everything a logged step needs, in one all-reduce in the distributed backend."""
        xbar = X.sum(dim=0) / self.n
        return xbar, float(((X - xbar) ** 2).sum()), [float(s) for s in scalars]

    def gather(self, X: torch.Tensor) -> torch.Tensor:
        """Full ``(n, d)`` tensor from local rows (results only)."""
        return X

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """What a resumed run needs besides the algorithm's state: the bits and messages so far
        (random draws are keyed by iteration, so nothing about them needs saving). Plain data
        (copies as tensors, numbers, dicts), so a checkpoint file of it loads without unpickling
        any class: see :mod:`dpnet.checkpoints`."""
        return {"ledger": self.ledger.to_state(),
                "transcript": None if self.transcript is None else self.transcript.to_state()}

    def load_state_dict(self, sd: dict) -> None:
        """Restore the bit ledger and the transcript saved by :meth:`state_dict`.

        Raises :class:`~dpnet.errors.ParameterError` if the checkpoint's number of agents differs, or if
        it kept a transcript while this network does not record (or the reverse)."""
        ledger = BitLedger.from_state(sd["ledger"])
        require(ledger.n == self.n, "network.ledger.n", ledger.n, f"n = {self.n}")
        require((sd["transcript"] is not None) == self.record, "record", self.record,
                "the same as in the checkpointed run")
        self.ledger = ledger
        self.transcript = (None if sd["transcript"] is None
                           else Transcript.from_state(sd["transcript"]))

    def check_shape(self, name: str, X: torch.Tensor, d: int) -> None:
        """Raise :class:`~dpnet.errors.ParameterError` naming ``name`` unless X is a local tensor of shape
        ``(n_local, d)``."""
        if tuple(X.shape) != (self.n_local, d):
            raise ParameterError(name, tuple(X.shape), f"shape (n_local={self.n_local}, d={d})")


def _int64(values: Any) -> np.ndarray:
    """An own int64 NumPy copy of a tensor or array."""
    if isinstance(values, torch.Tensor):
        values = values.numpy()
    return np.array(values, dtype=np.int64, copy=True)


def _require_keys(name: str, state: Any, keys: tuple[str, ...]) -> None:
    found = sorted(state) if isinstance(state, dict) else type(state).__name__
    require(isinstance(state, dict) and all(k in state for k in keys), name, found,
            f"a dict with the keys {list(keys)}")
