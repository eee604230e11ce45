"""A check the sweep can make of itself: fitted without the largest value of a parameter, does the
model predict the values measured there?

A prediction beyond the sweep cannot be checked until the larger run is made, but the sweep's own
largest value can be held out and predicted one step ahead. Where that misses by far, the models
extrapolate poorly on these runs (the largest points are off: a busy machine, a change of regime
there), and further out they are rougher still (review 62: fitted without batch=64, the training's
model predicted 8.14 s there where the runs measured 1.74 s, 4.7x; its predictions at 2x and 4x
were 2x to 8x high, and nothing said so). The costliest `time` series are checked, each parameter
with `MIN_VALUES` or more values in turn.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .dataset import RANKS_PARAMETER, Dataset, Series
from .repstats import by_shape, table

#: a held-out value predicted further than this factor from the measured one is named
FACTOR = 1.5
#: a parameter needs this many values to be held out at its largest (4 are left to fit)
MIN_VALUES = 5
#: the costliest `time` series checked (by their largest aggregated value)
CHECKED = 5


def backtest_warning(parameters: Sequence[str], series: Sequence[Series], *, compat: str | None,
                     aggregate: str | None, ranks_parameter: str = RANKS_PARAMETER) -> str | None:
    """A warning naming the worst held-out miss beyond `FACTOR` among the `CHECKED` costliest `time`
    series (each parameter of `MIN_VALUES` values held out at its largest), or None; fitted as the
    command fits them, with `ranks_parameter` the rank count (`Dataset.ranks_parameter`)."""
    from .estimator import PMNFModeler  # the engine is heavy; imported where it runs

    how = aggregate or ("mean" if compat == "extrap" else "robust")
    times = [s for s in series if s.metric == "time" and s.n_points >= MIN_VALUES]
    largest = np.zeros(len(times))  # each series' largest mean over its points, one pass per set measured alike
    groups, others = by_shape(times)
    for index in groups:
        with np.errstate(all="ignore"):
            largest[index] = table(times, index).mean(axis=2).max(axis=1)
    for i in others:
        largest[i] = max(float(r.mean()) for r in times[i].repetitions)
    order = np.argsort(-np.where(np.isfinite(largest), largest, -np.inf), kind="stable")[:CHECKED]
    values = {int(i): times[i].values(how) for i in order}
    checked = [int(i) for i in order if np.all(values[int(i)] > 0)]
    worst = None  # (|log ratio|, ratio, callpath, parameter, largest value, predicted, measured)
    for j, name in enumerate(parameters):
        subs, held = [], []
        for i in checked:
            s = times[i]
            x = s.points[:, j]
            if np.unique(x).size < MIN_VALUES:
                continue
            keep = x < x.max()
            subs.append(Series(s.callpath, s.metric, s.points[keep], [r for r, k in zip(s.repetitions, keep) if k],
                               passes=None if s.passes is None else [p for p, k in zip(s.passes, keep) if k]))
            held.append((s, ~keep, values[i][~keep], float(x.max())))
        if not subs:
            continue
        try:
            fitted = PMNFModeler(compat=compat, aggregate=aggregate, on_too_few="warn", pass_range=False).fit(
                Dataset(tuple(parameters), subs, ranks_parameter=ranks_parameter)).models_
        except Exception:  # noqa: BLE001 - a check; the fit itself has said what is wrong with the data
            continue
        for fm, (s, out, measured, top) in zip(fitted, held):
            with np.errstate(all="ignore"):
                predicted = fm.model.evaluate(s.points[out])
            if not (np.all(np.isfinite(predicted)) and np.all(predicted > 0)):
                continue
            ratio = math.exp(float(np.median(np.log(predicted / measured))))
            off = abs(math.log(ratio))
            if worst is None or off > worst[0]:
                worst = (off, ratio, s.callpath, name, top, float(np.median(predicted)), float(np.median(measured)))
    if worst is None or worst[0] <= math.log(FACTOR):
        return None
    _, ratio, callpath, name, top, predicted, measured = worst
    if ratio < 1:
        how_far = (f"{1 / ratio:.3g}x low: the runs there lie above the trend of the others; if they were slow (a "
                   f"busy machine), the models bent up to them predict too high beyond the sweep")
    else:
        how_far = (f"{ratio:.3g}x high: the runs there lie below the trend of the others; if the growth "
                   f"levels off there, the models predict too high beyond the sweep")
    return (f"a check of the sweep against itself: fitted without the largest value of {name} ({top:g}), the model of "
            f"{callpath} (time) predicts {predicted:.4g} there, where the runs measured {measured:.4g} ({how_far}; "
            f"the worst of the {len(checked)} costliest call paths): the models extrapolate one step poorly on "
            f"these runs, and further out they are rougher still; measure the largest points again, and further out")
