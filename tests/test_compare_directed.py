"""The directed-graph task of ``dpnet compare`` and paper 003's entries
(:mod:`dpnet.lab.compare.directed`) on the tests' tiny LIBSVM fixture: the digraph pair, the
sensitivity of the compact form under equal observations (the drift Lemma 4 omits included) against
the accountant's recursions, calibrated noise against Lemma 5 and the DSGD recursions by hand, the
soundness conditions refused, the undirected entries not applicable on digraphs (and unchanged on
undirected tasks), and a quick comparison that never certifies more than its targets."""

import math

import numpy as np
import pytest
import torch

from dpnet import algorithms, graphs
from dpnet.errors import ParameterError
from dpnet.lab import compare
from dpnet.lab.compare import directed, entries, tasks
from dpnet.privacy import chen_wang_zhang as cwz
from dpnet.runner import run

D = "directed_logistic"


pytestmark = pytest.mark.usefixtures("small_data")


def test_the_task_is_the_logistic_data_over_a_pair_of_strongly_connected_digraphs():
    t, flat = tasks.build(D, "a9a"), tasks.build("logistic", "a9a")
    assert torch.equal(t.problem.A, flat.problem.A) and torch.equal(t.problem.b, flat.problem.b)
    assert t.m == flat.m and t.sensitivity == pytest.approx(2 / t.m) and t.problem.reg == 1e-3
    g = t.graph
    assert isinstance(g, graphs.DirectedGraph) and g.n == 10 and g.satisfies_assumption1()
    assert g.common_roots() == list(range(10))                  # both strongly connected
    np.testing.assert_allclose(g.row_sums("R"), 1.0)
    np.testing.assert_allclose(g.column_sums("C"), 1.0)
    assert not np.allclose(g.column_sums("R"), 1.0) and not np.allclose(g.row_sums("C"), 1.0)
    assert "random_digraph(10, p = 0.3, seed = 0)" in t.spec.title
    ref = compare.references(D, "a9a", quick=True)
    assert "push-pull" in ref["method"] and ref["noise_free"] < 0.5 * ref["start"]


def _compact_run(A, b, reg, g, x0, alpha, gamma, K, zeta, eta):
    """Compact form (7)-(8) with full gradients: states, gradients and the mixing terms."""
    L1, L2 = g.in_laplacian, g.out_laplacian

    def grad(X, A=A, b=b):
        z = b * np.einsum("nmd,nd->nm", A, X)
        return -np.einsum("nm,nmd->nd", b / (1 + np.exp(z)), A) / A.shape[1] + reg * X

    x = np.tile(x0, (g.n, 1))
    y = gx = grad(x)
    mixes = []
    for k in range(K):
        mx, my = L1 @ (x + zeta[k]), L2 @ (y + eta[k])
        mixes.append((mx, my))
        x_next = x - alpha * mx - gamma * y
        g_next = grad(x_next)
        y = y - alpha * my + g_next - gx
        x, gx = x_next, g_next
    return x, grad, mixes


def test_the_compact_form_moves_by_at_most_lemma_4_with_the_drift_under_equal_observations():
    """Replace one record of agent i0 (label flipped, features of another record); the noise of
    the neighbouring run is chosen so that every message is equal (Lemma 5's argument). Then the
    states differ only at i0, ``Delta y_k = Delta g_k`` and ``||Delta x_k|| <= k gamma Delta``,
    ``||Delta y_k|| <= (1 + k gamma L) Delta`` in l2 for gamma <= 2/L: both below the
    accountant's ``Dx[k] = gamma k^2 Delta``, ``Dy[k] = (2k + 1) Delta`` (times sqrt(d) in l1)."""
    t = tasks.build(D, "a9a")
    p, g = t.problem, t.graph
    A, b = p.A.numpy(), p.b.numpy()
    # the test's own loop is the algorithm (no noise: the same iterates as DirectedDPGT)
    x, _, _ = _compact_run(A, b, p.reg, g, t.x0, 0.5, 3.0, 25, np.zeros((25, 10, p.dim)),
                           np.zeros((25, 10, p.dim)))
    res = run(algorithms.DirectedDPGT(0.5, 0.5, 3.0), p, g, 25, x0=t.x0, log_every=25,
              reference=None)
    np.testing.assert_allclose(res.x, x, rtol=1e-9, atol=1e-12)

    rng = np.random.default_rng(0)
    K, d, Delta, L = 60, p.dim, t.sensitivity, directed.record_smoothness(t)
    for gamma in (0.3, 3.0, 2 / L):
        i0, j, other = rng.integers(10), rng.integers(t.m), rng.integers(t.m)
        A2, b2 = A.copy(), b.copy()
        A2[i0, j], b2[i0, j] = A[(i0 + 1) % 10, other], -b[(i0 + 1) % 10, other]
        zeta, eta = rng.laplace(0, 0.3, (2, K, 10, d))
        xs, grad, mixes = _compact_run(A, b, p.reg, g, t.x0, 0.5, gamma, K, zeta, eta)
        # agent i0 of the neighbouring run: the same mixing terms (equal messages)
        x = np.tile(t.x0, (10, 1))
        x2 = x.copy()
        y, y2 = grad(x), grad(x2, A2, b2)
        gx, gx2 = y, y2
        Dx, Dy = cwz.sensitivities(1.0, 1.0, gamma, math.sqrt(d) * Delta, 1, K - 1)
        for k in range(K):
            dx, dy = (x - x2)[i0], (y - y2)[i0]
            assert np.linalg.norm(dx) <= k * gamma * Delta * (1 + 1e-9)
            assert np.linalg.norm(dy) <= (1 + k * gamma * L) * Delta * (1 + 1e-9)
            assert np.abs(dx).sum() <= Dx[k] * (1 + 1e-9) and np.abs(dy).sum() <= Dy[k] * (1 + 1e-9)
            np.testing.assert_allclose(dy, (gx - gx2)[i0], atol=1e-12)      # telescoped
            mx, my = mixes[k]
            xn, xn2 = x - 0.5 * mx - gamma * y, x2 - 0.5 * mx - gamma * y2
            gn, gn2 = grad(xn), grad(xn2, A2, b2)
            y, y2 = y - 0.5 * my + gn - gx, y2 - 0.5 * my + gn2 - gx2
            x, x2, gx, gx2 = xn, xn2, gn, gn2
        assert np.abs(x - x2)[i0].sum() > 0


def test_dpgt_calibration_matches_lemma_5_by_hand():
    t = tasks.build(D, "a9a")
    K, eps, gamma = 30, 1.0, 1.0
    C1 = math.sqrt(t.problem.dim) * 2 / t.m        # l1 constant of C = Delta = 2R/m, m = 1
    k = np.arange(K)
    terms = (gamma * k**2 + 2 * k + 1) * C1         # Dx[k] + Dy[k], a = b = 1
    for name, params, sigma in (
            ("directed_dpgt", {"gamma": gamma, "alpha": 0.5}, np.ones(K)),
            ("directed_dpgt_s1", {"gamma": gamma, "p": 0.6, "alpha": 0.5}, (k + 1.0) ** 0.6)):
        out = compare.calibration(D, "a9a", name, params, eps, "chen_wang_zhang", K)
        assert out["status"] == "ok" and out["delta"] == 0.0
        assert out["noise_factor"] == pytest.approx(float((terms / sigma).sum()) / eps, rel=1e-6)
        assert eps * (1 - 1e-6) <= out["certified_epsilon"] <= eps
        tight = compare.calibration(D, "a9a", name, params, eps, "rdp", K)
        assert tight["certified_epsilon"] <= eps and tight["delta"] <= entries.DELTA
        assert tight["noise_factor"] < out["noise_factor"]


def _dsgd_delta(coupling, step, s, C1m, K):
    out = [0.0]
    for k in range(K - 1):
        out.append(abs(1 - coupling(k) * s) * out[-1] + step(k) * C1m)
    return np.array(out)


def test_dsgd_baselines_calibrate_to_their_recursions_by_hand():
    t = tasks.build("logistic", "a9a")
    K, eps = 40, 2.0
    s = 0.8                                          # circulant(10, (1, 2)), Metropolis: 4 x 1/5
    np.testing.assert_allclose(t.graph.sparse("L").diagonal(), s)
    C1m = math.sqrt(t.problem.dim) * 2 / t.m         # C = 2R per record, batch = m
    k = np.arange(K)
    # CWZ-quantized: Laplace on the state, sigma_k = s0 (k+1)^p_sigma
    delta = _dsgd_delta(lambda k: 1.0 / (k + 1) ** 0.3, lambda k: 0.3 / (k + 1) ** 0.6, s, C1m, K)
    out = compare.calibration("logistic", "a9a", "cwz_quantized", {"beta0": 0.3, "p_sigma": 0.3},
                              eps, "chen_wang_zhang", K)
    assert out["noise_factor"] == pytest.approx(float((delta / (k + 1.0) ** 0.3).sum()) / eps,
                                                rel=1e-6)
    assert eps * (1 - 1e-6) <= out["certified_epsilon"] <= eps
    # Wang-Basar: margin b - a of the ternary quantizer, ||D_k||_1/(b - a) per release
    delta = _dsgd_delta(lambda k: 0.1 / (k + 1) ** 0.55, lambda k: 1.0 / (k + 1) ** 0.3, s, C1m,
                        K)
    params = {"lambda0": 1.0, "u": 0.3}
    out = compare.calibration("logistic", "a9a", "wang_basar_ternary", params, eps, "wang_basar",
                              K)
    margin = float(delta.sum()) / eps
    assert out["noise_factor"] == pytest.approx(margin, rel=1e-6)
    assert eps * (1 - 1e-6) <= out["certified_epsilon"] <= eps
    q = entries.entry("wang_basar_ternary").build(params, t).noise_scaled(out["noise_factor"])
    assert q.quantizer.a == directed.TERNARY_CLAMP
    assert q.quantizer.b - q.quantizer.a == pytest.approx(margin, rel=1e-9)


def test_steps_outside_the_soundness_conditions_are_refused():
    t, flat = tasks.build(D, "a9a"), tasks.build("logistic", "a9a")
    L = directed.record_smoothness(t)
    assert L == pytest.approx(0.25 + 1e-3)
    with pytest.raises(ParameterError, match="gamma <= 2/L"):
        entries.entry("directed_dpgt").build({"gamma": 2.01 / L, "alpha": 0.5}, t)
    out = compare.calibration(D, "a9a", "directed_dpgt", {"gamma": 8.0, "alpha": 0.5}, 1.0,
                              "chen_wang_zhang", 10)
    assert out["status"].startswith("refused:") and "2/L" in out["status"]
    # a_0 = 1 - 0.1 * 0.8 = 0.92, so lambda0 <= 2 a_0 / L = 7.33
    entries.entry("wang_basar_ternary").build({"lambda0": 7.3, "u": 0.3}, flat)
    with pytest.raises(ParameterError, match="2 a_0/L"):
        entries.entry("wang_basar_ternary").build({"lambda0": 7.4, "u": 0.3}, flat)
    # CWZ's coupling 1 gives a_0 = 0.2: beta0 <= 1.59
    with pytest.raises(ParameterError, match="2 a_0/L"):
        entries.entry("cwz_quantized").build({"beta0": 1.6, "p_sigma": 0.0}, flat)
    for e in ("directed_dpgt", "directed_dpgt_s1", "wang_basar_ternary", "cwz_quantized"):
        for trial in entries.entry(e).grid:          # every trial of every grid is sound
            entries.entry(e).build(trial, t if e.startswith("directed") else flat)


def test_which_entries_apply_where():
    d, flat, nc = tasks.build(D, "a9a"), tasks.build("logistic", "a9a"), tasks.build("nonconvex")
    for name in directed.UNDIRECTED_ONLY:
        why = entries.why_not(d, name)
        assert why and "digraphs" in why and "row-stochastic R" in why
        assert entries.why_not(flat, name) is None                 # unchanged on undirected
    assert entries.why_not(nc, "doadp") is None
    for name in ("directed_dpgt", "directed_dpgt_s1"):
        assert entries.entry(name).inapplicable(d) is None
        assert "undirected" in entries.entry(name).inapplicable(flat)
    for name in ("wang_basar_ternary", "cwz_quantized"):
        assert entries.entry(name).inapplicable(flat) is None
        assert "undirected graph" in entries.entry(name).inapplicable(d)
        assert "NonconvexLogistic" in entries.entry(name).inapplicable(nc)
    assert "central server" in entries.LEFT_OUT["kang_wddp"]
    assert "central server" in entries.LEFT_OUT["yan_binomial"]
    assert entries.check_complete() == []


def test_quick_compare_on_the_directed_task_never_certifies_above_its_target(tmp_path):
    rows = compare.compare([D], [1.0, 4.0], None, quick=True, seeds=[0, 1], dataset="a9a",
                           tight="rdp", publish_start=False)
    ran = [r for r in rows if not r["status"].startswith("not applicable")]
    # the DP-SGD anchors run off the task's graph (one curator; no communication)
    assert {(r["algorithm"], r["accountant"]) for r in ran} == {
        (n, acc) for n in ("directed_dpgt", "directed_dpgt_s1")
        for acc in ("chen_wang_zhang", "rdp")} | {
        (n, acc) for n in ("dp_sgd_local", "dp_sgd_central") for acc in ("pld", "rdp")}
    for r in ran:
        assert r["status"] == "ok" and r["seeds"] == 2, r
        assert r["target_epsilon"] * 0.99 <= r["certified_epsilon"] <= r["target_epsilon"]
        assert r["delta"] <= entries.DELTA
        assert math.isfinite(r["utility"])
        assert r["bits_per_agent"] > 0 or r["role"].startswith("anchor")   # nothing is sent
    skipped = {r["algorithm"] for r in rows if r["status"].startswith("not applicable")}
    assert skipped == set(entries.ENTRIES) - {"directed_dpgt", "directed_dpgt_s1",
                                              "dp_sgd_local", "dp_sgd_central"}
    assert len(rows) == 2 * (len(ran) // 2 + len(skipped))
    text = compare.write(rows, tmp_path, "dpnet compare --quick --tasks directed_logistic", True,
                         "a9a")["md"].read_text()
    assert "push-pull gradient tracking" in text and "random_digraph" in text
    assert "Not applicable to this task: **diadsp**" in text
