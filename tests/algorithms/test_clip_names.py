"""One name per clipping kind (issue 37 item 7): ``clip`` is an l2 bound in every constructor,
``coordinate_clip`` a per-coordinate bound (each coordinate at most G/sqrt(d)); a bare number
where a ``Clip`` is expected is an l2 bound."""

import inspect

import pytest
import torch

from dpnet import algorithms
from dpnet.errors import ParameterError
from dpnet.problems.stochastic import Clip, as_clip

#: each registered algorithm that clips, built from its required arguments plus the keywords
MAKE = {
    "doadp": lambda **kw: algorithms.DOADP(0.1, 0.5, 0.0, **kw),
    "momentum_dsgd": lambda **kw: algorithms.MomentumDSGD(0.1, 0.5, 0.0, **kw),
    "pgtc": lambda **kw: algorithms.PGTC(0.1, 0.2, 0.5, 0.5, **kw),
    "dp_dda": lambda **kw: algorithms.DPDDA(1.0, **kw),
    "dpdo": lambda **kw: algorithms.DPDO(0.1, 0.5, 0.9, **kw),
    "dp_sgd": lambda **kw: algorithms.DPSGD(0.1, 1.0, rate=0.1, **kw),
    "decor": lambda **kw: algorithms.DECOR(0.1, 1.0, 3.0, rate=0.1, **kw),
}


def _params(cls) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters) - {"self"}


def test_every_clipping_constructor_is_covered_and_uses_only_the_two_names():
    clipping = {name for name, cls in algorithms.available().items()
                if any("clip" in p for p in _params(cls))}
    assert clipping == set(MAKE)
    for name in clipping:
        names = {p for p in _params(algorithms.get(name)) if "clip" in p}
        assert names <= {"clip", "coordinate_clip"}, (name, names)


@pytest.mark.parametrize("name", sorted(MAKE))
def test_clip_is_an_l2_bound_everywhere(name):
    alg = MAKE[name](clip=2.5)
    assert alg.clip == Clip(2.5, "l2")
    g = torch.tensor([[3.0, 4.0, 0.0, 0.0]])
    # an l2 bound of 2.5 halves a gradient of norm 5 in every coordinate
    torch.testing.assert_close(alg.clip.apply(g), g / 2)


@pytest.mark.parametrize("name", sorted(n for n in MAKE
                                        if "coordinate_clip" in _params(algorithms.get(n))))
def test_coordinate_clip_is_a_per_coordinate_bound(name):
    alg = MAKE[name](coordinate_clip=2.0)
    assert alg.clip == Clip(2.0, "coordinate")
    g = torch.tensor([[3.0, -4.0, 0.5, 0.0]])               # d = 4: each coordinate at most 1
    torch.testing.assert_close(alg.clip.apply(g), torch.tensor([[1.0, -1.0, 0.5, 0.0]]))
    with pytest.raises(ParameterError, match="coordinate_clip"):
        MAKE[name](clip=1.0, coordinate_clip=1.0)


@pytest.mark.parametrize("name", sorted(MAKE))
@pytest.mark.parametrize("value", [Clip(1.0, "coordinate"), "1", 0.0, -1.0, True])
def test_a_clip_that_is_not_a_positive_number_is_refused(name, value):
    with pytest.raises(ParameterError, match="clip"):
        MAKE[name](clip=value)


def test_dp_sgd_family_has_no_per_coordinate_option():
    # their accounts read an l2 sensitivity of 2C: a per-coordinate bound would be a different
    # mechanism, so it is not offered under any name
    for cls in (algorithms.DPSGD, algorithms.DECOR):
        assert "coordinate_clip" not in _params(cls)


def test_a_bare_number_is_an_l2_clip_and_clip_needs_its_kind():
    assert as_clip(0.5) == Clip(0.5, "l2")
    assert as_clip(None) is None
    with pytest.raises(TypeError):
        Clip(1.0)                                   # no default kind: the kind is always said
