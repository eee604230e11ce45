"""A copy of what a rank writes to its stdout and stderr, kept in its run directory (review 128
LOW-8: after a sweep the runs' `epoch N loss ...` lines had scrolled by with no run named, and
were kept nowhere).

The launcher's ranks (`--nproc`, a sweep, `--spawn`, a run in the launcher's own process) write
`rank<R>.output.txt` beside their run files: everything the program writes through `sys.stdout`
and `sys.stderr` (print, logging, warnings, tracebacks, tqdm), in the order it wrote it. What it
writes still goes straight to its streams, unchanged, as for `stderr_tail`: the stream objects,
their buffering, `isatty()` and file descriptors stay the program's, only their `write` also
appends the text to the file, at once (one `write(2)` on a file opened for appending: a process
the program forks, such as a DataLoader worker, adds its lines to the same file, whole, and
nothing waits in a buffer when the rank is killed). That `write` is a C callable
(`runtime/_teewrite.c`), with no Python frame: a program that prints at the bottom of its
recursion limit prints as without the launcher, which keeps its stack depth. Without the C
extension (no compiler at install) no file is kept.

Limits: only the stream objects the program started with (not what C code writes to the file
descriptors 1 and 2, nor `sys.stdout.buffer.write`, nor a stream that the program puts in their
place, nor the output of programs and spawned processes it starts); a copy that cannot be written
(a full disk) stops, and the program goes on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NAME = "rank{rank}.output.txt"
_installed = [False]

try:  # the write with no Python frame of its own (runtime/_teewrite.c)
    from ._teewrite import Tee
except ImportError:  # not built: no copy, rather than a frame more in every print of the program
    Tee = None


def path_for(rank: int) -> Path | None:
    out = os.environ.get("SCALEPROBE_OUT")
    return Path(out) / NAME.format(rank=rank) if out else None


def install(rank: int) -> bool:
    """Copy what goes to sys.stdout and sys.stderr from now on into the rank's output file (none
    where SCALEPROBE_OUT is not set, or the C extension is not built). The file is made at the
    first text (a rank that prints nothing leaves none). Once per process."""
    if _installed[0] or Tee is None:
        return False
    target = path_for(rank)
    if target is None:
        return False
    _installed[0] = True
    return any([_wrap(stream, os.fsencode(target)) for stream in (sys.stdout, sys.stderr)])


def _wrap(stream, path: bytes) -> bool:
    if stream is None or Tee is None:
        return False
    try:
        original = stream.write
        encoding = getattr(stream, "encoding", None) or "utf-8"
        "".encode(encoding)
        stream.write = Tee(original, path, encoding)  # this object's only: print, logging, tracebacks look it up
    except (AttributeError, TypeError, LookupError):
        return False  # a stream that takes no attributes: nothing copied from it
    return True
