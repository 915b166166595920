"""Which records each agent holds: seeded partitioners of a dataset over agents.

Every partitioner is a function ``(records, n_agents, *, seed=0, ...) -> Partition`` where
``records`` is the record count or, for the label-aware ones (and for a label histogram in the
summary), the labels ``(N,)``. A :class:`Partition` holds one index array per agent, so local
sizes may differ (``Partition.sizes``); :meth:`Partition.stacked` gives the ``(n, m)`` array of an
equal split.

=================  ==========================================================================
``even``           the papers' split: a random permutation cut into ``N // n`` equal blocks,
                   the remainder dropped (:func:`split_even`)
``iid``            a random permutation cut into ``n`` blocks of ``N // n`` or ``N // n + 1``:
                   every record used (flwr-datasets' ``IidPartitioner``)
``label``          McMahan et al. (2017): sorted by label (random order within a label), cut into
                   ``n * shards_per_agent`` equal shards, each agent gets ``shards_per_agent`` at
                   random (:func:`split_by_label`)
``shards``         flwr-datasets' ``ShardPartitioner`` with ``num_shards_per_partition``: the
                   same scheme with the records sorted stably by label, shards of
                   ``N // (n * shards_per_agent)`` records, each agent's records shuffled
``dirichlet``      label skew, flwr-datasets' ``DirichletPartitioner``: for every class, its
                   records are cut among the agents by proportions ``p ~ Dir(alpha)``; with
                   ``self_balancing`` an agent already above ``N / n`` records gets none of
                   the later classes; redrawn (at most 10 times) until every agent has
                   ``min_size`` records
``quantity_skew``  size skew, NIID-Bench's (Li et al. 2022) "quantity skew": proportions
                   ``q ~ Dir(beta)`` over agents, redrawn (at most 1,000 times) until every
                   agent has ``min_size`` records; a random permutation cut at
                   ``cumsum(q) * N``; labels stay i.i.d.
``sizes``          given local sizes (flwr-datasets' ``SizePartitioner``): a random
                   permutation cut into blocks of ``sizes[i]`` records
=================  ==========================================================================

Smaller ``alpha`` / ``beta`` means more skew (0.1 is the field's "highly non-i.i.d."; 100 is
close to i.i.d.). Partitions are drawn on the host with NumPy's ``default_rng(seed)``; the same
arguments give the same partition on every machine and rank.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from .errors import ParameterError, UnknownNameError, positive, positive_int, require
from .registry import Registry

#: a partitioner: ``(records, n_agents, *, seed=0, **params) -> Partition``
PARTITIONERS: Registry[Callable[..., Partition]] = Registry("partitioner", "dpnet.partitions")

#: flwr-datasets' DirichletPartitioner gives up after this many redraws of the proportions
MAX_REDRAWS = 10
#: NIID-Bench redraws quantity-skew proportions until they fit; a cap turns "never" into an error
MAX_QUANTITY_DRAWS = 1000


@dataclass(frozen=True)
class Partition:
    """Per-agent record indices (``indices[i]``: agent i's records, int64) with what made them
    (``scheme``, ``params``) and, when labels were given, the classes and each agent's count of
    each (``label_counts``, ``(n_agents, n_classes)``)."""

    indices: tuple[np.ndarray, ...]
    scheme: str
    params: Mapping = field(default_factory=dict)
    classes: np.ndarray | None = None
    label_counts: np.ndarray | None = None

    @classmethod
    def of(cls, indices, scheme: str, params: Mapping, labels=None) -> Partition:
        """A partition from per-agent record indices (any integer sequences, stored as contiguous int64),
        the partitioner's ``scheme`` name and ``params``; given ``labels`` (one per record of the whole
        dataset, indexed by record index), it also holds the sorted ``classes`` and each agent's
        ``label_counts``."""
        parts = tuple(np.ascontiguousarray(p, dtype=np.int64) for p in indices)
        if labels is None:
            return cls(parts, scheme, dict(params))
        classes, codes = np.unique(np.asarray(labels), return_inverse=True)
        owner = np.repeat(np.arange(len(parts)), [p.size for p in parts])
        flat = codes[np.concatenate(parts)] if parts else np.zeros(0, np.int64)
        counts = np.bincount(owner * len(classes) + flat,
                             minlength=len(parts) * len(classes)).reshape(len(parts), -1)
        return cls(parts, scheme, dict(params), classes, counts)

    @property
    def n_agents(self) -> int:
        """Number of agents the records are split over."""
        return len(self.indices)

    @property
    def sizes(self) -> np.ndarray:
        """``(n_agents,)`` local record counts ``m_i``."""
        return np.array([p.size for p in self.indices], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.indices)

    def __getitem__(self, agent: int) -> np.ndarray:
        return self.indices[agent]

    def stacked(self) -> np.ndarray:
        """``(n_agents, m)`` indices of an equal split; an error naming the sizes otherwise."""
        sizes = self.sizes
        require(bool(np.all(sizes == sizes[0])), "partition", f"{self.scheme} with sizes "
                f"{sizes.tolist()}", "equal local sizes for a stacked (n_agents, m) array",
                "pass the Partition itself where unequal local sizes are accepted")
        return np.stack(self.indices)

    def summary(self) -> dict:
        """Sizes (and label histograms): what a report states about the split."""
        sizes = self.sizes
        out = {"scheme": self.scheme, "params": dict(self.params), "n_agents": self.n_agents,
               "records": int(sizes.sum()), "sizes": sizes.tolist(),
               "min_size": int(sizes.min()), "max_size": int(sizes.max())}
        if self.label_counts is not None:
            assert self.classes is not None             # Partition.of sets both or neither
            out["classes"] = self.classes.tolist()
            out["label_counts"] = self.label_counts.tolist()
            out["classes_per_agent"] = (self.label_counts > 0).sum(axis=1).tolist()
        return out


def partition(records, n_agents: int, how: str = "even", seed: int = 0, **params) -> Partition:
    """The partition ``how`` (a name of :data:`PARTITIONERS`) of ``records`` (a count or the
    labels) over ``n_agents``."""
    fn = PARTITIONERS[how]
    known = [k for k in inspect.signature(fn).parameters if k not in ("records", "n_agents")]
    for key in params:
        if key not in known:
            raise UnknownNameError(f"{how!r} partitioner parameter", key, known)
    return fn(records, n_agents, seed=seed, **params)


def _count_and_labels(records, needs_labels: bool, scheme: str) -> tuple[int, np.ndarray | None]:
    if np.ndim(records) == 0:
        require(not needs_labels, "records", records,
                f"the labels (N,) for the {scheme!r} partitioner, which splits by label")
        return positive_int("records", records), None
    labels = np.asarray(records)
    require(labels.ndim == 1 and labels.size >= 1, "records", f"array of shape {labels.shape}",
            "a record count or the labels, shape (N,)")
    return labels.size, labels


def _check_agents(n_agents, N: int) -> int:
    n = positive_int("n_agents", n_agents)
    require(n <= N, "n_agents", n, f"at most {N} agents for {N} records")
    return n


def _check_min_size(min_size, N: int, n: int) -> None:
    require(isinstance(min_size, int) and 0 <= min_size <= N // n, "min_size", min_size,
            f"an integer in [0, N // n_agents = {N // n}]")


def _unmet(name: str, value: float, min_size: int, draws: int) -> ParameterError:
    return ParameterError(name, value, f"a concentration for which every agent gets at least "
                          f"min_size = {min_size} records within {draws} draws",
                          f"raise {name} or lower min_size")


def _cut(order: np.ndarray, sizes) -> list[np.ndarray]:
    return np.split(order, np.cumsum(sizes)[:-1])


def split_even(n_samples: int, n_agents: int, seed: int = 0, shuffle: bool = True) -> np.ndarray:
    """``(n_agents, m)`` sample indices, ``m = n_samples // n_agents``: a uniformly random
    permutation cut into equal blocks (the papers' "randomly and evenly distributed"); the last
    ``n_samples mod n_agents`` samples of the permutation are dropped."""
    n = positive_int("n_agents", n_agents)
    N = positive_int("n_samples", n_samples)
    m = N // n
    require(m >= 1, "n_agents", n, f"at most {N} agents for {N} samples")
    order = np.random.default_rng(seed).permutation(N) if shuffle else np.arange(N)
    return order[: m * n].reshape(n, m)


def split_by_label(labels: np.ndarray, n_agents: int, shards_per_agent: int = 2,
                   seed: int = 0) -> np.ndarray:
    """Non-i.i.d. split: samples sorted by label (random order within a label) are cut into
    ``n_agents * shards_per_agent`` equal shards and each agent gets ``shards_per_agent`` shards
    drawn at random; with 10 classes and 2 shards, most agents see only two labels."""
    y = np.asarray(labels)
    n = positive_int("n_agents", n_agents)
    s = positive_int("shards_per_agent", shards_per_agent)
    n_shards = n * s
    size = y.size // n_shards
    require(size >= 1, "n_agents", n, f"n_agents * shards_per_agent <= {y.size} samples")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(y.size), y))  # by label, random within a label
    shards = order[: n_shards * size].reshape(n_shards, size)
    assign = rng.permutation(n_shards).reshape(n, s)
    return shards[assign].reshape(n, s * size)


def even(records, n_agents: int, *, seed: int = 0, shuffle: bool = True) -> Partition:
    """The papers' split: a random permutation cut into N // n equal blocks."""
    N, labels = _count_and_labels(records, False, "even")
    return Partition.of(split_even(N, n_agents, seed, shuffle), "even", {"shuffle": shuffle},
                        labels)


def by_label(records, n_agents: int, *, seed: int = 0, shards_per_agent: int = 2) -> Partition:
    """Label shards (McMahan et al. 2017): shards_per_agent shards of one label each."""
    _, labels = _count_and_labels(records, True, "label")
    assert labels is not None                           # needs_labels: raised otherwise
    return Partition.of(split_by_label(labels, n_agents, shards_per_agent, seed), "label",
                        {"shards_per_agent": shards_per_agent}, labels)


def iid(records, n_agents: int, *, seed: int = 0) -> Partition:
    """I.i.d., every record used: blocks of N // n or N // n + 1 (flwr IidPartitioner)."""
    N, labels = _count_and_labels(records, False, "iid")
    n = _check_agents(n_agents, N)
    order = np.random.default_rng(seed).permutation(N)
    return Partition.of(np.array_split(order, n), "iid", {}, labels)


def shards(records, n_agents: int, *, seed: int = 0, shards_per_agent: int = 2) -> Partition:
    """Label shards after a stable label sort (flwr-datasets ShardPartitioner)."""
    _, labels = _count_and_labels(records, True, "shards")
    assert labels is not None                           # needs_labels: raised otherwise
    n = _check_agents(n_agents, labels.size)
    s = positive_int("shards_per_agent", shards_per_agent)
    size = labels.size // (n * s)
    require(size >= 1, "shards_per_agent", s,
            f"n_agents * shards_per_agent = {n * s} <= {labels.size} records")
    rng = np.random.default_rng(seed)
    order = np.argsort(labels, kind="stable")
    usable = labels.size // size
    chosen = rng.permutation(usable)[: n * s].reshape(n, s)
    blocks = order[: usable * size].reshape(usable, size)
    parts = [rng.permutation(blocks[row].reshape(-1)) for row in chosen]
    return Partition.of(parts, "shards", {"shards_per_agent": s}, labels)


def dirichlet(records, n_agents: int, *, seed: int = 0, alpha: float = 0.5, min_size: int = 10,
              self_balancing: bool = True) -> Partition:
    """Label skew: each class cut by Dir(alpha) proportions (flwr DirichletPartitioner)."""
    _, labels = _count_and_labels(records, True, "dirichlet")
    assert labels is not None                           # needs_labels: raised otherwise
    N = labels.size
    n = _check_agents(n_agents, N)
    alpha = positive("alpha", alpha)
    _check_min_size(min_size, N, n)
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    by_class = [np.flatnonzero(labels == c) for c in classes]
    for _ in range(MAX_REDRAWS + 1):
        held = np.zeros(n, dtype=np.int64)
        pieces: list[list[np.ndarray]] = [[] for _ in range(n)]
        for members in by_class:
            p = rng.dirichlet(np.full(n, alpha))
            if self_balancing:
                p = np.where(held > N / n, 0.0, p)
                # summed left to right like flwr-datasets' Python sum(), so the cuts fall on the
                # same records; a tiny alpha can leave every open agent exactly 0
                total = np.cumsum(p)[-1]
                p = p / total if total > 0 else (held <= N / n) / np.sum(held <= N / n)
            cuts = (np.cumsum(p) * members.size).astype(np.int64)[:-1]
            for i, piece in enumerate(np.split(members, cuts)):
                pieces[i].append(piece)
            held += np.diff(np.concatenate(([0], cuts, [members.size])))
        if held.min() >= min_size:
            parts = [rng.permutation(np.concatenate(pc)) for pc in pieces]
            return Partition.of(parts, "dirichlet", {"alpha": alpha, "min_size": min_size,
                                                     "self_balancing": self_balancing}, labels)
    raise _unmet("alpha", alpha, min_size, MAX_REDRAWS + 1)


def quantity_skew(records, n_agents: int, *, seed: int = 0, beta: float = 0.5,
                  min_size: int = 10) -> Partition:
    """Size skew: local sizes from Dir(beta) proportions, labels i.i.d. (NIID-Bench)."""
    N, labels = _count_and_labels(records, False, "quantity_skew")
    n = _check_agents(n_agents, N)
    beta = positive("beta", beta)
    _check_min_size(min_size, N, n)
    rng = np.random.default_rng(seed)
    order = rng.permutation(N)
    for _ in range(MAX_QUANTITY_DRAWS):
        q = rng.dirichlet(np.full(n, beta))
        cuts = (np.cumsum(q) * N).astype(np.int64)[:-1]
        sizes = np.diff(np.concatenate(([0], cuts, [N])))
        if sizes.min() >= min_size:
            return Partition.of(_cut(order, sizes), "quantity_skew",
                                {"beta": beta, "min_size": min_size}, labels)
    raise _unmet("beta", beta, min_size, MAX_QUANTITY_DRAWS)


def given_sizes(records, n_agents: int, *, seed: int = 0, sizes=()) -> Partition:
    """Local sizes you give: a random permutation cut into blocks of sizes[i]."""
    N, labels = _count_and_labels(records, False, "sizes")
    n = _check_agents(n_agents, N)
    s = np.asarray(sizes)
    require(s.shape == (n,) and np.issubdtype(s.dtype, np.integer) and bool(np.all(s >= 1)),
            "sizes", list(np.ravel(s)), f"{n} integers >= 1 (one local size per agent)")
    require(int(s.sum()) <= N, "sizes", s.tolist(), f"sizes summing to at most {N} records")
    order = np.random.default_rng(seed).permutation(N)[: int(s.sum())]
    return Partition.of(_cut(order, s), "sizes", {"sizes": s.tolist()}, labels)


for _name, _fn in (("even", even), ("iid", iid), ("label", by_label), ("shards", shards),
                   ("dirichlet", dirichlet), ("quantity_skew", quantity_skew), ("sizes", given_sizes)):
    PARTITIONERS.register(_name, _fn)
