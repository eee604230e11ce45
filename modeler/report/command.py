"""`modeler report RUNS... -o report.html`: one self-contained HTML page (or markdown) of the findings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..dataset import REPETITION_AGGREGATES
from ..errors import InputError
from ..ranks_name import ranks_name_note
from ..replace_file import why_not_written, write_text
from ..commands.fit import (add_min_share_option, add_pass_option, companion_series, min_share_of, new_series,
                            prediction_checks)
from ..commands.inputs import (unknown_metric, add_input_options, add_ranks_parameter_option, load_from_args, name_skipped, output_arg, refuse_output_among_inputs,
                               select_callpaths)
from .assemble import ReportOptions, build_report, check_options, headline_series, parse_assignments


def configure(parser: argparse.ArgumentParser) -> None:
    # read as `modeler fit` reads (run files, Extra-P files, globs, --ranks, --include-incomplete, ...)
    add_input_options(parser, metric_default=None)
    add_ranks_parameter_option(parser)
    parser.add_argument("-o", "--output", metavar="FILE", type=output_arg,
                        help="where to write the report; - for stdout (default: report.html, or stdout for --format markdown)")
    parser.add_argument("--format", choices=("html", "markdown"), default="html", help="html (default) or markdown")
    parser.add_argument("--metric", help="metric to model and rank (default: time, or the inputs' only metric)")
    parser.add_argument("--at", metavar="NAME=VALUE,...",
                        help="target point for predictions, e.g. ranks=1024,batch=256 (default: the largest measured values)")
    parser.add_argument("--hold", metavar="NAME=VALUE,...",
                        help="values of the other parameters in the per-parameter plots (default: the largest measured)")
    parser.add_argument("--run", metavar="RUN_ID", help="run shown in the rank and call-tree views: its id, directory or "
                        "directory name (default: the largest)")
    parser.add_argument("--rank", type=int, metavar="R", help="rank shown in the call tree (default: the lowest with a profile)")
    add_min_share_option(parser)
    parser.add_argument("--top", type=int, default=12, metavar="N",
                        help="regions drawn in detail (all are in the ranking table; default 12)")
    # the same option and default as `modeler fit`, so that the report shows the models the table shows
    parser.add_argument("--repetitions", "--aggregate", dest="repetitions", choices=REPETITION_AGGREGATES,
                        help="how repetitions are combined before fitting (default: robust, the mean of the "
                             "repetitions that are not outliers, as in `modeler fit`)")
    add_pass_option(parser)
    parser.add_argument("--title", default="scaleprobe report", help="page title")


def _choose_metric(asked: str | None, metrics: list[str]) -> str:
    if asked is not None:
        if asked not in metrics:
            raise InputError(unknown_metric([asked], metrics))
        return asked
    if "time" in metrics or not metrics:
        return "time"
    if len(metrics) == 1:
        return metrics[0]
    raise InputError(f"--metric: the inputs have no 'time'; choose one of {', '.join(metrics)}")


def _read_files(loaded) -> list[str]:
    """Every file the report reads: the inputs and, beside each, the launcher's `launch.json`
    (`readers.runjudge`: why a run failed; review 86 LOW-1: `-o runs/<run>/launch.json` replaced it)."""
    import os

    from ..commands.inputs import _UNUSED

    paths = [f.path for f in loaded.files if f.status not in _UNUSED]
    beside = {os.path.join(os.path.dirname(os.fspath(p)), "launch.json") for p in paths}
    return [*paths, *sorted(beside)]


def run(args: argparse.Namespace) -> int:
    from ..cli import EXIT_OK, EXIT_PARTIAL, write_stdout
    from ..estimator import PMNFModeler
    from ..target_point import measured_maximum, parse_at
    from ..readers import skipped_warning
    from .render import render_html, render_markdown
    from .runs import groups_from_runset

    min_share = min_share_of(args)  # checked before the inputs are read
    loaded = load_from_args(args)
    # `-o -` is stdout for either format; without -o, markdown goes to stdout and HTML to report.html
    to_stdout = args.output == "-" or (args.format == "markdown" and args.output is None)
    if not to_stdout:
        refuse_output_among_inputs("-o", args.output or "report.html", _read_files(loaded))
    dataset = loaded.dataset
    metric = _choose_metric(args.metric, dataset.metrics())
    selected = select_callpaths(dataset.select(metrics=[metric]), args.callpath)
    target = parse_at(args.at, selected.parameters, measured_maximum(selected), dataset.held)
    hold = parse_assignments(args.hold, "--hold")
    run_files = [f.path for f in loaded.files if f.format == "runs"]
    # the runs as the reader put them together (reading them again took a third of the report's time)
    groups = groups_from_runset(loaded.batches[0]) if run_files and loaded.batches else []
    ranks = dataset.across_ranks  # `--ranks` where run files were read, else "mean"
    options = ReportOptions(metric=metric, target=target, hold=hold, run_id=args.run, rank=args.rank,
                            top=args.top, title=args.title, ranks=ranks, min_share=min_share,
                            repetitions=args.repetitions)
    # every option is checked before the fit, which is the slow part
    check_options(groups, selected.parameters, options)
    # fitted too, not shown: the exclusive times of the parents, only to check each time model
    # against its parts; the time and cost of the call paths whose speedup, efficiency or cost is
    # shown, to derive those from the per-rank time as `modeler fit` does; under --ranks sum or min,
    # the top-level regions' cost, which the run time is taken from
    # the shares of the run's time (--min-share): the time of the top-level regions, and of the
    # regions shown for another metric
    extra, bases = companion_series(selected, dataset, loaded.dataset.time_per_rank, min_share=min_share)
    if metric == "time":
        extra += new_series(headline_series(dataset, groups, ranks), extra)
    both = selected.like([*selected.series, *extra])
    models = PMNFModeler(aggregate=args.repetitions, pass_range=args.pass_refits, target=target).fit(both).models_
    n = len(selected.series)
    report = build_report(groups, selected, models[:n], options, companions=models[n:], baselines=bases,
                          series_read=dataset.series, run_shares=dataset.run_shares)
    report.warnings.extend(prediction_checks(selected, models[:n], target, dataset, args.repetitions, None))
    if note := ranks_name_note(selected):
        report.warnings.append(note)
    text = render_markdown(report, top=max(args.top, 20)) if args.format == "markdown" else render_html(report)
    out = None
    if to_stdout:
        # a reader that went away (`| head`) ends the output, not the command: the files skipped
        # and the exit code 3 still follow (review 45: this branch returned 0 before naming them)
        write_stdout(text)
    else:
        out = Path(args.output or "report.html")
        try:
            write_text(out, text)  # whole or not at all: a failed write keeps the old report
        except OSError as e:
            raise InputError(f"-o: cannot write {out}: {why_not_written(e)}") from e
    if args.quiet:
        name_skipped(loaded, args, "modeler report")
    else:
        for f in loaded.skipped:
            print(f"modeler report: {skipped_warning(f)}", file=sys.stderr)
        if out is not None:
            print(f"report written to {out.resolve()}", file=sys.stderr)
    return EXIT_PARTIAL if loaded.skipped else EXIT_OK
