"""The 80% range with and without the refits that leave out one repetition pass (`modeler.passes`).

Synthetic call paths with known functions (benchmarks/_synthetic.py: 5 values a parameter, 5
repetitions, noise uniform within ±noise), the repetitions labelled with their pass. Two kinds of
noise:
- `independent`: every run's noise drawn on its own (what the range assumes);
- `slow pass`: the same, and the runs of pass 0 at the points with the largest value of the first
  parameter are `--slowdown` times slower (other work started on the machine late in that pass:
  review 62's sweep).

For each setting it prints how often the range at 4x the largest values holds the true value, and
its median width over the true value, without (`pass_range=False`) and with the refits. Then the fit
time with the refits over the time without, on 2 parameters at 5% noise: the median of 3 pairs,
interleaved, both measured in this run (a ratio: the machine is shared).

    python benchmarks/pass_range.py [--paths 100] [--seed 1] [--slowdown 1.6]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import make_case, target_point, PARAMETERS  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402


def dataset(pts: np.ndarray, values: np.ndarray) -> Dataset:
    names = PARAMETERS[: pts.shape[1]]
    reps = values.shape[2]
    labels = tuple(np.arange(reps) for _ in range(len(pts)))
    return Dataset(names, [Series(f"f{i}", "time", pts, tuple(values[i]), "s", labels) for i in range(len(values))])


def slowed(pts: np.ndarray, values: np.ndarray, factor: float) -> np.ndarray:
    """Pass 0's runs at the largest value of the first parameter `factor` times slower."""
    out = values.copy()
    out[:, pts[:, 0] == pts[:, 0].max(), 0] *= factor
    return out


def score(data: Dataset, truth: np.ndarray, target: dict, pass_range: bool) -> tuple[float, float]:
    """(share of ranges holding the truth, median width over the truth)."""
    models = PMNFModeler(pass_range=pass_range).fit(data).models_
    held, widths = [], []
    for fm, t in zip(models, truth):
        rng = fm.prediction_range(target)
        if rng is None:
            continue
        lo, hi = float(rng[0][0]), float(rng[1][0])
        held.append(lo <= t <= hi)
        widths.append((hi - lo) / t)
    return float(np.mean(held)), float(np.median(widths))


def fit_seconds(data: Dataset, pass_range: bool) -> float:
    start = time.perf_counter()
    PMNFModeler(pass_range=pass_range).fit(data)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, default=100, help="call paths per setting (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slowdown", type=float, default=1.6, help="how much slower the slow pass's runs are")
    args = ap.parse_args(argv)
    print("| P | noise | kind | holds without | holds with | width without | width with |")
    print("|---|---|---|---|---|---|---|")
    for n_params in (1, 2, 3):
        for noise in (0.02, 0.05, 0.10):
            funcs, pts, values = make_case(args.seed, n_params, args.paths, noise)
            at = target_point(n_params)
            target = {p: at[:, j] for j, p in enumerate(PARAMETERS[:n_params])}
            truth = np.array([f.model.evaluate(at)[0] for f in funcs])
            for kind, vals in (("independent", values), ("slow pass", slowed(pts, values, args.slowdown))):
                data = dataset(pts, vals)
                h0, w0 = score(data, truth, target, False)
                h1, w1 = score(data, truth, target, True)
                print(f"| {n_params} | {noise:.0%} | {kind} | {h0:.0%} | {h1:.0%} | {w0:.1%} | {w1:.1%} |", flush=True)
    funcs, pts, values = make_case(args.seed, 2, args.paths, 0.05)
    data = dataset(pts, values)
    ratios = [fit_seconds(data, True) / fit_seconds(data, False) for _ in range(3)]
    print(f"\nfit time with the refits over without ({args.paths} call paths, 2 parameters, 5 passes): "
          f"{float(np.median(ratios)):.2f}x (median of 3 pairs; {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
