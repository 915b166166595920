"""dpnet.run's thread policy: one intra-op thread for small problems, the caller's count for large
or neural ones, ``threads=`` and ``$DPNET_THREADS`` override it, the caller's count is restored
(also when the run fails), and a bad count is a ParameterError naming it."""

import pytest
import torch

import dpnet
from dpnet import threads
from dpnet.errors import ParameterError
from dpnet.threads import torch_threads

CALLER = 3   # a count the policy never picks by itself for a small problem


class Recording(dpnet.problems.NonconvexLogistic):
    """Records torch's thread count whenever an agent's gradient is evaluated."""

    seen: list[int] = []

    def grad(self, X, agents=None):
        Recording.seen.append(torch.get_num_threads())
        return super().grad(X, agents)


def _counts(**kw) -> set[int]:
    Recording.seen = []
    p = Recording.random(n_agents=6, samples=20, dim=10, seed=0)
    alg = dpnet.algorithms.DGD(eta=0.1)
    with torch_threads(CALLER):
        dpnet.run(alg, p, dpnet.graphs.ring(6), iterations=3, **kw)
        assert torch.get_num_threads() == CALLER   # restored
    return set(Recording.seen)


def test_a_small_problem_runs_with_one_thread_and_the_callers_count_is_restored(monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)
    assert 6 * 10 < threads.THREADS_MIN_SIZE
    assert _counts() == {1}


def test_a_large_problem_keeps_the_callers_count(monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)
    monkeypatch.setattr(threads, "THREADS_MIN_SIZE", 60)   # this 6 x 10 problem counts as large
    assert _counts() == {CALLER}


def test_the_policy_at_the_threshold_and_for_neural_problems(monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)
    assert threads.THREADS_MIN_SIZE == 100_000
    with torch_threads(CALLER):
        assert threads.run_threads(10, 10_000) == CALLER
        assert threads.run_threads(10, 9_999) == 1
        assert threads.run_threads(6, 10, neural=True) == CALLER


def test_the_argument_and_the_environment_override_the_policy(monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)
    assert _counts(threads=2) == {2}
    monkeypatch.setenv("DPNET_THREADS", "4")
    assert _counts() == {4}
    assert _counts(threads=2) == {2}      # the argument wins over the environment


@pytest.mark.parametrize("bad", [0, -1, 1.5, 2.0, True, "2"])
def test_a_bad_thread_count_is_an_error_naming_it(bad, monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)
    with pytest.raises(ParameterError, match="threads=") as err:
        _counts(threads=bad)
    assert err.value.name == "threads" and err.value.value == bad


@pytest.mark.parametrize("bad", ["0", "two", "-3"])
def test_a_bad_environment_value_is_an_error_naming_the_variable(bad, monkeypatch):
    monkeypatch.setenv("DPNET_THREADS", bad)
    with pytest.raises(ParameterError, match="DPNET_THREADS") as err:
        _counts()
    assert err.value.name == "DPNET_THREADS"


def test_the_callers_count_is_restored_when_the_run_fails(monkeypatch):
    monkeypatch.delenv("DPNET_THREADS", raising=False)

    class Failing(Recording):
        def grad(self, X, agents=None):
            raise RuntimeError("inside the run")

    p = Failing.random(n_agents=6, samples=20, dim=10, seed=0)
    with torch_threads(CALLER):
        with pytest.raises(RuntimeError, match="inside the run"):
            dpnet.run(dpnet.algorithms.DGD(eta=0.1), p, dpnet.graphs.ring(6), iterations=2)
        assert torch.get_num_threads() == CALLER
