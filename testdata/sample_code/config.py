"""Training configuration shared by every module of the sample application."""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Optional


class ConfigError(Exception):
    """A bad option, environment or checkpoint: `main` prints it as one line and exits with status 2."""


@dataclass(frozen=True)
class TrainConfig:
    model: str = "cnn"
    width: int = 16
    depth: int = 1
    epochs: int = 2
    steps_per_epoch: Optional[int] = None
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0
    workers: int = 0
    device: str = "cpu"
    threads: int = 1
    num_samples: int = 1024
    eval_samples: int = 256
    image_size: int = 32
    num_classes: int = 10
    checkpoint_dir: Optional[str] = None
    resume: bool = False
    result_json: Optional[str] = None

    # Fields that must match between a checkpoint and the run resuming from it.
    ARCHITECTURE_FIELDS: ClassVar[tuple[str, ...]] = ("model", "width", "depth", "image_size", "num_classes")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "TrainConfig":
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def architecture(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.ARCHITECTURE_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
