"""One privacy API: assumptions by name, accountants by name, one calibration, nothing silently
accepted. The contract of ``_accountant_contract.py``, subclassed per (algorithm, accountant)
pair, as dp_accounting tests its accountants."""

import math

import numpy as np
import pytest
from _accountant_contract import AccountantContract  # noqa: E402  (tests/privacy on sys.path)

from dpnet import graphs, problems
from dpnet.algorithms import DPP2, PGTC, PPDC, DiaDSP
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.noise import Laplace
from dpnet.privacy import accountants
from dpnet.privacy.assumptions import Assumptions
from dpnet.privacy.calibration import calibrate
from dpnet.privacy.mechanism import Mechanism, Releases

N, D = 6, 4
GRAPH = graphs.ring(N)
PROBLEM = problems.ProblemConstants(N, D, 1.0)


def _noise(s, q=0.9):
    return Laplace(s, decay=q)


def _diadsp(s=5.0):
    return DiaDSP(0.1, _noise(s), _noise(2 * s))


def _pgtc(s=5.0):
    return PGTC(0.1, 0.2, 0.5, 0.5, noise_x=s, noise_y=2 * s, q=0.9)


def _ppdc(s=5.0):
    return PPDC(0.015, 45, 5, 0.2, noise_x=s, noise_v=2 * s, q=0.9)


def _dpp2(s=5.0):
    return DPP2(0.1, 0.01, 0.5, noise_w=s, noise_e=2 * s, r=0.9)


CONSTANTS = {"diadsp": {"gradient_bound": 1.0}, "pgtc": {"gradient_bound": 1.0},
             "ppdc": {"gradient_bound": 1.0}, "dpp2": {"adjacency_radius": 0.5}}
MAKERS = {"diadsp": _diadsp, "pgtc": _pgtc, "ppdc": _ppdc, "dpp2": _dpp2}
SETUPS = {name: (lambda f, make=make: make(5.0 * f), PROBLEM, GRAPH, CONSTANTS[name])
          for name, make in MAKERS.items()}


class Contract(AccountantContract):
    setups = SETUPS


class TestDiaDSPXie(Contract):
    setup, accountant = "diadsp", "xie"


class TestDiaDSPLaplace(Contract):
    setup, accountant = "diadsp", "laplace"


class TestDiaDSPRdp(Contract):
    setup, accountant = "diadsp", "rdp"


class TestPGTCLaplace(Contract):
    setup, accountant = "pgtc", "laplace"


class TestPPDCXie(Contract):
    setup, accountant = "ppdc", "xie"


class TestDPP2Ou(Contract):
    setup, accountant = "dpp2", "ou"


class TestDPP2Laplace(Contract):
    setup, accountant = "dpp2", "laplace"


class TestDiaDSPPld(Contract):
    setup, accountant = "diadsp", "pld"
    K, n_targets = 3, 1          # PLD composition is slow: a short horizon, one target


# ---- the mechanism descriptions equal the theorems they decompose ------------------------------

@pytest.mark.parametrize("name", ["diadsp", "pgtc", "dpp2"])
def test_basic_composition_of_the_mechanism_is_the_theorem(name):
    alg = MAKERS[name]()
    theorem = alg.privacy(PROBLEM, GRAPH, 20, **CONSTANTS[name])
    basic = alg.privacy(PROBLEM, GRAPH, 20, accountant="laplace", **CONSTANTS[name])
    assert basic.epsilon == pytest.approx(theorem.epsilon, rel=1e-12)
    assert basic.per_agent == pytest.approx(theorem.per_agent, rel=1e-12)


def test_ppdc_mechanism_bounds_theorem6_sound_from_above():
    alg = _ppdc()
    theorem = alg.privacy(PROBLEM, GRAPH, 20, gradient_bound=1.0).epsilon
    basic = alg.privacy(PROBLEM, GRAPH, 20, accountant="laplace", gradient_bound=1.0).epsilon
    assert theorem <= basic <= 1.5 * theorem


def test_pld_and_rdp_are_epsilon_delta_and_never_above_pure_epsilon():
    alg = DiaDSP(0.1, _noise(40.0, 0.97), _noise(40.0, 0.97))
    pure = alg.privacy(PROBLEM, GRAPH, 30, gradient_bound=1.0)
    pld = alg.privacy(PROBLEM, GRAPH, 30, accountant="pld", gradient_bound=1.0, delta=1e-5)
    rdp = alg.privacy(PROBLEM, GRAPH, 30, accountant="rdp", gradient_bound=1.0, delta=1e-5)
    assert pure.delta == 0 and pld.delta == rdp.delta == 1e-5
    assert pld.epsilon < pure.epsilon and pld.epsilon <= rdp.epsilon * (1 + 1e-9)


def test_hand_computed_laplace_composition():
    # DiaDSP, d = 4, M = 1, eta = 0.1 (< 1, so sqrt(eta) is the larger factor), K = 2:
    # eps = 4 sqrt(d) M (sqrt(eta)/s_x + 1/s_y) (1 + 1/q + 1/q^2)
    alg = DiaDSP(0.1, _noise(2.0, 0.5), _noise(4.0, 0.5))
    by_hand = 4 * 2 * 1 * (math.sqrt(0.1) / 2 + 1 / 4) * (1 + 2 + 4)
    got = alg.privacy(PROBLEM, GRAPH, 2, accountant="laplace", gradient_bound=1.0).epsilon
    assert got == pytest.approx(by_hand, rel=1e-14)


# ---- names, registry, assumptions ----------------------------------------------------------------

def test_unknown_accountant_lists_the_available_ones():
    with pytest.raises(UnknownNameError) as err:
        _diadsp().privacy(PROBLEM, GRAPH, 5, accountant="moments", gradient_bound=1.0)
    for name in ("xie", "laplace", "rdp", "pld"):
        assert name in str(err.value)


def test_an_option_of_another_accountant_is_refused():
    with pytest.raises(UnknownNameError, match="variant"):
        _diadsp().privacy(PROBLEM, GRAPH, 5, accountant="pld", gradient_bound=1.0,
                          variant="printed")


def test_a_new_accountant_reaches_existing_algorithms_without_editing_them():
    def largest(algorithm, problem, graph, iterations, assumptions):
        return accountants.per_agent(
            algorithm, problem, graph, iterations, assumptions,
            lambda m: max(float(np.max(1 / r.multipliers)) for r in m.releases), "largest", 0.0)

    new = accountants.Accountant("test-max-release", largest, "largest single release (test)")
    with accountants.ACCOUNTANTS.scoped("*:test-max-release", new):
        for name in ("diadsp", "dpp2"):
            g = MAKERS[name]().privacy(PROBLEM, GRAPH, 3, accountant="test-max-release",
                                       **CONSTANTS[name])
            assert 0 < g.epsilon < math.inf
    assert "test-max-release" not in accountants.every()


def test_assumptions_validate_and_name_what_they_reject():
    with pytest.raises(ParameterError) as err:
        Assumptions(gradient_bound=-1.0)
    assert err.value.name == "gradient_bound"
    with pytest.raises(ParameterError, match="adjacency_radius"):
        Assumptions(adjacency=0.5)                      # a radius given under the relation's name
    with pytest.raises(UnknownNameError, match="radius"):
        Assumptions.of(radius=1.0)
    a = Assumptions.of({"gradient_bound": 2.0}, delta=1e-6)
    assert a.as_dict() == {"gradient_bound": 2.0, "delta": 1e-6}


def test_non_private_algorithm_checks_names_too():
    from dpnet.algorithms import GradientTracking

    assert not GradientTracking(0.1).privacy(PROBLEM, GRAPH, 5).is_private
    with pytest.raises(UnknownNameError):
        GradientTracking(0.1).privacy(PROBLEM, GRAPH, 5, gradient_bnd=1.0)


def test_mechanism_events_validate():
    r = Releases("x", "laplace", 2.0, [1.0, 4.0])
    np.testing.assert_array_equal(r.multipliers, [0.5, 2.0])
    with pytest.raises(ParameterError):
        Releases("x", "cauchy", 1.0, 1.0)
    with pytest.raises(ParameterError):
        Releases("x", "gaussian", [1.0, 2.0], [1.0, 2.0, 3.0])
    assert Mechanism((r,), "function", 1, "test", relation="replace_one").noises == {"laplace"}


# ---- the one calibration -------------------------------------------------------------------------

def test_calibrate_increasing_and_integer_horizons():
    # the largest horizon K with 0.1 (K + 1) <= 1: K = 9
    assert calibrate(lambda K: 0.1 * (K + 1), 1.0, increasing=True, integer=True, start=3) == 9
    t = calibrate(lambda t: t * t, 2.0, increasing=True)
    assert t * t <= 2.0 and t == pytest.approx(math.sqrt(2), rel=1e-9)


def test_calibrate_the_horizon_of_an_algorithm():
    alg = _diadsp(50.0)

    def eps(K):
        return alg.privacy(PROBLEM, GRAPH, int(K), gradient_bound=1.0).epsilon

    K = calibrate(eps, 5.0, increasing=True, integer=True, start=4)
    assert eps(K) <= 5.0 < eps(K + 1)


def test_pld_on_a_low_noise_run_coarsens_its_grid_instead_of_exhausting_memory():
    # pure epsilon ~ 2.5e4 here (10^6 in the run that was killed): a 1e-4 grid spans 10^8+ points
    alg = DiaDSP(0.15, _noise(0.1), _noise(0.1))
    pure = alg.privacy(PROBLEM, GRAPH, 30, gradient_bound=1.0).epsilon
    pld = alg.privacy(PROBLEM, GRAPH, 30, accountant="pld", gradient_bound=1.0,
                      delta=1e-5).epsilon
    assert pure > 1e4 and 0 < pld <= pure


def test_pld_above_its_ceiling_returns_the_rdp_bound_instead_of_overflowing():
    # pure epsilon ~ 2.5e9: the coarsened grid's gap would overflow expm1 in dp-accounting
    from dpnet.privacy import accountants

    alg = DiaDSP(0.15, _noise(1e-6), _noise(1e-6))
    kw = dict(gradient_bound=1.0, delta=1e-5)
    rdp = alg.privacy(PROBLEM, GRAPH, 30, accountant="rdp", **kw).epsilon
    pld = alg.privacy(PROBLEM, GRAPH, 30, accountant="pld", **kw).epsilon
    assert rdp > accountants.PLD_CEILING and pld == rdp
    # below the ceiling the PLD account is taken, and it is the tighter one
    calm = DiaDSP(0.15, _noise(50.0), _noise(50.0))
    rdp, pld = (calm.privacy(PROBLEM, GRAPH, 30, accountant=a, **kw).epsilon
                for a in ("rdp", "pld"))
    assert pld < rdp < accountants.PLD_CEILING


def test_a_runs_rdp_curve_is_the_rdp_accountants_at_its_orders():
    # the curve the tuning charge reads: at dp-accounting's default orders it converts to the
    # rdp accountant's epsilon exactly (the same events, the same conversion)
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod

    from dpnet.privacy import dp_accounting_bridge as bridge

    alg = DiaDSP(0.1, _noise(40.0, 0.97), _noise(40.0, 0.97))
    orders = np.asarray(rdp_mod.DEFAULT_RDP_ORDERS, dtype=float)
    facts = Assumptions.of(None, gradient_bound=1.0)
    curve = accountants.rdp_curve(alg, PROBLEM, GRAPH, 30, facts, orders)
    rdp = alg.privacy(PROBLEM, GRAPH, 30, accountant="rdp", gradient_bound=1.0, delta=1e-5)
    assert bridge.epsilon_of_rdp(orders, curve, 1e-5) == pytest.approx(rdp.epsilon, rel=1e-9)
    # Laplace releases: pure epsilon-DP bounds every order
    pure = alg.privacy(PROBLEM, GRAPH, 30, gradient_bound=1.0, accountant="laplace").epsilon
    assert np.all(curve <= pure * (1 + 1e-9))


def test_dp_sgds_rdp_curve_is_its_rdp_account_and_none_without_one():
    from dpnet.algorithms import DPSGD, WangBasarTernary
    from dpnet.privacy import dp_accounting_bridge as bridge
    from dpnet.privacy import dp_sgd

    records = problems.LogisticRegression(np.ones((N, 50, D)) / 2, np.ones((N, 50)))
    alg = DPSGD(0.1, noise_multiplier=1.1, clip=1.0, rate=0.1)
    orders = np.arange(2, 65)
    curve = accountants.rdp_curve(alg, records, GRAPH, 40, Assumptions.of(None), orders)
    assert np.allclose(curve, 40 * dp_sgd.poisson_step_rdp(1.1, 0.1, orders))
    assert bridge.epsilon_of_rdp(orders, curve, 1e-5) >= alg.privacy(
        records, GRAPH, 40, accountant="rdp", delta=1e-5).epsilon * (1 - 1e-9)
    assert accountants.rdp_curve(WangBasarTernary.__new__(WangBasarTernary), records, GRAPH,
                                 40, Assumptions.of(None), orders) is None


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_do_adps_rdp_curve_is_its_rdp_accountants(sampling):
    # the Poisson twins have no generic mechanism; their curve is DO-ADP's own RDP account
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod

    from dpnet.algorithms import DOADP
    from dpnet.privacy import dp_accounting_bridge as bridge

    records = problems.LogisticRegression(np.ones((N, 200, D)) / 2, np.ones((N, 200)))
    alg = DOADP(0.1, 0.5, 0.0, sigma=0.05, p=0.6, clip=1.0, sampling=sampling,
                batch_size=10)
    orders = np.asarray(rdp_mod.DEFAULT_RDP_ORDERS, dtype=float)
    facts = Assumptions.of(None, gradient_bound=1.0)
    curve = accountants.rdp_curve(alg, records, GRAPH, 50, facts, orders)
    want = alg.privacy(records, GRAPH, 50, accountant="rdp", delta=1e-5, gradient_bound=1.0)
    assert bridge.epsilon_of_rdp(orders, curve, 1e-5) == pytest.approx(want.epsilon, rel=1e-6)


def test_a_mechanisms_without_replacement_releases_give_the_pairs_curve():
    # the generic branch (no registered curve): T releases of multiplier 2 at rate 0.1, and
    # 5 of multiplier 4, compose the symmetrised pair's divergence, the largest over agents
    from dpnet.privacy import without_replacement

    class Batches:
        name = "batches"

        def mechanism(self, problem, graph, iterations, assumptions):
            rel = Releases("g", "gaussian", np.ones(iterations + 5),
                           np.r_[np.full(iterations, 2.0), np.full(5, 4.0)], 0.1,
                           "without_replacement")
            quiet = Releases("g", "gaussian", np.ones(1), np.full(1, 50.0), 0.1,
                             "without_replacement")
            return [(np.arange(3), Mechanism((rel,), "record", iterations, "test",
                                             relation="replace_one")),
                    (np.arange(3, N), Mechanism((quiet,), "record", iterations, "test",
                                                relation="replace_one"))]

    orders = np.arange(2, 20)
    curve = accountants.rdp_curve(Batches(), PROBLEM, GRAPH, 30, Assumptions.of(None), orders)
    want = (30 * without_replacement.rdp_curve(2.0, 0.1, orders)
            + 5 * without_replacement.rdp_curve(4.0, 0.1, orders))
    assert np.allclose(curve, want, rtol=1e-12)
    assert curve[0] > 0 and np.all(np.diff(curve) > 0)
