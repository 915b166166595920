"""(epsilon, delta) accounting of baseline [33] of paper 003: Kang, Liu, Niu & Wang (2021),
weighted distributed DP ERM (WD-DP), Gaussian gradient perturbation.

Each party i releases (through the aggregated model) its minibatch gradient plus
``N(0, sigma^2 I_d)`` at every iteration. Under paper 003's adjacency (Definition 3: one sample of
one party changes, ``||g(x, xi) - g(x, xi')||_2 <= C``), an m-sample average moves by at most
``C/m`` in l2, so each release is a Gaussian mechanism with noise multiplier ``z = sigma m / C``,
applied to m samples drawn without replacement from the party's D. The T releases are composed
with the RDP accountant of ``dp-accounting`` (sampled-without-replacement Gaussian, replace-one
relation; ``subsampled=False`` drops the amplification).

Gap [EXTERNAL]: [33]'s own theorem sets ``sigma_i = c G sqrt(T log(1/delta)) / (n_i epsilon)`` with
an unspecified constant c (moments accountant); it cannot be evaluated, so the same mechanism is
accounted numerically here (a valid bound, usually tighter than the closed form).
"""

from __future__ import annotations

from ..errors import positive, positive_int, require
from . import dp_accounting_bridge as bridge


def epsilon(sigma: float, C: float, m: int, D: int, T: int, delta: float,
            subsampled: bool = True) -> float:
    """epsilon of T Gaussian releases of an m-sample average gradient (see module docstring)."""
    positive("sigma", sigma)
    positive("C", C)
    m, D, T = positive_int("m", m), positive_int("D", D), positive_int("T", T)
    require(m <= D, "m", m, f"m <= D = {D}")
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    dpa = bridge.events()
    z = sigma * m / C
    base = dpa.GaussianDpEvent(z)
    event = dpa.SampledWithoutReplacementDpEvent(D, m, base) if subsampled and m < D else base
    return bridge.rdp_epsilon(dpa.SelfComposedDpEvent(event, T), delta, relation="replace_one")
