"""The one registry type: name -> object, written only through :meth:`Registry.register`.

Every registry of dpnet (algorithms, graphs, problems, compressors, accountants, experiments,
benchmark tasks and entries, audit targets) is a :class:`Registry`. It reads as a mapping; an
unknown name is an :class:`~dpnet.errors.UnknownNameError` that lists the known ones; a name is
registered once (a second registration under a name is an error, never a silent replacement, so
what a name means does not depend on import order); and each entry remembers the module that
registered it (the layout test checks that the built-in entries come from the registry's owner
package, and a user's module registers new names beside them).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import ParameterError, UnknownNameError

T = TypeVar("T")


def calling_module(depth: int = 1) -> str:
    """The module of the code ``depth`` frames above the function that asks: who registers."""
    return sys._getframe(depth + 1).f_globals.get("__name__", "?")


class Registry(Mapping[str, T], Generic[T]):
    """Name -> object for one ``kind`` of thing (the word used in errors), owned by the package
    ``owner`` (``"dpnet.algorithms"``)."""

    def __init__(self, kind: str, owner: str) -> None:
        self.kind, self.owner = kind, owner
        self._entries: dict[str, T] = {}
        self._registrants: dict[str, str] = {}

    def register(self, name: str, value: T, *, registrant: str | None = None) -> T:
        """Add ``value`` under ``name`` and return it; ``registrant``: the module registering
        (default: the caller's)."""
        if not isinstance(name, str) or not name:
            raise ParameterError(f"{self.kind} name", name, "a non-empty string")
        registrant = registrant or calling_module()
        # the module that registered a name may register it again (a reloaded module, a
        # notebook cell run twice); no other module may replace it
        if name in self._entries and self._registrants[name] != registrant:
            raise ParameterError(f"{self.kind} name", name, f"a name not yet registered (it was "
                                 f"registered by {self._registrants[name]})")
        self._entries[name] = value
        self._registrants[name] = registrant
        return value

    def decorator(self, name_of: Callable[[Any], str]) -> Callable[[T], T]:
        """A decorator registering its argument under ``name_of(argument)``."""
        def register(value: T) -> T:
            return self.register(name_of(value), value,
                                 registrant=calling_module())
        return register

    @contextlib.contextmanager
    def scoped(self, name: str, value: T) -> Iterator[T]:
        """Register ``value`` under ``name`` for the block only (tests, a notebook's trial)."""
        self.register(name, value, registrant=calling_module(2))   # past contextmanager
        try:
            yield value
        finally:
            del self._entries[name], self._registrants[name]

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """Whatever the block registers (a user's module imported by a test) is gone after it."""
        entries, registrants = dict(self._entries), dict(self._registrants)
        try:
            yield
        finally:
            self._entries, self._registrants = entries, registrants

    def registrant(self, name: str) -> str:
        """The module that registered ``name``."""
        self[name]
        return self._registrants[name]

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.kind, str(name), self._entries) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries: {', '.join(self._entries)})"


def resolve(target: str, what: str) -> Any:
    """The object an import path names: ``"package.module:name"`` (Hydra's ``_target_``
    convention, with a colon between the module and the attribute, which may be dotted). A path
    without a colon, a module that does not import or a missing attribute is an error naming
    ``what`` (the configuration key) and the path."""
    if not isinstance(target, str) or target.count(":") != 1:
        raise ParameterError(what, target, "an import path 'package.module:name'")
    module_name, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as err:
        raise ParameterError(what, target, f"an importable module ({module_name!r}: {err})"
                             ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            known = sorted(n for n in vars(obj) if not n.startswith("_"))
            raise UnknownNameError(f"{what} attribute", f"{module_name}:{attr}", known)
        obj = getattr(obj, part)
    return obj


#: the extensions this process imported (``--with``), in order: a worker started by spawn
#: (which copies no module of its parent) imports them again before it runs anything
_EXTENSIONS: list[str] = []


def import_extensions(paths) -> None:
    """Import each module name or ``.py`` file of ``paths``: it registers its own algorithms,
    graphs, partitioners, experiment specs, benchmark tasks or entries at import, as dpnet's own
    modules do. A file is imported under its stem, so that its functions' source stays findable
    (the run cache keys code by its source)."""
    for item in paths:
        path = Path(item)
        if path.suffix == ".py":
            if not path.is_file():
                raise ParameterError("--with", item, "an existing .py file or an importable "
                                     "module name")
            known = sys.modules.get(path.stem)
            if known is not None and getattr(known, "__file__", None) != str(path.resolve()):
                raise ParameterError("--with", item, f"a file whose name does not shadow the "
                                     f"imported module {path.stem!r} (rename the file)")
            if known is None:
                spec = importlib.util.spec_from_file_location(path.stem, path.resolve())
                # a .py path always gets a spec with a source loader
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            item = str(path.resolve())
        else:
            try:
                importlib.import_module(item)
            except ModuleNotFoundError as err:
                raise ParameterError("--with", item, f"an importable module ({err})") from None
        if item not in _EXTENSIONS:
            _EXTENSIONS.append(item)


def imported_extensions() -> tuple[str, ...]:
    """What :func:`import_extensions` imported in this process, in order."""
    return tuple(_EXTENSIONS)
