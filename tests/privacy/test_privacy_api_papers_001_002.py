"""The one privacy API on paper 001's algorithms (DO-ADP, DP-DDA, DPDO: Huo et al.'s
experiments) and paper 002's (Algorithm 1, LDOL, DOLA, DMOD, PDOP = DPDO: Chen & Wang's): every
registered accountant honours the contract of ``tests/privacy/test_privacy_api.py`` (positive,
monotone in noise and horizon, misspelled constants refused with the known names listed, a
calibration that never overshoots), and the generic accountants over ``mechanism()`` never report
more than the theorems they decompose.

The contract is ``tests/privacy/_accountant_contract.py``'s, over these algorithms' own problems
(with records for paper 001) and graphs (Laplacian-like weights for paper 002)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _accountant_contract import AccountantContract  # noqa: E402  (tests/privacy on sys.path)

from dpnet import graphs
from dpnet.algorithms import DMOD, DOADP, DOLA, DPDDA, DPDO, LDOL, LDPOnline
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.privacy import accountants
from dpnet.privacy.assumptions import Assumptions
from dpnet.problems.base import ProblemConstants

N, D, Q = 6, 4, 10
RING = graphs.ring(N)
RING_W = graphs.ring(N, weight=0.3)            # paper 002's Laplacian-like convention


class Records(ProblemConstants):
    """Problem constants of a finite-sum problem with ``m`` records per agent (paper 001's q)."""

    def __init__(self, n: int, d: int, m: int) -> None:
        super().__init__(n, d, records_per_agent=m)


PROBLEM = ProblemConstants(N, D)
RECORDS = Records(N, D, Q)
VS = np.array([0.55, 0.56, 0.57, 0.55, 0.56, 0.57])
SIGMA0 = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0])      # per agent: the calibration scales all

# name: (maker of the algorithm at noise level s, problem, graph, constants)
SETUPS = {
    # Theorem 1 at K = 12: eps = 15/sigma (k = d, q = 10, p = 1): 0.2 at s = 5
    "doadp": (lambda s: DOADP(0.1, 0.1, 0.1, sigma=15.0 * s, coordinate_clip=1.0), RECORDS, RING, {}),
    "doadp-proof": (lambda s: DOADP(0.1, 0.1, 0.1, sigma=10.0 * s, coordinate_clip=1.0), RECORDS, RING,
                    {"delta": 1e-3}),
    "doadp-sparse": (lambda s: DOADP(0.1, 0.1, 0.1, sigma=2.0 * s, k=2, coordinate_clip=1.0), RECORDS, RING,
                     {"delta": 1e-5, "sensitivity": "topk"}),
    "doadp-poisson": (lambda s: DOADP(0.1, 0.1, 0.1, sigma=2.0 * s, p=0.5, coordinate_clip=1.0,
                                      batch_size=2, sampling="poisson"), RECORDS, RING, {}),
    "dpdda": (lambda s: DPDDA(1.0, sigma=10.0 * s, clip=1.0), RECORDS, RING, {"delta": 1e-3}),
    "dpdda-poisson": (lambda s: DPDDA(1.0, sigma=2.0 * s, clip=1.0, batch_size=2,
                                      sampling="poisson"), RECORDS, RING, {}),
    "dpdda-thm1": (lambda s: DPDDA(1.0, sigma=15.0 * s, clip=1.0), RECORDS, RING, {}),
    "dpdo": (lambda s: DPDO(0.3, 0.9, 0.95, M=s), PROBLEM, RING, {"gradient_bound": 1.0}),
    "dpdo-record": (lambda s: DPDO(0.3, 0.9, 0.95, M=s), RECORDS, RING,
                    {"gradient_bound": 1.0, "adjacency": "record"}),
    "ldp_online": (lambda s: LDPOnline(1.0, 0.71, s * SIGMA0, VS), PROBLEM, RING_W,
                   {"l1_gradient_bound": 1.0}),
    "ldol": (lambda s: LDOL(1.0, 0.71, 1.0, 0.7, s * SIGMA0, VS - 0.5), PROBLEM, RING_W,
             {"l1_gradient_bound": 1.0}),
    "dola": (lambda s: DOLA(0.5, 0.5, s), PROBLEM, RING, {"gradient_bound": 1.0}),
    "dola-all": (lambda s: DOLA(0.5, 0.5, s), PROBLEM, RING,
                 {"gradient_bound": 1.0, "variant": "all-data"}),
    "dmod": (lambda s: DMOD(0.5, 0.5, s), PROBLEM, RING, {"gradient_bound": 1.0}),
}


class PaperContract(AccountantContract):
    """The shared contract over these algorithms' problems and graphs (noise level 5 x factor)."""

    setups = {name: (lambda f, make=make: make(5.0 * f), problem, graph, constants)
              for name, (make, problem, graph, constants) in SETUPS.items()}
    seed = 11


# ---- paper 001: DO-ADP, DP-DDA, DPDO --------------------------------------------------------------
# Theorem 1 and the proof's accountant raise where their hypotheses fail (epsilon > 1, a short
# horizon, eps'_t > 0.9): a calibration's bracket (doubling from the current noise) must stay
# inside them, hence targets <= 0.3 (Theorem 1: T = 12 >= q^2 eps^2/4 needs eps <= 0.69) and
# <= 1 (the proof's chain).

class TestDOADPTheorem1(PaperContract):
    setup, accountant, targets = "doadp", "theorem1", (0.02, 0.3)


class TestDOADPProof(PaperContract):
    setup, accountant, targets = "doadp-proof", "proof", (0.05, 1.0)


class TestDOADPRdp(PaperContract):
    setup, accountant = "doadp", "rdp"


class TestDOADPRdpTopk(PaperContract):
    setup, accountant = "doadp-sparse", "rdp"


class TestDOADPPld(PaperContract):
    setup, accountant, K, n_targets, targets = "doadp", "pld", 3, 1, (0.5, 5.0)


class TestDOADPPoissonRdp(PaperContract):
    setup, accountant = "doadp-poisson", "rdp"


class TestDOADPPoissonPld(PaperContract):
    setup, accountant, K, n_targets, targets = "doadp-poisson", "pld", 3, 1, (0.5, 5.0)


class TestDPDDAPoissonRdp(PaperContract):
    setup, accountant = "dpdda-poisson", "rdp"


class TestDPDDAPoissonPld(PaperContract):
    setup, accountant, K, n_targets, targets = "dpdda-poisson", "pld", 3, 1, (0.5, 5.0)


class TestDPDDAProof(PaperContract):
    setup, accountant, targets = "dpdda", "proof", (0.05, 1.0)


class TestDPDDATheorem1(PaperContract):
    setup, accountant, targets = "dpdda-thm1", "theorem1", (0.02, 0.3)


class TestDPDDARdp(PaperContract):
    setup, accountant = "dpdda", "rdp"


class TestDPDDAPld(PaperContract):
    setup, accountant, K, n_targets, targets = "dpdda", "pld", 3, 1, (0.5, 5.0)


class TestDPDOHuang(PaperContract):
    setup, accountant = "dpdo", "huang"


class TestDPDOHuangRecord(PaperContract):
    setup, accountant = "dpdo-record", "huang"


class TestDPDOLaplace(PaperContract):
    setup, accountant = "dpdo", "laplace"


class TestDPDORdp(PaperContract):
    setup, accountant, n_targets = "dpdo", "rdp", 3


class TestDPDOPld(PaperContract):
    setup, accountant, K, n_targets, targets = "dpdo", "pld", 3, 1, (1.0, 20.0)


# ---- paper 002: Algorithm 1, LDOL, DOLA, DMOD (PDOP is DPDO above) ---------------------------------

class TestLDPOnlineChenWang(PaperContract):
    setup, accountant = "ldp_online", "chen_wang"


class TestLDPOnlineLaplace(PaperContract):
    setup, accountant = "ldp_online", "laplace"


class TestLDPOnlineRdp(PaperContract):
    setup, accountant, n_targets = "ldp_online", "rdp", 3


class TestLDPOnlinePld(PaperContract):
    setup, accountant, K, n_targets, targets = "ldp_online", "pld", 3, 1, (2.0, 20.0)


class TestLDOLChenWang(PaperContract):
    setup, accountant = "ldol", "chen_wang"


class TestLDOLLaplace(PaperContract):
    setup, accountant = "ldol", "laplace"


class TestLDOLRdp(PaperContract):
    setup, accountant, n_targets = "ldol", "rdp", 3


class TestDOLALi(PaperContract):
    # the published account charges each sample to one iteration: no horizon
    setup, accountant, horizon_grows = "dola", "li", False


class TestDOLALiAllData(PaperContract):
    setup, accountant = "dola-all", "li"


class TestDOLALaplace(PaperContract):
    setup, accountant = "dola", "laplace"


class TestDOLARdp(PaperContract):
    setup, accountant, n_targets = "dola", "rdp", 3


class TestDMODYuan(PaperContract):
    setup, accountant, horizon_grows = "dmod", "yuan", False


class TestDMODLaplace(PaperContract):
    setup, accountant = "dmod", "laplace"


# ---- registry, defaults, options ------------------------------------------------------------------

EXPECTED = {
    DOADP: ("theorem1", {"theorem1", "proof", "rdp", "pld", "laplace"}),
    DPDDA: ("proof", {"theorem1", "proof", "rdp", "pld", "laplace"}),
    DPDO: ("huang", {"huang", "laplace", "rdp", "pld"}),
    LDPOnline: ("chen_wang", {"chen_wang", "laplace", "rdp", "pld"}),
    LDOL: ("chen_wang", {"chen_wang", "laplace", "rdp", "pld"}),
    DOLA: ("li", {"li", "laplace", "rdp", "pld"}),
    DMOD: ("yuan", {"yuan", "li", "laplace", "rdp", "pld"}),
}


@pytest.mark.parametrize("name", ["doadp", "dpdda", "dpdo", "ldp_online", "ldol", "dola", "dmod"])
def test_registered_accountants_and_defaults(name):
    alg = SETUPS[name][0](5.0)
    default, names = EXPECTED[type(alg)]
    assert alg.default_accountant == default
    assert set(accountants.available(alg)) == names
    assert not hasattr(type(alg), "calibrated")        # one calibration: Algorithm.calibrate


def test_doadp_class_accountants_shadow_the_generic_ones_and_keep_their_options():
    table = accountants.available(DOADP(0.1, 0.1, 0.1, sigma=1.0))
    assert not table["rdp"].generic and not table["pld"].generic and table["laplace"].generic
    assert table["theorem1"].options == ("delta0", "sensitivity", "activation")
    assert table["proof"].options == ("delta0", "sensitivity", "amplification", "activation")
    assert table["rdp"].options == ("sensitivity", "activation")
    assert table["pld"].options == ("sensitivity", "activation", "pld_discretization")
    dpdda = accountants.available(DPDDA(1.0, sigma=1.0))
    assert dpdda["proof"].options == ("delta0", "amplification", "activation")


def test_an_option_of_another_accountant_is_refused_by_name():
    alg = SETUPS["doadp"][0](5.0)
    with pytest.raises(UnknownNameError, match="amplification"):
        alg.privacy(RECORDS, RING, 12, accountant="theorem1", amplification="exact")
    with pytest.raises(UnknownNameError, match="delta0"):
        alg.privacy(RECORDS, RING, 12, accountant="rdp", delta0=1e-5)
    with pytest.raises(UnknownNameError, match="variant"):
        SETUPS["dpdo"][0](5.0).privacy(PROBLEM, RING, 12, gradient_bound=1.0, variant="x")
    with pytest.raises(UnknownNameError, match="'d'"):   # paper 002's d: l1_gradient_bound
        SETUPS["ldp_online"][0](5.0).privacy(PROBLEM, RING_W, 12, d=1.0)
    with pytest.raises(UnknownNameError, match="'G'"):   # paper 001's G: gradient_bound
        SETUPS["doadp"][0](5.0).privacy(RECORDS, RING, 12, G=1.0)


def test_no_noise_is_no_guarantee_through_every_accountant():
    for name in ("theorem1", "proof", "rdp", "pld"):
        assert not DOADP(0.1, 0.1, 0.1, coordinate_clip=1.0).privacy(RECORDS, RING, 12,
                                                          accountant=name).is_private
    assert not DPDO(0.3, 0.9, 0.95).privacy(PROBLEM, RING, 12, gradient_bound=1.0).is_private


def test_calibrated_noise_is_what_runs():
    """A calibration scales the number the accountant reads; the noise drawn follows it."""
    alg = DPDO(0.3, 0.9, 0.95, M=1.0).calibrate(2.0, PROBLEM, RING, 12, gradient_bound=1.0)
    assert alg.noise.scale_at(0, N)[0] == alg.M != 1.0
    d = DOADP(0.1, 0.1, 0.1, sigma=1.0, coordinate_clip=1.0).calibrate(0.5, RECORDS, RING, 12,
                                                             accountant="rdp", delta=1e-5)
    assert d._noise.scale_at(0, N)[0] == d.sigma != 1.0
    o = DOLA(0.5, 0.5, 1.0).calibrate(3.0, PROBLEM, RING, 12, gradient_bound=1.0)
    assert o.noise.scale_at(1, N)[0] == o.noise_scale != 1.0
    lo = SETUPS["ldp_online"][0](1.0).calibrate(50.0, PROBLEM, RING_W, 12, l1_gradient_bound=1.0)
    factor = lo.sigma0[0] / SIGMA0[0]
    np.testing.assert_allclose(lo.sigma0, factor * SIGMA0, rtol=1e-14)
    np.testing.assert_allclose(lo.noise.scale_at(0, N), lo.sigma0 / math.sqrt(2), rtol=1e-14)


# ---- the generic accountants against the theorems ----------------------------------------------

def _pair(name, K, accountant, **kw):
    make, problem, graph, constants = SETUPS[name]
    return make(5.0).privacy(problem, graph, K, accountant=accountant, **constants, **kw)


@pytest.mark.parametrize("name,theorem", [("dpdo", "huang"), ("dpdo-record", "huang"),
                                          ("ldp_online", "chen_wang"), ("ldol", "chen_wang"),
                                          ("dola-all", "li")])
def test_basic_composition_of_the_mechanism_is_the_theorem(name, theorem):
    """Pure-epsilon Laplace algorithms whose theorem is basic composition over the releases:
    the generic ``laplace`` account is the theorem (per agent), and rdp/pld at delta > 0 are
    never above it."""
    exact = _pair(name, 20, theorem)
    basic = _pair(name, 20, "laplace") if name != "dola-all" else \
        SETUPS["dola"][0](5.0).privacy(PROBLEM, RING, 20, accountant="laplace",
                                       gradient_bound=1.0)
    assert basic.epsilon == pytest.approx(exact.epsilon, rel=1e-12)
    assert basic.per_agent == pytest.approx(exact.per_agent, rel=1e-12)
    assert exact.delta == basic.delta == 0
    base = "dola" if name == "dola-all" else name
    for acc in ("rdp", "pld"):
        g = _pair(base, 20, acc, delta=1e-5)
        assert g.delta == 1e-5 and g.epsilon <= exact.epsilon * (1 + 1e-9)


def test_ldp_online_mechanism_groups_agents_by_their_noise():
    groups = SETUPS["ldp_online"][0](5.0).mechanism(PROBLEM, RING_W, 7,
                                                    Assumptions(l1_gradient_bound=1.0))
    assert sorted(len(a) for a, _ in groups) == [1] * N       # 6 distinct (sigma0_i, varsigma_i)
    same = LDPOnline(1.0, 0.71, 1.0, 0.55).mechanism(PROBLEM, RING_W, 7,
                                                    Assumptions(l1_gradient_bound=1.0))
    assert len(same) == 1 and len(same[0][0]) == N and len(same[0][1].releases[0]) == 7


def test_dola_published_account_is_below_its_mechanism():
    """DOLA's (and DMOD's) published account charges a sample to the one iteration it is drawn in
    (parallel composition); the mechanism follows it through every later all-data gradient, so
    the generic accountants' figure is the ``all-data`` variant, above the published one: the
    theorem, not the generic account, is the smaller (and less conservative) claim here."""
    published = _pair("dola", 20, "li").epsilon
    assert _pair("dola", 20, "laplace").epsilon > published
    assert _pair("dmod", 20, "laplace").epsilon == pytest.approx(
        _pair("dola-all", 20, "li").epsilon, rel=1e-12)


def test_doadp_generic_accountants_read_its_gaussian_mechanism():
    """DO-ADP is (epsilon, delta): the generic ``laplace`` refuses its Gaussian releases; the
    generic rdp/pld (shadowed by the class's own accountants of those names) compose the same
    subsampled Gaussian events: RDP identically (the class adds orders only where the optimum is
    the largest default one), PLD up to the discretisation."""
    alg = DOADP(0.1, 0.1, 0.1, sigma=50.0, coordinate_clip=1.0)
    with pytest.raises(ParameterError, match="gaussian"):
        alg.privacy(RECORDS, RING, 12, accountant="laplace")
    a = Assumptions(gradient_bound=1.0, delta=1e-5)
    own_rdp = alg.privacy(RECORDS, RING, 12, accountant="rdp", gradient_bound=1.0, delta=1e-5)
    own_pld = alg.privacy(RECORDS, RING, 12, accountant="pld", gradient_bound=1.0, delta=1e-5)
    gen_rdp = accountants.rdp_accountant(alg, RECORDS, RING, 12, a)
    gen_pld = accountants.pld_accountant(alg, RECORDS, RING, 12, a)
    assert own_rdp.epsilon <= gen_rdp.epsilon * (1 + 1e-12)
    assert gen_rdp.epsilon == pytest.approx(own_rdp.epsilon, rel=1e-9)
    assert gen_pld.epsilon == pytest.approx(own_pld.epsilon, rel=1e-3)
    (agents, mech), = alg.mechanism(RECORDS, RING, 12, a)
    r = mech.releases[0]
    assert len(agents) == N and len(r) == 12 and r.noise == "gaussian"
    assert r.sampling == pytest.approx(1 / Q) and r.sensitivity[0] == pytest.approx(2.0)
    dpdda = DPDDA(1.0, sigma=50.0, clip=1.0)
    assert accountants.rdp_accountant(dpdda, RECORDS, RING, 12, a).epsilon == pytest.approx(
        dpdda.privacy(RECORDS, RING, 12, accountant="rdp", delta=1e-5).epsilon, rel=1e-9)


def test_pdop_is_dpdo_calibrated_by_its_accountant():
    """Paper 002's PDOP: DPDO.for_chen_wang calibrates M through Algorithm.calibrate to exactly
    the budget (closed-form finish: the account is proportional to 1/M)."""
    a = DPDO.for_chen_wang(None, 3.0, 2.0, D, None, iterations=50)
    assert a.c == 1.0 and a.p == 0.999 and a.q == 0.9995
    g = a.privacy(PROBLEM, RING, 50, gradient_bound=2.0)
    assert g.epsilon <= 3.0 and g.epsilon == pytest.approx(3.0, rel=1e-13)
