"""Local objectives of all agents with stacked gradients."""

from ..errors import UnknownNameError
from .base import Problem, ProblemConstants, minimize_global
from .logistic import LogisticRegression
from .neural import NeuralProblem
from .stochastic import Clip
from .synthetic import NonconvexLogistic, Quadratic, SinCos

__all__ = ["Problem", "ProblemConstants", "NonconvexLogistic", "SinCos", "Quadratic",
           "LogisticRegression", "minimize_global", "from_spec", "NeuralProblem", "Clip"]

_RANDOM = {"nonconvex_logistic": NonconvexLogistic, "sincos": SinCos, "quadratic": Quadratic}


def from_spec(spec: dict) -> Problem:
    """Build a problem from a config table: ``{"name": "nonconvex_logistic", "n_agents": 6, ...}``
    (the random constructors of the synthetic problems)."""
    spec = dict(spec)
    name = spec.pop("name", None)
    if name not in _RANDOM:
        raise UnknownNameError("problem", str(name), _RANDOM)
    return _RANDOM[name].random(**spec)
