"""Paper 001's accounting: Theorem 1's bound (7) and conditions, the proof's step-by-step
accountant (hand-computed), the dp-accounting accounts, and calibration that never overshoots."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpnet.errors import ParameterError
from dpnet.privacy import huo

LN = math.log(1.25 / 1e-5)


def _eps_lr(p: float, ratio: float) -> huo.DOADPStep:
    """The epsilon-dataset setting of Fig. 2 (catalogue 2.B): G = 1, q = 20000, T = 120000."""
    return huo.DOADPStep(G=1.0, k=int(2000 * ratio), d=2000, p=p, q=20000, T=120000)


@pytest.mark.parametrize("p, ratio, sigma", [(1, 1, 75.1), (0.8, 1, 60.0), (1, 0.3, 41.1),
                                              (0.8, 0.3, 32.9)])
def test_sigma_bound_examples(p, ratio, sigma):
    s = huo.theorem1_sigma(0.01, 1e-5, _eps_lr(p, ratio))
    by_hand = math.sqrt(160 * ratio * p ** 2 * 120000 * LN / (20000 ** 2 * 0.01 ** 2))
    assert s == pytest.approx(by_hand, rel=1e-12)
    assert round(s, 1) == sigma
    assert huo.theorem1_failures(0.01, s, 1e-5, _eps_lr(p, ratio)) == []
    assert huo.theorem1_epsilon(s, 1e-5, _eps_lr(p, ratio)) == pytest.approx(0.01)


def test_proof_accountant_by_hand():
    m = _eps_lr(1, 1)
    sigma = huo.theorem1_sigma(0.01, 1e-5, m)
    a = huo.proof_account(sigma, 1e-5, m)
    eps_t = math.sqrt(2 * LN) * 2.0 / sigma                   # Delta = 2 G sqrt(k/d) = 2
    eps_amp = math.log(1 + (1 / 20000) * (math.exp(eps_t) - 1))
    S = 120000 * eps_amp ** 2
    eps_tilde = math.sqrt(2 * S * math.log(math.e + 1)) + S   # delta_hat = sqrt(S)
    delta = 1 - (1 - math.sqrt(S)) * (1 - 1e-5 / 20000) ** 120000
    assert a.eps_step == pytest.approx(eps_t, rel=1e-12)
    assert a.eps_step_amplified == pytest.approx(eps_amp, rel=1e-9)
    assert a.eps_step_proof_bound == pytest.approx(2 * eps_t / 20000, rel=1e-12)
    assert a.epsilon == pytest.approx(eps_tilde, rel=1e-9)
    assert a.delta == pytest.approx(delta, rel=1e-7)   # (1 - 5e-10)^T loses digits by hand
    # the numbers: eps_t = 0.1291, eps~ = 0.00387 <= 0.01, delta = 0.00245 (not small)
    assert (round(a.eps_step, 4), round(a.epsilon, 5), round(a.delta, 5)) == (0.1291, 0.00387,
                                                                             0.00245)
    assert a.valid and a.epsilon <= 0.01
    # the proof's bound on eps'_t, as the paper uses it: S <= eps^2/5, delta_hat <= eps/sqrt(5)
    b = huo.proof_account(sigma, 1e-5, m, amplification="proof")
    assert b.S <= 0.01 ** 2 / 5 * (1 + 1e-12) and b.epsilon <= 0.01


@pytest.mark.parametrize("ratio", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("p", [0.5, 0.8, 1.0])
@pytest.mark.parametrize("q, T, eps, delta0", [(1000, 60000, 0.05, 1e-5),
                                               (20000, 120000, 0.01, 1e-6),
                                               (200, 20000, 0.5, 1e-3)])
def test_theorem1_holds_on_a_grid(ratio, p, q, T, eps, delta0):
    """Catalogue claim 4: sigma at (7) with T >= T_min gives eps~ <= eps (Lemma 5's conditions
    hold); sigma^2 scales as k p^2 (Remark 1)."""
    m = huo.DOADPStep(G=2.0, k=max(1, int(100 * ratio)), d=100, p=p, q=q, T=T)
    assert T >= huo.theorem1_min_iterations(eps, p, q)
    sigma = huo.theorem1_sigma(eps, delta0, m)
    for amp in ("exact", "proof"):
        a = huo.proof_account(sigma, delta0, m, amplification=amp)
        assert a.valid and a.epsilon <= eps
    full = huo.theorem1_sigma(eps, delta0, huo.DOADPStep(2.0, 100, 100, 1.0, q, T))
    assert (sigma / full) ** 2 == pytest.approx(m.k / 100 * p ** 2, rel=1e-12)


def test_conditions_fail_loudly():
    m = _eps_lr(1, 1)
    # Fig. 2(b) at eps = 0.1 on epsilon: T_min = q^2 eps^2 / 4 = 1e6 > T = 120000
    assert huo.theorem1_min_iterations(0.1, 1, 20000) == pytest.approx(1e6)
    fails = huo.theorem1_failures(0.1, huo.theorem1_sigma(0.1, 1e-5, m), 1e-5, m)
    assert len(fails) == 1 and "T = 120000 <" in fails[0]
    with pytest.raises(ParameterError, match="Theorem 1"):
        huo.calibrate_sigma(0.1, m, "theorem1")
    assert any("outside (0, 1]" in f for f in huo.theorem1_failures(2.0, 1e3, 1e-5, m))
    assert any("sigma" in f for f in huo.theorem1_failures(0.01, 10.0, 1e-5, m))
    # a tiny sigma breaks Lemma 5's eps'_t <= 0.9 and delta_hat <= 1: reported, not hidden
    bad = huo.proof_account(0.05, 1e-5, huo.DOADPStep(1.0, 10, 10, 1.0, 10, 100))
    assert not bad.valid and any("0.9" in f for f in bad.failures)
    assert huo.epsilon_of(0.05, huo.DOADPStep(1.0, 10, 10, 1.0, 10, 100), "proof") == math.inf
    with pytest.raises(ParameterError):
        huo.DOADPStep(G=1.0, k=11, d=10, p=1.0, q=10, T=10)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.05, 2.0), p=st.floats(0.3, 1.0), ratio=st.sampled_from([0.1, 0.4, 1.0]),
       q=st.integers(50, 5000), T=st.integers(10, 5000), delta=st.sampled_from([None, 0.05]))
def test_proof_calibration_never_overshoots(eps, p, ratio, q, T, delta):
    m = huo.DOADPStep(G=1.0, k=max(1, int(50 * ratio)), d=50, p=p, q=q, T=T)
    sigma = huo.calibrate_sigma(eps, m, "proof", delta=delta, rel_tol=1e-9)
    assert huo.epsilon_of(sigma, m, "proof", delta=delta) <= eps
    assert huo.epsilon_of(sigma * (1 - 1e-6), m, "proof", delta=delta) > eps   # tight
    if delta is not None:
        assert huo.proof_account(sigma, 1e-5, m, huo.delta_hat_for(delta, 1e-5, m)).delta == \
            pytest.approx(delta, rel=1e-9)


def test_dp_accounting_accounts():
    m = huo.DOADPStep(G=1.0, k=30, d=100, p=0.8, q=200, T=400)
    sigma = 1.5
    rdp = huo.dp_accounting_epsilon(sigma, 1e-5, m, "rdp")
    pld = huo.dp_accounting_epsilon(sigma, 1e-5, m, "pld")
    assert 0 < pld <= rdp * 1.02                       # PLD is the tighter of the two
    visible = huo.dp_accounting_epsilon(sigma, 1e-5, m, "rdp", activation="visible")
    full = huo.dp_accounting_epsilon(sigma, 1e-5, m, "rdp", sensitivity="full")
    assert visible > rdp and full > rdp
    assert huo.dp_accounting_epsilon(2 * sigma, 1e-5, m, "rdp") < rdp
    # p = 1: activation visible or hidden is the same mechanism
    m1 = huo.DOADPStep(G=1.0, k=30, d=100, p=1.0, q=200, T=400)
    assert huo.dp_accounting_epsilon(sigma, 1e-5, m1, "rdp", activation="visible") == \
        pytest.approx(huo.dp_accounting_epsilon(sigma, 1e-5, m1, "rdp"), rel=1e-9)
    s = huo.calibrate_sigma(0.5, m, "rdp", delta=1e-5, rel_tol=1e-2)
    assert huo.dp_accounting_epsilon(s, 1e-5, m, "rdp") <= 0.5
    assert huo.dp_accounting_epsilon(s * 0.97, 1e-5, m, "rdp") > 0.5
    with pytest.raises(ParameterError):
        huo.dp_accounting_epsilon(sigma, 1e-5, m, "pld", activation="visible")


def test_guarantee_objects():
    m = _eps_lr(0.8, 0.3)
    sigma = huo.theorem1_sigma(0.01, 1e-5, m)
    g = huo.guarantee(sigma, m, "theorem1")
    assert g.epsilon == pytest.approx(0.01) and 0 < g.delta < 0.01 and g.horizon == 120000
    p = huo.guarantee(sigma, m, "proof")
    assert p.epsilon < g.epsilon and "Lemmas 1, 4, 5" in p.theorem
    with pytest.raises(ParameterError, match="T = 120000"):
        huo.guarantee(huo.theorem1_sigma(0.1, 1e-5, m) * 0.5, m, "theorem1")


def test_a_requested_delta_is_met_or_refused():
    """DO-ADP's Theorem 1 certifies its own delta (the proof's delta_hat = sqrt(S), ~0.1 here): a
    caller asking for delta = 1e-5 gets that delta or an error, never a larger one (calibrate
    returned a sigma whose guarantee had delta = 0.04)."""
    from dpnet import graphs, problems
    from dpnet.algorithms import DOADP

    p = problems.NonconvexLogistic.random(n_agents=6, samples=200, dim=10, seed=0)
    g = graphs.ring(6)
    alg = DOADP(0.2, 0.5, 0.5, sigma=4.0, clip=1.0, batch_size=10)
    assert alg.privacy(p, g, 100).delta > 1e-5                  # what theorem1 certifies alone
    with pytest.raises(ParameterError, match=r"delta=1e-05 .* it certifies delta = 0\.1"):
        alg.privacy(p, g, 100, delta=1e-5)
    with pytest.raises(ParameterError):
        alg.calibrate(0.5, p, g, iterations=100, delta=1e-5)
    tuned = alg.calibrate(0.5, p, g, iterations=100, accountant="proof", delta=1e-3)
    assert tuned.privacy(p, g, 100, accountant="proof", delta=1e-3).delta <= 1e-3
