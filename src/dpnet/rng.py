"""Counter-based random streams keyed by (seed, agent, purpose, iteration, coordinate).

A draw is a pure function of its key, never of the order in which draws were made. This is what
lets a run be a function of its seed alone, lets a test loop over agents draw exactly the numbers
the vectorised code drew, and lets a distributed rank that owns only some agents draw their rows
without communicating (the same idea as JAX's threefry keys or Philox counters).

The hash is SplitMix64's finaliser applied in a chain over the key fields; it is evaluated with
NumPy's wrapping uint64 arithmetic on whole ``(agents, coordinates)`` blocks at once.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import torch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_TWO_M53 = 2.0 ** -53


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (a bijection of uint64 with full avalanche)."""
    z = z + _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def purpose_key(purpose: str) -> int:
    """Stable 64-bit key of a purpose name (CRC32 of both halves, independent of PYTHONHASHSEED)."""
    raw = purpose.encode()
    return (zlib.crc32(raw) << 32) | zlib.crc32(raw[::-1] + b"#")


class Streams:
    """Random streams of one run.

    ``Streams(seed)`` hands out uniform, Laplace, Gaussian and Bernoulli draws for any block of
    agents at any iteration; the same ``(seed, agent, purpose, iteration, coordinate)`` always
    gives the same number.
    """

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed={seed!r} violates the condition: seed must be an integer >= 0")
        self.seed = int(seed)
        with np.errstate(over="ignore"):
            self._seed_key = _mix(np.asarray([self.seed], dtype=np.uint64))[0]

    def _bits(self, purpose: str, iteration: int, agents: np.ndarray, width: int) -> np.ndarray:
        """uint64 array of shape (len(agents), width)."""
        with np.errstate(over="ignore"):
            h = np.uint64(self._seed_key) ^ np.uint64(purpose_key(purpose))
            h = _mix(np.asarray([h], dtype=np.uint64))[0] ^ np.uint64(iteration & (2**64 - 1))
            h = _mix(np.asarray([h], dtype=np.uint64))
            a = _mix(h ^ agents.astype(np.uint64)[:, None])
            cols = np.arange(width, dtype=np.uint64)[None, :]
            return _mix(a ^ (cols * _GOLDEN))

    def uniform(self, purpose: str, iteration: int, agents: Sequence[int] | np.ndarray,
                width: int) -> np.ndarray:
        """Uniform(0, 1) draws, never exactly 0 or 1; shape (len(agents), width), float64."""
        agents = np.asarray(agents, dtype=np.int64)
        bits = self._bits(purpose, iteration, agents, width)
        return ((bits >> _S11).astype(np.float64) + 0.5) * _TWO_M53

    def laplace(self, purpose: str, iteration: int, agents, width: int) -> np.ndarray:
        """Standard Laplace (scale 1) draws by inversion of the CDF."""
        u = self.uniform(purpose, iteration, agents, width) - 0.5
        return -np.sign(u) * np.log1p(-2.0 * np.abs(u))

    def gaussian(self, purpose: str, iteration: int, agents, width: int) -> np.ndarray:
        """Standard normal draws by Box-Muller on two independent uniform blocks."""
        u = self.uniform(purpose, iteration, agents, 2 * width)
        u1, u2 = u[:, :width], u[:, width:]
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)

    def bernoulli(self, purpose: str, iteration: int, agents, p) -> np.ndarray:
        """Bernoulli(p) indicators, shape (len(agents),); ``p`` scalar or per agent."""
        u = self.uniform(purpose, iteration, agents, 1)[:, 0]
        return u < np.asarray(p, dtype=np.float64)

    def permutation_keys(self, purpose: str, iteration: int, agents, width: int) -> np.ndarray:
        """Random sort keys: ``argsort`` along axis 1 gives one uniform permutation per agent."""
        agents = np.asarray(agents, dtype=np.int64)
        return self._bits(purpose, iteration, agents, width)

    def torch(self, array: np.ndarray, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(dtype)
