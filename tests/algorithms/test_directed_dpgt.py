"""DirectedDPGT (paper 003): equality to the per-agent loops of (4)/(6) and (7)/(8), the invariants
that tell the two forms apart, push-pull linear convergence, graph checks, schemes S1/S2."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet import graphs, noise, problems
from dpnet.algorithms import DirectedDPGT
from dpnet.algorithms.cwz_schemes import (
    lemma2_matrix,
    lemma3_K1,
    scheme_s1,
    scheme_s2,
    spectral_radius,
    theorem1_exponent,
)
from dpnet.errors import ParameterError

import reference


def _logistic(n=5, m=40, d=4, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, m, d))
    b = rng.choice([-1.0, 1.0], size=(n, m))
    return problems.LogisticRegression(A, b, reg=0.1)


def _trajectory(alg, problem, graph, K, x0, seed=0):
    states = []
    res = dpnet.run(alg, problem, graph, K, x0=x0, seed=seed, reference=None,
                    callback=lambda k, s: states.append({n: v.clone() for n, v in s.items()}))
    return res, states


@pytest.mark.parametrize("form", ["compact", "per-agent"])
def test_equals_per_agent_loop_with_noise_and_minibatches(form):
    graph = graphs.random_digraph(5, 0.3, seed=2)        # R, C differ; C is not balanced
    problem = _logistic()
    x0 = problem.default_x0(1).numpy()
    sx, sy = 0.3, 0.2
    alg = DirectedDPGT(0.4, 0.3, 0.05, batch=7, noise_x=noise.Laplace(sx, decay=0.95),
                       noise_y=noise.Laplace(sy, power=0.5), form=form)
    K, seed = 12, 4
    _, states = _trajectory(alg, problem, graph, K, x0, seed)
    grads = reference.local_gradients(problem, batch_size=7, seed=seed)
    ref = reference.directed_dpgt(graph.R, graph.C, grads, x0, 0.4, 0.3, 0.05, K,
                                  scale_x=lambda i, k: sx * 0.95 ** k,
                                  scale_y=lambda i, k: sy / (k + 1) ** 0.5, seed=seed, form=form)
    for k, s in enumerate(states, start=1):
        np.testing.assert_allclose(s["x"].numpy(), ref["x"][k], rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(s["y"].numpy(), ref["y"][k], rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(s["g"].numpy(), ref["g"][k], rtol=1e-11, atol=1e-12)


def _noisy_run(form, K=15):
    graph = graphs.random_digraph(6, 0.25, seed=7)
    problem = _logistic(n=6)
    alg = DirectedDPGT(0.3, 0.2, 0.1, batch=5, noise_x=noise.Laplace(0.5),
                       noise_y=noise.Laplace(0.5), form=form)
    res, states = _trajectory(alg, problem, graph, K, problem.default_x0(0))
    return graph, states


def test_compact_invariants_hold_under_noise():
    graph, states = _noisy_run("compact")
    v1 = torch.from_numpy(graph.v1)
    for prev, s in zip(states[:-1], states[1:]):
        # sum_i y_i = sum_i g_i (1^T L2 = 0 kills the noise) ...
        torch.testing.assert_close(s["y"].sum(0), s["g"].sum(0), rtol=0, atol=1e-12)
        # ... and v1^T (x_{k+1} - x_k) = -gamma v1^T y_k (v1^T L1 = 0)
        torch.testing.assert_close(v1 @ (s["x"] - prev["x"]), -0.1 * (v1 @ prev["y"]),
                                   rtol=0, atol=1e-12)


def test_per_agent_form_breaks_both_invariants_under_noise():
    graph, states = _noisy_run("per-agent")
    v1 = torch.from_numpy(graph.v1)
    drift = max(float((s["y"].sum(0) - s["g"].sum(0)).abs().max()) for s in states)
    mass = max(float((v1 @ (s["x"] - p["x"]) + 0.1 * (v1 @ p["y"])).abs().max())
               for p, s in zip(states[:-1], states[1:]))
    assert drift > 1e-3 and mass > 1e-3


def test_per_agent_form_loses_tracking_on_unbalanced_c_without_noise():
    graph = graphs.cwz_fig1()                    # C: row sums (1, 1, .5, 1.5, 1) != column sums 1
    problem = problems.Quadratic.random(n_agents=5, dim=3, seed=1)
    _, st = _trajectory(DirectedDPGT(0.3, 0.3, 0.05, form="per-agent"), problem, graph, 10,
                        problem.default_x0(0))
    gap = float((st[-1]["y"].sum(0) - st[-1]["g"].sum(0)).abs().max())
    assert gap > 1e-4


def test_forms_coincide_without_noise_on_balanced_weights():
    graph = graphs.directed_ring(5, r_weights=0.5, c_weights=0.5)   # row sums = column sums
    problem = problems.Quadratic.random(n_agents=5, dim=3, seed=2)
    x0 = problem.default_x0(0)
    a = dpnet.run(DirectedDPGT(0.5, 0.5, 0.1), problem, graph, 30, x0=x0)
    b = dpnet.run(DirectedDPGT(0.5, 0.5, 0.1, form="per-agent"), problem, graph, 30, x0=x0)
    np.testing.assert_allclose(a.x, b.x, rtol=1e-12, atol=1e-13)


def test_noise_free_push_pull_converges_linearly_on_strongly_convex_problem():
    graph = graphs.random_digraph(6, 0.2, seed=11)
    problem = problems.Quadratic.random(n_agents=6, dim=4, seed=3, mu=0.5, L=2.0)
    res = dpnet.run(DirectedDPGT(0.5, 0.5, 0.05), problem, graph, 600, x0=problem.default_x0(0),
                    log_every=50)
    dist = res.history["distance"]
    it = res.history["iteration"]
    assert dist[-1] < 1e-20 * dist[0]
    # log-linear: constant contraction factor over the second half
    sel = (it >= 250) & (dist > 1e-28)
    slope, icpt = np.polyfit(it[sel], np.log(dist[sel]), 1)
    resid = np.log(dist[sel]) - (slope * it[sel] + icpt)
    assert slope < -0.02 and np.max(np.abs(resid)) < 0.5


def test_bits_and_transcript_carry_the_perturbed_messages():
    graph = graphs.cwz_fig1()
    problem = problems.Quadratic.random(n_agents=5, dim=3, seed=0)
    alg = DirectedDPGT(0.2, 0.2, 0.05, noise_x=noise.Laplace(1.0), noise_y=noise.Laplace(2.0))
    states = []
    res = dpnet.run(alg, problem, graph, 3, seed=5, record=True,
                    callback=lambda k, s: states.append(s))
    d, edges = 3, int((graph.R > 0).sum() + (graph.C > 0).sum())
    assert res.ledger.total == 3 * 64 * d * edges
    sent = res.transcript.stacked("x")
    z = dpnet.rng.Streams(5).laplace("noise_x", 1, np.arange(5), d)
    np.testing.assert_allclose(sent[1], states[0]["x"].numpy() + z, rtol=1e-12)


def test_graph_checks():
    problem = problems.Quadratic.random(n_agents=5, dim=2)
    with pytest.raises(ParameterError, match="needs a DirectedGraph"):
        dpnet.run(DirectedDPGT(0.1, 0.1, 0.1), problem, graphs.ring(5), 1)
    with pytest.raises(ParameterError, match="I - alpha\\*L1 is nonnegative"):
        dpnet.run(DirectedDPGT(1.5, 0.1, 0.1), problem, graphs.cwz_fig1(), 1)
    bad = graphs.from_edge_lists(5, [(0, 1), (1, 2), (2, 3), (3, 4)])
    with pytest.raises(ParameterError, match="common root"):
        dpnet.run(DirectedDPGT(0.1, 0.1, 0.1), problem, bad, 1)
    with pytest.raises(ParameterError, match="form"):
        DirectedDPGT(0.1, 0.1, 0.1, form="rows")


# ---- schemes ------------------------------------------------------------------------------------

def paper_s1(p):
    return scheme_s1(2000, 80, 0.75, 100, 3e-5, 1, 0.66, 1, 1.9, p, p)


def test_scheme_s1_paper_numbers():
    s = paper_s1(0.1)
    assert s.alpha == pytest.approx(0.04) and s.gamma == pytest.approx(0.05)
    assert s.beta == pytest.approx(0.75 / 2000 ** 0.66) and round(s.beta, 3) == 0.005
    assert s.m == 57 and s.iterations == 2001
    nx_, ny_ = s.noises()
    assert nx_.scale_at(0, 5)[0] == 1.0
    assert nx_.scale_at(9, 5)[0] == pytest.approx(10 ** 0.1)
    assert s.sigma(1999) == pytest.approx((2000 ** 0.1, 2000 ** 0.1))
    alg = DirectedDPGT.from_scheme(s)
    assert (alg.alpha, alg.beta, alg.gamma, alg.batch) == (s.alpha, s.beta, s.gamma, 57)


@pytest.mark.parametrize("p, exponent", [(-0.1, 0.34), (0.1, 0.12), (0.2, -0.08)])
def test_assumption5_and_theorem1_exponent(p, exponent):
    conds = {c.name: c for c in paper_s1(p).conditions(graphs.cwz_fig1(), L=1.0)}
    assert all(conds[k].holds for k in ("2p_alpha - 2p_zeta - p_beta", "p_beta - p_eta",
                                        "2p_gamma - p_alpha", "2p_gamma - p_beta",
                                        "K^p_gamma - 3 a3 L"))
    e = conds["Theorem 1 rate exponent theta - max(p_alpha, p_beta, p_gamma)"]
    assert e.value == pytest.approx(exponent) and e.holds == (exponent > 0)
    assert theorem1_exponent(1, 0.66, 1, 1.9, p, p) == pytest.approx(exponent)


@pytest.mark.parametrize("p, sigma", [(0.9994, 0.301), (0.9996, 0.449), (0.9998, 0.670)])
def test_scheme_s2_paper_numbers(p, sigma):
    s = scheme_s2(2000, 0.1, 0.01, 0.1, 1.002, p, p)
    assert s.m == 55
    assert s.sigma(0) == s.sigma(2000) and round(s.sigma(0)[0], 3) == sigma
    assert s.noises()[1].scale_at(1234, 5)[0] == pytest.approx(p ** 2000)


def test_assumption6_rho_A_reported():
    g = graphs.cwz_fig1()
    s = scheme_s2(2000, 0.1, 0.01, 0.1, 1.002, 0.9996, 0.9996)
    conds = s.conditions(g, L=1.0, mu=0.1)
    names = [c.name for c in conds]
    assert "3 gamma L" in names and any(n.startswith("rho_A") for n in names)
    rho = next(c for c in conds if c.name.startswith("rho_A"))
    assert rho.value > 1 and not rho.holds       # the paper's S2 steps are far outside Lemma 2
    # Lemma 3: small enough steps make rho_A < 1
    K1 = lemma3_K1(g, 1.0, 0.5)
    assert K1 is not None
    a, b, c = K1 ** -0.8, K1 ** -0.7, 1 / K1
    assert spectral_radius(lemma2_matrix(g, a, b, c, 1.0, 0.5)) < 1
    bad = scheme_s2(100, 0.1, 0.01, 0.1, 0.99, 1.2, 0.5)
    failing = {c.name for c in bad.conditions() if not c.holds}
    assert failing == {"p_zeta", "p_m"}


def test_lemma2_matrix_by_hand_on_two_agents():
    # R = C = w [[0,1],[1,0]]: v1 = v2 = 1, W1 = W2 = I - J/2 (norm 1), L1 = L2 with norm 2w,
    # r1 = r2 = 2w (eigenvalue 1 - 2 alpha w of I - alpha L1 - J/2)
    w, a, b, g, L, mu, n = 0.5, 0.2, 0.3, 0.01, 1.0, 0.5, 2
    G = graphs.digraph(w * np.array([[0.0, 1.0], [1.0, 0.0]]))
    A = lemma2_matrix(G, a, b, g, L, mu)
    r1 = r2 = 2 * w
    v2sq = v1sq = 2.0
    assert A[0, 0] == pytest.approx(1 - r1 * a + 4 * (1 + r1 * a) * g**2 * v2sq * L**2
                                    / (n * r1 * a))
    assert A[0, 2] == pytest.approx(8 * (1 + r1 * a) * g**2 * v2sq * L / (r1 * a))
    assert A[1, 0] == pytest.approx((1 + r2 * b) * L**2 / (r2 * b)
                                    * (3 * a**2 * (2 * w) ** 2 + 6 * v2sq * g**2 * L**2 / n))
    assert A[2, 1] == pytest.approx(v1sq * g / n**2 + 3 * v1sq * g**2 * L / (2 * n**2))
    assert A[2, 2] == pytest.approx(1 - mu * g + 3 * mu * g**2 * L)
    assert math.isclose(spectral_radius(A), max(abs(np.linalg.eigvals(A))))
