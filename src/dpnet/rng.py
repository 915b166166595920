"""Counter-based random streams keyed by (seed, agent, purpose, iteration, coordinate).

A draw is a pure function of its key, never of the order in which draws were made. This is what
lets a run be a function of its seed alone, lets a test loop over agents draw exactly the numbers
the vectorised code drew, and lets a distributed rank that owns only some agents draw their rows
without communicating (the same idea as JAX's threefry keys or Philox counters).

The hash is SplitMix64's finaliser applied in a chain over the key fields: the seed, purpose,
iteration and agent are folded into one 64-bit *row key* per agent (a handful of hashes per call),
and coordinate ``j`` of that row is ``mix(row_key ^ j * GOLDEN)``. The uniform is the top 53 bits,
``((bits >> 11) + 0.5) * 2^-53``; Laplace draws invert the CDF, Gaussian draws are Box-Muller on
coordinates ``j`` and ``width + j``. The bits are part of the project's contract (committed
reproductions depend on them), so both CPU paths below return the same bits.

**Three evaluations of the same chain.**

* *numba* (the default when numba imports): on tiles of up to 65536 draws, which stay in L2, a
  compiled kernel hashes and converts, NumPy's own ufunc applies the transcendental function in
  place, and a second kernel applies the sign, ``sqrt``, products and an optional per-agent scale
  (so :meth:`dpnet.noise.Noise.sample` needs no further pass), writing into the preallocated
  output. The NumPy chain is ~20 whole-array operations, each with a temporary of the full block;
  here the integer work stays in (vector) registers and each tile is touched while in cache.
* *NumPy* (``DPNET_NO_NUMBA=1``, or numba not importable): the original whole-array chain.
* *torch* (``*_tensor`` methods): the chain on int64 tensors on any device (multiplication and
  addition wrap like uint64; logical right shifts are emulated by masking), for noise drawn where
  the iterates live, e.g. on a GPU. Its uniforms have the same bits; its Laplace/Gaussian values
  use torch's ``log1p``/``log``/``cos`` and so may differ from the CPU ones in the last ulp.

**Why the transcendental functions stay NumPy's.** ``np.log1p`` and ``np.log`` dispatch to SIMD
implementations on CPUs that have them (AVX-512 here) which differ from libm's in the last ulp for
about 7% (``log1p``) and 0.4% (``log``) of arguments, and numba calls libm. A kernel that called
``math.log1p`` would change the bits, so the numba path computes the exact part (hash, uniform,
``-2|u - 1/2|``, the sign, ``2 pi u``) in the kernel, applies NumPy's own ufunc in place on the
chunk (bit-identical by construction on every machine, since it is the very function the NumPy
path applies to the same argument; these ufuncs were checked to be position-independent, so
chunking does not matter), and finishes (sign, ``sqrt``, products, scale: exact or correctly
rounded IEEE operations) in a second kernel. Note that NumPy's own results therefore depend on the
CPU: with the AVX2/AVX-512 loops disabled, 7% of Laplace and 0.2% of Gaussian draws move by 1-2 ulp
(the uniforms never do).

**Measured** (``python benchmarks/bench_noise.py``: one core of the development machine, an
AVX-512 Xeon shared with other users; thread CPU time, best of several calls), ns per draw, NumPy
chain -> default path: Laplace 12.1 -> 2.7 (4.6x) at 10^6 draws and 27.7 -> 3.9 (7.2x) at 10^7;
uniform 7.7 -> 0.7; Gaussian 38 -> 19 (2.0x) and 61 -> 20 (3.0x). The Gaussian's floor is
``np.cos``: NumPy's float64 cosine is glibc's scalar ``cos`` (~15 ns for arguments in (0, 2 pi)),
and a faster cosine would change the bits. The first call compiles the kernels (1-2 s); they are
cached on disk (``__pycache__`` beside this file, else numba's per-user cache) and later processes
load them in ~0.3 s. Where no cache directory is writable they are compiled in each process.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Sequence

import numpy as np
import torch

from .errors import require

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_TWO_M53 = 2.0 ** -53
_TWO_PI = 2.0 * np.pi          # the NumPy path evaluates ``2.0 * np.pi * u`` as ``(2 pi) * u``

# Elements per kernel/ufunc round trip: large enough that the Python call overhead (~1 us per
# call) is negligible, small enough that the chunk and its scratch stay in L2.
_CHUNK = 65536


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


# ---- numba kernels -----------------------------------------------------------------------------


def _load_numba():
    """The ``numba`` module, or None when disabled (``DPNET_NO_NUMBA=1``) or not installed."""
    if os.environ.get("DPNET_NO_NUMBA", "").strip() not in ("", "0"):
        return None
    try:
        import numba
    except ImportError:
        return None
    return numba


_numba = _load_numba()


def _njit(fn):
    """``numba.njit(cache=True, nogil=True)``; without the disk cache where no cache directory is
    writable (numba refuses ``cache=True`` then: compiling in every process is slower, not
    wrong); the plain function where numba is off (the kernels are then never called)."""
    if _numba is None:
        return fn
    try:
        return _numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return _numba.njit(cache=False, nogil=True)(fn)


_mix_jit = _njit(_mix)


# Coordinate j's hash input is ``key ^ j * GOLDEN``. The kernels carry ``j * GOLDEN`` as a running
# sum (``+= GOLDEN`` per column, wrapping like the product) instead of multiplying: a 64-bit vector
# multiply is the most expensive instruction of the chain, and this saves one of three per draw.


@_njit
def _uniform_of(z):
    """The uniform of hash input ``z``: top 53 bits of ``mix(z)``, centred in their cell."""
    return (np.float64(_mix_jit(z) >> _S11) + 0.5) * _TWO_M53


@_njit
def _bits_kernel(keys, width, out):
    for r in range(keys.size):
        key, col = keys[r], np.uint64(0)
        for j in range(width):
            out[r, j] = _mix_jit(key ^ col)
            col += _GOLDEN


@_njit
def _uniform_kernel(keys, width, out):
    for r in range(keys.size):
        key, col = keys[r], np.uint64(0)
        for j in range(width):
            out[r, j] = _uniform_of(key ^ col)
            col += _GOLDEN


@_njit
def _laplace_args_kernel(keys, c0, arg, sign):
    # tile of rows ``keys`` x columns c0 .. c0 + arg.shape[1]:
    # arg <- -2|u - 1/2| (log1p's argument), sign <- -sign(u - 1/2), as the NumPy path computes
    for r in range(arg.shape[0]):
        key, col = keys[r], np.uint64(c0) * _GOLDEN
        for j in range(arg.shape[1]):
            v = _uniform_of(key ^ col) - 0.5
            arg[r, j] = -2.0 * abs(v)
            sign[r, j] = -np.sign(v)
            col += _GOLDEN


@_njit
def _laplace_finish_kernel(scale, sign, out):
    # out holds log1p(arg); out <- (sign * out) * scale[row], the NumPy path's products in order
    for r in range(out.shape[0]):
        s = scale[r]
        for j in range(out.shape[1]):
            out[r, j] = (sign[r, j] * out[r, j]) * s


@_njit
def _gaussian_args_kernel(keys, c0, width, u1, w2):
    # u1 <- u(j) (log's argument), w2 <- 2 pi u(width + j) (cos's argument)
    for r in range(u1.shape[0]):
        key = keys[r]
        col1, col2 = np.uint64(c0) * _GOLDEN, np.uint64(width + c0) * _GOLDEN
        for j in range(u1.shape[1]):
            u1[r, j] = _uniform_of(key ^ col1)
            w2[r, j] = _TWO_PI * _uniform_of(key ^ col2)
            col1 += _GOLDEN
            col2 += _GOLDEN


@_njit
def _gaussian_finish_kernel(scale, log_u1, cos_w2, out):
    # sqrt is correctly rounded in IEEE 754, so LLVM's and NumPy's agree bit for bit
    for r in range(out.shape[0]):
        s = scale[r]
        for j in range(out.shape[1]):
            out[r, j] = (math.sqrt(-2.0 * log_u1[r, j]) * cos_w2[r, j]) * s


# Whether the CPU draws use the kernels (tests switch it off to compare with the NumPy chain).
_USE_KERNELS = _numba is not None


def backend() -> str:
    """``"numba"`` or ``"numpy"``: which CPU path draws (the bits are the same either way)."""
    return "numba" if _USE_KERNELS else "numpy"


def _tiles(rows: int, width: int):
    """(row slice, column slice) tiles of at most ``_CHUNK`` elements covering a non-empty
    (rows, width) block: whole rows when they fit, else pieces of one row. The kernels loop over
    a tile's rows and columns with plain ranges, which LLVM vectorises (a flat index would need
    numba's negative-index wraparound and does not)."""
    nc = min(width, _CHUNK)
    nr = max(1, _CHUNK // nc)
    for r0 in range(0, rows, nr):
        for c0 in range(0, width, nc):
            yield slice(r0, min(r0 + nr, rows)), slice(c0, min(c0 + nc, width))


def _scratch(buf: np.ndarray, like: np.ndarray) -> np.ndarray:
    return buf[:like.size].reshape(like.shape)


def _laplace_numba(keys: np.ndarray, width: int, scale: np.ndarray) -> np.ndarray:
    out = np.empty((keys.size, width))
    if out.size == 0:
        return out
    sign_buf = np.empty(min(_CHUNK, out.size))
    for rows, cols in _tiles(keys.size, width):
        tile = out[rows, cols]
        sign = _scratch(sign_buf, tile)
        _laplace_args_kernel(keys[rows], cols.start, tile, sign)
        np.log1p(tile, out=tile)
        _laplace_finish_kernel(scale[rows], sign, tile)
    return out


def _gaussian_numba(keys: np.ndarray, width: int, scale: np.ndarray) -> np.ndarray:
    out = np.empty((keys.size, width))
    if out.size == 0:
        return out
    a_buf, b_buf = np.empty(min(_CHUNK, out.size)), np.empty(min(_CHUNK, out.size))
    for rows, cols in _tiles(keys.size, width):
        tile = out[rows, cols]
        a, b = _scratch(a_buf, tile), _scratch(b_buf, tile)
        _gaussian_args_kernel(keys[rows], cols.start, width, a, b)
        np.log(a, out=a)
        np.cos(b, out=b)
        _gaussian_finish_kernel(scale[rows], a, b, tile)
    return out


# ---- torch evaluation --------------------------------------------------------------------------
# torch has no uint64 arithmetic on most devices; int64 addition and multiplication wrap exactly
# like uint64 (two's complement), xor is bitwise, and only the right shift needs care: torch's is
# arithmetic, so the sign bits it drags in are masked off.


def _signed(c: np.uint64) -> int:
    c = int(c)
    return c - (1 << 64) if c >= 1 << 63 else c


_GOLDEN_T, _M1_T, _M2_T = _signed(_GOLDEN), _signed(_M1), _signed(_M2)


def _srl(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 read as uint64."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix_tensor_(z: torch.Tensor) -> torch.Tensor:
    """:func:`_mix` on an int64 tensor, in place (the blocks are large: no temporaries kept)."""
    z.add_(_GOLDEN_T)
    z.bitwise_xor_(_srl(z, 30)).mul_(_M1_T)
    z.bitwise_xor_(_srl(z, 27)).mul_(_M2_T)
    return z.bitwise_xor_(_srl(z, 31))


def _uniform_from_bits_tensor(bits: torch.Tensor) -> torch.Tensor:
    # bits >> 11 < 2^53 converts exactly; + 0.5 and * 2^-53 are the NumPy path's two roundings
    return (_srl(bits, 11).to(torch.float64) + 0.5) * _TWO_M53


class Streams:
    """Random streams of one run.

    ``Streams(seed)`` hands out uniform, Laplace, Gaussian and Bernoulli draws for any block of
    agents at any iteration; the same ``(seed, agent, purpose, iteration, coordinate)`` always
    gives the same number. The NumPy-returning methods run on the CPU (compiled kernels when
    numba is available); the ``*_tensor`` methods evaluate the same streams with torch on any
    device.
    """

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed={seed!r} violates the condition: seed must be an integer >= 0")
        self.seed = int(seed)
        with np.errstate(over="ignore"):
            self._seed_key = _mix(np.asarray([self.seed], dtype=np.uint64))[0]

    # -- keys --------------------------------------------------------------------------------------
    def _row_keys(self, purpose: str, iteration: int, agents: np.ndarray) -> np.ndarray:
        """uint64 key of each agent's row: coordinate j of the row is ``mix(key ^ j * GOLDEN)``."""
        with np.errstate(over="ignore"):
            h = np.uint64(self._seed_key) ^ np.uint64(purpose_key(purpose))
            h = _mix(np.asarray([h], dtype=np.uint64))[0] ^ np.uint64(iteration & (2**64 - 1))
            h = _mix(np.asarray([h], dtype=np.uint64))
            return _mix(h ^ agents.astype(np.uint64))

    def _bits(self, purpose: str, iteration: int, agents: np.ndarray, width: int) -> np.ndarray:
        """uint64 array of shape (len(agents), width) (the NumPy path)."""
        a = self._row_keys(purpose, iteration, agents)[:, None]
        with np.errstate(over="ignore"):
            cols = np.arange(width, dtype=np.uint64)[None, :]
            return _mix(a ^ (cols * _GOLDEN))

    def _fast_keys(self, purpose: str, iteration: int, agents: np.ndarray) -> np.ndarray | None:
        """Row keys for the kernels, or None where the kernels cannot be used: numba is off, or a
        subclass redefines ``_bits`` (the kernels only know the row-key chain, and must not
        bypass a subclass's own; such a subclass can override ``_row_keys`` instead)."""
        if not _USE_KERNELS or type(self)._bits is not Streams._bits:
            return None
        return np.ascontiguousarray(self._row_keys(purpose, iteration, agents), dtype=np.uint64)

    # -- CPU draws (NumPy arrays) ------------------------------------------------------------------
    def uniform(self, purpose: str, iteration: int, agents: Sequence[int] | np.ndarray,
                width: int) -> np.ndarray:
        """Uniform(0, 1) draws, never exactly 0 or 1; shape (len(agents), width), float64."""
        agents, width = _check(agents, width)
        keys = self._fast_keys(purpose, iteration, agents)
        if keys is not None:
            out = np.empty((keys.size, width))
            _uniform_kernel(keys, width, out)
            return out
        bits = self._bits(purpose, iteration, agents, width)
        return ((bits >> _S11).astype(np.float64) + 0.5) * _TWO_M53

    def laplace(self, purpose: str, iteration: int, agents, width: int,
                scale: np.ndarray | None = None) -> np.ndarray:
        """Standard Laplace (scale 1) draws by inversion of the CDF; with ``scale`` (one entry per
        agent) row i is multiplied by ``scale[i]``, the same product as ``laplace(...) * scale``."""
        agents, width = _check(agents, width)
        scale = _check_scale(scale, agents.size)
        keys = self._fast_keys(purpose, iteration, agents)
        if keys is not None:
            return _laplace_numba(keys, width, _ones_if_none(scale, keys.size))
        u = self.uniform(purpose, iteration, agents, width) - 0.5
        z = -np.sign(u) * np.log1p(-2.0 * np.abs(u))
        return z if scale is None else z * scale[:, None]

    def gaussian(self, purpose: str, iteration: int, agents, width: int,
                 scale: np.ndarray | None = None) -> np.ndarray:
        """Standard normal draws by Box-Muller on two independent uniform blocks; ``scale`` as in
        :meth:`laplace`."""
        agents, width = _check(agents, width)
        scale = _check_scale(scale, agents.size)
        keys = self._fast_keys(purpose, iteration, agents)
        if keys is not None:
            return _gaussian_numba(keys, width, _ones_if_none(scale, keys.size))
        u = self.uniform(purpose, iteration, agents, 2 * width)
        u1, u2 = u[:, :width], u[:, width:]
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(_TWO_PI * u2)
        return z if scale is None else z * scale[:, None]

    def bernoulli(self, purpose: str, iteration: int, agents, p) -> np.ndarray:
        """Bernoulli(p) indicators, shape (len(agents),); ``p`` scalar or per agent."""
        u = self.uniform(purpose, iteration, agents, 1)[:, 0]
        return u < np.asarray(p, dtype=np.float64)

    def permutation_keys(self, purpose: str, iteration: int, agents, width: int) -> np.ndarray:
        """Random sort keys: ``argsort`` along axis 1 gives one uniform permutation per agent."""
        agents, width = _check(agents, width)
        keys = self._fast_keys(purpose, iteration, agents)
        if keys is not None:
            out = np.empty((keys.size, width), dtype=np.uint64)
            _bits_kernel(keys, width, out)
            return out
        return self._bits(purpose, iteration, agents, width)

    # -- device draws (torch tensors) --------------------------------------------------------------
    def bits_tensor(self, purpose: str, iteration: int, agents, width: int,
                    device: torch.device | str | None = None) -> torch.Tensor:
        """:meth:`permutation_keys` as an int64 tensor on ``device`` (the uint64 bits
        reinterpreted as two's complement), computed there: only the row keys travel."""
        agents, width = _check(agents, width)
        device = torch.device("cpu") if device is None else torch.device(device)
        if type(self)._bits is not Streams._bits:
            # a subclass's own chain: evaluate it on the CPU and move the bits
            bits = self._bits(purpose, iteration, agents, width)
            return torch.from_numpy(np.ascontiguousarray(bits).view(np.int64)).to(device)
        keys = self._row_keys(purpose, iteration, agents).view(np.int64)
        keys = torch.from_numpy(np.ascontiguousarray(keys)).to(device)
        cols = torch.arange(width, dtype=torch.int64, device=device) * _GOLDEN_T
        return _mix_tensor_(keys[:, None] ^ cols[None, :])

    def uniform_tensor(self, purpose: str, iteration: int, agents, width: int,
                       device: torch.device | str | None = None,
                       dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """:meth:`uniform` evaluated with torch on ``device`` (default CPU): bit-identical in
        float64 on every device (which must support int64 and float64); cast to ``dtype`` last."""
        bits = self.bits_tensor(purpose, iteration, agents, width, device)
        return _uniform_from_bits_tensor(bits).to(dtype)

    def laplace_tensor(self, purpose: str, iteration: int, agents, width: int,
                       device: torch.device | str | None = None,
                       dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """:meth:`laplace` with torch on ``device``: the same uniforms, torch's ``log1p`` (equal
        to NumPy's up to the last ulp), computed in float64 and cast to ``dtype`` last."""
        u = self.uniform_tensor(purpose, iteration, agents, width, device) - 0.5
        return (-torch.sign(u) * torch.log1p(-2.0 * u.abs())).to(dtype)

    def gaussian_tensor(self, purpose: str, iteration: int, agents, width: int,
                        device: torch.device | str | None = None,
                        dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """:meth:`gaussian` with torch on ``device`` (same uniforms; ``log``/``cos`` equal to
        NumPy's up to rounding), computed in float64 and cast to ``dtype`` last."""
        agents, width = _check(agents, width)
        u = self.uniform_tensor(purpose, iteration, agents, 2 * width, device)
        u1, u2 = u[:, :width], u[:, width:]
        return (torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(_TWO_PI * u2)).to(dtype)

    def torch(self, array: np.ndarray, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(dtype)


def _check(agents, width) -> tuple[np.ndarray, int]:
    """Agents as a 1-d int64 array and width as an int >= 0."""
    agents = np.asarray(agents, dtype=np.int64)
    require(agents.ndim == 1, "agents", agents.tolist(), "must be a 1-d sequence of agent ids")
    require(isinstance(width, int | np.integer) and width >= 0, "width", width,
            "must be an integer >= 0")
    return agents, int(width)


def _check_scale(scale, rows: int) -> np.ndarray | None:
    """Per-row multiplier as a contiguous float64 vector, or None."""
    if scale is None:
        return None
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    require(scale.shape == (rows,), "scale", scale.tolist(),
            f"needs one entry per agent drawn ({rows})")
    return scale


def _ones_if_none(scale: np.ndarray | None, rows: int) -> np.ndarray:
    # the kernels always multiply: x * 1.0 is exact, and one kernel beats two variants
    return np.ones(rows) if scale is None else scale
