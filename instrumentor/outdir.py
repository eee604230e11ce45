"""OUT before and while a build writes it: refuse a folder that is no earlier build and holds
files the build would replace, make sure it can be written, and clear the way for each file (what
an earlier build left there of another type: a file where a folder now is, a folder where a file
now is, a link), never removing or replacing what no build wrote.

An earlier build is known by `OUT/.scaleprobe/`, which a build makes before it writes any file.
A folder with other things in it that the build does not write (setuptools' `build/`, a
`.gitignore`) is built into, as before: only a name the build would write is refused (review 28:
`instrument src/ -o build/`, the README's own line, was refused beside setuptools' files).
A file of the user's that SRC takes the name of later is in the way as much (review 29: a re-run
wrote over it). What builds wrote is on OUT's record (`state.json`'s `written`), where a build puts
the files it will create before it writes any, so that a build stopped halfway is known.
"""

from __future__ import annotations

import errno
import filecmp
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from .errors import InstrumentError
from .regions import STATE_DIR


def check_out(out: Path, given: Path, files: list[str]) -> None:
    """InstrumentError when OUT exists, is not empty and is no earlier build: the build would
    replace the user's own files there (`instrument src -o .`)."""
    try:
        entries = sorted(os.listdir(out))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InstrumentError(f"-o {given}: cannot read {out}: {exc.strerror or exc}") from None
    if not entries or (out / STATE_DIR).is_dir():
        return
    clash = [rel for rel in files if os.path.lexists(out / rel)]
    if not clash:
        return
    names = ", ".join(clash[:2]) + (f" and {len(clash) - 2} more" if len(clash) > 2 else "")
    raise InstrumentError(
        f"-o {given}: holds files of its own and is no earlier build (no {STATE_DIR}/ there): the build "
        f"would replace {names}; give a new or empty directory"
    )


def open_out(out: Path, given: Path) -> None:
    """Make OUT and its `.scaleprobe/` (the mark of a build, made before any file is written, so that
    a build stopped halfway is still known as one) and check that OUT can be written."""
    try:
        (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        where = os.fsdecode(exc.filename) if exc.filename is not None else str(out)
        raise InstrumentError(f"-o {given}: cannot write {where}: {exc.strerror or exc}") from None


#: how a module the build instrumented starts (emit.py's headers), within its first bytes
_HEADERS = (b"from runtime.probe import ", b"import nvtx as __sp_nvtx__")
_HEADER_BYTES = 1 << 16


class OutTree:
    """Clears the way for the files written into OUT; never writes through a link already there
    (it may point at the user's own files), and never removes or replaces what no earlier build
    wrote (`written`, OUT-relative posix paths): such a thing in the way fails that file.
    `written=None`: OUT has no record (a `.scaleprobe/` without state, left by an earlier version
    stopped halfway): a plain file is replaced as before, only a folder is looked into."""

    def __init__(self, out: Path, written: Iterable[str] | None = (), src: Path | None = None) -> None:
        self.out = out
        self.src = src
        self._recorded = written is not None
        self._written = set(written or ())
        self._cleared: set[str] = set()  # the files the way was cleared for in this build
        self._folders: set[PurePosixPath] = {PurePosixPath(".")}

    def _ours(self, path: Path) -> bool:
        """Written by an earlier build: the file itself, or every file under the folder."""
        rel = path.relative_to(self.out).as_posix()
        if not path.is_dir() or path.is_symlink():
            return rel in self._written
        for folder, _, names in os.walk(path):
            for name in names:
                if (Path(folder) / name).relative_to(self.out).as_posix() not in self._written:
                    return False
        return True

    def _in_the_way(self, path: Path) -> None:
        raise FileExistsError(errno.EEXIST, "in the way, and not written by a build: move it", str(path))

    def new(self, files: Iterable[str]) -> list[str]:
        """The files this build will create (nothing in OUT there yet), to be put on the record
        before any is written; none when OUT has no record."""
        if not self._recorded:
            return []
        return [rel for rel in files if rel not in self._written and not os.path.lexists(self.out / rel)]

    def ready(self, rel: str) -> Path:
        """OUT/rel with its folders made and nothing of another type, nor a file of the user's, in its place."""
        folder = PurePosixPath(rel).parent
        if folder not in self._folders:
            path = self.out
            for part in folder.parts:
                path = path / part
                if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
                    if not self._ours(path):
                        self._in_the_way(path)
                    path.unlink()  # an earlier build's file (or link) where a folder now is
                path.mkdir(exist_ok=True)
            self._folders.add(folder)
        dest = self.out / rel
        try:
            if stat.S_ISDIR(os.lstat(dest).st_mode):
                if not self._ours(dest):
                    self._in_the_way(dest)
                shutil.rmtree(dest)  # an earlier build's folder where a file now is
            elif self._recorded and rel not in self._written and not self._built(rel):
                self._in_the_way(dest)  # the user's file (or link) of a name SRC took since
        except FileNotFoundError:
            pass
        self._cleared.add(rel)
        return dest

    def _built(self, rel: str) -> bool:
        """Whether OUT/rel, on no record, is a build's all the same: a copy of SRC's file (the same
        bytes, or a link to the same target) or a module that starts with the probes' header. A
        re-run of an earlier scaleprobe, which recorded what it wrote only at its end, leaves such
        files off the record when it is stopped halfway (review 31: they were refused for good)."""
        dest = self.out / rel
        source = None if self.src is None else self.src / rel
        try:
            if dest.is_symlink():
                return source is not None and source.is_symlink() and os.readlink(source) == os.readlink(dest)
            if source is not None and not source.is_symlink() and filecmp.cmp(source, dest, shallow=False):
                return True
            with open(dest, "rb") as f:
                head = f.read(_HEADER_BYTES)
        except OSError:
            return False
        return b"\n__sp_on__ = " in head and any(h in head for h in _HEADERS)

    def kept(self, rel: str) -> bool:
        """After writing OUT/rel failed: whether it stays on the record of what builds wrote (it was,
        or the way was cleared for it and this build left something there)."""
        return rel in self._written or (rel in self._cleared and os.path.lexists(self.out / rel))


def replace_file(dest: Path, write: Callable[[Path], None]) -> None:
    """Put a new file at `dest`: `write` fills a temporary file beside it, which is then renamed
    over it. Whatever was at `dest` is replaced, never written through: a symlink (it may point at
    the user's files) or a hard link to SRC's own file (review 32: the instrumented code went into
    the user's source)."""
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".scaleprobe-tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename == str(tmp):  # named as the file the build writes, not its temporary
            raise type(exc)(exc.errno, exc.strerror, str(dest)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
