"""Counter-based random streams keyed by (seed, agent, purpose, iteration, coordinate).

A draw is a pure function of its key, never of the order in which draws were made. This is what
lets a run be a function of its seed alone, lets a test loop over agents draw exactly the numbers
the vectorised code drew, and lets a distributed rank that owns only some agents draw their rows
without communicating (the same idea as JAX's threefry keys or Philox counters).

The hash is SplitMix64's finaliser applied in a chain over the key fields: the seed, purpose,
iteration and agent are folded into one 64-bit *row key* per agent (a handful of hashes per call),
and coordinate ``j`` of that row is ``mix(row_key ^ j * GOLDEN)``. The uniform is the top 53 bits,
``((bits >> 11) + 0.5) * 2^-53``; Laplace draws invert the CDF, Gaussian draws are Box-Muller,
``sqrt(-2 log u1) * cos(2 pi u2)``, on coordinates ``j`` and ``width + j``, with dpnet's own
cosine :func:`cos_2pi` (below). The bits are part of the project's contract (committed
reproductions depend on them), so both CPU paths below return the same bits.

**Three evaluations of the same chain.**

* *numba* (the default once a process has drawn 2^24 elements, when numba imports; smaller
  totals use the NumPy chain, see ``_KERNELS_AFTER``): on tiles of up to 65536 draws, which stay in L2, a
  compiled kernel hashes and converts (and for Gaussian draws evaluates ``cos(2 pi u2)``), NumPy's
  own ufunc applies ``log1p``/``log`` in place, and a second kernel applies the sign, ``sqrt``,
  products and an optional per-agent scale (so :meth:`dpnet.noise.Noise.sample` needs no further
  pass), writing into the preallocated output. The NumPy chain is ~20 whole-array operations, each
  with a temporary of the full block; here the integer work stays in (vector) registers and each
  tile is touched while in cache.
* *NumPy* (``DPNET_NO_NUMBA=1``, or numba not importable): the original whole-array chain, with
  :func:`cos_2pi` evaluated by NumPy on pieces of 65536 elements.
* *torch* (``*_tensor`` methods): the chain on int64 tensors on any device (multiplication and
  addition wrap like uint64; logical right shifts are emulated by masking), for noise drawn where
  the iterates live, e.g. on a GPU. Its uniforms and its cosine have the same bits; its
  Laplace/Gaussian values use torch's ``log1p``/``log``/``sqrt`` and so may differ from the CPU
  ones in the last ulp or two (torch 2.13's float64 ``sqrt`` on the CPU is not correctly rounded
  for about 1% of arguments).

**Why ``log1p`` and ``log`` stay NumPy's.** ``np.log1p`` and ``np.log`` dispatch to SIMD
implementations on CPUs that have them (AVX-512 here) which differ from libm's in the last ulp for
about 7% (``log1p``) and 0.4% (``log``) of arguments, and numba calls libm. A kernel that called
``math.log1p`` would change the bits, so the numba path computes the exact part (hash, uniform,
``-2|u - 1/2|``, the sign) and the cosine in the kernel, applies NumPy's own ufunc in place on the
chunk (bit-identical by construction on every machine, since it is the very function the NumPy
path applies to the same argument; these ufuncs were checked to be position-independent, so
chunking does not matter), and finishes (sign, ``sqrt``, products, scale: exact or correctly
rounded IEEE operations) in a second kernel. Note that NumPy's own results therefore depend on the
CPU: with the AVX2/AVX-512 loops disabled, 7% of Laplace and 0.16% of Gaussian draws move by 1-2
ulp (the uniforms never do).

**Why dpnet has its own cosine.** Box-Muller's cosine was ``np.cos(2.0 * np.pi * u)``, and
NumPy's float64 cosine is glibc's scalar ``cos`` (~15 ns for arguments in (0, 2 pi)): the
Gaussian draw's floor, 19 ns where a Laplace draw took 2.7. :func:`cos_2pi` computes
``cos(2 pi u)`` from ``u`` itself: the reduction to an octant is exact on ``u`` (``min(u, 1 - u)``,
then ``1/4 - a`` or ``1/2 - a``), and polynomials in the reduced ``x`` whose coefficients absorb
the ``2 pi`` do the rest, with the leading terms split so that they are exact (details at the
function). It uses ``+``, ``-``, ``*`` and selects only, which the kernel vectorises, so the same
operations in the same order run in the kernel, in NumPy and in torch and give the same bits on
the CPU (and on any device whose float64 ``+``/``-``/``*`` are IEEE); numba compiles without
fastmath, so LLVM contracts no ``a * b + c`` into an FMA (checked in the generated code, and by
the bit-for-bit tests). Accuracy, against 160-bit arithmetic (mpmath) on random and edge
arguments (7 x 10^5 of them): error below 0.72 ulp (the largest next to the octant ends 1/8 and
3/8), never more than 1 ulp from the correctly rounded cosine, and correctly rounded for 98.7% of
uniform arguments; ``cos_2pi(1/4) = cos_2pi(3/4) = 0`` exactly.

The Gaussian values therefore changed relative to dpnet before this cosine, by more than a last
ulp: the old argument ``2.0 * np.pi * u`` carried a rounding error of up to ~4.4e-16, which moves
the cosine by ``|sin|`` times that, several ulp of the cosine, and many ulp where the cosine is
small. Measured on 10^7 draws (``bench_noise.py`` prints the same for 10^6): 43.6% unchanged,
66.6% within 1 ulp, 76.8% within 2 ulp, 7.1% moved by 10 ulp or more (largest absolute change
3.1e-15). The new values are the more accurate ones: on the pinned draws of tests/test_rng.py the
old were up to 207 ulp (mean 13) from the exact ``sqrt(-2 ln u1) cos(2 pi u2)``, the new are
within 1.6 ulp (mean 0.6). Uniform and Laplace draws did not change.

**Measured** (``python benchmarks/bench_noise.py``: one core of the development machine, an
AVX-512 Xeon shared with other users; thread CPU time, best of several calls), ns per draw, NumPy
chain -> default path: Laplace 12.1 -> 2.7 (4.6x) at 10^6 draws and 27.7 -> 3.9 (7.2x) at 10^7;
uniform 7.7 -> 0.7; Gaussian 39 -> 6.8 (5.7x) and 58 -> 7.9 (7.4x) (with ``np.cos``: 18.6 and
19.0). The NumPy fallback's Gaussian draws take 55 ns at 10^6 (its cosine is ~60 array
operations), torch's on the CPU 92 ns (33 with ``torch.cos``). The first use compiles the kernels
(1-2 s); they are cached on disk (``__pycache__`` beside this file, else numba's per-user cache)
and later processes load them at their first use: ~0.25 s to import numba and ~0.5 s per kind of
draw (measured on the busy 2-core development machine), which is why numba is neither imported
with dpnet nor used before a process has drawn ``_KERNELS_AFTER`` elements. Where no cache
directory is writable they are compiled in each process.
"""

from __future__ import annotations

import math
import os
import threading
import zlib
from collections.abc import Sequence

import numpy as np
import torch

from .errors import require

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_TWO_M53 = 2.0 ** -53

# Elements per kernel/ufunc round trip: large enough that the Python call overhead (~1 us per
# call) is negligible, small enough that the chunk and its scratch stay in L2.
_CHUNK = 65536
_NUMPY_CHUNK = 65536            # the same for the NumPy evaluation of cos(2 pi u)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (a bijection of uint64 with full avalanche)."""
    z = z + GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def purpose_key(purpose: str) -> int:
    """Stable 64-bit key of a purpose name (CRC32 of both halves, independent of PYTHONHASHSEED)."""
    raw = purpose.encode()
    return (zlib.crc32(raw) << 32) | zlib.crc32(raw[::-1] + b"#")


# ---- numba kernels -----------------------------------------------------------------------------


# numba is imported, and the kernels below are compiled (or loaded from numba's disk cache), at
# their first use, not at import: importing numba costs ~0.25 s and loading the cached kernels
# ~0.5 s per kind of draw (Laplace, Gaussian, ...), which a small run never earns back (see
# _KERNELS_AFTER). Until then the kernel functions are plain Python functions registered in
# _KERNELS; _kernels_ready() replaces each module global by its compiled dispatcher, callees
# first, so that a kernel compiled later finds dispatchers in the globals it calls.


def _load_numba():
    """The ``numba`` module, or None when disabled (``DPNET_NO_NUMBA=1``) or not installed."""
    if os.environ.get("DPNET_NO_NUMBA", "").strip() not in ("", "0"):
        return None
    try:
        import numba
    except ImportError:
        return None
    return numba


def _numba_module():
    """``numba`` (imported on the first call) or None; ``rng._numba`` reads the same (PEP 562),
    and a test may set ``rng._numba`` to a stand-in."""
    g = globals()
    if "_numba" not in g:
        g["_numba"] = _load_numba()
    return g["_numba"]


def __getattr__(name: str):
    if name == "_numba":
        return _numba_module()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _njit(fn):
    """``numba.njit(cache=True, nogil=True)``; without the disk cache where no cache directory is
    writable (numba refuses ``cache=True`` then: compiling in every process is slower, not
    wrong); the plain function where numba is off (the kernels are then never called)."""
    numba = _numba_module()
    if numba is None:
        return fn
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return numba.njit(cache=False, nogil=True)(fn)


def compile_in(namespace: dict, names) -> bool:
    """Replace ``namespace[name]`` (a module's globals) by its numba dispatcher (:func:`_njit`)
    for each of ``names``, in order (callees first, so that a kernel compiled later finds
    dispatchers in the globals it calls); False, changing nothing, where numba is off or missing.
    This module's kernels and :mod:`dpnet.lattice`'s are compiled so."""
    if _numba_module() is None:
        return False
    for name in names:
        namespace[name] = _njit(namespace[name])
    return True


#: module global name -> plain function, compiled by :func:`_kernels_ready` in this order
_KERNELS: dict[str, object] = {}
_compiled: bool | None = None    # None: not tried yet; then whether the kernels are dispatchers
_compile_lock = threading.Lock()  # draws may come from several threads: compile once


def _kernel(fn, name: str | None = None):
    """Register ``fn`` to be compiled at first use under the module global ``name`` (default its
    own name); until then the global is the plain function."""
    _KERNELS[name or fn.__name__] = fn
    return fn


def _kernels_ready() -> bool:
    """Compile (or load from the disk cache) every kernel once per process; False where numba is
    off or missing."""
    global _compiled
    if _compiled is not None:
        return _compiled
    with _compile_lock:
        if _compiled is None:    # each registered global is still its plain function
            _compiled = compile_in(globals(), _KERNELS)
    return _compiled


_mix_jit = _kernel(splitmix64, "_mix_jit")


# ---- cos(2 pi u) -------------------------------------------------------------------------------
# Box-Muller's cos(2 pi u) for u in [0, 1], evaluated with +, -, * and selects only, so that the
# numba kernel (scalars), the NumPy path (arrays) and torch (tensors) run the very same IEEE
# operations in the same order and agree bit for bit (numba/LLVM does not contract a * b + c into
# an FMA without fastmath; NumPy and torch apply one correctly rounded operation per call).
#
# Reduction, exact in binary: a = min(u, 1 - u) in [0, 1/2] (1 - u is exact for u >= 1/2, by
# Sterbenz's lemma); then cos(2 pi a) is evaluated as cos(2 pi a) for a < 1/8, as
# sin(2 pi (1/4 - a)) for 1/8 <= a <= 3/8 and as -cos(2 pi (1/2 - a)) for a > 3/8, each difference
# exact (Sterbenz again).
# On x in [-1/8, 1/8]: sin(2 pi x) = PH xh + (PH xl + PL x + x^3 S(x^2)) and
# cos(2 pi x) = 1 - KH xh^2 - (KH (x^2 - xh^2) + KL x^2) + x^4 C(x^2), where xh is x rounded to
# 17 bits (Veltkamp's split), 2 pi = PH + PL with PH on 36 bits and 2 pi^2 = KH + KL with KH on
# 19 bits, so that PH xh and KH xh^2 are exact, and 1 - KH xh^2 is carried as a double-double
# (Fast2Sum). What remains is small (at most 0.11 of the result for sin, 0.016 for cos) and
# carries the rounding errors; S and C are minimax-like fits (least squares at Chebyshev nodes in
# high precision, each coefficient refitted after rounding the previous ones) with relative error
# below 2^-63 on [0, 1/8]. Measured against cos(2 pi u) in 160-bit arithmetic (mpmath): error
# below 0.72 ulp, correctly rounded for 98.7% of uniform arguments, never more than 1 ulp from the
# correctly rounded value (tests/test_rng.py).

_SPLIT = 2.0 ** 36 + 1.0                                 # Veltkamp: x * SPLIT keeps 17 bits of x
_PH = float.fromhex("0x1.921fb5444p+2")                  # 2 pi on 36 bits
_PL = float.fromhex("0x1.68c234c4c6629p-37")             # 2 pi - PH
_KH = float.fromhex("0x1.3bd3cp+4")                      # 2 pi^2 on 19 bits
_KL = float.fromhex("0x1.937c8bbcb495cp-17")             # 2 pi^2 - KH
_S0, _S1, _S2, _S3, _S4, _S5, _S6 = (float.fromhex(h) for h in (   # sin: x^3 .. x^15
    "-0x1.4abbce625be53p+5", "0x1.466bc6775ab5cp+6", "-0x1.32d2cce63608cp+6",
    "0x1.50783494be639p+5", "-0x1.e3075fe927c35p+3", "0x1.e8fd0ababc110p+1",
    "-0x1.703fc53342c2dp-1"))
_C0, _C1, _C2, _C3, _C4, _C5 = (float.fromhex(h) for h in (         # cos: x^4 .. x^14
    "0x1.03c1f081b5abbp+6", "-0x1.55d3c7e3ca3d5p+6", "0x1.e1f50684d046cp+5",
    "-0x1.a6d1ed72a260ep+4", "0x1.f9cce767c7842p+2", "-0x1.b290e16dd838ap+0"))


def _sincos_2pi_small(x):
    """(sin 2 pi x, cos 2 pi x) for |x| <= 1/8: the same operations, in the same order, on a
    float (numba), a float64 array (NumPy) or a float64 tensor (torch)."""
    c = x * _SPLIT
    xh = c - (c - x)                    # x rounded to 17 bits
    xl = x - xh                         # exact
    z = x * x
    q = (((((_S6 * z + _S5) * z + _S4) * z + _S3) * z + _S2) * z + _S1) * z + _S0
    s = _PH * xh + ((_PH * xl + _PL * x) + (x * z) * q)
    r = ((((_C5 * z + _C4) * z + _C3) * z + _C2) * z + _C1) * z + _C0
    t = _KH * (xh * xh)                 # exact
    w = 1.0 - t
    e = (1.0 - w) - t                   # 1 - t = w + e exactly
    return s, w + ((e - (_KH * (xl * (x + xh)) + _KL * z)) + (z * z) * r)


_sincos_2pi_small_jit = _kernel(_sincos_2pi_small, "_sincos_2pi_small_jit")


@_kernel
def _cos_2pi_jit(u):
    # written as single-level selects, which LLVM vectorises (nested conditional expressions and
    # the builtin ``min`` compile to branches: 4x slower on random u)
    v = 1.0 - u
    a = u if u < v else v
    low, high = a < 0.125, a > 0.375
    x_high = 0.5 - a if high else 0.25 - a
    s, c = _sincos_2pi_small_jit(a if low else x_high)
    c_high = -c if high else s
    return c if low else c_high


def cos_2pi(u) -> np.ndarray:
    """``cos(2 pi u)`` for float64 ``u`` in [0, 1], within 1 ulp of the correctly rounded value
    (``2 pi u`` is never rounded): the NumPy evaluation of the kernels' cosine, bit for bit. Runs
    on pieces of ``_NUMPY_CHUNK`` elements, so that its dozen temporaries stay small."""
    u = np.asarray(u, dtype=np.float64)
    out = np.empty(u.shape)
    flat, res = u.ravel(), out.reshape(-1)
    for i in range(0, flat.size, _NUMPY_CHUNK):
        res[i:i + _NUMPY_CHUNK] = _cos_2pi_array(flat[i:i + _NUMPY_CHUNK])
    return out


def _cos_2pi_array(u: np.ndarray) -> np.ndarray:
    a = np.minimum(u, 1.0 - u)
    low, high = a < 0.125, a > 0.375
    s, c = _sincos_2pi_small(np.where(low, a, np.where(high, 0.5 - a, 0.25 - a)))
    return np.where(low, c, np.where(high, -c, s))


def _cos_2pi_tensor(u: torch.Tensor) -> torch.Tensor:
    """:func:`cos_2pi` on a float64 tensor, the same operations on any device."""
    a = torch.minimum(u, 1.0 - u)
    low, high = a < 0.125, a > 0.375
    s, c = _sincos_2pi_small(torch.where(low, a, torch.where(high, 0.5 - a, 0.25 - a)))
    return torch.where(low, c, torch.where(high, -c, s))


# Coordinate j's hash input is ``key ^ j * GOLDEN``. The kernels carry ``j * GOLDEN`` as a running
# sum (``+= GOLDEN`` per column, wrapping like the product) instead of multiplying: a 64-bit vector
# multiply is the most expensive instruction of the chain, and this saves one of three per draw.


@_kernel
def _uniform_of(z):
    """The uniform of hash input ``z``: top 53 bits of ``mix(z)``, centred in their cell."""
    return (np.float64(_mix_jit(z) >> _S11) + 0.5) * _TWO_M53


@_kernel
def _bits_kernel(keys, width, out):
    for r in range(keys.size):
        key, col = keys[r], np.uint64(0)
        for j in range(width):
            out[r, j] = _mix_jit(key ^ col)
            col += GOLDEN


@_kernel
def _uniform_kernel(keys, width, out):
    for r in range(keys.size):
        key, col = keys[r], np.uint64(0)
        for j in range(width):
            out[r, j] = _uniform_of(key ^ col)
            col += GOLDEN


@_kernel
def _laplace_args_kernel(keys, c0, arg, sign):
    # tile of rows ``keys`` x columns c0 .. c0 + arg.shape[1]:
    # arg <- -2|u - 1/2| (log1p's argument), sign <- -sign(u - 1/2), as the NumPy path computes
    for r in range(arg.shape[0]):
        key, col = keys[r], np.uint64(c0) * GOLDEN
        for j in range(arg.shape[1]):
            v = _uniform_of(key ^ col) - 0.5
            arg[r, j] = -2.0 * abs(v)
            sign[r, j] = -np.sign(v)
            col += GOLDEN


@_kernel
def _laplace_finish_kernel(scale, sign, out):
    # out holds log1p(arg); out <- (sign * out) * scale[row], the NumPy path's products in order
    for r in range(out.shape[0]):
        s = scale[r]
        for j in range(out.shape[1]):
            out[r, j] = (sign[r, j] * out[r, j]) * s


@_kernel
def _gaussian_args_kernel(keys, c0, width, u1, cos2):
    # u1 <- u(j) (log's argument), cos2 <- cos(2 pi u(width + j))
    for r in range(u1.shape[0]):
        key = keys[r]
        col1, col2 = np.uint64(c0) * GOLDEN, np.uint64(width + c0) * GOLDEN
        for j in range(u1.shape[1]):
            u1[r, j] = _uniform_of(key ^ col1)
            cos2[r, j] = _cos_2pi_jit(_uniform_of(key ^ col2))
            col1 += GOLDEN
            col2 += GOLDEN


@_kernel
def _gaussian_finish_kernel(scale, log_u1, cos_w2, out):
    # sqrt is correctly rounded in IEEE 754, so LLVM's and NumPy's agree bit for bit
    for r in range(out.shape[0]):
        s = scale[r]
        for j in range(out.shape[1]):
            out[r, j] = (math.sqrt(-2.0 * log_u1[r, j]) * cos_w2[r, j]) * s


# Whether the CPU draws may use the kernels (tests switch it off to compare with the NumPy chain).
_USE_KERNELS = True

#: The NumPy chain draws until this process has drawn this many elements (a Gaussian draw counts
#: 4 per element: its NumPy chain is ~4x a Laplace draw's), then numba is loaded and the kernels
#: draw everything after. Loading costs ~0.25 s (import) + ~0.5 s per kind of draw (cache load),
#: and the kernels save ~20 ns per element at 10^5-10^6 elements per draw (bench_noise.py;
#: benchmarks/RESULTS.md), so 2^24 elements (~0.35 s of NumPy chain) is where buying the load
#: starts to pay: a small run (the README's 6 x 10 draws, 600 of them) never loads numba, a long
#: or large one pays at most about twice the better choice. The bits are the same on both paths.
_KERNELS_AFTER = 2 ** 24
_numpy_elements = 0             # elements drawn by the NumPy chain so far in this process


def backend() -> str:
    """``"numba"`` or ``"numpy"``: which CPU path draws large or many draws (small ones use the
    NumPy chain until :data:`_KERNELS_AFTER` elements; the bits are the same either way)."""
    return "numba" if _USE_KERNELS and _numba_module() is not None else "numpy"


def _use_kernels(elements: int) -> bool:
    """Whether this draw of ``elements`` (weighted) elements runs in the kernels: once the process
    has drawn ``_KERNELS_AFTER`` elements, and numba is there."""
    global _numpy_elements
    if not _USE_KERNELS:
        return False
    if _compiled is None:
        if _numpy_elements + elements < _KERNELS_AFTER:
            _numpy_elements += elements
            return False
    return _kernels_ready()


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
        _gaussian_finish_kernel(scale[rows], a, b, tile)
    return out


# ---- torch evaluation --------------------------------------------------------------------------
# torch has no uint64 arithmetic on most devices; int64 addition and multiplication wrap exactly
# like uint64 (two's complement), xor is bitwise, and only the right shift needs care: torch's is
# arithmetic, so the sign bits it drags in are masked off.


def _signed(c: np.uint64) -> int:
    v = int(c)
    return v - (1 << 64) if v >= 1 << 63 else v


_GOLDEN_T, _M1_T, _M2_T = _signed(GOLDEN), _signed(_M1), _signed(_M2)


def _srl(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 read as uint64."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix_tensor_(z: torch.Tensor) -> torch.Tensor:
    """:func:`splitmix64` on an int64 tensor, in place (the blocks are large: no temporaries kept)."""
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

    #: which of :data:`dpnet.secret_rng.RANDOMNESS` these streams are
    kind = "reproducible"

    def __init__(self, seed: int) -> None:
        require(isinstance(seed, int | np.integer) and not isinstance(seed, bool)
                and 0 <= seed < 2 ** 64, "seed", seed, "an integer in [0, 2**64 - 1]")
        self.seed = int(seed)
        with np.errstate(over="ignore"):
            self._seed_key = splitmix64(np.asarray([self.seed], dtype=np.uint64))[0]

    # -- keys --------------------------------------------------------------------------------------
    def _block_key(self, purpose: str, iteration: int) -> np.uint64:
        """uint64 key of one (purpose, iteration) block: agent i's row key is ``mix(key ^ i)``."""
        with np.errstate(over="ignore"):
            h = np.uint64(self._seed_key) ^ np.uint64(purpose_key(purpose))
            h = splitmix64(np.asarray([h], dtype=np.uint64))[0] ^ np.uint64(iteration & (2**64 - 1))
            return splitmix64(np.asarray([h], dtype=np.uint64))[0]

    def _row_keys(self, purpose: str, iteration: int, agents: np.ndarray) -> np.ndarray:
        """uint64 key of each agent's row: coordinate j of the row is ``mix(key ^ j * GOLDEN)``."""
        with np.errstate(over="ignore"):
            return splitmix64(self._block_key(purpose, iteration) ^ agents.astype(np.uint64))

    def _bits(self, purpose: str, iteration: int, agents: np.ndarray, width: int) -> np.ndarray:
        """uint64 array of shape (len(agents), width) (the NumPy path)."""
        a = self._row_keys(purpose, iteration, agents)[:, None]
        with np.errstate(over="ignore"):
            cols = np.arange(width, dtype=np.uint64)[None, :]
            return splitmix64(a ^ (cols * GOLDEN))

    def _fast_keys(self, purpose: str, iteration: int, agents: np.ndarray, width: int,
                   weight: int = 1) -> np.ndarray | None:
        """Row keys for the kernels, or None where the NumPy chain draws: numba is off, this
        process has not drawn enough yet (:data:`_KERNELS_AFTER`), or a subclass redefines
        ``_bits`` (the kernels only know the row-key chain, and must not bypass a subclass's own;
        such a subclass can override ``_row_keys`` instead)."""
        if type(self)._bits is not Streams._bits or not _use_kernels(weight * agents.size * width):
            return None
        return np.ascontiguousarray(self._row_keys(purpose, iteration, agents), dtype=np.uint64)

    # -- CPU draws (NumPy arrays) ------------------------------------------------------------------
    def uniform(self, purpose: str, iteration: int, agents: Sequence[int] | np.ndarray,
                width: int) -> np.ndarray:
        """Uniform(0, 1) draws, never exactly 0 or 1; shape (len(agents), width), float64."""
        agents, width = _check(agents, width)
        keys = self._fast_keys(purpose, iteration, agents, width)
        if keys is not None:
            out = np.empty((keys.size, width))
            _uniform_kernel(keys, width, out)
            return out
        return self._uniform_numpy(purpose, iteration, agents, width)

    def _uniform_numpy(self, purpose: str, iteration: int, agents: np.ndarray,
                       width: int) -> np.ndarray:
        # the NumPy chain's uniforms, for the NumPy Laplace/Gaussian chains too (which have
        # counted their elements towards _KERNELS_AFTER already)
        bits = self._bits(purpose, iteration, agents, width)
        return ((bits >> _S11).astype(np.float64) + 0.5) * _TWO_M53

    def laplace(self, purpose: str, iteration: int, agents, width: int,
                scale: np.ndarray | None = None) -> np.ndarray:
        """Standard Laplace (scale 1) draws by inversion of the CDF; with ``scale`` (one entry per
        agent) row i is multiplied by ``scale[i]``, the same product as ``laplace(...) * scale``."""
        agents, width = _check(agents, width)
        scale = _check_scale(scale, agents.size)
        keys = self._fast_keys(purpose, iteration, agents, width)
        if keys is not None:
            return _laplace_numba(keys, width, _ones_if_none(scale, keys.size))
        u = self._uniform_numpy(purpose, iteration, agents, width) - 0.5
        z = -np.sign(u) * np.log1p(-2.0 * np.abs(u))
        return z if scale is None else z * scale[:, None]

    def gaussian(self, purpose: str, iteration: int, agents, width: int,
                 scale: np.ndarray | None = None) -> np.ndarray:
        """Standard normal draws by Box-Muller on two independent uniform blocks; ``scale`` as in
        :meth:`laplace`."""
        agents, width = _check(agents, width)
        scale = _check_scale(scale, agents.size)
        keys = self._fast_keys(purpose, iteration, agents, width, weight=4)
        if keys is not None:
            return _gaussian_numba(keys, width, _ones_if_none(scale, keys.size))
        u = self._uniform_numpy(purpose, iteration, agents, 2 * width)
        u1, u2 = u[:, :width], u[:, width:]
        z = np.sqrt(-2.0 * np.log(u1)) * cos_2pi(u2)
        return z if scale is None else z * scale[:, None]

    def bernoulli(self, purpose: str, iteration: int, agents, p) -> np.ndarray:
        """Bernoulli(p) indicators, shape (len(agents),); ``p`` scalar or per agent."""
        u = self.uniform(purpose, iteration, agents, 1)[:, 0]
        return u < np.asarray(p, dtype=np.float64)

    def permutation_keys(self, purpose: str, iteration: int, agents, width: int) -> np.ndarray:
        """Random sort keys: ``argsort`` along axis 1 gives one uniform permutation per agent."""
        agents, width = _check(agents, width)
        keys = self._fast_keys(purpose, iteration, agents, width)
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
        # the row keys are mixed on the device too: at 10^7 agents the CPU's pass over them
        # (0.35 s a draw) would cost more than the whole draw there
        block = int(np.asarray(self._block_key(purpose, iteration)).view(np.int64))
        keys = _mix_tensor_(torch.from_numpy(agents).to(device) ^ block)
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
        return (torch.sqrt(-2.0 * torch.log(u1)) * _cos_2pi_tensor(u2)).to(dtype)

    def torch(self, array: np.ndarray, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``array`` (e.g. a draw) as a CPU torch tensor of ``dtype``; it shares the array's memory when
        the array is already contiguous and of that dtype."""
        return torch.from_numpy(np.ascontiguousarray(array)).to(dtype)


def _check(agents, width) -> tuple[np.ndarray, int]:
    """Agents as a 1-d int64 array and width as an int >= 0."""
    agents = np.asarray(agents, dtype=np.int64)
    if agents.ndim != 1:  # the value is listed only on failure: tolist() is O(n) every draw
        require(False, "agents", agents.tolist(), "must be a 1-d sequence of agent ids")
    require(bool(isinstance(width, int | np.integer) and width >= 0), "width", width,
            "must be an integer >= 0")
    return agents, int(width)


def _check_scale(scale, rows: int) -> np.ndarray | None:
    """Per-row multiplier as a contiguous float64 vector, or None."""
    if scale is None:
        return None
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    if scale.shape != (rows,):
        require(False, "scale", scale.tolist(), f"needs one entry per agent drawn ({rows})")
    return scale


def _ones_if_none(scale: np.ndarray | None, rows: int) -> np.ndarray:
    # the kernels always multiply: x * 1.0 is exact, and one kernel beats two variants
    return np.ones(rows) if scale is None else scale
