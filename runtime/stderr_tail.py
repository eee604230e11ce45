"""The last lines a rank wrote to its `sys.stderr`, kept for its error file.

After a long sweep the terminal (or the batch job's log) that showed a failed run's own message
(argparse's `error: unrecognized arguments`, a warning just before a crash) may be gone; the run
directory keeps the end of it. The rank keeps it itself, so it works the same however the rank was
started (`--nproc`, a sweep, `--spawn` with srun or mpiexec, srun/mpiexec/torchrun around the
launcher, in the launcher's own process), and what the program writes still goes straight to its
stderr, unchanged: the stream object, its buffering and `isatty()` stay the program's, only its
`write` also appends the text to a small buffer.

Limits: only what goes through the `sys.stderr` object the program started with (print, logging,
warnings, tracebacks, argparse); not what C code writes to file descriptor 2 (a library's own
logging, faulthandler), nor the output of processes the program starts, nor anything when the
rank is killed by a signal (no Python code runs then to write the error file).
"""

from __future__ import annotations

import collections
import sys

LIMIT_CHARS = 4096
LIMIT_LINES = 20
KEPT_WRITES = 512  # the last writes kept (print writes the text and the end separately)

# Appending to a bounded deque is the whole cost of a write (no check, no compaction): about 170 ns
# a write on the team's 2-core machine, see docs/launch.md.
_chunks: collections.deque[str] = collections.deque(maxlen=KEPT_WRITES)
_installed = False


def install(stream=None) -> bool:
    """Keep a copy of the end of what is written to `stream` (default `sys.stderr`) from now on."""
    global _installed
    stream = sys.stderr if stream is None else stream
    if _installed or stream is None:
        return False
    try:
        original = stream.write
    except AttributeError:
        return False

    def write(text, _original=original, _append=_chunks.append):
        written = _original(text)  # raises for what is no text: only text gets kept
        _append(text if len(text) <= LIMIT_CHARS else text[-LIMIT_CHARS - 1:])
        return written

    try:
        stream.write = write  # an attribute of this object only: print, logging and tracebacks look it up
    except (AttributeError, TypeError):
        return False  # a stream that takes no attributes: nothing kept
    _installed = True
    return True


def tail() -> str:
    """The last lines written (at most LIMIT_LINES lines and LIMIT_CHARS characters)."""
    chunks = list(_chunks)
    joined = "".join(c for c in chunks if type(c) is str)
    text = joined[-LIMIT_CHARS:]
    lines = text.splitlines()
    if len(joined) > LIMIT_CHARS:
        cut = joined[-LIMIT_CHARS - 1] != "\n"
    else:  # older writes were dropped from the deque, or a long one kept only its end
        cut = len(chunks) == KEPT_WRITES or (bool(chunks) and len(chunks[0]) > LIMIT_CHARS)
    if cut and lines:
        lines[0] = "..." + lines[0]  # its start was cut
    return "\n".join(lines[-LIMIT_LINES:])


def last_line(limit: int = 300) -> str | None:
    """The last line with any text in it, shortened to `limit` characters."""
    for line in reversed(tail().splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[:limit - 3] + "..."
    return None
