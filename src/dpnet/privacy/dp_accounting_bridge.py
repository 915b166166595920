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
  dp-accounting has no event for), and :func:`epsilon_of_rdp` at given orders;
* :func:`pld_epsilon` -- epsilon at delta by the PLD accountant on a pessimistic grid, and
  :func:`fine_enough`, the grid refined to the epsilon it finds;
* :func:`pld_of_curve` -- the PLD of a symmetric pair given its hockey-stick curve;
* :func:`gaussian_step_pld` -- one Poisson-subsampled Gaussian step's PLD, and
  :func:`pld_epsilon_public_count`, epsilon of a step composed a public random number of
  times (a mixture of compositions).

The replace-one pair of a batch drawn without replacement is :mod:`.without_replacement`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from types import ModuleType

import numpy as np

from ..errors import require

#: orders tried beyond dp-accounting's defaults (which stop at 1024)
EXTRA_ORDERS = (1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
#: neighbouring relations by dpnet's names
RELATIONS = ("add_remove", "replace_one")

LOG = logging.getLogger("dpnet.privacy.dp_accounting")


class _AbslToDpnet(logging.Filter):
    """dp-accounting logs through absl, which writes to the root logger's stderr: its warnings
    (an RDP order whose series did not converge is left out of the epsilon, which stays an upper
    bound) reached every DP-SGD run and calibration. They go to ``dpnet.privacy.dp_accounting``
    at DEBUG instead; errors pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        LOG.debug("dp-accounting: %s", record.getMessage())
        return False


logging.getLogger("absl").addFilter(_AbslToDpnet())


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


def epsilon_of_rdp(orders, rdp, delta: float) -> float:
    """Smallest epsilon at ``delta`` of the RDP values ``rdp`` at ``orders`` (dp-accounting's
    conversion)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod

    eps, _ = rdp_mod.compute_epsilon(np.asarray(orders, dtype=float),
                                     np.asarray(rdp, dtype=float), delta)
    return float(eps) if math.isfinite(eps) else math.inf


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


#: the most grid points a PLD account may span (about 400 MB per array)
PLD_POINTS = 5e7


def gaussian_loss_span(multiplier: float) -> float:
    """How far the privacy loss of one Gaussian step of noise multiplier z spreads on
    dp-accounting's truncated support (about 10 sigma either side of the shift):
    ``1/z^2 + 20/z``; subsampling only shrinks it."""
    return 1.0 / multiplier ** 2 + 20.0 / multiplier


def fine_enough(epsilon_at: Callable[[float], float], interval: float | None = None,
                start: float = 1e-4, bound: Callable[[], float] | None = None,
                span: float | None = None) -> float:
    """``epsilon_at(interval)`` of a PLD account on a pessimistic grid fine enough: the given
    ``interval``; else ``start``, refined to 1/1000 of the epsilon found (at most three passes).
    A fixed grid overstates a small epsilon: 1e-4 overstates epsilon ~ 1e-3 tenfold after 1e5
    compositions. ``bound`` and ``span``: an upper bound on the same epsilon (RDP's; a function,
    evaluated only where needed: it can cost more than the PLD) and the privacy loss's spread
    per step (:func:`gaussian_loss_span`): where a grid would hold more than :data:`PLD_POINTS`
    points (an out-of-memory kill, not an error: calibration explores tiny noise on its way) the
    finest grid that fits is the last tried, or ``bound()`` where none fits."""
    def fits(disc: float) -> bool:
        return span is None or span / disc <= PLD_POINTS

    def fallback() -> float:
        # reached only where fits() failed, i.e. span is set, so the require below saw a bound
        assert bound is not None
        return bound()

    require(span is None or bound is not None, "bound", bound, "an upper bound on epsilon "
            "(the fallback where a grid of the given span does not fit)")
    if interval is not None:
        return epsilon_at(interval) if fits(interval) else fallback()
    eps, disc = math.inf, start
    for _ in range(3):
        if not fits(disc):
            return eps if math.isfinite(eps) else fallback()
        new = epsilon_at(disc)
        if not math.isfinite(new) or disc <= new / 1000:
            return new
        eps, disc = new, max(new / 1000, 1e-8)
    return eps


def pld_epsilon(event, delta: float, interval: float, relation: str = "add_remove") -> float:
    """Epsilon at ``delta`` of ``event`` by the PLD accountant with a pessimistic grid of
    ``interval`` in the privacy loss (an upper bound whatever the interval)."""
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(neighboring_relation=_relation(relation),
                        value_discretization_interval=interval)
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def gaussian_step_pld(noise_multiplier: float, sampling_prob: float, interval: float,
                      relation: str = "add_remove"):
    """dp-accounting's PLD of one Poisson-subsampled Gaussian step (the ``relation``'s pair) on a
    pessimistic grid of ``interval``."""
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    return pld_mod.from_gaussian_mechanism(noise_multiplier, sampling_prob=sampling_prob,
                                           value_discretization_interval=interval,
                                           neighboring_relation=_relation(relation))


def pld_of_curve(interval: float, grid: np.ndarray, deltas: np.ndarray):
    """The ``PrivacyLossDistribution`` of a symmetric pair given its hockey-stick curve
    ``deltas`` at the losses ``grid * interval`` (``grid`` ascending integers), by dp-accounting's
    pessimistic connect-the-dots (Doroshenko et al. 2022): a pair that dominates any pair with
    that curve at the grid."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    pmf = pld_pmf.create_pmf_pessimistic_connect_dots(interval, grid, deltas)
    return privacy_loss_distribution.PrivacyLossDistribution(pmf)


def pld_epsilon_public_count(step, counts: np.ndarray, weights: np.ndarray, tail: float,
                             delta: float) -> float:
    """Epsilon at ``delta`` of the privacy loss distribution ``step`` (one release, a
    dp-accounting ``PrivacyLossDistribution``) composed N times, N drawn from a *public*,
    data-independent law: ``counts`` ascending, ``weights[j]`` the probability that N lies in
    ``(counts[j-1], counts[j]]`` (the first bin starting at 0), ``tail`` the probability that N
    exceeds ``counts[-1]``.

    The observer sees N (which steps released something), so the outcomes of different N are
    disjoint and the privacy loss distribution is the mixture of the N-fold ones, in each
    direction: ``delta(eps) = sum_N P(N) delta_N(eps)``. ``delta_N`` grows with N (more
    releases), so charging each bin its largest N, and the tail delta = 1, bounds it from
    above: ``delta(eps) <= tail + (1 - tail) delta_mix(eps)``."""
    counts, weights = np.asarray(counts), np.asarray(weights, dtype=float)
    if not (np.all(np.diff(counts) > 0) and counts[0] >= 1 and len(counts) == len(weights)):
        raise ValueError("counts must be ascending integers >= 1, one weight each")
    if tail >= delta:
        return math.inf
    pld, done, mix, mass = None, 0, None, 0.0
    for c, w in zip(counts.tolist(), weights.tolist()):
        more = step.self_compose(c - done) if c - done > 1 else step
        pld, done = (more if pld is None else pld.compose(more)), c
        if w > 0:
            mix = pld if mix is None else mix.compute_mixture(pld, mass / (mass + w))
            mass += w
    if mix is None:
        return 0.0
    return float(mix.get_epsilon_for_delta((delta - tail) / (1.0 - tail)))
