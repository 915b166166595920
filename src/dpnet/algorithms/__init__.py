"""All algorithms behind one API, with a registry: ``dpnet.algorithms.get("diadsp")``."""

from .base import Algorithm, Context, State, available, get, register
from .dgd import DGD, DSGD
from .diadsp import DiaDSP, GradientTracking

__all__ = ["Algorithm", "Context", "State", "available", "get", "register", "DGD", "DSGD",
           "DiaDSP", "GradientTracking", "from_spec"]


def from_spec(spec: dict) -> Algorithm:
    """Build an algorithm from a config table: ``{"name": "diadsp", "eta": 0.1,
    "noise_x": {"kind": "laplace", "scale": 1, "decay": 0.9}, "compressor": {...}}``."""
    import inspect

    from .. import compression, noise
    from ..errors import ParameterError

    spec = dict(spec)
    cls = get(str(spec.pop("name", "")))
    kwargs = {}
    for key, value in spec.items():
        if key.startswith("noise"):
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
