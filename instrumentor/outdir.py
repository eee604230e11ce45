"""OUT before and while a build writes it: refuse a folder that holds files of its own (not an
earlier build), make sure it can be written, and clear the way for each file (what an earlier build
left there of another type: a file where a folder now is, a folder where a file now is, a link).

An earlier build is known by `OUT/.scaleprobe/`, which a build makes before it writes any file.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
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
    shown = clash or entries
    names = ", ".join(shown[:2]) + (f" and {len(shown) - 2} more" if len(shown) > 2 else "")
    what = f"the build would replace {names}" if clash else f"it holds {names}"
    raise InstrumentError(
        f"-o {given}: holds files of its own and is no earlier build (no {STATE_DIR}/ there): {what}; "
        "give a new or empty directory"
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


class OutTree:
    """Clears the way for the files written into OUT; never writes through a link already there
    (it may point at the user's own files)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._folders: set[PurePosixPath] = {PurePosixPath(".")}

    def ready(self, rel: str) -> Path:
        """OUT/rel with its folders made and nothing of another type in its place."""
        folder = PurePosixPath(rel).parent
        if folder not in self._folders:
            path = self.out
            for part in folder.parts:
                path = path / part
                if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
                    path.unlink()  # an earlier build's file (or link) where a folder now is
                path.mkdir(exist_ok=True)
            self._folders.add(folder)
        dest = self.out / rel
        try:
            if stat.S_ISDIR(os.lstat(dest).st_mode):
                shutil.rmtree(dest)  # an earlier build's folder where a file now is
        except FileNotFoundError:
            pass
        return dest
