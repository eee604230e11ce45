"""The training loop: epochs of DDP steps (forward, loss, backward, optimizer step), evaluation after
every epoch, and a checkpoint after every epoch when a directory is given."""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from config import TrainConfig
from data import build_loaders, set_epoch
from models import build_model
from utils import (
    AverageMeter,
    DistContext,
    all_reduce_sum,
    barrier,
    count_correct,
    load_checkpoint,
    save_checkpoint,
)


@dataclass(frozen=True)
class TrainResult:
    final_loss: float  # mean training loss of the last epoch over all ranks
    train_losses: list[float]  # the same for every epoch of this invocation
    eval_loss: float
    accuracy: float
    start_epoch: int
    epochs_done: int
    steps_done: int  # optimizer steps of this rank in this invocation
    global_step: int  # optimizer steps since the start, resumed runs included
    world_size: int
    train_s: float  # this rank's wall time in training epochs (no evaluation, no set-up)


class Trainer:
    def __init__(self, cfg: TrainConfig, ctx: DistContext, log: logging.Logger) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.log = log
        # Same seed on every rank: identical initial weights even before DDP broadcasts rank 0's.
        torch.manual_seed(cfg.seed)
        model = build_model(
            cfg.model, width=cfg.width, depth=cfg.depth, num_classes=cfg.num_classes, image_size=cfg.image_size
        ).to(ctx.device)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.loss_fn = nn.CrossEntropyLoss()
        self.start_epoch = 0
        self.global_step = 0
        self.last_train_loss = math.nan
        if cfg.resume:
            progress = load_checkpoint(
                cfg.checkpoint_dir,
                model=model,
                optimizer=self.optimizer,
                architecture=cfg.architecture(),
                map_location=ctx.device,
            )
            self.start_epoch = progress["epoch"]
            self.global_step = progress["global_step"]
            self.last_train_loss = progress["train_loss"]
            log.info("resumed from %s at epoch %d", cfg.checkpoint_dir, self.start_epoch)
        self.model: nn.Module = model
        if ctx.has_group:
            device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            self.model = DistributedDataParallel(model, device_ids=device_ids)
        self.train_loader, self.eval_loader = build_loaders(cfg, rank=ctx.rank, world_size=ctx.world_size)
        self.steps_per_epoch = len(self.train_loader)
        if cfg.steps_per_epoch is not None:
            self.steps_per_epoch = min(cfg.steps_per_epoch, self.steps_per_epoch)
        log.info(
            "%s width=%d depth=%d: %d parameters, %d ranks, %d steps per epoch",
            cfg.model, cfg.width, cfg.depth, model.num_parameters, ctx.world_size, self.steps_per_epoch,
        )

    @property
    def module(self) -> nn.Module:
        if isinstance(self.model, DistributedDataParallel):
            return self.model.module
        return self.model

    def train_step(self, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(images)
        loss = self.loss_fn(logits, targets)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def train_epoch(self, epoch: int) -> tuple[float, int]:
        self.model.train()
        loader = self.train_loader
        set_epoch(loader, epoch)
        meter = AverageMeter()
        steps = 0
        for batch in loader:
            images, targets = (t.to(self.ctx.device, non_blocking=True) for t in batch)
            loss = self.train_step(images, targets)
            meter.update(loss.item(), targets.size(0))
            steps += 1
            # Stop here rather than at the top of the next iteration: no batch is loaded in vain.
            if steps >= self.steps_per_epoch:
                break
        self.global_step += steps
        return meter.reduce(self.ctx.device).avg, steps

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        model = self.module
        model.eval()
        loss_sum = correct = seen = 0.0
        for images, targets in self.eval_loader:
            images, targets = images.to(self.ctx.device), targets.to(self.ctx.device)
            logits = model(images)
            loss_sum += float(self.loss_fn(logits, targets)) * targets.size(0)
            correct += count_correct(logits, targets)
            seen += targets.size(0)
        loss_sum, correct, seen = all_reduce_sum([loss_sum, correct, seen], self.ctx.device)
        return loss_sum / seen, correct / seen

    def save(self, epoch: int) -> None:
        if self.ctx.is_main:
            path = save_checkpoint(
                self.cfg.checkpoint_dir,
                model=self.module,
                optimizer=self.optimizer,
                progress={"epoch": epoch, "global_step": self.global_step, "train_loss": self.last_train_loss},
                architecture=self.cfg.architecture(),
            )
            self.log.info("saved %s", path)
        # Nobody may read the checkpoint (or exit and delete it) before rank 0 has finished writing.
        barrier()

    def fit(self) -> TrainResult:
        steps_done = 0
        train_losses: list[float] = []
        train_s = 0.0
        eval_loss = accuracy = math.nan
        for epoch in range(self.start_epoch, self.cfg.epochs):
            started = time.perf_counter()
            self.last_train_loss, steps = self.train_epoch(epoch)
            train_s += time.perf_counter() - started
            steps_done += steps
            train_losses.append(self.last_train_loss)
            eval_loss, accuracy = self.evaluate()
            self.log.info(
                "epoch %d/%d: train loss %.4f, eval loss %.4f, accuracy %.3f",
                epoch + 1, self.cfg.epochs, self.last_train_loss, eval_loss, accuracy,
            )
            if self.cfg.checkpoint_dir is not None:
                self.save(epoch + 1)
        if self.start_epoch >= self.cfg.epochs:
            self.log.info("checkpoint is already at epoch %d: nothing to train", self.start_epoch)
            eval_loss, accuracy = self.evaluate()
        return TrainResult(
            final_loss=self.last_train_loss,
            train_losses=train_losses,
            eval_loss=eval_loss,
            accuracy=accuracy,
            start_epoch=self.start_epoch,
            epochs_done=max(0, self.cfg.epochs - self.start_epoch),
            steps_done=steps_done,
            global_step=self.global_step,
            world_size=self.ctx.world_size,
            train_s=train_s,
        )
