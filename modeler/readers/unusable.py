"""What the "no usable measurements" error says: why each input could not be used, once per
reason, and what the runs found came to.

The launcher's own files beside the run files (`rank<R>.error.txt`, `runtime/launch_child.py`)
are not measurements and are never named; the files of one failed run share its reason, which is
said once with their count.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..listing import listing

if TYPE_CHECKING:
    from . import FileResult

#: files the launcher writes beside a run's rank files: `rank<R>.error.txt` and the like (a run file
#: is `rank<R>.<pid>.jsonl`)
_LAUNCHER_FILE = re.compile(r"^rank\d+\.[A-Za-z][\w-]*\.txt$")
#: the reason given to such a file, never shown in the error
LAUNCHER_FILE = "a file of the scaleprobe launcher, not measurements"
NOT_MEASUREMENTS = "not a scaleprobe run file nor an Extra-P input"
#: the first bytes of compressed files: (magic, the tool that makes them)
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"))
#: how a compressed copy of a measurements file is named (found in folders: review 101 M3)
COMPRESSED_SUFFIXES = (".gz", ".zst", ".xz", ".bz2")


def compressed_reason(path: Path) -> str | None:
    """Why `path` cannot be read as it is, where it is compressed (by its first bytes), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(6)
    except OSError:
        return None
    for magic, tool in _COMPRESSED:
        if head.startswith(magic):
            return f"compressed with {tool}: decompress it first"
    return None


def damaged_reason(path: Path) -> str | None:
    """Why a `.jsonl` file found in a folder that no reader claims looks like a damaged measurements
    file rather than another tool's log, or None: binary content, or a first line that is not JSON
    (review 118 MED-1: such a file in a folder was counted as ignored and never named). JSON lines of
    another kind are a log, ignored."""
    if path.suffix != ".jsonl":
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
    except OSError:
        return None
    if b"\0" in head:
        return f"{path}: binary content, not JSON lines (a damaged measurements file?)"
    lines = head.split(b"\n")
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        if number == len(lines) and len(head) == 1 << 16:
            return None  # a first line longer than what was read: not judged
        try:
            json.loads(line)
        except ValueError:
            return f"{path}:{number}: not JSON (a damaged measurements file?)"
        return None
    return None


def is_launcher_file(path: Path) -> bool:
    return bool(_LAUNCHER_FILE.match(path.name))


def no_usable_message(files: Sequence["FileResult"], include_incomplete: bool) -> str:
    """`no usable measurements (<each reason once>); <what the runs left out came to>`."""
    groups: dict[tuple[str, str], list[str]] = {}
    for f in files:
        if f.status != "read" and f.reason != LAUNCHER_FILE:
            groups.setdefault((f.status, f.reason), []).append(f.path)
    parts = []
    for (status, reason), paths in groups.items():
        files_n = f" ({len(paths)} files)" if len(paths) > 1 else ""
        if status == "left out":
            # `run failed: <why, naming the failing rank's file>`, said once for the run's files
            head, _, why = reason.partition(": ")
            parts.append(f"{head}{files_n}: {why}")
        elif status == "deselected" or reason.startswith(paths[0]):
            parts.append(reason + files_n)  # most readers' reasons name the file
        else:
            parts.append(f"{listing(paths, 2, 'more files')}: {reason}")
    if len(parts) > 1:  # reasons hold semicolons of their own: number them
        parts = [f"[{i}] {p}" for i, p in enumerate(parts, 1)]
    shown = " ".join(parts[:6]) + (f" and {len(parts) - 6} more reasons" if len(parts) > 6 else "")
    text = "no usable measurements" + (f" ({shown})" if parts else "")
    summary = _runs_summary(files, include_incomplete)
    read = [f for f in files if f.status == "read"]
    if not parts and read:  # (review 58 F13: an incomplete run's header alone, with --include-incomplete)
        summary = (f"the {len(read)} file(s) read hold no measurements (a run file with its header alone: a rank "
                   f"that ended, or was killed, before its first write)")
    elif not parts:
        summary = f"no scaleprobe run file nor Extra-P input among the {len(files)} file(s) found"
    return text + (f"; {summary}" if summary else "")


def _runs_summary(files: Sequence["FileResult"], include_incomplete: bool) -> str:
    """`2 run(s) left out: 1 failed, 1 incomplete; --include-incomplete also uses incomplete runs`."""
    runs = {f.run: f.run_status for f in files if f.status == "left out" and f.run}
    if not runs:
        return ""
    counts = Counter(runs.values())
    text = f"{len(runs)} run(s) left out: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if counts.get("incomplete") and not include_incomplete:
        text += ("; --include-incomplete also uses incomplete runs (a rank without an end record counts up to its "
                 "last flush)" + (" and interrupted ones" if counts.get("interrupted") else ""))
    elif counts.get("interrupted") and not include_incomplete:
        text += "; --include-incomplete also uses interrupted runs, their values up to the interrupt"
    return text
