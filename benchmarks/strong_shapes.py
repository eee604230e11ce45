"""Strong-scaling shapes over ranks: the time predicted at 4x and 16x the largest measured ranks by
the default modeler, against plain PMNF models (`PMNFModeler(strong_scaling=False)`: no term falls
as 1/ranks, as in Extra-P), on synthetic call paths with known true per-rank times.

Families of true times T(ranks) (each call path draws its own coefficients), over ranks 1..32
(powers of two), alone or beside a parameter `g` in {48, 96} that scales the work:
- `ushape`, `ushape_log`, `ushape_sqrt`: W/ranks + c*ranks, + c*log2(ranks), + c*ranks^(1/2):
  the work split over the ranks plus a cost that grows with them;
- `amdahl`: c + W/ranks; `floor`: max(W/ranks, c), a fall that levels off;
- `flat`: c; `slow_first`: c, its runs at ranks=1 30% slower (a start-up cost or a cold cache);
  `outliers`: c, one run in ten 3x slower (a straggler).
Noise is multiplicative and normal. Printed per family, runs per point and noise: the median and
90th percentile of the relative error at 4x and 16x the largest ranks (128 and 512), both ways, and the share of call paths
the default modeler gives a U form (a falling and a rising term in ranks). Usage: python benchmarks/strong_shapes.py [--paths 40] [--seed 1]
[--noise 0.01,0.05,0.1] [--runs 1,5] [--ranks 1,2,4,8,16,32] [--families ushape,amdahl,...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _args import choice_list, float_list, synthetic_sweep_options  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402

RANKS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
G = (48.0, 96.0)


def _draw(family: str, rng: np.random.Generator):
    """A true time T(ranks, g) of the family; g scales the work W (g/48 x W)."""
    W = 10 ** rng.uniform(0.5, 2.0)
    c = W * 10 ** rng.uniform(-3.0, -1.0)
    if family == "ushape":
        return lambda r, g: W * g / 48 / r + c * r
    if family == "ushape_log":
        c = W * 10 ** rng.uniform(-1.5, -0.5)
        return lambda r, g: W * g / 48 / r + c * np.log2(r)
    if family == "ushape_sqrt":
        c = W * 10 ** rng.uniform(-2.0, -0.5)
        return lambda r, g: W * g / 48 / r + c * np.sqrt(r)
    if family == "amdahl":
        c = W * 10 ** rng.uniform(-2.0, 0.0)
        return lambda r, g: c + W * g / 48 / r
    if family == "floor":
        c = W / 2 ** rng.uniform(1.5, 4.0)
        return lambda r, g: np.maximum(W * g / 48 / r, c)
    return lambda r, g: W + 0.0 * r  # flat, slow_first, outliers


def _targets(ranks) -> tuple[float, float]:
    """4x and 16x the largest measured ranks."""
    return 4.0 * max(ranks), 16.0 * max(ranks)


def _case(family: str, noise: float, runs: int, beside: bool, paths: int, rng: np.random.Generator,
          ranks=RANKS):
    if beside:
        pts = np.array([(r, g) for r in ranks for g in G])
        params = ("ranks", "g")
    else:
        pts = np.array([(r, G[0]) for r in ranks])
        params = ("ranks",)
    series, truth = [], []
    for i in range(paths):
        f = _draw(family, rng)
        t = f(pts[:, 0], pts[:, 1])[:, None] * (1.0 + noise * rng.standard_normal((len(pts), runs)))
        if family == "slow_first":
            t[pts[:, 0] == 1.0] *= 1.3
        elif family == "outliers":
            t[rng.random(t.shape) < 0.1] *= 3.0
        series.append(Series(f"main->f{i}", "time", pts[:, : len(params)], tuple(t)))
        truth.append([float(f(np.array(r), G[0])) for r in _targets(ranks)])
    return Dataset(params, series), np.array(truth)


def _errors(dataset: Dataset, truth: np.ndarray, strong_scaling: bool, targets) -> tuple[np.ndarray, float]:
    """Relative errors (paths, targets) and the share given a U form (a model with a falling and a
    rising term in ranks)."""
    models = PMNFModeler(strong_scaling=strong_scaling).fit(dataset).models_
    k = len(dataset.parameters)
    pred = np.array([[fm.predict(np.array([[r, G[0]][:k]]))[0] for r in targets] for fm in models])
    u = [any(f.parameter == "ranks" and f.exponent < 0 for t in fm.model.terms for f in t.factors)
         and any(f.parameter == "ranks" and (f.exponent > 0 or f.log_exponent) for t in fm.model.terms
                 for f in t.factors) for fm in models]
    return np.abs(pred - truth) / truth, float(np.mean(u))


FAMILIES = ("ushape", "ushape_log", "ushape_sqrt", "amdahl", "floor", "flat", "slow_first", "outliers")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic_sweep_options(ap, FAMILIES)
    ap.add_argument("--ranks", type=float_list(1.0), default=list(RANKS), help="comma-separated rank counts measured")
    args = ap.parse_args(argv)
    families = choice_list(ap, "--families", args.families, FAMILIES)
    targets = _targets(args.ranks)
    print(f"relative error (%) of the time at ranks={targets[0]:g} and {targets[1]:g} (4x, 16x the largest measured), "
          f"ranks alone and beside g; {args.paths} call paths each; plain PMNF | default")
    head = " ".join(format(f"{'med' if j == 0 else 'p90'}@{int(r)}", ">11") for r in targets for j in range(2))
    print(f"{'family':12} {'runs':>4} {'noise':>5} | {head} | {head} | U form")
    for family in families:
        for runs in args.runs:
            for noise in args.noise:
                rng = np.random.default_rng(args.seed)
                errs: dict = {False: [], True: []}
                shares = []
                for beside in (False, True):
                    data, truth = _case(family, noise, int(runs), beside, args.paths, rng, args.ranks)
                    for strong in (False, True):
                        e, share = _errors(data, truth, strong, targets)
                        errs[strong].append(e)
                    shares.append(share)
                cells = []
                for strong in (False, True):
                    e = np.concatenate(errs[strong]) * 100
                    cells.append(" ".join(f"{np.median(e[:, t]):11.1f} {np.percentile(e[:, t], 90):11.1f}"
                                          for t in range(len(targets))))
                print(f"{family:12} {int(runs):4d} {noise:5.0%} | {cells[0]} | {cells[1]} | {np.mean(shares):6.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
