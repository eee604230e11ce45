"""Speedup and parallel efficiency at 4x the measured ranks: their own PMNF models against the
figure from the per-rank time (`modeler.derived`: the time model or the cost model, whichever
cross-validates better), on synthetic call paths with known true times.

Two families of true per-rank times over ranks (2..32) and a size n (5..25), 5 repetitions with
uniform multiplicative noise, the speedups derived per repetition as `modeler.aggregate` does:
- `pmnf`: times drawn from the PMNF space (benchmarks/_synthetic.py): they grow with ranks, as
  weak scaling with communication does, so speedup and efficiency fall;
- `strong`: Amdahl with communication, T = c + W(n) / ranks + C(n) * log2(ranks): the work is split
  over the ranks. No PMNF term falls as 1/ranks: the time model fails here, the cost model
  (c * ranks + W(n) + C(n) * ranks * log2(ranks)) does not.

Printed per family and noise, at ranks=128, n=100 (4x the largest measured values), as median and
90th-percentile relative errors: the time predicted by plain PMNF models against models split over
the ranks where that cross-validates better (`modeler.strong_scaling`; the share split); then
speedup and efficiency from their own models against the figure from the per-rank time, the
ratio of the errors (own model / from time), and how often that figure came from the cost model. Usage: python benchmarks/derived_speedup.py [--paths 200] [--seed 1] [--noise 0.02,0.05]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _args import float_list, positive_int  # noqa: E402
from _synthetic import draw_function  # noqa: E402

from modeler.commands.fit import fit_dataset  # noqa: E402
from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402

RANKS = (2.0, 4.0, 8.0, 16.0, 32.0)
SIZES = (5.0, 10.0, 15.0, 20.0, 25.0)
TARGET = {"ranks": 128.0, "n": 100.0}
REPS = 5


def _pmnf_times(rng: np.random.Generator, paths: int):
    funcs = [draw_function(rng, 2).model for _ in range(paths)]
    return [lambda pts, m=m: m.evaluate(pts) for m in funcs]


def _strong_times(rng: np.random.Generator, paths: int):
    out = []
    for _ in range(paths):
        c = 10 ** rng.uniform(-1, 1)
        work = 10 ** rng.uniform(0, 2) * 5.0 ** -(e := rng.choice([1.0, 1.5, 2.0]))  # W(n) = w * n^e, W(5) ~ w
        comm = 10 ** rng.uniform(-2, 0)
        ce = rng.choice([0.0, 0.5, 1.0])
        out.append(lambda pts, c=c, w=work, e=e, k=comm, ce=ce:
                   c + w * pts[:, 1] ** e / pts[:, 0] + k * (pts[:, 1] / 5.0) ** ce * np.log2(pts[:, 0]))
    return out


def _case(times, noise: float, rng: np.random.Generator):
    pts = np.array([(r, n) for r in RANKS for n in SIZES])
    series, truth = [], []
    target = np.array([[TARGET["ranks"], TARGET["n"]]])
    for i, f in enumerate(times):
        t = f(pts)[:, None] * (1.0 + rng.uniform(-noise, noise, size=(len(pts), REPS)))
        base = {n: np.median(t[j]) for j, (r, n) in enumerate(pts) if r == RANKS[0]}
        speed = np.array([base[n] / t[j] for j, (_, n) in enumerate(pts)])
        eff = speed * RANKS[0] / pts[:, :1]
        name = f"main->f{i}"
        series += [Series(name, "time", pts, tuple(t)), Series(name, "cost", pts, tuple(t * pts[:, :1])),
                   Series(name, "speedup", pts, tuple(speed)), Series(name, "parallel_efficiency", pts, tuple(eff))]
        s_true = float(f(np.array([[RANKS[0], TARGET["n"]]]))[0] / f(target)[0])
        truth.append({"speedup": s_true, "parallel_efficiency": s_true * RANKS[0] / TARGET["ranks"]})
    for tr, f in zip(truth, times):
        tr["time"] = float(f(target)[0])
    return Dataset(("ranks", "n"), series), truth


def _time_errors(dataset: Dataset, truth) -> tuple[np.ndarray, np.ndarray, float]:
    """Relative errors of the time predicted at the target without and with the models split over
    the ranks (`modeler.strong_scaling`), and the share of split models."""
    times = dataset.select(metrics=["time"])
    target = np.array([[TARGET["ranks"], TARGET["n"]]])
    true = np.array([tr["time"] for tr in truth])
    out = []
    for split in (False, True):
        models = PMNFModeler(strong_scaling=split).fit(times).models_
        pred = np.array([fm.predict(target)[0] for fm in models])
        out.append(np.abs(pred - true) / true)
        if split:
            share = float(np.mean([any(f.exponent < 0 for t in fm.model.terms for f in t.factors) for fm in models]))
    return out[0], out[1], share


def _errors(dataset: Dataset, truth) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    ranking = fit_dataset(dataset, at=",".join(f"{k}={v:g}" for k, v in TARGET.items()))
    out: dict[str, tuple[list, list, list]] = {"speedup": ([], [], []), "parallel_efficiency": ([], [], [])}
    for row in ranking.rows:
        m = row.fitted.metric
        if m not in out:
            continue
        true = truth[int(row.fitted.callpath.rsplit("f", 1)[1])][m]
        ft = np.nan if row.from_time is None else row.from_time[0]
        out[m][2].append(row.from_time is not None and row.from_time[1] == "cost")
        out[m][0].append(abs(row.prediction - true) / true)
        # no figure from time (the time model fell to 0 or below): count it as a total miss
        out[m][1].append(abs(ft - true) / true if np.isfinite(ft) else 1.0)
    return {m: (np.array(a), np.array(b), float(np.mean(c))) for m, (a, b, c) in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=positive_int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float_list(0.0), default=[0.02, 0.05], help="comma-separated noise levels")
    args = ap.parse_args(argv)
    print(f"relative error (%) at ranks={TARGET['ranks']:g}, n={TARGET['n']:g}; {args.paths} call paths per row")
    cases = {}
    for family, draw in (("pmnf", _pmnf_times), ("strong", _strong_times)):
        for noise in args.noise:
            rng = np.random.default_rng(args.seed)
            cases[family, noise] = _case(draw(rng, args.paths), noise, rng)
    print(f"{'family':7} {'noise':>5} {'metric':20} | {'plain PMNF med':>14} {'p90':>8} | {'split med':>9} {'p90':>8} | split")
    for (family, noise), (data, truth) in cases.items():
        plain, split, share = _time_errors(data, truth)
        print(f"{family:7} {noise:>5.0%} {'time':20} | {np.median(plain) * 100:14.2f} {np.percentile(plain, 90) * 100:8.2f} "
              f"| {np.median(split) * 100:9.2f} {np.percentile(split, 90) * 100:8.2f} | {share:5.0%}")
    print()
    print(f"{'family':7} {'noise':>5} {'metric':20} | {'own model med':>13} {'p90':>7} | {'from time med':>13} {'p90':>7} "
          f"| {'ratio med':>9} {'p90':>6} | from cost")
    for (family, noise), (data, truth) in cases.items():
        for metric, (own, ft, cost) in _errors(data, truth).items():
            om, o9 = np.median(own) * 100, np.percentile(own, 90) * 100
            fm, f9 = np.median(ft) * 100, np.percentile(ft, 90) * 100
            print(f"{family:7} {noise:>5.0%} {metric:20} | {om:13.2f} {o9:7.2f} | {fm:13.2f} {f9:7.2f} "
                  f"| {om / max(fm, 1e-12):8.1f}x {o9 / max(f9, 1e-12):5.1f}x | {cost:8.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
