"""Write measurements as Extra-P JSON Lines: `modeler export --extrap OUT.jsonl INPUT...`."""

from __future__ import annotations

import argparse
import sys

from ..cli import write_stdout
from ..export import write_extrap_jsonl
from .inputs import add_input_options, describe_files, load_from_args, name_skipped, output_arg, select, warn


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extrap", metavar="OUT.jsonl", required=True, type=output_arg,
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


def run(args: argparse.Namespace) -> int:
    from ..cli import EXIT_OK, EXIT_PARTIAL

    if args.metric is None:
        args.metric = "all"  # an export hands over everything measured unless told otherwise
    loaded = load_from_args(args)
    data = select(loaded.dataset, args)
    stdout = _Stdout() if args.extrap == "-" else None
    summary = write_extrap_jsonl(data, args.extrap if stdout is None else stdout)
    summary.cut_off = stdout is not None and stdout.cut_off
    warn([*data.warnings, *summary.notes()], args)
    name_skipped(loaded, args)
    if not args.quiet:
        print(f"modeler: {describe_files(loaded)}; {summary.describe()}", file=sys.stderr)
    return EXIT_PARTIAL if loaded.skipped else EXIT_OK
