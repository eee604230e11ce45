"""Running averages and accuracy counts, summed over ranks at the end of an epoch."""
from __future__ import annotations

import torch

from .distributed import all_reduce_sum


def count_correct(logits: torch.Tensor, targets: torch.Tensor) -> int:
    return int((logits.argmax(dim=1) == targets).sum())


class AverageMeter:
    """Weighted mean of a quantity; `reduce()` turns the per-rank means into the mean over all ranks."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, value: float, n: int = 1) -> None:
        self.total += value * n
        self.count += n

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else float("nan")

    def reduce(self, device: torch.device) -> "AverageMeter":
        total, count = all_reduce_sum([self.total, float(self.count)], device)
        merged = AverageMeter()
        merged.total, merged.count = total, int(count)
        return merged
