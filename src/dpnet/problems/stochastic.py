"""Pieces shared by finite-sum problems: per-agent minibatch indices and per-sample clipping.

Sampling: agent i's minibatch at iteration k is a pure function of (seed, purpose, k, i), drawn
from that agent's own counter-based stream (:class:`dpnet.rng.Streams`), so the same samples are
drawn whichever agents a process holds or evaluates.

Clipping (Abadi et al. 2016 for ``"l2"``; Assumption 2 of Huo et al. for ``"coordinate"``) acts on
each per-sample gradient before averaging:

* ``Clip(G, "l2")``: ``g <- g * min(1, G / ||g||)``, so ``||g|| <= G``;
* ``Clip(G, "coordinate")``: ``g_j <- max(-G/sqrt(d), min(G/sqrt(d), g_j))``, so every coordinate
  is at most ``G/sqrt(d)`` in magnitude (and ``||g|| <= G``). DO-ADP's sensitivity
  ``2 G sqrt(k/d)`` of k selected coordinates (eq. (6) of Huo et al.) needs this form: an l2 clip
  at G allows one coordinate to carry all of G.

One name per kind across the library: a constructor's ``clip`` is an l2 bound and its
``coordinate_clip`` a per-coordinate one (:func:`clip_argument`); a bare number where a
:class:`Clip` is expected is an l2 bound (:func:`as_clip`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import ParameterError, positive, require
from ..rng import Streams

CLIP_KINDS = ("l2", "coordinate")


@dataclass(frozen=True)
class Clip:
    """Per-sample gradient clipping at bound ``G`` (see the module docstring)."""

    bound: float
    kind: str

    def __post_init__(self) -> None:
        positive("clip.bound", self.bound)
        require(self.kind in CLIP_KINDS, "clip.kind", self.kind, f"one of {CLIP_KINDS}")

    def apply(self, g: torch.Tensor) -> torch.Tensor:
        """Clip the last axis of ``g`` (any leading shape: agents, samples)."""
        d = g.shape[-1]
        if self.kind == "coordinate":
            c = self.bound / math.sqrt(d)
            return g.clamp(-c, c)
        return g * self._l2_factor(g)[..., None]

    def _l2_factor(self, g: torch.Tensor) -> torch.Tensor:
        """``min(1, G / ||g||)`` over the last axis."""
        norm = torch.linalg.vector_norm(g, dim=-1)
        return torch.clamp(self.bound / torch.clamp(norm, min=1e-300), max=1.0)

    def weighted_sum(self, g: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``sum_b weights[..., b] clip(g[..., b, :])``: for ``"l2"`` the clip factors fold into
        the weights, so the clipped gradients are never materialised."""
        w = weights.to(g.dtype)
        if self.kind == "coordinate":
            return torch.einsum("...b,...bd->...d", w, self.apply(g))
        return torch.einsum("...b,...bd->...d", w * self._l2_factor(g), g)

    def l2_bound(self, d: int, k: int | None = None) -> float:
        """Bound on the l2 norm of any k coordinates of one clipped per-sample gradient
        (all d when k is None): ``G sqrt(k/d)`` (coordinate) or ``G`` (l2)."""
        k = d if k is None else k
        return self.bound * math.sqrt(k / d) if self.kind == "coordinate" else self.bound


def as_clip(clip: Clip | float | None) -> Clip | None:
    """``None``, a :class:`Clip`, or a number G meaning ``Clip(G, "l2")``."""
    if clip is None or isinstance(clip, Clip):
        return clip
    return Clip(positive("clip", clip), "l2")


def clip_argument(clip: float | None, coordinate_clip: float | None) -> Clip | None:
    """A constructor's clipping from its two names: ``clip`` an l2 bound G, ``coordinate_clip`` a
    per-coordinate bound G (each coordinate at most G/sqrt(d)); at most one of them."""
    for name, value in (("clip", clip), ("coordinate_clip", coordinate_clip)):
        require(value is None or (isinstance(value, int | float) and not isinstance(value, bool)),
                name, value, "a number (clip: the l2 bound; coordinate_clip: the per-coordinate "
                "bound) or None")
    if clip is not None and coordinate_clip is not None:
        raise ParameterError("coordinate_clip", coordinate_clip, f"not given together with "
                             f"clip={clip}: clip is an l2 bound, coordinate_clip a per-coordinate "
                             "one; give one")
    if clip is not None:
        return Clip(positive("clip", clip), "l2")
    if coordinate_clip is not None:
        return Clip(positive("coordinate_clip", coordinate_clip), "coordinate")
    return None


#: how a minibatch is drawn: each record independently, or a fixed number without replacement
SAMPLERS = ("poisson", "fixed")


def local_sizes_of(m, n: int) -> tuple[np.ndarray, bool]:
    """``(n,)`` local sizes from one size or per-agent sizes, and whether they are all equal."""
    sizes = np.broadcast_to(np.asarray(m, dtype=np.int64), (n,))
    return sizes, bool(sizes.size == 0 or np.all(sizes == sizes[0]))


def sample_indices(rng: Streams, k: int, agents: np.ndarray, m, batch_size: int,
                   purpose: str = "sample",
                   device: torch.device | str | None = None) -> torch.Tensor:
    """``(len(agents), batch_size)`` distinct local sample indices per agent, in ``[0, m_i)``
    (``m``: one local size or one per agent): uniform without replacement (one uniform draw
    when ``batch_size == 1``). The streams draw on the host; the indices are then moved to
    ``device`` (where the data they index lives), one small transfer per step, so every device
    picks the same samples. Agents with fewer records than the widest draw the same keys and
    sort their padding last, so an equal split draws what it always drew."""
    agents = np.asarray(agents, dtype=np.int64)
    sizes, equal = local_sizes_of(m, agents.size)
    low = int(sizes.min(initial=batch_size))
    require(1 <= batch_size <= low, "batch_size", batch_size,
            f"1 <= batch_size <= the smallest local size m_i = {low}")
    width = int(sizes.max(initial=1))
    if batch_size == 1:
        u = rng.uniform(purpose, k, agents, 1)
        m_col = width if equal else sizes[:, None]
        idx = np.minimum((u * m_col).astype(np.int64), np.asarray(m_col) - 1)
    else:
        keys = rng.permutation_keys(purpose, k, agents, width)
        if not equal:    # records beyond m_i sort after every record: halved keys < 2^63
            keys = np.where(np.arange(width) < sizes[:, None], keys >> np.uint64(1),
                            np.uint64(1 << 63))
        idx = np.argpartition(keys, batch_size - 1, axis=1)[:, :batch_size]
    return torch.from_numpy(np.ascontiguousarray(idx)).to(device or "cpu")


def poisson_indices(rng: Streams, k: int, agents: np.ndarray, m, rate,
                    purpose: str = "sample", device: torch.device | str | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling: each of agent i's m_i local records is in its batch independently with
    probability ``rate`` (one rate, or one per agent; one uniform per record from the streams).
    Returns ``(idx, included)``: ``(len(agents), B)`` local indices with the agent's included
    records first and ``(len(agents), B)`` booleans marking them, B the largest batch drawn (at
    least 1: the other columns are padding, to be weighted 0)."""
    agents = np.asarray(agents, dtype=np.int64)
    q = np.asarray(rate, dtype=np.float64)
    require(bool(np.all((q > 0) & (q <= 1))), "rate", rate,
            "0 < rate <= 1 (Poisson sampling probability)")
    sizes, equal = local_sizes_of(m, agents.size)
    width = int(sizes.max(initial=1))
    u = rng.uniform(purpose, k, agents, width)
    inside = u < (q if q.ndim == 0 else q[:, None])
    if not equal:
        inside &= np.arange(width) < sizes[:, None]
    width = max(int(inside.sum(axis=1).max(initial=0)), 1)
    # included records sort first (keys in [0, 1)), the rest after (keys in [2, 3))
    idx = np.argsort(np.where(inside, u, u + 2.0), axis=1, kind="stable")[:, :width]
    included = np.take_along_axis(inside, idx, axis=1)
    return (torch.from_numpy(np.ascontiguousarray(idx)).to(device or "cpu"),
            torch.from_numpy(np.ascontiguousarray(included)).to(device or "cpu"))


def stack_parts(parts, *arrays: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Agent i's rows ``array[parts[i]]`` of each array, stacked ``(n, max_i m_i, ...)`` and
    padded with zeros beyond ``m_i``; returns ``(sizes, stacked arrays)``. ``parts``: a
    :class:`dpnet.partitions.Partition`, a sequence of index arrays, or an ``(n, m)`` array."""
    parts = [np.asarray(p, dtype=np.int64).reshape(-1) for p in parts]
    require(len(parts) >= 1, "parts", len(parts), "at least one agent")
    sizes = np.array([p.size for p in parts], dtype=np.int64)
    require(bool(np.all(sizes >= 1)), "parts", f"local sizes {sizes.tolist()}",
            "at least one record per agent")
    width, n = int(sizes.max()), len(parts)
    flat = np.concatenate(parts)
    rows = np.repeat(np.arange(n), sizes)
    cols = np.arange(flat.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    out = []
    for a in arrays:
        a = np.asarray(a)
        require(flat.max() < a.shape[0], "parts", f"index {int(flat.max())}",
                f"indices below the {a.shape[0]} records")
        block = np.zeros((n, width) + a.shape[1:], dtype=a.dtype)
        block[rows, cols] = a[flat]
        out.append(block)
    return sizes, out


def padded_index_rows(parts) -> tuple[np.ndarray, np.ndarray]:
    """``(n, max m_i)`` indices, agent i's row padded with its own first index (padding is never
    weighted), and the sizes ``m_i``."""
    if isinstance(parts, np.ndarray | torch.Tensor) and np.ndim(parts) == 2:
        arr = np.asarray(parts.cpu() if isinstance(parts, torch.Tensor) else parts, np.int64)
        return arr, np.full(arr.shape[0], arr.shape[1], dtype=np.int64)
    rows = [np.asarray(p, dtype=np.int64).reshape(-1) for p in parts]
    require(len(rows) >= 1 and all(r.size >= 1 for r in rows), "parts",
            f"local sizes {[r.size for r in rows]}", "at least one agent, each with a record")
    sizes = np.array([r.size for r in rows], dtype=np.int64)
    width = int(sizes.max())
    out = np.repeat(np.array([r[0] for r in rows])[:, None], width, axis=1)
    out[np.arange(width)[None, :] < sizes[:, None]] = np.concatenate(rows)
    return out, sizes


class LocalRecords:
    """What a finite-sum problem whose agent i holds ``m_i`` records needs, its records stacked
    ``(n, width, ...)`` and zero beyond ``m_i`` (:func:`stack_parts`): the sizes, and the mean
    over each agent's own records. With equal sizes the mean is ``mean(dim=1)`` exactly as
    before unequal sizes existed (committed results do not move); otherwise the records are
    weighted ``1/m_i`` and the padding 0."""

    sizes: np.ndarray
    m: int | None
    _weights: torch.Tensor | None

    if TYPE_CHECKING:                                   # provided by Problem, the other base
        def _rows(self, T: torch.Tensor, agents: np.ndarray | None) -> torch.Tensor: ...
        def _index(self, a) -> torch.Tensor: ...

    def _set_sizes(self, sizes, n: int, width: int) -> None:
        sizes = np.full(n, width, dtype=np.int64) if sizes is None else np.asarray(sizes)
        require(sizes.shape == (n,) and np.issubdtype(sizes.dtype, np.integer)
                and bool(np.all((sizes >= 1) & (sizes <= width))), "sizes",
                np.ravel(sizes).tolist(), f"{n} integers in [1, {width}] (records per agent)")
        self.sizes = sizes.astype(np.int64)
        equal = bool(np.all(self.sizes == width))
        self.m = width if equal else None
        self._weights = None if equal else (
            (torch.arange(width)[None, :] < torch.from_numpy(self.sizes)[:, None]).double()
            / torch.from_numpy(self.sizes).double()[:, None])

    def local_sizes(self) -> np.ndarray:
        """``(n,)`` int64: the records each agent holds, ``m_i`` (agent i's records are the first ``m_i``
        rows of its stacked data)."""
        return self.sizes

    def _clean_padding(self, features: torch.Tensor, labels: torch.Tensor):
        """Padding rows as zero features and label +1: never weighted, but kept finite."""
        if self.m is not None:
            return features, labels
        pad = torch.arange(features.shape[1])[None, :] >= torch.from_numpy(self.sizes)[:, None]
        return features.masked_fill(pad[:, :, None], 0.0), labels.masked_fill(pad, 1.0)

    def _record_weights(self, agents=None) -> float | torch.Tensor:
        """``1/m`` or the ``(n, width)`` weights ``1/m_i`` (0 on padding) of ``agents``."""
        if self._weights is None:
            assert self.m is not None                   # _set_sizes: m is None only with weights
            return 1.0 / self.m
        return self._rows(self._weights, agents)

    def _record_mean(self, values: torch.Tensor, agents=None) -> torch.Tensor:
        """``(n,)`` mean of ``values`` ``(n, width)`` over each agent's own records."""
        if self._weights is None:
            return values.mean(dim=1)
        return (values * self._record_weights(agents)).sum(dim=1)

    def _keep_sizes(self, slots) -> None:
        if self._weights is not None:
            self._weights = self._weights[self._index(slots)]

    def _sizes_text(self):
        return self.m if self.m is not None else self.sizes.tolist()


def clipped_grad_sum(problem, X: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor,
                     clip: Clip, agents: np.ndarray) -> torch.Tensor:
    """``sum_b weights[i, b] clip(grad l(x_i; record idx[i, b]))`` per agent: the weighted sum
    that DP-SGD's Poisson batches need (variable batch sizes padded with weight 0); raises when
    the problem has no per-sample gradients. A problem with its own ``clipped_grad_sum`` (the
    neural one: records of weight 0 are never computed) computes it."""
    _require_per_sample(problem, clip)
    if hasattr(problem, "clipped_grad_sum"):
        return problem.clipped_grad_sum(X, idx, weights, clip, agents)
    return clip.weighted_sum(problem.per_sample_grads_at(X, idx, agents), weights)


def clipped_stochastic_grad(problem, X: torch.Tensor, rng: Streams, k: int, batch_size: int,
                            agents: np.ndarray, purpose: str = "sample",
                            clip: Clip | None = None, sampling: str = "fixed") -> torch.Tensor:
    """The minibatch mean gradient per agent, each per-sample gradient clipped when ``clip`` is
    given. ``sampling``: ``"fixed"`` (``batch_size`` records without replacement:
    ``problem.stochastic_grad``) or ``"poisson"`` (each record independently with probability
    ``batch_size/m``, the clipped sum divided by the public ``batch_size``; needs ``clip``).
    Raises when ``clip`` is given and the problem has no per-sample gradients."""
    require(sampling in SAMPLERS, "sampling", sampling, f"one of {SAMPLERS}")
    if sampling == "poisson":
        require(clip is not None, "clip", clip, "a clipping bound with sampling='poisson'")
        assert clip is not None                         # the require above raised otherwise
        _require_per_sample(problem, clip)
        m = problem.local_sizes()[np.asarray(agents, dtype=np.int64)]
        idx, included = poisson_indices(rng, k, agents, m, batch_size / m, purpose, X.device)
        return clipped_grad_sum(problem, X, idx, included, clip, agents) / batch_size
    if clip is None:
        return problem.stochastic_grad(X, rng, k, batch_size, agents, purpose)
    _require_per_sample(problem, clip)
    return problem.stochastic_grad(X, rng, k, batch_size, agents, purpose, clip=clip)


def _require_per_sample(problem, clip: Clip) -> None:
    """Clipping needs per-sample gradients: a named error where the problem has none."""
    if not getattr(problem, "supports_clip", False):
        raise ParameterError("clip", clip, "a problem with per-sample gradients "
                             "(LogisticRegression, NonconvexLogistic, NeuralProblem); "
                             f"{type(problem).__name__} has none")
