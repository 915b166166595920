"""Communication graphs: sparse weight matrices, O(edges) checks, cached spectral quantities.

* :mod:`dpnet.graphs.base`: the :class:`Graph` every algorithm receives;
* :mod:`dpnet.graphs.undirected`: weight schemes and constructors of undirected graphs;
* :mod:`dpnet.graphs.directed`: paper 003's pairs (R, C) of digraphs (:class:`DirectedGraph`);
* :mod:`dpnet.graphs.spectral`: exact (small n) or iterative (large n) spectral quantities.
"""

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
from .undirected import (
    CONSTRUCTORS,
    circulant,
    complete,
    erdos_renyi,
    from_edges,
    from_networkx,
    from_spec,
    from_weights,
    geometric,
    grid,
    path,
    ring,
    star,
    watts_strogatz,
    weights_from_adjacency,
)

__all__ = [
    "CONSTRUCTORS", "CWZ_FIG1_C_EDGES", "CWZ_FIG1_R_EDGES", "DENSE_MAX", "DirectedGraph", "Graph",
    "circulant", "complete", "cwz_fig1", "digraph", "directed_ring", "erdos_renyi",
    "from_edge_lists", "from_edges", "from_networkx", "from_spec", "from_weights", "geometric",
    "grid", "path", "random_digraph", "ring", "star", "watts_strogatz", "weights_from_adjacency",
]
