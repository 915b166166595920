"""All algorithms behind one API, with a registry: ``dpnet.algorithms.get("diadsp")``.

Every module of this package is imported here, and every registered class is exported under its
class name, so adding an algorithm is adding one module with a ``@register``-ed class.
"""

import importlib as _importlib
import inspect
import pkgutil as _pkgutil

from .. import compression, noise
from ..errors import ParameterError
from .base import Algorithm, Context, State, available, get, noise_parameters, register

for _mod in _pkgutil.iter_modules(__path__):
    if _mod.name != "base" and not _mod.name.startswith("_"):
        _importlib.import_module(f"{__name__}.{_mod.name}")

globals().update({cls.__name__: cls for cls in available().values()})

__all__ = ["Algorithm", "Context", "State", "available", "get", "noise_parameters", "register",
           "from_spec",
           *sorted(cls.__name__ for cls in available().values())]


def from_spec(spec: dict) -> Algorithm:
    """Build an algorithm from a config table: ``{"name": "diadsp", "eta": 0.1,
    "noise_x": {"kind": "laplace", "scale": 1, "decay": 0.9}, "compressor": {...}}``."""
    spec = dict(spec)
    cls = get(str(spec.pop("name", "")))
    kwargs: dict[str, object] = {}
    noises = noise_parameters(cls)
    for key, value in spec.items():
        if key in noises:
            kwargs[key] = noise.from_spec(value)
        elif key == "compressor":
            kwargs[key] = compression.from_spec(value)
        else:
            kwargs[key] = value
    accepted = inspect.signature(cls.__init__).parameters
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ParameterError(f"algorithm.{cls.name}", unknown,
                             f"parameters among {sorted(p for p in accepted if p != 'self')}")
    return cls(**kwargs)
