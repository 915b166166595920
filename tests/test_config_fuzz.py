"""Property: whatever a configuration file or an override holds (unknown keys at any level, wrong
types, out-of-range values), checking and building it either succeeds or raises a DPNetError
naming what is wrong; never another exception."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpnet.errors import DPNetError
from dpnet.lab import config

BASE = {
    "iterations": 3, "seed": 0,
    "graph": {"name": "ring", "n": 4},
    "problem": {"name": "nonconvex_logistic", "samples": 10, "dim": 3},
    "algorithm": {"name": "diadsp", "eta": 0.1,
                  "noise_x": {"kind": "laplace", "scale": 0.1, "decay": 0.9},
                  "noise_y": {"kind": "laplace", "scale": 0.1, "decay": 0.9}},
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2 ** 70, max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from(["ring", "laplace", "gaussian", "topk", "auto", "diadsp", "explicit"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)
#: paths into BASE (existing keys) and their tables (for new keys)
PATHS = [("iterations",), ("seed",), ("graph",), ("graph", "name"), ("graph", "n"),
         ("problem",), ("problem", "name"), ("problem", "samples"), ("problem", "dim"),
         ("algorithm",), ("algorithm", "name"), ("algorithm", "eta"), ("algorithm", "noise_x"),
         ("algorithm", "noise_x", "scale"), ("algorithm", "noise_x", "decay"),
         ("algorithm", "noise_x", "kind"), ("log_every",), ("float_bits",), ("device",),
         ("privacy",), ("output",), ("distributed",)]
TABLES = [(), ("graph",), ("problem",), ("algorithm",), ("algorithm", "noise_x"), ("privacy",),
          ("output",), ("distributed",)]


def _set(cfg: dict, path: tuple, value) -> None:
    node = cfg
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


mutations = st.lists(st.one_of(
    st.tuples(st.just("set"), st.sampled_from(PATHS), values),
    st.tuples(st.just("new"), st.sampled_from(TABLES), st.tuples(st.text(max_size=8), values)),
    st.tuples(st.just("drop"), st.sampled_from(PATHS), st.none())), min_size=1, max_size=4)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations)
def test_any_file_gives_a_run_or_a_dpnet_error(changes):
    cfg = copy.deepcopy(BASE)
    for kind, where, what in changes:
        if kind == "set":
            _set(cfg, where, what)
        elif kind == "new":
            _set(cfg, (*where, what[0]), what[1])
        else:
            node = cfg
            for part in where[:-1]:
                node = node.get(part) if isinstance(node.get(part), dict) else {}
            node.pop(where[-1], None)
    try:
        config.build(config.validate(cfg))
    except DPNetError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([".".join(p) for p in PATHS] + ["graph.nn", "x.y",
                                                                            "algorithm.q.r"]),
                          st.text(max_size=8)), min_size=1, max_size=3))
def test_any_override_gives_a_run_or_a_dpnet_error(assignments):
    try:
        cfg = config.apply_overrides(BASE, [f"{k}={v}" for k, v in assignments])
        config.build(config.validate(cfg))
    except DPNetError:
        pass
