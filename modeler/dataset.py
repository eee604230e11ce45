"""The measurements a modeler fits: one `Series` per (call path, metric), over named parameters.

Readers (our run files, Extra-P JSON Lines and text) produce a `Dataset`; the fitting engine, the
outputs and the report consume it. Repetitions stay separate so that the engine can aggregate them
as asked and use their spread as a noise estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from .errors import InputError

def robust_values(repetitions: Sequence[np.ndarray]) -> np.ndarray:
    """Per point, the mean of the repetitions that are not outliers.

    A repetition is an outlier when its point has at least 3 repetitions and it is further from
    the point's median than 4 robust standard deviations, the scale being pooled over all points
    of the series (1.4826 times the median relative deviation, `_pooled_median`): with five repetitions a
    per-point scale is too unstable. Without outliers this is the mean, which varies less than
    the median (1.6 times less in variance for normal noise, 3 times for uniform); with one it is
    as robust as the median."""
    return _robust_points(repetitions)[0]


def robust_kept(repetitions: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per point, which of its repetitions `robust_values` keeps (all of them where it keeps none and
    takes the median: the median of every one of them stands then)."""
    return _robust_points(repetitions)[1]


def _robust_points(repetitions: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    reps = [np.asarray(r, dtype=float).reshape(-1) for r in repetitions]
    if len({r.size for r in reps}) == 1:  # the common case, in one pass
        values, keep = robust_table_kept(np.stack(reps)[None])
        return values[0], list(keep[0])
    meds = np.array([np.median(r) for r in reps])
    rel = [np.abs(r - m) / abs(m) if m != 0 else np.zeros_like(r) for r, m in zip(reps, meds)]
    # the scale from the points whose median is not 0, less each odd point's median's own 0
    scaled = [d for d, m in zip(rel, meds) if m != 0]
    pooled = np.sort(np.concatenate(scaled))[sum(d.size % 2 for d in scaled):] if scaled else np.zeros(0)
    scale = 1.4826 * float(np.median(pooled)) if pooled.size else 0.0
    out = np.empty(len(reps))
    kept = []
    for i, (r, d) in enumerate(zip(reps, rel)):
        keep = d <= 4.0 * scale if r.size >= 3 else np.ones(d.shape, dtype=bool)
        out[i] = float(np.mean(r[keep])) if keep.any() else meds[i]
        kept.append(keep if keep.any() else np.ones(d.shape, dtype=bool))
    return out, kept


def robust_table(R: np.ndarray) -> np.ndarray:
    """`robust_values` of many series at once, each with as many repetitions at each of as many
    points: R of shape (series, points, repetitions) gives (series, points); the outlier scale is
    pooled per series."""
    return robust_table_kept(R)[0]


def robust_table_kept(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`robust_table`, and which repetitions each value keeps (R's shape; every one of a point's
    where none is kept and the value is their median)."""
    med = np.median(R, axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(med != 0, np.abs(R - med) / np.abs(med), 0.0)
    scale = 1.4826 * _pooled_median(np.where(med != 0, rel, np.nan).reshape(len(R), -1),
                                    (med[..., 0] != 0).sum(axis=1) if R.shape[2] % 2 else np.zeros(len(R), int))
    # a scale of 0: most repetitions agree exactly (a count, a coarse clock), and one that does not is
    # an outlier (review 61 F2: all zeros left out of the scale, a lone x10 set its own scale and stayed)
    keep = rel <= 4.0 * scale[:, None, None]
    if R.shape[2] < 3:  # two values deviate equally from their median: no way to tell which is wrong
        keep[:] = True
    n_kept = keep.sum(axis=2)
    kept_mean = (R * keep).sum(axis=2) / np.maximum(n_kept, 1)
    return np.where(n_kept > 0, kept_mean, med[..., 0]), keep | (n_kept == 0)[..., None]


def _pooled_median(rel: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Per row of `rel` (none below zero; NaN: left out, the points whose median is 0), the median of
    its values less the `skip[row]` smallest: with an odd number of repetitions each point's median
    deviates by 0 from itself and says nothing on the scale. Other zeros count: repetitions that
    agree exactly (0 for a row with nothing left)."""
    ordered = np.sort(rel, axis=1)  # NaN last
    n = (~np.isnan(rel)).sum(axis=1) - skip
    rows = np.arange(len(rel))
    last = max(rel.shape[1] - 1, 0)
    lo = ordered[rows, np.clip(skip + (n - 1) // 2, 0, last)]
    hi = ordered[rows, np.clip(skip + n // 2, 0, last)]
    return np.where(n > 0, (lo + hi) / 2, 0.0)


def relative_spread(R: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Over the last axis of R (the repetitions), their standard deviation over their mean; 0 with
    one repetition, a mean of 0, or repetitions that agree exactly (review 85 F1: the mean of three
    equal values such as 1000.3 + 0.07 * 32 * 5 is not always that value in floating point, and a
    spread of 1e-16 took an exact series for a measured one). `keep` (R's shape): only those
    repetitions count (the ones the robust aggregate kept). Each point is first scaled by the power
    of two nearest its largest magnitude: exact, and no overflow for huge values."""
    if R.shape[-1] < 2:
        return np.zeros(R.shape[:-1])
    R = R / power_of_two_scale(R)[..., None]
    m = R.mean(axis=-1)
    sd = R.std(axis=-1, ddof=1)
    equal = R.max(axis=-1) == R.min(axis=-1)
    if keep is not None and not keep.all():
        # where some are left out, the same over the others (where all are kept, the bits above)
        some = ~keep.all(axis=-1)
        k = keep.sum(axis=-1)
        km = np.where(keep, R, 0.0).sum(axis=-1) / np.maximum(k, 1)
        ksd = np.sqrt(np.where(keep, (R - km[..., None]) ** 2, 0.0).sum(axis=-1) / np.maximum(k - 1, 1))
        kequal = (k < 2) | (np.where(keep, R, -np.inf).max(axis=-1) == np.where(keep, R, np.inf).min(axis=-1))
        m, sd, equal = np.where(some, km, m), np.where(some, ksd, sd), np.where(some, kequal, equal)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((m != 0) & ~equal, sd / np.abs(np.where(m != 0, m, 1.0)), 0.0)


def power_of_two_scale(Y: np.ndarray) -> np.ndarray:
    """Over the last axis of Y, the power of two nearest the largest magnitude (1 where all are 0)."""
    top = np.max(np.abs(Y), axis=-1)
    with np.errstate(divide="ignore"):
        e = np.where((top > 0) & np.isfinite(top), np.round(np.log2(np.where(top > 0, top, 1.0))), 0.0)
    return np.ldexp(1.0, e.astype(int))


#: the same over the repetitions of every point at once, as a (points, runs) table (axis 1)
AXIS_REDUCERS = {"median": np.median, "mean": np.mean, "min": np.min, "max": np.max}
_REDUCERS: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda a: float(np.median(a)),
    "mean": lambda a: float(np.mean(a)),
    "min": lambda a: float(np.min(a)),
    "max": lambda a: float(np.max(a)),
}
#: the parameter that counts ranks, as the launcher records it: speedup, efficiency and cost are
#: derived against it, and the report draws its scaling views along it
RANKS_PARAMETER = "ranks"
REPETITION_AGGREGATES = ("median", "mean", "min", "max", "robust")


#: parameter values past this are refused, measured or asked for: cubes of three such parameters
#: multiplied overflow float64 (review 26: 1e150 ended in numpy's "SVD did not converge"; review 40:
#: `--at ranks=1e250` in a traceback)
LARGEST_VALUE = 1e30
#: measured values past this (in size) are refused: the sums of a few overflow float64 (review 57 F2:
#: values of 1.7e308 ended in a KeyError); values of 1e200 are modeled as values of 1 are
LARGEST_MEASURED = 1e305


def check_magnitudes(dataset: "Dataset") -> None:
    """An `InputError` naming the first parameter with values above `LARGEST_VALUE` (review 26;
    review 103 MED-2: the estimator reached numpy's "SVD did not converge" at 1e200)."""
    for i, p in enumerate(dataset.parameters):
        top = max((float(abs(s.points[:, i]).max()) for s in dataset.series if len(s.points)), default=0.0)
        if top > LARGEST_VALUE:
            raise InputError(f"parameter {p}: values up to {top:g} are too large to model (their powers overflow); "
                             f"give it in larger units (thousands, millions)", warnings=dataset.warnings)


def parameter_name_problem(name: object) -> str | None:
    """Why `name` cannot be a parameter's name, or None: the options name parameters as
    `NAME=VALUE,...` (`--at`, `--where`), and a model prints them in its formula (review 57 F6)."""
    if not isinstance(name, str) or not name.strip():
        return "a parameter needs a name"
    bad = [c for c in "=,()" if c in name]
    if bad or name != name.strip():
        what = f"holds {bad[0]!r}" if bad else "starts or ends with a space"
        return f"parameter name {name!r} {what}, so --at and --where cannot name it; rename it"
    return None


@dataclass(frozen=True)
class Series:
    """Measured values of one metric of one call path at every point where it was measured.

    `points` has shape (n_points, n_parameters) in the order of `Dataset.parameters`;
    `repetitions[i]` holds the repeated measurements at `points[i]` (already aggregated over ranks).
    `passes`, where known (runs whose header names their repetition), labels each repetition with
    its pass: the launcher runs every point of repetition 0, then of repetition 1, ..., so that
    the runs of one pass share the machine's state of their time (`modeler.passes`).
    """

    callpath: str
    metric: str
    points: np.ndarray
    repetitions: tuple[np.ndarray, ...]
    unit: str = ""
    passes: tuple[np.ndarray, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        try:
            pts = np.asarray(self.points, dtype=float)
            reps = tuple(np.asarray(r, dtype=float).reshape(-1) for r in self.repetitions)
        except (TypeError, ValueError) as e:
            raise InputError(f"{self.callpath}/{self.metric}: points and values must be numbers: {e}") from None
        if pts.ndim != 2:
            raise InputError(f"{self.callpath}/{self.metric}: points must be a 2-D array, got shape {pts.shape}")
        if len(self.repetitions) != pts.shape[0]:
            raise InputError(
                f"{self.callpath}/{self.metric}: {pts.shape[0]} points but {len(self.repetitions)} repetition arrays"
            )
        for i, r in enumerate(reps):
            if r.size == 0:
                raise InputError(f"{self.callpath}/{self.metric}: no value at point {pts[i].tolist()}")
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "repetitions", reps)
        if self.passes is not None:
            passes = tuple(np.asarray(p, dtype=np.int64).reshape(-1) for p in self.passes)
            if len(passes) != len(reps) or any(p.size != r.size for p, r in zip(passes, reps)):
                raise InputError(f"{self.callpath}/{self.metric}: the pass labels do not match the repetitions")
            object.__setattr__(self, "passes", passes)

    def take(self, keep: np.ndarray) -> "Series":
        """The series at the points where the boolean `keep` is true, pass labels and all."""
        keep = np.asarray(keep, dtype=bool)
        reps = tuple(r for r, k in zip(self.repetitions, keep) if k)
        passes = None if self.passes is None else tuple(p for p, k in zip(self.passes, keep) if k)
        return Series(self.callpath, self.metric, self.points[keep].reshape(-1, self.points.shape[1]), reps,
                      self.unit, passes)

    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    def values(self, how: str = "median") -> np.ndarray:
        """One value per point: the repetitions reduced with `how` (median, mean, min, max or robust)."""
        if how == "robust":
            return robust_values(self.repetitions)
        try:
            reduce = _REDUCERS[how]
        except KeyError:
            raise InputError(
                f"unknown repetition aggregate {how!r}; choose one of {', '.join(REPETITION_AGGREGATES)}"
            ) from None
        reps = self.repetitions
        if reps and all(r.size == reps[0].size for r in reps) and reps[0].size:
            # one array op where every point has as many runs: per point, np.median cost 30x more
            # (review 43's timing: 29000 calls for 1000 call paths)
            return AXIS_REDUCERS[how](np.stack(reps), axis=1).astype(float)
        return np.array([reduce(r) for r in reps])

    def spread(self, how: str | None = None) -> np.ndarray:
        """Relative spread per point: the repetitions' standard deviation over their mean (0 for one,
        or where they agree exactly); with `how="robust"`, of the repetitions the robust aggregate
        keeps (`robust_kept`), those the value is the mean of."""
        if how == "robust":
            return np.array([float(relative_spread(r[None, :], k[None, :])[0])
                             for r, k in zip(self.repetitions, robust_kept(self.repetitions))])
        return np.array([float(relative_spread(r[None, :])[0]) for r in self.repetitions])


@dataclass(frozen=True)
class RunShares:
    """What runs say of the run's time that Extra-P inputs do not (`modeler.share`): each call
    path's largest share of the run's time (over the measured points, the median over repetitions,
    on the rank where it is largest, whatever `--ranks` reduces the series with), the run's time of
    a rank being the longest top-level region of its main process; and those top-level call paths
    (DataLoader workers' and other processes' top-level regions run beside them, summed over the
    rank's processes); and each call path's largest share of its exclusive time (`exclusive`); and,
    under `--ranks mean`, the call paths that only some of a run's ranks ran (`some_ranks`)."""

    measured: Mapping[str, float]
    main_roots: frozenset[str]
    #: the same for the call paths' exclusive time
    exclusive: Mapping[str, float] = field(default_factory=dict)
    #: call path -> the (ranks that ran it, ranks profiled) of the runs where fewer than all of their
    #: two or more profiled ranks ran it (`aggregate.RunMetrics.partial`), sorted; recorded under
    #: `--ranks mean` only, where its `time` (a mean with 0 for the others) understates how the ranks
    #: that ran it scale, and the ranking takes their time from its cost (`ranking.rank_models`)
    some_ranks: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def of(self, metric: str) -> Mapping[str, float]:
        """The shares of `metric`'s values: `time` or `exclusive_time`."""
        return self.exclusive if metric == "exclusive_time" else self.measured

    @staticmethod
    def merged(parts: Sequence["RunShares | None"]) -> "RunShares | None":
        have = [p for p in parts if p is not None]
        if not have:
            return None
        measured: dict[str, float] = {}
        exclusive: dict[str, float] = {}
        some: dict[str, set[tuple[int, int]]] = {}
        for p in have:
            for into, of in ((measured, p.measured), (exclusive, p.exclusive)):
                for cp, v in of.items():
                    into[cp] = max(into.get(cp, 0.0), v)
            for cp, pairs in p.some_ranks.items():
                some.setdefault(cp, set()).update(pairs)
        return RunShares(measured, frozenset().union(*(p.main_roots for p in have)), exclusive,
                         {cp: tuple(sorted(v)) for cp, v in some.items()})


def ranks_text(pairs: Iterable[tuple[int, int]]) -> str:
    """`1 of 2-3`: how many of how many profiled ranks ran a call path (`RunShares.some_ranks`), as
    ranges over the runs."""
    pairs = list(pairs)

    def span(values: set[int]) -> str:
        return f"{min(values)}" if len(values) == 1 else f"{min(values)}-{max(values)}"

    return f"{span({a for a, _ in pairs})} of {span({b for _, b in pairs})}"


class MetricNote(str):
    """A warning that concerns some metrics only (`metrics`): `Dataset.select` drops it where none of
    them is kept (review 59 F7: `--ranks sum --metric time` warned how speedup and cost were derived,
    and which per-step metrics were not summed, when neither was asked for). A `str` otherwise."""

    metrics: frozenset[str]

    def __new__(cls, text: str, metrics: Sequence[str] | frozenset[str]) -> "MetricNote":
        note = super().__new__(cls, text)
        note.metrics = frozenset(metrics)
        return note

    def __reduce__(self):
        return MetricNote, (str(self), self.metrics)


class SeriesNote(MetricNote):
    """A warning about some series only, `keys` ((call path, metric)): `Dataset.select` and
    `--callpath` drop it where none of them is kept, and make it again by `remake(kept keys)` where
    some are (review 98 LOW-2: `--metric step_time` warned of gpu_time series not measured at every
    point; `--callpath '*all_reduce'` of a checkpoint that only rank 0 ran). `remake` is picklable
    (a `functools.partial` of a module-level function), and a copy is `remake(keys)`: the same note,
    with what its maker sets on it (`export_text`)."""

    keys: frozenset[tuple[str, str]]
    remake: Callable[[frozenset[tuple[str, str]]], "SeriesNote"]

    def __new__(cls, text: str, keys: Iterable[tuple[str, str]],
                remake: Callable[[frozenset[tuple[str, str]]], "SeriesNote"]) -> "SeriesNote":
        keys = frozenset(keys)
        note = super().__new__(cls, text, {m for _, m in keys})
        note.keys = keys
        note.remake = remake
        return note

    def __reduce__(self):
        return self.remake, (self.keys,)


def notes_for(warnings: Sequence[str], series: Sequence["Series"]) -> list[str]:
    """`warnings` as they hold for `series` (a selection of a dataset's): a `MetricNote` of none of
    their metrics is dropped; a `SeriesNote` of none of them is dropped, of some of them made again."""
    kept = {s.metric for s in series}
    keys = {(s.callpath, s.metric) for s in series}
    out: list[str] = []
    for w in warnings:
        if isinstance(w, SeriesNote):
            mine = w.keys & keys
            if mine:
                out.append(w if mine == w.keys else w.remake(frozenset(mine)))
        elif not isinstance(w, MetricNote) or w.metrics & kept:
            out.append(w)
    return out


#: the `--ranks` combinations under which our runs' `time` is a time per rank (`Dataset.time_per_rank`)
PER_RANK_COMBINATIONS = ("mean", "max")


@dataclass
class Dataset:
    """All series of an experiment over the same named parameters; `run_shares` where they were
    read from runs."""

    parameters: tuple[str, ...]
    series: list[Series] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    run_shares: RunShares | None = None
    #: parameters that `--where`/`--exclude` left with one value, dropped from `parameters`, with
    #: that value (for the error of an option that names one: `target_point.parse_assignments`)
    held: dict[str, float] = field(default_factory=dict)
    #: how the values of our runs were combined across ranks (`ReadOptions.ranks`) where any were
    #: read; "mean" for inputs that say nothing of it (Extra-P files, a Dataset built by hand)
    across_ranks: str = "mean"
    #: whether `time` is a time per rank, which speedup, efficiency and cost derive from: our runs
    #: alone combined by mean or max (review 103 MED-1: an Extra-P file's `time` may be a sum over
    #: ranks, as `modeler export --ranks sum` writes). True for a Dataset built by hand.
    time_per_rank: bool = True
    #: the parameter that counts the ranks the work is split over: the estimator fits every series
    #: also as values x it (`modeler.strong_scaling`), not only those that fall along it. `ranks`
    #: unless `--ranks-parameter` (`ReadOptions.ranks_parameter`) names another (review 104 M3: an
    #: Extra-P file's `p`, whose rising-to-a-plateau ring allreduce came out as `log2(p)`)
    ranks_parameter: str = RANKS_PARAMETER

    def __post_init__(self) -> None:
        self.parameters = tuple(self.parameters)
        # (review 103 LOW-2: a Dataset built by hand with `p` twice predicted 100 where 2 was
        # measured, the last column winning; a name "" printed `1 * ^(1)`; the readers refuse both)
        nameless = [i for i, p in enumerate(self.parameters) if not isinstance(p, str) or not p.strip()]
        if nameless:
            raise InputError(f"parameter {nameless[0] + 1} of {len(self.parameters)} "
                             f"({self.parameters[nameless[0]]!r}): a parameter needs a name")
        twice = sorted({p for p in self.parameters if self.parameters.count(p) > 1})
        if twice:
            raise InputError(f"parameter {twice[0]!r} given twice: each column of the points needs a name of its own")
        self._check_ranks_parameter()
        for s in self.series:
            self._check(s)

    def _check_ranks_parameter(self) -> None:
        """`ranks_parameter` is one of the parameters, or the default `ranks`, which inputs without a
        rank count lack. Review 109 F7: `ranks_parameter="P"` for a parameter `p`
        fitted without the rank-count forms and said nothing; `--ranks-parameter` is checked, with
        its own words, where the inputs are read (`modeler.ranks_name`)."""
        name = self.ranks_parameter
        if name == RANKS_PARAMETER or name in self.parameters:
            return
        if isinstance(name, str) and name in self.held:
            raise InputError(f"ranks_parameter {name!r}: {name} has one value in the points used: "
                             "it is no parameter of the models")
        raise InputError(f"ranks_parameter {name!r}: no parameter {name!r} in the dataset; it has "
                         f"{', '.join(self.parameters) or 'none'}")

    def _check(self, s: Series) -> None:
        if s.points.shape[1] != len(self.parameters):
            raise InputError(
                f"{s.callpath}/{s.metric}: points have {s.points.shape[1]} coordinates, "
                f"the dataset has {len(self.parameters)} parameters ({', '.join(self.parameters)})"
            )

    def add(self, s: Series) -> None:
        self._check(s)
        self.series.append(s)

    def metrics(self) -> list[str]:
        return sorted({s.metric for s in self.series})

    def select(self, *, metrics: Sequence[str] | None = None, callpaths: Sequence[str] | None = None) -> "Dataset":
        """The series of these metrics and call paths (None: all); one name alone is one name (review
        106 LOW-3: `metrics="exclusive_time"` kept `time` too, a substring of it)."""
        metrics = [metrics] if isinstance(metrics, str) else metrics
        callpaths = [callpaths] if isinstance(callpaths, str) else callpaths
        keep = [
            s
            for s in self.series
            if (metrics is None or s.metric in metrics) and (callpaths is None or s.callpath in callpaths)
        ]
        warnings = notes_for(self.warnings, keep)
        return self.like(keep, warnings)

    def like(self, series: list[Series], warnings: list[str] | None = None) -> "Dataset":
        """A Dataset of `series` (and `warnings`, else a copy of these) that is read as this one is:
        the same parameters, sources, run shares, held values, across-ranks reading and ranks parameter."""
        return Dataset(self.parameters, series, list(self.warnings) if warnings is None else warnings,
                       list(self.sources), self.run_shares, dict(self.held), self.across_ranks, self.time_per_rank,
                       self.ranks_parameter)
