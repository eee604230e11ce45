"""Per-rank logging: rank 0 reports progress, the other ranks only warnings, all on stderr so that
stdout carries only the program's result line."""
from __future__ import annotations

import logging
import sys

_FORMAT = "%(asctime)s [rank {rank}] %(message)s"


def get_logger(rank: int, name: str = "sample") -> logging.Logger:
    logger = logging.getLogger(f"{name}.rank{rank}")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT.format(rank=rank), datefmt="%H:%M:%S"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    return logger
