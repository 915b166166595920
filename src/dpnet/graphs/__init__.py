"""Communication graphs: sparse weight matrices, O(edges) checks, cached spectral quantities.

* :mod:`dpnet.graphs.base`: the :class:`Graph` every algorithm receives;
* :mod:`dpnet.graphs.undirected`: weight schemes and constructors of undirected graphs;
* :mod:`dpnet.graphs.directed`: paper 003's pairs (R, C) of digraphs (:class:`DirectedGraph`);
* :mod:`dpnet.graphs.spectral`: exact (small n) or iterative (large n) spectral quantities.
"""

from ..errors import UnknownNameError
from .base import DENSE_MAX, Graph
from .directed import (
    CWZ_FIG1_C_EDGES,
    CWZ_FIG1_R_EDGES,
    DirectedGraph,
    cwz_fig1,
    digraph,
    directed_ring,
    from_edge_lists,
    random_digraph,
)
from .schedule import (
    SCHEDULES,
    GraphSchedule,
    cyclic,
    link_failures,
    one_peer_exponential,
    random_matchings,
    schedule_from_spec,
)
from .undirected import (
    CONSTRUCTORS,
    circulant,
    complete,
    erdos_renyi,
    from_edges,
    from_networkx,
    from_weights,
    geometric,
    grid,
    path,
    ring,
    star,
    watts_strogatz,
    weights_from_adjacency,
)
from .undirected import from_spec as _graph_from_spec

__all__ = [
    "CONSTRUCTORS", "SCHEDULES", "GraphSchedule", "cyclic", "link_failures", "one_peer_exponential",
    "random_matchings", "CWZ_FIG1_C_EDGES", "CWZ_FIG1_R_EDGES", "DENSE_MAX", "DirectedGraph", "Graph",
    "circulant", "complete", "cwz_fig1", "digraph", "directed_ring", "erdos_renyi",
    "from_edge_lists", "from_edges", "from_networkx", "from_spec", "from_weights", "geometric",
    "grid", "path", "random_digraph", "ring", "star", "watts_strogatz", "weights_from_adjacency",
]


def from_spec(spec: dict) -> Graph | GraphSchedule:
    """A graph or a time-varying schedule from a config table: ``{"name": "ring", "n": 6}``,
    ``{"name": "link_failures", "base": {"name": "erdos_renyi", "n": 20, "p": 0.3}, "p": 0.1}``,
    ``{"name": "random_matchings", "n": 10}``, a user's factory by import path, ..."""
    name = spec.get("name") if isinstance(spec, dict) else None
    if name in SCHEDULES:
        return schedule_from_spec(spec, from_spec)
    if not (isinstance(name, str) and (name in CONSTRUCTORS or name == "explicit" or ":" in name)):
        raise UnknownNameError("graph", str(name), [*CONSTRUCTORS, *SCHEDULES, "explicit"])
    return _graph_from_spec(spec)
