"""What an algorithm releases: small frozen events that accountants interpret.

A private algorithm's :meth:`~dpnet.algorithms.base.Algorithm.mechanism` describes, for one
protected agent and one horizon, every release that depends on its private data: per iteration
which message, its sensitivity (in the norm its noise needs), the noise distribution and scale,
and the subsampling that precedes it. Nothing here knows any paper: generic accountants
(:mod:`dpnet.privacy.accountants`) compose the events by basic composition, Renyi DP or privacy
loss distributions (dp-accounting), exactly as ``dp_accounting.DpEvent`` objects are interpreted by
its accountants.

A release series is vectorised over iterations: ``sensitivity`` and ``scale`` are arrays of one
entry per release (usually one per iteration), so a horizon of 10^4 steps is two arrays, not 10^4
objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnknownNameError, require
from .dp_accounting_bridge import RELATIONS

#: how a release's batch is drawn
RELEASE_SAMPLERS = ("poisson", "without_replacement")


def _array(name: str, value) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64)).reshape(-1)
    require(bool(np.all(arr >= 0)), name, f"min {arr.min() if arr.size else 0:.4g}", ">= 0")
    return arr


@dataclass(frozen=True, eq=False)
class Releases:
    """A series of noisy releases of one message: release t adds ``noise`` noise of scale
    ``scale[t]`` (Laplace b, Gaussian sigma) to a value whose ``norm``-sensitivity under the
    mechanism's relation is ``sensitivity[t]``: how far the value moves between neighbouring
    datasets. Each release uses the protected data with probability ``sampling`` (1 = always),
    drawn by ``sampler``:

    * ``"poisson"``: each record independently. Under ``add_remove`` the sensitivity is one
      record's contribution (dp-accounting's Poisson-subsampled event). Under ``replace_one`` the
      value is taken to be a sum of per-record terms, each of norm at most ``sensitivity / 2``
      (DP-SGD's clipped sum: ``sensitivity = 2C``), so the pair is a mixture against a mixture
      (dp-accounting's ``REPLACE_ONE`` event at noise multiplier ``2 scale / sensitivity``);
    * ``"without_replacement"``: a fixed-size batch, under ``replace_one`` only; ``sensitivity``
      is the shift of the batch's value, and the generic accountants compose the symmetrised
      pair of :mod:`dpnet.privacy.without_replacement`."""

    message: str
    noise: str                      # "laplace" (l1 sensitivity) or "gaussian" (l2 sensitivity)
    sensitivity: np.ndarray
    scale: np.ndarray
    sampling: float = 1.0
    sampler: str = "poisson"

    def __post_init__(self) -> None:
        require(self.noise in ("laplace", "gaussian"), "noise", self.noise,
                "'laplace' or 'gaussian'")
        object.__setattr__(self, "sensitivity", _array("sensitivity", self.sensitivity))
        object.__setattr__(self, "scale", _array("scale", self.scale))
        if self.sensitivity.size == 1 and self.scale.size > 1:
            object.__setattr__(self, "sensitivity",
                               np.full(self.scale.size, float(self.sensitivity[0])))
        require(self.sensitivity.shape == self.scale.shape, "scale", self.scale.shape,
                f"one scale per release ({self.sensitivity.size})")
        require(0 < self.sampling <= 1, "sampling", self.sampling, "0 < sampling <= 1")
        require(self.sampler in RELEASE_SAMPLERS, "sampler", self.sampler,
                f"one of {RELEASE_SAMPLERS}")

    @property
    def norm(self) -> str:
        """The norm the sensitivity is measured in: ``l1`` for Laplace noise, ``l2`` for Gaussian."""
        return "l1" if self.noise == "laplace" else "l2"

    @property
    def multipliers(self) -> np.ndarray:
        """Noise multipliers ``scale / sensitivity`` (inf where nothing is sensitive)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            m = self.scale / self.sensitivity
        return np.where(self.sensitivity == 0, np.inf, m)

    def __len__(self) -> int:
        return int(self.scale.size)


@dataclass(frozen=True)
class Mechanism:
    """Everything one protected agent's data influences, under one neighbouring relation:
    ``relation`` (one of :data:`~dpnet.privacy.dp_accounting_bridge.RELATIONS`, required: the
    accountants interpret subsampled releases by it) and ``adjacency``, what a neighbour is in
    words (one record of agent i replaced, agent i's function replaced, ...)."""

    releases: tuple[Releases, ...]
    adjacency: str
    horizon: int | None
    source: str                             # where the sensitivities come from
    notes: tuple[str, ...] = field(default_factory=tuple)
    relation: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        require(self.relation is not None, "relation", None, "a neighbouring relation named by "
                "the mechanism: 'replace_one' (one record replaced by any other) or "
                "'add_remove' (one record added or removed); none is assumed")
        assert self.relation is not None                # the require above raised otherwise
        if self.relation not in RELATIONS:
            raise UnknownNameError("relation", self.relation, RELATIONS)
        if self.relation == "add_remove":
            wor = [r.message for r in self.releases if r.sampler == "without_replacement"]
            require(not wor, "relation", self.relation, "replace_one for releases on batches "
                    f"drawn without replacement ({wor[:1]}): their pair is accounted under "
                    "replace-one only")

    @property
    def noises(self) -> set[str]:
        """The noise distributions of the releases (``laplace``, ``gaussian``), each once."""
        return {r.noise for r in self.releases}
