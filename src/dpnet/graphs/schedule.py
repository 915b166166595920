"""Time-varying graphs: a mixing matrix ``W_k`` per round, through the same network.

A :class:`GraphSchedule` has ``n`` agents and gives the :class:`~dpnet.graphs.Graph` of round k
(:meth:`GraphSchedule.at`); the simulated network switches to it at ``set_iteration(k)``. Every
round's graph is a pure function of (schedule, seed, k), so a run is reproducible and resumable.

* :func:`cyclic`: a fixed list ``W_0, W_1, ...`` repeated;
* :func:`random_matchings`: each round a uniformly random maximal matching, matched pairs average
  (``W = I - L_k / 2``), the gossip of Boyd et al. (2006);
* :func:`one_peer_exponential`: round k, agent i averages with agent ``(i + 2^(k mod log2 n))
  mod n`` (Ying et al. 2021, one peer per round; ``W_k`` doubly stochastic, not symmetric);
* :func:`link_failures`: each edge of a base graph fails independently with probability ``p``
  each round, Metropolis weights on the surviving edges.

Theorems for time-varying graphs ask each ``W_k`` to be doubly stochastic and the union of the
graphs over a window to be connected (B-connectivity, Nedić & Olshevsky 2015; Koloskova et al.
2020), not each round's graph: a round of :func:`link_failures` may be disconnected. An algorithm
declares whether its theorems allow a time-varying W (``Algorithm.time_varying_graphs``); the
runner refuses a schedule for one that does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from ..errors import positive_int, require
from ..registry import Registry
from .base import Graph
from .undirected import _from_adjacency, _symmetric_support, from_weights

#: rounds whose graphs the checks read for a random schedule (a cyclic one: all of them)
CHECKED_ROUNDS = 16


class GraphSchedule:
    """``at(k)``: the graph of round k; ``base``: a graph whose edges cover every round's (its
    connectivity is the B-connectivity the theorems need); ``period``: rounds after which the
    sequence repeats (None for a random one)."""

    time_varying = True

    def __init__(self, n: int, at: Callable[[int], Graph], name: str, base: Graph,
                 period: int | None = None, meta: dict | None = None) -> None:
        self.n, self.name, self.base, self.period = int(n), name, base, period
        self.meta = dict(meta or {})
        self._at = lru_cache(maxsize=64)(at)

    def at(self, k: int) -> Graph:
        """The graph of round k (``k mod period`` for a periodic schedule): built on first use, the last
        64 rounds asked kept. Raises :class:`~dpnet.errors.ParameterError` for k < 0."""
        k = int(k)
        require(k >= 0, "iteration", k, "k >= 0")
        return self._at(k % self.period if self.period else k)

    def checked_rounds(self) -> range:
        """The rounds :meth:`require_time_varying_ok` checks: one period of a periodic schedule, else the
        first :data:`CHECKED_ROUNDS` rounds."""
        return range(self.period if self.period else CHECKED_ROUNDS)

    def require_time_varying_ok(self, who: str) -> None:
        """Each checked round's W doubly stochastic and nonnegative, the union connected."""
        for k in self.checked_rounds():
            self.at(k).require_doubly_stochastic(f"{who} (round {k} of {self.name})")
        self.base.require_connected()

    def __repr__(self) -> str:
        return f"GraphSchedule({self.name}, n={self.n})"


def cyclic(graphs: Sequence[Graph]) -> GraphSchedule:
    """``W_k = graphs[k mod len(graphs)]``."""
    graphs = list(graphs)
    require(len(graphs) >= 1 and all(isinstance(g, Graph) for g in graphs), "graphs",
            len(graphs), "a non-empty list of Graphs")
    n = graphs[0].n
    require(all(g.n == n for g in graphs), "graphs", [g.n for g in graphs], "the same n")
    return GraphSchedule(n, lambda k: graphs[k], f"cyclic({len(graphs)})", _union_graph(graphs),
                         period=len(graphs))


def _union_graph(graphs: Sequence[Graph]) -> Graph:
    n = graphs[0].n
    A = sum((abs(g.sparse("W")) for g in graphs), sp.csr_array((n, n))).tocoo()
    off = A.row != A.col
    return _from_adjacency(_symmetric_support(n, A.row[off], A.col[off]), "union")


def random_matchings(n: int, seed: int = 0) -> GraphSchedule:
    """Round k: a uniformly random maximal matching (a random permutation's consecutive pairs;
    with n odd one agent sits out), each matched pair averaging: ``W = I - L_k / 2``."""
    n = positive_int("n", n)
    require(n >= 2, "n", n, "n >= 2")

    def at(k: int) -> Graph:
        order = np.random.default_rng([seed, k]).permutation(n)
        a, b = order[0:n - 1:2], order[1:n:2]
        # Metropolis weights on a matching are 1/2 per pair: W = I - L_k / 2
        return _from_adjacency(_symmetric_support(n, a, b), f"matching (round {k})")

    base = _from_adjacency(_symmetric_support(n, *np.triu_indices(n, 1)), "complete")
    return GraphSchedule(n, at, f"random_matchings({n}, seed={seed})", base,
                         meta={"seed": seed})


def one_peer_exponential(n: int) -> GraphSchedule:
    """Ying et al. (2021): round k, ``W_ij = 1/2`` for ``j = i`` and ``j = (i + 2^(k mod
    log2 n)) mod n``; n a power of two (then ``W_{k} ... W_{k + log2 n - 1}`` averages exactly)."""
    n = positive_int("n", n)
    require(n >= 2 and n & (n - 1) == 0, "n", n, "a power of two >= 2")
    tau = int(math.log2(n))

    def at(k: int) -> Graph:
        hop = 2 ** (k % tau)
        i = np.arange(n)
        W = sp.csr_array((np.full(2 * n, 0.5), (np.r_[i, i], np.r_[i, (i + hop) % n])),
                         shape=(n, n))
        return from_weights(W, name=f"one_peer_exponential(hop {hop})")

    offsets = [2 ** j for j in range(tau)]
    rows = np.repeat(np.arange(n), len(offsets))
    cols = (rows + np.tile(offsets, n)) % n
    keep = rows != cols
    base = _from_adjacency(_symmetric_support(n, rows[keep], cols[keep]), "exponential")
    return GraphSchedule(n, at, f"one_peer_exponential({n})", base, period=tau)


def link_failures(base: Graph, p: float, seed: int = 0,
                  weights: str = "metropolis") -> GraphSchedule:
    """Each edge of ``base`` fails independently with probability ``p`` in each round (drawn
    from ``(seed, k)``); the surviving edges get ``weights`` (Metropolis by default)."""
    require(isinstance(base, Graph) and not base.directed, "base", base,
            "an undirected Graph")
    require(0 <= p < 1, "p", p, "0 <= p < 1 (the probability that a link fails in a round)")
    A = sp.triu(base.sparse("W"), k=1).tocoo()
    r, c = A.row, A.col
    n = base.n

    def at(k: int) -> Graph:
        up = np.random.default_rng([seed, k]).random(r.size) >= p
        return _from_adjacency(_symmetric_support(n, r[up], c[up]), f"{base.name} (round {k})",
                               weights)

    return GraphSchedule(n, at, f"link_failures({base.name}, p={p:g}, seed={seed})", base,
                         meta={"p": p, "seed": seed})



#: the schedules a configuration's ``[graph]`` table names; ``link_failures`` takes its ``base``
#: and ``cyclic`` its ``graphs`` as graph tables
SCHEDULES: Registry = Registry("graph schedule", "dpnet.graphs")
for _fn in (cyclic, random_matchings, one_peer_exponential, link_failures):
    SCHEDULES.register(_fn.__name__, _fn)


def schedule_from_spec(spec: dict,
                       graph_from_spec: Callable[[dict], Graph | GraphSchedule]) -> GraphSchedule:
    """A schedule from a config table (``name`` in :data:`SCHEDULES`), its graph tables built by
    ``graph_from_spec``."""
    spec = dict(spec)
    fn = SCHEDULES[spec.pop("name")]
    if "base" in spec:
        require(isinstance(spec["base"], dict), "graph.base", spec["base"], "a graph table")
        spec["base"] = graph_from_spec(spec["base"])
    if "graphs" in spec:
        require(isinstance(spec["graphs"], list) and all(isinstance(g, dict)
                                                         for g in spec["graphs"]),
                "graph.graphs", spec["graphs"], "a list of graph tables")
        spec["graphs"] = [graph_from_spec(g) for g in spec["graphs"]]
    return fn(**spec)
