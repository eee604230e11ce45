"""A synthetic CIFAR-shaped data set and the distributed loaders that feed the trainer.

Every sample is a pure function of (seed, split, index), generated when it is read: the data set
costs no memory, any rank or DataLoader worker produces the same sample, and loading does real work
per sample as decoding and augmenting images would.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from config import ConfigError, TrainConfig

_SPLITS = {"train": 1, "eval": 2}
_SIZE_OPTION = {"train": "--num-samples", "eval": "--eval-samples"}
# Coarse class patterns are upsampled so that neighbouring pixels correlate, as in real images.
_PATTERN_SIZE = 4
_NOISE = 1.0


def _mix(*values: int) -> int:
    """Combine integers into one generator seed; distinct inputs give unrelated streams."""
    h = 0x243F6A8885A308D3
    for v in values:
        h = ((h ^ (v & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 29
    return h & 0x7FFFFFFFFFFFFFFF


class SyntheticImages(Dataset):
    """Images of shape (3, size, size): a class pattern plus Gaussian noise; train images are flipped
    horizontally in a pattern that changes with the epoch."""

    def __init__(
        self, num_samples: int, *, seed: int, split: str = "train", image_size: int = 32, num_classes: int = 10
    ) -> None:
        if split not in _SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {sorted(_SPLITS)}")
        self.num_samples = num_samples
        self.seed = seed
        self.split = split
        self.image_size = image_size
        self.num_classes = num_classes
        self.augment = split == "train"
        self.epoch = 0
        g = torch.Generator().manual_seed(_mix(seed, 0))
        coarse = torch.randn(num_classes, 3, _PATTERN_SIZE, _PATTERN_SIZE, generator=g)
        self.patterns = F.interpolate(coarse, size=(image_size, image_size), mode="bilinear", align_corners=False)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        # Workers are forked afresh for every epoch (no persistent_workers), so they see this value.
        self.epoch = epoch

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"index {index} out of range for {self.num_samples} samples")
        g = torch.Generator().manual_seed(_mix(self.seed, _SPLITS[self.split], index))
        label = int(torch.randint(self.num_classes, (1,), generator=g))
        size = self.image_size
        image = self.patterns[label] + _NOISE * torch.randn(3, size, size, generator=g)
        if self.augment and _mix(self.seed, self.epoch, index) & 1:
            image = image.flip(-1)
        return image, label


def build_loader(
    dataset: SyntheticImages, cfg: TrainConfig, *, rank: int, world_size: int, shuffle: bool
) -> DataLoader:
    """Each rank reads its own 1/world_size of the data set; the shard shrinks as ranks are added."""
    per_rank = len(dataset) // world_size
    if per_rank < cfg.batch_size:
        raise ConfigError(
            f"{_SIZE_OPTION[dataset.split]} {len(dataset)} gives {per_rank} samples per rank on "
            f"{world_size} rank(s), fewer than --batch-size {cfg.batch_size}"
        )
    # Explicit replicas and rank: the sampler must not need a process group at world size 1.
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=cfg.seed, drop_last=True
    )
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        sampler=sampler,
        num_workers=cfg.workers,
        drop_last=True,
        pin_memory=cfg.device == "cuda",
        # Keeps the loader's draws off the global RNG, so they cannot shift model initialisation.
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def build_loaders(cfg: TrainConfig, *, rank: int, world_size: int) -> tuple[DataLoader, DataLoader]:
    common = dict(seed=cfg.seed, image_size=cfg.image_size, num_classes=cfg.num_classes)
    train_set = SyntheticImages(cfg.num_samples, split="train", **common)
    eval_set = SyntheticImages(cfg.eval_samples, split="eval", **common)
    return (
        build_loader(train_set, cfg, rank=rank, world_size=world_size, shuffle=True),
        build_loader(eval_set, cfg, rank=rank, world_size=world_size, shuffle=False),
    )


def set_epoch(loader: DataLoader, epoch: int) -> None:
    loader.sampler.set_epoch(epoch)
    loader.dataset.set_epoch(epoch)
