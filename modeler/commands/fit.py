"""Fit performance models to runs (or Extra-P inputs) and rank the regions by how badly they scale.

`fit_dataset` is the whole pipeline after reading, for use from Python; `run` is `modeler fit`.
"""

from __future__ import annotations

import argparse
import numbers
import os
import re
import shutil
import sys
from typing import Any, Mapping, Sequence

from ..dataset import REPETITION_AGGREGATES, Dataset, Series, check_magnitudes
from ..backtest import backtest_warning
from ..ranks_name import ranks_name_note
from ..contention import wide_runs_warning
from ..derived import Baselines, baselines, basis_series_needed, some_ranks_series
from ..errors import InputError
from ..grid import grid_gaps_warning, moving_together_warning, scattered_warning, unchecked_products_warning
from ..zeros import zero_at_fewest_ranks_warning
from ..listing import listing
from ..outputs import FORMATS, render
from ..loop_parts import loop_parts_series
from ..parts import combination, parts_series
from ..reach import far_target_warning
from ..ranking import Ranking, nonnegative_keys, rank_models
from ..target_point import measured_maximum, parse_assignments, parse_at
from ..share import DEFAULT_MIN_SHARE, parse_min_share, percent, share_series
from .inputs import (add_input_options, add_ranks_parameter_option, describe_files, load_from_args, name_skipped, output_arg,
                     refuse_output_among_inputs, select, warn, write_output)

DEFAULT_MIN_POINTS = 3


#: the warning of a run the reader left out (`readers.runs`: "run <id> left out (<status>): ...")
_RUN_LEFT_OUT = re.compile(r"run \S+ left out \(")


def configure(parser: argparse.ArgumentParser) -> None:
    add_input_options(parser)
    add_ranks_parameter_option(parser)
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: from -o's suffix, .json, .md, .csv; else table)")
    parser.add_argument("--at", metavar="NAME=VALUE,...",
                        help="target point for predictions and the ranking, e.g. ranks=1024,batch=256 "
                             "(parameters not named: their largest measured value)")
    parser.add_argument("--repetitions", choices=REPETITION_AGGREGATES,
                        help="how repetitions are combined before fitting (default: robust, the mean of the "
                             "repetitions that are not outliers, see docs/modeling.md; mean with --compat "
                             "extrap, as Extra-P)")
    parser.add_argument("--compat", choices=("extrap",), help="reproduce Extra-P 4.2.5's default modeler")
    parser.add_argument("--min-points", type=int, default=DEFAULT_MIN_POINTS, metavar="N",
                        help=f"leave out (with a warning) series measured at fewer than N points (default: {DEFAULT_MIN_POINTS})")
    add_min_share_option(parser)
    add_pass_option(parser)
    parser.add_argument("--top", type=int, metavar="N", help="show only the N worst-scaling models")
    parser.add_argument("--width", type=int, metavar="COLUMNS",
                        help="fit the table within this many terminal columns, leaving out the columns of least "
                             "use first (default: the terminal's width where stdout is one; 0: every column)")
    parser.add_argument("-o", "--output", metavar="FILE", type=output_arg, help="write the output here instead of to stdout")


def add_min_share_option(parser: argparse.ArgumentParser) -> None:
    """`--min-share`, as `modeler fit` and `modeler report` take it."""
    parser.add_argument("--min-share", metavar="FRACTION",
                        help="leave out of the ranking the call paths under this share of the run's time at every "
                             "measured point and at the target (--at), e.g. 0.05 or 5%%; their count is said; "
                             f"0 shows all (default: {DEFAULT_MIN_SHARE:g}, i.e. "
                             f"{percent(DEFAULT_MIN_SHARE).replace('%', '%%')}; 0 under --callpath)")


def add_pass_option(parser: argparse.ArgumentParser) -> None:
    """`--no-pass-refits`, as `modeler fit` and `modeler report` take it."""
    parser.add_argument("--no-pass-refits", dest="pass_refits", action="store_false",
                        help="do not fit again with each repetition pass left out (faster; the 80%% ranges then "
                             "take the runs' spread for independent noise, see docs/modeler.md)")


def min_share_of(args: argparse.Namespace) -> float:
    """`--min-share` as given; not given: the default, or 0 with `--callpath` (a call path the user
    named is never hidden by a filter they did not ask for)."""
    if args.min_share is None and getattr(args, "callpath", None):
        return 0.0
    return parse_min_share(args.min_share)


def enough_points(dataset: Dataset, min_points: int) -> tuple[Dataset, list[str]]:
    """The series with at least `min_points` points, and a warning naming those left out."""
    if min_points < 1:
        raise InputError(f"--min-points: must be at least 1, got {min_points}")
    keep = [s for s in dataset.series if s.n_points >= min_points]
    dropped = [f"{s.callpath} [{s.metric}] ({s.n_points})" for s in dataset.series if s.n_points < min_points]
    warnings = []
    if dropped:
        shown = listing(dropped, 5)
        warnings.append(f"{len(dropped)} series left out: measured at fewer than {min_points} points (--min-points): {shown}")
    return dataset.like(keep), warnings


def fit_dataset(
    dataset: Dataset,
    *,
    at: str | Mapping[str, float] | None = None,
    compat: str | None = None,
    repetitions: str | None = None,
    min_points: int = DEFAULT_MIN_POINTS,
    measured: Dataset | None = None,
    per_rank_time: bool | None = None,
    min_share: float | str | None = DEFAULT_MIN_SHARE,
    combine: str | None = None,
    pass_refits: bool = True,
    metrics: Sequence[str] | None = None,
) -> Ranking:
    """Fit every series of `dataset` and rank the models; warnings of every stage are in the Ranking.

    `metrics`: fit and rank only these, as `modeler fit --metric` does: `dataset` is then what was
    read and `measured` defaults to it, so the per-rank figures, the parts checks and the ranking of
    call paths that only some ranks run (from the runs' `cost`) are those of the command (review 92
    MED-1: a `Dataset` of the `time` series built by hand lost them, and a rank-0 checkpoint came
    back "falling").

    `measured`: everything that was read, when `dataset` is a selection of it. The `exclusive_time`
    series that the selection left out are then fitted too, not shown, only so that every call
    path's time can be checked against its parts (`modeler.parts`), and so are the `time` and `cost`
    series of the call paths whose speedup, efficiency or cost is selected: those get their figure
    from a model of the per-rank time as well (`modeler.derived`), where `time` is a time per rank
    (`per_rank_time`: False for `--ranks sum` or `min`, or for Extra-P inputs, whose `time` may be
    a sum over ranks; never with `compat`). Left out (None), it and `combine` (how a whole relates to
    its parts' sum, `parts.combination`) are taken from how the inputs were read
    (`Dataset.time_per_rank`, `Dataset.across_ranks`), as the commands take them.

    `min_share` (a fraction, `"1%"`, or None for the default): the models of call paths under that
    share of the run's time at every measured point and at the target are in `Ranking.left_out`,
    not in its rows (`modeler.share`); 0 keeps every one. The `time` series of the top-level call
    paths, and of the call paths selected for other metrics, are fitted for it (not shown).

    `pass_refits`: fit again with each repetition pass left out, and widen the ranges to hold those
    predictions (`modeler.passes`)."""
    at = _checked_arguments(dataset, at, repetitions, min_points, per_rank_time, combine, pass_refits)
    source = measured if measured is not None else dataset
    if per_rank_time is None:
        per_rank_time = source.time_per_rank
    if combine is None:
        combine = combination(source.across_ranks, repetitions)
    min_share = parse_min_share(min_share)
    if isinstance(metrics, str):  # one metric named alone (review 93 LOW-2: read as its letters)
        metrics = [metrics]
    if metrics is not None:
        unknown = [m for m in metrics if m not in dataset.metrics()]
        if unknown or not metrics:
            raise InputError(f"metrics: no metric {', '.join(map(repr, unknown))} in the inputs; they have "
                             f"{', '.join(dataset.metrics())}" if unknown else "metrics: empty")
        measured = measured if measured is not None else dataset
        dataset = dataset.select(metrics=list(metrics))
    if not dataset.parameters:
        left = sum(1 for w in dataset.warnings if _RUN_LEFT_OUT.match(w))
        why = (f"what is left after the {left} run(s) left out above was measured at one point" if left
               else "sweep at least one parameter")  # (review 36: a sweep of two, interrupted, was told to sweep)
        raise InputError(f"no parameter varies over the measurements: nothing to model ({why})",
                         warnings=dataset.warnings)
    check_magnitudes(dataset)
    data, warnings = enough_points(dataset, min_points)
    if not data.series:
        raise InputError(f"no series has {min_points} or more points (--min-points)", warnings=[*data.warnings, *warnings])
    target = parse_at(at, data.parameters, measured_maximum(data), dataset.held)
    points, ranks = [s.points for s in data.series], data.ranks_parameter
    for said in (grid_gaps_warning(data.parameters, points),
                 moving_together_warning(data.parameters, points, compat, ranks),
                 None if compat else scattered_warning(data.parameters, points, ranks),
                 zero_at_fewest_ranks_warning(data.parameters, data.series, ranks),
                 None if compat else ranks_name_note(data)):
        if said:
            warnings.append(said)
    derive = per_rank_time and compat is None  # --compat extrap: Extra-P's output, nothing more
    extra, bases = companion_series(data, measured, derive, min_points, min_share)

    from ..estimator import PMNFModeler  # the engine is heavy; `modeler export` never needs it

    both = data.like([*data.series, *extra])
    fitted = PMNFModeler(compat=compat, aggregate=repetitions, pass_range=pass_refits, target=target).fit(both).models_
    shown, companions = fitted[: len(data.series)], fitted[len(data.series):]
    warnings += prediction_checks(data, shown, target, measured, repetitions, compat)
    units = {(s.callpath, s.metric): s.unit for s in data.series}
    return rank_models(shown, data.parameters, target, warnings=[*data.warnings, *warnings], model_notes=True, units=units,
                       companions=companions, nonnegative=nonnegative_keys(data.series), baselines=bases,
                       measured=_all_series(data, measured), min_share=min_share,
                       run_shares=(measured if measured is not None else data).run_shares, combine=combine,
                       repetitions=repetitions,
                       held=dataset.held)


_COMBINATIONS = ("mean", "max", "min", "none")


def _checked_arguments(dataset: Any, at: Any, repetitions: Any, min_points: Any, per_rank_time: Any, combine: Any,
                       pass_refits: Any) -> str | None:
    """`fit_dataset`'s arguments checked, named as it names them (review 103 LOW-5: some raised
    AttributeError or TypeError, some were taken silently, some were named as the estimator's
    options); `at` as text (a mapping of names to values is taken, as `PMNFModeler.predict` takes it)."""
    if not isinstance(dataset, Dataset):
        raise InputError(f"fit_dataset expects a modeler.dataset.Dataset, got {type(dataset).__name__}")
    if repetitions is not None and (not isinstance(repetitions, str) or repetitions not in REPETITION_AGGREGATES):
        raise InputError(f"repetitions must be None or one of {', '.join(REPETITION_AGGREGATES)}, got {repetitions!r}")
    if not isinstance(min_points, numbers.Integral) or isinstance(min_points, bool):
        raise InputError(f"min_points must be a whole number, got {min_points!r}")
    if combine is not None and (not isinstance(combine, str) or combine not in _COMBINATIONS):
        raise InputError(f"combine must be None or one of {', '.join(_COMBINATIONS)}, got {combine!r}")
    for name, value in (("per_rank_time", per_rank_time), ("pass_refits", pass_refits)):
        if not isinstance(value, bool) and not (name == "per_rank_time" and value is None):
            raise InputError(f"{name} must be True or False, got {value!r}")
    if isinstance(at, Mapping):
        bad = [k for k, v in at.items() if isinstance(v, bool) or not isinstance(v, numbers.Real)]
        if bad:
            raise InputError(f"at: the value of {bad[0]!r} is not a number: {at[bad[0]]!r}")
        return ",".join(f"{k}={float(v)!r}" for k, v in at.items())
    if at is not None and not isinstance(at, str):
        raise InputError(f"at must be text such as 'ranks=1024' or a mapping of names to values, got {at!r}")
    return at


def prediction_checks(data: Dataset, models: Sequence, target: Mapping[str, float], measured: Dataset | None,
                      repetitions: str | None, compat: str | None) -> list[str]:
    """The warnings on how far the predictions at `target` can be trusted, in `fit` and `report`
    alike: a target far beyond a narrow range (`reach`), repetitions that disagree widely
    (`contention`, over everything read), the sweep's largest values missed when held out
    (`backtest`), and products that a cross of points cannot check (`grid`). `models`: those of
    `data`'s series, in order."""
    points = [s.points for s in data.series]
    said = (far_target_warning(data.parameters, points, target),
            wide_runs_warning(measured.series if measured is not None else data.series, repetitions, compat),
            backtest_warning(data.parameters, data.series, compat=compat, aggregate=repetitions,
                             ranks_parameter=data.ranks_parameter),
            unchecked_products_warning(data.parameters, models, points))
    return [w for w in said if w]


def _all_series(data: Dataset, measured: Dataset | None) -> list[Series]:
    """Everything read (the run's time is taken from it), else `data`."""
    if measured is not None and tuple(measured.parameters) == tuple(data.parameters):
        return list(measured.series)
    return list(data.series)


def companion_series(data: Dataset, measured: Dataset | None, derive: bool,
                     min_points: int = 3, min_share: float = 0.0) -> tuple[list[Series], Baselines | None]:
    """The series fitted beside `data` but not shown, and the baselines of the figures from the
    per-rank time: the parents' exclusive times (each time model is checked against its parts),
    when `derive`, the time and cost series that speedup, efficiency and cost derive from (and the
    cost series of the call paths run by some ranks only, which rank their time), and with
    `min_share`, the time series that the shares at the target need (`modeler.share`)."""
    extra = parts_series(data, measured, min_points)
    extra += new_series(loop_parts_series(data, measured, min_points), extra)
    times = basis_series_needed(data, measured, min_points) if derive else []
    extra += new_series(times, extra)
    if derive:  # the time of the ranks that ran a call path only some ranks ran (its cost / ranks)
        extra += new_series(some_ranks_series(data, measured, min_points), extra)
    if min_share > 0:
        extra += new_series(share_series(data.series, _all_series(data, measured), min_points), extra)
    return extra, baselines([*data.series, *times], data.parameters) if derive else None


def new_series(series: Sequence[Series], have: Sequence[Series]) -> list[Series]:
    """`series` less those whose (call path, metric) `have` has already."""
    keys = {(s.callpath, s.metric) for s in have}
    return [s for s in series if (s.callpath, s.metric) not in keys]


def run(args: argparse.Namespace) -> int:
    from ..cli import EXIT_OK, EXIT_PARTIAL

    if args.top is not None and args.top < 1:
        raise InputError(f"--top: must be at least 1, got {args.top}")
    if args.width is not None and args.width < 0:
        raise InputError(f"--width: must be 0 (every column) or more, got {args.width}")
    min_share = min_share_of(args)  # checked before the inputs are read
    parse_assignments(args.at, "--at")  # its form too (an empty --at); the names once the parameters are known
    loaded = load_from_args(args)
    refuse_output_among_inputs("-o", args.output, loaded)  # before the fit, the slow part
    data = select(loaded.dataset, args)
    ranking = fit_dataset(data, at=args.at, compat=args.compat, repetitions=args.repetitions, min_points=args.min_points,
                          measured=loaded.dataset, min_share=min_share, pass_refits=args.pass_refits)
    ranked = len(ranking.rows)
    if args.top is not None:
        ranking = ranking.top(args.top)
    write_output(render(ranking, output_format(args.format, args.output), table_width(args)), args.output)
    warn(ranking.warnings, args)
    name_skipped(loaded, args)
    if not args.quiet:
        left, own = ranking.left_out_callpaths(), ranking.own_time_left_out()
        note = (f", {len(left)} call path(s) under {percent(ranking.min_share)} of the run's time left out "
                f"(--min-share)" if left else "")
        if own:
            note += f", the exclusive time of {len(own)} more (--min-share)"
        shown = f"{len(ranking.rows)} model(s)" if len(ranking.rows) == ranked else \
            f"{len(ranking.rows)} of {ranked} model(s) (--top {args.top})"  # review 121 LOW-2: the cut was not counted
        print(f"modeler: {describe_files(loaded)}; {shown}{note}{other_metrics_note(args, loaded.dataset, data)}",
              file=sys.stderr)
    return EXIT_PARTIAL if loaded.skipped else EXIT_OK


def table_width(args: argparse.Namespace) -> int | None:
    """--width (0: no limit), else the terminal's columns where the table goes to one (COLUMNS
    where set), else no limit: a table piped or written with -o keeps every column."""
    if args.width is not None:
        return args.width or None
    if args.output not in (None, "-") or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


_SUFFIX_FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".csv": "csv"}


def output_format(given: str | None, output: str | None) -> str:
    """--format, else the format -o's suffix names (review 121 LOW-8: `-o models.json` wrote the
    text table), else the table."""
    if given is not None:
        return given
    suffix = os.path.splitext(output or "")[1].lower()
    return _SUFFIX_FORMATS.get(suffix, "table")


def other_metrics_note(args: argparse.Namespace, measured: Dataset, data: Dataset) -> str:
    """`; metric time (also measured: Time, bytes: --metric)` where no --metric was given and the
    inputs hold metrics that were not modeled (review 121 MED-2: an Extra-P file's series under
    `Time` beside `time` were neither shown nor mentioned)."""
    if args.metric is not None:
        return ""
    modeled = set(data.metrics())
    others = [m for m in measured.metrics() if m not in modeled]
    if not others:
        return ""
    return (f"; metric {', '.join(sorted(modeled))} (also measured: {listing(others, 4)}: --metric NAME, or "
            "--metric all)")


def main(argv: Sequence[str] | None = None) -> int:
    """`modeler fit ...` without the command name."""
    from ..cli import main as cli_main

    return cli_main(["fit", *(argv or [])])
