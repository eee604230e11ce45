"""Train a small CNN or MLP on synthetic CIFAR-shaped data with DistributedDataParallel.

    python main.py --epochs 2 --steps-per-epoch 5                  # one process
    python -m torch.distributed.run --nproc-per-node 2 main.py     # two ranks (gloo on CPU)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import torch

from config import ConfigError, TrainConfig
from models import available_models
from train import Trainer
from utils import get_logger, init_distributed, shutdown


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=available_models(), default="cnn")
    p.add_argument("--width", type=positive_int, default=16, help="channels of the first CNN stage; MLP hidden size / 16")
    p.add_argument("--depth", type=positive_int, default=1, help="residual blocks per CNN stage; MLP hidden layers")
    p.add_argument("--epochs", type=positive_int, default=2)
    p.add_argument("--steps-per-epoch", type=positive_int, default=None, help="cap on steps per epoch (default: the whole shard)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="samples per step on each rank")
    p.add_argument("--lr", type=positive_float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=non_negative_int, default=0, help="DataLoader worker processes per rank")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads per rank")
    p.add_argument("--num-samples", type=positive_int, default=1024, help="training samples, split over the ranks")
    p.add_argument("--eval-samples", type=positive_int, default=256)
    p.add_argument("--image-size", type=positive_int, default=32)
    p.add_argument("--num-classes", type=positive_int, default=10)
    p.add_argument("--checkpoint-dir", default=None, help="save DIR/last.pt after every epoch")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    p.add_argument("--result-json", default=None, metavar="PATH", help="write the results as JSON (rank 0)")
    return p


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.checkpoint_dir is None:
        parser.error("--resume needs --checkpoint-dir")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this torch build sees no CUDA device")
    if args.num_classes < 2:
        parser.error("--num-classes must be at least 2")
    return args


def make_deterministic(cfg: TrainConfig) -> None:
    if cfg.device == "cuda":
        # cuBLAS reads this when it starts; deterministic GEMMs need it.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        # Some CUDA backward kernels (adaptive pooling) have no deterministic version: warn, don't fail.
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        # Ranks share the cores: one thread each avoids oversubscription. Results are reproducible
        # for a given --threads; another thread count sums in another order. The call below imports
        # torch._inductor (1.2 to 1.6 s a run with torch 2.13, a constant region of its own); without
        # it, a gloo rank aborted at exit ("terminate called without an active exception") in 5 of
        # 36 two-rank torchrun runs, against 0 of 40 with it (review 73 L5, reverted).
        torch.set_num_threads(cfg.threads)
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg.seed)


def write_result(path: str, payload: dict[str, Any]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    cfg = TrainConfig.from_args(parse_args(argv))
    make_deterministic(cfg)
    started = time.perf_counter()
    try:
        ctx = init_distributed(cfg.device)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        log = get_logger(ctx.rank)
        result = Trainer(cfg, ctx, log).fit()
    except ConfigError as exc:
        print(f"error: [rank {ctx.rank}] {exc}", file=sys.stderr)
        return 2
    finally:
        shutdown()
    if ctx.is_main:
        if cfg.result_json is not None:
            payload = asdict(result)
            payload.update(wall_s=time.perf_counter() - started, config=cfg.to_dict())
            write_result(cfg.result_json, payload)
        print(f"final_loss={result.final_loss!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
