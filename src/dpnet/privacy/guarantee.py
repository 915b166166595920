"""The privacy guarantee a run's parameters buy."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np


def per_agent_unique(fn: Callable[..., float], *columns) -> np.ndarray:
    """``fn(*row)`` for every agent's row of per-agent parameters (each column scalar or ``(n,)``),
    evaluated once per distinct row and broadcast back: an accountant over 10^6 agents that share
    their noise parameters costs one evaluation, not 10^6 (no Python loop over agents)."""
    cols = [np.atleast_1d(np.asarray(c, dtype=np.float64)).reshape(-1) for c in columns]
    n = max(c.size for c in cols)
    if all(c.size == 1 or bool(np.all(c == c[0])) for c in cols):   # the usual case: shared noise
        return np.full(n, float(fn(*(float(c[0]) for c in cols))))
    # one integer code per distinct row, built column by column and re-compacted after each
    # (a 1-d sort per column; np.unique(axis=0) sorts a structured view, 15x slower at 10^6)
    code = np.zeros(n, dtype=np.int64)
    for c in cols:
        levels, inv = np.unique(np.broadcast_to(c, (n,)), return_inverse=True)
        code = np.unique(code * len(levels) + inv.reshape(-1), return_inverse=True)[1].reshape(-1)
    first = np.unique(code, return_index=True)[1]
    values = np.fromiter((fn(*(float(np.broadcast_to(c, (n,))[i]) for c in cols)) for i in first),
                         dtype=np.float64, count=len(first))
    return values[code]


@dataclass(frozen=True)
class PrivacyGuarantee:
    """``(epsilon, delta)``-DP of each agent's data or objective.

    ``epsilon`` is the worst agent's budget (``per_agent`` lists all of them); ``horizon`` is the
    number of iterations covered (``None`` = any number); ``theorem`` names the result used and
    ``assumptions`` the hypotheses and user-supplied constants it rests on. ``epsilon = inf`` means
    no guarantee (a non-private algorithm, or noise scale 0)."""

    epsilon: float
    delta: float = 0.0
    per_agent: tuple[float, ...] = ()
    horizon: int | None = None
    theorem: str = ""
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @staticmethod
    def none(reason: str = "no privacy mechanism", horizon: int | None = None) -> PrivacyGuarantee:
        """No guarantee: ``epsilon = inf``, ``delta = 1``, with ``reason`` in the theorem line (printed as
        "no differential privacy guarantee (reason)")."""
        return PrivacyGuarantee(math.inf, 1.0, (), horizon, reason, ())

    @staticmethod
    def from_per_agent(per_agent, **kw) -> PrivacyGuarantee:
        """A guarantee from each agent's epsilon (any array-like, flattened): ``epsilon`` is the largest
        (inf for none); the other fields are keyword arguments."""
        per = tuple(np.asarray(per_agent, dtype=np.float64).reshape(-1).tolist())
        return PrivacyGuarantee(max(per) if per else math.inf, per_agent=per, **kw)

    @property
    def is_private(self) -> bool:
        """Whether there is a guarantee: a finite epsilon with delta < 1."""
        return math.isfinite(self.epsilon) and self.delta < 1.0

    def as_dict(self) -> dict:
        """Every field as plain data (tuples as lists), for JSON summaries."""
        d = asdict(self)
        d["per_agent"] = list(self.per_agent)
        d["assumptions"] = list(self.assumptions)
        d["notes"] = list(self.notes)
        return d

    def __str__(self) -> str:
        if not self.is_private:
            return f"no differential privacy guarantee ({self.theorem})"
        hz = "any number of iterations" if self.horizon is None else f"{self.horizon} iterations"
        dl = f", delta={self.delta:.3g}" if self.delta > 0 else " (pure DP)"
        lines = [f"epsilon={self.epsilon:.6g}{dl} per agent over {hz}", f"  by: {self.theorem}"]
        if len(set(self.per_agent)) > 1:
            lines.append("  per agent: " + ", ".join(f"{e:.4g}" for e in self.per_agent))
        lines += [f"  assumes: {a}" for a in self.assumptions]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)
