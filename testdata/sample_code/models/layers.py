"""Building blocks shared by the models."""
from __future__ import annotations

import torch
from torch import nn


def conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False)


class ScaledLinear(nn.Linear):
    """A linear layer whose output is scaled by 1/sqrt(fan_in), which keeps deep MLPs trainable."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__(in_features, out_features)
        self.scale = in_features ** -0.5
        nn.init.normal_(self.weight, std=1.0)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x * self.scale)
