"""Messages for files that cannot be read or written, in the summary's form `relpath[:line]: why`:
the line of the byte that is not in the file's encoding, or of the first NUL byte."""

from __future__ import annotations

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
            return f"{relpath}: cannot write {name}: {exc.strerror or exc}"
    return f"{relpath}: {exc.strerror or exc}"


def _under(name: str, folder: Path) -> bool:
    return os.path.isabs(name) and Path(name).is_relative_to(folder)


def decode_failure(relpath: str, data: bytes, exc: Exception) -> str:
    """`relpath:line: cannot read: why` for a source that does not decode (a byte not in its
    encoding, an unknown coding cookie): the line of the bad byte, or of the cookie."""
    return f"{relpath}:{_decode_line(data, exc)}: cannot read: {exc}"


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
