"""A multi-layer perceptron on flattened images; `width` scales the hidden size."""
from __future__ import annotations

import torch
from torch import nn

from . import register
from .layers import ScaledLinear

HIDDEN_PER_WIDTH = 16


class MLP(nn.Module):
    def __init__(self, in_features: int, hidden: int, depth: int, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        features = in_features
        for _ in range(depth):
            layers += [ScaledLinear(features, hidden), nn.ReLU()]
            features = hidden
        self.body = nn.Sequential(*layers)
        self.head = ScaledLinear(features, num_classes)

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(torch.flatten(x, 1)))


@register("mlp")
def mlp(width: int, depth: int, num_classes: int, image_size: int) -> nn.Module:
    return MLP(3 * image_size * image_size, width * HIDDEN_PER_WIDTH, depth, num_classes)
