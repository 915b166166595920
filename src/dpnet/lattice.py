"""Floating-point-safe releases on a power-of-two lattice (secret mode): Laplace noise as an
exact discrete Laplace, Gaussian noise rounded with raised noise (:func:`perturb_gaussian`).

The floating-point draw ``x + b * sign * log(u)`` leaks: the set of floats it can return depends
on ``x``, so its low bits tell ``x`` apart from a neighbour (Mironov 2012). The construction here is
the one of Google's secure noise and OpenDP: put the release on a lattice ``g Z`` where every
operation is exact, and draw the noise exactly on it.

* **Lattice.** ``g = 2^(floor(log2 b) - LATTICE_BITS)`` for a release of scale ``b``: a power of
  two that depends on the public scale only, with ``b / g`` in ``[2^40, 2^41)``.
* **Value.** ``round_g(x) = rint(x / g) g`` (exact: a division by a power of two, an integer
  rounding, a product by a power of two; a float whose spacing is already at least ``g`` is
  kept). Per coordinate ``|round_g(x) - round_g(x')| <= |x - x'| + g``.
* **Noise.** ``g Z``, ``Z`` the discrete Laplace of parameter ``lambda = b / g``
  (``P(Z = z)`` proportional to ``exp(-|z| / lambda)``), drawn *exactly* by Canonne, Kamath and
  Steinke (2020), Algorithms 1 and 2, with integer arithmetic only, from uniform 64-bit words of
  the run's streams (AES under a secret key in secret mode): ``lambda = t / s`` with ``s = 2^12``
  and ``t < 2^53`` integers, Bernoulli(``exp(-gamma)``) for rational ``gamma`` by comparisons of
  uniform integers (Lemire's unbiased bounded integers). ``|Z| < 2^53`` (a failure has
  probability below ``e^-4000``), so ``g Z`` is exact. The samplers are scalar kernels, the
  paper's pseudo-code line by line, compiled by numba (about 85 ns and 9.6 words per draw; plain
  Python, about 4 us, where numba is off).
* **Release.** ``round_g(x) + g Z`` is a point of the lattice; the float sum is that point
  correctly rounded (IEEE addition), a function of it alone: post-processing.

**Accounting effect.** The release is, on the lattice, exactly the Laplace mechanism: the
likelihood ratio of two values at output ``o`` is ``exp((|o - r'|_1 - |o - r|_1) / b)``, so a
release of ``d`` coordinates whose value has l1-sensitivity ``Delta`` costs at most
``(Delta + g d) / b = Delta / b + d g / b`` of pure DP, ``d g / b <= d 2^-40``. A pure-DP theorem
that bounds the sum of ``Delta_t / b_t`` over a run's releases therefore holds for the lattice run
with ``sum_t d g_t / b_t`` added; the runner counts that sum over every lattice release of every
agent (:func:`perturb` returns it) and adds it to the printed epsilon (``Result.privacy`` says so).
It is counted over all agents' releases, not only those that depend on the protected agent's
data: an over-count, never an under-count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from . import rng

#: the lattice lies this many bits below the noise scale (Google's secure Laplace uses 2^40)
LATTICE_BITS = 40
_S_BITS = 52 - LATTICE_BITS          # lambda = t / 2^_S_BITS with t an integer below 2^53
_MAX_K = 2000                        # Algorithm 1's counter; t * K must stay below 2^64
_WORDS_EACH = 10                     # words a discrete Laplace reads on average: about 7.5

Words = Callable[[int], np.ndarray]  # words(m): m fresh uniform uint64 words


def lattice(scale: np.ndarray) -> np.ndarray:
    """``g = 2^(floor(log2 b) - LATTICE_BITS)`` for each positive scale ``b``."""
    _, e = np.frexp(np.asarray(scale, dtype=np.float64))          # b = m 2^e, m in [1/2, 1)
    return np.ldexp(1.0, e - 1 - LATTICE_BITS)


def round_to(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``rint(x / g) g``, exactly; a float whose spacing is at least ``g`` is already on it."""
    coarse = np.abs(x) >= g * 2.0 ** 52
    with np.errstate(over="ignore", invalid="ignore"):
        on = np.rint(x / g) * g
    return np.where(coarse, x, on)


# ---- the exact samplers: scalar kernels over a buffer of words ---------------------------------
# Each reads words[pos], words[pos + 1], ... and returns (result, next pos), or pos -1 where the
# buffer ran out. The driver then hands the unfinished element its own words again, followed by
# fresh ones, so every element sees one unbroken stream and the buffer's end biases nothing. The
# kernels are compiled by numba at first use (plain Python, slowly, where numba is off).
_ONE, _TWO, _ALL = np.uint64(1), np.uint64(2), np.uint64(0xFFFFFFFFFFFFFFFF)
_SIGN, _S = np.uint64(63), np.uint64(_S_BITS)
_LIMIT = np.uint64(_MAX_K)


def below(words: np.ndarray, pos: int, n):
    """A uniform integer in ``[0, n)`` (``1 <= n < 2^64``, uint64) from ``words[pos:]``,
    unbiased: a word is kept if it is at least ``2^64 mod n`` (Lemire 2019), else the next one is
    read; ``(value, next pos)``."""
    floor = (_ALL - n + _ONE) % n                                    # 2^64 mod n
    while pos < words.size:
        w = words[pos]
        pos += 1
        if w >= floor:
            return w % n, pos
    return np.uint64(0), -1


def bernoulli_exp(words: np.ndarray, pos: int, num, den):
    """Bernoulli(``exp(-num / den)``) for integers ``0 <= num <= den`` (uint64): Canonne, Kamath
    & Steinke (2020), Algorithm 1: ``K = 1``; while Bernoulli(``gamma / K``): ``K += 1``; 1 iff K
    odd; ``(bit, next pos)``."""
    k = _ONE
    while True:
        if k > _LIMIT:                                               # probability below 1/2000!
            raise OverflowError("Bernoulli(exp(-gamma)) ran past its counter")
        u, pos = below(words, pos, den * k)
        if pos < 0:
            return False, -1
        if u >= num:
            return k % _TWO == _ONE, pos
        k += _ONE


def _laplace_one(words: np.ndarray, pos: int, t):
    """One discrete Laplace of parameter ``t / 2^12``: Canonne, Kamath & Steinke (2020),
    Algorithm 2 with ``s = 2^12``; ``(z, next pos)``."""
    while True:
        u, pos = below(words, pos, t)                                # U ~ Unif{0..t-1}
        if pos < 0:
            return 0, -1
        keep, pos = bernoulli_exp(words, pos, u, t)                  # D ~ Bern(exp(-U/t))
        if pos < 0:
            return 0, -1
        if not keep:
            continue
        v = np.uint64(0)                                             # V ~ Geom(1 - e^-1)
        while True:
            more, pos = bernoulli_exp(words, pos, _ONE, _ONE)
            if pos < 0:
                return 0, -1
            if not more:
                break
            v += _ONE
        if pos >= words.size:
            return 0, -1
        minus = (words[pos] >> _SIGN) == _ONE                        # B ~ Bern(1/2)
        pos += 1
        y = (u + t * v) >> _S                                        # Y = floor(X / s)
        if minus and y == 0:                                         # -0 is redrawn
            continue
        return (-np.int64(y) if minus else np.int64(y)), pos


def _laplace_fill(t: np.ndarray, words: np.ndarray, out: np.ndarray, start: int):
    """``out[i]`` for ``i = start, ...`` while the words last: ``(first unfinished i, words
    used by the finished ones)``."""
    pos, i = 0, start
    while i < t.size:
        z, nxt = _laplace_one(words, pos, t[i])
        if nxt < 0:
            return i, pos
        out[i] = z
        pos, i = nxt, i + 1
    return i, pos


_KERNELS = ("below", "bernoulli_exp", "_laplace_one", "_laplace_fill")    # callees first
_compiled = False
_compile_lock = threading.Lock()


def kernels() -> SimpleNamespace:
    """The scalar kernels (:func:`below`, :func:`bernoulli_exp`, the Laplace fill), compiled at
    the first call (:func:`dpnet.rng.compile_in`; plain Python where numba is off)."""
    global _compiled
    with _compile_lock:
        if not _compiled:
            rng.compile_in(globals(), _KERNELS)
            _compiled = True
    return SimpleNamespace(below=below, bernoulli_exp=bernoulli_exp, fill=_laplace_fill)


def discrete_laplace(words: Words, t: np.ndarray) -> np.ndarray:
    """Discrete Laplace of parameter ``lambda = t / 2^12`` per element (``t`` integers below
    2^53): Canonne, Kamath & Steinke (2020), Algorithm 2 with ``s = 2^12``. int64."""
    t = np.ascontiguousarray(t, dtype=np.uint64).reshape(-1)
    out = np.zeros(t.size, dtype=np.int64)
    fill = kernels().fill
    buf, i = words(_WORDS_EACH * t.size + 64), 0
    while True:
        i, used = fill(t, buf, out, i)
        if i == t.size:
            return out
        # the unfinished element reads its own words again, then fresh ones
        buf = np.concatenate([buf[used:], words(_WORDS_EACH * (t.size - i) + 64)])


def perturb_gaussian(x: np.ndarray, noise: np.ndarray, scale: np.ndarray,
                     floor: np.ndarray | float) -> tuple[np.ndarray, float]:
    """``round_g(x) + g K`` for each row of ``x`` (float64, ``(rows, d)``): ``K = rint((1 +
    kappa) noise / g)``, ``noise`` the rows' Gaussian draws (``(rows, d)``, per-row standard
    deviation ``scale``), ``g = lattice(scale)`` and ``kappa = g sqrt(d) / floor`` (``floor``: per
    row, or one for all; ``inf``: no raise); returns the release and the largest ``kappa``.

    The release is ``g rint((round_g(x) + (1 + kappa) noise) / g)``: the rounding of a Gaussian
    mechanism applied to ``round_g(x)``, so its output set is the lattice whatever ``x`` (no
    floating-point support that depends on ``x``). Divided by ``1 + kappa`` (a bijection) it is
    ``round_g(x) / (1 + kappa) + noise``: the noise the account assumes, on a value whose
    sensitivity is at most ``(Delta + g sqrt(d)) / (1 + kappa) <= Delta`` whenever the
    account's sensitivity ``Delta`` is at least ``floor`` (or ``Delta = 0``: rounding keeps a
    value that does not depend on the data so). The raised noise pays for the rounding and the
    account of ``noise`` holds unchanged, for one release or for rows correlated across agents
    (DECOR: only the protected agent's row moves). ``noise`` is the floating-point Box-Muller
    draw the account models as Gaussian, as before."""
    rows, d = x.shape
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    g = lattice(scale)
    with np.errstate(divide="ignore"):
        kappa = g * np.sqrt(d) / np.broadcast_to(np.asarray(floor, dtype=np.float64), g.shape)
    k = np.rint(noise * ((1.0 + kappa) / g)[:, None])                 # |K| < 2^53: exact
    return round_to(x, g[:, None]) + k * g[:, None], float(kappa.max(initial=0.0))


def perturb(x: np.ndarray, scale: np.ndarray, words: Words) -> tuple[np.ndarray, float]:
    """``round_g(x) + g Z`` for each row of ``x`` (float64, ``(rows, d)``) with row scale
    ``scale`` (``(rows,)``, > 0), and the pure-DP slack ``d sum_rows g / b`` it adds (module
    docstring)."""
    rows, d = x.shape
    b = np.asarray(scale, dtype=np.float64).reshape(-1)
    g = lattice(b)
    lam = b / g                                                      # exact, in [2^40, 2^41)
    t = np.repeat(np.ldexp(lam, _S_BITS).astype(np.uint64), d)
    z = discrete_laplace(words, t).reshape(rows, d)
    out = round_to(x, g[:, None]) + z.astype(np.float64) * g[:, None]
    return out, float(d * np.sum(g / b))
