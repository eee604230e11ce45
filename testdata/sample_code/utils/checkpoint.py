"""Checkpoints: the model, optimizer and progress of the last finished epoch in `<dir>/last.pt`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from config import ConfigError

CHECKPOINT_NAME = "last.pt"
CHECKPOINT_VERSION = 1


def checkpoint_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def save_checkpoint(
    directory: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: dict[str, Any],
    architecture: dict[str, Any],
) -> Path:
    path = checkpoint_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "version": CHECKPOINT_VERSION,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "progress": progress,
        "architecture": architecture,
    }
    # Written aside and renamed, so a run killed mid-save leaves the previous checkpoint intact.
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(
    directory: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    architecture: dict[str, Any],
    map_location: torch.device,
) -> dict[str, Any]:
    """Restore model and optimizer in place; return the saved progress (epoch, global_step, ...)."""
    path = checkpoint_path(directory)
    if not path.is_file():
        raise ConfigError(f"--resume: no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several unrelated types for a damaged file
        raise ConfigError(f"{path}: not a readable checkpoint ({exc.__class__.__name__}: {exc})") from exc
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        found = state.get("version") if isinstance(state, dict) else None
        raise ConfigError(f"{path}: checkpoint version {found!r}, this program reads {CHECKPOINT_VERSION}")
    for name, value in architecture.items():
        saved = state["architecture"].get(name)
        if saved != value:
            raise ConfigError(f"{path}: checkpoint has {name}={saved!r}, this run has {name}={value!r}")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return dict(state["progress"])
