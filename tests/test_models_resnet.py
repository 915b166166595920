"""ResNet-18 adapted to 28x28 grey / 32x32 colour images (paper 003's model)."""

import numpy as np
import pytest
import torch

import dpnet
from dpnet import models
from dpnet.problems.neural import NeuralProblem


def test_parameter_count_is_resnet18_with_small_image_stem():
    # torchvision's resnet18 with 10 classes has 11,181,642 parameters; our stem is a 3x3 conv
    # (3*64*9 weights) instead of 7x7 (3*64*49): 11,181,642 - 9,408 + 1,728
    cifar = models.resnet18(in_channels=3)
    assert sum(p.numel() for p in cifar.parameters()) == 11_181_642 - 9_408 + 1_728
    mnist = models.resnet18(in_channels=1)
    assert sum(p.numel() for p in mnist.parameters()) == 11_173_962 - 2 * 64 * 9


@pytest.mark.parametrize("c, hw, sizes", [(1, 28, [28, 28, 14, 7, 4]), (3, 32, [32, 32, 16, 8, 4])])
def test_feature_map_sizes(c, hw, sizes):
    m = models.resnet18(in_channels=c, width=4)
    x = torch.randn(2, c, hw, hw)
    seen = [m.stem(x).shape[-1]]
    h = m.stem(x)
    for i, block in enumerate(m.layers):
        h = block(h)
        if i % 2 == 1:
            seen.append(h.shape[-1])
    assert seen == sizes and m(x).shape == (2, 10)


def test_seeded_and_norm_choice():
    a, b = models.resnet18(seed=3, width=4), models.resnet18(seed=3, width=4)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q)
    g = models.resnet18(width=8, norm="group")
    assert any(isinstance(m, torch.nn.GroupNorm) for m in g.modules())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in g.modules())
    with pytest.raises(dpnet.UnknownNameError, match="unknown norm 'layer'; known norms: batch"):
        models.ResNet18(norm="layer")


def test_batchnorm_resnet_in_neural_problem_uses_batch_statistics():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 255, size=(40, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, size=40)
    parts = np.arange(40).reshape(2, 20)
    p = NeuralProblem(models.resnet18(width=4), X, y, parts, transform=models.mnist_transform)
    # no running statistics: the state row is all there is
    assert not any(b.numel() for n, b in p.model.named_buffers() if "running" in n)
    G = p.grad(p.default_x0())
    assert G.shape == (2, p.dim) and torch.isfinite(G).all()
    # an agent's gradient on its own samples differs between the two agents' data
    assert not torch.allclose(G[0], G[1])
