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
# Seed domains, so that class patterns, samples and flips never share a random stream.
_PATTERNS, _FLIPS = 0, 3
# Coarse class patterns are upsampled so that neighbouring pixels correlate, as in real images.
_PATTERN_SIZE = 4
_NOISE = 1.0
_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _mix(*values: int) -> int:
    """Combine integers into one 63-bit seed; distinct inputs give unrelated streams and every bit
    of the result depends on every input (a plain multiply-xor left the low bit tied to the last one)."""
    h = 0
    for v in values:
        h = _splitmix64(h ^ (v & _MASK64))
    return h >> 1


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
        g = torch.Generator().manual_seed(_mix(seed, _PATTERNS))
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
        if self.augment and _mix(self.seed, _FLIPS, self.epoch, index) & 1:
            image = image.flip(-1)
        return image, label


def build_loader(dataset: SyntheticImages, cfg: TrainConfig, *, rank: int, world_size: int) -> DataLoader:
    """Each rank reads its own 1/world_size of the data set; the shard shrinks as ranks are added.

    Training shuffles and drops incomplete batches, so every step has the same shape; evaluation
    keeps the last, smaller batch, so that a sweep to many ranks never runs out of evaluation data.
    """
    train = dataset.split == "train"
    per_rank = len(dataset) // world_size
    needed = cfg.batch_size if train else 1
    if per_rank < needed:
        raise ConfigError(
            f"{_SIZE_OPTION[dataset.split]} {len(dataset)} gives {per_rank} samples per rank on "
            f"{world_size} rank(s), fewer than " + (f"--batch-size {cfg.batch_size}" if train else "one")
        )
    # Explicit replicas and rank: the sampler must not need a process group at world size 1.
    # drop_last here only evens the shards out; no rank sees a sample twice.
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=train, seed=cfg.seed, drop_last=True
    )
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        sampler=sampler,
        num_workers=cfg.workers,
        drop_last=train,
        pin_memory=cfg.device == "cuda",
        # Keeps the loader's draws off the global RNG, so they cannot shift model initialisation.
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def build_loaders(cfg: TrainConfig, *, rank: int, world_size: int) -> tuple[DataLoader, DataLoader]:
    common = dict(seed=cfg.seed, image_size=cfg.image_size, num_classes=cfg.num_classes)
    train_set = SyntheticImages(cfg.num_samples, split="train", **common)
    eval_set = SyntheticImages(cfg.eval_samples, split="eval", **common)
    return (
        build_loader(train_set, cfg, rank=rank, world_size=world_size),
        build_loader(eval_set, cfg, rank=rank, world_size=world_size),
    )


def set_epoch(loader: DataLoader, epoch: int) -> None:
    loader.sampler.set_epoch(epoch)
    loader.dataset.set_epoch(epoch)
