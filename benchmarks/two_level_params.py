"""A parameter measured at two values (`--sweep ranks=1,2`): the modeler before and after review 128
MED-1 (`modeler.levels`), on synthetic series with known truth.

Grid: ranks in {1, 2} x batch in {8..128} x width in {32..128} (5 values each), 3 repetitions with
log-normal noise. Per seed and noise level, every form in FORMS with each effect of ranks in EFFECTS
("none": the series does not depend on ranks). Two ways of modeling, both with the current code:
"pooled" (`_level_refits` off: the model of both levels, as before review 128; no mark) and
"levels" (the default, with the target passed: series whose levels differ beyond their noise are
modeled on the target's level). Reported per effect: how many series were flagged, the median and
90th percentile of |log error| of the prediction (as a percentage) at the measured point
ranks=2, batch=128, width=128 and beyond it at ranks=2, batch=512, width=512, and how often the
truth there lies inside the 80% range.

    PYTHONPATH=. python benchmarks/two_level_params.py --seeds 3
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler

RANKS, BATCH, WIDTH = (1.0, 2.0), (8.0, 16.0, 32.0, 64.0, 128.0), (32.0, 48.0, 64.0, 96.0, 128.0)
FORMS = {
    "width^2": lambda b, w: 0.01 + 2.4e-5 * w ** 2,
    "batch": lambda b, w: 0.1 + 0.006 * b,
    "batch*log2(width)": lambda b, w: 0.05 + 1e-3 * b * np.log2(w),
    "batch^1.5": lambda b, w: 0.2 + 1e-4 * b ** 1.5,
    "batch+width": lambda b, w: 0.3 + 0.002 * b + 0.003 * w,
    "const": lambda b, w: 0.05 + 0 * b,
}
EFFECTS = {
    "none": lambda y, r, b, w: y,
    "+0.04*ranks": lambda y, r, b, w: y + 0.04 * r,
    "x ranks^0.5": lambda y, r, b, w: y * r ** 0.5,
    "+0.1 at ranks=2": lambda y, r, b, w: y + 0.1 * (r == 2),
    "x1.05 at ranks=2": lambda y, r, b, w: y * (1 + 0.05 * (r == 2)),
}
AT = {"measured": (2.0, 128.0, 128.0), "beyond": (2.0, 512.0, 512.0)}


def dataset(seed: int, noise: float) -> tuple[Dataset, list[tuple[str, str]], list]:
    rng = np.random.default_rng(seed)
    pts = np.array([(r, b, w) for r in RANKS for b in BATCH for w in WIDTH])
    series, keys, truths = [], [], []
    for fname, f in FORMS.items():
        for ename, e in EFFECTS.items():
            def truth(p, f=f, e=e):
                p = np.asarray(p, dtype=float)
                return e(f(p[..., 1], p[..., 2]), p[..., 0], p[..., 1], p[..., 2])
            y = truth(pts)
            reps = [v * np.exp(rng.normal(0, noise, 3)) for v in y]
            series.append(Series(f"{fname} | {ename}", "time", pts, reps))
            keys.append((fname, ename))
            truths.append(truth)
    return Dataset(("ranks", "batch", "width"), series), keys, truths


def fit(ds: Dataset, levels: bool):
    target = {"ranks": 2.0, "batch": 128.0, "width": 128.0}
    m = PMNFModeler(target=target if levels else None, pass_range=False)
    m._level_refits = levels
    return m.fit(ds).models_


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.02, 0.1])
    args = ap.parse_args()
    for noise in args.noise:
        stats: dict = {}
        for seed in range(args.seeds):
            ds, keys, truths = dataset(seed, noise)
            for way in ("pooled", "levels"):
                for fm, (fname, ename), truth in zip(fit(ds, way == "levels"), keys, truths):
                    st = stats.setdefault((ename, way), {"n": 0, "flag": 0, **{k: [] for k in AT}, **{k + "_in": 0 for k in AT}})
                    st["n"] += 1
                    st["flag"] += bool(fm.levels)
                    for where, p in AT.items():
                        pt = {"ranks": [p[0]], "batch": [p[1]], "width": [p[2]]}
                        pred, true = float(fm.predict(pt)[0]), float(truth(p))
                        st[where].append(abs(math.log(pred / true)) if pred > 0 else math.inf)
                        rng = fm.prediction_range(pt)
                        st[where + "_in"] += bool(rng is not None and rng[0][0] <= true <= rng[1][0])
        print(f"noise {noise:g} (log-normal sd), {args.seeds} seed(s), {len(FORMS)} forms per effect")
        print(f"  {'effect':18s} {'way':7s} {'flagged':>8s}  {'measured: med/p90 |err| %, truth in range':>44s}  {'beyond: med/p90 |err| %, in range':>36s}")
        for (ename, way), st in stats.items():
            cells = []
            for where in AT:
                e = np.array(st[where])
                cells.append(f"{100 * (math.exp(np.median(e)) - 1):6.1f} / {100 * (math.exp(np.quantile(e, 0.9)) - 1):6.1f}  "
                             f"{st[where + '_in']:3d}/{st['n']}")
            print(f"  {ename:18s} {way:7s} {st['flag']:4d}/{st['n']:<3d}  {cells[0]:>44s}  {cells[1]:>36s}")


if __name__ == "__main__":
    main()
