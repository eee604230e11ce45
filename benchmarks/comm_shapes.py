"""Communication and data-parallel shapes over ranks: time predicted at 4x and 16x the ranks.

The default modeler, plain PMNF models (`PMNFModeler(strong_scaling=False)`: no term falls as
1/ranks) and Extra-P 4.2.5's modeler reproduced (`compat="extrap"`), on synthetic call paths with
known true per-rank times.

`benchmarks/strong_shapes.py` covers compute shapes (W/ranks + c*ranks, Amdahl, floors, flat);
these are the shapes of collective communication and of a data-parallel step. With M = n/B the
time to move the message once and a the latency per step (each call path draws its own), p ranks:
- `ring`: ring all-reduce, 2 (p-1)/p M + 2 (p-1) a: the bandwidth part saturates, the latency part
  grows linearly; exactly 0 at one rank (no communication);
- `ring_call`: the same plus a call overhead o (a small share of M) at every rank count, so that
  the value at one rank is small but not 0;
- `tree`: tree / recursive-doubling all-reduce, a log2(p) + (p-1)/p M;
- `allgather`: all-gather of a fixed per-rank tensor, (p-1) M (linear);
- `weak_batch`: weak-scaling step time, compute C (scaled by the batch per rank `size`) plus the
  ring all-reduce of the gradient (M fixed);
- `weak_model`: weak-scaling step time with the model size `size` scaling the compute and the
  gradient's message alike: C s + ring(p, M s);
- `strong_dp`: per-rank time of a data-parallel step in strong scaling (global batch fixed):
  W s / p + ring(p, M s), `size` the model size.
Each family runs with ranks alone and beside `size` in 5 values (16..256: the message size for the
collectives, the batch or the model size for the steps; the truth is taken at the largest size, so
only ranks are extrapolated). Ranks 1, 2, 4, ..., 32 (`--sweeps one`), 2, 4, ..., 32 (`--sweeps
no-one`: no run on one rank) or both (the default). Noise is multiplicative and normal.

Printed per family, sweep, runs per point and noise: the median and 90th percentile of the
relative error (%) at 4x and 16x the largest ranks (128 and 512), both layouts pooled, for each
modeler. About 25 s for the whole table (research 124; docs/modeling.md, "Collectives").

Usage: python benchmarks/comm_shapes.py [--paths 40] [--seed 1] [--noise 0.01,0.05,0.1] [--runs 1,5]
[--families ring,tree,...] [--sweeps both|one|no-one] [--modelers default,plain,extrap]
[--layouts alone,beside]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _args import choice_list, synthetic_sweep_options  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402

SWEEPS = {"1..32": (1.0, 2.0, 4.0, 8.0, 16.0, 32.0), "2..32": (2.0, 4.0, 8.0, 16.0, 32.0)}
SIZES = (16.0, 32.0, 64.0, 128.0, 256.0)
FAMILIES = ("ring", "ring_call", "tree", "allgather", "weak_batch", "weak_model", "strong_dp")
MODELERS = {"plain": dict(strong_scaling=False), "default": {}, "extrap": dict(compat="extrap")}
LAYOUTS = ("alone", "beside")


def _ring(p, M, a):
    return 2.0 * (p - 1.0) / p * M + 2.0 * (p - 1.0) * a


def _draw(family: str, rng: np.random.Generator):
    """A true time T(ranks, size) of the family; size / 16 scales the message (or the compute)."""
    M = 10 ** rng.uniform(0.5, 2.0)
    a = M * 10 ** rng.uniform(-4.0, -1.5)  # latency: 2 * 31 * a is 0.6%-100% of 2 M at 32 ranks
    if family == "ring":
        return lambda r, s: _ring(r, M * s / 16, a)
    if family == "ring_call":
        o = M * 10 ** rng.uniform(-3.0, -1.5)
        return lambda r, s: o + _ring(r, M * s / 16, a)
    if family == "tree":
        a = M * 10 ** rng.uniform(-2.0, -0.5)
        return lambda r, s: a * np.log2(r) + (r - 1.0) / r * M * s / 16
    if family == "allgather":
        return lambda r, s: (r - 1.0) * M * s / 16
    C = M * 10 ** rng.uniform(0.0, 1.0)  # compute: 1-10x the message time
    if family == "weak_batch":
        return lambda r, s: C * s / 16 + _ring(r, M, a)
    if family == "weak_model":
        return lambda r, s: C * s / 16 + _ring(r, M * s / 16, a)
    if family == "strong_dp":
        W = M * 10 ** rng.uniform(0.5, 2.0)  # the work on one rank: 3-100x the message time
        return lambda r, s: W * s / 16 / r + _ring(r, M * s / 16, a)
    raise ValueError(family)


def _targets(ranks) -> tuple[float, float]:
    """4x and 16x the largest measured ranks."""
    return 4.0 * max(ranks), 16.0 * max(ranks)


def _case(family: str, noise: float, runs: int, beside: bool, paths: int, rng: np.random.Generator, ranks):
    if beside:
        pts = np.array([(r, s) for r in ranks for s in SIZES])
        params = ("ranks", "size")
    else:
        pts = np.array([(r, SIZES[-1]) for r in ranks])
        params = ("ranks",)
    series, truth = [], []
    for i in range(paths):
        f = _draw(family, rng)
        t = f(pts[:, 0], pts[:, 1])[:, None] * (1.0 + noise * rng.standard_normal((len(pts), runs)))
        series.append(Series(f"main->f{i}", "time", pts[:, : len(params)], tuple(t)))
        truth.append([float(f(np.array(r), SIZES[-1])) for r in _targets(ranks)])
    return Dataset(params, series), np.array(truth)


def _errors(dataset: Dataset, truth: np.ndarray, options: dict, targets) -> np.ndarray:
    """Relative errors (paths, targets) of the predictions at the targets (size at its largest)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = PMNFModeler(**options).fit(dataset).models_
    k = len(dataset.parameters)
    pred = np.array([[fm.predict(np.array([[r, SIZES[-1]][:k]]))[0] for r in targets] for fm in models])
    return np.abs(pred - truth) / truth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic_sweep_options(ap, FAMILIES)
    ap.add_argument("--sweeps", choices=("both", "one", "no-one"), default="both",
                    help="ranks 1..32 (one), 2..32 (no-one) or both")
    ap.add_argument("--modelers", default=",".join(MODELERS), help="comma-separated, of: " + ", ".join(MODELERS))
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="comma-separated, of: alone (ranks only), beside (ranks x size); pooled per row")
    args = ap.parse_args(argv)
    families = choice_list(ap, "--families", args.families, FAMILIES)
    modelers = choice_list(ap, "--modelers", args.modelers, MODELERS)
    layouts = choice_list(ap, "--layouts", args.layouts, LAYOUTS)
    sweeps = {"both": list(SWEEPS), "one": ["1..32"], "no-one": ["2..32"]}[args.sweeps]
    print(f"relative error (%) of the time at 4x and 16x the largest measured ranks (128, 512), layouts "
          f"{'+'.join(layouts)} pooled; {args.paths} call paths each per layout; modelers: {' | '.join(modelers)}")
    head = " ".join(format(f"{'med' if j == 0 else 'p90'}@{x}", ">8") for x in ("4x", "16x") for j in range(2))
    print(f"{'family':11} {'ranks':>6} {'runs':>4} {'noise':>5} | " + " | ".join([head] * len(modelers)))
    for family in families:
        for sweep in sweeps:
            ranks = SWEEPS[sweep]
            targets = _targets(ranks)
            for runs in args.runs:
                for noise in args.noise:
                    rng = np.random.default_rng(args.seed)
                    errs: dict = {m: [] for m in modelers}
                    for layout in LAYOUTS:  # both drawn always, so that a layout's draws do not move
                        data, truth = _case(family, noise, int(runs), layout == "beside", args.paths, rng, ranks)
                        if layout not in layouts:
                            continue
                        for m in modelers:
                            errs[m].append(_errors(data, truth, MODELERS[m], targets))
                    cells = []
                    for m in modelers:
                        e = np.concatenate(errs[m]) * 100
                        cells.append(" ".join(f"{np.median(e[:, t]):8.1f} {np.percentile(e[:, t], 90):8.1f}"
                                              for t in range(len(targets))))
                    print(f"{family:11} {sweep:>6} {int(runs):4d} {noise:5.0%} | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
