"""What any audit of a record pair can reach: the pair's own privacy profile.

An audit's lower bound never exceeds the epsilon of the pair it runs, so a claim far above that
pair's true epsilon cannot be caught, nor can a silent noise reduction that leaves the pair's
epsilon below the claim. For Laplace releases this is where the record relation's geometry shows:
a record bounded in l2 (``||a|| <= R``) moves a release by a shift ``v`` with ``||v||_2 <= D2``,
and the papers' mechanisms charge the l1 bound ``sqrt(d) D2`` as a one-dimensional Laplace shift,
the worst case over the l1 ball, which an l2-bounded shift never is (only the evenly spread ``v``
reaches the l1 bound, and its privacy loss is a sum of d small terms). The shift spread evenly over
k coordinates, ``D2 / sqrt(k)`` each, is a pair the relation allows; its exact profile is the
composition of ``k`` one-dimensional Laplace pairs per release (dp-accounting's PLD, pessimistic:
an upper bound on the pair's epsilon, so "the pair cannot reach the claim" stays true).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...errors import require
from ...privacy import dp_accounting_bridge as bridge

#: the sparsities tried (the shift on k coordinates); d itself is always added
SPARSITIES = (1, 4, 16, 64)


def sparse_laplace_pair_epsilon(l2_shift_over_scale: float, dim: int, releases: int,
                                delta: float, sparsities: Sequence[int] = SPARSITIES,
                                interval: float = 1e-4) -> dict[int, float]:
    """Epsilon at ``delta`` of the pair that shifts each of ``releases`` identical Laplace
    releases (scale b per coordinate, ``dim`` coordinates) by ``D2 / sqrt(k)`` on k coordinates,
    ``l2_shift_over_scale = D2 / b``, for each k of ``sparsities`` (at most ``dim``) and
    ``dim``: ``{k: epsilon}``."""
    require(l2_shift_over_scale > 0, "l2_shift_over_scale", l2_shift_over_scale, "> 0")
    require(dim >= 1 and releases >= 1, "dim, releases", (dim, releases), ">= 1 each")
    dpa = bridge.events()
    out = {}
    for k in sorted({*(k for k in sparsities if 1 <= k <= dim), dim}):
        per_coordinate = l2_shift_over_scale / math.sqrt(k)
        event = dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(1.0 / per_coordinate), k * releases)
        out[k] = bridge.pld_epsilon(event, delta, interval)
    return out
