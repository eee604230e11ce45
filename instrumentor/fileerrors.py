"""Messages for files that cannot be read or written, in the summary's form `relpath[:line]: why`:
the line of the byte that is not in the file's encoding, or of the first NUL byte."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


def cannot_read(relpath: str, exc: OSError) -> str:
    """`pkg/tabs.py: cannot read: Permission denied`: a file of SRC that could not be opened or read."""
    return f"{relpath}: cannot read: {exc.strerror or exc}"


def io_failure(relpath: str, exc: OSError, src: Path, out: Path) -> str:
    """Why copying or writing one file failed: reading it from SRC, or writing it in OUT (SRC may
    lie inside OUT: it is looked at first)."""
    first = os.fsdecode(exc.filename) if exc.filename is not None else ""
    if first and _under(first, src):
        return cannot_read(relpath, exc)
    for name in (first, os.fsdecode(exc.filename2) if exc.filename2 is not None else ""):
        if name and _under(name, out):
            return f"{relpath}: cannot write {name}: {exc.strerror or exc}{_run_output(relpath, exc, name)}"
    return f"{relpath}: {exc.strerror or exc}"


def _run_output(relpath: str, exc: OSError, name: str) -> str:
    """For a data file of SRC in the way in OUT: most likely an output the program wrote in both, run
    from SRC and from OUT (review 128 LOW-5: `checkpoints/epoch0.pt` failed every rebuild)."""
    if exc.errno != errno.EEXIST or relpath.endswith((".py", ".pyw")) or not os.path.isfile(name):
        return ""
    return RUN_OUTPUT_HINT


#: after "in the way, and not written by a build: move it" for a file of SRC that is no module
RUN_OUTPUT_HINT = (" (if the program wrote it there when run from OUT, as it did SRC's when run from SRC: delete "
                   "the copy you do not need; a build copies every file of SRC)")


def _under(name: str, folder: Path) -> bool:
    return os.path.isabs(name) and Path(name).is_relative_to(folder)


def decode_failure(relpath: str, data: bytes, exc: Exception) -> str:
    """`relpath:line: cannot read: why` for a source that does not decode (a byte not in its
    encoding, an unknown coding cookie): the line of the bad byte, or of the cookie. A byte that
    is not UTF-8 in a file that names no other encoding is named with the fix (review 119 L1: on
    the first two lines tokenize said only "invalid or missing encoding declaration")."""
    line = _decode_line(data, exc)
    byte = _not_utf8(data, exc)
    if byte is not None:
        return (f"{relpath}:{line}: cannot read: byte 0x{byte:02x} is not UTF-8; save the file as UTF-8, or "
                "declare its encoding on line 1 or 2 (`# -*- coding: latin-1 -*-`)")
    return f"{relpath}:{line}: cannot read: {exc}"


def _not_utf8(data: bytes, exc: Exception) -> int | None:
    """The first byte that is not UTF-8, where UTF-8 is the encoding that failed."""
    if isinstance(exc, UnicodeDecodeError):
        return exc.object[exc.start] if exc.encoding.replace("_", "-").lower().startswith("utf-8") else None
    if isinstance(exc, SyntaxError) and str(exc.msg).startswith("invalid or missing encoding declaration"):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            return data[bad.start]
    return None


def parse_failure(relpath: str, source: str, exc: Exception) -> str:
    """`relpath:line: syntax error: why` for a module that does not parse (NUL bytes: a SyntaxError
    without a line, 3.10 a ValueError); `cannot parse` for a ValueError, RecursionError or MemoryError."""
    if isinstance(exc, SyntaxError):
        return f"{relpath}:{exc.lineno or null_byte_line(source) or 1}: syntax error: {exc.msg}"
    line = (null_byte_line(source) if isinstance(exc, ValueError) else None) or 1
    return f"{relpath}:{line}: cannot parse: {type(exc).__name__}: {exc}"


def _decode_line(data: bytes, exc: Exception) -> int:
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        skipped = len(data) - len(exc.object) if data.endswith(exc.object) else 0  # a BOM the codec left out
        return data.count(b"\n", 0, skipped + exc.start) + 1
    # tokenize.detect_encoding: the first two lines are not UTF-8 and name no coding, or name an unknown one
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return data.count(b"\n", 0, bad.start) + 1
    for number, line in enumerate(data.splitlines()[:2], 1):
        if _COOKIE.match(line):
            return number
    return 1


def null_byte_line(source: str) -> int | None:
    """The line of the first NUL character (Python's parser refuses them and names no line)."""
    at = source.find("\0")
    return None if at < 0 else source.count("\n", 0, at) + 1
