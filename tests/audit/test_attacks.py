"""The eavesdropper's lab: exact recovery from non-private transcripts, measured failure on
private ones."""

import numpy as np
import pytest

import dpnet
from dpnet.lab.audit import attacks as T

K = 30


@pytest.fixture(scope="module")
def lab():
    have = dpnet.algorithms.available()
    names = [n for n in T.SCENARIOS if n not in ("dpp2", "momentum")
             or {"dpp2": "dpp2", "momentum": "doadp"}[n] in have]
    return {r.scenario: {(a.method, a.mechanism, a.target): a for a in r.attacks}
            for r in T.lab(names, iterations=K, seed=0)}


def test_dgd_and_dsgd_gradients_leak_exactly(lab):
    for method in ("DGD", "DSGD"):
        a = lab["dgd"][method, "none", "local gradients"]
        assert a.errors.size == K - 1 and a.errors.max() < 1e-10


def test_gradient_tracking_leaks_gradients_and_states(lab):
    att = lab["tracking"]
    assert att["gradient tracking", "none", "local gradients"].errors.max() < 1e-10
    assert att["gradient tracking", "none", "local states"].errors.max() == 0.0


def test_diadsp_noise_defeats_the_inversion(lab):
    att = lab["tracking"]
    g = att["DiaDSP", "Laplace s=1, q=0.9", "local gradients"]
    assert g.errors.min() > 1.0           # accumulated tracker noise: worse than guessing 0
    x = att["DiaDSP", "Laplace s=1, q=0.9", "local states"]
    assert x.errors[0] > 0.3 and x.errors[-1] < x.errors[0]   # the state noise decays as q^k


def test_pgtc_compression_and_noise(lab):
    assert "pgtc" in dpnet.algorithms.available()   # a rename must fail, not skip
    att = lab["tracking"]
    assert att["PGTC (Identity())", "none", "local gradients"].errors.max() < 1e-10
    topk = att["PGTC (TopK(2))", "Top-2 only", "local gradients"].error
    noisy = att["PGTC (TopK(2))", "Top-2 + Laplace s=1, q=0.9", "local gradients"].error
    assert 1e-4 < topk < 0.5 < 1.0 < noisy   # compression alone blurs a little; noise a lot


def test_dpp2_first_tier_hides_nothing_from_who_knows_eta(lab):
    assert "dpp2" in lab, "the attack lab lost its dpp2 entry"
    att = lab["dpp2"]
    assert att["DPP2 (eta known)", "none", "local gradients"].errors.max() < 1e-10
    assert att["DPP2 (eta known)", "none", "local states"].errors.max() < 1e-10
    assert att["DPP2 (eta unknown)", "none", "local gradients"].error > 0.5
    noisy = att["DPP2 (eta known)", "Laplace u=1, r=0.5", "local gradients"]
    assert noisy.errors[0] > 0.1                  # the second tier protects early iterations...
    assert noisy.errors[-1] < 1e-6                # ...but u r^k decays and exposes late ones
    assert att["DPP2 (eta unknown)", "Laplace u=1, r=0.5", "local gradients"].errors[-1] > 0.5


def test_doadp_momentum_inversion(lab):
    assert "momentum" in lab, "the attack lab lost its momentum entry"
    att = lab["momentum"]
    assert att["momentum DSGD", "none", "local gradients"].errors.max() < 1e-10
    assert att["DO-ADP (k=5)", "none", "local gradients"].errors.max() < 1e-10
    assert att["DO-ADP (k=2)", "Top-2 only", "local gradients"].error > 0.1
    noisy = att["DO-ADP (k=5)", "Gaussian sigma=1", "local gradients"]
    assert noisy.errors.min() > 0.3          # what leaks is g + theta
    # the noise sits in the gradient, not the state: with k = d the state is on the wire
    assert att["DO-ADP (k=5)", "Gaussian sigma=1", "local states"].errors.max() < 1e-12


def _momentum_dsgd(W, grad, x0, alpha, beta, gamma, T, theta):
    """Literally eq. (2) of Huo et al. with noise theta_t added to g (DO-ADP's perturbation)."""
    x, m = [x0.copy()], np.zeros_like(x0)
    gs = []
    for t in range(T):
        g = grad(x[t])
        gs.append(g)
        m = g + theta[t] + beta * m
        x.append(x[t] - alpha * m + gamma * (W @ x[t] - x[t]))
    return np.array(x), np.array(gs)


@pytest.mark.parametrize("sigma", [0.0, 0.5])
def test_momentum_inversion_of_section_2c(sigma):
    rng = np.random.default_rng(3)
    n, d, T_ = 5, 3, 20
    W = dpnet.graphs.ring(n).W
    A = rng.standard_normal((n, d, d))
    A = A @ A.transpose(0, 2, 1) / d + np.eye(d)
    b = rng.standard_normal((n, d))

    def grad(X):
        return np.einsum("nij,nj->ni", A, X) - b

    theta = sigma * rng.standard_normal((T_, n, d))
    x, g = _momentum_dsgd(W, grad, rng.standard_normal((n, d)), 0.05, 0.15, 0.3, T_, theta)
    est = T.invert_momentum(x, W, 0.05, 0.15, 0.3)
    err = T.relative_error(est, g)
    if sigma == 0:
        assert err.max() < 1e-10
    else:     # what leaks is g + theta: the Gaussian perturbation is the whole error
        np.testing.assert_allclose(est, g + theta, atol=1e-10)
        assert np.median(err) > 0.1


def test_lab_report(tmp_path):
    res = T.lab("dgd", iterations=10)
    md, png = T.write_lab_report(res, tmp_path)
    assert "| dgd | DGD | none | local gradients |" in md.read_text()
    assert png.stat().st_size > 1000
    with pytest.raises(dpnet.UnknownNameError):
        T.lab("nope")
