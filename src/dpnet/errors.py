"""Errors raised by dpnet.

Every check names the parameter, the value it received and the condition it violates, so a user
can fix the call without reading the source.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterable
from typing import Any


class DPNetError(Exception):
    """Base class of dpnet's own errors."""

    def __reduce__(self):
        # a worker process sends its error back pickled, and the subclasses' __init__ take other
        # arguments than ``args``: rebuild from the message and the attributes a handler reads
        # (those that pickle), or the pool breaks instead of naming the error
        state = {k: v for k, v in vars(self).items() if _pickles(v)}
        return _rebuilt, (type(self), self.args, state)


def _pickles(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:                                   # noqa: BLE001 - any reason: leave it out
        return False
    return True


def _rebuilt(cls: type[DPNetError], args: tuple, state: dict) -> DPNetError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ParameterError(DPNetError, ValueError):
    """A parameter violates a condition of the algorithm, graph or accountant."""

    def __init__(self, name: str, value: Any, condition: str, hint: str = "") -> None:
        self.name, self.value, self.condition = name, value, condition
        msg = f"{name}={_short(value)} violates the condition: {condition}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


class NonFiniteError(DPNetError, FloatingPointError):
    """An iterate became NaN or infinite during a run."""

    def __init__(self, iteration: int, variable: str, detail: str = "") -> None:
        self.iteration, self.variable = iteration, variable
        msg = (f"non-finite value in '{variable}' at iteration {iteration}: the run diverged"
               " (reduce the step size or the noise scale)")
        if detail:
            msg += f"; {detail}"
        super().__init__(msg)


class UnknownNameError(DPNetError, KeyError):
    """A name looked up in a registry (algorithm, graph, problem, experiment) does not exist."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind, self.name, self.known = kind, name, sorted(known)
        plural = (kind[:-1] + "ies" if kind.endswith("y") and kind[-2:-1] not in "aeiou" else
                  kind[:-2] + "ices" if kind.endswith("ix") else
                  kind + "es" if kind.endswith(("s", "x", "sh", "ch")) else kind + "s")
        super().__init__(f"unknown {kind} '{name}'; known {plural}: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def require(ok: bool, name: str, value: Any, condition: str, hint: str = "") -> None:
    """Raise :class:`ParameterError` unless ``ok``."""
    if not ok:
        raise ParameterError(name, value, condition, hint)


def finite_real(name: str, value: Any) -> float:
    """``value`` as a finite float; raises :class:`ParameterError` naming ``name`` if it is not a real
    number (a bool, a string or bytes count as not one) or is NaN or infinite."""
    # float() would read True as 1 and "0.1" as 0.1: a flag or a string is not a number here
    if isinstance(value, bool | str | bytes):
        raise ParameterError(name, value, "must be a real number")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, "must be a real number") from None
    require(math.isfinite(v), name, value, "must be finite")
    return v


def positive(name: str, value: Any) -> float:
    """``value`` as a finite float > 0, else :class:`ParameterError` naming ``name``."""
    v = finite_real(name, value)
    require(v > 0, name, value, f"{name} > 0")
    return v


def nonnegative(name: str, value: Any) -> float:
    """``value`` as a finite float >= 0, else :class:`ParameterError` naming ``name``."""
    v = finite_real(name, value)
    require(v >= 0, name, value, f"{name} >= 0")
    return v


def open_interval(name: str, value: Any, lo: float, hi: float) -> float:
    """``value`` as a finite float strictly between ``lo`` and ``hi``, else :class:`ParameterError` naming
    ``name``."""
    v = finite_real(name, value)
    require(lo < v < hi, name, value, f"{lo} < {name} < {hi}")
    return v


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int >= 1: an int or an integral float (``3.0``), else :class:`ParameterError`
    naming ``name``."""
    require(isinstance(value, int | float) and not isinstance(value, bool)
            and float(value).is_integer() and value >= 1,
            name, value, f"{name} must be an integer >= 1")
    return int(value)
