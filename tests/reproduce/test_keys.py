"""The run cache's key (dpnet.lab.keys): an edit to anything a run executes makes its
runs new; an edit to the prose, claims and tables beside it does not."""

import importlib.util
import linecache
import sys

import pytest

from dpnet.lab import keys
from dpnet.lab.store import Run

MODULE = '''
import numpy as np

SCALE = {scale}
PROSE = "{prose}"
HANDLE = {handle}


def helper(x):
    return SCALE * x


def run(x: float) -> dict:
    return {{"value": helper(x) + np.zeros(1)[0]}}


def claim(t, quick):
    return True, PROSE
'''


@pytest.fixture
def load(tmp_path, monkeypatch):
    """Write the module with the given fields and import it afresh under one name."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def load(scale="2.0", prose="a claim", handle="None", uses_handle=False):
        text = MODULE.format(scale=scale, prose=prose, handle=handle)
        if uses_handle:
            text = text.replace("helper(x) +", "helper(x) + 0 * len(str(HANDLE)) +")
        path = tmp_path / "keyed_runs.py"
        path.write_text(text)
        linecache.clearcache()
        sys.modules.pop("keyed_runs", None)
        spec = importlib.util.spec_from_file_location("keyed_runs", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["keyed_runs"] = module
        spec.loader.exec_module(module)
        return Run(module.run, {"x": 1.0}).key

    yield load
    sys.modules.pop("keyed_runs", None)


def test_prose_beside_a_run_keeps_its_key_and_what_it_executes_changes_it(load):
    base = load()
    assert load(prose="the same claim, reworded") == base       # claims and prose: cached runs
    assert load(scale="3.0") != base                             # a constant the run reads
    assert load() == base                                        # and back: deterministic


def test_a_value_without_stable_text_hashes_its_whole_module(load):
    # an object whose repr is an address: its construction is only in the module's source
    base = load(handle="object()", uses_handle=True)
    assert load(handle="object()", uses_handle=True) == base     # stable across imports
    assert load(handle="object()", uses_handle=True, prose="reworded") != base


def test_the_library_below_the_experiments_is_part_of_every_key(tmp_path):
    root = tmp_path / "dpnet"
    for rel in ("algorithms/pgtc.py", "lab/reproduce/xie.py", "lab/compare/tasks.py", "cli.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    base = keys.tree_digest(root)
    for rel in ("lab/reproduce/xie.py", "lab/compare/tasks.py", "cli.py"):  # above: not in it
        (root / rel).write_text("x = 2\n")
        assert keys.tree_digest(root) == base
    (root / "algorithms/pgtc.py").write_text('"""Documented."""\n\nx = (1)  # the same code\n')
    assert keys.tree_digest(root) == base                                  # docs and layout
    (root / "algorithms/pgtc.py").write_text("x = 2\n")                    # an algorithm edit
    assert keys.tree_digest(root) != base
    assert keys.code_digest(test_the_library_below_the_experiments_is_part_of_every_key) \
        .startswith(keys.library_digest())


def test_the_papers_run_functions_leave_their_prose_out():
    from dpnet.lab.reproduce import xie

    parts: dict = {}
    keys._visit(xie.simulate, parts, (*keys._ABOVE, xie.__name__))
    assert "dpnet.lab.reproduce.xie.table_i" in parts and "dpnet.lab.reproduce.xie:TAU" in parts
    assert not any("CHOICES" in k or "_linear" in k for k in parts)


def test_arrays_are_hashed_by_their_bytes_not_their_elided_repr():
    import numpy as np
    import torch

    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0                       # repr(a) == repr(b): numpy elides the middle
    assert repr(a) == repr(b)
    assert keys._stable(a, {}, ()) != keys._stable(b, {}, ())
    assert keys._stable(torch.from_numpy(a), {}, ()) != keys._stable(torch.from_numpy(b), {}, ())
    assert keys._stable(a, {}, ()) == keys._stable(a.copy(), {}, ())


def test_a_new_version_of_the_numerical_stack_makes_every_run_new(monkeypatch):
    from importlib import metadata

    base = keys.library_digest.__wrapped__()
    assert base == keys.library_digest()
    real = metadata.version
    monkeypatch.setattr(metadata, "version",
                        lambda name: "99.0" if name == "torch" else real(name))
    assert keys.library_digest.__wrapped__() != base


def test_a_class_is_followed_into_its_properties_and_static_methods():
    class Setup:
        @property
        def size(self):
            return keys.STACK

        @staticmethod
        def build():
            return keys.tree_digest

    assert {"STACK", "tree_digest"} <= keys._names(Setup)


HELPERS = '''
SCALE = {scale}
PROSE = "{prose}"


def scale(x):
    return SCALE * x
'''

RUNS = '''
from dpnet.lab.keys import Runtime

from . import helpers

STATE = Runtime(folder=None)


def run(x):
    return helpers.scale(x) + len(str(STATE))


def run_importing_inside(x):
    from .helpers import scale      # a local import (as the layers above use against cycles)
    return scale(x)
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``keyedpkg`` (helpers + runs) written with the given fields, imported afresh;
    returns the digest of each run function's closure."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))

    def digests(scale="2.0", prose="words", state=None):
        root = tmp_path / "keyedpkg"
        root.mkdir(exist_ok=True)
        (root / "__init__.py").write_text("")
        (root / "helpers.py").write_text(HELPERS.format(scale=scale, prose=prose))
        (root / "runs.py").write_text(RUNS)
        linecache.clearcache()
        for name in [m for m in sys.modules if m.startswith("keyedpkg")]:
            del sys.modules[name]
        runs = importlib.import_module("keyedpkg.runs")
        if state is not None:
            runs.STATE["folder"] = state
        out = []
        for fn in (runs.run, runs.run_importing_inside):
            parts: dict = {}
            keys._visit(fn, parts, ("keyedpkg",))
            out.append(parts)
        return out

    yield digests
    for name in [m for m in sys.modules if m.startswith("keyedpkg")]:
        del sys.modules[name]


def test_a_module_a_run_names_adds_what_the_run_reads_from_it_not_its_prose(package):
    base = package()
    assert "keyedpkg.helpers.scale" in base[0] and "keyedpkg.helpers:SCALE" in base[0]
    assert not any("PROSE" in k or k == "keyedpkg.helpers" for k in base[0])
    assert package(prose="other words") == base                   # prose beside: same key
    changed = package(scale="3.0")                                  # what the run computes with
    assert changed[0] != base[0] and changed[1] != base[1]


def test_a_name_imported_inside_a_function_is_followed(package):
    base = package()[1]
    assert "keyedpkg.helpers.scale" in base and "keyedpkg.helpers:SCALE" in base


def test_process_state_adds_only_its_type(package):
    base = package()[0]
    assert base["keyedpkg.runs:STATE"] == "Runtime"
    assert package(state="/somewhere/else")[0] == base


def test_a_missing_optional_package_imported_inside_a_run_does_not_stop_its_key():
    def run(x):
        try:
            import a_package_that_is_not_installed  # noqa: F401
        except ImportError:
            pass
        from dpnet.lab.keys import STACK
        return len(STACK) * x

    parts: dict = {}
    keys._visit(run, parts, (__name__, *keys._ABOVE))
    assert parts[f"{__name__}:STACK"] == keys._stable(keys.STACK, {}, ())   # no ImportError


def test_code_without_a_module_or_source_is_keyed_by_its_body():
    # a notebook or a doc test runs code with exec in a bare namespace: no __name__, no source
    # file; two different bodies must not share a run's key, and one body keeps its key
    def built(body: str):
        namespace: dict = {}
        exec(compile(f"f = lambda t: {body}\n", "<cell>", "exec"), namespace)
        return namespace["f"]

    a, b, a_again = built("t + 1"), built("t + 2"), built("t + 1")
    assert a.__module__ is None
    assert keys.value_digest(a) != keys.value_digest(b)
    assert keys.value_digest(a) == keys.value_digest(a_again)
