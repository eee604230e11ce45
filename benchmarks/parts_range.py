"""A region's 80% range against the truth where its time is a sum of parts of different growth: how
often the range of the `time` of a loop, of the run around it and of the loop's `step_time` holds
the true value at 2x and 4x the largest measured values, and how wide it is (review 123 MED-1).

PMNF gives a model one term per parameter, so a loop whose children take c + a*x + b*x^2 is fitted
with one term in between (x^1.5): low beyond the sweep. Each of its children is one term, fitted
right. Synthetic call trees `main -> loop -> f0, f1, ...`: the children single-term, the loop their
sum plus a constant own time, `main` the loop plus a constant set-up, and the loop's `step_time` its
time over 4 steps (with noise of its own: a median step is not the mean). Each run's values carry
multiplicative normal noise, the parents' the sum of their parts' noisy values, as in a real run.

Families (x swept over 4..64, y over 1..16; each tree draws its coefficients, the heaviest part
carrying 20-70% of the loop at the largest point):
- `quad`: c + a*x + b*x^2; `sqrt_cube`: c + a*x^(1/2) + b*x^(3/2) ... and alike over one parameter;
- `quad_y`, `cross`: over x and y: c + a*x + b*x^2 + d*y, c + a*x + b*x*y;
- `same`, `dominant`: controls where the loop's model can be right: a*x^2 + b*x^2, and a*x^2 with
  a part of 1% growing as x.
Printed per family, runs per point and noise: for the loop's time, main's time and the loop's
step_time, how often the 80% range holds the truth at 2x and 4x (all parameters scaled) and the
median width of the range over the truth. Run it with each version of `modeler` on the path to
compare. Usage: python benchmarks/parts_range.py [--trees 12] [--seed 1] [--noise 0.01,0.05,0.1]
[--runs 1,5] [--families quad,...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _args import choice_list, synthetic_sweep_options  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402
from modeler.ranking import rank_models  # noqa: E402

X = (4.0, 8.0, 16.0, 32.0, 64.0)
Y = (1.0, 2.0, 4.0, 8.0, 16.0)
STEPS = 4
LOOP = "main->Trainer.fit:for@10"

#: family -> (parameters, the parts' shapes: functions of (x, y) with value 1 at the largest point)
FAMILIES = {
    "quad": (("x",), (lambda x, y: x / 64, lambda x, y: (x / 64) ** 2)),
    "sqrt_cube": (("x",), (lambda x, y: (x / 64) ** 0.5, lambda x, y: (x / 64) ** 1.5)),
    "lin_cube": (("x",), (lambda x, y: x / 64, lambda x, y: (x / 64) ** 3)),
    "quad_y": (("x", "y"), (lambda x, y: x / 64, lambda x, y: (x / 64) ** 2, lambda x, y: y / 16)),
    "cross": (("x", "y"), (lambda x, y: x / 64, lambda x, y: x * y / 1024)),
    "same": (("x",), (lambda x, y: (x / 64) ** 2, lambda x, y: (x / 64) ** 2)),
    "dominant": (("x",), (lambda x, y: (x / 64) ** 2, lambda x, y: x / 64)),
}


def _tree(family: str, noise: float, runs: int, rng: np.random.Generator):
    """(dataset, truth): the series of one call tree, and per target (2x, 4x) the true
    (loop time, main time, step time)."""
    params, shapes = FAMILIES[family]
    pts = np.array([(x, y) for x in X for y in (Y if len(params) == 2 else Y[-1:])])
    total = 10 ** rng.uniform(0, 1)  # the loop's time at the largest point, less its own
    if family == "dominant":
        shares = np.array([0.99, 0.01])
    else:
        heavy = rng.uniform(0.2, 0.7)
        rest = rng.dirichlet(np.ones(len(shapes) - 1)) * (1 - heavy)
        shares = np.array([*rest, heavy])
    coef = shares * total
    own, setup = total * 10 ** rng.uniform(-2.5, -1.0), total * 10 ** rng.uniform(-1.5, -0.5)

    def noisy(v):
        return v[:, None] * (1.0 + noise * rng.standard_normal((len(v), runs)))

    kids = [noisy(c * f(pts[:, 0], pts[:, 1])) for c, f in zip(coef, shapes)]
    excl = noisy(np.full(len(pts), own))
    loop = sum(kids) + excl
    step = loop / STEPS * (1.0 + noise / 2 * rng.standard_normal(loop.shape))
    main_excl = noisy(np.full(len(pts), setup))
    main = loop + main_excl
    P = pts[:, : len(params)]
    series = [Series(f"{LOOP}->f{i}", "time", P, tuple(k)) for i, k in enumerate(kids)]
    series += [Series(f"{LOOP}->f{i}", "exclusive_time", P, tuple(k)) for i, k in enumerate(kids)]
    series += [Series(LOOP, "time", P, tuple(loop)), Series(LOOP, "exclusive_time", P, tuple(excl)),
               Series(LOOP, "step_time", P, tuple(step)),
               Series("main", "time", P, tuple(main)), Series("main", "exclusive_time", P, tuple(main_excl))]
    truth = []
    for k in (2.0, 4.0):
        x, y = X[-1] * k, Y[-1] * k if len(params) == 2 else Y[-1]
        t = own + sum(c * f(x, y) for c, f in zip(coef, shapes))
        truth.append((t, t + setup, t / STEPS))
    return Dataset(params, series), truth


ROWS = ((LOOP, "time"), ("main", "time"), (LOOP, "step_time"))


def _score(dataset: Dataset, truth) -> np.ndarray:
    """(target, row, [held, width, |error|]) for one tree."""
    models = PMNFModeler().fit(dataset).models_
    out = np.full((2, len(ROWS), 3), np.nan)
    for t, k in enumerate((2.0, 4.0)):
        at = {"x": X[-1] * k, "y": Y[-1] * k}
        at = {p: at[p] for p in dataset.parameters}
        ranking = rank_models(models, dataset.parameters, at, measured=dataset.series, min_share=0.0)
        rows = {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}
        for j, key in enumerate(ROWS):
            r, true = rows.get(key), truth[t][j]
            if r is None or r.range is None:
                continue
            lo, hi = r.range
            out[t, j] = (lo <= true <= hi, (hi - lo) / true, abs(r.prediction - true) / true)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic_sweep_options(ap, FAMILIES, "--trees", 12, "call trees per family, noise and runs")
    args = ap.parse_args(argv)
    families = choice_list(ap, "--families", args.families, FAMILIES)
    print(f"80% range of the loop's time, main's time and the loop's step_time at 2x and 4x the largest measured "
          f"values: held (% of {args.trees} trees) / median width over the truth (%)")
    head = " ".join(f"{name + '@' + k:>14}" for name in ("loop", "main", "step") for k in ("2x", "4x"))
    print(f"{'family':10} {'runs':>4} {'noise':>5} | {head}")
    total = []
    for family in families:
        for runs in args.runs:
            for noise in args.noise:
                rng = np.random.default_rng(args.seed)
                scores = np.array([_score(*_tree(family, noise, int(runs), rng)) for _ in range(args.trees)])
                total.append(scores)
                cells = " ".join(f"{np.nanmean(scores[:, t, j, 0]) * 100:6.0f}/{np.nanmedian(scores[:, t, j, 1]) * 100:6.1f}"
                                 for j in range(len(ROWS)) for t in range(2))
                print(f"{family:10} {int(runs):4d} {noise:5.0%} | {cells}", flush=True)
    allv = np.concatenate(total)
    cells = " ".join(f"{np.nanmean(allv[:, t, j, 0]) * 100:6.0f}/{np.nanmedian(allv[:, t, j, 1]) * 100:6.1f}"
                     for j in range(len(ROWS)) for t in range(2))
    print(f"{'all':10} {'':4} {'':5} | {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
