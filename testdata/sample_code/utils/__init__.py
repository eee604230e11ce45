"""Helpers the training path calls: distributed set-up, metrics, checkpoints, logging."""
from .checkpoint import load_checkpoint, save_checkpoint
from .distributed import DistContext, all_reduce_sum, barrier, init_distributed, shutdown
from .logger import get_logger
from .metrics import AverageMeter, count_correct

__all__ = [
    "AverageMeter",
    "DistContext",
    "all_reduce_sum",
    "barrier",
    "count_correct",
    "get_logger",
    "init_distributed",
    "load_checkpoint",
    "save_checkpoint",
    "shutdown",
]
