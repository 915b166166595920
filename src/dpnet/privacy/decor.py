"""Accounting of DECOR's step (Allouah, Koloskova, El Firdoussi, Jaggi & Guerraoui, ICML 2024)
under the replace-one record relation, against an eavesdropper of every message who knows none
of the pairwise secrets.

One step releases, for every agent i, its clipped gradient sum plus
``v_i = vbar_i + sum_{j in N(i)} v_ij`` with ``vbar_i ~ N(0, z_cdp^2 C^2 I_d)`` independent and
``v_ij = -v_ji ~ N(0, z_cor^2 C^2 I_d)`` one draw per edge (the pair's secret). Across agents the
noise is one Gaussian with covariance ``C^2 M (x) I_d``, ``M = z_cdp^2 I + z_cor^2 L`` (L the
graph's unweighted Laplacian). Replacing one record of agent i shifts agent i's row only;
whitening by ``M^{-1/2}`` turns the step into a one-dimensional Gaussian mechanism with noise
multiplier

    z_eff,i = 1 / sqrt((M^{-1})_ii)                                                     (DECOR, Alg. 2)

on the same shift: DECOR's own per-step account ``2 C^2 max_i (Sigma^{-1})_ii`` (RDP at order 1,
``utils/dp_account.py`` of the authors' code) is this with ``Delta = 2C``. Poisson sampling: the
record's slot is sampled with probability q in both worlds, and the whitening keeps the pair one
dimensional, so each step is :mod:`dpnet.privacy.dp_sgd`'s REPLACE_ONE event at ``z_eff,i``; a
fixed batch its dominating add-or-remove pair. Steps compose (fresh noise, adaptive).
``z_cor -> inf``: ``(M^{-1})_ii -> 1/(n z_cdp^2)`` on a connected graph, the noise of one curator
averaging n agents; ``z_cor = 0``: local DP-SGD.

Not covered: a curious agent knows the secrets of its own edges and can subtract them; the
guarantee against such colluders needs the Laplacian of the honest subgraph, and is not computed
here.
"""

from __future__ import annotations

import numpy as np

from ..errors import require


def effective_multipliers(z_cdp: float, z_cor: float, laplacian) -> np.ndarray:
    """``z_eff,i`` of every agent (module docstring). ``laplacian``: dense or sparse; M is
    block-diagonal over the graph's connected components, so each component is inverted on its
    own (components of one size at once), which keeps many small copies of a graph cheap."""
    from scipy.sparse import coo_array, csgraph, csr_array

    require(z_cdp > 0, "noise_multiplier", z_cdp, "z_cdp > 0 (the independent noise: with none, "
            "an agent's pairwise noises sum to a known zero over the graph)")
    require(z_cor >= 0, "pair_multiplier", z_cor, "z_cor >= 0")
    L = csr_array(laplacian, dtype=np.float64)
    n = L.shape[0]
    _, label = csgraph.connected_components(L, directed=False)
    size = np.bincount(label)
    order = np.argsort(label, kind="stable")
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n) - start[label[order]]
    entries = coo_array(L)
    out = np.empty(n)
    for s in np.unique(size):
        require(s <= MAX_COMPONENT, "graph", f"a connected component of {s} agents",
                f"components of at most {MAX_COMPONENT} agents (a dense inverse each)")
        comps = np.flatnonzero(size == s)
        group = np.full(size.size, -1)
        group[comps] = np.arange(comps.size)
        keep = group[label[entries.row]] >= 0
        r, c, v = entries.row[keep], entries.col[keep], entries.data[keep]
        blocks = np.zeros((comps.size, s, s))
        blocks[group[label[r]], position[r], position[c]] = v
        M = z_cor ** 2 * blocks + z_cdp ** 2 * np.eye(s)
        diag = np.diagonal(np.linalg.inv(M), axis1=1, axis2=2)          # (components, s)
        out[order[start[comps][:, None] + np.arange(s)]] = 1.0 / np.sqrt(diag)
    return out


#: the largest connected component whose M is inverted densely
MAX_COMPONENT = 4096
