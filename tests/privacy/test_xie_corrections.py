"""Paper 000's propositions with the audit's correction, and the notes guarantees carry."""

import math

import pytest

import dpnet
from dpnet.errors import ParameterError
from dpnet.lab.audit import engine as audit
from dpnet.privacy import xie
from dpnet.problems import ProblemConstants


def test_proposition1_derived_charges_the_first_x_message_at_scale_s_x_q():
    eta, L, s_x, s_y, q, delta = 0.5, 0.01, 2.0, 50.0, 0.2, 2.0
    tau = eta / (s_x * q) + 1 / s_y
    hand = tau * q * q * delta / (q * q - eta * L - q * eta * L)
    assert hand == pytest.approx(2.988235294, rel=1e-9)
    assert xie.pgtc_infinite_horizon(eta, L, s_x, s_y, q, delta, "derived") == pytest.approx(hand)
    printed = xie.pgtc_infinite_horizon(eta, L, s_x, s_y, q, delta)
    assert printed == pytest.approx((eta / s_x + 1 / s_y) * q * q * delta
                                    / (q * q - eta * L - q * eta * L))
    assert printed < hand


def test_proposition2_has_no_derived_form():
    with pytest.raises(ParameterError, match="variant"):
        xie.ppdc_infinite_horizon(0.5, 0.01, 2.0, 50.0, 0.2, 2.0, "derived")


def test_guarantees_carry_the_audit_notes():
    g = dpnet.graphs.ring(3)
    p = ProblemConstants(3, 1, 0.01)
    alg = dpnet.algorithms.DiaDSP(0.5, dpnet.noise.Laplace(2.0, decay=0.2),
                                  dpnet.noise.Laplace(50.0, decay=0.2))
    printed = alg.privacy(p, g, None, adjacency_radius=2.0, variant="printed")
    assert any("audit" in n for n in printed.notes)
    assert not alg.privacy(p, g, None, adjacency_radius=2.0, variant="derived").notes
    big_eta = dpnet.algorithms.DiaDSP(100.0, dpnet.noise.Laplace(200.0, decay=0.9),
                                      dpnet.noise.Laplace(1e4, decay=0.9))
    assert any("sqrt(eta)" in n for n in big_eta.privacy(p, g, 2, gradient_bound=1.0,
                                                         variant="printed").notes)
    assert not alg.privacy(p, g, 2, gradient_bound=1.0, variant="printed").notes  # eta <= 1


def test_the_default_variant_is_the_sound_one():
    """privacy() defaults to variant='sound': Proposition 1 derived, Theorem 3/6 the larger of
    the printed and derived per-step terms, Proposition 2 refused."""
    g, p = dpnet.graphs.ring(3), ProblemConstants(3, 1, 0.01)
    lap = dpnet.noise.Laplace
    alg = dpnet.algorithms.DiaDSP(0.5, lap(2.0, decay=0.2), lap(50.0, decay=0.2))
    default = alg.privacy(p, g, None, adjacency_radius=2.0)
    assert default.epsilon == pytest.approx(2.988235294, rel=1e-9)   # the derived form, by hand
    assert default.epsilon == alg.privacy(p, g, None, adjacency_radius=2.0, variant="derived").epsilon
    assert not default.notes
    for eta in (0.5, 100.0):   # Theorem 3: sqrt(eta) for eta <= 1, eta above (hand values)
        a = dpnet.algorithms.DiaDSP(eta, lap(200.0, decay=0.9), lap(1e4, decay=0.9))
        c = max(math.sqrt(eta), eta)
        hand = 4 * 1.0 * (c / 200.0 + 1 / 1e4) * (1 + 1 / 0.9 + 1 / 0.81)
        assert a.privacy(p, g, 2, gradient_bound=1.0).epsilon == pytest.approx(hand, rel=1e-12)
    assert a.privacy(p, g, 2, gradient_bound=1.0).epsilon > a.privacy(
        p, g, 2, gradient_bound=1.0, variant="printed").epsilon
    ppdc = dpnet.algorithms.PPDC(0.5, 0.5, 1.0, 0.5, dpnet.compression.Identity(),
                                 lap(2.0, decay=0.2), lap(50.0, decay=0.2))
    with pytest.raises(ParameterError, match="variant.*no corrected form.*Theorem 6"):
        ppdc.privacy(p, g, None, adjacency_radius=2.0)
    # Theorem 6, eta = 0.5 > 1/4: the derived x-term 4 eta exceeds the printed 2 sqrt(eta)
    hand = 4 * (0.5 / 2.0 + 1 / (1.0 * 50.0)) * (1 + 1 / 0.2 + 1 / 0.04)
    assert ppdc.privacy(p, g, 2, gradient_bound=1.0).epsilon == pytest.approx(hand, rel=1e-12)


def test_audit_of_the_derived_proposition_stays_below_its_claim():
    r = audit.audit("diadsp-prop1-derived", repetitions=40_000)
    assert r.claimed == pytest.approx(2.988235294, rel=1e-6)
    assert not r.violated
    assert 1.5 < r.epsilon <= r.claimed and math.isfinite(r.epsilon)
