"""`PMNFModeler`: fits one PMNF performance model per series of a `Dataset`.

The estimator contract: keyword-only options, validated in `fit`; `fit` returns self; learned
state in attributes ending in `_`; `predict` before `fit` raises `NotFittedError`.

Two modes. `compat="extrap"` reproduces Extra-P 4.2.5's default modeler (see
`modeler.pmnf.extrap_mode`). The default mode (`modeler.pmnf.default_mode`) fits relative errors,
searches several terms per parameter in every multi-parameter structure, and chooses for
extrapolation: the structure the data and the repetition noise support most, then the exponents
with the least expected prediction error beyond the measured range (`modeler.pmnf.selection`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from typing import Mapping, Sequence

import numpy as np

from .dataset import (LARGEST_MEASURED, LARGEST_VALUE, RANKS_PARAMETER, REPETITION_AGGREGATES, Dataset, Series, check_magnitudes,
                      power_of_two_scale)
from .errors import InputError, NotFittedError, TooFewPointsError
from .listing import listing
from . import pass_noise, passes
from .misfit import lack_of_fit, lack_text, may_miss, miss_text, worst_miss
from .model import Alternative, Factor, FittedModel, Model, Term
from .pmnf import default_mode, extrap_mode
from .pmnf.fit import GroupFit
from .pmnf.hypotheses import exponent_of
from .grid import followers
from .end_slope import end_slope_note, unseen_rise_note
from .heavypoint import heavy_note, heavy_points
from .pmnf.points import distinct_values, group_by_points
from .pmnf.quality import quality
from .pmnf.selection import noise_variance
from .repstats import by_shape, odd_points, point_stats, table
from .strong_scaling import choose, falls_along, mix, split, split_alternative, time_view
from .pointtext import param_text, point_text
from .levels import level_effects, modeled_note, not_followed_text, unmodeled_note
from .predict_points import checked_points

COMPAT_MODES = (None, "extrap")
#: a series needs this many points, and a parameter this many distinct values, to get a term
MIN_POINTS = 3
#: the note of a model whose RSS overflowed (values beyond about 1e154 in size: their squares pass
#: float64's largest), and with it the coefficients' covariance the 80% range is drawn from; the
#: model itself is fitted at a scale near 1 (`_fit_scaled`). Review 66 F6: the table said `inf`,
#: JSON null, and the range was missing with no word why.
OVERFLOW_NOTE = ("values too large in size for the RSS and the 80% range (their squares overflow floating "
                 "point): neither is given; give the values in larger units")
#: the same for values so small in size that the squares of their residuals underflow (below
#: about 1e-154; review 121 LOW-5: an RSS of 0 and an 80% range of no width at 1e-170)
UNDERFLOW_NOTE = ("values too small in size for the RSS and the 80% range (their squares underflow floating "
                  "point): neither is given; give the values in smaller units")
#: Extra-P's recommendation; fewer values of a parameter are modeled with a warning
RECOMMENDED_VALUES = 5


class PMNFModeler:
    """Performance models in Extra-P's normal form for every (callpath, metric) series.

    Options (all keyword-only, checked by `fit`):
    - `compat`: None (the improved default) or "extrap" (Extra-P 4.2.5's default modeler).
    - `aggregate`: how repetitions become one value per point: "robust" (the mean of the
      repetitions that are not outliers), "median", "mean", "min", "max". None: "robust", or
      "mean" with compat="extrap" (what Extra-P uses).
    - `candidates`: default mode: how many best single-parameter terms per parameter go on to the
      multi-parameter search (None: 5 for 2 parameters, 3 for 3, 1 beyond).
    - `allow_log`: allow log2 factors (they are dropped anyway for a parameter with a value < 1).
    - `noise_test`: default mode: keep a constant model when its deviations are within the noise
      measured by the repetitions.
    - `on_too_few`: "warn" (a series with fewer than 3 points gets a constant model and a warning)
      or "raise" (`TooFewPointsError`).
    - `strong_scaling`: default mode, with a parameter named `ranks`: also fit the values x ranks
      and keep that form divided by ranks (terms falling as 1/ranks) where it cross-validates
      clearly better (`modeler.strong_scaling`); the same along any other parameter for the series
      whose values fall along it (`strong_scaling.falls_along`).
    - `pass_range`: default mode, for series whose runs name their repetition pass: fit again
      once per pass with that pass's runs left out, and widen the prediction range to hold those
      predictions (`modeler.passes`; `FittedModel.pass_models`).
    - `target`: default mode: the point the models are for (a mapping of parameter name to value;
      None: none). A parameter measured at two values only gets no term; a series whose values
      differ between those two levels beyond their noise (`modeler.levels`) is modeled on the
      points at the target's value of it alone, where that is one of the two; otherwise (or
      without a target) its model is of both levels, its `miss` says it does not follow the
      parameter, and its range holds each level's model (`FittedModel.levels`, `level_models`).
    """

    def __init__(
        self,
        *,
        compat: str | None = None,
        aggregate: str | None = None,
        candidates: int | None = None,
        allow_log: bool = True,
        noise_test: bool = True,
        on_too_few: str = "warn",
        strong_scaling: bool = True,
        pass_range: bool = True,
        target: Mapping[str, float] | None = None,
    ) -> None:
        self.compat = compat
        self.aggregate = aggregate
        self.candidates = candidates
        self.allow_log = allow_log
        self.noise_test = noise_test
        self.on_too_few = on_too_few
        self.strong_scaling = strong_scaling
        self.pass_range = pass_range
        self.target = target

    def _validate(self) -> str:
        # options are checked for their type first: a numpy array in a membership test raised
        # TypeError (unhashable) or numpy's ambiguity error, not this InputError (review 103 LOW-4)
        if not (self.compat is None or isinstance(self.compat, str)) or self.compat not in COMPAT_MODES:
            raise InputError(f"compat must be None or 'extrap', got {self.compat!r}")
        aggregate = self.aggregate
        if aggregate is None or (isinstance(aggregate, str) and not aggregate):
            aggregate = "mean" if self.compat == "extrap" else "robust"
        if not isinstance(aggregate, str) or aggregate not in REPETITION_AGGREGATES:
            raise InputError(
                f"aggregate must be one of {', '.join(REPETITION_AGGREGATES)}, got {self.aggregate!r}"
            )
        # numpy's integers and booleans are accepted too: options often come from np.arange or a grid
        if self.candidates is not None and (
            not isinstance(self.candidates, numbers.Integral)
            or isinstance(self.candidates, (bool, np.bool_))
            or self.candidates < 1
        ):
            raise InputError(f"candidates must be a positive integer, got {self.candidates!r}")
        if not isinstance(self.on_too_few, str) or self.on_too_few not in ("warn", "raise"):
            raise InputError(f"on_too_few must be 'warn' or 'raise', got {self.on_too_few!r}")
        for name in ("allow_log", "noise_test", "strong_scaling", "pass_range"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise InputError(f"{name} must be True or False, got {value!r}")
        if self.target is not None and not (
                isinstance(self.target, Mapping)
                and all(isinstance(k, str) and isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                        for k, v in self.target.items())):
            raise InputError(f"target must be None or a mapping of parameter names to numbers, got {self.target!r}")
        return aggregate

    def _check_target(self, parameters: Sequence[str]) -> None:
        """A target names the dataset's parameters, with values as `predict` takes them (review 133
        LOW-6: `{'zz': 3}` and `{'p': -1}` were taken, and matched no level)."""
        for name, value in (self.target or {}).items():
            if name not in parameters:
                raise InputError(f"target names {name!r}, which is not a parameter of the dataset "
                                 f"({', '.join(parameters)})")
            try:
                number = float(value)
            except OverflowError:  # an int past the float range (review 136 finding 5)
                number = math.inf
            if not (math.isfinite(number) and number >= 0):
                raise InputError(f"target {name}={value!r}: parameter values must be finite and not negative")
            if number > LARGEST_VALUE:
                raise InputError(f"target {name}={value!r}: values above {LARGEST_VALUE:g} are too large to predict "
                                 f"at (their powers overflow)")

    def fit(self, dataset: Dataset) -> "PMNFModeler":
        aggregate = self._validate()
        if not isinstance(dataset, Dataset):
            raise InputError(f"fit expects a modeler.dataset.Dataset, got {type(dataset).__name__}")
        if not dataset.series:
            raise TooFewPointsError("the dataset has no series to model")
        self._check_target(dataset.parameters)
        for s in dataset.series:
            _check_finite(s, dataset.parameters)
        check_magnitudes(dataset)
        kept = [(None, wide) if (wide := _too_wide(s)) else _defined_points(s, dataset.parameters)
                for s in dataset.series]
        series = [k[0] or s for k, s in zip(kept, dataset.series)]
        dataset = dataset.like(series, dataset.warnings)
        stats = point_stats(series, aggregate)
        notes = [k[1] + (self._screen(s, dataset.parameters) if k[0] else ()) for s, k in zip(series, kept)]
        # no parameter: every row is the one point, its mean the model (review 103 LOW-1: three
        # rows of a Dataset built by hand without parameters reached the least squares, AttributeError)
        fittable = [i for i, s in enumerate(series) if s.n_points >= MIN_POINTS and kept[i][0] and dataset.parameters]
        # where the runs name their passes, the noise that judges the forms leaves out each pass's
        # common factor (`modeler.pass_noise`; review 133 HIGH-1)
        shape = (dict(zip(fittable, pass_noise.shape_spreads([series[i] for i in fittable], aggregate)))
                 if self.compat is None else {})
        fits = self._fit_groups(dataset, fittable, stats, aggregate, shape)
        if self.compat is None:
            for i, odd in odd_points(series, sorted(fits), stats, aggregate).items():
                notes[i] = notes[i] + (_odd_note(dataset.parameters, series[i], odd),)
            for i, (point, share, there) in _heavy(fits).items():
                notes[i] = notes[i] + (heavy_note(dataset.parameters, series[i].points[point],
                                                  float(stats[i].values[point]), share, there),)
        rows, tested = [], []
        for i, s in enumerate(dataset.series):
            values, spread, counts = stats[i]
            if i in fits:
                g, row, q, divided, other = fits[i]
                model = _to_model(dataset.parameters, g, row)
                alternatives = _family_alternatives(dataset.parameters, g, row, divided)
                if divided:  # fitted as values x a parameter: back to the values (modeler.strong_scaling)
                    model = split(model, divided)[0]
                if other is not None:  # both families in play: the range draws from both
                    g_other, weight, other_divided = other
                    alternatives = mix(alternatives, _family_alternatives(dataset.parameters, g_other, row, other_divided),
                                       weight)
                if not np.any(values) and alternatives:  # all zeros: nothing is uncertain
                    k = 1 + len(model.terms)
                    alternatives = (Alternative(1.0, model, np.zeros((k, k))),)
                smape, rss, ar2, cv = (float(v[row]) for v in (q.smape, q.rss, q.ar2, q.cv_smape))
                cv_smape = cv if np.isfinite(cv) else None
                tested.append(i)
            else:
                model, smape, rss = _mean_model(dataset.parameters, values)
                ar2, cv_smape, alternatives = 0.0, None, ()
            if not np.isfinite(rss) and np.all(np.isfinite(values)):
                notes[i] = notes[i] + (OVERFLOW_NOTE,)
            elif rss < np.finfo(float).tiny and smape > 1e-6:
                # the squares of residuals below about 1e-154 underflow, and with them the
                # covariances: an RSS of 0 and a range of no width for a fit that is not exact
                # (one exact to rounding, its SMAPE near 1e-13%, has its RSS of 0 and no width)
                notes[i] = notes[i] + (UNDERFLOW_NOTE,)
                rss, alternatives = float("nan"), ()
            if i in fits and self.compat is None:
                steep = end_slope_note(dataset.parameters, s.points, values, spread, counts, model, f"{s.callpath} [{s.metric}]")
                rise = (unseen_rise_note(dataset.parameters, s.points, values, spread, counts, model, fits[i][3],
                                         f"{s.callpath} [{s.metric}]") if fits[i][3] else None)
                steep = rise or steep  # a model that turns up beyond: not "likely low" (review 113)
                if steep:  # (review 104 H1: n^2 + n fitted as n^(7/4), 48% low at 16x, unsaid)
                    notes[i] = notes[i] + (steep,)
            interval = _interval(spread, counts)
            rows.append((s.callpath, s.metric, model, smape, rss, ar2, cv_smape, s.n_points, interval, notes[i],
                         alternatives))
        misses = dict(zip(tested, _misses([rows[i][2] for i in tested], [series[i] for i in tested], dataset.parameters)))
        refits = (self._pass_models(dataset, tested, [r[2] for r in rows]) if self.pass_range and self.compat is None
                  else {})
        self.models_ = [FittedModel(*row, misses.get(i), refits.get(i, ())) for i, row in enumerate(rows)]
        if self.compat is None and getattr(self, "_level_refits", True):
            self.models_ = self._by_levels(dataset, tested, stats, self.models_)
        self.parameters_ = dataset.parameters
        self.aggregate_ = aggregate
        return self

    def _pass_models(
        self, dataset: Dataset, fitted: list[int], models: Sequence[Model]
    ) -> dict[int, tuple[tuple[tuple[int, ...], Model], ...]]:
        """Series index -> (passes, the model fitted without their runs) for each group of passes
        left out (`passes.folds`), for the fitted series whose passes differ (`modeler.passes`): one
        fit of those series per group. A refit that keeps only its constant where `models[i]` (from
        every run) has terms is left out: with fewer runs the noise test found the growth within the
        noise (review 63: 2 of 3 refits of a growing `main` came out as the constant 1.7 s, below
        what the sweep had measured, and set the range's floor), which says nothing of how fast
        it grows."""
        by_pass: dict[tuple[int, ...], list[tuple[int, Series]]] = {}
        for i in fitted:
            s = dataset.series[i]
            if passes.differ(s):
                for k in passes.folds(s):
                    if (sub := passes.without(s, k)).n_points >= MIN_POINTS:
                        by_pass.setdefault(k, []).append((i, sub))
        out: dict[int, list[tuple[tuple[int, ...], Model]]] = {}
        twin = self._twin(pass_range=False)
        for k, items in sorted(by_pass.items()):
            refitted = twin.fit(dataset.like([s for _, s in items], [])).models_
            for (i, _), fm in zip(items, refitted):
                if fm.model.terms or not models[i].terms:
                    out.setdefault(i, []).append((k, fm.model))
        return {i: tuple(v) for i, v in out.items()}

    def _twin(self, **changes) -> "PMNFModeler":
        """A modeler of these options (and `changes`) for the refits of some series: it warns of too
        few points, has no target, and makes no refits by levels of its own (`_by_levels`)."""
        twin = PMNFModeler(**{**self.get_params(), "on_too_few": "warn", "target": None, **changes})
        twin._level_refits = False
        return twin

    def _by_levels(self, dataset: Dataset, tested: list[int], stats: list, models: list[FittedModel]
                   ) -> list[FittedModel]:
        """`models`, those of the series whose values differ between the two measured values of a
        parameter beyond their noise (`levels.level_effects`) replaced: where `target` names one of
        those values for each such parameter, by the model of the points at those values alone
        (the other parameters' full sweep); else marked (`miss`), with each level's model
        (`FittedModel.level_models`) for the range. One fit per set of levels (review 128 MED-1)."""
        params = dataset.parameters
        target = dict(self.target or {})
        found = {}
        for i in tested:
            s = dataset.series[i]
            if effects := level_effects(params, s.points, *stats[i][:3]):
                found[i] = effects
        if not found:
            return models
        wanted: dict[tuple[tuple[str, float], ...], list[int]] = {}
        at_level: dict[int, tuple[tuple[str, float], ...]] = {}
        for i, effects in found.items():
            key = tuple((e.parameter, target.get(e.parameter)) for e in effects)
            if all(v is not None and float(v) in e.levels for (_, v), e in zip(key, effects)):
                key = tuple((p, float(v)) for p, v in key)
                if _restrict(dataset.series[i], params, key).n_points >= MIN_POINTS:
                    at_level[i] = key
                    wanted.setdefault(key, []).append(i)
                    continue
            for e in effects:
                for v in e.levels:
                    wanted.setdefault(((e.parameter, v),), []).append(i)
        twin = self._twin()
        refitted: dict[tuple, dict[int, FittedModel]] = {}
        for key, index in wanted.items():
            subs = [_restrict(dataset.series[i], params, key) for i in index]
            ok = [j for j, sub in enumerate(subs) if sub.n_points >= 1]
            if not ok:
                continue
            fitted = twin.fit(dataset.like([subs[j] for j in ok], [])).models_
            refitted[key] = {index[j]: fm for j, fm in zip(ok, fitted)}
        out = list(models)
        for i, effects in found.items():
            if i in at_level:
                key = dict(at_level[i])
                fm = refitted[at_level[i]][i]
                marked = tuple(dataclasses.replace(e, modeled_at=key[e.parameter]) for e in effects)
                own = tuple(n for n in fm.warnings if not any(n.startswith(f"only 1 value(s) of parameter {e.parameter}:")
                                                                 for e in effects))
                out[i] = dataclasses.replace(fm, warnings=own + tuple(modeled_note(e) for e in marked), levels=marked)
                continue
            fm = models[i]
            level_models = tuple(((e.parameter, v), refitted[((e.parameter, v),)][i].model)
                                 for e in effects for v in e.levels if i in refitted.get(((e.parameter, v),), {}))
            notes = tuple(n for n in fm.warnings if not any(n.startswith(f"only 2 value(s) of parameter {e.parameter}:")
                                                              for e in effects))
            out[i] = dataclasses.replace(fm, miss=fm.miss or not_followed_text(effects),
                                         warnings=notes + tuple(unmodeled_note(e) for e in effects),
                                         levels=effects, level_models=level_models)
        return out

    def _screen(self, s: Series, params: tuple[str, ...]) -> tuple[str, ...]:
        """The warnings a series gets for too few points or parameter values (or the error)."""
        if not params and s.n_points >= MIN_POINTS:
            return (f"{s.callpath}/{s.metric}: no parameter: its {s.n_points} rows are one point; constant model (mean)",)
        if s.n_points < MIN_POINTS:
            msg = (
                f"{s.callpath}/{s.metric}: {s.n_points} point(s), "
                f"at least {MIN_POINTS} are needed for a model with a term"
            )
            if self.on_too_few == "raise":
                raise TooFewPointsError(msg)
            return (msg + "; constant model (mean)",)
        notes = []
        for p, k in zip(params, distinct_values(s.points)):
            if k < MIN_POINTS:
                notes.append(
                    f"only {k} value(s) of parameter {p}: modeled as constant in {p} "
                    f"(at least {MIN_POINTS} are needed)"
                )
            elif k < RECOMMENDED_VALUES:
                notes.append(f"fewer than {RECOMMENDED_VALUES} values of parameter {p} ({k})")
        return tuple(notes)

    def _fit_groups(self, dataset: Dataset, fittable: list[int], stats: list, aggregate: str,
                    shape: dict | None = None) -> dict:
        """Series index -> (its group's fit, its row there, the group's quality, the parameter the fit
        is of the values x (None: of the values), None or (the other family's fit, its weight in the
        prediction range, the parameter that family is of the values x)); one engine call per set of
        series measured at the same points, and one more per parameter the values x it are fitted
        for (`modeler.strong_scaling`): the rank count (`Dataset.ranks_parameter`, `ranks` unless named
        otherwise) for every series, any other parameter for the series whose values fall along it
        (`falls_along`)."""
        fits = {}
        params = dataset.parameters
        for members in group_by_points([dataset.series[i].points for i in fittable]).values():
            index = [fittable[m] for m in members]
            pts = _one_of_each_moving_pair(dataset.series[index[0]].points, params, self.compat,
                                           dataset.ranks_parameter)
            Y = np.array([stats[i].values for i in index])
            g, q = self._fit_scaled(pts, Y, index, stats, dataset, aggregate, shape=shape)
            for row, i in enumerate(index):
                fits[i] = (g, row, q, None, None)
            for col in self._divisors(params, pts, dataset.ranks_parameter):
                x = pts[:, col]
                if params[col] == dataset.ranks_parameter:
                    ok = np.ones(len(index), dtype=bool)
                else:  # only where the values fall along it, and no other family is in play
                    ok = falls_along(pts, Y, col) & np.array([fits[i][3] is None and fits[i][4] is None
                                                             for i in index])
                with np.errstate(over="ignore", invalid="ignore"):
                    Y2 = Y * x[None, :]
                ok &= np.isfinite(Y2).all(axis=1)  # beyond the float range x ranks: plain only
                if not ok.any():
                    continue
                sub = [i for i, good in zip(index, ok) if good]
                g2, q2 = self._fit_scaled(pts, Y2[ok], sub, stats, dataset, aggregate, x, shape)
                rows = np.flatnonzero(ok)
                g1 = g.rows(rows)
                spread = _judging_spread(stats, sub, shape)
                if spread is None:
                    spread = np.array([stats[i].spread for i in sub])
                reps = np.array([stats[i].counts for i in sub])
                noise = (noise_variance(spread, reps, aggregate) if aggregate not in ("min", "max")
                         else np.full(len(sub), np.nan))
                # both families at one power-of-two scale near 1, as they were fitted (values of
                # 1e200 overflowed c + W/ranks's fit, and the U shape 100/r + 0.5 r was split as
                # c + W/r at 1 and not at 1e200)
                scale = power_of_two_scale(Y[ok])
                g1u, g2u = g1.scaled(1.0 / scale), g2.scaled(1.0 / scale)
                repeated = reps >= 2  # repetitions that agree exactly at every repeated point: counts
                exact = repeated.any(-1) & ~(repeated & (spread > 0)).any(-1)
                keep, other, taken = choose(g1u, g2u, q.cv_smape[rows], q2.cv_smape, noise, exact,
                                             bool(self.allow_log), params[col] == dataset.ranks_parameter)
                if taken.any():  # rows replaced in place: the model reported, and its own quality (review 114)
                    with np.errstate(over="ignore"):  # as in _fit_scaled: covariances beyond 1e308 are inf
                        g2 = g2u.scaled(scale)
                    _requalify(q2, g2u, np.flatnonzero(taken), scale)
                q1 = _quality_rows(q, rows) if (other > 0).any() else None  # once: per series it was quadratic (review 54 F1)
                name = params[col]
                for j, i in enumerate(sub):
                    if keep[j]:
                        fits[i] = (g2, j, q2, name, (g1, float(other[j]), None))
                    elif other[j] > 0:
                        fits[i] = (g1, j, q1, None, (g2, float(other[j]), name))
        return fits

    def _divisors(self, params: tuple[str, ...], pts: np.ndarray, ranks: str = RANKS_PARAMETER) -> list[int]:
        """The columns of the parameters the values x them are fitted for too (default mode,
        `strong_scaling`): those with at least 3 values, all positive, the rank count `ranks` first."""
        if self.compat is not None or not self.strong_scaling:
            return []
        cols = [c for c in range(len(params))
                if np.all(pts[:, c] > 0) and np.unique(pts[:, c]).size >= MIN_POINTS]
        return sorted(cols, key=lambda c: params[c] != ranks)

    def _fit_scaled(self, pts, Y, index, stats, dataset, aggregate, ranks=None, shape=None):
        """The engine's fit of the rows of Y, and its quality (of Y / ranks where `ranks` is given:
        `modeler.strong_scaling.time_view`)."""
        # each series is fitted at a power-of-two scale near 1 (exact in floating point, so
        # the models are the same bit for bit), where 1/y^2 weights and squares cannot
        # overflow or underflow: values of 1e-200 or 1e200 are modeled like 1
        scale = power_of_two_scale(Y)
        Y = Y / scale[:, None]
        if self.compat == "extrap":
            g = extrap_mode.fit_group(pts, Y, index, self.allow_log)
        else:
            spread = np.array([stats[i].spread for i in index])
            reps = np.array([stats[i].counts for i in index])
            g = default_mode.fit_group(
                pts, Y, index, spread, reps, aggregate=aggregate, candidates=None if self.candidates is None else int(self.candidates),
                allow_log=self.allow_log, noise_test=self.noise_test,
                shape_spread=_judging_spread(stats, index, shape),
            )
        if ranks is not None:
            g = time_view(g, ranks)
        q = quality(g)  # scale-free but for the RSS
        with np.errstate(over="ignore"):  # beyond 1e154 an RSS is inf in floating point
            g = g.scaled(scale)
            q = dataclasses.replace(q, rss=q.rss * scale * scale)
        return g, q

    def get_params(self, deep: bool = True) -> dict:
        """The options, by name (scikit-learn's convention, so `sklearn.base.clone` works)."""
        return {name: getattr(self, name) for name in _OPTIONS}

    def set_params(self, **params) -> "PMNFModeler":
        """Set options by name; they are checked by the next `fit`. Returns self."""
        unknown = sorted(set(params) - set(_OPTIONS))
        if unknown:
            raise InputError(f"PMNFModeler has no option {', '.join(map(repr, unknown))}; options: {', '.join(_OPTIONS)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        """For `sklearn.utils.validation.check_is_fitted`."""
        return hasattr(self, "models_")

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (asked for by its utilities, so scikit-learn is installed
        when this is called): fitted on a Dataset, not on (X, y); it must be fitted before use."""
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), requires_fit=True, no_validation=True)

    def __repr__(self) -> str:
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if not _same(v, _OPTIONS[k])]
        return f"PMNFModeler({', '.join(changed)})"

    def predict(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """Predictions of every fitted model at `points`: shape (n_series, n_points).

        `points` is an (n, n_parameters) array in the order of `parameters_` (one point may be
        given as a flat sequence) or a mapping from parameter name to a value or equally many
        values. Values must be finite and not negative, as measured parameter values, and not 0
        for a parameter that some model has a log2 factor or a negative exponent of (log2(0) and
        1/0 are not defined)."""
        if not hasattr(self, "models_"):
            raise NotFittedError("PMNFModeler.predict called before fit")
        pts = self._points(points)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.array([m.model.evaluate(pts) for m in self.models_]).reshape(len(self.models_), len(pts))

    def _points(self, points) -> np.ndarray:
        """`points` as an (n, n_parameters) array in the order of `parameters_`, checked."""
        return checked_points(points, self.parameters_, self.models_)


def _same(value: object, default: object) -> bool:
    """Whether an option is its default; never raises (review 103 LOW-4: `repr` of an array option
    raised numpy's "truth value of an array is ambiguous")."""
    if value is default:
        return True
    return type(value) is type(default) and isinstance(value, (str, bool, int, float)) and value == default


#: option name -> default
_OPTIONS = {"compat": None, "aggregate": None, "candidates": None, "allow_log": True, "noise_test": True,
            "on_too_few": "warn", "strong_scaling": True, "pass_range": True, "target": None}


def _restrict(s: Series, params: tuple[str, ...], key: tuple[tuple[str, float], ...]) -> Series:
    """The series at the points where each named parameter has the given value."""
    keep = np.ones(s.n_points, dtype=bool)
    for p, v in key:
        keep &= s.points[:, params.index(p)] == v
    return s.take(keep)


def _check_finite(s: Series, params: tuple[str, ...]) -> None:
    """A value or a coordinate that is nan or infinite cannot be modeled (least squares spreads it
    everywhere), nor a value whose square overflows: an error naming the series and the point (the
    readers never produce one; review 57 F2, F5: the API took a point at p=nan and fitted a constant)."""
    bad_points = ~np.isfinite(s.points)
    if bad_points.any():
        i, j = np.argwhere(bad_points)[0]
        raise InputError(f"{s.callpath}/{s.metric}: point {int(i)} has {params[j]}={param_text(s.points[i, j])}: "
                         "parameter values must be finite numbers")
    if (np.abs(np.concatenate(s.repetitions)) <= LARGEST_MEASURED).all():
        return
    for pt, reps in zip(s.points, s.repetitions):
        bad = ~(np.abs(reps) <= LARGEST_MEASURED)
        if bad.any():
            where = point_text(params, pt)
            why = "values must be finite numbers" if not np.isfinite(reps[bad][0]) else \
                f"values above {LARGEST_MEASURED:g} are too large to model (their sums overflow)"
            raise InputError(f"{s.callpath}/{s.metric}: a value at ({where}) is {reps[bad][0]}: {why}")


#: the widest ratio of a series' largest value to its smallest non-zero one (in size) that is
#: fitted: a series is fitted at a scale near 1, where the 1/y^2 weights of values 1e-155 of the
#: largest overflow (review 57 F2: one value of 1e200 among values near 1 ended in "SVD did not
#: converge"); a uniform scale of 1e-200 or 1e200 is fitted like 1
WIDEST_RANGE = 1e140


def _too_wide(s: Series) -> tuple[str, ...]:
    """A note where `s` spans more than `WIDEST_RANGE`, which then gets its mean as model."""
    sizes = np.abs(np.concatenate(s.repetitions))
    sizes = sizes[sizes > 0]
    if not sizes.size or sizes.max() / WIDEST_RANGE <= sizes.min():
        return ()
    return (f"{s.callpath}/{s.metric}: its values span more than {WIDEST_RANGE:g} (from {sizes.min():g} to "
            f"{sizes.max():g} in size), too wide to fit (a measurement error?); constant model (mean)",)


def _defined_points(s: Series, params: tuple[str, ...]) -> tuple[Series | None, tuple[str, ...]]:
    """The series without its points where a parameter that varies is negative, and a note naming
    them: PMNF terms (x^(1/2), log2 x) are not defined there, and the model is built on the other
    points. None (with the note) when no point is left: the series gets its mean as model."""
    varies = np.ptp(s.points, axis=0) > 0
    bad = (s.points < 0) & varies
    if not bad.any():
        return s, ()
    rows = bad.any(axis=1)
    named = [f"{p} = {listing([param_text(v) for v in np.unique(s.points[bad[:, j], j])], 5)}"
             for j, p in enumerate(params) if bad[:, j].any()]
    why = f"PMNF terms such as x^(1/2) and log2(x) are not defined at negative values ({'; '.join(named)})"
    if rows.all():
        return None, (f"{s.callpath}/{s.metric}: {why}, and every point has one; constant model (mean)",)
    note = f"{int(rows.sum())} of {s.n_points} points left out: {why}"
    return s.take(~rows), (note,)


def _to_model(params: tuple[str, ...], g: GroupFit, row: int) -> Model:
    return _model_of(params, g.terms[row], g.coef[row])


def _model_of(params: tuple[str, ...], specs: list, coef: np.ndarray) -> Model:
    terms = tuple(Term(float(coef[1 + j]), tuple(_factor(params[p], h) for p, h in spec)) for j, spec in enumerate(specs))
    return Model(params, float(coef[0]), terms)


@functools.lru_cache(maxsize=4096)
def _factor(parameter: str, hypothesis: int) -> Factor:
    e, lg = exponent_of(hypothesis)
    return Factor(parameter, e, lg)


def _requalify(q, unit: GroupFit, rows: np.ndarray, scale: np.ndarray) -> None:
    """The quality `q` of rows `rows` computed anew in place from `unit`, the fit of those values
    over `scale` (S,) (near 1, as `_fit_scaled` does): `strong_scaling.choose` replaces such rows
    by c + W/ranks, and their SMAPE, RSS and adjusted R^2 were still the replaced model's (review
    114: 15.66% printed for a model whose own SMAPE is 14.96%)."""
    fresh = quality(unit.rows(rows))
    with np.errstate(over="ignore"):
        fresh = dataclasses.replace(fresh, rss=fresh.rss * scale[rows] ** 2)
    for f in dataclasses.fields(q):
        getattr(q, f.name)[rows] = getattr(fresh, f.name)


def _quality_rows(q, rows: np.ndarray):
    return dataclasses.replace(q, **{f.name: getattr(q, f.name)[rows] for f in dataclasses.fields(q)})


def _family_alternatives(params: tuple[str, ...], g: GroupFit, row: int, divided: str | None
                         ) -> tuple[Alternative, ...]:
    """A family's alternatives for one series, as models of the values (split over the parameter
    `divided` where the family was fitted as values x it)."""
    alternatives = _alternatives(params, g, row)
    return tuple(split_alternative(a, divided) for a in alternatives) if divided else alternatives


def _alternatives(params: tuple[str, ...], g: GroupFit, row: int) -> tuple[Alternative, ...]:
    if g.alternatives is None:
        return ()
    return tuple(Alternative(w, _model_of(params, specs, coef), cov) for w, specs, coef, cov in g.alternatives[row])


def _misses(models: list[Model], series: list[Series], params: tuple[str, ...]) -> list[str | None]:
    """`_miss` of each model on its series; those that cannot miss (`misfit.may_miss`) are sorted
    out in one pass per set of series measured alike."""
    with np.errstate(all="ignore"):
        fitted = [m.evaluate(s.points) for m, s in zip(models, series)]
    groups, others = by_shape(series)
    maybe = np.ones(len(series), dtype=bool)
    for index in groups:
        maybe[index] = may_miss(np.array([fitted[i] for i in index]), table(series, index))
    return [_miss(f, s, params) if m else None for f, s, m in zip(fitted, series, maybe)]


def _miss(fitted: np.ndarray, s: Series, params: tuple[str, ...]) -> str | None:
    """How a model, of values `fitted` at the series' points, misses the repetitions at one of them
    (`modeler.misfit`), or None."""
    worst = worst_miss(fitted, s.repetitions)
    if worst is None:
        lack = lack_of_fit(fitted, s.repetitions)  # a miss spread over many points (review 43)
        if lack is None or any(1 < k < MIN_POINTS for k in distinct_values(s.points)):
            return None  # (a parameter held constant, said so, leaves its variation unfollowed by design)
        return lack_text(*lack)
    factor, i = worst
    point = point_text(params, s.points[i])
    return miss_text(factor, float(fitted[i]), point, s.repetitions[i])


def _heavy(fits: dict) -> dict[int, tuple[int, float, float]]:
    """Series index -> (point, share of the weight, the value the other points put there) where the
    chosen fit hinges on one value near zero (`modeler.heavypoint`); one pass per group fit."""
    out = {}
    done: dict[int, list] = {}
    for i, (g, row, *_) in fits.items():
        if id(g) not in done:
            done[id(g)] = heavy_points(g)
        found = done[id(g)][row]
        if found is not None:
            out[i] = found
    return out


def _odd_note(params: tuple[str, ...], s: Series, odd: np.ndarray) -> str:
    """The note of a model whose series has points the engine all but left out (`repstats.odd_points`).
    The same text for every series with the same points, so that one straggler run, which makes
    every call path odd at its point, is said once with a count of models (review 61 F3: the model
    was good again, but nothing said that a point had been set aside)."""
    where = listing([f"({point_text(params, s.points[i])})" for i in odd], 3)
    return (f"the repetitions at {where} disagree far more than at the other points (a straggler run?): "
            f"{'that point counts' if len(odd) == 1 else 'those points count'} little in the model; "
            f"measure {'it' if len(odd) == 1 else 'them'} again")


def _mean_model(params: tuple[str, ...], y: np.ndarray) -> tuple[Model, float, float]:
    """The fallback for a series with too few points: its mean, with SMAPE and RSS."""
    mean = float(np.mean(y))
    resid = y - mean
    abssum = np.abs(y) + abs(mean)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (the squares of a too wide series)
        smape = float(np.mean(np.where(abssum > 0, 2 * np.abs(resid) / abssum, 0.0)) * 100)
        rss = float(resid @ resid)
    return Model(params, mean, ()), smape, rss


def _judging_spread(stats: list, index: Sequence[int], shape: dict | None) -> np.ndarray | None:
    """(S, n) the spread per point that judges the forms of the series `index`: the pass-corrected one
    (`modeler.pass_noise.shape_spread`) where `shape` has it, the repetitions' spread elsewhere; None
    where no series of `index` has one (the repetitions' spread judges them all)."""
    if not shape or all(shape.get(i) is None for i in index):
        return None
    return np.array([stats[i].spread if shape.get(i) is None else shape[i] for i in index])


def _interval(spread: np.ndarray, reps: Sequence[int]) -> tuple[float, float] | None:
    """±2 relative standard deviations of the repetitions (median over points), as multipliers;
    `reps`: how many repetitions each point's spread is of."""
    if max(reps) < 2:
        return None
    v = np.sort(spread[np.array(reps) > 1])  # their median, as np.median gives it at a tenth of the cost
    s = float((v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2)
    return (max(0.0, 1.0 - 2.0 * s), 1.0 + 2.0 * s)


def _one_of_each_moving_pair(pts: np.ndarray, params: Sequence[str], compat: str | None,
                             ranks: str = RANKS_PARAMETER) -> np.ndarray:
    """The points the engine fits: where two parameters move together at every point (`grid.followers`,
    said in a warning), the one that follows held at its first value, so that the model follows the
    other alone (review 59 F8: p = n at every point, values = p, was fitted as a constant with SMAPE
    93%, since no line of points varies one parameter alone). The rank count `ranks`
    (`Dataset.ranks_parameter`) is the one followed, whatever it is named (review 109 F1). Extra-P's
    own rules (`--compat extrap`) stay as they are."""
    follow = {} if compat is not None else followers(pts, params, ranks)
    if not follow:
        return pts
    pts = pts.copy()
    for j in follow:
        pts[:, j] = pts[0, j]
    return pts

