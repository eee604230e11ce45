"""Whether a run recorded as completed still has its run files, for a resume.

A run's `launch.json` lists the run files (`rank*.jsonl`) that had their end record when the run
ended (`files`). A resume skips the run only while each of them is still there and still ends with
its end record: a file the user deleted or that was cut off (copied in part, truncated) makes the
run again, with a line saying which file and why. Records of older launchers list no files: there
every rank's own file present is checked (not its helper processes', which may end without one);
a run with no run file at all counts as done, as before (it may hold `--nsys` reports that making
it again would remove), and one of several files deleted cannot be noticed.

A run whose directory was removed (or replaced) while it ran lost its run files with it: it failed,
whatever its ranks did. So did a run whose ranks all exited 0 while a rank's own run file has no end
record (a rank that left with `os._exit`): its data stops at the last flush (review 58 F1).
"""

from __future__ import annotations

import dataclasses
import json
import os
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
    record = _last(path)
    return record.get("type") if record is not None else None


def _last(path: Path) -> dict | None:
    """The file's last complete record (a dict with a string `type`), or None as `_last_record`."""
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
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None


def _header(path: Path) -> dict | None:
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def _is_helper(path: Path) -> bool:
    header = _header(path)
    return header is not None and is_helper_process(header)


def unended_rank_files(directory: Path) -> list[tuple[int | None, str]]:
    """The ranks' own run files (not their helper processes') without an end record, with the rank
    each header names: after every rank exited 0, the mark of a rank that left with `os._exit`,
    which skips the final flush and the end record (review 58 F1)."""
    found = []
    for path in run_files(directory):
        if _last_record(path) == "end":
            continue
        header = _header(path)
        # only a file that starts as a run file does (a rank writes its header when it starts)
        if header is None or header.get("type") != "header" or is_helper_process(header):
            continue
        rank = header.get("rank")
        found.append((rank if isinstance(rank, int) and not isinstance(rank, bool) else None, path.name))
    return found


def without_end_record(outcome: Outcome, unended: list[tuple[int | None, str]],
                       directory: Path | None = None) -> Outcome:
    """The outcome of a run whose ranks all exited 0 while a rank's own run file has no end record:
    failed, naming the rank and the file, since its data is cut at its last flush and the modeler
    leaves such a run out as incomplete (review 58 F1: it was `ok`, and a resume skipped it). Where
    the file system of the run `directory` is full the rank could not write its file (nor its error
    file, which says so otherwise), and the error says that; else it names both causes (review 65
    F2: a full disk was blamed on os._exit, and the user told to change a program not at fault)."""
    if outcome.status != "ok" or not unended:
        return outcome
    rank, name = unended[0]
    more = f" (and {len(unended) - 1} more)" if len(unended) > 1 else ""
    free = free_bytes(directory) if directory is not None else None
    if free is not None and free < FULL_BELOW:
        path = directory / name
        error = (f"cannot write run file {path}{more}: its end record is missing (the rank's stderr says why): "
                 f"the file system of the run directory is full ({free // 1024} KiB free); its data stops at its "
                 "last flush and the modeler leaves the run out as incomplete")
        return dataclasses.replace(outcome, status="failed", failed_rank=rank, error=error)
    # the rank is named before the error where it is known (`rank 0: ...`, `rank 0 failed: ...`)
    who = "exited" if rank is not None else "a rank exited"
    error = (f"{who} with code 0, but its run file {name}{more} has no end record: most likely it ended with "
             "os._exit, which skips the final flush and the end record, unless its last writes failed (a full "
             "disk, a disk quota: the rank's stderr then says `scaleprobe: cannot write run file`); its data stops "
             "at its last flush and the modeler leaves the run out as incomplete (after os._exit: end with "
             "sys.exit, or return from main, instead)")
    return dataclasses.replace(outcome, status="failed", failed_rank=rank, error=error)


#: free space below which a run file that ended without its end record is put down to a full disk
#: (a rank's last flush may be large: it failed for want of more than is left, not only at 0)
FULL_BELOW = 1 << 20


def free_bytes(directory: Path) -> int | None:
    """The space left to this user on the file system of `directory` (None where it cannot be told)."""
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    if not st.f_blocks:
        return None  # a file system that tells no sizes (some FUSE and network ones)
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


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
    # a rank's own file the record does not list and that has no end record: a rank that ended with
    # os._exit, which earlier launchers recorded `ok` (review 58 F1)
    problems += [f"its run file {name} has no end record (the rank ended with os._exit?)"
                 for _, name in unended_rank_files(directory) if name not in listed]
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


def done_before_the_signal(outcome: Outcome, directory: Path, ranks: int) -> Outcome:
    """An interrupted run whose every rank had already finished: `ok`, the signal kept to stop the
    sweep after it (as one that comes as the ranks end). Finished means each of its `ranks` ranks
    has its own run file ending with an `ok` end record: a rank writes `signal` there instead where
    the launcher's stop mark came before its end (`Recorder._finish`), so a program that caught
    Ctrl-C and exited 0 mid-run stays interrupted (review 123 LOW-2: a run whose 4 ranks had written
    their `ok` end records was recorded `interrupted` and made again on resume)."""
    if outcome.status != "interrupted" or ranks < 1:
        return outcome
    done = set()
    for path in run_files(directory):
        header = _header(path)
        if header is None or header.get("type") != "header" or is_helper_process(header):
            continue
        end = _last(path)
        if end is None or end.get("type") != "end" or end.get("status") != "ok":
            return outcome
        done.add(header.get("rank"))
    if done != set(range(ranks)):
        return outcome
    return dataclasses.replace(outcome, status="ok", exit_code=0, error=None)
