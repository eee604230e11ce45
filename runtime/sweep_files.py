"""Whether a run recorded as completed still has its run files, for a resume.

A run's `launch.json` lists the run files (`rank*.jsonl`) that had their end record when the run
ended (`files`). A resume skips the run only while each of them is still there and still ends with
its end record: a file the user deleted or that was cut off (copied in part, truncated) makes the
run again, with a line saying which file and why. Records of older launchers list no files: there
every rank's own file present is checked (not its helper processes', which may end without one);
a run with no run file at all counts as done, as before (it may hold `--nsys` reports that making
it again would remove), and one of several files deleted cannot be noticed.

A run whose directory was removed (or replaced) while it ran lost its run files with it: it failed,
whatever its ranks did.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from runtime.launch_ranks import Outcome
from runtime.runfile import is_helper_process

_TAIL = 4096


def run_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("rank*.jsonl") if p.is_file())


def ended_files(directory: Path) -> list[str]:
    """The names of the run files in `directory` whose last record is an end record."""
    return [p.name for p in run_files(directory) if _last_record(p) == "end"]


def _last_record(path: Path) -> str | None:
    """The type of the file's last complete record; None when it cannot be read, ends in the middle
    of a line, or its last line is no record."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            chunk = _TAIL
            while True:
                start = max(0, size - chunk)
                handle.seek(start)
                tail = handle.read(size - start)
                if not tail.endswith(b"\n"):
                    return None  # empty, or cut off in the middle of a line
                body = tail.rstrip()
                cut = body.rfind(b"\n")
                if cut >= 0 or start == 0:
                    break
                chunk *= 8
    except OSError:
        return None
    try:
        record = json.loads(body[cut + 1:])
    except ValueError:
        return None
    return record.get("type") if isinstance(record, dict) and isinstance(record.get("type"), str) else None


def _is_helper(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline())
    except (OSError, ValueError):
        return False
    return isinstance(header, dict) and is_helper_process(header)


def missing_files(directory: Path, listed: list[str] | None) -> list[str]:
    """Why the run files of a run recorded as completed are not all there, one phrase per file
    (empty when they are)."""
    if listed is None:
        # a record of an older launcher: the ranks' own files that are there. None at all is done, as
        # before: such a run may hold what making it again would remove (`--nsys` reports of an
        # NVTX build, review 28)
        listed = [p.name for p in run_files(directory) if not _is_helper(p)]
    problems = []
    for name in listed:
        path = directory / name
        if not path.is_file():
            problems.append(f"its run file {name} is missing")
        elif _last_record(path) != "end":
            problems.append(f"its run file {name} has no end record (cut off?)")
    return problems


def directory_identity(directory: Path) -> tuple[int, int] | None:
    try:
        st = directory.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def removed_while_running(outcome: Outcome) -> Outcome:
    """The outcome of a run whose directory was removed (or replaced) while it ran: its run files
    went with it, so it failed, whatever its ranks did."""
    why = "run directory removed while the run was running (its run files went with it)"
    if outcome.status == "ok":
        return dataclasses.replace(outcome, status="failed", error=why)
    if outcome.status in ("failed", "timeout"):
        return dataclasses.replace(outcome, error=f"{outcome.error or outcome.status}; {why}")
    return outcome
