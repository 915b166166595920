"""Secret randomness: the draws a privacy guarantee assumes hidden, from a cryptographic generator.

:class:`dpnet.rng.Streams` makes every draw a public function of the run's seed. That is what a
simulation, a reproduction or a test needs, and what a deployment must not have: whoever knows the
seed regenerates the noise and subtracts it from the messages (``tests/test_secret_rng.py`` runs
that attack). :class:`SecretStreams` keeps the interface and the keying by (purpose, iteration,
agent, coordinate), so an algorithm cannot tell the two apart, but its bits come from AES-256 in
counter mode under a key drawn from the operating system's entropy (``os.urandom``) when the
streams are made. The key lives in this object only: it is not derived from the seed, not written
to a checkpoint and not sent anywhere, so two runs with the same seed draw different noise and no
other process can regenerate this one's.

Counter layout: the 128-bit counter block of a draw is ``H(purpose, iteration)`` (64 bits,
BLAKE2b) followed by a 64-bit block index; agent ``a``'s row of ``width`` words starts at block
``a * ceil(width / 2)`` (an AES block holds two 64-bit words), so a row is the same whichever
other agents are drawn with it, and distinct (purpose, iteration, agent) never share keystream.

Purposes in :data:`PUBLIC_PURPOSES` stay on the seeded chain: randomness no guarantee relies on
being hidden and that every agent must draw alike (paper 004's common random step ``"eta"``, a
Rand-k compressor's coordinate choice). Everything else is secret: privacy noise, batch
membership, activation, quantisation dithers, DECOR's pairwise parts.

The uniforms are the same 53-bit construction as the seeded streams' (the top 53 bits of a word),
and Laplace and Gaussian draws transform them the same way. A Laplace *release* in secret mode
does not use them: :meth:`dpnet.algorithms.base.Context.perturb` draws it on a lattice from
:meth:`SecretStreams.words` (:mod:`dpnet.lattice`, floating-point safe). A Gaussian release
rounds these draws, with the value, to a lattice whenever its account's sensitivity floor is
known (:meth:`dpnet.algorithms.base.Context.add_gaussian`, ``docs/deploying.md``).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .rng import Streams

#: purposes drawn from the seed even in secret mode (see the module docstring); a compressor's
#: purpose ends with its own suffix (``"x/randk"``)
PUBLIC_PURPOSES = ("eta", "x0")
PUBLIC_SUFFIXES = ("/randk",)

#: the purpose of DECOR's pairwise parts, keyed by edge (see :meth:`SecretStreams.set_pair_keys`)
PAIR_PURPOSE = "pair_noise"

#: the two kinds of randomness a run can use
RANDOMNESS = ("reproducible", "secret")


def _block_id(purpose: str, iteration: int) -> int:
    digest = hashlib.blake2b(f"{purpose}\0{int(iteration)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def is_public(purpose: str) -> bool:
    """Whether draws under ``purpose`` stay on the seeded chain in secret mode: a name in
    :data:`PUBLIC_PURPOSES`, or one ending with a suffix of :data:`PUBLIC_SUFFIXES` (a Rand-k compressor's
    ``"x/randk"``). Every other purpose is secret."""
    return purpose in PUBLIC_PURPOSES or purpose.endswith(PUBLIC_SUFFIXES)


class SecretStreams(Streams):
    """:class:`~dpnet.rng.Streams` whose secret purposes draw from AES-256-CTR under a key from
    ``os.urandom`` (see the module docstring); ``seed`` keys the public purposes only."""

    kind = "secret"

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.__key = os.urandom(32)
        self.__edges = np.zeros(0, dtype=np.int64)      # sorted ids of the agreed edges
        self.__edge_key = np.zeros(0, dtype=np.int64)   # their index into __keys
        self.__keys = [self.__key]                       # 0: this object's own key

    def set_pair_keys(self, keys: dict[int, bytes]) -> None:
        """The agreed key of each pairwise secret shared with another process (purpose
        ``"pair_noise"``, the edge's id as the agent; :mod:`dpnet.pair_keys`): both ends of such
        an edge then draw the same part and no one else can. An edge not listed (both ends in
        this process) draws under this object's own key."""
        edges = np.array(sorted(keys), dtype=np.int64)
        distinct = {id(k): bytes(k) for k in keys.values()}     # one per peer rank
        index = {key_id: i + 1 for i, key_id in enumerate(distinct)}
        self.__edges = edges
        self.__edge_key = np.array([index[id(keys[int(e)])] for e in edges], dtype=np.int64)
        self.__keys = [self.__key, *distinct.values()]

    def words(self):
        """A fresh source of uniform 64-bit words, ``words(m) -> (m,) uint64``: AES-256-CTR under
        this object's key from a random 128-bit starting counter, so two sources never share
        keystream. For samplers that use a random number of words per element
        (:mod:`dpnet.lattice`); nothing there needs to be redrawn, so nothing is keyed."""
        stream = Cipher(algorithms.AES(self.__key), modes.CTR(os.urandom(16))).encryptor()

        def words(m: int) -> np.ndarray:
            return np.frombuffer(stream.update(bytes(8 * int(m))), dtype=np.uint64).copy()

        return words

    def __repr__(self) -> str:                   # never the key
        return f"SecretStreams(seed={self.seed}, key=<os.urandom, kept in memory>)"

    def __getstate__(self):
        raise TypeError("SecretStreams is not picklable: its key must not leave the process")

    def _bits(self, purpose: str, iteration: int, agents: np.ndarray, width: int) -> np.ndarray:
        if is_public(purpose):
            return super()._bits(purpose, iteration, agents, width)
        agents = np.asarray(agents, dtype=np.int64)
        out = np.empty((agents.size, width), dtype=np.uint64)
        if agents.size == 0 or width == 0:
            return out
        high = _block_id(purpose, iteration) << 64
        if purpose != PAIR_PURPOSE or self.__edges.size == 0:
            _fill(out, np.arange(agents.size), agents, self.__key, high)
            return out
        # pairwise parts: each edge under its rank pair's agreed key (0: this process's own),
        # one pass per key (a peer rank), not per edge
        at = np.minimum(np.searchsorted(self.__edges, agents), self.__edges.size - 1)
        which = np.where(self.__edges[at] == agents, self.__edge_key[at], 0)
        for k in np.unique(which):
            rows = np.flatnonzero(which == k)
            _fill(out, rows, agents[rows], self.__keys[k], high)
        return out


def _fill(out: np.ndarray, rows: np.ndarray, agents: np.ndarray, key: bytes, high: int) -> None:
    """``out[rows]`` = the rows of ``agents`` under ``key``: one keystream per run of consecutive
    ids (a rank's block, a range of edges), one run in the common case."""
    per_row = (out.shape[1] + 1) // 2                 # AES blocks per agent row
    breaks = np.flatnonzero(np.diff(agents) != 1) + 1
    for start, stop in zip(np.r_[0, breaks], np.r_[breaks, agents.size], strict=True):
        out[rows[start:stop]] = _keystream(key, high, int(agents[start]), stop - start,
                                           per_row)[:, :out.shape[1]]


def _keystream(key: bytes, high: int, first: int, rows: int, per_row: int) -> np.ndarray:
    """``(rows, 2 per_row)`` uint64 words of AES-256-CTR under ``key`` from the counter block
    ``high | first * per_row``: rows ``first .. first + rows - 1`` of a draw."""
    counter = (high | (first * per_row)).to_bytes(16, "big")
    stream = Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
    raw = stream.update(bytes(rows * per_row * 16))
    return np.frombuffer(raw, dtype=np.uint64).reshape(rows, 2 * per_row)
