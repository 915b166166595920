"""Local objectives of all agents with stacked gradients."""

from ..data import load_libsvm
from ..errors import UnknownNameError, require
from ..registry import Registry
from .base import Movable, Problem, ProblemConstants, canonical_device, minimize_global
from .logistic import LogisticRegression
from .neural import NeuralProblem
from .stochastic import Clip
from .synthetic import NonconvexLogistic, Quadratic, SinCos

__all__ = ["Problem", "ProblemConstants", "NonconvexLogistic", "SinCos", "Quadratic",
           "LogisticRegression", "minimize_global", "from_spec", "NeuralProblem", "Clip",
           "Movable", "canonical_device"]

#: the synthetic problems a configuration names (each built by its ``random`` constructor)
RANDOM: Registry = Registry("problem", "dpnet.problems")
RANDOM.register("nonconvex_logistic", NonconvexLogistic)
RANDOM.register("sincos", SinCos)
RANDOM.register("quadratic", Quadratic)


def from_spec(spec: dict, agents=None) -> Problem:
    """Build a problem from a config table: ``{"name": "nonconvex_logistic", "n_agents": 6, ...}``
    (the random constructors of the synthetic problems) or
    ``{"name": "logistic_regression", "dataset": "a9a", "n_agents": 20, "reg": "1/m"}`` (a LIBSVM
    dataset from ``$DPNET_DATA``, split evenly at random by ``seed``; also ``how``, ``split``).
    ``agents``: hold only these agents' data (one rank of a distributed run)."""
    spec = dict(spec)
    name = spec.pop("name", None)
    if name == "logistic_regression":
        require("dataset" in spec, "problem.dataset", None, "a LIBSVM dataset name for "
                "logistic_regression (mushrooms, a9a, w8a, epsilon)")
        ds = load_libsvm(spec.pop("dataset"), spec.pop("split", "train"),
                         verify=spec.pop("verify", True))
        return LogisticRegression.partition(ds.X, ds.y, spec.pop("n_agents"), agents=agents,
                                            **spec)
    if not isinstance(name, str) or name not in RANDOM:
        raise UnknownNameError("problem", str(name), [*RANDOM, "logistic_regression"])
    problem = RANDOM[name].random(**spec)
    return problem if agents is None else problem.restrict(agents)
