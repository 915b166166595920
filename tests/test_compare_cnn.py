"""``dpnet compare``'s MNIST CNN task on the tests' tiny MNIST fixture (60 training, 20 test
images): the splits, the clipped record sensitivity checked numerically, DO-ADP's calibrated
noise against Theorem 1's proof accountant computed by hand, the quick leaderboard, the Laplace
methods' "not applicable" rows (and nothing changed on the other tasks), the reference."""

import copy
import math

import numpy as np
import pytest
import torch

from dpnet import data
from dpnet.lab import compare
from dpnet.lab.compare import cnn, entries, tasks
from dpnet.problems.stochastic import Clip

pytestmark = pytest.mark.usefixtures("small_data", "one_thread")


def test_the_splits_and_the_start():
    t = tasks.build("mnist_cnn")
    from dpnet.lab import source

    held = source.held_out_images(60, 10)                # 1/6 of the fixture's 60 images
    pool = np.setdiff1d(np.arange(60), held)
    parts = pool[data.split_even(50, 10, seed=0)]
    assert t.problem.n_agents == 10 and t.m == 5 == t.problem.m     # 50 images, 5 per agent
    np.testing.assert_array_equal(t.problem.parts.numpy(), parts)
    assert math.isinf(t.R) and math.isinf(t.sensitivity)             # no bound on a CNN record
    assert t.graph.n == 10 and t.graph.is_doubly_stochastic()
    np.testing.assert_array_equal(t.x0, t.problem.x0.numpy())        # the seeded CNN's weights
    val = t.utility(t.x0, "val")
    assert val["utility"] == pytest.approx(1 - val["accuracy"]) and val["heldout_loss"] > 0
    # the validation split: 10 images held out before the agents' split, no agent's record
    assert len(held) == 10 and not set(held) & set(t.problem.parts.numpy().ravel())
    assert "no agent's data" in " ".join(t.notes)


def test_a_replaced_record_moves_the_clipped_minibatch_mean_by_at_most_2G_over_B():
    """DO-ADP's sensitivity on the CNN: every per-sample gradient clipped at G = 1, so replacing
    one of the B records moves the mean by <= 2G/B, however large the raw gradients are."""
    t = tasks.build("mnist_cnn")
    p, B, G = t.problem, t.m, 1.0
    clip = Clip(G, "l2")
    X = 3.0 * torch.as_tensor(t.x0).repeat(10, 1)   # weights x3: raw gradients grow ~x3^3
    X = X + 0.05 * torch.randn(X.shape, generator=torch.Generator().manual_seed(0))
    idx = torch.arange(B).expand(10, -1)
    raw = p.per_sample_grads(X, idx)                                  # (n, B, P)
    clipped = clip.apply(raw)
    assert float(clipped.norm(dim=-1).max()) <= G * (1 + 1e-5)
    worst = 0.0
    for j in range(B):                       # record j of agent 0 replaced by agent i's record j
        for i in range(1, 10):
            diff = (clipped[0].sum(0) - clipped[0, j] + clipped[i, j]) / B - clipped[0].mean(0)
            worst = max(worst, float(diff.norm()))
    assert 0 < worst <= 2 * G / B * (1 + 1e-5)
    # without clipping the same replacement moves it by far more than any R/m of the other tasks
    assert float(raw.norm(dim=-1).max()) > 10 * G


def test_doadp_proof_calibration_matches_theorem_1s_proof_by_hand():
    t = tasks.build("mnist_cnn")
    K, eps, delta, delta0 = 10, 2.0, 1e-5, 1e-8
    out = compare.calibration("mnist_cnn", None, "doadp", cnn.CNN_GRID[0], eps, "proof", K)
    assert out["status"] == "ok" and out["delta"] <= delta * (1 + 1e-9)
    sigma = out["noise_factor"]                          # the entry's unit sigma is 1
    # Lemma 1: eps_t = sqrt(2 ln(1.25/delta0)) Delta / sigma, Delta = 2G/B (k = d), G = 1;
    # Lemma 4: eps'_t = ln(1 + g (e^eps_t - 1)), g = pB/q; Lemma 5 at delta_hat solving delta
    B = min(entries.DOADP_BATCH, t.m)
    g = B / t.m
    eps_t = math.sqrt(2 * math.log(1.25 / delta0)) * (2.0 / B) / sigma
    amp = math.log1p(g * math.expm1(eps_t))
    S = K * amp ** 2
    dh = 1 - (1 - delta) / (1 - g * delta0) ** K
    by_hand = math.sqrt(2 * S * math.log(math.e + math.sqrt(S) / dh)) + S
    assert by_hand == pytest.approx(out["certified_epsilon"], rel=1e-9)
    assert eps * (1 - 1e-3) <= by_hand <= eps


def test_doadp_rdp_calibration_matches_dp_accounting_directly():
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    t = tasks.build("mnist_cnn")
    K, eps = 10, 2.0
    out = compare.calibration("mnist_cnn", None, "doadp", cnn.CNN_GRID[0], eps, "rdp", K)
    B = min(entries.DOADP_BATCH, t.m)
    # noise multiplier sigma / (2G/B), sampling B/m (= 1 on the fixture: the Gaussian mechanism,
    # where the fixed batch's symmetrised pair and dp-accounting's event coincide)
    acc = rdp.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(B / t.m, dp_event.GaussianDpEvent(
        out["noise_factor"] / (2.0 / B))), K)
    assert acc.get_epsilon(1e-5) == pytest.approx(out["certified_epsilon"], rel=1e-6)
    assert eps * (1 - 1e-3) <= out["certified_epsilon"] <= eps


def test_quick_leaderboard_on_the_cnn_never_certifies_above_its_target(tmp_path):
    rows = compare.compare(["mnist_cnn"], [1.0, 4.0], quick=True, seeds=[0, 1], tight="rdp",
                           publish_start=False)
    ran = [r for r in rows if not r["status"].startswith("not applicable")]
    assert {(r["algorithm"], r["accountant"]) for r in ran} == {
        ("doadp", "proof"), ("doadp", "rdp"), ("doadp_poisson", "pld"),
        ("doadp_poisson", "rdp")} | {
        (n, acc) for n in ("dp_sgd", "decor", "dp_sgd_local", "dp_sgd_central")
        for acc in ("pld", "rdp")}
    for r in ran:
        assert r["status"] == "ok" and r["seeds"] == 2, r
        assert r["target_epsilon"] * 0.99 <= r["certified_epsilon"] <= r["target_epsilon"]
        assert r["delta"] <= entries.DELTA
        assert 0 <= r["utility"] <= 1 and r["utility"] == pytest.approx(1 - r["accuracy"])
        assert r["bits_per_agent"] > 0 or r["role"].startswith("anchor")   # nothing is sent
        # quick: one of the first two configurations of the search (the task has one horizon),
        # each at most the quick K
        two = entries.entry(r["algorithm"]).search("mnist_cnn")[:2]
        assert any(r["choice"].startswith(", ".join(f"{k}={v:g}" for k, v in c.items()))
                   for c in two), r["choice"]
        assert int(r["choice"].rpartition("K=")[2]) <= cnn.QUICK_HORIZON
        # DP-SGD and its twins publish the moving average of their iterates on this task
        ema = r["algorithm"] in ("dp_sgd", "decor", "dp_sgd_local", "dp_sgd_central")
        assert ("ema_decay=0.95" in r["choice"]) == ema == ("final x_ema" in r["released"]), r
    why = {r["algorithm"]: r["status"] for r in rows if r["status"].startswith("not applicable")}
    for name in cnn.LAPLACE_FULL_GRADIENT:
        assert why[name] == f"not applicable: {cnn.UNBOUNDED}"
    assert why["dp_dda"] == why["dp_dda_poisson"] == f"not applicable: {cnn.DPDDA_NOTE}"
    assert sorted(r["algorithm"] for r in compare.ranking(rows, "mnist_cnn", 1.0)) == \
        ["doadp", "doadp", "doadp_poisson", "doadp_poisson", "dp_sgd", "dp_sgd"]
    paths = compare.write(rows, tmp_path, "dpnet compare --quick --tasks mnist_cnn", True)
    text = paths["md"].read_text()
    assert "momentum DSGD (no clipping" in text and "test error 1 - accuracy" in text
    assert f"Not applicable to this task: **diadsp**, {cnn.UNBOUNDED}" in text


def test_other_tasks_keep_their_grids_and_applicability():
    t = tasks.build("logistic", "a9a")
    for name in cnn.LAPLACE_FULL_GRADIENT:
        assert t.exclude(name) is None and entries.entry(name).inapplicable(t) is None
    e = entries.entry("doadp")
    assert e.grid_for("logistic") == e.grid != cnn.CNN_GRID == e.grid_for("mnist_cnn")
    assert len(cnn.CNN_GRID) == entries.GRID_TRIALS
    assert entries.check_complete() == []
    assert all(len(g) == entries.GRID_TRIALS for x in entries.ENTRIES.values()
               for g in (x.grid, *x.task_grids.values()))


def test_the_reference_is_noise_free_momentum_dsgd_from_x0():
    ref = compare.references("mnist_cnn", None, quick=True)
    assert ref["method"].startswith("momentum DSGD (no clipping, batch 5")
    assert ref["iterations"] == cnn.QUICK_HORIZON and ref["eta"] in [g["alpha"] for g in
                                                                      cnn.CNN_GRID]
    assert 0 <= ref["noise_free"] <= 1 and ref["noise_free"] == pytest.approx(1 - ref["accuracy"])
    assert ref["start"] == pytest.approx(tasks.build("mnist_cnn").utility(
        tasks.build("mnist_cnn").x0, "test")["utility"])


def test_the_score_is_the_models_accuracy_and_cross_entropy_image_by_image():
    """Each split's score against the CNN run one image at a time (an independent loop)."""
    from dpnet.lab import source as common

    t = tasks.build("mnist_cnn")
    train, test = common.images("mnist")
    val = common.held_out_images(len(train.y), len(train.y) // 6)
    x = t.x0 + 0.3 * np.random.default_rng(1).standard_normal(t.x0.shape).astype(np.float32)
    module = t.problem.load_into(copy.deepcopy(t.problem.model), torch.as_tensor(x)).eval()
    for split, (X, y) in (("val", (train.X[val], train.y[val])), ("test", (test.X, test.y))):
        losses, hits = [], []
        with torch.no_grad():
            for img, label in zip(X, y):
                logits = module(t.problem.transform(torch.as_tensor(img)[None]))[0]
                losses.append(float(torch.logsumexp(logits, 0) - logits[int(label)]))
                hits.append(int(logits.argmax()) == int(label))
        s = t.utility(x, split)
        assert s["accuracy"] == pytest.approx(np.mean(hits), abs=1e-12)
        assert s["utility"] == pytest.approx(1 - np.mean(hits), abs=1e-12)
        assert s["heldout_loss"] == pytest.approx(np.mean(losses), rel=1e-5)
