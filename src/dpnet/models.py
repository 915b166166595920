"""Small CNNs for the papers' image experiments and their input transforms.

The papers do not give their architectures (paper 001: "a CNN with three convolutional layers"
on MNIST; papers 002/003 are silent too), so these are stated choices:

* :class:`MnistCNN` (7,194 parameters): conv 5x5 1->8 (padding 2), ReLU, max-pool 2;
  conv 5x5 8->16 (padding 2), ReLU, max-pool 2; conv 3x3 16->16 (padding 1), ReLU, max-pool 2
  (28 -> 14 -> 7 -> 3); linear 144 -> 10. Three convolutional layers as in paper 001, in the
  LeNet style, narrow enough that 20 agents' per-sample gradients stay affordable on a CPU (each
  parameter also costs DP noise), no normalisation layer (per-sample clipping and BatchNorm do
  not mix), no dropout (the state must be a deterministic function of the seed).
  ``MnistCNN(channels=(16, 32, 32))`` is the wider variant (25,386 parameters).
* :class:`CifarCNN` (122,570 parameters): three conv 3x3 blocks 3->32->64->64 (padding 1), each
  ReLU + max-pool 2 (32 -> 16 -> 8 -> 4), linear 1024 -> 64, ReLU, linear 64 -> 10.

Factories take a ``seed`` and initialise under a forked torch RNG, so building a model never
touches the global random state. Transforms map raw uint8 images with any leading shape (agents,
samples) to normalised float32 inputs (MNIST mean/std 0.1307/0.3081; CIFAR-10 per-channel
mean/std of the original training set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

from .errors import UnknownNameError
from .registry import Registry

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class MnistCNN(nn.Module):
    """Three-convolution MNIST classifier (see the module docstring)."""

    def __init__(self, channels: tuple[int, int, int] = (8, 16, 16), classes: int = 10) -> None:
        super().__init__()
        c1, c2, c3 = channels
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(c3 * 3 * 3, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class CifarCNN(nn.Module):
    """Small three-convolution CIFAR-10 classifier (see the module docstring)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(64 * 4 * 4, 64), nn.ReLU(),
                                        nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


_M = TypeVar("_M", bound=nn.Module)


def _seeded(factory: Callable[[], _M], seed: int) -> _M:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


def mnist_cnn(seed: int = 0, **kw) -> MnistCNN:
    """A :class:`MnistCNN` initialised from ``seed`` (the global torch RNG untouched); keywords go to its
    constructor (``channels``, ``classes``)."""
    return _seeded(lambda: MnistCNN(**kw), seed)


def cifar_cnn(seed: int = 0, **kw) -> CifarCNN:
    """A :class:`CifarCNN` initialised from ``seed`` (the global torch RNG untouched); keywords go to its
    constructor (``classes``)."""
    return _seeded(lambda: CifarCNN(**kw), seed)


def mnist_transform(x: torch.Tensor) -> torch.Tensor:
    """uint8 ``(..., 28, 28)`` -> float32 ``(..., 1, 28, 28)``, normalised."""
    return ((x.to(torch.float32) / 255.0 - MNIST_MEAN) / MNIST_STD).unsqueeze(-3)


def cifar_transform(x: torch.Tensor) -> torch.Tensor:
    """uint8 HWC ``(..., 32, 32, 3)`` -> float32 CHW ``(..., 3, 32, 32)``, normalised per
    channel (on x's device: a problem's images may live on a GPU)."""
    mean = torch.tensor(CIFAR_MEAN, dtype=torch.float32, device=x.device)
    std = torch.tensor(CIFAR_STD, dtype=torch.float32, device=x.device)
    return ((x.to(torch.float32) / 255.0 - mean) / std).movedim(-1, -3)


# ---- ResNet-18 for small images (paper 003's model) --------------------------------------------

NORMS = ("batch", "group")


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    return nn.GroupNorm(min(32, channels), channels)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (1x1 projection when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int, norm: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = _norm(norm, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = _norm(norm, cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          _norm(norm, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016: four stages of two basic blocks, widths w, 2w, 4w, 8w, strides
    1, 2, 2, 2, global average pooling, one linear layer) adapted to 28x28 grey (MNIST) and
    32x32 colour (CIFAR-10) inputs, as paper 003 trains it without giving the adaptation:

    * the ImageNet stem (7x7 stride-2 convolution and 3x3 max-pool, which would shrink the image
      4x before the first stage) is replaced by one 3x3 stride-1 convolution with
      ``in_channels`` inputs (1 for MNIST, 3 for CIFAR-10); feature maps are 28/28/14/7/4
      (MNIST) and 32/32/16/8/4 (CIFAR-10), then pooled to 1x1;
    * ``width=64`` is the standard ResNet-18 (11,172,810 parameters for MNIST, 11,173,962 for
      CIFAR-10); smaller widths keep the architecture and shrink every channel count (CPU runs);
    * ``norm="batch"`` (default, the paper's architecture): BatchNorm layers, which
      :class:`~dpnet.problems.neural.NeuralProblem` switches to batch statistics. No running
      statistics are kept, so an agent's state row (all parameters, BN's affine weights
      included) is everything that is perturbed and exchanged; every forward pass normalises
      with the statistics of its own minibatch (at evaluation: of the evaluation chunk).
      ``norm="group"``: GroupNorm with ``min(32, C)`` groups instead, for per-sample gradients
      (clipping), which batch statistics do not allow.
    """

    def __init__(self, in_channels: int = 1, classes: int = 10, width: int = 64,
                 norm: str = "batch") -> None:
        super().__init__()
        if norm not in NORMS:
            raise UnknownNameError("norm", str(norm), NORMS)
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False),
                                  _norm(norm, width), nn.ReLU())
        blocks, c = [], width
        for stage, mult in enumerate((1, 2, 4, 8)):
            for b in range(2):
                stride = 2 if (b == 0 and stage > 0) else 1
                blocks.append(BasicBlock(c, width * mult, stride, norm))
                c = width * mult
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1)
        return self.fc(torch.flatten(h, 1))


def resnet18(seed: int = 0, in_channels: int = 1, width: int = 64, norm: str = "batch",
             classes: int = 10) -> ResNet18:
    """ResNet-18 for 28x28 grey (``in_channels=1``) or 32x32 colour (3) images."""
    return _seeded(lambda: ResNet18(in_channels, classes, width, norm), seed)


#: the model factories a configuration names (``model = "mnist_cnn"``), each ``(seed, **kw)``
MODELS: Registry = Registry("model", "dpnet.models")
for _factory in (mnist_cnn, cifar_cnn, resnet18):
    MODELS.register(_factory.__name__, _factory)
#: the input transform of each built-in image dataset
TRANSFORMS: Registry = Registry("dataset transform", "dpnet.models")
TRANSFORMS.register("mnist", mnist_transform)
TRANSFORMS.register("cifar10", cifar_transform)
