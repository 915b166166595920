"""Partitioners: each against a literal per-agent reference of the scheme it follows (the same
generator calls in the same order, so the partitions are equal), plus what the summary states."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet import data, partitions
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.partitions import PARTITIONERS, partition

LABELS = np.repeat(np.arange(10), 600)[np.random.default_rng(7).permutation(6000)]


def _disjoint_cover(p, N, exact=True):
    flat = np.concatenate(p.indices)
    assert len(np.unique(flat)) == flat.size          # no record held twice
    assert flat.min() >= 0 and flat.max() < N
    if exact:
        assert flat.size == N


def test_registry_names_and_unknown_name():
    assert set(PARTITIONERS) == {"even", "iid", "label", "shards", "dirichlet", "quantity_skew",
                                 "sizes"}
    with pytest.raises(UnknownNameError, match="quantity_skew"):
        partition(LABELS, 10, how="dirchlet")
    assert data.partition is partitions.partition     # one function, re-exported
    with pytest.raises(UnknownNameError, match="alpha"):    # names the partitioner's own ones
        partition(LABELS, 10, how="dirichlet", alhpa=0.1)


def test_iid_uses_every_record_in_near_equal_blocks():
    p = partitions.iid(1003, 10, seed=3)
    assert p.sizes.tolist() == [101, 101, 101] + [100] * 7
    _disjoint_cover(p, 1003)
    assert all(np.array_equal(a, b) for a, b in zip(p, partitions.iid(1003, 10, seed=3)))
    assert not np.array_equal(p[0], partitions.iid(1003, 10, seed=4)[0])


def test_even_matches_split_even_and_stacks():
    p = partition(1003, 10, how="even", seed=3)
    assert np.array_equal(p.stacked(), data.split_even(1003, 10, seed=3))
    with pytest.raises(ParameterError, match="equal local sizes"):
        partitions.iid(1003, 10).stacked()


def _flwr_dirichlet(labels, n, alpha, seed, min_size, balancing=True):
    """flwr-datasets' DirichletPartitioner._determine_node_id_to_indices, per agent and class."""
    rng = np.random.default_rng(seed)
    avg = labels.size / n
    for _ in range(11):
        nodes = {i: [] for i in range(n)}
        for k in np.unique(labels):
            members = np.nonzero(labels == k)[0]
            prop = dict(enumerate(rng.dirichlet(np.full(n, alpha))))
            if balancing:
                for i in list(prop):
                    if len(nodes[i]) > avg:
                        prop[i] = 0
                total = sum(prop.values())
                prop = {i: v / total for i, v in prop.items()}
            cuts = (np.cumsum(list(prop.values())) * len(members)).astype(int)[:-1]
            for i, piece in enumerate(np.split(members, cuts)):
                nodes[i].extend(piece.tolist())
        if min(len(v) for v in nodes.values()) >= min_size:
            break
    out = []
    for i in range(n):
        arr = np.array(nodes[i])
        rng.shuffle(arr)
        out.append(arr)
    return out


@pytest.mark.parametrize("alpha,balancing", [(0.1, True), (0.5, True), (0.3, False)])
def test_dirichlet_follows_flwr_datasets(alpha, balancing):
    p = partitions.dirichlet(LABELS, 10, seed=5, alpha=alpha, min_size=10,
                             self_balancing=balancing)
    ref = _flwr_dirichlet(LABELS, 10, alpha, 5, 10, balancing)
    assert all(np.array_equal(a, b) for a, b in zip(p, ref))
    _disjoint_cover(p, LABELS.size)
    assert p.sizes.min() >= 10


def test_dirichlet_skew_grows_as_alpha_falls():
    def top_share(alpha):
        c = partitions.dirichlet(LABELS, 10, seed=1, alpha=alpha).label_counts
        return float(np.mean(c.max(axis=1) / c.sum(axis=1)))
    assert top_share(0.1) > 0.5          # most of an agent's records from one class
    assert top_share(1000.0) < 0.15      # close to the i.i.d. 0.1


def test_label_counts_equal_a_per_agent_count():
    p = partitions.dirichlet(LABELS, 10, seed=2, alpha=0.2)
    ref = np.stack([np.bincount(LABELS[idx], minlength=10) for idx in p])
    assert np.array_equal(p.label_counts, ref)
    s = p.summary()
    assert s["sizes"] == p.sizes.tolist() and s["records"] == 6000
    assert s["classes_per_agent"] == (ref > 0).sum(1).tolist()
    assert "label_counts" not in partitions.iid(100, 4).summary()   # no labels, no histogram


def test_dirichlet_that_cannot_meet_min_size_is_a_named_error():
    with pytest.raises(ParameterError, match="alpha"):
        partitions.dirichlet(LABELS[:200], 10, alpha=0.01, min_size=20)
    with pytest.raises(ParameterError, match="labels"):
        partitions.dirichlet(6000, 10)


def _flwr_shards(labels, n, s, seed):
    """flwr-datasets' ShardPartitioner with num_shards_per_partition = s, shard_size unset."""
    rng = np.random.default_rng(seed)
    order = np.argsort(labels, kind="stable")
    size = int(labels.size / (n * s))
    usable = labels.size // size
    chosen = rng.permutation(usable)[: n * s]
    out = []
    for node_shards in np.split(chosen, np.cumsum(np.full(n, s)))[:-1]:
        idx = []
        for sh in node_shards:
            idx.extend(order[sh * size: (sh + 1) * size].tolist())
        out.append(np.array(idx))
    for arr in out:
        rng.shuffle(arr)
    return out


def test_shards_follow_flwr_datasets():
    p = partitions.shards(LABELS, 10, seed=3, shards_per_agent=2)
    ref = _flwr_shards(LABELS, 10, 2, 3)
    assert all(np.array_equal(a, b) for a, b in zip(p, ref))
    assert p.sizes.tolist() == [600] * 10
    # 600 records per class and shards of 300: a shard never straddles two classes
    assert max(p.summary()["classes_per_agent"]) <= 2


def _niid_bench_quantity(N, n, beta, seed, min_size):
    """NIID-Bench's (Li et al. 2022) quantity-skew partition, literally."""
    rng = np.random.default_rng(seed)
    idxs = rng.permutation(N)
    while True:
        q = rng.dirichlet(np.repeat(beta, n))
        cuts = (np.cumsum(q) * N).astype(int)[:-1]
        parts = np.split(idxs, cuts)
        if min(len(x) for x in parts) >= min_size:
            return parts


def test_quantity_skew_follows_niid_bench_and_keeps_labels_iid():
    p = partitions.quantity_skew(LABELS, 10, seed=4, beta=0.5)
    ref = _niid_bench_quantity(6000, 10, 0.5, 4, 10)
    assert all(np.array_equal(a, b) for a, b in zip(p, ref))
    _disjoint_cover(p, 6000)
    assert p.sizes.max() > 2 * p.sizes.min()
    shares = p.label_counts / p.sizes[:, None]
    big = p.sizes >= 300
    assert np.abs(shares[big] - 0.1).max() < 0.05      # labels still i.i.d. per agent


def test_quantity_skew_that_cannot_meet_min_size_is_a_named_error():
    with pytest.raises(ParameterError, match="beta"):
        partitions.quantity_skew(1000, 50, beta=0.05, min_size=20)


def test_given_sizes():
    p = partition(LABELS, 3, how="sizes", seed=0, sizes=[10, 200, 35])
    assert p.sizes.tolist() == [10, 200, 35]
    _disjoint_cover(p, 6000, exact=False)
    with pytest.raises(ParameterError, match="sizes"):
        partition(100, 3, how="sizes", sizes=[50, 50, 50])
    with pytest.raises(ParameterError, match="sizes"):
        partition(100, 3, how="sizes", sizes=[50, 50])
