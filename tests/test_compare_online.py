"""The one-pass stream task and the online / box-constrained entries of ``dpnet compare``
(:mod:`dpnet.lab.compare.online`) on the tests' tiny LIBSVM fixture: the stream uses every record
once, the l1 bound of one replaced record (checked on the data), the public radius, calibrated
noise against each theorem by hand, never smaller than the algorithm's own account, and quick
comparisons that never certify more than their targets."""

import math

import numpy as np
import pytest
import torch

from dpnet.errors import ParameterError
from dpnet.lab import compare
from dpnet.lab.compare import entries, online, tasks
from dpnet.privacy import chen_wang
from dpnet.problems.base import minimize_global

S = online.STREAM


pytestmark = pytest.mark.usefixtures("small_data")


def _record_grad(a, b, X, reg):
    """Per-agent gradient of ``log(1 + exp(-b a^T x)) + reg/2 ||x||^2`` at the rows of X."""
    z = b * (a * X).sum(-1)
    return -(torch.sigmoid(-z) * b)[:, None] * a + reg * X


def test_the_stream_uses_each_record_once_in_order_and_ends():
    t, batch = tasks.build(S, "a9a"), tasks.build("logistic", "a9a").problem
    s = t.problem
    assert t.m == batch.m == s.horizon == t.spec.horizon == t.spec.quick_horizon == 14
    X = torch.as_tensor(np.random.default_rng(0).standard_normal((10, s.dim)))
    for k in range(t.m):                     # step k: record k of every agent, nothing else
        ref = _record_grad(batch.A[:, k], batch.b[:, k], X, batch.reg)
        assert torch.allclose(s.stochastic_grad(X, None, k), ref, atol=1e-12)
    with pytest.raises(ParameterError, match="every record is used once"):
        s.stochastic_grad(X, None, t.m)
    x = X[0]                                  # the population objective is the batch objective
    assert s.loss(x) == pytest.approx(batch.loss(x), rel=1e-12)
    assert t.utility(x.numpy(), "test")["utility"] == pytest.approx(
        tasks.build("logistic", "a9a").utility(x.numpy(), "test")["utility"])


def test_one_replaced_record_moves_the_data_gradient_by_at_most_two_sqrt_d_in_l1():
    t = tasks.build(S, "a9a")
    D, reg = t.problem.dim, online.reg(t)
    d = online.l1_data_bound(t)
    assert d == pytest.approx(math.sqrt(D))
    A = t.problem.model.A.clone()
    y = t.problem.model.y.clone()
    rng = np.random.default_rng(1)
    flat = torch.full((D,), 1 / math.sqrt(D), dtype=torch.float64)   # unit l2, l1 = sqrt(D)
    worst1 = worst2 = same = 0.0
    for _ in range(200):
        x = torch.as_tensor(rng.standard_normal(D) * rng.choice([0.1, 3.0, 100.0]))
        i, j = rng.integers(len(y), size=2)
        pairs = [(A[i], y[i], A[j], -y[j]), (A[i], y[i], flat, -y[i]), (flat, 1.0, flat, -1.0)]
        for a, b, a2, b2 in pairs:            # one record replaced at a common point
            g = _record_grad(a[None], torch.tensor([float(b)], dtype=torch.float64), x[None], reg)
            g2 = _record_grad(a2[None], torch.tensor([float(b2)], dtype=torch.float64), x[None],
                              reg)
            worst1 = max(worst1, float((g - g2).abs().sum()))
            worst2 = max(worst2, float((g - g2).norm()))
        x2 = x + torch.as_tensor(rng.standard_normal(D) * 5)   # same record, two points
        g = _record_grad(A[i][None], y[i:i + 1], torch.stack([x, x2]), 0.0)
        same = max(same, float((g[0] - g[1]).abs().sum()))
    # nearly attained: a flat record replaced by its sign flip on all coordinates but one, x far
    # along that one (both sigmoids saturate): 2 sqrt(D) (1 - 1/D), so 2 sqrt(D) is not loose
    a2 = -flat.clone()
    a2[0] = flat[0]
    x = torch.zeros(D, dtype=torch.float64)
    x[0] = -1e3
    one = torch.ones(1, dtype=torch.float64)
    g = _record_grad(flat[None], one, x[None], reg) - _record_grad(a2[None], one, x[None], reg)
    assert float(g.abs().sum()) == pytest.approx(2 * d * (1 - 1 / D), rel=1e-9)
    worst1 = max(worst1, float(g.abs().sum()))
    assert worst2 <= 2 * t.R + 1e-12 and worst1 <= 2 * d + 1e-12
    assert same < float(A.abs().sum(1).max()) <= d
    # the finite sum's full local data term obeys the same l1 bound (Assumption 5 on the batch)
    batch = tasks.build("logistic", "a9a").problem
    X = torch.as_tensor(rng.standard_normal((10, D)) * 50)
    assert float((batch.grad(X) - batch.reg * X).abs().sum(1).max()) <= d


def test_the_public_radius_bounds_x_star_and_the_folding_conditions_hold():
    for name in ("logistic", S):
        t = tasks.build(name, "a9a")
        assert online.x_star_radius(t) == pytest.approx(math.sqrt(2 * math.log(2) / 1e-3))
    batch = tasks.build("logistic", "a9a").problem
    zero = torch.zeros(batch.dim, dtype=torch.float64)
    assert batch.loss(zero) == pytest.approx(math.log(2), rel=1e-14)
    x_star = minimize_global(batch, tol=1e-12)
    assert 0 < float(x_star.norm()) <= online.x_star_radius(tasks.build("logistic", "a9a"))
    t = tasks.build(S, "a9a")
    w = np.abs(t.graph.sparse("laplacian_like").diagonal())          # |w_ii| = 0.8
    for e in ("ldp_online", "ldol"):
        for p in entries.entry(e).grid:        # every trial builds: the conditions hold
            entries.entry(e).build(p, t)
            assert p["lambda0"] * 1e-3 <= 1 - w.max()
    with pytest.raises(ParameterError, match="lambda0"):
        online._ldp_online({"lambda0": 250.0, "varsigma": 0.51}, t)
    with pytest.raises(ParameterError, match="2 alpha0 lambda"):
        online._dmod({"alpha0": 600.0, "power": 0.5}, t)
    nonconvex = tasks.build("nonconvex")
    assert online.x_star_radius(nonconvex) is None
    for n in ("ldp_online", "ldol", "dola", "dmod", "dpdo", "dp_dda"):
        assert entries.entry(n).inapplicable(nonconvex)


def test_calibrated_noise_matches_each_theorem_by_hand():
    t = tasks.build(S, "a9a")
    K, eps, D = 14, 1.0, t.problem.dim
    d = math.sqrt(D)

    def nf(name, p, acc=None, task=S):
        out = compare.calibration(task, "a9a", name, p, eps, acc or entries.entry(name).default, K)
        assert out["status"] == "ok" and eps * (1 - 1e-6) <= out["certified_epsilon"] <= eps
        return out["noise_factor"]

    # ldp_online: Theorem 5(1), wbar = 0.8, sigma0 = sum_t 2 sqrt(2) d rho_t (t+1)^vs / eps
    lam = 0.01 / np.arange(1, K + 1) ** 0.71
    rho, r = [], 0.0
    for k in range(K):
        r = 0.2 * r + lam[k]
        rho.append(r)
    hand = sum(2 * math.sqrt(2) * d * rho[k] * (k + 2) ** 0.51 for k in range(K)) / eps
    assert nf("ldp_online", {"lambda0": 0.01, "varsigma": 0.51}) == pytest.approx(hand, rel=1e-6)
    assert hand == pytest.approx(chen_wang.ldp_online_epsilons(0.01, 0.71, 1.0, 0.51, 0.8, d, K)[0])
    # DOLA: stream, one release per record, b = 2 alpha0 sqrt(D) R / eps (= its published
    # account); finite sum, L = R/m at all K releases: K times that over m
    b = nf("dola", {"alpha0": 0.1, "power": 0.5})
    assert b == pytest.approx(2 * 0.1 * d / eps, rel=1e-9)
    alg = entries.entry("dola").build({"alpha0": 0.1, "power": 0.5}, t).noise_scaled(b)
    assert alg.privacy(t.problem, t.graph, K, accountant="li", gradient_bound=1.0).epsilon \
        == pytest.approx(eps, rel=1e-9)
    batch = tasks.build("logistic", "a9a")
    b = nf("dola", {"alpha0": 0.1, "power": 0.5}, task="logistic")
    assert b == pytest.approx(K * 2 * 0.1 * d / (batch.m * eps), rel=1e-9)
    alg = entries.entry("dola").build({"alpha0": 0.1, "power": 0.5}, batch).noise_scaled(b)
    for variant in ("published", "all-data"):            # the theorem's own figure is smaller
        assert alg.privacy(batch.problem, batch.graph, K, accountant="li", variant=variant,
                           gradient_bound=1 / batch.m).epsilon < eps
    # DMOD on the stream: K releases, b = K 2 alpha0 sqrt(D) R / eps, K times its own account
    b = nf("dmod", {"alpha0": 0.01, "power": 1.0})
    assert b == pytest.approx(K * 2 * 0.01 * d / eps, rel=1e-9)
    alg = entries.entry("dmod").build({"alpha0": 0.01, "power": 1.0}, t).noise_scaled(b)
    assert alg.privacy(t.problem, t.graph, K, accountant="yuan", gradient_bound=1.0).epsilon \
        == pytest.approx(eps / K, rel=1e-9)
    # DPDO (huang): M = Delta_g c / (q eps) sum_{k<K} (p/q)^k, Delta_g = 2 sqrt(D) (stream, B = 1)
    c, p = 0.01, 0.99
    q = (1 + p) / 2
    hand = 2 * d * c / (q * eps) * sum((p / q) ** k for k in range(K))
    assert nf("dpdo", {"c": c, "p": p}) == pytest.approx(hand, rel=1e-6)
    assert nf("dpdo", {"c": c, "p": p}, task="logistic") == pytest.approx(hand / batch.m, rel=1e-6)


def test_quick_stream_comparison_never_certifies_above_its_target():
    rows = compare.compare([S], [1.0, 4.0], quick=True, seeds=[0, 1], dataset="a9a",
                           tight="rdp", publish_start=False)
    ranked = {r["algorithm"] for r in rows if not r["status"].startswith("not applicable")}
    assert ranked == set(online.ONLINE)
    for r in rows:
        if r["algorithm"] not in online.ONLINE:
            assert r["status"].startswith("not applicable: a finite-sum method"), r
            continue
        assert r["status"] == "ok" and r["seeds"] == 2, r
        assert r["target_epsilon"] * 0.99 <= r["certified_epsilon"] <= r["target_epsilon"]
        assert r["delta"] <= entries.DELTA and math.isfinite(r["utility"])
        assert r["bits_per_agent"] > 0
    # the rdp row re-calibrates the same choice and never needs more noise than the default
    for n in online.ONLINE:
        for eps in (1.0, 4.0):
            a, b = (next(r for r in rows if r["algorithm"] == n and r["accountant"] == acc
                         and r["target_epsilon"] == eps) for acc in (entries.entry(n).default,
                                                                      "rdp"))
            assert a["choice"] == b["choice"] and b["noise_factor"] <= a["noise_factor"] * 1.001


def test_the_batch_task_hosts_what_is_sound_and_says_why_not_for_the_rest():
    t = tasks.build("logistic", "a9a")
    assert "own clean state" in entries.entry("dmod").inapplicable(t)
    applies = ["ldp_online", "ldol", "dola", "dpdo", "dp_dda"]
    assert all(entries.entry(n).inapplicable(t) is None and t.exclude(n) is None
               for n in applies)
    rows = compare.compare(["logistic"], [2.0], applies + ["dmod"], quick=True, seeds=[0],
                           dataset="a9a", tight="none", publish_start=False)
    for r in rows:
        if r["algorithm"] == "dmod":
            assert r["status"].startswith("not applicable")
            continue
        assert r["status"] == "ok", r
        assert 2.0 * 0.99 <= r["certified_epsilon"] <= 2.0 and math.isfinite(r["utility"])


def test_every_private_algorithm_is_benchmarked_or_left_out_with_a_reason():
    assert entries.check_complete() == []
    assert not set(online.ONLINE) & set(entries.left_out()) and "dp_dda" not in entries.LEFT_OUT
    assert all(len(entries.entry(n).grid) == entries.GRID_TRIALS for n in (*online.ONLINE, "dp_dda"))


def test_the_streams_noise_free_yardstick_is_one_pass_dola_with_its_noise_off():
    ref = compare.references(online.STREAM, "a9a", quick=True)
    t = tasks.build(online.STREAM, "a9a")
    assert ref["method"].startswith("one-pass DOLA without noise")
    assert ref["iterations"] == t.spec.quick_horizon <= t.m
    # reproduce the chosen trial by hand: noise off means every seed gives the same model
    from dpnet.runner import run

    trial = next(g for g in entries.entry("dola").grid if g["alpha0"] == ref["eta"])
    alg = online._dola(trial, t).noise_scaled(0.0)
    xs = [run(alg, t.problem, t.graph, ref["iterations"], x0=t.x0, seed=s, log_every=10**6,
              reference=None).x.mean(axis=0) for s in (0, 1)]
    np.testing.assert_array_equal(xs[0], xs[1])
    assert t.utility(xs[0], "test")["utility"] == pytest.approx(ref["noise_free"], rel=1e-12)
    assert ref["noise_free"] < ref["start"]
