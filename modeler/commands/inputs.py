"""Input options shared by the commands that read measurements, and the selection of series."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from fnmatch import fnmatchcase
from typing import Sequence

from ..aggregate import RANK_AGGREGATES
from ..cli import write_stdout
from ..dataset import Dataset, notes_for
from ..derived import DERIVED
from ..errors import InputError
from ..listing import listing
from ..pointfilter import parse_point_filter
from ..readers import BESIDE_RUNS, FORMATS, LAUNCHER_FILE, Loaded, ReadOptions, read_inputs, skipped_warning
from ..readers.runs import ODD
from ..replace_file import why_not_written, write_text


def add_input_options(
    parser: argparse.ArgumentParser, *, metric_default: str | None = "time when measured, else all"
) -> None:
    """The options every command that reads measurements takes; `metric_default` None: the command
    defines its own `--metric`."""
    parser.add_argument("paths", nargs="+", metavar="INPUT",
                        help="run directories, run files, Extra-P JSON Lines or text files, or globs")
    if metric_default is not None:
        parser.add_argument("--metric", metavar="NAMES",
                            help=f"comma-separated metrics to use, or 'all' (default: {metric_default})")
    parser.add_argument("--callpath", metavar="PATTERN", action="append",
                        help="only call paths matching this fnmatch pattern (repeatable), e.g. '*->train*'")
    parser.add_argument("--ranks", choices=RANK_AGGREGATES, default=None,
                        help="how the ranks of a run are combined (default: mean); imbalance = max/mean is its own metric")
    parser.add_argument("--experiment", metavar="NAME", action="append",
                        help="only runs of this experiment (the launcher's --experiment; repeatable)")
    parser.add_argument("--where", metavar="COND", action="append",
                        help="only the points (runs) where this holds, e.g. 'batch>=32', width=8,16, model=cnn "
                             "(NAME OP VALUE, OP one of = == != < <= > >=; quote < and >; repeatable: all must hold)")
    parser.add_argument("--exclude", metavar="COND", action="append",
                        help="leave out the points (runs) where this holds, e.g. ranks=1 or batch=48 (as --where; "
                             "repeatable)")
    parser.add_argument("--include-incomplete", action="store_true",
                        help="also use incomplete runs: a rank file without an end record (killed or still running), "
                        "an empty or header-cut rank file, flushes lost to a full disk, or ranks stopped by a signal "
                        "(Ctrl-C, SIGTERM) that none of them failed before")
    parser.add_argument("--input-format", choices=FORMATS, help="read every input in this format instead of detecting it")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not print warnings (files that could not be read are still named)")


def add_ranks_parameter_option(parser: argparse.ArgumentParser) -> None:
    """`--ranks-parameter NAME`, for the commands that fit models (`modeler.ranks_name`)."""
    parser.add_argument("--ranks-parameter", metavar="NAME",
                        help="the parameter that counts the ranks (processes) the work is split over, whose "
                             "strong-scaling form c + W/NAME is fitted for every series (default: ranks; "
                             "Extra-P files often call it p)")


def read_options(args: argparse.Namespace) -> ReadOptions:
    """How run files are read, from the input options."""
    return ReadOptions(ranks=args.ranks, include_incomplete=args.include_incomplete,
                       experiments=tuple(args.experiment or ()), ranks_parameter=getattr(args, "ranks_parameter", None),
                       points=parse_point_filter(getattr(args, "where", None), getattr(args, "exclude", None)))


def load_from_args(args: argparse.Namespace) -> Loaded:
    """What `args.paths` hold; `--ranks` and `--include-incomplete` given where no run file was
    read are said to do nothing (review 78 LOW-6: accepted without a word, where `--experiment`
    is an error)."""
    given_ranks = getattr(args, "ranks", None)
    if given_ranks is None:
        args.ranks = "mean"  # (the default: None only tells whether the option was given)
    loaded = read_inputs(args.paths, read_options(args), format=args.input_format)
    if not any(f.format == "runs" for f in loaded.files if f.status != "ignored"):
        given = [o for o, on in (("--ranks " + str(given_ranks), given_ranks is not None),
                                 ("--include-incomplete", getattr(args, "include_incomplete", False))) if on]
        if given:
            loaded.dataset.warnings.append(
                f"{' and '.join(given)}: the inputs hold no run files, only Extra-P inputs, whose values are "
                f"already combined over the ranks and runs: {'they do' if len(given) > 1 else 'it does'} nothing here")
    return loaded


def describe_files(loaded: Loaded) -> str:
    """`read 24 of 27 input files (2 left out: their runs failed or did not finish; 1 skipped:
    unreadable)`; also files of runs left out for their parameters (`runs.ODD`), files ignored (not measurements) and duplicates (copies of files read)."""
    counts = Counter(f.status for f in loaded.files)
    extra = []
    odd = sum(1 for f in loaded.files if f.status == "left out" and f.run_status == ODD)
    if counts["left out"] - odd:
        extra.append(f"{counts['left out'] - odd} left out: their runs failed or did not finish")
    if odd:
        extra.append(f"{odd} left out: their runs' parameters are not those of the others")
    if counts["skipped"]:
        extra.append(f"{counts['skipped']} skipped: unreadable or empty")
    beside = sum(1 for f in loaded.files if f.status == "ignored" and f.reason == BESIDE_RUNS)
    # the launcher's own files beside the run files (`rank<R>.output.txt`, `rank<R>.error.txt`) are
    # neither inputs nor measurements: not counted (review 128 LOW-8's copies made every file "ignored")
    launcher = sum(1 for f in loaded.files if f.status == "ignored" and f.reason == LAUNCHER_FILE)
    if counts["ignored"] - beside - launcher:
        extra.append(f"{counts['ignored'] - beside - launcher} ignored: not measurements")
    if beside:
        extra.append(f"{beside} ignored: Extra-P inputs beside run files")
    by_experiment = sum(1 for f in loaded.files if f.status == "deselected" and f.reason.endswith("(--experiment)"))
    if by_experiment:
        extra.append(f"{by_experiment} not selected: other experiments (--experiment)")
    if counts["deselected"] - by_experiment:
        extra.append(f"{counts['deselected'] - by_experiment} not selected: other points (--where, --exclude)")
    if counts["duplicate"]:
        extra.append(f"{counts['duplicate']} duplicate: copies of files read")
    total = sum(counts.values()) - launcher
    return f"read {counts['read']} of {total} input files" + (f" ({'; '.join(extra)})" if extra else "")


def parse_metrics(text: str | None, available: Sequence[str]) -> list[str] | None:
    """None for all metrics; a list of names checked against what was measured."""
    if text is None:
        return ["time"] if "time" in available else None
    if text.strip() == "all":
        return None
    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:  # review 40: "'' not measured"
        raise InputError(f"--metric {text!r}: no metric named; available: {', '.join(available) or 'none'}")
    unknown = [m for m in names if m not in available]
    if unknown or not names:
        raise InputError(unknown_metric(unknown or [repr(text)], available))
    return names


def unknown_metric(unknown: Sequence[str], available: Sequence[str]) -> str:
    """`--metric: tim not measured; available: time`, as `fit` and `report` say it (review 121
    LOW-8: worded two ways); a derived metric asked for where there are no ranks says where it comes from."""
    text = f"--metric: {', '.join(unknown)} not measured; available: {', '.join(available) or 'none'}"
    derived = [m for m in unknown if m in DERIVED]
    if derived:
        text += (f" ({', '.join(derived)}: derived from the time where the rank count is a parameter, named 'ranks' "
                 "or given with --ranks-parameter)")
    return text


def select(dataset: Dataset, args: argparse.Namespace) -> Dataset:
    metrics = parse_metrics(args.metric, dataset.metrics())
    if not dataset.series:  # (review 58 F13: runs whose files hold their header alone)
        raise InputError("the files read hold no measurements (run files with their header alone: ranks that ended, "
                         "or were killed, before their first write)", warnings=dataset.warnings)
    chosen = select_callpaths(dataset.select(metrics=metrics), args.callpath, dataset)
    if not chosen.series:
        raise InputError("no series to use after selecting metrics and call paths")
    return chosen


def select_callpaths(dataset: Dataset, patterns: Sequence[str] | None, measured: Dataset | None = None) -> Dataset:
    """The series whose call path matches one of the fnmatch `patterns` (all when there are none).

    `measured`: every series read, when `dataset` holds only the chosen metrics: if the patterns
    match call paths there, the error says that the metrics are what is missing, and where they were
    measured."""
    if not patterns:
        return dataset
    if any(not p for p in patterns):  # review 40: "no call path matches " and a blank
        raise InputError("--callpath '': an empty pattern (use '*' for every call path)")

    def matches(s) -> bool:
        return any(fnmatchcase(s.callpath, pat) for pat in patterns)

    keep = [s for s in dataset.series if matches(s)]
    if not keep:
        pats = ", ".join(patterns)
        found = measured is not None and any(matches(s) for s in measured.series)
        if not found:
            raise InputError(f"--callpath: no call path matches {pats}")
        metrics = sorted({s.metric for s in dataset.series})
        where = listing(sorted({s.callpath for s in dataset.series}), 3)
        raise InputError(
            f"--callpath: the call paths matching {pats} have no {' or '.join(metrics)} (--metric); "
            f"{' and '.join(metrics)} {'is' if len(metrics) == 1 else 'are'} measured at: {where}"
        )
    return dataset.like(keep, notes_for(dataset.warnings, keep))


def warn(messages: Sequence[str], args: argparse.Namespace) -> None:
    if getattr(args, "quiet", False):
        return
    for m in messages:
        print(f"modeler: warning: {m}", file=sys.stderr)


def name_skipped(loaded: Loaded, args: argparse.Namespace, prog: str = "modeler") -> None:
    """Under -q, still name the files that could not be read: they make the exit code 3, and a
    bare 3 would not say which. (Without -q they are among the warnings already.)"""
    if getattr(args, "quiet", False):
        for f in loaded.skipped:
            print(f"{prog}: {skipped_warning(f)}", file=sys.stderr)


def path_arg(option: str):
    """An argparse type for an output path, `option` (`-o/--output`, `--extrap`): never the empty
    string (review 40: `-o "$OUT"` with OUT unset wrote to stdout or failed with "No such file or
    directory", by command). An `InputError`, not argparse's error: it exits 1, as an empty INPUT
    does (review 78 LOW-6: it exited 2)."""

    def output(text: str) -> str:
        if not text:
            raise InputError(f"argument {option}: an empty path (an unset shell variable?)")
        return text

    return output


output_arg = path_arg("-o/--output")


#: input files whose content a command never used: a file found in a directory that is not
#: measurements, or an Extra-P export beside run files (`export --extrap runs/x.jsonl runs/` again)
_UNUSED = ("ignored",)


def refuse_output_among_inputs(option: str, output: str | os.PathLike[str] | None,
                               inputs: Loaded | Sequence[str | os.PathLike[str]]) -> None:
    """An `InputError` naming `option` and the file when the output path is one of the input files
    (the same path, resolved, or the same file under another name: a hard link, a symbolic link),
    checked before anything is written (review 78 MED-1: `fit s.jsonl -o s.jsonl` replaced the
    measurements with the ranking, `export --extrap s.jsonl s.jsonl --metric time` dropped the other
    metrics, and both exited 0). `inputs`: what a command read (every file it looked at but those it
    ignored), or the paths of the files. `-` (stdout) and a path that does not exist never clash."""
    if output in (None, "-"):
        return
    out = os.fspath(output)
    try:
        st = os.stat(out)
    except OSError:
        return  # a new file: no input can be it
    paths = ([f.path for f in inputs.files if f.status not in _UNUSED] if isinstance(inputs, Loaded)
             else [os.fspath(p) for p in inputs])
    real = os.path.realpath(out)
    for path in paths:
        try:
            other = os.stat(path)
        except OSError:
            continue
        if os.path.realpath(path) == real or (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            same = "" if os.path.realpath(path) == real else f" ({path}, under another name)"
            raise InputError(f"{option} {out}: this file is one of the inputs{same}; writing the output there "
                             f"would replace the measurements: name another file")


def write_output(text: str, output: str | None) -> None:
    if output in (None, "-"):
        # a reader that went away (`| head`) ends the output, not the command: its warnings, the
        # files it skipped and its exit code follow on stderr
        write_stdout(text)
        return
    try:
        write_text(output, text)  # folders made as `modeler report -o` does; whole or not at all
    except OSError as exc:
        raise InputError(f"-o {output}: cannot write: {why_not_written(exc)}") from exc

