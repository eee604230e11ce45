"""Write an output file whole or not at all: into a temporary file beside it, then renamed over it.

A write that fails half-way (a full disk, a quota, an interrupt) leaves the file that was at the
path as it was, or no file where there was none, and no temporary file behind (review 69 F2:
`report -o` and `export --extrap` left the first 40 KB of the new file in place of the old one, and
`modeler fit` took a cut export for valid input). Used by every modeler command that writes a file
(`fit -o`, `report -o`, `export --extrap`, `timeline -o`).

What a rename would break is written in place, as before: a device or a pipe (`/dev/null`,
`/dev/stdout`, a FIFO), which a rename would replace by a plain file, and a process's stream that
a shell redirected to a file. A symbolic link keeps pointing at the file, which is replaced where
the link leads. The new file keeps the old one's permission bits (a new one gets the umask's);
other hard links to the old file keep the old content.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator, TextIO

from runtime.runfile import file_on_the_way


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text file (UTF-8) to write to; it becomes `path` when the block ends without an error.
    The folders on the way are made. Errors are those of making, writing and renaming (OSError)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if _in_place(target):
        with open(target, "w", encoding="utf-8") as f:
            yield f
        return
    real = Path(os.path.realpath(target))
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode(real))
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """`text` as the whole content of `path` (UTF-8), or `path` untouched where that fails."""
    with replacing(path) as f:
        f.write(text)


_STREAMS = ("/dev/stdout", "/dev/stderr")
_STREAM_FOLDERS = ("/dev/fd/", "/proc/")


def _in_place(path: Path) -> bool:
    """Whether `path` is written where it is: a device, a pipe, a folder (whose error `open`
    gives), a process's stream (`/dev/stdout`, `/dev/fd/N`, under /proc: a file a shell redirected
    it to, with `>>` perhaps, is not to be replaced); not a plain file or a new one."""
    where = os.path.abspath(path)
    if where in _STREAMS or where.startswith(_STREAM_FOLDERS):
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode)


def _mode(path: Path) -> int:
    """The permission bits the new file gets: the old file's, else what `open` gives a new one."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def why_not_written(exc: OSError) -> str:
    """An OSError of writing an output, in words: a folder on the way that is a file says so
    (review 26: `File exists`; said once, and by every command: review 101 L4)."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and (file := file_on_the_way(exc.filename)):
        return file
    return exc.strerror or str(exc)
