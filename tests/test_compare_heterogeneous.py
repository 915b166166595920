"""The heterogeneous leaderboard tasks (issue 37 item 9) on the tests' tiny a9a fixture: the split
is the partitioner's, every account covers every agent at its own size, and the entries that read
one local size say so instead of running.

The fixture's 140 training records cannot give ten agents two records each at Dirichlet(0.1)
(two labels, most agents would get none), so the unequal-size tests run the same builder at
alpha = 0.3 under a scoped name (``SKEW``); the real task's parameters are checked as declared."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from dpnet import partitions
from dpnet.lab import compare, source
from dpnet.lab.compare import entries, tasks

pytestmark = pytest.mark.usefixtures("small_data")

SKEW = "logistic_dirichlet_fixture"
PARTITION = (("how", "dirichlet"), ("alpha", 0.3), ("min_size", 2))


@pytest.fixture(autouse=True)
def skew_task():
    spec = dataclasses.replace(tasks.task_spec("logistic_dirichlet"), name=SKEW,
                               partition=PARTITION)
    with tasks.TASKS.scoped(SKEW, spec):
        yield


def test_the_real_tasks_declare_the_issues_splits():
    assert tasks.task_spec("logistic_dirichlet").partition == (
        ("how", "dirichlet"), ("alpha", 0.1), ("min_size", 2))
    assert tasks.task_spec("logistic_shards").partition == (
        ("how", "shards"), ("shards_per_agent", 1))


def _training_labels(dataset: str = "a9a") -> np.ndarray:
    """The training part of split_binary's 60/20/20 split, computed here from its definition."""
    _, y, _ = source.binary(dataset)
    N = len(y)
    order = np.random.default_rng(0).permutation(N)
    return np.where(np.asarray(y)[order[2 * (N // 5):]] > 0, 1.0, -1.0)


def test_the_dirichlet_task_is_the_partitioners_split_and_bounds_at_its_smallest_agent():
    t = tasks.build(SKEW)
    want = partitions.partition(_training_labels(), 10, seed=0, **dict(PARTITION))
    sizes = t.problem.local_sizes()
    np.testing.assert_array_equal(sizes, want.sizes)
    assert len(set(sizes.tolist())) > 1 and not t.equal_sizes
    assert t.m == round(sizes.mean())
    assert t.sensitivity == pytest.approx(2.0 / sizes.min())
    # each agent's labels are the partition's, record for record
    b = t.problem.b.numpy()
    y = _training_labels()
    for i, part in enumerate(want):
        np.testing.assert_array_equal(np.sort(b[i, :sizes[i]]), np.sort(y[part]))
    assert "local sizes " + ", ".join(str(int(s)) for s in sizes) in t.notes[-1]


def test_the_shards_task_keeps_equal_sizes_with_one_label_per_agent():
    t = tasks.build("logistic_shards")
    sizes = t.problem.local_sizes()
    assert t.equal_sizes and t.m == sizes[0] and t.sensitivity == pytest.approx(2.0 / sizes[0])
    want = partitions.partition(_training_labels(), 10, how="shards", shards_per_agent=1, seed=0)
    np.testing.assert_array_equal(sizes, want.sizes)
    # a stable label sort cut into equal shards: at most one agent holds both labels
    mixed = [i for i in range(10) if len(set(t.problem.b[i].tolist())) > 1]
    assert len(mixed) <= 1


@pytest.mark.parametrize("name", sorted(tasks.ONE_LOCAL_SIZE))
def test_entries_that_read_one_local_size_are_not_applicable_to_unequal_sizes(name):
    why = entries.why_not(tasks.build(SKEW), name)
    assert why is not None and "local sizes differ" in why
    assert "local sizes differ" not in (entries.why_not(tasks.build("logistic_shards"), name) or "")


def test_function_sensitivity_entries_are_calibrated_at_the_smallest_agent():
    t = tasks.build(SKEW)
    smallest = int(t.problem.local_sizes().min())
    for name in ("diadsp", "pgtc", "ppdc"):
        assert entries.entry(name).constants(t)["gradient_bound"] == pytest.approx(1.0 / smallest)
    assert entries.entry("dpp2").constants(t)["adjacency_radius"] == pytest.approx(2.0 / smallest)


def test_pooling_an_unequal_split_keeps_every_real_record_once():
    t = tasks.build(SKEW)
    one = entries.pooled(t.problem)
    sizes = t.problem.local_sizes()
    assert one.n_agents == 1 and one.m == sizes.sum()
    real = torch.cat([t.problem.A[i, :s] for i, s in enumerate(sizes)])
    torch.testing.assert_close(one.A[0], real, rtol=0, atol=0)
    assert not bool((one.A[0].abs().sum(dim=1) == 0).any())      # no padding row came along


def test_a_quick_board_on_the_dirichlet_task_certifies_every_agent_at_its_target():
    rows = compare.compare([SKEW], [1.0], ["dp_sgd", "diadsp", "doadp"],
                           quick=True, seeds=[0], publish_start=False)
    by = {r["algorithm"]: r for r in rows}
    assert by["doadp"]["status"].startswith("not applicable")
    for name in ("dp_sgd", "diadsp"):
        r = by[name]
        assert r["status"] == "ok", r
        assert 0.99 <= r["certified_epsilon"] <= 1.0 and math.isfinite(r["utility"])
    # DP-SGD's one rate B/m for every agent: each agent's own account reaches the same epsilon
    t = tasks.build(SKEW)
    alg = entries.entry("dp_sgd").build({"lr": 0.3, "batch": 4}, t)
    g = alg.privacy(t.problem, t.graph, 40, delta=1e-5)
    per_agent = np.asarray(g.per_agent)
    assert per_agent.shape == (10,)
    np.testing.assert_allclose(per_agent, per_agent[0], rtol=1e-9)
    assert alg.rate == pytest.approx(4 / t.m)


def test_a_method_whose_runs_are_refused_says_so_instead_of_publishing_x0(monkeypatch):
    """Every trial refused (a ParameterError: here a batch of m = the mean size on agents with
    fewer records) is not a divergence: the row is 'refused: ...' and unranked, where it used to
    read 'publishes x0' with status ok."""
    monkeypatch.delitem(tasks.ONE_LOCAL_SIZE, "cwz_quantized")
    rows = compare.compare([SKEW], [2.0], ["cwz_quantized"], quick=True, seeds=[0])
    assert rows and all(r["status"].startswith("refused") for r in rows), rows
    assert all("batch_size" in r["status"] for r in rows)
    assert all(not math.isfinite(r.get("utility", math.nan)) for r in rows)


def test_the_start_x0_reads_a_coin_flips_accuracy_not_zero():
    """Issue 39: at x0 = 0 every margin is 0; the row read accuracy 0.0000, which no predictor
    scores. A tie counts half."""
    t = tasks.build("logistic", "a9a")
    assert t.utility(np.zeros(t.problem.dim), "test")["accuracy"] == 0.5
    assert tasks.accuracy(np.array([1.0, -2.0, 0.0, 3.0])) == pytest.approx(0.625)
