"""The one bridge to Google's ``dp_accounting``: events in, epsilon out.

Every (epsilon, delta) account of dpnet that composes Gaussian or Laplace releases numerically
goes through here: the generic ``rdp``/``pld`` accountants (:mod:`.accountants`), DO-ADP's and
DP-DDA's own (:mod:`.huo`) and baseline [33]'s (:mod:`.kang`). dp-accounting is imported at
first use (about 1 s), so ``import dpnet`` does not pay for it.

* :func:`events` -- the ``dp_accounting`` module, to build ``DpEvent`` trees
  (``GaussianDpEvent``, ``PoissonSampledDpEvent``, ``SelfComposedDpEvent``, ...);
* :func:`rdp_epsilon` -- epsilon at delta of an event by the RDP accountant; with
  ``extend_orders`` the orders go on to 16384 when the best one is the largest default (tiny
  per-step losses need orders ~ log(1/delta)/epsilon);
* :func:`rdp_epsilon_of_curve` -- the same for an RDP curve computed elsewhere (a mixture
  dp-accounting has no event for);
* :func:`pld_epsilon` -- epsilon at delta by the PLD accountant on a pessimistic grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import numpy as np

#: orders tried beyond dp-accounting's defaults (which stop at 1024)
EXTRA_ORDERS = (1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
#: neighbouring relations by dpnet's names
RELATIONS = ("add_remove", "replace_one")


def events() -> ModuleType:
    """The ``dp_accounting`` package (imported here, once, at first use)."""
    import dp_accounting

    return dp_accounting


def _relation(name: str):
    dpa = events()
    return {"add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
            "replace_one": dpa.NeighboringRelation.REPLACE_ONE}[name]


def rdp_curve(event, orders, relation: str = "add_remove") -> np.ndarray:
    """The RDP of ``event`` at each of ``orders``."""
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(orders=list(orders), neighboring_relation=_relation(relation))
    acc.compose(event)
    return np.asarray(acc.rdp, dtype=float)


def rdp_epsilon_of_curve(rdp_of_orders: Callable[[np.ndarray], np.ndarray], delta: float,
                         extend_orders: bool = True) -> float:
    """Smallest epsilon at ``delta`` over the orders of ``rdp_of_orders(orders)``: the default
    orders, and :data:`EXTRA_ORDERS` too when the best is the largest default."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod

    orders = np.asarray(rdp_mod.DEFAULT_RDP_ORDERS, dtype=float)
    eps, order = rdp_mod.compute_epsilon(orders, rdp_of_orders(orders), delta)
    if extend_orders and order >= orders.max():
        more = np.asarray(EXTRA_ORDERS, dtype=float)
        eps2, _ = rdp_mod.compute_epsilon(more, rdp_of_orders(more), delta)
        eps = min(eps, eps2)
    return float(eps)


def rdp_epsilon(event, delta: float, extend_orders: bool = False,
                relation: str = "add_remove") -> float:
    """Epsilon at ``delta`` of ``event`` by the RDP accountant (dp-accounting's default orders,
    extended as in :func:`rdp_epsilon_of_curve` when asked)."""
    if extend_orders:
        return rdp_epsilon_of_curve(lambda orders: rdp_curve(event, orders, relation), delta)
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(neighboring_relation=_relation(relation))
    acc.compose(event)
    eps = float(acc.get_epsilon(delta))
    return eps if math.isfinite(eps) else math.inf


def pld_epsilon(event, delta: float, interval: float) -> float:
    """Epsilon at ``delta`` of ``event`` by the PLD accountant with a pessimistic grid of
    ``interval`` in the privacy loss (an upper bound whatever the interval)."""
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(value_discretization_interval=interval)
    acc.compose(event)
    return float(acc.get_epsilon(delta))
