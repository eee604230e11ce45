"""A small ResNet for 32x32 images: three stages of basic residual blocks."""
from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from . import register
from .layers import conv1x1, conv3x3


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                conv1x1(in_channels, out_channels, stride), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


def stage_specs(width: int, depth: int) -> Iterator[tuple[int, int, int]]:
    """Yield (in_channels, out_channels, stride) for every block: widths w, 2w, 4w, halving the image."""
    in_channels = width
    for stage in range(3):
        out_channels = width * 2**stage
        for block in range(depth):
            stride = 2 if stage > 0 and block == 0 else 1
            yield in_channels, out_channels, stride
            in_channels = out_channels


class ResNet(nn.Module):
    def __init__(self, width: int = 16, depth: int = 1, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            conv3x3(in_channels, width), nn.BatchNorm2d(width), nn.ReLU(inplace=True)
        )
        self.blocks = self._make_blocks(width, depth)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width * 4, num_classes)

    @staticmethod
    def _make_blocks(width: int, depth: int) -> nn.Sequential:
        return nn.Sequential(*(BasicBlock(i, o, s) for i, o, s in stage_specs(width, depth)))

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


@register("cnn")
def resnet(width: int, depth: int, num_classes: int, image_size: int) -> nn.Module:
    # A fully convolutional net does not depend on the image size.
    del image_size
    return ResNet(width=width, depth=depth, num_classes=num_classes)
