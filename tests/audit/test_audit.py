"""Empirical privacy audits: the batch machinery, the statistics, every registered target, and the
halved-noise mutation."""

import math

import numpy as np
import pytest
import torch

import dpnet
from dpnet.compression import RandK
from dpnet.lab.audit import engine as A
from dpnet.lab.audit import estimators
from dpnet.noise import Laplace
from dpnet.rng import Streams

# -- batch machinery -----------------------------------------------------------------------------


def test_batch_streams_reproduce_per_seed_streams():
    seeds = [3, 7, 11]
    bs = A.BatchStreams(seeds, n=4)
    rows = np.arange(12)
    for kind in ("uniform", "laplace", "gaussian"):
        batch = getattr(bs, kind)("noise_x", 5, rows, 3)
        for c, s in enumerate(seeds):
            single = getattr(Streams(s), kind)("noise_x", 5, np.arange(4), 3)
            np.testing.assert_array_equal(batch[4 * c:4 * c + 4], single)


@pytest.mark.parametrize("name", ["diadsp", "pgtc-randk", "dpp2", "directed_dpgt", "doadp-batch"])
def test_batch_copy_equals_a_single_run(name):
    """Copy c of a batch is ``dpnet.run(..., seed=seeds[c])`` (same noise, same transcript)."""
    if name == "pgtc-randk":
        assert "pgtc" in dpnet.algorithms.available()   # a rename must fail, not skip
        base = A.get_target("pgtc")
        alg = dpnet.algorithms.get("pgtc")(0.5, 0.5, 0.5, 0.5, RandK(1), 10.0, 10.0, q=0.8,
                                           check_theory=False)
        problems, graph = A.linear_pair(3, 2), base.graph()
        x0, K = np.zeros((3, 2)), 3
    else:
        assert name in A.available_targets(), f"no audit target {name!r}"
        t = A.get_target(name)
        alg, problems, graph, x0, K = t.algorithm(), t.problems(), t.graph(), t.x0, 3
    seeds, world = [5, 9, 12], [0, 1, 1]
    views = A.run_copies(alg, problems, graph, K, x0, seeds, world)
    for c in (0, 2):
        res = dpnet.run(alg, problems[world[c]], graph, K, x0=x0, seed=seeds[c], record=True)
        for msg in views:   # equal up to the summation order of the batched mixing product
            np.testing.assert_allclose(views[msg][c], res.transcript.stacked(msg, graph.n),
                                       rtol=1e-12, atol=1e-12)


def test_linear_pair_attains_the_adjacency():
    a, b = A.linear_pair(4, dim=2, agent=1, M=3.0)
    X = torch.randn(4, 2, dtype=torch.float64)
    diff = a.grad(X) - b.grad(X)
    assert float(diff[1].norm()) == pytest.approx(6.0)
    assert float(diff[1].abs().sum()) == pytest.approx(6.0 * math.sqrt(2))
    assert float(diff[[0, 2, 3]].abs().max()) == 0.0
    assert a.gradient_bound() == pytest.approx(3.0) and b.gradient_bound() == pytest.approx(3.0)


# -- statistics ----------------------------------------------------------------------------------


def test_clopper_pearson_edges_and_coverage():
    lo, up = estimators.clopper_pearson(0, 100, 0.05)
    assert lo == 0.0 and up == pytest.approx(1 - 0.05 ** (1 / 100))
    lo, up = estimators.clopper_pearson(100, 100, 0.05)
    assert up == 1.0 and lo == pytest.approx(0.05 ** (1 / 100))
    # coverage of the one-sided lower bound by simulation: P(p < lower) <= alpha
    rng = np.random.default_rng(0)
    k = rng.binomial(200, 0.3, size=4000)
    lo, _ = estimators.clopper_pearson(k, 200, 0.05)
    assert np.mean(lo > 0.3) <= 0.05


def test_threshold_test_recovers_a_laplace_mechanism():
    """Lap(0, 1) vs Lap(1, 1) is exactly 1-DP: the audit finds a bound just below 1."""
    rng = np.random.default_rng(1)
    fa, fb = rng.laplace(1.0, 1.0, (200_000, 1)), rng.laplace(0.0, 1.0, (200_000, 1))
    test = A.threshold_test(fa, fb, confidence=0.95)
    assert 0.93 < test["epsilon"] <= 1.0
    ev = test["event"]      # an atom of the LLR: {T = max} for A over B or {T = min} for B over A
    assert ev.upper == ev.a_over_b and abs(abs(ev.threshold) - 1.0) < 0.05
    # float64 samples 1 + xi and 0 + xi differ in their low-order bits (Mironov 2012); an
    # exact-threshold test on the LLR's atom then "sees" more than the real-valued mechanism
    raw = A.threshold_test(fa, fb, confidence=0.95, resolution=0.0)
    assert raw["epsilon"] > 1.0


def test_epsilon_delta_bound_subtracts_delta():
    plain = float(estimators.epsilon_bound(5000, 10000, 1000, 10000, 0.05))
    with_delta = float(estimators.epsilon_bound(5000, 10000, 1000, 10000, 0.05, delta=0.1))
    assert 0 < with_delta < plain
    assert float(estimators.epsilon_bound(500, 10000, 400, 10000, 0.05, delta=0.2)) == 0.0


# -- the registered targets ----------------------------------------------------------------------

SOUND = [n for n, t in A.TARGETS.items() if not t.expected_violation]
FINDINGS = [n for n, t in A.TARGETS.items() if t.expected_violation]


@pytest.fixture(scope="module")
def audits():
    cache = {}

    def get(name, factor=1.0):
        if (name, factor) not in cache:
            assert name in A.available_targets(), f"no audit target {name!r}"
            reps = min(A.TARGETS[name].repetitions, 50_000)    # keeps the file within seconds
            cache[name, factor] = A.audit(name, repetitions=reps, seed=0, noise_factor=factor)
        return cache[name, factor]

    return get


@pytest.mark.parametrize("name", SOUND)
def test_audited_epsilon_never_exceeds_the_claim(audits, name):
    r = audits(name)
    assert math.isfinite(r.claimed) and r.claimed > 0
    assert r.epsilon <= r.claimed, A.table([r])
    assert r.epsilon > 0.05, "the audit must see the leak it is built to see"


@pytest.mark.parametrize("name", FINDINGS)
@pytest.mark.xfail(strict=True, reason="known accounting failure found by the audit (see the "
                   "target's expected_violation); fix the accountant, then drop the flag")
def test_documented_accounting_failures(audits, name):
    r = audits(name)
    assert r.epsilon <= r.claimed, A.TARGETS[name].expected_violation


@pytest.mark.parametrize("name", ["diadsp-prop1", "dpp2-printed", "ldp_online", "doadp"])
def test_halved_noise_is_caught(audits, name):
    """The same algorithm drawing half its noise while privacy() still claims the original scale."""
    honest, mutated = audits(name), audits(name, 0.5)
    assert not honest.violated
    assert mutated.violated and mutated.epsilon > 1.3 * mutated.claimed, A.table([mutated])


def test_silently_scaled_keeps_the_claim_and_halves_the_draws():
    t = A.get_target("diadsp")
    alg = t.algorithm()
    liar = A.silently_scaled(alg, 0.5)
    assert isinstance(liar.noise_x, Laplace)
    p, g = t.problems()[0], t.graph()
    assert liar.privacy(p, g, iterations=2, gradient_bound=1.0).epsilon == \
        alg.privacy(p, g, iterations=2, gradient_bound=1.0).epsilon
    rng = Streams(0)
    a = alg.noise_x.sample(rng, "noise_x", 1, np.arange(3), 3, 1)
    b = liar.noise_x.sample(rng, "noise_x", 1, np.arange(3), 3, 1)
    torch.testing.assert_close(b, 0.5 * a)
    assert alg.noise_x.sample(rng, "noise_x", 1, np.arange(3), 3, 1).equal(a)  # original intact


def test_audit_is_reproducible_and_reports(tmp_path, audits):
    r = audits("dpp2-printed")
    again = A.audit("dpp2-printed", repetitions=r.repetitions, seed=0)
    assert again.epsilon == r.epsilon and again.hits_a == r.hits_a
    md, png = A.write_report(r, tmp_path)
    text = md.read_text()
    assert f"{r.epsilon:.4g}" in text and f"{r.claimed:.4g}" in text and "Theorem 3" in text
    assert png.stat().st_size > 1000
    assert "| dpp2-printed |" in A.table([r])


def test_unknown_target_names_the_known_ones():
    with pytest.raises(dpnet.UnknownNameError, match="diadsp"):
        A.get_target("nope")


def test_cli_audit_and_attack(tmp_path, capsys):
    from dpnet.cli import main

    assert main(["audit", "diadsp-prop1", "--repetitions", "4000", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "diadsp-prop1.md").exists() and (tmp_path / "diadsp-prop1.png").exists()
    summary = (tmp_path / "audit.md").read_text()
    assert "dpnet audit diadsp-prop1 --repetitions 4000" in summary
    assert "| diadsp-prop1 |" in summary
    assert main(["audit", "diadsp-prop1", "--repetitions", "4000", "--noise-factor", "0.5",
                 "--out", str(tmp_path)]) == 0     # a mutation run reports, it does not fail
    assert "VIOLATION" in (tmp_path / "diadsp-prop1-x0.5.md").read_text()
    assert main(["audit", "--attack", "dgd", "--iterations", "6", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "attacks.md").exists()
    assert main(["audit", "--list"]) == 0
    assert "diadsp-prop1-xleak" in capsys.readouterr().out
    assert main(["audit", "nope", "--out", str(tmp_path)]) == 2
