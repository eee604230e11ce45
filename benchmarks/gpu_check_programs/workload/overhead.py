"""Overhead workloads, run alternately as this plain module and its instrumented copy."""
import torch

import harness as H


def forward(w, x):
    return (x @ w).relu().sum()


def matmul_loop(w, opt, steps, size):
    """A GPU-bound training loop: forward, backward and an SGD step of a size x size matmul."""
    # scaleprobe: step
    for s in range(steps):
        x = torch.randn(size, size, device=H.DEVICE)
        loss = forward(w, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    H.synchronize()


def leaf(acc, j):
    return acc + j


def layer(x, w, leaves):
    acc = 0
    for j in range(leaves):
        acc = leaf(acc, j)
    return torch.tanh(x @ w)


def many_regions_loop(x, ws, steps, leaves):
    """A CPU-bound step of many small regions: len(ws) layers of two small kernels each, every
    layer calling `leaves` tiny Python-only regions."""
    # scaleprobe: step
    for s in range(steps):
        y = x
        for w in ws:
            y = layer(y, w, leaves)
    H.synchronize()
    return y
