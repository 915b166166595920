"""What several papers' experiments share: one dataset loader per kind and one CNN set-up.

Datasets come from ``$DPNET_DATA`` with checksums verified; :func:`use_data` points every loader
at another root (the tests' tiny fixtures, which have no published checksums) for the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import numpy as np
import torch

from .. import data, models
from ..errors import require
from ..problems.neural import NeuralProblem
from .keys import Runtime

_SOURCE: dict = Runtime(root=None, verify=True)   # the data root is in every run's key


@contextlib.contextmanager
def use_data(root: str | Path, verify: bool = False) -> Iterator[None]:
    """Read every dataset from ``root`` inside the block (in this process)."""
    before = dict(_SOURCE)
    _SOURCE.update(root=Path(root), verify=verify)
    try:
        yield
    finally:
        _SOURCE.update(before)


def data_root() -> str:
    """Where datasets are read from now (part of a run's key where the data matter)."""
    return str(_SOURCE["root"] or data.data_root(None))


def binary(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(X dense, y in {-1, +1}, notes)`` of a LIBSVM binary dataset."""
    dtype = np.float32 if name == "epsilon" else np.float64
    ds = data.load_libsvm(name, root=_SOURCE["root"], verify=_SOURCE["verify"], download=False,
                          dtype=dtype)
    return ds.dense(dtype), ds.binary_labels(), tuple(ds.notes)


def images(name: str) -> tuple[data.Dataset, data.Dataset]:
    """``(train, test)`` of ``"mnist"`` or ``"cifar10"``."""
    load = {"mnist": data.load_mnist, "cifar10": data.load_cifar10}[name]
    return cast(tuple[data.Dataset, data.Dataset],
                tuple(load(split, root=_SOURCE["root"], verify=_SOURCE["verify"], download=False)
                      for split in ("train", "test")))


def has(names) -> bool:
    """Whether every named dataset is under the data root."""
    return data.available(names, root=_SOURCE["root"])


def held_out_images(n_samples: int, count: int, seed: int = 1) -> np.ndarray:
    """Indices of ``count`` images of a training file held out of every agent's share (a
    seeded permutation's first ``count``): a validation set that is no agent's private data."""
    require(0 <= count < n_samples, "held_out", count, f"0 <= held_out < {n_samples} images")
    return np.sort(np.random.default_rng(seed).permutation(n_samples)[:count])


def cnn_problem(name: str, n_agents: int, per_agent: int | None = None,
                test_samples: int | None = None, eval_samples: int | None = None,
                model: str = "cnn", width: int = 64, seed: int = 0,
                chunk: int | None = None, held_out: int = 0) -> NeuralProblem:
    """The image-classification problem of papers 001-003: the training set split evenly over
    ``n_agents`` (seed 0; the first ``per_agent`` samples of each share when given), the papers'
    CNN (or a ResNet-18 of ``width``) initialised from ``seed``, float32. ``held_out``: that many
    training images (:func:`held_out_images`) are set aside first and belong to no agent."""
    train, test = images(name)
    pool = np.arange(len(train.y))
    if held_out:
        pool = np.setdiff1d(pool, held_out_images(len(train.y), held_out))
    parts = pool[data.split_even(len(pool), n_agents, seed=0)]
    if per_agent is not None:
        parts = parts[:, :per_agent]
    grey = name == "mnist"
    module: torch.nn.Module
    if model == "cnn":
        module = models.mnist_cnn(seed=seed) if grey else models.cifar_cnn(seed=seed)
    else:
        module = models.resnet18(seed=seed, in_channels=1 if grey else 3, width=width)
    tx, ty = (test.X, test.y) if test_samples is None else (test.X[:test_samples],
                                                            test.y[:test_samples])
    kw = {} if chunk is None else {"chunk": chunk}
    return NeuralProblem(module, train.X, train.y, parts, test=(tx, ty),
                         transform=models.mnist_transform if grey else models.cifar_transform,
                         metric_samples=eval_samples, **kw)
