"""Accounting of DP-SGD's step, the practitioner's recipe, under the replace-one record relation.

One agent's step: the sum of its sampled records' gradients, each clipped to l2 norm ``C``, plus
``N(0, z^2 C^2 I_d)`` (``z`` the noise multiplier), divided by a public normaliser. Two samplers:

* ``"poisson"``: every local record is included independently with probability ``q``. Replacing
  one record changes the sum by at most ``2C`` *when its slot is sampled*, in both worlds: the
  pair is a mixture against a mixture, ``((1-q) N(0) + q N(C), (1-q) N(0) + q N(-C))`` in units
  of the noise, which dp-accounting's PLD accounts exactly with ``NeighboringRelation.REPLACE_ONE``
  (at q = 16/1953, T = 400, delta = 1e-5: epsilon 4.03 at z = 0.65).
  dp-accounting's RDP has no Poisson replace-one event; the RDP account is the group-of-two bound
  through the add-or-remove curve ``R`` (replace = remove, then add; Mironov 2017, Prop. 11):
  ``RDP_replace(a) <= (a - 1/2)/(a - 1) R(2a) + R(2a - 1)``, looser, and sound.
* ``"fixed"``: B records drawn without replacement (rate ``g = B/m``). Under replace-one the pair
  is dominated by ``(N(0), (1-g) N(0) + g N(2C))`` (Zhu, Dong & Wang 2022), the Poisson
  add-or-remove event at noise multiplier ``z/2``: PLD and RDP both (at z = 0.65 with the rates
  above: epsilon 31.6; z = 1.26 for epsilon 4).

Every step is one release; the T releases compose.
"""

from __future__ import annotations

import numpy as np

from ..errors import require
from ..problems.stochastic import SAMPLERS
from . import dp_accounting_bridge as bridge

METHODS = ("pld", "rdp")


def step_event(noise_multiplier: float, sampler: str, rate: float):
    """``(event, relation)`` of one step (module docstring)."""
    dpa = bridge.events()
    require(sampler in SAMPLERS, "sampling", sampler, f"one of {SAMPLERS}")
    require(0 < rate <= 1, "rate", rate, "0 < sampling rate <= 1")
    if sampler == "poisson":
        return dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(noise_multiplier)), "replace_one"
    return (dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(noise_multiplier / 2)),
            "add_remove")


def epsilon(noise_multiplier: float, sampler: str, rate: float, steps: int, delta: float,
            method: str = "pld", pld_discretization: float | None = None) -> float:
    """Epsilon at ``delta`` of ``steps`` DP-SGD steps (module docstring)."""
    require(noise_multiplier > 0, "noise_multiplier", noise_multiplier, "z > 0")
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    require(method in METHODS, "method", method, f"one of {METHODS}")
    if steps == 0:
        return 0.0
    dpa = bridge.events()
    step, relation = step_event(noise_multiplier, sampler, rate)
    if method == "pld":
        event = dpa.SelfComposedDpEvent(step, steps)
        return bridge.fine_enough(lambda disc: bridge.pld_epsilon(event, delta, disc, relation),
                                  pld_discretization, start=1e-3,
                                  bound=epsilon(noise_multiplier, sampler, rate, steps, delta,
                                                "rdp"),
                                  # the fixed batch's pair is at twice the clipping bound
                                  span=bridge.gaussian_loss_span(noise_multiplier / 2))
    if relation == "add_remove":
        return bridge.rdp_epsilon(dpa.SelfComposedDpEvent(step, steps), delta,
                                  extend_orders=True)

    return bridge.rdp_epsilon_of_curve(lambda orders: steps * replace_one_rdp(step, orders),
                                       delta)


def replace_one_rdp(step, orders) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian ``step`` under replace-one, at ``orders`` > 1: the
    group-of-two bound through its add-or-remove curve R (module docstring)."""
    a = np.asarray(orders, dtype=float)
    return (a - 0.5) / (a - 1) * bridge.rdp_curve(step, 2 * a) + bridge.rdp_curve(step, 2 * a - 1)
