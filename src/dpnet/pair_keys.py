"""Pairwise secrets agreed on the wire: X25519 between the two ranks of an edge, HKDF per edge.

DECOR's pairwise noise on edge ``e = (i, j)`` is drawn by both ends and must be the same at both
ends and unknown to everyone else (its threat model: an eavesdropper who knows no pairwise
secret). Across processes with secret randomness, each rank's key is its own, so the ends agree
one per edge here: every pair of ranks that shares an edge runs X25519 (Diffie-Hellman on
Curve25519; RFC 7748) over the process group, each side with a fresh private key from the
operating system's entropy, and derives the pair's key from the shared secret with HKDF-SHA256
(RFC 5869, ``info`` naming the two ranks). Each of their edges draws its part from that key at its
own counter offset (the edge id), so edges never share keystream. Only public keys cross the wire;
a third rank, or anyone reading the traffic, cannot compute the shared secret. Edges whose ends
are on one rank draw under that rank's own key. The keys live in the rank's
:class:`~dpnet.secret_rng.SecretStreams`, never on disk.

This is key agreement against a passive eavesdropper: the public keys are not authenticated, so an
active attacker who can replace them in transit (a man in the middle) is outside the model, as it
is for the process group's own traffic.
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def pair_key(shared: bytes, a: int, b: int) -> bytes:
    """The 32-byte key of ranks ``a`` and ``b``'s edges from their shared secret."""
    low, high = sorted((a, b))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=f"dpnet pairwise secrets of ranks {low} and {high}".encode()).derive(shared)


def raw(public: X25519PublicKey) -> bytes:
    """The 32 raw bytes of an X25519 public key, as published to the peer ranks (RFC 7748 encoding)."""
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def agree(edges: np.ndarray, owner: np.ndarray, rank: int,
          exchange) -> dict[int, bytes]:
    """The key of each edge incident to ``rank``'s agents across ranks (edges inside the rank
    are absent: they draw under its own key): ``edges`` ``(E, 2)`` agent pairs, ``owner[a]`` the
    rank holding agent a, ``exchange(mine)`` an all-gather of each rank's ``{peer: public key
    bytes}`` (a list indexed by rank). Every rank calls it (SPMD). Edges to one peer share the
    pair's key (one object), and draw at their own counter offsets."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    ends = owner[edges]                                             # (E, 2) ranks
    mine = np.flatnonzero((ends == rank).any(axis=1))
    peers = sorted({int(r) for r in ends[mine].ravel()} - {rank})
    private = {p: X25519PrivateKey.generate() for p in peers}
    published = exchange({p: raw(k.public_key()) for p, k in private.items()})
    key = {p: pair_key(private[p].exchange(X25519PublicKey.from_public_bytes(
        published[p][rank])), rank, p) for p in peers}
    across = mine[ends[mine, 0] != ends[mine, 1]]
    other = np.where(ends[across, 0] == rank, ends[across, 1], ends[across, 0])
    return {int(e): key[int(p)] for e, p in zip(across, other, strict=True)}
