"""What a cached run's result depends on, as one digest of source text (:func:`code_digest`).

Two parts. The **library** below the application layer (every module of :mod:`dpnet` outside
:mod:`dpnet.lab` and the CLI) is hashed whole, once per process, with the versions of
Python and of the numerical packages: an edit to an algorithm, a problem or an accountant, or a new
torch, makes every run new, whatever ``dpnet.__version__`` says. The **run function's closure**
above it: its source and, recursively, the source of every function or class of the experiment
layer (or of the function's own module) that it names or imports inside its body, what it reads
from every such module it names (``source.images``: that function, not the module's prose), and
the value of every constant it names. So the prose, claims and tables beside a run function do
not make its runs new, while an edit to anything the run executes does. Where a named value has
no stable text (an object whose repr is an address) the whole module that defines it is hashed
instead: recomputing beats reading a stale result back. Process state (:class:`Runtime`) and
registries (:class:`dpnet.registry.Registry`, whose entries a run's arguments key:
:func:`value_digest`) add only their type. Code is hashed as its syntax tree without
docstrings, so comments, docstrings and layout do not count.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import marshal
import sys
import textwrap
import types
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..registry import Registry

_ABOVE = ("dpnet.lab", "dpnet.cli")


#: metadata of a dataclass field that only describes (a title, a mapping's wording): not hashed
PROSE = {"prose": True}


class Runtime(dict):
    """Process state that runs read (the data source, the run's folder): its value when a key is
    computed is no input of the run, so it adds only its type to a key. What a result depends on
    is keyed elsewhere (the data root in every run's key)."""


#: the numerical stack a run's numbers depend on besides dpnet (a new torch may round otherwise)
STACK = ("torch", "numpy", "scipy", "dp-accounting", "scikit-learn", "numba")


@functools.cache
def library_digest() -> str:
    """Hash of every source file of the dpnet package below the experiment layer, of the Python
    version and of the versions of the numerical packages in :data:`STACK`."""
    import platform
    from importlib import metadata

    versions = []
    for name in STACK:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    stack = hashlib.sha256(" ".join([platform.python_version(), *versions]).encode())
    return hashlib.sha256((tree_digest(Path(__file__).resolve().parents[1])
                           + stack.hexdigest()).encode()).hexdigest()[:12]


def tree_digest(root: Path) -> str:
    """Hash of the ``.py`` files under ``root`` (a dpnet package tree) but the layer above."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(("lab/", "cli.py")):
            h.update(rel.encode() + b"\0" + normalized(path.read_text()).encode())
    return h.hexdigest()[:12]


def normalized(source: str) -> str:
    """The code of ``source`` without its comments, docstrings and layout (its AST), so that a
    documentation edit keeps the cached runs; the text itself where it does not parse alone."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            cast(Any, node).body = body[1:] or [ast.Pass()]      # a node with a body
    return ast.dump(tree)


@functools.cache
def code_digest(fn: Any) -> str:
    """The library digest and the source closure of ``fn`` (see the module docstring)."""
    home = getattr(inspect.unwrap(fn), "__module__", None)
    parts: dict[str, str] = {}
    _visit(inspect.unwrap(fn), parts, (*_ABOVE, home) if home else _ABOVE)
    return _digest(parts)


def value_digest(*values: Any) -> str:
    """The library digest and the digest of ``values`` that runs reach by name through a
    :class:`Registry`: a function or class by its source closure, followed through the module
    that defines it (an entry registered from a user's module too), a dataclass by its type and
    its fields but the :data:`PROSE` ones, anything else by its stable text."""
    def members(v: Any) -> list:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return [v, type(v), *(getattr(v, f.name) for f in dataclasses.fields(v))]
        return [v]

    homes = sorted({_module_of(m) for v in values for m in members(v) if _code_object(m)}
                   - {"builtins"})
    parts: dict[str, str] = {}
    for i, value in enumerate(values):
        _value(f"value{i}", value, parts, (*_ABOVE, *homes), {})
    return _digest(parts)


def _digest(parts: dict[str, str]) -> str:
    text = "\0".join(f"{k}\0{v}" for k, v in sorted(parts.items()))
    return library_digest() + hashlib.sha256(text.encode()).hexdigest()[:12]


def _visit(obj: Any, parts: dict[str, str], above: tuple[str, ...]) -> None:
    obj = inspect.unwrap(obj) if callable(obj) else obj
    module = obj.__name__ if inspect.ismodule(obj) else _module_of(obj)
    if not module.startswith(above):
        return                      # the library (its digest) or a third-party package
    name = module if inspect.ismodule(obj) else f"{module}.{getattr(obj, '__qualname__', '?')}"
    if name in parts:
        return
    parts[name] = _source(obj)
    if inspect.ismodule(obj):
        return                      # its whole text is in; what it imports is below or named
    scope = getattr(obj, "__globals__", None) or getattr(sys.modules.get(module), "__dict__", {})
    names, local = _names(obj), _local_imports(obj)
    for ref in sorted(n for n in names if not (n.startswith("__") and n.endswith("__"))):
        value = local[ref] if ref in local else scope[ref] if ref in scope else None
        if inspect.ismodule(value) and value.__name__.startswith(above):
            # a module of the layer: what the code reads from it, not its whole text (prose)
            inner = vars(value)
            for attr in sorted(names & inner.keys()):
                _value(f"{value.__name__}:{attr}", inner[attr], parts, above, inner)
        elif ref in local or ref in scope:
            _value(f"{module}:{ref}", value, parts, above, scope)
    for i, cell in enumerate(getattr(obj, "__closure__", None) or ()):
        _value(f"{name}:cell{i}", cell.cell_contents, parts, above, scope)
    for i, default in enumerate(getattr(obj, "__defaults__", None) or ()):
        _value(f"{name}:default{i}", default, parts, above, scope)


def _local_imports(obj: Any) -> dict[str, Any]:
    """The names that the body of ``obj`` imports itself (``from .. import source``
    inside a function, to avoid an import cycle): its globals do not hold them."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError):
        return {}
    package = getattr(inspect.getmodule(obj), "__package__", None) or ""
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        try:                        # an optional package may be missing: the run guards it
            if isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                   package)
                source = importlib.import_module(base)
                for alias in node.names:
                    found[alias.asname or alias.name] = getattr(source, alias.name) if hasattr(
                        source, alias.name) else importlib.import_module(f"{base}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name if alias.asname else alias.name.split(".")[0]
                    found[alias.asname or name] = importlib.import_module(name)
        except ImportError:
            continue
    return found


def _code_object(value: Any) -> bool:
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)


def _value(label: str, value: Any, parts: dict, above: tuple, scope: dict) -> None:
    if _code_object(value):
        _visit(value, parts, above)
        return
    text = _stable(value, parts, above)
    if text is None:                # no stable text: the defining module's whole source
        path = scope.get("__file__")
        text = normalized(Path(path).read_text()) if path else f"unhashable {label}: {value!r}"
        parts[f"{scope.get('__name__')}:<module>"] = text
    else:
        parts[label] = text


def _stable(value: Any, parts: dict, above: tuple) -> str | None:
    """Text of a constant that is the same in every process, or None."""
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        return repr(value)
    if isinstance(value, Runtime | Registry):
        # keyed elsewhere: a run that reads a registry entry carries that entry's value_digest
        # among its arguments (as dpnet.lab.compare's runs do), so adding or editing one entry,
        # wherever it is registered, leaves the other entries' cached runs valid
        return type(value).__name__
    if isinstance(value, list | tuple | set | frozenset):
        items = [_stable(v, parts, above) for v in value]
        if isinstance(value, set | frozenset) and None not in items:
            items.sort()
        return None if None in items else f"{type(value).__name__}({items})"
    if isinstance(value, dict):
        pairs = [(_stable(k, parts, above), _stable(v, parts, above)) for k, v in value.items()]
        return None if any(None in kv for kv in pairs) else f"dict({pairs})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _visit(type(value), parts, above)
        fields = [(f.name, _stable(getattr(value, f.name), parts, above))
                  for f in dataclasses.fields(value) if not f.metadata.get("prose")]
        return None if any(v is None for _, v in fields) else \
            f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if _code_object(value):
        _visit(value, parts, above)
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    if type(value).__name__ in ("ndarray", "Tensor"):    # their repr elides long arrays
        array = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
        return f"{array.dtype}{array.shape}:{hashlib.sha256(array.tobytes()).hexdigest()}"
    text = repr(value)
    return None if " at 0x" in text or text.startswith("<") else f"{type(value).__name__}:{text}"


def _names(obj: Any) -> set[str]:
    """Every name the code of ``obj`` (a function, or each function of a class) mentions."""
    members = vars(obj).values() if inspect.isclass(obj) else [obj]
    functions = [getattr(m, "fget", None) or getattr(m, "__func__", None) or m for m in members]
    codes = [f.__code__ for f in functions if hasattr(f, "__code__")]
    names: set[str] = set()
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return names


def _module_of(obj: Any) -> str:
    """The module that defines ``obj``; code run by ``exec`` in a namespace without a
    ``__name__`` has none, and counts as the main script's."""
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) else NO_MODULE


#: the home of code that no module defines (``exec``'d in a bare namespace)
NO_MODULE = "__main__"


def _source(obj: Any) -> str:
    """The normalised source of ``obj``; for code without a source file (``exec``, a
    notebook's older cell) its compiled code, so that two different bodies never share a key."""
    try:
        return normalized(inspect.getsource(obj))
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        if code is not None:
            return "code " + hashlib.sha256(marshal.dumps(code)).hexdigest()
        if inspect.isclass(obj):
            return "class " + ";".join(f"{k}={_source(v)}" for k, v in sorted(vars(obj).items())
                                       if inspect.isfunction(v))
        return repr(getattr(obj, "__qualname__", obj))
