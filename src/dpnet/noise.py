"""Privacy noise: a distribution (Laplace, Gaussian) times a scale schedule.

``Laplace(scale, decay=q)`` draws i.i.d. ``Lap(scale * q**k)`` coordinates at iteration ``k``
(the papers' ``s * q^k``); ``Laplace(scale, power=c)`` draws ``Lap(scale / (k+1)**c)``; with
neither the scale is constant. ``scale`` and ``decay``/``power`` may be per agent (a sequence of
length n). Scale 0 is allowed and then the noise is exactly zero. ``Laplace(b)`` has density
``exp(-|x|/b) / (2b)`` and variance ``2 b^2``; ``Gaussian(s)`` has standard deviation ``s``.

Draws come from the run's :class:`dpnet.rng.Streams` under a purpose name, so the draw of agent i
at iteration k is the same whichever process makes it and whichever other agents are drawn.
``Noise.sample(..., device=...)`` draws on the CPU through the compiled path (scale fused into the
kernel) or, for any other device, with torch on that device from the same streams, so noise for
iterates on a GPU never crosses the bus.
"""

from __future__ import annotations

import copy
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .errors import UnknownNameError, require
from .registry import Registry
from .rng import Streams

Scalar = float | int
PerAgent = Scalar | Sequence[Scalar] | np.ndarray


def _as_array(name: str, value: PerAgent) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    require(arr.ndim == 1, name, value, "must be a scalar or a 1-d sequence (one entry per agent)")
    require(bool(np.all(np.isfinite(arr))), name, value, "must be finite")
    return arr


def _per_agent(arr: np.ndarray, n: int, name: str) -> np.ndarray:
    if arr.size == 1:
        return np.full(n, arr[0])
    require(arr.size == n, name, arr.tolist(), f"needs one entry per agent (n={n})")
    return arr


@dataclass(frozen=True)
class Schedule:
    """Scale schedule ``scale_i * g_i(k)`` with per-agent ``scale`` and shape parameter."""

    scale: np.ndarray
    decay: np.ndarray | None = None      # geometric: q**k, 0 < q < 1
    power: np.ndarray | None = None      # polynomial: (k+1)**(-power); power < 0 increases
    custom: Callable[[int], float | np.ndarray] | None = field(default=None, compare=False)

    @staticmethod
    def make(scale: PerAgent, decay: PerAgent | None = None, power: PerAgent | None = None,
             custom: Callable[[int], float | np.ndarray] | None = None) -> Schedule:
        """The schedule of ``scale`` (>= 0) with at most one shape: ``decay`` q (geometric ``q**k``, 0 < q
        < 1), ``power`` c (``(k+1)**(-c)``) or ``custom`` (a function of k giving one factor or one per
        agent); none: constant. Each numeric parameter is a scalar or one finite value per agent. Raises
        :class:`~dpnet.errors.ParameterError` otherwise."""
        s = _as_array("scale", scale)
        require(bool(np.all(s >= 0)), "scale", scale, "scale >= 0 (noise scales cannot be negative)")
        require(sum(x is not None for x in (decay, power, custom)) <= 1, "schedule",
                dict(decay=decay, power=power, custom=custom),
                "give at most one of decay (geometric), power (polynomial) or custom")
        q = None if decay is None else _as_array("decay", decay)
        if q is not None:
            require(bool(np.all((q > 0) & (q < 1))), "decay", decay,
                    "0 < decay < 1 (geometric noise decay q^k)")
        c = None if power is None else _as_array("power", power)
        return Schedule(s, q, c, custom)

    @property
    def is_zero(self) -> bool:
        """Whether every agent's scale is 0, so the noise is exactly zero at every iteration."""
        return bool(np.all(self.scale == 0))

    def at(self, k: int, n: int) -> np.ndarray:
        """Per-agent scale at iteration k, shape (n,)."""
        s = self.shared_at(k, n)
        return np.full(n, s[0]) if s.size == 1 else s

    def shared_at(self, k: int, n: int) -> np.ndarray:
        """:meth:`at` with a value every agent shares kept as one entry (shape (1,) or (n,)): the
        power ``q**k`` taken over 10^7 equal entries cost 0.4 s per draw."""
        self.check(n)
        s = self.scale
        if self.decay is not None:
            return s * self.decay ** k
        if self.power is not None:
            return s / (k + 1.0) ** self.power
        if self.custom is not None:
            g = np.asarray(self.custom(k), dtype=np.float64).reshape(-1)
            require(g.size in (1, n), "schedule", g.tolist(),
                    f"returns one value or one per agent (n={n})")
            return s * g
        return s.copy()

    def check(self, n: int) -> None:
        """Every per-agent parameter has one entry, or one per agent (without expanding it)."""
        for name in ("scale", "decay", "power"):
            arr = getattr(self, name)
            if arr is not None and arr.size != 1:
                require(arr.size == n, name, arr.tolist(), f"needs one entry per agent (n={n})")


class Noise(ABC):
    """Base class: a zero-mean distribution with a per-agent scale schedule."""

    kind = "noise"

    def __init__(self, scale: PerAgent = 0.0, decay: PerAgent | None = None,
                 power: PerAgent | None = None,
                 schedule: Callable[[int], float | np.ndarray] | None = None) -> None:
        self.schedule = Schedule.make(scale, decay, power, schedule)

    # -- public -----------------------------------------------------------------------------
    def scaled(self, factor: float) -> Noise:
        """A copy whose every scale is multiplied by ``factor`` (same schedule shape): what a
        calibration over a common noise factor varies."""
        require(factor >= 0 and np.isfinite(factor), "factor", factor, "0 <= factor < inf")
        out = copy.copy(self)
        out.schedule = dataclasses.replace(self.schedule, scale=self.schedule.scale * factor)
        return out

    @property
    def is_zero(self) -> bool:
        """Whether every agent's scale is 0: the noise is exactly zero and is not drawn."""
        return self.schedule.is_zero

    def scale_at(self, k: int, n: int) -> np.ndarray:
        """Per-agent scale at iteration k, shape (n,): the Laplace scale ``b_k`` or the Gaussian standard
        deviation ``s_k`` of each agent's coordinates."""
        return self.schedule.at(k, n)

    def sample(self, rng: Streams, purpose: str, k: int, agents: np.ndarray | torch.Tensor,
               n: int, dim: int, dtype: torch.dtype = torch.float64,
               device: torch.device | str | None = None) -> torch.Tensor:
        """Noise of the agents ``agents`` (global indices, of n in all) at iteration k: (len, dim).

        On the CPU (``device`` None or a CPU device) the draws come from the compiled CPU path
        with the scale fused in; on any other device they are computed there by torch from the
        same streams (same uniforms; values equal to the CPU ones up to the rounding of
        ``log1p``/``log``/``cos``), so no noise crosses the bus.
        """
        if isinstance(agents, torch.Tensor):
            agents = agents.cpu()           # ids may live with the iterates, e.g. on a GPU
        agents = np.asarray(agents, dtype=np.int64)
        device = torch.device("cpu") if device is None else torch.device(device)
        if self.is_zero:
            return torch.zeros(len(agents), dim, dtype=dtype, device=device)
        if type(self).scale_at is Noise.scale_at:
            scale = self.schedule.shared_at(k, n)
            scale = scale if scale.size == 1 else scale[agents]
        else:                               # a subclass's own scales, one per agent
            scale = self.scale_at(k, n)[agents]
        if device.type == "cpu":
            rows = np.full(len(agents), scale[0]) if scale.size == 1 else scale
            return torch.from_numpy(self._scaled(rng, purpose, k, agents, dim, rows)).to(dtype)
        return self._sample_tensor(rng, purpose, k, agents, dim, scale, device).to(dtype)

    def _scaled(self, rng: Streams, purpose: str, k: int, agents: np.ndarray, dim: int,
                scale: np.ndarray) -> np.ndarray:
        """Float64 draws times the per-agent scale (the same product as ``standard * scale``)."""
        if isinstance(rng, Streams):
            return self._standard(rng, purpose, k, agents, dim, scale=scale)
        # a duck-typed stream may not take ``scale``
        return self._standard(rng, purpose, k, agents, dim) * scale[:, None]

    def _sample_tensor(self, rng: Streams, purpose: str, k: int, agents: np.ndarray, dim: int,
                       scale: np.ndarray, device: torch.device) -> torch.Tensor:
        """Float64 draws times the scale (one shared value, or one per agent), computed by torch
        on ``device``: a shared scale is a number, so nothing of size n crosses the bus."""
        z = self._standard_tensor(rng, purpose, k, agents, dim, device)
        if scale.size == 1:
            return z.mul_(float(scale[0]))
        return z * torch.as_tensor(scale, dtype=torch.float64, device=device)[:, None]

    @abstractmethod
    def variance_at(self, k: int, n: int) -> np.ndarray:
        """Per-coordinate variance of each agent's noise at iteration k."""

    @abstractmethod
    def _standard(self, rng: Streams, purpose: str, k: int, agents: np.ndarray, dim: int,
                  scale: np.ndarray | None = None) -> np.ndarray:
        """Unit-scale draws of shape (len(agents), dim), row i times ``scale[i]`` if given."""

    def _standard_tensor(self, rng: Streams, purpose: str, k: int, agents: np.ndarray, dim: int,
                         device: torch.device) -> torch.Tensor:
        """Unit-scale float64 draws computed by torch on ``device``. This default draws on the
        CPU and copies (correct for any subclass); Laplace and Gaussian compute on the device."""
        return torch.from_numpy(self._standard(rng, purpose, k, agents, dim)).to(device)

    def per_agent_params(self, i: int, n: int) -> dict:
        """Scalar parameters of agent i (used by accountants)."""
        sch = self.schedule
        out = {"scale": float(_per_agent(sch.scale, n, "scale")[i])}
        if sch.decay is not None:
            out["decay"] = float(_per_agent(sch.decay, n, "decay")[i])
        if sch.power is not None:
            out["power"] = float(_per_agent(sch.power, n, "power")[i])
        return out

    def __repr__(self) -> str:
        sch = self.schedule
        parts = [f"scale={_fmt(sch.scale)}"]
        if sch.decay is not None:
            parts.append(f"decay={_fmt(sch.decay)}")
        if sch.power is not None:
            parts.append(f"power={_fmt(sch.power)}")
        if sch.custom is not None:
            parts.append("schedule=<custom>")
        return f"{type(self).__name__}({', '.join(parts)})"


def _fmt(arr: np.ndarray) -> str:
    return repr(float(arr[0])) if arr.size == 1 else repr(arr.tolist())


class _StreamDraws:
    """Unit draws from the stream method named ``kind`` (``rng.laplace`` / ``rng.gaussian`` and
    their ``*_tensor`` twins on a device)."""

    kind: str

    def _standard(self, rng, purpose, k, agents, dim, scale=None):
        draw = getattr(rng, self.kind)
        if scale is None:
            return draw(purpose, k, agents, dim)   # duck-typed streams may not take ``scale``
        return draw(purpose, k, agents, dim, scale=scale)

    def _standard_tensor(self, rng, purpose, k, agents, dim, device):
        return getattr(rng, f"{self.kind}_tensor")(purpose, k, agents, dim, device=device)


class Laplace(_StreamDraws, Noise):
    """i.i.d. ``Lap(b_k)`` coordinates, ``b_k`` the scheduled scale."""

    kind = "laplace"

    def variance_at(self, k: int, n: int) -> np.ndarray:
        return 2.0 * self.scale_at(k, n) ** 2


class Gaussian(_StreamDraws, Noise):
    """i.i.d. ``N(0, s_k^2)`` coordinates, ``s_k`` the scheduled standard deviation."""

    kind = "gaussian"

    def variance_at(self, k: int, n: int) -> np.ndarray:
        return self.scale_at(k, n) ** 2


def none() -> Laplace:
    """No noise (scale 0): the exact noise-free algorithm."""
    return Laplace(0.0)


def from_spec(spec: dict | float | None) -> Noise:
    """Build noise from a config entry: ``{"kind": "laplace", "scale": .., "decay": ..}``."""
    if spec is None:
        return none()
    if isinstance(spec, int | float):
        return Laplace(spec)
    spec = dict(spec)
    kind = spec.pop("kind", "laplace")
    if not isinstance(kind, str) or kind not in KINDS:
        raise UnknownNameError("noise kind", str(kind), KINDS)
    return KINDS[kind](**spec)


#: the noise distributions a configuration names (``kind``)
KINDS: Registry = Registry("noise kind", "dpnet.noise")
KINDS.register("laplace", Laplace)
KINDS.register("gaussian", Gaussian)
