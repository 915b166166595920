"""Pieces shared by paper 000's compressed algorithms (PGTC, PPDC): noise arguments, the decay q
and the step-size condition of Assumption 5."""

from __future__ import annotations

import numpy as np

from ..compression import Compressor
from ..errors import ParameterError, require
from ..noise import Laplace, Noise, PerAgent, none
from ..privacy import accountants, xie


def decay(q: PerAgent | None) -> PerAgent | None:
    """Validate the common geometric decay ``q`` (scalar or one per agent): ``0 < q_i < 1``."""
    if q is not None:
        arr = np.atleast_1d(np.asarray(q, dtype=np.float64))
        require(bool(np.all((arr > 0) & (arr < 1))), "q", q, "0 < q < 1 (noise s q^k decays)")
    return q


def laplace_noise(name: str, value: Noise | PerAgent | None, q: PerAgent | None) -> Noise:
    """``value`` as a noise object: ``None`` is no noise; a number (or one per agent) is the
    Laplace scale ``s`` of ``Lap(s q^k)``; a noise object is kept, except that a scale-only one
    (what a config file yields) takes the decay ``q``. A decay contradicting ``q`` is an error."""
    if value is None:
        return none()
    if not isinstance(value, Noise):
        return Laplace(value, decay=q)
    sch = value.schedule
    if q is None or value.is_zero:
        return value
    if sch.decay is None and sch.power is None and sch.custom is None:
        return type(value)(sch.scale, decay=q)
    if sch.decay is None or not np.allclose(sch.decay, np.atleast_1d(q), rtol=0, atol=1e-15):
        raise ParameterError(name, repr(value), f"its decay must be q = {q} when q is given")
    return value


def check_alpha(name: str, alpha: float, compressor: Compressor, d: int) -> None:
    """``alpha in (0, 1/r)`` with r of Assumption 5 when the compressor knows its ``(r, phi)``."""
    constants = compressor.constants(d)
    if constants is None:
        return
    r, phi = constants
    require(alpha < 1.0 / r, name, alpha,
            f"{name} < 1/r = {1.0 / r:.6g} (Assumption 5 of paper 000: {compressor!r} has "
            f"r = {r:.6g}, phi = {phi:.6g} for d = {d})",
            "check_theory=False runs outside the theory, as paper 000's Table I does for C3")


def register_xie_accountant(cls, which: str, second: str, label: str) -> None:
    """Register paper 000's theorems as accountant ``"xie"`` of ``cls`` (DiaDSP and PGTC:
    ``which="pgtc"``, second noise ``noise_y``; PPDC: ``"ppdc"``, ``noise_v``, with its omega)."""
    @accountants.register(cls, "xie", f"{label} of paper 000 (variant: sound, printed, derived)",
                          pure=True)
    def xie_accountant(alg, problem, graph, iterations, assumptions, variant: str = "sound"):
        """Finite horizon: gradient_bound M (from the problem when it knows one);
        ``iterations=None``: adjacency_radius (the paper's delta); ``variant``: "sound" (default),
        "printed" or "derived" (:mod:`dpnet.privacy.xie`)."""
        return xie.xie_guarantee(alg.name, which, problem, graph, iterations, alg.eta,
                                 alg.noise_x, getattr(alg, second),
                                 gradient_bound=assumptions.gradient_bound,
                                 adjacency=assumptions.adjacency_radius, variant=variant,
                                 omega=getattr(alg, "omega", 1.0))
