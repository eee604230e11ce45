"""The sweep's own stderr, when whatever read it has gone: a sweep whose stderr is a pipe (`make
demo`'s filter, `| head`) must not end in an uncaught BrokenPipeError at its next progress line
when the reader ends first (review 95 MED-1: Ctrl-C stopped the filter with the launcher, whose
next line then raised, exit 1, so it never said the sweep was interrupted, nor could `demo.sh`).

`tolerant_stderr()` puts a stand-in for `sys.stderr` in place for a sweep's parent process only:
the runs are processes of their own with their own descriptors, so no program's writes are
changed. Once a write finds the reader gone, later ones are dropped; the exit status and the launch
records say what happened.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator


class TolerantStream:
    """`inner`'s writes, and nothing after the first that found its reader gone (EPIPE)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.inner.write(text)
            except BrokenPipeError:
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self.gone = True

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... as the stream's
        return getattr(self.inner, name)


@contextmanager
def tolerant_stderr() -> Iterator[TolerantStream]:
    inner = sys.stderr
    stand_in = TolerantStream(inner)
    sys.stderr = stand_in
    try:
        yield stand_in
    finally:
        if sys.stderr is stand_in:
            sys.stderr = inner
