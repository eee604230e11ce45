"""Write measurements as Extra-P JSON Lines: `modeler export --extrap OUT.jsonl INPUT...`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..cli import write_stdout
from ..export import write_extrap_jsonl
from ..readers import DIRECTORY_SUFFIXES
from .inputs import (add_input_options, describe_files, load_from_args, name_skipped, path_arg,
                     refuse_output_among_inputs, select, warn)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extrap", metavar="OUT.jsonl", required=True, type=path_arg("--extrap"),
                        help="write Extra-P JSON Lines here ('-' for stdout)")
    add_input_options(parser, metric_default="all")


class _Stdout:
    """stdout for `--extrap -`, through `write_stdout`: a reader that went away (`| head`) ends the
    output, not the command, whose warnings, skipped files and exit code follow on stderr; `cut_off`
    then says so, for the summary not to claim lines the reader never got."""

    name = "<stdout>"

    def __init__(self) -> None:
        self.cut_off = False

    def write(self, text: str) -> int:
        if not write_stdout(text):
            self.cut_off = True
        return len(text)


#: how the Extra-P readers end the warning of a series with no value at some points, as `fit` uses it
_MODELED_ON_WHAT_IT_HAS = "; modeled on the points it has"


def _for_export(warning: str) -> str | None:
    """A reader's warning as it holds for an export, which leaves such a series out (review 78 LOW-6:
    it said "modeled on the points it has", then "1 series left out of the export"); None where the
    export's own notes say it (review 98 LOW-1: the runs reader's words, `aggregate.partial_points_note`)."""
    if hasattr(warning, "export_text"):  # (aggregate.some_ranks_note, partial_points_note)
        return warning.export_text
    if warning.endswith(_MODELED_ON_WHAT_IT_HAS):
        return warning[: -len(_MODELED_ON_WHAT_IT_HAS)] + "; left out of the export (Extra-P refuses gaps)"
    return warning


def _read_again(args: argparse.Namespace, loaded) -> list[str]:
    """A warning where the export lies in an input folder of Extra-P inputs alone: a later read of
    that folder takes it with the files it was made from, every measurement twice (beside run
    files it is not read: `readers.BESIDE_RUNS`)."""
    out = Path(args.extrap)
    if args.extrap == "-" or out.suffix not in DIRECTORY_SUFFIXES or out.name.startswith("."):
        return []
    if any(f.format == "runs" for f in loaded.files):
        return []
    real = os.path.realpath(out)
    for given in args.paths:
        if given and os.path.isdir(given) and real.startswith(os.path.join(os.path.realpath(given), "")):
            return [f"--extrap {args.extrap} lies in the input folder {given}: a later read of {given} takes it "
                    f"with the Extra-P inputs it was made from, counting every measurement twice; write it elsewhere, "
                    f"or name the files to read"]
    return []


def run(args: argparse.Namespace) -> int:
    from ..cli import EXIT_OK, EXIT_PARTIAL

    if args.metric is None:
        args.metric = "all"  # an export hands over everything measured unless told otherwise
    loaded = load_from_args(args)
    refuse_output_among_inputs("--extrap", args.extrap, loaded)
    data = select(loaded.dataset, args)
    stdout = _Stdout() if args.extrap == "-" else None
    summary = write_extrap_jsonl(data, args.extrap if stdout is None else stdout)
    summary.cut_off = stdout is not None and stdout.cut_off
    said = [t for t in map(_for_export, data.warnings) if t is not None]
    warn([*said, *summary.notes(), *_read_again(args, loaded)], args)
    name_skipped(loaded, args)
    if not args.quiet:
        print(f"modeler: {describe_files(loaded)}; {summary.describe()}", file=sys.stderr)
    return EXIT_PARTIAL if loaded.skipped else EXIT_OK
