"""A mechanism names its neighbouring relation, and the generic accountants account under it.

The same DP-SGD, described from scratch as Poisson-subsampled Gaussian releases through the
documented ``mechanism()`` route, gets the built-in DP-SGD account under both relations
(replace-one: dp-accounting's ``REPLACE_ONE`` event; add-or-remove: its Poisson-subsampled
Gaussian, Opacus's number), and both are checked against dp-accounting called here directly.
"""

import logging

import numpy as np
import pytest

from dpnet import graphs, problems
from dpnet.algorithms import DPSGD
from dpnet.algorithms.base import Algorithm
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.privacy import dp_accounting_bridge as bridge
from dpnet.privacy.mechanism import Mechanism, Releases

N, M, T, Q, Z, C = 4, 500, 60, 0.05, 1.1, 1.0
PROBLEM = problems.LogisticRegression(np.ones((N, M, 3)) / 2, np.ones((N, M)))
GRAPH = graphs.ring(N)


class ScratchDPSGD(Algorithm):
    """DP-SGD's releases as a user would describe them: each agent's clipped sum plus
    N(0, z^2 C^2), on a Poisson batch of rate q, once per step."""

    name = "scratch_dp_sgd"
    private = True

    def __init__(self, relation: str | None, sensitivity: float) -> None:
        self.relation, self.sensitivity = relation, sensitivity

    def init(self, ctx, x0):
        return {"x": x0}

    def step(self, ctx, state, k):
        return state

    def mechanism(self, problem, graph, iterations, assumptions):
        release = Releases("clipped sum + noise", "gaussian", self.sensitivity,
                           np.full(iterations, Z * C), Q, "poisson")
        return [(np.arange(graph.n), Mechanism((release,), "one record of one agent",
                                               iterations, "from scratch",
                                               relation=self.relation))]


def _dp_accounting(relation):
    import dp_accounting as dpa
    from dp_accounting.pld import PLDAccountant

    rel = {"replace_one": dpa.NeighboringRelation.REPLACE_ONE,
           "add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE}[relation]
    acc = PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-4)
    acc.compose(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(Z)), T)
    return acc.get_epsilon(1e-5)


@pytest.mark.parametrize("relation, sensitivity", [("replace_one", 2 * C), ("add_remove", C)])
def test_dp_sgd_described_from_scratch_gets_the_built_in_epsilon_under_each_relation(
        relation, sensitivity):
    scratch = ScratchDPSGD(relation, sensitivity)
    built_in = DPSGD(0.1, Z, clip=C, rate=Q)
    for accountant in ("pld", "rdp"):
        ours = scratch.privacy(PROBLEM, GRAPH, T, accountant=accountant, delta=1e-5).epsilon
        theirs = built_in.privacy(PROBLEM, GRAPH, T, accountant=accountant, delta=1e-5,
                                  relation=relation).epsilon
        assert ours == pytest.approx(theirs, rel=1e-3), accountant
    pld = built_in.privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5,
                           relation=relation).epsilon
    assert pld == pytest.approx(_dp_accounting(relation), rel=1e-3)


def test_the_two_relations_differ_and_the_smaller_number_is_add_or_remove():
    replace = DPSGD(0.1, Z, clip=C, rate=Q).privacy(PROBLEM, GRAPH, T, accountant="pld",
                                                   delta=1e-5).epsilon
    add_remove = DPSGD(0.1, Z, clip=C, rate=Q).privacy(PROBLEM, GRAPH, T, accountant="pld",
                                                      delta=1e-5, relation="add_remove").epsilon
    assert add_remove < 0.8 * replace
    # before the relation was named, the generic accountants built add-or-remove events: the
    # replace-one shift 2C gave a number far above the truth, C one below it (the silent case)
    import dp_accounting as dpa

    at_2c = bridge.pld_epsilon(dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(Z / 2)), T), 1e-5, 1e-4)
    assert at_2c > 1.5 * replace and add_remove < replace


def test_a_mechanism_without_a_relation_or_with_an_unknown_one_is_refused():
    with pytest.raises(ParameterError, match="relation"):
        ScratchDPSGD(None, 2 * C).privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5)
    with pytest.raises(UnknownNameError, match="replace_one"):
        ScratchDPSGD("replace", 2 * C).privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5)
    rel = Releases("g", "gaussian", 1.0, np.ones(3), 0.1, "without_replacement")
    with pytest.raises(ParameterError, match="replace_one"):
        Mechanism((rel,), "record", 3, "test", relation="add_remove")


def test_subsampled_laplace_under_replace_one_is_refused_not_guessed():
    class Lap(ScratchDPSGD):
        def mechanism(self, problem, graph, iterations, assumptions):
            r = Releases("x + Lap", "laplace", 1.0, np.full(iterations, 5.0), Q, "poisson")
            return [(np.arange(graph.n), Mechanism((r,), "record", iterations, "test",
                                                   relation="replace_one"))]

    with pytest.raises(ParameterError, match="subsampled Laplace"):
        Lap("replace_one", 1.0).privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5)


def test_dp_sgd_add_or_remove_is_poisson_only_and_an_unknown_relation_is_named():
    fixed = DPSGD(0.1, Z, clip=C, sampling="fixed", batch_size=25)
    with pytest.raises(ParameterError, match="relation"):
        fixed.privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5, relation="add_remove")
    with pytest.raises(UnknownNameError, match="add_remove"):
        DPSGD(0.1, Z, clip=C, rate=Q).privacy(PROBLEM, GRAPH, T, accountant="rdp", delta=1e-5,
                                              relation="addremove")
    g = DPSGD(0.1, Z, clip=C, rate=Q).privacy(PROBLEM, GRAPH, T, accountant="rdp", delta=1e-5,
                                              relation="add_remove")
    assert any("add-or-remove" in a for a in g.assumptions)


def test_dpnet_privacy_accounts_dp_sgd_from_its_records_rate_and_epochs(capsys):
    from dpnet.cli import main

    argv = ["privacy", "dp_sgd", "--lr", "0.1", "--noise-multiplier", str(Z), "--rate", str(Q),
            "--records-per-agent", str(M), "--delta", "1e-5"]
    # 3 epochs at rate 0.05: 60 steps, under each relation; the printed epsilon is the library's
    for relation in ("replace_one", "add_remove"):
        assert main([*argv, "--epochs", "3", "--relation", relation]) == 0
        out = capsys.readouterr().out
        want = DPSGD(0.1, Z, clip=C, rate=Q).privacy(PROBLEM, GRAPH, T, accountant="pld",
                                                     delta=1e-5, relation=relation)
        assert f"epsilon={want.epsilon:g}," in out and f"over {T} iterations" in out
    assert main([*argv, "--epochs", "3", "--iterations", "60"]) == 2
    assert "--epochs" in capsys.readouterr().err
    assert main(["privacy", "dp_sgd", "--lr", "0.1", "--noise-multiplier", "1", "--rate", "0.1",
                 "--epochs", "1", "--delta", "1e-5"]) == 2
    assert "--records-per-agent" in capsys.readouterr().err


def test_a_users_algorithm_with_a_mechanism_is_accounted_by_default():
    # no default_accountant declared: the generic PLD of its releases, never "no guarantee"
    scratch = ScratchDPSGD("replace_one", 2 * C)
    assert scratch.privacy(PROBLEM, GRAPH, T, delta=1e-5).epsilon == \
        scratch.privacy(PROBLEM, GRAPH, T, accountant="pld", delta=1e-5).epsilon

    class Undescribed(Algorithm):
        name, private = "undescribed", True

        def init(self, ctx, x0):
            return {"x": x0}

        def step(self, ctx, state, k):
            return state

    with pytest.raises(ParameterError, match="no default_accountant and no mechanism"):
        Undescribed().privacy(PROBLEM, GRAPH, T, delta=1e-5)


def test_dp_accountings_absl_warnings_go_to_dpnets_logger_at_debug(caplog):
    """dp-accounting warns through absl when an RDP order's series does not converge (q = 0.1,
    sigma = 1 is its own test case); dpnet routes that to its logger at DEBUG, not to stderr."""
    dpa = bridge.events()
    event = dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.0))
    with caplog.at_level(logging.DEBUG, logger="dpnet"):   # the CLI may have set it to INFO
        curve = bridge.rdp_curve(event, np.r_[1.25, 1.5, 2:65])
    assert np.isinf(curve).any()                   # the orders it left out
    absl = [r for r in caplog.records if r.name == "absl"]
    ours = [r for r in caplog.records if r.name == "dpnet.privacy.dp_accounting"]
    assert not absl
    assert ours and all(r.levelno == logging.DEBUG for r in ours)
    assert any("failed to converge" in r.getMessage() for r in ours)
