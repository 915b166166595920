"""Paper 003 (Chen, Wang & Zhang) and its baselines through the one privacy API: every accountant
of every algorithm under one contract (positive, monotone in noise and horizon, names checked,
exactly one of gradient_bound / l1_gradient_bound, a calibration that never overshoots), and the
mechanism descriptions against the theorems they decompose."""

import math

import pytest
from _accountant_contract import AccountantContract  # noqa: E402  (tests/privacy on sys.path)

from dpnet import graphs, problems
from dpnet.algorithms import (
    CWZQuantized,
    DirectedDPGT,
    KangWDDP,
    WangBasarTernary,
    YanBinomial,
)
from dpnet.algorithms.kang_wddp import server_graph
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.noise import Laplace
from dpnet.privacy import accountants, kang
from dpnet.privacy.assumptions import Assumptions
from dpnet.privacy.chen_wang_zhang import definition3

N, D = 5, 4
PROBLEM = problems.ProblemConstants(N, D, 1.0, records_per_agent=40)   # kang reads D = m
DIGRAPH = graphs.cwz_fig1()
UNDIRECTED = graphs.ring(N)
SERVER = server_graph(N)


def _directed(s=1.0, form="compact"):
    return DirectedDPGT(0.1, 0.05, 0.1, batch=5, noise_x=Laplace(s, power=-0.1),
                        noise_y=Laplace(2 * s, power=-0.1), form=form)


def _directed_per_agent(s=1.0):
    return _directed(s, "per-agent")


def _quantized(s=1.0):
    return CWZQuantized(0.5, 0.1, 0.2, 0.3, batch=4, sigma0=s, p_sigma=0.2)


def _ternary(s=1.0):
    return WangBasarTernary(0.2, 0.3, 0.5, 0.1, batch=4, a=1.0, b=1.0 + s)


def _yan(s=5.0):
    return YanBinomial(0.1, batch=5, levels=16, quantizer_range=1.0, trials=math.ceil(400 * s * s))


def _kang(s=1.0):
    return KangWDDP(0.1, s, batch=10)


MAKERS = {"directed": _directed, "directed-per-agent": _directed_per_agent,
          "quantized": _quantized, "ternary": _ternary, "yan": _yan, "kang": _kang}
GRAPHS = {"directed": DIGRAPH, "directed-per-agent": DIGRAPH, "quantized": UNDIRECTED,
          "ternary": UNDIRECTED, "yan": SERVER, "kang": SERVER}
NOISE = {"yan": 5.0}                        # the default noise parameter of each maker
C = {"gradient_bound": 1.0}
#: the (epsilon, delta) accountants' delta: given, never assumed
CD = {**C, "delta": 1e-5}


class Paper003Contract(AccountantContract):
    """The shared contract, plus paper 003's C: exactly one of the two gradient bounds."""

    setups = {name: (lambda f, name=name: MAKERS[name](NOISE.get(name, 1.0) * f), PROBLEM,
                     GRAPHS[name], C) for name in MAKERS}
    seed = 3
    l1_constant = True                       # the bound reads C only through sqrt(d) C (l2)

    def test_the_old_spellings_of_c_are_refused(self):
        for old in ({"C": 1.0}, {"norm": "l1"}):
            with pytest.raises(UnknownNameError, match=f"'{next(iter(old))}'"):
                self.call(self.make(), "privacy", **old)

    def test_exactly_one_of_the_two_gradient_bounds(self):
        alg = self.make()
        for given in ({"gradient_bound": 1.0, "l1_gradient_bound": 2.0}, {}):
            with pytest.raises(ParameterError) as err:
                alg.privacy(PROBLEM, self.graph, self.K, accountant=self.accountant, **given)
            assert "gradient_bound" in str(err.value) and "l1_gradient_bound" in str(err.value)

    def test_l1_and_l2_bounds(self):
        alg = self.make()
        l2 = self.eps(alg, gradient_bound=1.0)
        # an l1 bound C is the stronger assumption (||v||_2 <= ||v||_1)
        assert self.eps(alg, l1_gradient_bound=1.0) <= l2 * (1 + 1e-12)
        if self.l1_constant:    # the bound uses the l1 constant sqrt(d) C of an l2 bound C
            assert self.eps(alg, l1_gradient_bound=math.sqrt(D)) == pytest.approx(l2, rel=1e-12)


class TestDirectedDPGTTheorem(Paper003Contract):
    setup, accountant = "directed", "chen_wang_zhang"


class TestDirectedDPGTPerAgentTheorem(Paper003Contract):
    setup, accountant = "directed-per-agent", "chen_wang_zhang"


class TestDirectedDPGTLaplace(Paper003Contract):
    setup, accountant = "directed", "laplace"


class TestDirectedDPGTRdp(Paper003Contract):
    setup, accountant = "directed-per-agent", "rdp"
    K, n_targets = 6, 2


class TestDirectedDPGTPld(Paper003Contract):
    setup, accountant = "directed", "pld"
    K, n_targets = 3, 1          # PLD composition is slow: a short horizon, one target


class TestCWZQuantizedTheorem(Paper003Contract):
    setup, accountant = "quantized", "chen_wang_zhang"


class TestCWZQuantizedLaplace(Paper003Contract):
    setup, accountant = "quantized", "laplace"


class TestCWZQuantizedPld(Paper003Contract):
    setup, accountant = "quantized", "pld"
    K, n_targets = 4, 1


class TestWangBasarTheorem(Paper003Contract):
    setup, accountant = "ternary", "wang_basar"


class TestYanTheorem(Paper003Contract):
    setup, accountant = "yan", "yan"
    exact_calibration = l1_constant = False

    def test_calibration_is_the_fewest_trials(self):
        for target in (0.8, 3.0, 20.0):
            tuned = self.make().calibrate(target, PROBLEM, self.graph, self.K, **C)
            assert self.eps(tuned) <= target
            fewer = YanBinomial(0.1, batch=5, levels=16, quantizer_range=1.0,
                                trials=tuned.quantizer.trials - 1)
            assert self.eps(fewer) > target


class TestKangTheorem(Paper003Contract):
    setup, accountant = "kang", "kang"
    l1_constant, n_targets = False, 2        # subsampled RDP: a second per evaluation


class TestKangRdp(Paper003Contract):
    setup, accountant = "kang", "rdp"
    l1_constant = False


# ---- defaults: the theorem, unchanged ------------------------------------------------------------

@pytest.mark.parametrize("name, accountant", [("directed", "chen_wang_zhang"),
                                              ("quantized", "chen_wang_zhang"),
                                              ("ternary", "wang_basar"), ("yan", "yan"),
                                              ("kang", "kang")])
def test_the_default_accountant_is_the_theorem_and_calibrate_uses_it(name, accountant):
    alg = MAKERS[name](NOISE.get(name, 1.0))
    assert alg.default_accountant == accountant
    c = CD if name == "kang" else C
    default = alg.privacy(PROBLEM, GRAPHS[name], 10, **c)
    named = alg.privacy(PROBLEM, GRAPHS[name], 10, accountant=accountant, **c)
    assert default == named
    tuned = alg.calibrate(2.0, PROBLEM, GRAPHS[name], 10, **c)
    assert tuned.privacy(PROBLEM, GRAPHS[name], 10, **c).epsilon <= 2.0
    assert type(tuned) is type(alg)


def test_calibrated_noise_is_the_noise_drawn():
    tuned = _quantized().calibrate(3.0, PROBLEM, UNDIRECTED, 10, **C)
    t = tuned.sigma0
    assert tuned.noise.scale_at(4, N) == pytest.approx(t * 5.0 ** 0.2, rel=1e-12)
    tuned = _kang().calibrate(3.0, PROBLEM, SERVER, 10, **CD)
    assert tuned.noise.scale_at(0, N) == pytest.approx(tuned.sigma, rel=1e-15)
    tuned = _ternary().calibrate(3.0, PROBLEM, UNDIRECTED, 10, **C)
    assert tuned.quantizer.a == 1.0 and tuned.quantizer.b > 1.0


def test_delta_is_an_assumption():
    # kang: epsilon at the assumptions' delta (given: none is assumed); yan: delta0,
    # delta_prime derived from it, and the reported delta never above it
    alg = _kang()
    with pytest.raises(ParameterError, match=r"delta=None .* \(none is assumed\)"):
        alg.privacy(PROBLEM, SERVER, 10, **C)
    assert alg.privacy(PROBLEM, SERVER, 10, **CD).delta == 1e-5
    assert alg.privacy(PROBLEM, SERVER, 10, delta=1e-7, **C).delta == 1e-7
    assert (alg.privacy(PROBLEM, SERVER, 10, delta=1e-7, **C).epsilon
            > alg.privacy(PROBLEM, SERVER, 10, **CD).epsilon)
    y = _yan()
    assert y.privacy(PROBLEM, SERVER, 10, **C).delta == pytest.approx(10 * 1e-6)
    g = y.privacy(PROBLEM, SERVER, 10, delta=1e-3, **C)
    assert g.delta <= 1e-3
    with pytest.raises(ParameterError, match="delta"):
        y.privacy(PROBLEM, SERVER, 10, delta=1e-6, delta0=1e-6, **C)


# ---- mechanisms against the theorems ---------------------------------------------------------------

def _per_agent_noise():
    return DirectedDPGT(0.1, 0.05, 0.1, batch=3,
                        noise_x=Laplace([1.0, 1.0, 2.0, 1.0, 0.5], decay=0.97),
                        noise_y=Laplace(2.0, power=0.2), form="per-agent")


@pytest.mark.parametrize("make, constants", [
    (_directed, {"gradient_bound": 1.0}),
    (_directed_per_agent, {"l1_gradient_bound": 1.5}),
    (_directed_per_agent, {"gradient_bound": 1.0, "smoothness": 0.3}),
    (_per_agent_noise, {"gradient_bound": 2.0}),
])
def test_directed_laplace_composition_is_lemma5(make, constants):
    alg = make()
    theorem = alg.privacy(PROBLEM, DIGRAPH, 30, **constants)
    basic = alg.privacy(PROBLEM, DIGRAPH, 30, accountant="laplace", **constants)
    assert basic.epsilon == pytest.approx(theorem.epsilon, rel=1e-12)
    assert basic.per_agent == pytest.approx(theorem.per_agent, rel=1e-12)
    assert basic.delta == theorem.delta == 0.0


def test_quantized_laplace_composition_is_the_theorem():
    for constants in ({"gradient_bound": 1.0}, {"l1_gradient_bound": 0.7}):
        alg = _quantized()
        theorem = alg.privacy(PROBLEM, UNDIRECTED, 40, **constants)
        basic = alg.privacy(PROBLEM, UNDIRECTED, 40, accountant="laplace", **constants)
        assert basic.per_agent == pytest.approx(theorem.per_agent, rel=1e-12)


@pytest.mark.parametrize("make, graph", [(lambda: _directed(30.0), DIGRAPH),
                                         (lambda: _quantized(30.0), UNDIRECTED)])
def test_pld_is_below_the_pure_epsilon(make, graph):
    alg = make()
    pure = alg.privacy(PROBLEM, graph, 8, **C)
    pld = alg.privacy(PROBLEM, graph, 8, accountant="pld", delta=1e-5, **C)
    assert pld.delta == 1e-5 and pure.delta == 0.0
    assert pld.epsilon < pure.epsilon


def test_kang_generic_accounts_are_the_unamplified_theorem():
    alg = _kang(2.0)
    unamplified = alg.privacy(PROBLEM, SERVER, 20, subsampled=False, **CD)
    amplified = alg.privacy(PROBLEM, SERVER, 20, **CD)
    rdp = alg.privacy(PROBLEM, SERVER, 20, accountant="rdp", **CD)
    pld = alg.privacy(PROBLEM, SERVER, 20, accountant="pld", **CD)
    # C = 2G: two records' gradients bounded by G = 1 differ by up to 2
    assert unamplified.epsilon == pytest.approx(kang.epsilon(2.0, 2.0, 10, 40, 20, 1e-5, False))
    assert rdp.epsilon == pytest.approx(unamplified.epsilon, rel=1e-9)
    assert amplified.epsilon < rdp.epsilon and pld.epsilon < rdp.epsilon
    with pytest.raises(ParameterError, match="gaussian"):
        alg.privacy(PROBLEM, SERVER, 20, accountant="laplace", **C)


@pytest.mark.parametrize("name", ["ternary", "yan"])
def test_quantizer_mechanisms_have_no_generic_account(name):
    alg = MAKERS[name](NOISE.get(name, 1.0))
    assert set(accountants.available(alg)) == {alg.default_accountant}
    with pytest.raises(UnknownNameError, match=alg.default_accountant):
        alg.privacy(PROBLEM, GRAPHS[name], 10, accountant="laplace", **C)



def test_gradient_bound_means_a_bound_on_every_gradient_for_paper_003_too():
    # issue 25: paper 003's accountants read gradient_bound as the bound C on the *difference*
    # of two records' gradients (a user with ||g|| <= 1 got kang epsilon = 0.498 where the
    # replace-one value is 1.099). One meaning across the library: C = 2G.
    assert definition3(Assumptions(gradient_bound=1.0)) == (2.0, "l2")
    assert definition3(Assumptions(l1_gradient_bound=3.0)) == (6.0, "l1")
    problem = problems.ProblemConstants(N, 5, records_per_agent=1000)
    g = KangWDDP(0.1, 4.0, 10).privacy(problem, SERVER, 100, gradient_bound=1.0, delta=1e-5)
    assert g.epsilon == pytest.approx(kang.epsilon(4.0, 2.0, 10, 1000, 100, 1e-5))
    assert kang.epsilon(4.0, 1.0, 10, 1000, 100, 1e-5) < g.epsilon
    # the directed method's Lemma 5 is linear in C: doubling G doubles epsilon, G = 1 is C = 2
    alg = DirectedDPGT(0.1, 0.1, 0.1, batch=None, noise_x=Laplace(1.0), noise_y=Laplace(1.0))
    e1 = alg.privacy(problem, graphs.cwz_fig1(), 5, gradient_bound=1.0).epsilon
    assert alg.privacy(problem, graphs.cwz_fig1(), 5, gradient_bound=0.5).epsilon == \
        pytest.approx(e1 / 2, rel=1e-12)
