"""Issue 14: Theorem 1 of paper 001 (DO-ADP) with a minibatch of B records per step.

In the proof, B enters twice: the l2 sensitivity of the minibatch mean is 2G sqrt(k/d)/B
(Lemma 1: eps_t = sqrt(2 log(1.25/delta0)) 2G sqrt(k/d) / (B sigma)) and the sampling rate is pB/q
(Lemma 4: eps'_t <= 2 (pB/q) eps_t). Their product is B-free, so eq. (7),
sigma^2 >= 160 k p^2 T log(1.25/delta0) G^2 / (q^2 d eps^2), is the same for every B; only (8)'s
eps_t^2 <= 1/5 changes, into the horizon T >= q^2 eps^2 / (4 p^2 B^2). theorem1_sigma once divided
by B (and theorem1_epsilon with it), certifying an epsilon B times too small."""

from __future__ import annotations

import math

import pytest

from dpnet.errors import ParameterError
from dpnet.lab.audit import engine as A
from dpnet.privacy import huo

LN5 = math.log(1.25 / 1e-5)      # = 11.7360...


def _eps_lr(p: float, ratio: float, B: int) -> huo.DOADPStep:
    """The epsilon-dataset setting of Fig. 2 (catalogue 2.B) with B records per step: G = 1,
    d = 2000, q = 20000, T = 120000."""
    return huo.DOADPStep(G=1.0, k=int(2000 * ratio), d=2000, p=p, q=20000, T=120000, batch_size=B)


@pytest.mark.parametrize("B", [1, 8])
def test_eq7_by_hand_is_the_same_for_one_and_eight_records(B):
    # (7) at G = 1, k/d = 1, p = 1, T = 120000, q = 20000, eps = 0.01, delta0 = 1e-5:
    # sigma^2 = 160 * 1 * 1 * 120000 * LN5 * 1 / (20000^2 * 1 * 0.01^2)
    #         = 1.92e7 * LN5 / 4e4 = 480 * LN5 = 480 * 11.7360 = 5633.3,  sigma = 75.055
    by_hand = math.sqrt(480 * LN5)
    assert by_hand == pytest.approx(75.055, abs=5e-4)
    s = huo.theorem1_sigma(0.01, 1e-5, _eps_lr(1, 1, B))
    assert s == pytest.approx(by_hand, rel=1e-12)
    assert round(s, 1) == 75.1                    # catalogue 2.B, now for B = 8 as well
    # (p, k/d) = (0.8, 0.3): sigma^2 = 480 * 0.3 * 0.8^2 * LN5 = 92.16 * LN5, sigma = 32.888
    s = huo.theorem1_sigma(0.01, 1e-5, _eps_lr(0.8, 0.3, B))
    assert s == pytest.approx(math.sqrt(92.16 * LN5), rel=1e-12)
    assert round(s, 1) == 32.9
    # the horizon: q^2 eps^2 / (4 p^2 B^2) = 4e8 * 1e-4 / (4 B^2) = 1e4 / B^2 (156.25 at B = 8)
    assert huo.theorem1_min_iterations(0.01, 1, 20000, B) == pytest.approx(1e4 / B ** 2,
                                                                           rel=1e-12)
    assert huo.theorem1_failures(0.01, by_hand, 1e-5, _eps_lr(1, 1, B)) == []


def test_eight_records_certify_eight_times_the_old_epsilon():
    m8 = _eps_lr(1, 1, 8)
    # (7) solved for eps at sigma = 50 (k = d, p = G = 1), the same for B = 1 and B = 8:
    # eps^2 = 160 k p^2 T LN5 G^2 / (q^2 d sigma^2) = 1.92e7 * LN5 / (4e8 * 50^2), eps = 0.015011
    eps = math.sqrt(1.92e7 * LN5 / (4e8 * 2500))
    assert eps == pytest.approx(0.0150110, rel=1e-5)
    assert huo.theorem1_epsilon(50.0, 1e-5, m8) == pytest.approx(eps, rel=1e-12)
    assert huo.theorem1_epsilon(50.0, 1e-5, m8) == huo.theorem1_epsilon(50.0, 1e-5, _eps_lr(1, 1, 1))
    # the old value was eps / B = 0.00187639: 8 times too small
    assert huo.theorem1_epsilon(50.0, 1e-5, m8) / 8 == pytest.approx(0.00187638, rel=1e-5)
    # and at the bound (7) for eps = 0.01 the B = 8 epsilon is 0.01 (the old code said 0.00125)
    assert huo.theorem1_epsilon(math.sqrt(480 * LN5), 1e-5, m8) == pytest.approx(0.01, rel=1e-12)


def test_the_proof_with_eight_records_by_hand():
    """The proof's chain at (7) with B = 8: B cancels from eps'_t; the old sigma / 8 fails it."""
    m8, m1 = _eps_lr(1, 1, 8), _eps_lr(1, 1, 1)
    sigma = math.sqrt(480 * LN5)
    a8 = huo.proof_account(sigma, 1e-5, m8, amplification="proof")
    a1 = huo.proof_account(sigma, 1e-5, m1, amplification="proof")
    eps_t = math.sqrt(2 * LN5) * (2.0 / 8) / sigma       # Delta = 2 G sqrt(k/d) / B = 1/4
    assert a8.eps_step == pytest.approx(eps_t, rel=1e-12)
    assert a8.eps_step == pytest.approx(a1.eps_step / 8, rel=1e-12)
    bound = 2 * (8 / 20000) * eps_t                      # 2 (pB/q) eps_t = 2 (1/q) eps_t(B = 1)
    assert a8.eps_step_proof_bound == pytest.approx(bound, rel=1e-12)
    assert a8.eps_step_proof_bound == pytest.approx(a1.eps_step_proof_bound, rel=1e-12)
    # sum_t eps'_t^2 = 32 T p^2 k LN5 G^2 / (q^2 sigma^2 d) = eps^2 / 5 exactly at (7)
    assert a8.S == pytest.approx(0.01 ** 2 / 5, rel=1e-9)
    assert a8.valid and a8.epsilon <= 0.01
    assert a8.delta > a1.delta                           # delta_t = p B delta0 / q grows with B
    exact = huo.proof_account(sigma, 1e-5, m8)
    assert exact.valid and exact.epsilon <= 0.01
    # the old sigma / 8 makes eps'_t 8 times larger: S = 64 eps^2 / 5, eps~ > 0.05 >> 0.01
    old = huo.proof_account(sigma / 8, 1e-5, m8, amplification="proof")
    assert old.S == pytest.approx(64 * 0.01 ** 2 / 5, rel=1e-9) and old.epsilon > 0.05


@pytest.mark.parametrize("B, T", [(4, 4000), (8, 1000)])
@pytest.mark.parametrize("p", [0.5, 1.0])
def test_the_relaxed_horizon_suffices(B, T, p):
    """q = 1000, eps = 0.5: T_min = q^2 eps^2/(4 p^2) = 62500/p^2 for one record, 62500/(p^2 B^2)
    with B: T between the two. At (7) the proof's eps_t^2 = q^2 eps^2/(20 p^2 T B^2) <= 1/5 and
    eps~ <= eps by either amplification."""
    T = int(T / p ** 2)
    m = huo.DOADPStep(G=2.0, k=30, d=100, p=p, q=1000, T=T, batch_size=B)
    assert T >= huo.theorem1_min_iterations(0.5, p, 1000, B) == pytest.approx(62500 / (p * B) ** 2)
    assert T < huo.theorem1_min_iterations(0.5, p, 1000)
    sigma = huo.theorem1_sigma(0.5, 1e-5, m)
    assert huo.theorem1_failures(0.5, sigma, 1e-5, m) == []
    for amp in ("exact", "proof"):
        a = huo.proof_account(sigma, 1e-5, m, amplification=amp)
        assert a.eps_step ** 2 <= 1000 ** 2 * 0.5 ** 2 / (20 * p ** 2 * T * B ** 2) * (1 + 1e-12)
        assert a.valid and a.epsilon <= 0.5
    g = huo.guarantee(sigma, m, "theorem1")     # Theorem 1 certifies B > 1 runs now
    assert g.epsilon == pytest.approx(0.5, rel=1e-12) and 0 < g.delta < 1
    short = huo.DOADPStep(G=2.0, k=30, d=100, p=p, q=1000, T=T // 10, batch_size=B)
    fails = huo.theorem1_failures(0.5, sigma, 1e-5, short)
    assert any("q^2 eps^2 / (4 p^2 B^2)" in f and f"(B = {B})" in f for f in fails)


def test_batch_arguments_are_checked():
    with pytest.raises(ParameterError, match="batch_size"):
        huo.theorem1_min_iterations(0.5, 1.0, 10, 11)


def test_doadp_batch_audit_target_claim_by_hand():
    """The audit target doadp-batch (B = 8 of q = 16, sigma = 2, T = 3, G = 1, k = d = 1, p = 1):
    its claim is the proof's chain with the B-free bound eps'_t = 2 (pB/q) eps_t at delta = 1e-3,
    delta0 = 1e-4."""
    t = A.get_target("doadp-batch")
    g = A.claimed_guarantee(t)
    ln = math.log(1.25 / 1e-4)                          # = 9.4335
    eps_t = math.sqrt(2 * ln) * (2.0 / 8) / 2.0          # Delta = 2G/B = 1/4: 0.54297
    eps_amp = 2 * (8 / 16) * eps_t                       # = eps_t
    S = 3 * eps_amp ** 2                                 # 0.88445
    delta_hat = 1 - (1 - 1e-3) / (1 - 0.5 * 1e-4) ** 3   # delta_t = pB delta0/q = 5e-5
    eps = math.sqrt(2 * S * math.log(math.e + math.sqrt(S) / delta_hat)) + S
    assert g.epsilon == pytest.approx(eps, rel=1e-9)
    assert round(g.epsilon, 3) == 4.406 and g.delta == pytest.approx(1e-3, rel=1e-9)
    # the target's problems: one record of agent 0 replaced, q = 16, B = 8 drawn per step
    a, b = t.problems()
    assert a.m == b.m == 16 and t.algorithm().batch_size == 8
    assert float((a.c - b.c).abs().sum()) == pytest.approx(2.0)
