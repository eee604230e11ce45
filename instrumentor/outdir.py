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

Each file is written to a temporary beside it and renamed over it (`replace_file`); a build killed
outright (SIGKILL, the OOM killer, power loss) leaves that temporary behind, and a later build that
is alone in OUT removes it (`writing`, review 34). On a file system that ignores case (macOS,
Windows), a file a build wrote as `Model.py` is a build's under the name `model.py` too (review 31).
"""

from __future__ import annotations

import errno
import filecmp
import os
import re
import shutil
import stat
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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
    except NotADirectoryError:  # a file on the way to it (review 82 F7: said "cannot read")
        above = next((p for p in out.parents if os.path.lexists(p)), out)
        raise InstrumentError(f"-o {given}: cannot be made: {above} is a file, not a directory") from None
    except OSError as exc:
        raise InstrumentError(f"-o {given}: cannot read {out}: {exc.strerror or exc}") from None
    if not entries or (out / STATE_DIR).is_dir():
        return
    # an empty folder of SRC (`rel/`) is built into where a folder is there, as any folder is
    clash = [rel for rel in files if os.path.lexists(out / rel) and not (rel.endswith("/") and real_folder(out, out / rel))]
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
        self._by_fold: dict[str, list[str]] | None = None  # the record by `_fold`, made when first asked
        self._blind: bool | None = None  # whether OUT's file system ignores case, found when first asked
        self._folders_made: set[str] | None = None  # the folders builds made (`_made`), found when first asked

    def _on_record(self, rel: str) -> bool:
        """Written by an earlier build: on the record, or the same file as a name there that differs
        only in case (SRC renamed `Model.py` to `model.py` since, on a file system that ignores case)."""
        return rel in self._written or self._case_twin(rel) is not None

    def _case_twin(self, rel: str) -> str | None:
        """The name on the record that OUT/rel is, where it differs from rel only in case (or in the
        Unicode normalization macOS ignores too): the file system takes both names for one file."""
        if not self._written:
            return None
        if self._by_fold is None:
            self._by_fold = fold_index(self._written)
        return case_twin(self.out, rel, self._by_fold)

    def _case_blind(self) -> bool:
        """Whether OUT's file system ignores case: `.scaleprobe/` is there under `.SCALEPROBE` too."""
        if self._blind is None:
            self._blind = one_file(self.out, STATE_DIR, STATE_DIR.upper())
        return self._blind

    def _ours(self, path: Path) -> bool:
        """Written by an earlier build: the file itself, or the folder with everything under it:
        each file and link on the record, and each folder one a build made (on the record as
        `rel/`, or holding something on it). An empty folder is no build's for being empty
        (review 82 F4: a user's empty folder where SRC now has a file was removed silently)."""
        rel = path.relative_to(self.out).as_posix()
        if not path.is_dir() or path.is_symlink():
            return self._on_record(rel)
        for folder, dirs, names in os.walk(path):
            here = Path(folder).relative_to(self.out).as_posix()
            if not self._made(here):
                return False
            for name in [*names, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
                if not self._on_record(f"{here}/{name}"):
                    return False
        return True

    def _made(self, rel: str) -> bool:
        """Whether OUT/rel, a folder, is one a build made: an empty folder of SRC on the record
        (`rel/`), or one that holds a file, link or folder on it."""
        if self._folders_made is None:
            made = {r.rstrip("/") for r in self._written if r.endswith("/")}
            made |= {p.as_posix() for r in self._written for p in PurePosixPath(r.rstrip("/")).parents}
            self._folders_made = made
        if rel in self._folders_made:
            return True
        # the same folder under another case, where OUT's file system ignores case (`_case_twin`)
        return self._case_blind() and case_twin(self.out, rel, fold_index(self._folders_made)) is not None

    def _recase(self, path: Path) -> None:
        """Give the folder at `path` the case SRC's has now, where OUT's file system ignores case and
        an earlier build made it under another (`Pkg/` renamed to `pkg/`): Python imports a module
        only by its exact name there. A folder that is not all a build's keeps its name."""
        try:
            names = os.listdir(path.parent)
        except OSError:
            return
        if path.name in names:
            return
        there = [n for n in names if _fold(n) == _fold(path.name)]
        if len(there) == 1 and self._ours(path.parent / there[0]):
            try:
                os.rename(path.parent / there[0], path)
            except OSError:
                pass  # built into under its old name, as before

    def _in_the_way(self, path: Path) -> None:
        raise FileExistsError(errno.EEXIST, "in the way, and not written by a build: move it", str(path))

    def new(self, files: Iterable[str]) -> list[str]:
        """The files this build will create (nothing in OUT there yet), to be put on the record
        before any is written; none when OUT has no record."""
        if not self._recorded:
            return []
        return [rel for rel in files if rel not in self._written
                and (not os.path.lexists(self.out / rel) or self._case_twin(rel) is not None)]

    def _make_folders(self, folder: PurePosixPath) -> None:
        """OUT/folder and the folders above it, made where they are not, in place of an earlier
        build's file or link (never of the user's)."""
        if folder not in self._folders:
            path = self.out
            for part in folder.parts:
                path = path / part
                if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
                    if not self._ours(path):
                        self._in_the_way(path)
                    path.unlink()  # an earlier build's file (or link) where a folder now is
                elif path.is_dir() and self._case_blind():
                    self._recase(path)
                path.mkdir(exist_ok=True)
            self._folders.add(folder)

    def folder(self, rel: str) -> Path:
        """Make OUT/rel, an empty folder of SRC (`rel/`), as `ready` makes the folders of a file
        (review 68 H6: the program wrote into `checkpoints/`, which was not there)."""
        self._make_folders(PurePosixPath(rel.rstrip("/")))
        self._cleared.add(rel)
        return self.out / rel

    def ready(self, rel: str) -> Path:
        """OUT/rel with its folders made and nothing of another type, nor a file of the user's, in its place."""
        self._make_folders(PurePosixPath(rel).parent)
        dest = self.out / rel
        try:
            if stat.S_ISDIR(os.lstat(dest).st_mode):
                if not self._ours(dest):
                    self._in_the_way(dest)
                shutil.rmtree(dest)  # an earlier build's folder where a file now is
            elif self._recorded and rel not in self._written:
                if self._case_twin(rel) is not None:
                    # an earlier build's file under another case: gone, the new one takes SRC's name
                    dest.unlink()
                elif not self._built(rel):
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
                # the target a build gives it, or SRC's as it is (as earlier versions copied it)
                return source is not None and source.is_symlink() and os.readlink(dest) in {
                    os.readlink(source), link_target(self.src, rel)}
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


def link_target(src: Path, rel: str) -> str:
    """The target of OUT/rel, the copy of SRC's symlink SRC/rel (SRC resolved): the same file or
    folder as SRC's link. A relative target that stays inside SRC (`data/latest.csv`,
    `../configs/base.yaml` from a subfolder) is kept as it is: it finds the copy in OUT. One that
    leads out of SRC (`../shared/data.csv`) is made absolute from the link's folder, so that it
    works wherever OUT lies (review 68 H8: it dangled there): its leading `..` are taken against
    that folder (a real path: SRC is resolved, and no folder inside it is a link), the rest is kept
    as written. An absolute target is kept."""
    target = os.readlink(src / rel)
    if os.path.isabs(target):
        return target
    parts = target.split(os.sep)
    depth = len(PurePosixPath(rel).parts) - 1  # folders between SRC and the link
    for part in parts:
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            break
    else:
        return target
    folder = (src / rel).parent
    while parts and parts[0] in ("..", "."):
        if parts.pop(0) == "..":
            folder = folder.parent
    return os.path.join(folder, *parts)


def into_src(out: Path, src: Path, names: Iterable[str]) -> str | None:
    """Where SRC lies inside OUT (both resolved): the first of `names` (OUT-relative posix paths,
    a folder's with a trailing `/`) that is SRC, a path inside it, or a folder holding it, also
    under another case where OUT's file system ignores case. Writing or removing it would change
    SRC (review 68 M2: a re-run wrote instrumented code over SRC's own file). None where SRC is
    not inside OUT."""
    if out not in src.parents:
        return None
    place = src.relative_to(out).parts
    for name in names:
        parts = PurePosixPath(name.rstrip("/")).parts
        n = min(len(parts), len(place))
        head, there = "/".join(parts[:n]), "/".join(place[:n])
        if head == there or (_fold(head) == _fold(there) and one_file(out, head, there)):
            return name
    return None


def _fold(rel: str) -> str:
    """A name as a file system that ignores case (and, as macOS does, Unicode normalization) sees it."""
    return unicodedata.normalize("NFC", rel).casefold()


def fold_index(names: Iterable[str]) -> dict[str, list[str]]:
    """`names` by `_fold`."""
    index: dict[str, list[str]] = {}
    for name in names:
        index.setdefault(_fold(name), []).append(name)
    return index


def one_file(out: Path, a: str, b: str) -> bool:
    """Whether OUT/a and OUT/b, two names, are one file (or link, or folder) there: the file system
    ignores what they differ in. False where either is not there."""
    try:
        first, second = os.lstat(out / a), os.lstat(out / b)
    except (OSError, ValueError):
        return False
    # an inode number of 0 is none the file system gives (some network shares): not known to be one
    return first.st_ino != 0 and (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def case_twin(out: Path, rel: str, index: dict[str, list[str]]) -> str | None:
    """The name in `index` (`fold_index`) other than rel that is the same file as OUT/rel."""
    return next((name for name in index.get(_fold(rel), ()) if name != rel and one_file(out, name, rel)), None)


#: the suffix of `replace_file`'s temporary files, and their whole name: `.<name>.<mkstemp's 8
#: characters>.scaleprobe-tmp`, beside OUT/.../<name>
TMP_SUFFIX = ".scaleprobe-tmp"
_TMP_NAME = re.compile(r"\.(.+)\.[a-z0-9_]{8}" + re.escape(TMP_SUFFIX), re.DOTALL)
#: the lock every build into OUT holds while it writes there, in `.scaleprobe/`
LOCK_NAME = "build.lock"
#: where OUT cannot be locked: a temporary unchanged this long (seconds) is no live build's
_STALE_AFTER = 3600.0


@contextmanager
def writing(out: Path, names: Iterable[str]) -> Iterator[None]:
    """Hold OUT's lock while a build writes there (after `open_out`): shared with any other build
    into OUT, so that none waits for another. A build that finds no other there (it gets the lock
    exclusive first) removes, before it writes, the temporary files that builds killed outright
    left (`remove_temporaries`): no build can be writing one. With another build there its
    temporaries are live, and all stay. Where the lock cannot be had (no `fcntl`, a file system
    without `flock`) only temporaries unchanged for an hour are removed."""
    fd = None
    try:
        import fcntl
    except ImportError:
        fcntl = None  # type: ignore[assignment]
    alone: bool | None = None  # None: not known (no lock)
    if fcntl is not None:
        try:
            fd = os.open(out / STATE_DIR / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
        except OSError:  # no lock file, or no flock on this file system
            if fd is not None:
                os.close(fd)
                fd = None
    try:
        if alone is None:
            remove_temporaries(out, names, older_than=time.time() - _STALE_AFTER)
        elif alone:
            remove_temporaries(out, names)
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)  # exclusive to shared: others may write beside this build
            except OSError:
                pass
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing it releases the lock


def remove_temporaries(out: Path, names: Iterable[str], older_than: float | None = None) -> None:
    """Remove the temporary files of `replace_file` that a build killed outright left in OUT: in the
    folders of `names` (OUT-relative posix paths of the files builds write or wrote), and only plain
    files named as its temporaries of one of those files are (`.main.py.k3x9q0za.scaleprobe-tmp`
    beside `main.py`); never in a folder reached through a link. `older_than`: only those unchanged
    since then (a time.time())."""
    by_folder: dict[str, set[str]] = {}
    for rel in names:
        folder, _, name = rel.rpartition("/")
        by_folder.setdefault(folder, set()).add(name)
    for folder, files in by_folder.items():
        path = out.joinpath(*folder.split("/")) if folder else out
        if not real_folder(out, path):
            continue
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            found = _TMP_NAME.fullmatch(entry.name)
            if found is None or found.group(1) not in files:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if older_than is not None and max(info.st_mtime, info.st_ctime) > older_than:
                    continue
                os.unlink(entry.path)
            except OSError:
                pass  # left there: nothing is lost


def real_folder(out: Path, path: Path) -> bool:
    """Whether `path` is a folder of OUT reached without a link."""
    while path != out:
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
        path = path.parent
    return True


def replace_file(dest: Path, write: Callable[[Path], None]) -> None:
    """Put a new file at `dest`: `write` fills a temporary file beside it, which is then renamed
    over it. Whatever was at `dest` is replaced, never written through: a symlink (it may point at
    the user's files) or a hard link to SRC's own file (review 32: the instrumented code went into
    the user's source)."""
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=TMP_SUFFIX)
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
