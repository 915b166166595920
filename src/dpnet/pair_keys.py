"""Pairwise secrets agreed on the wire: X25519 between the two ranks of an edge, HKDF per edge.

DECOR's pairwise noise on edge ``e = (i, j)`` is drawn by both ends and must be the same at both
ends and unknown to everyone else (its threat model: an eavesdropper who knows no pairwise
secret). Across processes with secret randomness, each rank's key is its own, so the ends agree
one per edge here: every pair of ranks that shares an edge runs X25519 (Diffie-Hellman on
Curve25519; RFC 7748) over the process group, each side with a fresh private key from the
operating system's entropy, and derives each of their edges' keys from the shared secret with
HKDF-SHA256 (RFC 5869, ``info`` naming the edge). Only public keys cross the wire; a third rank,
or anyone reading the traffic, cannot compute the shared secret. An edge whose ends are on one rank
gets a key from ``os.urandom`` directly. The keys live in the rank's
:class:`~dpnet.secret_rng.SecretStreams`, never on disk.

This is key agreement against a passive eavesdropper: the public keys are not authenticated, so an
active attacker who can replace them in transit (a man in the middle) is outside the model, as it
is for the process group's own traffic.
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def edge_key(shared: bytes, edge: int, i: int, j: int) -> bytes:
    """Edge ``edge = (i, j)``'s 32-byte key from the two ranks' shared secret."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=f"dpnet pairwise secret: edge {edge} ({i}, {j})".encode()).derive(shared)


def raw(public: X25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def agree(edges: np.ndarray, owner: np.ndarray, rank: int,
          exchange) -> dict[int, bytes]:
    """The keys of the edges incident to ``rank``'s agents: ``edges`` ``(E, 2)`` agent pairs,
    ``owner[a]`` the rank holding agent a, ``exchange(mine)`` an all-gather of each rank's
    ``{peer: public key bytes}`` (a list indexed by rank). Every rank calls it (SPMD)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    ends = owner[edges]                                             # (E, 2) ranks
    mine = np.flatnonzero((ends == rank).any(axis=1))
    peers = sorted({int(r) for r in ends[mine].ravel()} - {rank})
    private = {p: X25519PrivateKey.generate() for p in peers}
    published = exchange({p: raw(k.public_key()) for p, k in private.items()})
    shared = {p: private[p].exchange(X25519PublicKey.from_public_bytes(published[p][rank]))
              for p in peers}
    keys = {}
    for e in mine.tolist():
        i, j = (int(v) for v in edges[e])
        a, b = int(ends[e, 0]), int(ends[e, 1])
        keys[e] = os.urandom(32) if a == b else edge_key(shared[b if a == rank else a], e, i, j)
    return keys
