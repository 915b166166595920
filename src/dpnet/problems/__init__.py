"""Local objectives of all agents with stacked gradients."""

from pathlib import Path

import numpy as np

from .. import models
from ..data import Dataset, load_cifar10, load_libsvm, load_mnist
from ..errors import ParameterError, UnknownNameError, require
from ..registry import Registry, resolve
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


#: the keys of a ``name = "neural"`` problem table besides the partitioner's own
NEURAL_KEYS = ("name", "dataset", "model", "model_kw", "n_agents", "how", "seed", "records",
               "chunk", "metric_samples")
#: problem names a configuration knows besides the synthetic ones
DATA_PROBLEMS = ("logistic_regression", "neural")


def from_spec(spec: dict, agents=None) -> Problem:
    """Build a problem from a config table: ``{"name": "nonconvex_logistic", "n_agents": 6, ...}``
    (the random constructors of the synthetic problems),
    ``{"name": "logistic_regression", "dataset": "a9a", "n_agents": 20, "reg": "1/m"}`` (a LIBSVM
    dataset from ``$DPNET_DATA``, split by the partitioner ``how`` with its parameters, evenly at
    random by default, drawn from ``seed``; also ``split``), or ``{"name": "neural", "dataset":
    "mnist", "model": "mnist_cnn", "n_agents": 10, "how": "dirichlet", "alpha": 0.1}`` (see
    :func:`neural_from_spec`). ``agents``: hold only these agents' data (one rank of a
    distributed run)."""
    spec = dict(spec)
    name = spec.pop("name", None)
    if name == "neural":
        return neural_from_spec(spec, agents)
    if isinstance(name, str) and ":" in name:     # a user's factory: factory(**rest)
        problem = resolve(name, "problem.name")(**spec)
        require(isinstance(problem, Problem), "problem.name", name, "a factory returning a "
                "Problem")
        return problem if agents is None else problem.restrict(agents)
    if name == "logistic_regression":
        require("dataset" in spec, "problem.dataset", None, "a LIBSVM dataset name for "
                "logistic_regression (mushrooms, a9a, w8a, epsilon) or a LIBSVM file's path")
        ds = load_libsvm(spec.pop("dataset"), spec.pop("split", "train"),
                         verify=spec.pop("verify", True))
        # LIBSVM's labels as -1/+1 (mushrooms' are 1 and 2: both "positive" read raw)
        return LogisticRegression.partition(ds.X, ds.binary_labels(), spec.pop("n_agents"),
                                            agents=agents, **spec)
    if not isinstance(name, str) or name not in RANDOM:
        raise UnknownNameError("problem", str(name), [*RANDOM, *DATA_PROBLEMS])
    problem = RANDOM[name].random(**spec)
    return problem if agents is None else problem.restrict(agents)


def neural_from_spec(spec: dict, agents=None) -> NeuralProblem:
    """A :class:`NeuralProblem` from a table: ``dataset`` (``"mnist"``, ``"cifar10"`` from
    ``$DPNET_DATA`` with their test sets and transforms, or a path to an ``.npz`` holding ``X``
    and ``y``), ``model`` (a name of :data:`dpnet.models.MODELS` or an import path
    ``"package.module:factory"``; built as ``factory(seed=seed, **model_kw)``; default: the
    dataset's CNN), ``n_agents``, ``how`` (a partitioner, with its parameters beside it),
    ``seed`` (the split and the model's initialisation), ``records`` (only the first N training
    records), ``chunk``, ``metric_samples``."""
    spec = dict(spec)
    dataset = spec.pop("dataset", None)
    require(isinstance(dataset, str) and bool(dataset), "problem.dataset", dataset,
            "'mnist', 'cifar10' or a path to an .npz file with X and y")
    seed = spec.pop("seed", 0)
    if dataset in models.TRANSFORMS:
        load = load_mnist if dataset == "mnist" else load_cifar10
        train, test, transform = load("train"), load("test"), models.TRANSFORMS[dataset]
    else:
        train, test, transform = _npz(dataset), None, None
    records = spec.pop("records", None)
    if records is not None:
        require(isinstance(records, int) and 1 <= records <= len(train.y), "problem.records",
                records, f"an integer in [1, {len(train.y)}] (the first N training records)")
        train = Dataset(train.name, train.split, train.X[:records], train.y[:records],
                        source=train.source)
    model_name = spec.pop("model", "cifar_cnn" if dataset == "cifar10" else "mnist_cnn")
    factory = resolve(model_name, "problem.model") if ":" in str(model_name) else \
        models.MODELS[model_name]
    model = factory(seed=seed, **spec.pop("model_kw", {}))
    kw = {k: spec.pop(k) for k in ("chunk", "metric_samples") if k in spec}
    n_agents, how = spec.pop("n_agents", None), spec.pop("how", "even")
    require(n_agents is not None, "problem.n_agents", n_agents, "the number of agents")
    return NeuralProblem.from_dataset(model, train, n_agents, test=test, how=how, seed=seed,
                                      transform=transform, agents=agents,
                                      partition_params=spec, **kw)


def _npz(path: str) -> Dataset:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ParameterError("problem.dataset", path, "'mnist', 'cifar10' or an existing .npz "
                             "file with arrays X and y")
    with np.load(file) as z:
        missing = [k for k in ("X", "y") if k not in z.files]
        require(not missing, "problem.dataset", path, f"an .npz with arrays X and y (it has "
                f"{z.files})")
        X, y = z["X"], z["y"]
    require(X.shape[0] == y.shape[0], "problem.dataset", path,
            f"one label per record ({X.shape[0]} records, {y.shape[0]} labels)")
    return Dataset(file.stem, "train", X, y, source=(str(file),))
