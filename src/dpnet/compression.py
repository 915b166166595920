"""Compressors applied row-wise to stacked ``(n, d)`` messages.

Each compressor ``C`` knows

* ``bits(d, float_bits)``: the bits one compressed d-vector occupies on a wire, with a fixed-length
  code (no entropy coding): ``float_bits`` per real number, ``ceil(log2 d)`` per index;
* ``constants(d)``: ``(r, phi)`` of paper 000's Assumption 5,
  ``E||C(x)/r - x||^2 <= (1 - phi) ||x||^2``, where known (``None`` otherwise).

Randomised compressors draw from the run's streams under the purpose they are given, one draw per
(agent, iteration), so compression randomness is reproducible like the privacy noise.

Devices: ``compress`` returns a tensor on X's device. The streams draw on the host; their draws
(RandK's sort keys, the quantizer's dither) are moved to X's device, bit for bit, so a run on a
GPU compresses exactly as one on the CPU.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import torch

from .errors import ParameterError, UnknownNameError, positive_int, require
from .registry import Registry
from .rng import Streams


def index_bits(d: int) -> int:
    """Bits to name one of d coordinates, ``ceil(log2 d)`` (at least 1; 0 when d = 1, as there is nothing
    to name): what a sparsifier sends beside each kept value."""
    return max(1, math.ceil(math.log2(d))) if d > 1 else 0


class Compressor(ABC):
    """Row-wise compression operator."""

    name = "compressor"
    randomized = False

    @abstractmethod
    def compress(self, X: torch.Tensor, rng: Streams | None = None, purpose: str = "",
                 k: int = 0, agents: np.ndarray | None = None) -> torch.Tensor:
        """Compressed rows of X (the value the receivers decode), same shape and device as X."""

    @abstractmethod
    def bits(self, d: int, float_bits: int = 64) -> int:
        """Bits of one compressed d-vector."""

    def constants(self, d: int) -> tuple[float, float] | None:
        """``(r, phi)`` of Assumption 5 for dimension d, or None where unknown."""
        return None

    def check_dim(self, d: int) -> None:
        """Raise when the compressor cannot act on d-vectors."""

    def __call__(self, X: torch.Tensor, **kw) -> torch.Tensor:
        return self.compress(X, **kw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Identity(Compressor):
    """No compression: d floats."""

    name = "identity"

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        return X

    def bits(self, d, float_bits=64):
        return d * float_bits

    def constants(self, d):
        return (1.0, 1.0)


class TopK(Compressor):
    """Keep the k coordinates of largest magnitude (paper 000's C1); k values and k indices.

    ``||TopK(x) - x||^2 <= (1 - k/d)||x||^2`` deterministically, so ``(r, phi) = (1, k/d)``."""

    name = "topk"

    def __init__(self, k: int) -> None:
        self.k = positive_int("k", k)

    def check_dim(self, d):
        require(1 <= self.k <= d, "k", self.k, f"1 <= k <= d = {d} (TopK keeps k of d coordinates)")

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        self.check_dim(X.shape[1])
        if self.k == X.shape[1]:
            return X
        idx = torch.topk(X.abs(), self.k, dim=1, sorted=False).indices
        out = torch.zeros_like(X)
        return out.scatter_(1, idx, X.gather(1, idx))

    def bits(self, d, float_bits=64):
        self.check_dim(d)
        if self.k == d:  # no index needed when every coordinate is sent
            return d * float_bits
        return self.k * (float_bits + index_bits(d))

    def constants(self, d):
        self.check_dim(d)
        return (1.0, self.k / d)

    def __repr__(self):
        return f"TopK({self.k})"


class RandK(Compressor):
    """Keep k coordinates chosen uniformly at random per agent and iteration.

    ``scaled=False``: ``E||C(x) - x||^2 = (1 - k/d)||x||^2`` so ``(r, phi) = (1, k/d)``.
    ``scaled=True`` multiplies by d/k (unbiased), ``(r, phi) = (d/k, k/d)``.
    Indices are charged unless ``shared_seed=True`` (receivers regenerate them from the seed)."""

    name = "randk"
    randomized = True

    def __init__(self, k: int, scaled: bool = False, shared_seed: bool = False) -> None:
        self.k = positive_int("k", k)
        self.scaled, self.shared_seed = bool(scaled), bool(shared_seed)

    def check_dim(self, d):
        require(1 <= self.k <= d, "k", self.k, f"1 <= k <= d = {d} (RandK keeps k of d coordinates)")

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        n, d = X.shape
        self.check_dim(d)
        require(rng is not None, "rng", rng, "RandK needs the run's random streams")
        agents = np.arange(n) if agents is None else np.asarray(agents)
        keys = rng.permutation_keys(purpose + "/randk", k, agents, d)
        idx = torch.from_numpy(np.argsort(keys, axis=1)[:, : self.k].astype(np.int64)).to(X.device)
        out = torch.zeros_like(X).scatter_(1, idx, X.gather(1, idx))
        return out * (d / self.k) if self.scaled else out

    def bits(self, d, float_bits=64):
        self.check_dim(d)
        return self.k * (float_bits + (0 if self.shared_seed else index_bits(d)))

    def constants(self, d):
        self.check_dim(d)
        return (d / self.k, self.k / d) if self.scaled else (1.0, self.k / d)

    def __repr__(self):
        return f"RandK({self.k}, scaled={self.scaled})"


class BiasedQuantizer(Compressor):
    """Paper 000's C2 (Koloskova et al.'s biased b-bit quantizer with dithering):

    ``C(x) = (||x|| / xi) sign(x) 2^{-(b-1)} floor(2^{b-1}|x|/||x|| + u)``, ``u ~ U[0,1]^d``,
    ``xi = 1 + min(d / 2^{2(b-1)}, sqrt(d) / 2^{b-1})``, and ``C(0) = 0``.

    Levels lie in ``{0, ..., 2^{b-1}}`` and carry a sign, ``2^b + 1`` symbols per coordinate, so
    the wire carries ``ceil(log2(2^b + 1)) = b + 1`` bits per coordinate plus the norm (one float).
    ``(r, phi) = (1, 1/xi)`` (Koloskova, Stich & Jaggi 2019, Lemma on ``qsgd_s / tau``).
    A fixed ``dither`` array can be given for deterministic tests."""

    name = "quantizer"
    randomized = True

    def __init__(self, bits: int = 2, dither: torch.Tensor | None = None) -> None:
        self.b = positive_int("bits", bits)
        self.dither = dither

    def xi(self, d: int) -> float:
        """The scaling ``xi = 1 + min(d / 2^{2(b-1)}, sqrt(d) / 2^{b-1})`` of C for dimension d."""
        s = 2 ** (self.b - 1)
        return 1.0 + min(d / s**2, math.sqrt(d) / s)

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        n, d = X.shape
        if self.dither is not None:
            u = torch.as_tensor(self.dither, dtype=X.dtype, device=X.device).expand(n, d)
        else:
            require(rng is not None, "rng", rng, "the quantizer's dither needs the run's streams")
            agents = np.arange(n) if agents is None else np.asarray(agents)
            u = torch.from_numpy(rng.uniform(purpose + "/dither", k, agents, d)).to(X.device, X.dtype)
        s = 2.0 ** (self.b - 1)
        norm = torch.linalg.vector_norm(X, dim=1, keepdim=True)
        safe = torch.where(norm > 0, norm, torch.ones_like(norm))
        levels = torch.floor(s * X.abs() / safe + u)
        out = (norm / self.xi(d)) * torch.sign(X) * levels / s
        return torch.where(norm > 0, out, torch.zeros_like(out))

    def bits(self, d, float_bits=64):
        return float_bits + d * math.ceil(math.log2(2**self.b + 1))

    def constants(self, d):
        return (1.0, 1.0 / self.xi(d))

    def __repr__(self):
        return f"BiasedQuantizer(bits={self.b})"


class NormSign(Compressor):
    """Paper 000's C3: ``C(x) = (||x||_inf / 2) sign(x)``: one float and d sign bits.

    A zero coordinate is sent as +: one bit cannot carry three symbols, and a coordinate of a
    noisy real vector is exactly 0 with probability zero (the all-zero vector maps to 0 anyway).
    Assumption 5 holds with ``r = d/2, phi = 1/d``: with ``t = 1/(2r) = 1/d``,
    ``||C(x)/r - x||^2 = ||x||^2 - 2t||x||_inf||x||_1 + d t^2 ||x||_inf^2 <= (1 - 1/d)||x||^2``.
    For one-hot x the condition ``2t - d t^2 > 0`` forces ``t < 2/d``, i.e. ``r > d/4``: no
    choice of r lets ``alpha_x >= 4/d`` satisfy ``alpha < 1/r`` (0.4 for d = 10; paper 000's
    Table I uses 0.5 with C3, outside Assumption 5)."""

    name = "normsign"

    def compress(self, X, rng=None, purpose="", k=0, agents=None):
        amax = X.abs().amax(dim=1, keepdim=True)
        sign = torch.where(X >= 0, torch.ones_like(X), -torch.ones_like(X))
        return 0.5 * amax * sign

    def bits(self, d, float_bits=64):
        return float_bits + d

    def constants(self, d):
        return (d / 2.0, 1.0 / d)


#: every compressor by the name a configuration uses
REGISTRY: Registry = Registry("compressor", "dpnet.compression")
for _name, _cls in (("identity", Identity), ("topk", TopK), ("randk", RandK),
                    ("quantizer", BiasedQuantizer), ("normsign", NormSign)):
    REGISTRY.register(_name, _cls)


def from_spec(spec: Compressor | dict | str | None) -> Compressor:
    """``"topk"`` / ``{"name": "topk", "k": 2}`` -> compressor."""
    if spec is None:
        return Identity()
    if isinstance(spec, Compressor):
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    spec = dict(spec)
    name = spec.pop("name", "identity")
    if not isinstance(name, str) or name not in REGISTRY:
        raise UnknownNameError("compressor", str(name), REGISTRY)
    try:
        return REGISTRY[name](**spec)
    except TypeError as e:
        raise ParameterError(f"compressor.{name}", spec, f"valid arguments ({e})") from None
