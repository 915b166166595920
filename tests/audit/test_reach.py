"""What an audit of a Laplace release can reach when the record is bounded in l2: the exact
profile of the pair that spreads the shift over k coordinates (dp-accounting's PLD against
hand-computed cases), and the number that explains why a Laplace row's x0.5 is not caught."""

import math

import pytest

from dpnet.lab.audit import reach


def test_one_coordinate_is_the_one_dimensional_laplace_pair():
    # k = 1: pure epsilon D2/b is reached at any small delta (the loss is +-D2/b with mass)
    got = reach.sparse_laplace_pair_epsilon(0.5, 10, 1, 1e-5, sparsities=(1,))
    assert got[1] == pytest.approx(0.5, abs=2e-4)
    # d releases of it: basic composition is exact for the 1-D Laplace at delta -> 0 up to the
    # tail, and the spread pair over d = 1 coordinate is the same event
    assert reach.sparse_laplace_pair_epsilon(0.5, 1, 4, 1e-9)[1] == pytest.approx(2.0, abs=2e-3)


def test_the_spread_pair_is_far_below_the_l1_claim_and_a_halved_noise_stays_below_it():
    """a9a (d = 123), one release claimed at epsilon 1 (l1 shift sqrt(d) D2 over b): the spread
    pair's exact epsilon at 1e-5 is 0.30, and with the noise silently halved 0.64: no audit of
    these pairs can catch x0.5; x0.3 (1.12) exceeds the claim."""
    d = 123
    at = {f: reach.sparse_laplace_pair_epsilon(1 / math.sqrt(d) / f, d, 1, 1e-5)
          for f in (1.0, 0.5, 0.3)}
    assert max(at[1.0].values()) == pytest.approx(0.301, abs=2e-3)
    assert max(at[0.5].values()) == pytest.approx(0.640, abs=3e-3)      # < 1: not catchable
    assert max(at[0.3].values()) == pytest.approx(1.117, abs=5e-3)      # > 1: catchable
    # the spread over all d coordinates is the strongest of the sparsities tried
    for eps in at.values():
        assert max(eps, key=eps.get) == d and eps[1] < eps[4] < eps[16] < eps[64] < eps[d]
