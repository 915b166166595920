"""A user's model factory, named by import path in configurations (tests/test_config_neural.py)."""

from __future__ import annotations

import torch
from torch import nn


def tiny_mlp(seed: int = 0, width: int = 8) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(6, width), nn.ReLU(), nn.Linear(width, 3))
