"""Floating-point-safe Laplace releases (issue 38 item 3, :mod:`dpnet.lattice`): the exact
samplers against their laws (with the power to see a 3 % error in the scale), the lattice
arithmetic, and secret runs whose messages lie on the lattice and whose guarantee carries the
rounding's slack, counted by hand here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import dpnet
from dpnet import algorithms, graphs, lattice, problems
from dpnet import distributed as D
from dpnet.algorithms.kang_wddp import server_graph
from dpnet.problems import LogisticRegression


def _words(seed: int):
    gen = np.random.default_rng(seed)
    return lambda m: gen.integers(0, 2**64, size=m, dtype=np.uint64)


def _chi2_pvalue(z: np.ndarray, lam: float) -> float:
    """Goodness of fit of integer draws to the discrete Laplace of parameter ``lam``."""
    ks = np.arange(-int(30 * lam) - 5, int(30 * lam) + 6)
    p = np.exp(-np.abs(ks) / lam)
    p /= p.sum()
    expected = p * z.size
    keep = expected >= 5
    observed = np.array([(z == k).sum() for k in ks])
    # the cells with fewer than 5 expected draws are pooled into one
    obs = np.r_[observed[keep], observed[~keep].sum()]
    exp = np.r_[expected[keep], expected[~keep].sum()]
    chi = float(((obs - exp) ** 2 / exp).sum())
    return float(stats.chi2.sf(chi, obs.size - 1))


@pytest.mark.parametrize("lam", [0.5, 2.0, 7.25])
def test_discrete_laplace_has_its_law_and_the_test_could_see_a_3_percent_error(lam):
    t = np.full(200_000, int(lam * 4096), dtype=np.uint64)
    z = lattice.discrete_laplace(_words(11), t)
    assert z.dtype == np.int64
    assert _chi2_pvalue(z, lam) > 1e-3
    # power: the same draws against a scale 3 % off are rejected
    assert _chi2_pvalue(z, lam * 1.03) < 1e-3 or _chi2_pvalue(z, lam / 1.03) < 1e-3
    assert abs(z.mean()) < 5 * z.std() / np.sqrt(z.size)


def test_discrete_laplace_at_the_lattice_scale():
    """lambda in [2^40, 2^41): E|Z| = lambda (1 + O(e^-1/lambda)), and |Z| < 2^53."""
    lam = 1.37 * 2.0**40
    z = lattice.discrete_laplace(_words(5), np.full(100_000, int(lam * 4096), dtype=np.uint64))
    assert np.abs(z).max() < 2**53
    a = np.abs(z).astype(np.float64) / lam          # ~ Exp(1)
    assert abs(a.mean() - 1) < 5 / np.sqrt(a.size)
    assert stats.kstest(a, "expon").pvalue > 1e-3


def _scalar_draws(kernel, n: int, seed: int, *args) -> np.ndarray:
    """n results of one compiled scalar kernel reading one stream of words."""
    words, pos, out = _words(seed)(64 * n), 0, []
    for _ in range(n):
        value, pos = kernel(words, pos, *args)
        assert pos > 0                                    # the buffer is ample
        out.append(value)
    return np.array(out)


@pytest.mark.parametrize("gamma", [(0, 7), (3, 10), (1, 1), (5, 2**52)])
def test_bernoulli_exp_frequencies(gamma):
    num, den = (np.uint64(v) for v in gamma)
    n = 100_000
    b = _scalar_draws(lattice.kernels().bernoulli_exp, n, 3, num, den)
    p = np.exp(-gamma[0] / gamma[1])
    assert abs(b.mean() - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12


def test_below_is_uniform_and_unbiased_near_2_to_the_64():
    below = lattice.kernels().below
    u = _scalar_draws(below, 60_000, 1, np.uint64(6))
    counts = np.bincount(u.astype(np.int64), minlength=6)
    assert stats.chisquare(counts).pvalue > 1e-3
    big = np.uint64(2**63 + 12345)        # half of all words are rejected for this bound
    v = _scalar_draws(below, 20_000, 2, big)
    assert (v < big).all()
    assert abs((v >= np.uint64(2**62)).mean() - (big - np.uint64(2**62)) / float(big)) < 0.02
    assert below(np.zeros(3, np.uint64), 0, big) == (0, -1)      # only rejected words: out


def test_an_element_cut_by_the_buffers_end_reads_its_words_again():
    """The driver hands an unfinished element its own words again, then fresh ones: the draws
    equal one pass over the concatenated stream, whatever the buffer sizes."""
    t = np.full(2000, int(3.5 * 4096), dtype=np.uint64)
    stream = _words(8)(10 * 2000 + 10_000)
    whole = np.zeros(2000, np.int64)
    i, used = lattice.kernels().fill(t, stream, whole, 0)
    assert i == 2000
    served = [0]

    def small(m):                         # the same stream, in small pieces
        m = min(m, 37)
        served[0] += m
        return stream[served[0] - m:served[0]]
    np.testing.assert_array_equal(lattice.discrete_laplace(small, t), whole)


def test_the_lattice_arithmetic_is_exact():
    g = lattice.lattice(np.array([0.3, 1.0, 5e-7]))
    assert np.all(np.frexp(g)[0] == 0.5)                       # powers of two
    b = np.array([0.3, 1.0, 5e-7])
    assert np.all((b / g >= 2.0**40) & (b / g < 2.0**41))
    x = np.array([[0.1, -2.7e-13, 1e30, 3.0], [1 / 3, 0.0, -1e-300, 7.5]])
    r = lattice.round_to(x, g[:2, None])
    assert np.all(np.abs(r - x) <= g[:2, None] / 2)
    assert np.all(np.mod(r, g[:2, None]) == 0)                  # on the lattice, exactly
    assert r[0, 2] == 1e30                                      # already coarser than g


def test_a_lattice_release_lies_on_the_lattice_and_counts_its_slack():
    x = np.random.default_rng(0).normal(size=(3, 50))
    b = np.array([0.2, 0.05, 1.5])
    out, slack = lattice.perturb(x, b, _words(4))
    g = lattice.lattice(b)[:, None]
    assert np.all(np.mod(out, g) == 0)
    assert slack == pytest.approx(50 * float(np.sum(g.ravel() / b)), rel=1e-15)
    assert slack <= 3 * 50 * 2.0**-40
    spread = (out - x) / b[:, None]                             # Laplace(1) per coordinate
    assert abs(np.abs(spread).mean() - 1) < 0.15


# -- secret runs ----------------------------------------------------------------------------
def _diadsp():
    g = graphs.ring(5)
    p = problems.from_spec({"name": "quadratic", "dim": 4, "n_agents": 5})
    alg = algorithms.from_spec({"name": "diadsp", "eta": 0.1,
                                "noise_x": {"kind": "laplace", "scale": 0.3, "decay": 0.97},
                                "noise_y": {"kind": "laplace", "scale": 0.2, "decay": 0.97}})
    return alg, p, g


def _hand_slack(alg, n: int, d: int, K: int) -> float:
    """Two Laplace releases per iteration and agent (DiaDSP's (8), (9)): d g_k / b_k each."""
    total = 0.0
    for k in range(K):
        for noise in (alg.noise_x, alg.noise_y):
            b = noise.scale_at(k, n)
            total += d * float(np.sum(lattice.lattice(b) / b))
    return total


def test_secret_runs_release_lattice_points_and_charge_the_rounding():
    alg, p, g = _diadsp()
    K = 30
    plain = dpnet.run(alg, p, g, K, privacy={"gradient_bound": 1.0})
    secret = dpnet.run(alg, p, g, K, privacy={"gradient_bound": 1.0}, randomness="secret",
                       record=True)
    slack = _hand_slack(alg, 5, 4, K)
    assert secret.privacy.epsilon == pytest.approx(plain.privacy.epsilon + slack, rel=1e-12)
    assert secret.privacy.epsilon > plain.privacy.epsilon
    assert any("lattice" in n for n in secret.privacy.notes)
    assert not any("lattice" in n for n in plain.privacy.notes)
    for name, noise in (("x", alg.noise_x), ("y", alg.noise_y)):
        sent = secret.transcript.stacked(name)                  # (K, n, d): every message
        for k in range(K):
            gk = lattice.lattice(noise.scale_at(k, 5))[:, None]
            assert np.all(np.mod(sent[k], gk) == 0), (name, k)


def test_secret_resume_keeps_the_slack_of_the_first_part():
    alg, p, g = _diadsp()
    snaps = []
    dpnet.run(alg, p, g, 20, privacy={"gradient_bound": 1.0}, randomness="secret",
              checkpoint=snaps.append, checkpoint_every=10)
    assert snaps[0]["lattice_slack"] == pytest.approx(_hand_slack(alg, 5, 4, 10), rel=1e-12)
    resumed = dpnet.run(alg, p, g, 20, privacy={"gradient_bound": 1.0}, randomness="secret",
                        resume=snaps[0])
    whole = dpnet.run(alg, p, g, 20, privacy={"gradient_bound": 1.0})
    assert resumed.privacy.epsilon == pytest.approx(
        whole.privacy.epsilon + _hand_slack(alg, 5, 4, 20), rel=1e-12)
    damaged = {**snaps[0], "lattice_slack": -1.0}
    with pytest.raises(dpnet.ParameterError, match="lattice_slack"):
        dpnet.run(alg, p, g, 20, randomness="secret", resume=damaged)


def test_an_epsilon_delta_account_of_laplace_noise_is_refused_on_the_lattice():
    alg, p, g = _diadsp()
    kw = dict(privacy={"gradient_bound": 1.0, "accountant": "rdp", "delta": 1e-5})
    assert dpnet.run(alg, p, g, 5, **kw).privacy.is_private
    secret = dpnet.run(alg, p, g, 5, randomness="secret", **kw)
    assert not secret.privacy.is_private
    assert "pure-DP" in secret.privacy.theorem


def test_a_gaussian_lattice_release_lies_on_the_lattice_and_raises_its_noise_to_pay():
    """round_g(x) + g rint((1 + kappa) noise / g) with kappa = g sqrt(d) / floor: a lattice
    point, Gaussian of sd sigma (1 + kappa) up to the rounding, and (Delta + g sqrt(d)) /
    (1 + kappa) <= Delta for every Delta >= floor, which is what keeps the account of sigma;
    an infinite floor (no sensitive release) raises nothing."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 20_000))
    sigma, floor = np.array([0.8, 3.0]), 0.5
    z = rng.normal(size=x.shape)
    out, bump = lattice.perturb_gaussian(x, sigma[:, None] * z, sigma, floor)
    g = lattice.lattice(sigma)[:, None]
    assert np.all(np.mod(out, g) == 0)
    kappa = g.ravel() * np.sqrt(20_000) / floor
    assert bump == kappa.max() and bump < 1e-9
    noise = (out - lattice.round_to(x, g)) / (sigma * (1 + kappa))[:, None]
    np.testing.assert_allclose(noise, z, atol=1e-11)            # the draws, rounded to g
    for delta in (floor, 2 * floor, 10.0):
        assert np.all((delta + g.ravel() * np.sqrt(20_000)) / (1 + kappa) <= delta)
    same, none = lattice.perturb_gaussian(x, sigma[:, None] * z, sigma, np.array([np.inf, 0.5]))
    assert none == kappa[1]
    np.testing.assert_array_equal(same[0], lattice.round_to(x[0], g[0])
                                  + g[0] * np.rint(sigma[0] * z[0] / g[0]))


# -- every Gaussian release of a secret run on the lattice, at its account's floor ----------
def _spy(monkeypatch):
    """Records every Gaussian lattice release: (value, noise, scale, floor, release)."""
    seen = []
    real = lattice.perturb_gaussian

    def spy(x, noise, scale, floor):
        out, bump = real(x, noise, scale, floor)
        seen.append((x.copy(), noise.copy(), np.asarray(scale).copy(), floor, out.copy()))
        return out, bump
    monkeypatch.setattr(lattice, "perturb_gaussian", spy)
    return seen


def _logistic(n=4, m=12, d=5):
    A = np.random.default_rng(3).standard_normal((n, m, d))
    return LogisticRegression(A, np.sign(A[:, :, 0]), reg=0.05)


def _gaussian_cases():
    """(algorithm, problem, graph, privacy, the floor by hand, each row's noise sd by hand)."""
    p, ring = _logistic(), graphs.ring(4)
    C, z, zc = 1.0, 1.0, 0.7
    G, B, k, d = 0.5, 3, 2, 5
    return {
        "dp_sgd": (algorithms.DPSGD(0.3, z, clip=C, rate=0.5), p, ring, {"delta": 1e-5},
                   C, lambda k: np.full(4, z * C)),
        "decor": (algorithms.DECOR(0.3, z, zc, clip=C, rate=0.5), p, ring, {"delta": 1e-5},
                  C, lambda k: np.full(4, C * np.sqrt(z ** 2 + 2 * zc ** 2))),
        # G from the run's own assumption (below the clip bound): 2G sqrt(k/d)/B, halved
        "doadp": (algorithms.DOADP(0.05, 0.4, 0.3, sigma=0.2, p=0.7, k=k,
                                   coordinate_clip=1.0, batch_size=B), p, ring,
                  {"gradient_bound": G, "accountant": "pld", "delta": 1e-5},
                  G * np.sqrt(k / d) / B, lambda t: np.full(4, 0.2)),
        "dp_dda": (algorithms.DPDDA(1.0, sigma=0.2, clip=1.0, batch_size=B), p, ring,
                   {"accountant": "pld", "delta": 1e-5},
                   1.0 / B, lambda t: np.full(4, 0.2)),
        # the default floor, from mechanism(): half its sensitivity C/m = 2G/m
        "kang_wddp": (algorithms.KangWDDP(0.1, 0.5, 4), p, server_graph(4),
                      {"gradient_bound": G, "delta": 1e-5}, G / 4,
                      lambda t: np.full(4, 0.5)),
    }


@pytest.mark.parametrize("name", list(_gaussian_cases()))
def test_secret_gaussian_releases_lie_on_the_lattice_at_their_accounts_floor(name, monkeypatch):
    alg, p, g, privacy, floor, sd = _gaussian_cases()[name]
    K = 4
    plain = dpnet.run(alg, p, g, K, privacy=privacy)
    seen = _spy(monkeypatch)
    secret = dpnet.run(alg, p, g, K, privacy=privacy, randomness="secret")
    assert plain.privacy.is_private
    assert (secret.privacy.epsilon, secret.privacy.delta) == (plain.privacy.epsilon,
                                                              plain.privacy.delta)
    assert len(seen) >= K - 1         # one call per step (DO-ADP: unless no agent is active)
    d = p.dim
    kappa = []
    for x, noise, scale, got, out in seen:
        assert got == pytest.approx(floor, rel=1e-12)
        gk = lattice.lattice(scale)[:, None]
        assert np.all(np.mod(out, gk) == 0)                               # lattice points
        raise_ = gk * np.sqrt(d) / got                 # kappa = g sqrt(d) / floor, per row
        # rounding the value and the raised noise: at most g, plus the raise itself
        assert np.all(np.abs(out - x - noise) <= gk + raise_ * np.abs(noise) + 1e-15)
        kappa.append(float(raise_.max()))
    rows = np.concatenate([scale for _, _, scale, _, _ in seen])
    assert sorted(set(np.round(rows, 12))) == sorted(set(np.round(
        np.concatenate([sd(k) for k in range(K)]), 12)))                   # sd by hand
    notes = [n for n in secret.privacy.notes if "Gaussian releases rounded" in n]
    assert len(notes) == 1 and f"1 + {max(kappa):.3g}" in notes[0]
    assert not any("floating point" in n for n in secret.privacy.notes)


def test_a_secret_gaussian_release_without_a_floor_stays_float_and_the_guarantee_says_so():
    class Unbounded(algorithms.DPSGD):
        name = "dp_sgd_without_floor"

        def lattice_floor(self, problem, graph, iterations, assumptions):
            return None
    p = _logistic()
    res = dpnet.run(Unbounded(0.3, 1.0, clip=1.0, rate=0.5), p, graphs.ring(4), 3,
                    privacy={"delta": 1e-5}, randomness="secret")
    assert res.privacy.is_private
    assert any("drawn in floating point" in n and "no lower bound" in n
               for n in res.privacy.notes)
    assert not any("rounded to a power-of-two lattice" in n for n in res.privacy.notes)


def test_a_floor_the_run_cannot_know_leaves_float_releases_and_no_guarantee(monkeypatch):
    """DO-ADP with an l2 clip and no gradient_bound: neither the floor nor the account exists;
    given G, the same run releases on the lattice at G's floor."""
    alg = algorithms.DOADP(0.05, 0.4, 0.3, sigma=0.2, clip=1.0)
    seen = _spy(monkeypatch)
    res = dpnet.run(alg, _logistic(), graphs.ring(4), 3, randomness="secret")
    assert seen == [] and res.privacy.epsilon == np.inf
    res = dpnet.run(alg, _logistic(), graphs.ring(4), 3, randomness="secret",
                    privacy={"gradient_bound": 0.8, "accountant": "pld", "delta": 1e-5})
    assert len(seen) == 3                             # G sqrt(k/d) / B, k = d, B = 1: G
    assert {floor for *_, floor, _ in seen} == {0.8}


def _distributed_secret():
    alg, p, g = _diadsp()
    res = D.run(alg, p, g, 12, split=[3, 2], timeout=30, privacy={"gradient_bound": 1.0})
    return res.randomness, res.privacy.epsilon


def test_a_distributed_secret_run_charges_every_ranks_lattice_releases():
    alg, p, g = _diadsp()
    plain = dpnet.run(alg, p, g, 12, privacy={"gradient_bound": 1.0}).privacy.epsilon
    out = [o.unwrap() for o in D.launch(_distributed_secret, 2, timeout=60)]
    assert out[0] == out[1]
    assert out[0][0] == "secret"
    assert out[0][1] == pytest.approx(plain + _hand_slack(alg, 5, 4, 12), rel=1e-12)
