"""The layout rules of DESIGN.md, checked on the source of every module of the package.

* every module belongs to one layer of :data:`LAYERS` and imports only modules of earlier layers
  or of its own package (its own layer);
* no import circle between modules, and no import of a dpnet module inside a function or class
  body (a deferred import is how a circle hides: third-party imports may be lazy);
* no cross-package import of a ``_private`` name;
* every registry is a :class:`dpnet.registry.Registry`, and each entry was registered by a module
  of the package that owns the registry.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dpnet

SRC = Path(dpnet.__file__).parent

#: the layers, lowest first; a name is a module or a package (everything below it)
LAYERS = (
    ("errors", "version"),
    ("registry", "threads"),
    ("rng",),
    ("secret_rng", "pair_keys"),
    ("noise", "compression", "lattice"),
    ("graphs",),
    ("network",),
    ("partitions",),
    ("data", "models"),
    ("problems",),
    ("privacy",),
    ("algorithms",),
    ("runner",),
    ("checkpoints",),
    ("distributed",),
    ("lab", "lab.keys"),
    ("lab.source", "lab.report"),
    ("lab.store",),
    ("lab.config",),
    ("lab.sweep",),
    ("lab.audit",),
    ("lab.reproduce",),
    ("lab.compare",),
    ("cli",),
    ("__init__", "__main__"),    # the package's face re-exports the core
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the LAYERS name that owns ``module``): the longest matching name."""
    best = None
    for i, names in enumerate(LAYERS):
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > len(best[1]):
                    best = (i, name)
    if best is None:
        raise AssertionError(f"module dpnet.{module} is in no layer of LAYERS")
    return best


def _package(module: str, path: Path) -> list[str]:
    parts = module.split(".") if module != "__init__" else []
    return parts if path.name == "__init__.py" else parts[:-1]


def imports(module: str) -> list[tuple[str, list[str], bool, int]]:
    """(imported dpnet module, names taken, inside a function or class, line) per import."""
    path = MODULES[module]
    package = _package(module, path)
    out = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef
                                         | ast.ClassDef | ast.Lambda)
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                elif (child.module or "").split(".")[0] == "dpnet":
                    target = child.module.partition(".")[2]
                else:
                    target = None
                if target is not None:
                    names = [a.name for a in child.names]
                    # `from . import x` names modules: record each as its own import
                    subs = [f"{target}.{n}".strip(".") for n in names
                            if f"{target}.{n}".strip(".") in MODULES]
                    for s in subs:
                        out.append((s, [], inner, child.lineno))
                    rest = [n for n in names if f"{target}.{n}".strip(".") not in MODULES]
                    if rest or not subs:
                        out.append((target or "__init__", rest, inner, child.lineno))
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] == "dpnet":
                        out.append((a.name.partition(".")[2] or "__init__", [], inner,
                                    child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return out


def _top_package(module: str) -> str:
    """The package a module belongs to for the privacy rule (lab's subpackages count apart)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "lab" and len(parts) > 1 else parts[0]


def test_every_module_is_in_a_layer():
    missing = []
    for module in MODULES:
        try:
            layer_of(module)
        except AssertionError:
            missing.append(module)
    assert not missing, f"modules in no layer of LAYERS: {missing}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_only_earlier_layers(module):
    mine, owner = layer_of(module)
    for target, _, _, line in imports(module):
        theirs, their_owner = layer_of(target)
        assert theirs < mine or their_owner == owner, (
            f"dpnet.{module} (layer {owner}) imports dpnet.{target} (layer {their_owner}) at "
            f"line {line}: a module imports only earlier layers")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_function_level_import_of_dpnet(module):
    deferred = [(t, line) for t, _, nested, line in imports(module) if nested]
    assert not deferred, (f"dpnet.{module} imports dpnet modules inside a function or class "
                          f"body: {deferred} (import them at the top; only third-party imports "
                          f"may be lazy)")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_cross_package_private_name(module):
    for target, names, _, line in imports(module):
        if _top_package(target) == _top_package(module):
            continue
        private = [n for n in names if n.startswith("_") and not n.endswith("__")] + [
            p for p in target.split(".") if p.startswith("_") and p != "__init__"]
        assert not private, (f"dpnet.{module} imports private {private} of dpnet.{target} at "
                             f"line {line}")


def test_no_import_circle():
    graph = {m: {t for t, _, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
    # a package's __init__ re-exporting its own modules is not a circle with them
    for m in graph:
        graph[m] = {t for t in graph[m] if not (MODULES[t].name == "__init__.py"
                                                 and m.startswith(t + "."))}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert not circles, f"import circles: {circles}"


def _loaded_modules():
    """Every dpnet module imported (the CLI imports the whole tree; experiments load lazily)."""
    import importlib
    import sys

    importlib.import_module("dpnet.cli")
    importlib.import_module("dpnet.lab.reproduce").available()
    return {name: mod for name, mod in sys.modules.items() if name.split(".")[0] == "dpnet"}


def test_every_registry_is_a_registry_filled_by_its_owner():
    """A public module-level name -> class/function/dataclass table is a Registry, and every
    entry of a registry was registered by a module of its owner package."""
    import dataclasses
    import inspect

    from dpnet.registry import Registry

    plain, foreign, seen = [], [], 0
    for name, mod in sorted(_loaded_modules().items()):
        for attr, value in vars(mod).items():
            if isinstance(value, Registry):
                seen += 1
                foreign += [f"{value.kind} {n!r} from {value.registrant(n)}" for n in value
                            if not value.registrant(n).startswith(value.owner)]
            elif (not attr.startswith("_") and type(value) is dict and len(value) >= 2
                  and all(isinstance(k, str) for k in value)
                  and all(inspect.isclass(v) or inspect.isfunction(v)
                          or dataclasses.is_dataclass(v) for v in value.values())):
                plain.append(f"{name}.{attr}")
    assert seen >= 12
    assert not plain, f"registries that are plain dicts: {plain}"
    assert not foreign, f"entries registered outside their owner package: {foreign}"


def test_a_registry_refuses_a_second_registration_and_names_the_known_ones():
    from dpnet.errors import ParameterError, UnknownNameError
    from dpnet.registry import Registry

    r = Registry("widget", "tests")
    r.register("a", 1)
    r.register("a", 2)                 # the same module again: a reloaded module, a notebook
    assert r["a"] == 2
    with pytest.raises(ParameterError, match="a name not yet registered"):
        r.register("a", 3, registrant="another.module")
    with pytest.raises(UnknownNameError, match="unknown widget 'b'; known widgets: a"):
        r["b"]
    with pytest.raises(TypeError):
        r["c"] = 3           # written only through register()
    with r.scoped("c", 3):
        assert r["c"] == 3 and r.registrant("c") == __name__
    assert "c" not in r


def test_dp_accounting_has_one_bridge():
    """Only dpnet.privacy.dp_accounting_bridge imports dp_accounting: one place where events are
    interpreted (orders, relations, grids), not one per paper."""
    importers = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            if any(n.split(".")[0] == "dp_accounting" for n in names):
                importers.append(module)
    assert sorted(set(importers)) == ["privacy.dp_accounting_bridge"]


def test_delta_names_only_dps_delta():
    """The adjacency radius (the papers' delta of the function relation) is called
    adjacency_radius in names, errors and outputs: 'delta' is DP's delta alone."""
    offenders = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.lower()
                if "radius delta" in text or "adjacency delta" in text:
                    offenders.append((module, node.lineno, node.value[:60]))
    assert not offenders, offenders


def code_lines(path: Path) -> int:
    """Lines of a module that hold code: not blank, not in a docstring, not a comment alone."""
    import io
    import tokenize

    source = path.read_text()
    lines = source.splitlines()
    skip = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].strip().startswith("#"):
            skip.add(tok.start[0])
    return sum(1 for i, line in enumerate(lines, 1) if line.strip() and i not in skip)


def test_the_reproductions_python_stays_small():
    """Specs, predicates and run functions of every paper, their prose in data files: at most
    2,500 lines of code (blank lines, docstrings and comments not counted; the report writer
    not included)."""
    total = sum(code_lines(p) for p in sorted((SRC / "lab" / "reproduce").glob("*.py"))
                if p.name != "report.py")
    assert total <= 2500, total
