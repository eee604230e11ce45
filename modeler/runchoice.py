"""`--run`: one run picked by its id, its directory or its directory's name; and, when none
matches, an error that counts the runs and shows each listed one's parameters (run ids are
opaque hashes that appear nowhere in the directory names)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import InputError
from .pointtext import param_text

#: runs named in the error; the others are counted
SHOWN = 10


@dataclass(frozen=True)
class RunEntry:
    name: str  # as `modeler fit` names runs (`readers.runs.run_names`)
    params: Mapping[str, Any]
    repetition: Any
    directories: tuple[Path, ...]  # where its files lie


def find_run(entries: Sequence[RunEntry], wanted: str, option: str = "--run") -> RunEntry:
    """The run named `wanted`: its id; else a path of its directory (or of a file in it); else its
    directory's own name (`ranks-4_batch-32_rep-0`, as the launcher prints it) when one run has it."""
    for e in entries:
        if e.name == wanted:
            return e
    p = Path(wanted)
    if p.exists():
        target = (p if p.is_dir() else p.parent).resolve()
        hits = [e for e in entries if target in {d.resolve() for d in e.directories}]
    else:
        name = p.name
        hits = [e for e in entries if any(d.name == name for d in e.directories)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise InputError(f"{option}: {wanted!r} holds {len(hits)} runs: {', '.join(describe(e) for e in hits[:SHOWN])}; "
                         f"give one's run id")
    raise InputError(f"{option}: no run {wanted!r} (a run id, the run's directory or its name); {choices(entries)}")


def choices(entries: Sequence[RunEntry]) -> str:
    """`the 54 runs are: 92696bf75e9d (ranks=4, batch=32, rep 0), ... and 44 more`."""
    return f"the {len(entries)} run{'s are' if len(entries) != 1 else ' is'}: {listed(entries)}"


def listed(entries: Sequence[RunEntry]) -> str:
    """`92696bf75e9d (ranks=4, batch=32, rep 0), ... and 44 more`."""
    shown = ", ".join(describe(e) for e in entries[:SHOWN])
    return shown + (f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else "")


def describe(e: RunEntry) -> str:
    """`id (ranks=4, batch=32, rep 0)`; a name that gives them already (`pbs-77 (repetition 1, p=4)`,
    launches of one job that share a run id) as it is."""
    if " (" in e.name:
        return e.name
    items = [f"{k}={_value(v)}" for k, v in e.params.items()]
    if e.repetition is not None:
        items.append(f"rep {e.repetition}")
    return f"{e.name} ({', '.join(items)})" if items else e.name


def _value(v: Any) -> str:
    if isinstance(v, float) and math.isfinite(v):
        return param_text(v)
    return str(v)
