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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ParameterError, positive, require
from ..rng import Streams

CLIP_KINDS = ("l2", "coordinate")


@dataclass(frozen=True)
class Clip:
    """Per-sample gradient clipping at bound ``G`` (see the module docstring)."""

    bound: float
    kind: str = "coordinate"

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
    """``None``, a :class:`Clip`, or a number G meaning ``Clip(G, "coordinate")``."""
    if clip is None or isinstance(clip, Clip):
        return clip
    return Clip(float(clip), "coordinate")


#: how a minibatch is drawn: each record independently, or a fixed number without replacement
SAMPLERS = ("poisson", "fixed")


def sample_indices(rng: Streams, k: int, agents: np.ndarray, m: int, batch_size: int,
                   purpose: str = "sample",
                   device: torch.device | str | None = None) -> torch.Tensor:
    """``(len(agents), batch_size)`` distinct local sample indices in ``[0, m)`` per agent:
    uniform without replacement (one uniform draw when ``batch_size == 1``). The streams draw on
    the host; the indices are then moved to ``device`` (where the data they index lives), one
    small transfer per step, so every device picks the same samples."""
    require(1 <= batch_size <= m, "batch_size", batch_size, f"1 <= batch_size <= m = {m}")
    agents = np.asarray(agents, dtype=np.int64)
    if batch_size == 1:
        u = rng.uniform(purpose, k, agents, 1)
        idx = np.minimum((u * m).astype(np.int64), m - 1)
    else:
        keys = rng.permutation_keys(purpose, k, agents, m)
        idx = np.argpartition(keys, batch_size - 1, axis=1)[:, :batch_size]
    return torch.from_numpy(np.ascontiguousarray(idx)).to(device or "cpu")


def poisson_indices(rng: Streams, k: int, agents: np.ndarray, m: int, rate: float,
                    purpose: str = "sample", device: torch.device | str | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling: each of an agent's m local records is in its batch independently with
    probability ``rate`` (one uniform per record from the streams). Returns ``(idx, included)``:
    ``(len(agents), B)`` local indices with the agent's included records first and
    ``(len(agents), B)`` booleans marking them, B the largest batch drawn (at least 1: the other
    columns are padding, to be weighted 0)."""
    require(0 < rate <= 1, "rate", rate, "0 < rate <= 1 (Poisson sampling probability)")
    agents = np.asarray(agents, dtype=np.int64)
    u = rng.uniform(purpose, k, agents, m)
    inside = u < rate
    width = max(int(inside.sum(axis=1).max(initial=0)), 1)
    # included records sort first (keys in [0, 1)), the rest after (keys in [2, 3))
    idx = np.argsort(np.where(inside, u, u + 2.0), axis=1, kind="stable")[:, :width]
    included = np.take_along_axis(inside, idx, axis=1)
    return (torch.from_numpy(np.ascontiguousarray(idx)).to(device or "cpu"),
            torch.from_numpy(np.ascontiguousarray(included)).to(device or "cpu"))


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
        _require_per_sample(problem, clip)
        idx, included = poisson_indices(rng, k, agents, problem.m, batch_size / problem.m,
                                        purpose, X.device)
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
