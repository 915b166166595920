"""DECOR (Allouah et al., ICML 2024) against its per-agent, per-edge loop; its pairwise noise
cancelling in the average; its account against the authors' own per-step formula, a direct
two-agent integration of the correlated Gaussian pair, and its two limits (local DP-SGD, one
curator); calibration never overshoots."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpnet
from dpnet import graphs
from dpnet.algorithms import DECOR, DPSGD
from dpnet.errors import ParameterError
from dpnet.privacy import decor, dp_sgd
from dpnet.problems import LogisticRegression

import reference

N, D, M = 6, 4, 30


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(3)
    A = 2.0 * rng.standard_normal((N, M, D))
    b = rng.choice([-1.0, 1.0], (N, M))
    graph = graphs.circulant(N, offsets=(1, 2))
    return LogisticRegression(A, b, reg=0.01), graph, rng.standard_normal((N, D))


@pytest.mark.parametrize("kw", [{"sampling": "poisson", "rate": 0.2},
                                {"sampling": "fixed", "batch_size": 5}])
def test_the_run_is_the_per_agent_per_edge_loop(setup, kw):
    problem, graph, x0 = setup
    alg = DECOR(0.3, 0.7, 2.0, clip=0.5, **kw)
    got = dpnet.run(alg, problem, graph, 5, x0=x0, seed=4, log_every=5, progress=False).x
    want = reference.dp_sgd(graph.W, problem.A.numpy(), problem.b.numpy(), problem.reg, x0, 0.3,
                            0.7, 0.5, 5, seed=4, rate=kw.get("rate"),
                            batch_size=kw.get("batch_size"), pairs=graph.edges, z_pair=2.0)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_the_pairwise_noise_cancels_in_the_average_model(setup):
    problem, graph, x0 = setup
    kw = dict(sampling="poisson", rate=0.2)
    runs = [dpnet.run(alg, problem, graph, 1, x0=x0, seed=1, log_every=1, progress=False)
            for alg in (DECOR(0.3, 0.7, 50.0, **kw), DPSGD(0.3, 0.7, **kw))]
    # one step from a common x0: the same batches and independent noise, so the averages agree
    # while the agents' models differ by the large secrets
    np.testing.assert_allclose(runs[0].x.mean(axis=0), runs[1].x.mean(axis=0), atol=1e-10)
    assert np.abs(runs[0].x - runs[1].x).max() > 1.0


def test_the_effective_multiplier_is_the_authors_per_step_account():
    """The authors' ``rdp_account`` (utils/dp_account.py): per-step RDP coefficient
    ``2 C^2 max_i (Sigma^{-1})_ii`` with ``Sigma = s_cdp^2 I + s_cor^2 (D - A)``, one linear solve
    per agent. It equals the Gaussian RDP ``alpha Delta^2 / (2 sigma_eff^2)`` at Delta = 2C."""
    for graph, s_cdp, s_cor, C in ((graphs.ring(16), 2.0, 10.0, 1.0),
                                   (graphs.circulant(10, offsets=(1, 2)), 1.3, 4.0, 0.5)):
        A = graph.adjacency
        sigma = s_cdp ** 2 * np.eye(graph.n) + s_cor ** 2 * (np.diag(A.sum(axis=1)) - A)
        authors = 2 * C ** 2 * max(np.linalg.solve(sigma, np.eye(graph.n)[i])[i]
                                   for i in range(graph.n))
        z = decor.effective_multipliers(s_cdp / C, s_cor / C, np.diag(A.sum(axis=1)) - A)
        assert (2 * C) ** 2 / (2 * (z.min() * C) ** 2) == pytest.approx(authors, rel=1e-12)


def test_the_whitening_reduction_against_a_direct_two_agent_integration():
    """Two agents, one edge, no subsampling: messages (g1 + vbar1 + v, g2 + vbar2 - v). The
    hockey-stick divergence of the record of agent 1 shifted by Delta, integrated over the
    plane, equals that of the one-dimensional Gaussian at z_eff."""
    z_cdp, z_cor, delta_shift, eps = 1.0, 1.5, 2.0, 0.8
    cov = np.array([[z_cdp ** 2 + z_cor ** 2, -z_cor ** 2], [-z_cor ** 2, z_cdp ** 2 + z_cor ** 2]])
    P = stats.multivariate_normal([0.0, 0.0], cov)
    Q = stats.multivariate_normal([delta_shift, 0.0], cov)
    grid = np.linspace(-14, 16, 1201)
    X, Y = np.meshgrid(grid, grid, indexing="ij")
    pts = np.stack([X, Y], axis=-1)
    direct = np.maximum(Q.pdf(pts) - math.exp(eps) * P.pdf(pts), 0).sum() * (grid[1] - grid[0]) ** 2
    z = decor.effective_multipliers(z_cdp, z_cor, np.array([[1.0, -1.0], [-1.0, 1.0]]))[0]
    mu = delta_shift / z
    one_dim = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert direct == pytest.approx(one_dim, rel=1e-4)
    assert z > z_cdp                      # the secret helps against the eavesdropper


def test_the_two_limits_local_dp_sgd_and_one_curator(setup):
    problem, graph, _ = setup
    L = graph.matrix("unweighted_laplacian")
    assert np.allclose(decor.effective_multipliers(0.8, 0.0, L), 0.8)
    assert np.allclose(decor.effective_multipliers(0.8, 1e4, L), 0.8 * math.sqrt(N), rtol=1e-6)
    kw = dict(sampling="poisson", rate=0.1)
    none = DECOR(0.1, 0.8, 0.0, **kw).privacy(problem, graph, 30, delta=1e-5)
    assert none.epsilon == DPSGD(0.1, 0.8, **kw).privacy(problem, graph, 30, delta=1e-5).epsilon
    g = DECOR(0.1, 0.8, 3.0, **kw).privacy(problem, graph, 30, delta=1e-5)
    z = decor.effective_multipliers(0.8, 3.0, L)
    assert g.per_agent == pytest.approx([dp_sgd.epsilon(v, "poisson", 0.1, 30, 1e-5)
                                         for v in z], rel=1e-9)
    assert g.epsilon < none.epsilon and any("pairwise secret" in n for n in g.notes)


@pytest.mark.parametrize("target", [1.0, 4.0])
def test_calibration_never_overshoots(setup, target):
    problem, graph, _ = setup
    alg = DECOR(0.1, 1.0, 2.0, rate=0.1).calibrate(target, problem, graph, 40, delta=1e-5)
    assert alg.privacy(problem, graph, 40, delta=1e-5).epsilon <= target
    assert alg.noise_scaled(0.99).privacy(problem, graph, 40, delta=1e-5).epsilon > target
    assert alg.pair_multiplier == pytest.approx(2.0 * alg.noise_multiplier)   # ratio kept


def test_bad_arguments_and_graphs_are_named(setup):
    problem, _, x0 = setup
    with pytest.raises(ParameterError, match="pair_multiplier"):
        DECOR(0.1, 1.0, -1.0, rate=0.1)
    with pytest.raises(ParameterError, match="noise_multiplier"):
        DECOR(0.1, 0.0, 1.0, rate=0.1).privacy(problem, graphs.ring(N), 5, delta=1e-5)


def test_effective_multipliers_per_component_of_a_sparse_graph():
    """Disjoint copies (what the canary audit runs): each component inverted on its own equals
    the dense inverse of the whole block-diagonal M."""
    import scipy.sparse as sp

    parts = [graphs.ring(4), graphs.circulant(6, offsets=(1, 2)), graphs.ring(4)]
    Ls = [g.matrix("unweighted_laplacian") for g in parts]
    whole = sp.block_diag(Ls, format="csr")
    dense = 1.0 / np.sqrt(np.diag(np.linalg.inv(0.7 ** 2 * np.eye(14) + 2.0 ** 2 * whole.toarray())))
    np.testing.assert_allclose(decor.effective_multipliers(0.7, 2.0, whole), dense, rtol=1e-12)
