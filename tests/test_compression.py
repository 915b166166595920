"""Compressors: contraction, hand formulas, statistics of the randomised ones, bit counts."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from dpnet import compression as C
from dpnet.errors import ParameterError, UnknownNameError
from dpnet.rng import Streams


def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


@st.composite
def _topk_case(draw):
    n = draw(st.integers(1, 4))
    d = draw(st.integers(1, 24))
    k = draw(st.integers(1, d))
    x = draw(arrays(np.float64, (n, d), elements=st.floats(-1e6, 1e6, allow_nan=False)))
    return x, k


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_topk_case())
def test_topk_contraction_property(case):
    x, k = case
    X = _t(x)
    out = C.TopK(k).compress(X).numpy()
    d = x.shape[1]
    err = ((out - x) ** 2).sum(1)
    bound = (1 - k / d) * (x**2).sum(1)
    assert np.all(err <= bound * (1 + 1e-12) + 1e-300)
    # exactly the kept coordinates are copied, at most k are nonzero
    kept = out != 0
    assert np.all(kept.sum(1) <= k)
    assert np.array_equal(out[kept], x[kept])
    # the kept magnitudes dominate the dropped ones
    for row, o in zip(np.abs(x), out):
        keep_mask = np.zeros(d, bool)
        keep_mask[np.nonzero(o)[0]] = True
        if keep_mask.any() and (~keep_mask).any():
            assert row[keep_mask].min() >= row[~keep_mask].max() or row[~keep_mask].max() == 0


def test_topk_hand_example_and_limits():
    X = _t([[0.5, -3.0, 1.0, 2.0], [4.0, 0.0, -0.1, 0.2]])
    np.testing.assert_array_equal(C.TopK(2).compress(X).numpy(),
                                  [[0, -3.0, 0, 2.0], [4.0, 0, 0, 0.2]])
    assert C.TopK(4).compress(X) is X
    assert C.TopK(2).constants(4) == (1.0, 0.5)
    with pytest.raises(ParameterError) as err:
        C.TopK(5).compress(X)
    assert err.value.name == "k" and "1 <= k <= d = 4" in str(err.value)
    with pytest.raises(ParameterError, match="k <= d"):
        C.TopK(11).bits(10)
    for bad in (0, -1, 1.5):
        with pytest.raises(ParameterError) as err:
            C.TopK(bad)
        assert err.value.name == "k" and "integer >= 1" in str(err.value)


def test_quantizer_xi_values():
    # xi = 1 + min(d / 2^(2(b-1)), sqrt(d) / 2^(b-1)); d=10, b=2: 1 + min(2.5, 1.5811) = 2.581
    q = C.BiasedQuantizer(bits=2)
    assert q.xi(10) == pytest.approx(1 + math.sqrt(10) / 2, rel=1e-15)
    assert round(q.xi(10), 3) == 2.581
    assert q.xi(2) == pytest.approx(1.5)              # min(2/4, sqrt(2)/2) = 0.5
    assert C.BiasedQuantizer(bits=4).xi(10) == pytest.approx(1 + 10 / 64)
    assert q.constants(10) == (1.0, 1.0 / q.xi(10))


def test_quantizer_with_fixed_dither_hand_worked():
    # d=2, b=2 (s = 2, xi = 1.5); x = (3, 4), ||x|| = 5, 2|x|/||x|| = (1.2, 1.6)
    q = C.BiasedQuantizer(bits=2, dither=_t([0.5, 0.3]))        # floor(1.7, 1.9) = (1, 1)
    np.testing.assert_allclose(q.compress(_t([[3.0, 4.0]])).numpy(), [[5 / 3, 5 / 3]])
    q = C.BiasedQuantizer(bits=2, dither=_t([0.9, 0.5]))        # floor(2.1, 2.1) = (2, 2)
    np.testing.assert_allclose(q.compress(_t([[-3.0, 4.0]])).numpy(), [[-10 / 3, 10 / 3]])
    np.testing.assert_array_equal(q.compress(_t([[0.0, 0.0]])).numpy(), [[0.0, 0.0]])


def test_quantizer_with_fixed_dither_matches_the_formula_d10():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 10))
    u = rng.random(10)
    for b in (1, 2, 3):
        out = C.BiasedQuantizer(bits=b, dither=_t(u)).compress(_t(x)).numpy()
        s = 2.0 ** (b - 1)
        xi = 1 + min(10 / s**2, math.sqrt(10) / s)
        for row, o in zip(x, out):
            norm = np.sqrt((row**2).sum())
            hand = norm / xi * np.sign(row) * np.floor(s * np.abs(row) / norm + u) / s
            np.testing.assert_allclose(o, hand, rtol=1e-14)
            assert set(np.unique(np.floor(s * np.abs(row) / norm + u))) <= set(range(int(s) + 1))


def test_quantizer_random_dither_is_reproducible_and_uniform():
    x = _t(np.random.default_rng(1).standard_normal((3, 10)))
    q = C.BiasedQuantizer(bits=2)
    a = q.compress(x, rng=Streams(5), purpose="x", k=3, agents=np.arange(3))
    b = q.compress(x, rng=Streams(5), purpose="x", k=3, agents=np.arange(3))
    assert torch.equal(a, b)
    # the dither is the stream's uniform draw under purpose + "/dither"
    u = Streams(5).uniform("x/dither", 3, np.arange(3), 10)
    fixed = C.BiasedQuantizer(bits=2, dither=_t(u[1])).compress(x[1:2])
    np.testing.assert_array_equal(a[1:2].numpy(), fixed.numpy())
    with pytest.raises(ParameterError, match="streams"):
        q.compress(x)


def test_normsign_formula():
    X = _t([[1.0, -4.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    out = C.NormSign().compress(X).numpy()
    np.testing.assert_array_equal(out, [[2.0, -2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    assert C.NormSign().constants(10) == (5.0, 0.1)


def test_normsign_satisfies_assumption_5_with_its_constants():
    x = np.random.default_rng(2).standard_normal((500, 10))
    r, phi = C.NormSign().constants(10)
    out = C.NormSign().compress(_t(x)).numpy()
    err = ((out / r - x) ** 2).sum(1)
    assert np.all(err <= (1 - phi) * (x**2).sum(1) + 1e-12)


def test_randk_statistics():
    n, d, k = 6000, 10, 3
    x = np.tile(np.arange(1.0, d + 1), (n, 1))
    rk = C.RandK(k)
    out = rk.compress(_t(x), rng=Streams(11), purpose="x", k=0, agents=np.arange(n)).numpy()
    kept = out != 0
    assert np.all(kept.sum(1) == k)
    assert np.array_equal(out[kept], x[kept])
    # each coordinate kept with probability k/d
    freq = kept.mean(0)
    assert np.all(np.abs(freq - k / d) < 4 * math.sqrt(k / d * (1 - k / d) / n))
    # every k-subset equally likely (chi-square over the 120 subsets)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(d), k))}
    counts = np.bincount([subsets[tuple(np.nonzero(r)[0])] for r in kept], minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > 1e-3
    # E||C(x) - x||^2 = (1 - k/d) ||x||^2
    err = ((out - x) ** 2).sum(1).mean()
    assert err == pytest.approx((1 - k / d) * (x[0] ** 2).sum(), rel=0.03)
    # scaled: unbiased
    sc = C.RandK(k, scaled=True).compress(_t(x), rng=Streams(11), purpose="x", k=0,
                                          agents=np.arange(n)).numpy()
    np.testing.assert_allclose(sc, out * d / k)
    np.testing.assert_allclose(sc.mean(0), x[0], rtol=0.06)
    assert C.RandK(k, scaled=True).constants(d) == (d / k, k / d)
    # a draw depends only on (seed, purpose, iteration, agent)
    again = rk.compress(_t(x[[7]]), rng=Streams(11), purpose="x", k=0, agents=np.array([7]))
    np.testing.assert_array_equal(again.numpy()[0], out[7])
    other = rk.compress(_t(x), rng=Streams(11), purpose="x", k=1, agents=np.arange(n)).numpy()
    assert not np.array_equal(other != 0, kept)


@pytest.mark.parametrize("float_bits", [32, 64])
def test_bits_equal_hand_counts(float_bits):
    F = float_bits
    d = 10  # ceil(log2 10) = 4 index bits
    assert C.Identity().bits(d, F) == 10 * F
    assert C.TopK(2).bits(d, F) == 2 * (F + 4)
    assert C.TopK(10).bits(d, F) == 10 * F               # all coordinates: no indices
    assert C.RandK(3).bits(d, F) == 3 * (F + 4)
    assert C.RandK(3, shared_seed=True).bits(d, F) == 3 * F
    assert C.BiasedQuantizer(bits=2).bits(d, F) == F + 10 * 3   # 5 symbols: 3 bits each
    assert C.BiasedQuantizer(bits=1).bits(d, F) == F + 10 * 2   # 3 symbols: 2 bits each
    assert C.BiasedQuantizer(bits=4).bits(d, F) == F + 10 * 5   # 17 symbols: 5 bits each
    assert C.NormSign().bits(d, F) == F + 10
    assert C.TopK(5).bits(1000, F) == 5 * (F + 10)
    assert C.TopK(1).bits(1024, F) == F + 10
    assert C.TopK(1).bits(1025, F) == F + 11
    assert C.TopK(1).bits(2, F) == F + 1


def test_index_bits():
    assert [C.index_bits(d) for d in (1, 2, 3, 4, 5, 8, 9, 1000)] == [0, 1, 2, 2, 3, 3, 4, 10]


def test_identity_and_from_spec():
    X = _t([[1.0, 2.0]])
    assert C.Identity()(X) is X
    assert C.Identity().constants(5) == (1.0, 1.0)
    assert isinstance(C.from_spec(None), C.Identity)
    tk = C.from_spec({"name": "topk", "k": 2})
    assert isinstance(tk, C.TopK) and tk.k == 2
    assert isinstance(C.from_spec("normsign"), C.NormSign)
    with pytest.raises(UnknownNameError, match="identity, normsign, quantizer, randk, topk"):
        C.from_spec("zip")
    with pytest.raises(ParameterError, match="compressor.topk"):
        C.from_spec({"name": "topk", "kk": 2})
