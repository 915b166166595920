"""The privacy guarantee a run's parameters buy."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


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
        return PrivacyGuarantee(math.inf, 1.0, (), horizon, reason, ())

    @staticmethod
    def from_per_agent(per_agent, **kw) -> PrivacyGuarantee:
        per = tuple(float(e) for e in per_agent)
        return PrivacyGuarantee(max(per) if per else math.inf, per_agent=per, **kw)

    @property
    def is_private(self) -> bool:
        return math.isfinite(self.epsilon) and self.delta < 1.0

    def as_dict(self) -> dict:
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
