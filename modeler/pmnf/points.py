"""Point sets: grouping series that share one, and choosing the lines the single-parameter step fits.

Series measured at the same points share every design matrix, so the engine solves each point set
once and applies the solution to all of its series at the same time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Line:
    """The points used to model one parameter alone: `x[k]` is the parameter's k-th value and
    `weights[k]` averages the measured values of the points on the (parallel) lines at that value."""

    x: np.ndarray
    weights: np.ndarray  # (len(x), n_points)


def group_by_points(points: list[np.ndarray]) -> dict[bytes, list[int]]:
    """Series indexes grouped by identical point arrays (same points in the same order)."""
    groups: dict[bytes, list[int]] = {}
    for i, p in enumerate(points):
        key = np.ascontiguousarray(p, dtype=float).tobytes() + bytes(str(p.shape), "ascii")
        groups.setdefault(key, []).append(i)
    return groups


def extrap_lines(points: np.ndarray) -> list[Line]:
    """Extra-P 4.2.5's point selection for the single-parameter step ('auto').

    For each parameter, the points are grouped by their coordinates in the other parameters; the
    longest such lines are kept, points are regrouped by the parameter's value, points outside the
    first line's range of the other coordinates are dropped, and each value's points are averaged.
    On a full grid this averages all parallel lines.
    """
    n, dims = points.shape
    coords = [tuple(float(v) for v in row) for row in points]
    lines = []
    for p in range(dims):
        by_rest: dict[tuple, list[int]] = {}
        for i, c in enumerate(coords):
            by_rest.setdefault(c[:p] + c[p + 1:], []).append(i)
        longest = max(len(g) for g in by_rest.values())
        candidates = [g for g in by_rest.values() if len(g) == longest]
        by_value: dict[float, list[int]] = {}
        for g in candidates:
            for i in g:
                by_value.setdefault(coords[i][p], []).append(i)
        groups = list(by_value.items())
        common = {coords[i][:p] + coords[i][p + 1:] for i in groups[0][1]}
        kept = [(v, [i for i in idx if coords[i][:p] + coords[i][p + 1:] in common]) for v, idx in groups]
        kept = [(v, idx) for v, idx in kept if idx]
        w = np.zeros((len(kept), n))
        for k, (_, idx) in enumerate(kept):
            w[k, idx] = 1.0 / len(idx)
        lines.append(Line(np.array([v for v, _ in kept]), w))
    return lines


def marginal_line(points: np.ndarray, p: int) -> Line:
    """Every point, averaged per value of parameter `p`: the line the default mode ranks `p`'s
    hypotheses on where no line of 3 or more points varies `p` alone (a scattered design, a Latin
    hypercube: review 61 F1, where `p` got no term at all). The other parameters' effects then
    average out only as far as the design spreads them; the multi-parameter step fits every
    candidate on all points."""
    values, inverse = np.unique(points[:, p], return_inverse=True)
    w = np.zeros((len(values), len(points)))
    w[inverse, np.arange(len(points))] = 1.0
    return Line(values, w / w.sum(axis=1, keepdims=True))


def line_values(line: Line, points: np.ndarray, p: int, Y: np.ndarray, odd: np.ndarray) -> np.ndarray:
    """(S, len(line.x)): each series' values averaged per value of `line` (parameter `p`), leaving out
    the points whose repetitions disagree wildly (`odd` (S, n): `selection.outlier_weights`, 1 for an
    ordinary point). On a grid one straggler bent the line of every parameter through it and the
    terms ranked on those lines (review 61 F3: 2 repetitions, one run 10x slow at one corner of a
    5 x 5 grid, 5.8x to 8.6x off at 4x, with n^(11/4) for a linear n). The parallel lines (the
    points alike in the other parameters) are weighted by their oddest point, so every value is
    averaged over the same lines: leaving out the odd point alone would leave its value an average
    of other lines, higher or lower than the rest. Where every parallel line has an odd point (one
    line: a cross) the odd points alone are weighted down."""
    used = line.weights.any(axis=0)
    rest = np.delete(points, p, axis=1)
    _, group = np.unique(rest, axis=0, return_inverse=True)
    group = np.where(used, group.ravel(), -1)
    g = odd.copy()
    for k in np.unique(group[used]):
        members = group == k
        g[:, members] = odd[:, members].min(axis=1, keepdims=True)
    whole_lines = (np.where(used, g, 0.0).max(axis=1) >= 1.0)[:, None]
    g = np.where(whole_lines, g, odd)
    W = line.weights[None, :, :] * g[:, None, :]  # (S, k, n)
    total = W.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.einsum("skn,sn->sk", W, Y) / total
    return np.where(total > 0, out, Y @ line.weights.T)


def distinct_values(points: np.ndarray) -> list[int]:
    return [int(np.unique(points[:, p]).size) for p in range(points.shape[1])]
