"""The constants a privacy guarantee rests on: one frozen, validated object, one name per quantity.

Every accountant of every algorithm reads its constants from an :class:`Assumptions`; a name that
is not one of :data:`ASSUMPTIONS` is an error that names it and lists the known ones (a
misspelled constant silently dropped would change epsilon without a word). The papers' own
symbols map onto these names:

==================== ===========================================================================
name                 meaning (papers' symbols)
==================== ===========================================================================
gradient_bound       l2 bound on every local or per-sample gradient: M (paper 000, Assumption 7),
                     G (paper 001, Assumption 2), G of paper 003 (its Definition 3's C
                     = 2G bounds the change of one record's gradient)
l1_gradient_bound    l1 bound on every gradient: d (paper 002, Assumption 5); paper 003's G when
                     it bounds the l1 norm
adjacency            the neighbouring relation, a name: ``"function"`` (one agent's objective
                     replaced), ``"record"`` (one record of one agent's data replaced)
adjacency_radius     bound on the gradient difference of the two versions of f_i0: delta of paper
                     000 (Assumption 6) and of paper 004 (Definition 1)
smoothness           Lipschitz constant of the local gradients (L_f, Mbar); default: the problem's
delta                the delta at which an (epsilon, delta) accountant reports epsilon
==================== ===========================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import ParameterError, UnknownNameError, require

ADJACENCY_RELATIONS = ("function", "record")
_POSITIVE = {
    "gradient_bound": "0 < M < inf (an l2 bound on every gradient: M, G or C of the papers)",
    "l1_gradient_bound": "0 < d < inf (an l1 bound on every gradient)",
    "adjacency_radius": "0 < delta < inf (a bound on the gradient difference of f_i0's versions)",
    "smoothness": "0 < L < inf (a Lipschitz constant of the local gradients)",
}


@dataclass(frozen=True)
class Assumptions:
    """Constants of a privacy guarantee (see the module docstring); ``None`` = not given."""

    gradient_bound: float | None = None
    l1_gradient_bound: float | None = None
    adjacency: str | None = None
    adjacency_radius: float | None = None
    smoothness: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        for name, condition in _POSITIVE.items():
            value = getattr(self, name)
            if value is not None:
                require(isinstance(value, int | float) and not isinstance(value, bool)
                        and 0 < value < math.inf, name, value, condition)
        if self.delta is not None:
            require(isinstance(self.delta, int | float) and 0 < self.delta < 1, "delta",
                    self.delta, "0 < delta < 1")
        if self.adjacency is not None and self.adjacency not in ADJACENCY_RELATIONS:
            hint = (" (a number is the adjacency_radius)"
                    if isinstance(self.adjacency, int | float) else "")
            raise ParameterError("adjacency", self.adjacency,
                                 f"one of {ADJACENCY_RELATIONS}{hint}")

    @classmethod
    def of(cls, assumptions: Assumptions | dict | None = None, **values: Any) -> Assumptions:
        """Merge an :class:`Assumptions` (or a dict of them) with keyword values (which win);
        an unknown name raises :class:`~dpnet.errors.UnknownNameError` listing the known ones."""
        base = {} if assumptions is None else (
            assumptions.as_dict() if isinstance(assumptions, Assumptions) else dict(assumptions))
        merged = {**base, **{k: v for k, v in values.items() if v is not None}}
        check_names("assumption", merged, ASSUMPTIONS)
        return cls(**merged)

    def with_(self, **values: Any) -> Assumptions:
        """A copy with ``values`` replaced (validated again; a value None removes one); an unknown name
        raises :class:`~dpnet.errors.UnknownNameError` listing the known ones."""
        check_names("assumption", values, ASSUMPTIONS)
        return replace(self, **values)

    def as_dict(self) -> dict[str, Any]:
        """The constants that are given (not None), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)
                is not None}

    def need(self, name: str, who: str, why: str) -> Any:
        """The value of ``name``, or an error saying who needs it and why."""
        value = getattr(self, name)
        if value is None:
            raise ParameterError(name, None, f"{who} needs {name}: {why}")
        return value


ASSUMPTIONS = tuple(f.name for f in fields(Assumptions))


def check_names(kind: str, given: dict | Any, known: tuple[str, ...] | list[str]) -> None:
    """Raise :class:`UnknownNameError` for the first name of ``given`` not in ``known``."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UnknownNameError(kind, unknown[0], known)
