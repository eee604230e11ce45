"""Checks of a whole sweep before any of its runs starts: swept values the modeler cannot fit over
(a warning), and launch records a resume could not read (an error naming every one)."""

from __future__ import annotations

import re

from runtime.launch_args import Options
from runtime.launch_errors import LaunchError
from runtime.sweep_design import Run, legacy_directories
from runtime.sweep_state import RECORD, read_record


def non_numeric_warnings(opts: Options) -> list[str]:
    """A swept parameter with a value that is not a number (`1K`, `0x10`, `"a"`): the runs are made
    (a program may take strings), but `modeler fit` refuses a parameter that varies over values
    that are not all numbers, so the sweep could not be modeled over it. Said before any run."""
    warnings = []
    for name, values in opts.design.sweep.items():
        if len(values) < 2:
            warnings.extend(_one_value_warning(opts, name, values))
            continue
        texts = opts.design.spelled.get(name, {})
        bad = [texts.get(v, str(v)) for v in values if isinstance(v, str)]
        if not bad:
            continue
        shown = ", ".join(repr(t) for t in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        where = opts.sweep_origin.get(name, "--sweep")
        warnings.append(f"scaleprobe launch: warning: {where}: {'values' if len(bad) > 1 else 'value'} {shown} of "
                        f"{name!r} {'are not numbers' if len(bad) > 1 else 'is not a number'}, so modeler fit cannot fit a "
                        f"model over {name!r} (it models a parameter only over numbers, written as decimals such as 1024, "
                        "0.5 or 1e3); the runs are made anyway")
    return warnings


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _one_value_warning(opts: Options, name: str, values: list) -> list[str]:
    """A single value that is numbers joined by another separator than `,` (`batch=32;64`, `32 64`):
    a sweep that makes one run where several were meant (review 36)."""
    if len(values) != 1 or not isinstance(values[0], str):
        return []
    text = opts.design.spelled.get(name, {}).get(values[0], str(values[0]))
    for sep in (";", "|", ":", " ", "/"):
        parts = [p for p in text.split(sep) if p]
        if len(parts) > 1 and all(_NUMBER.fullmatch(p.strip()) for p in parts):
            where = opts.sweep_origin.get(name, "--sweep")
            return [f"scaleprobe launch: warning: {where}: {name}={text!r} is one value, not {len(parts)}: values are "
                    f"separated by ',' ({name}={','.join(p.strip() for p in parts)}); one run is made with it"]
    return []


def check_records(runs: list[Run]) -> None:
    """Read the launch record of every directory a resumed sweep will look at (each run's, its
    older name's and its `_alt-<n>` ones) before any run starts; name every damaged one at once
    (exit 2) rather than stop the sweep midway at the first. Nothing is removed or overwritten:
    whether a damaged run is made again is the user's choice."""
    if not runs:
        return
    names = {run.directory.name for run in runs}
    names |= {legacy.name for run in runs for legacy in legacy_directories(run, True)}
    roots = {run.directory.parent for run in runs}
    bad = []
    for root in sorted(roots):
        try:
            entries = sorted(root.iterdir())
        except OSError:  # no such directory yet (a first run), or the error comes with --out's check
            continue
        for directory in entries:
            if re.sub(r"_alt-\d+\Z", "", directory.name) not in names or not directory.is_dir():
                continue
            try:
                read_record(directory, advice=False)
            except LaunchError as exc:
                bad.append(str(exc))
    if bad:
        listed = "\n  ".join(bad)
        raise LaunchError(f"{len(bad)} launch record{'s are' if len(bad) > 1 else ' is'} damaged, so this sweep "
                          f"cannot tell whether {'those runs were' if len(bad) > 1 else 'that run was'} made; "
                          f"nothing was run:\n  {listed}\nDelete each such {RECORD} to make its run again (its "
                          "rank files are then replaced), or move its run directory out of the way to keep it")
