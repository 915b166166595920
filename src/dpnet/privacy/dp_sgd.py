"""Accounting of DP-SGD's step, the practitioner's recipe, under the replace-one record relation.

One agent's step: the sum of its sampled records' gradients, each clipped to l2 norm ``C``, plus
``N(0, z^2 C^2 I_d)`` (``z`` the noise multiplier), divided by a public normaliser. Two samplers:

* ``"poisson"``: every local record is included independently with probability ``q``. Replacing
  one record changes the sum by at most ``2C`` *when its slot is sampled*, in both worlds: the
  pair is a mixture against a mixture, ``((1-q) N(0) + q N(C), (1-q) N(0) + q N(-C))`` in units
  of the noise, which dp-accounting's PLD accounts exactly with ``NeighboringRelation.REPLACE_ONE``
  (at q = 16/1953, T = 400, delta = 1e-5: epsilon 4.03 at z = 0.65).
  dp-accounting's RDP has no Poisson replace-one event; the RDP account is the smaller of that
  pair's own Renyi divergence (:mod:`.poisson_replace_one`, a bound 0.1-0.3 % above it) and the
  group-of-two bound through the add-or-remove curve ``R`` (replace = remove, then add; Mironov
  2017, Prop. 11): ``RDP_replace(a) <= (a - 1/2)/(a - 1) R(2a) + R(2a - 1)``, which is 3x the
  PLD's epsilon at z = 0.65 (13.2 against 4.03; the pair's RDP: 4.91).
* ``"fixed"``: B records drawn without replacement (rate ``g = B/m``). Replacing a sampled
  record moves the sum by up to ``2C``; a step acts as the remove or the add pair of
  ``(1-g) N(0) + g N(2C)`` against ``N(0)`` depending on the data, so the proven account composes
  the one symmetrised pair that covers both (:mod:`.without_replacement`, noise multiplier
  ``z/2`` at sensitivity 2C): its PLD, or its Renyi divergence. Until 2026-11-27 the PLD
  composed the add and the remove types apart and took the larger epsilon, which is not a
  proven bound: at z = 1.26 with the rates above it claimed 4.01 where the symmetrised pair
  gives 4.28 (its RDP: 5.71).

Under add-or-remove (``relation="add_remove"``, Poisson only: the relation of Opacus and of most
DP-SGD papers) a step is dp-accounting's Poisson-subsampled Gaussian at multiplier ``z``
(``(1-q) N(0) + q N(C)`` against ``N(0)``); at the same q, z, T it is smaller than the replace-one
epsilon (1.30 against 2.00 in issue 37's example), so the two must not be compared.

Every step is one release; the T releases compose.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnknownNameError, require
from ..problems.stochastic import SAMPLERS
from . import dp_accounting_bridge as bridge
from . import poisson_replace_one, without_replacement

METHODS = ("pld", "rdp")


def step_event(noise_multiplier: float, rate: float):
    """dp-accounting event of one Poisson step under ``REPLACE_ONE`` (module docstring)."""
    dpa = bridge.events()
    require(0 < rate <= 1, "rate", rate, "0 < sampling rate <= 1")
    return dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(noise_multiplier))


def check_relation(relation: str, sampler: str) -> None:
    """``relation`` names one of :data:`bridge.RELATIONS` (replace-one: the leaderboard's);
    add-or-remove needs Poisson batches (a batch of fixed size cannot gain or lose a record)."""
    if relation not in bridge.RELATIONS:
        raise UnknownNameError("relation", relation, bridge.RELATIONS)
    require(relation == "replace_one" or sampler == "poisson", "relation", relation,
            "replace_one with sampling='fixed' (a fixed-size batch is replace-one only)")


def epsilon(noise_multiplier: float, sampler: str, rate: float, steps: int, delta: float,
            method: str = "pld", pld_discretization: float | None = None,
            relation: str = "replace_one") -> float:
    """Epsilon at ``delta`` of ``steps`` DP-SGD steps (module docstring); ``relation``:
    ``"add_remove"`` for the number Opacus and most DP-SGD papers report (Poisson only)."""
    require(noise_multiplier > 0, "noise_multiplier", noise_multiplier, "z > 0")
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    require(method in METHODS, "method", method, f"one of {METHODS}")
    require(sampler in SAMPLERS, "sampling", sampler, f"one of {SAMPLERS}")
    require(0 < rate <= 1, "rate", rate, "0 < sampling rate <= 1")
    check_relation(relation, sampler)
    if steps == 0:
        return 0.0
    if method == "rdp":
        return bridge.rdp_epsilon_of_curve(
            lambda orders: rdp_curve(noise_multiplier, sampler, rate, steps, orders, relation),
            delta)
    if relation == "add_remove":
        event = bridge.events().SelfComposedDpEvent(step_event(noise_multiplier, rate), steps)
        return bridge.fine_enough(
            lambda disc: bridge.pld_epsilon(event, delta, disc, "add_remove"),
            pld_discretization, start=1e-3,
            bound=lambda: bridge.rdp_epsilon(event, delta, extend_orders=True),
            span=bridge.gaussian_loss_span(noise_multiplier))
    if sampler == "fixed":   # the symmetrised pair at the replace-one sensitivity 2C
        z = noise_multiplier / 2
        return bridge.fine_enough(
            lambda disc: without_replacement.pld_epsilon(z, rate, steps, delta, disc),
            pld_discretization, start=1e-3,
            bound=lambda: without_replacement.rdp_epsilon(z, rate, steps, delta),
            span=without_replacement.span(z))
    step = step_event(noise_multiplier, rate)
    event = bridge.events().SelfComposedDpEvent(step, steps)
    # where no grid fits, the group-of-two RDP bound stands (the pair's own costs ~1 s)
    return bridge.fine_enough(
        lambda disc: bridge.pld_epsilon(event, delta, disc, "replace_one"),
        pld_discretization, start=1e-3,
        bound=lambda: bridge.rdp_epsilon_of_curve(lambda o: steps * replace_one_rdp(step, o),
                                                  delta),
        span=bridge.gaussian_loss_span(noise_multiplier / 2))


def rdp_curve(noise_multiplier: float, sampler: str, rate: float, steps: int,
              orders, relation: str = "replace_one") -> np.ndarray:
    """RDP of ``steps`` DP-SGD steps at ``orders`` under replace-one: the symmetrised pair at
    ``z/2`` (fixed batches), the smaller of the pair's own and the group-of-two bound (Poisson);
    under add-or-remove dp-accounting's Poisson-subsampled Gaussian; module docstring."""
    check_relation(relation, sampler)
    if relation == "add_remove":
        return steps * bridge.rdp_curve(step_event(noise_multiplier, rate), orders)
    if sampler == "fixed":
        return steps * without_replacement.rdp_curve(noise_multiplier / 2, rate, orders)
    return steps * poisson_step_rdp(noise_multiplier, rate, orders)


def poisson_step_rdp(noise_multiplier: float, rate: float, orders,
                     pair: bool = True) -> np.ndarray:
    """RDP of one Poisson step under replace-one at ``orders`` > 1: the smaller of the pair's own
    divergence and the group-of-two bound (module docstring); ``pair=False``: the latter only."""
    group = replace_one_rdp(step_event(noise_multiplier, rate), orders)
    if not pair:
        return group
    return np.minimum(poisson_replace_one.rdp_curve(noise_multiplier, rate, orders), group)


def replace_one_rdp(step, orders) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian ``step`` under replace-one, at ``orders`` > 1: the
    group-of-two bound through its add-or-remove curve R (module docstring)."""
    a = np.asarray(orders, dtype=float)
    return (a - 0.5) / (a - 1) * bridge.rdp_curve(step, 2 * a) + bridge.rdp_curve(step, 2 * a - 1)
