"""The run-file format: the one module that writes and reads scaleprobe's per-process JSONL files.

One file per process image, `<dir>/rank<R>.<pid>.jsonl` (`rank<R>.<pid>.<n>.jsonl` where that name
is taken: a program that replaced itself with `os.exec*`), one JSON object per line, each with a `type`.
Profile, iteration and communication records are deltas since the previous flush: a reader sums
them, so a process killed between flushes keeps everything it flushed. The layout is documented in
docs/format.md; bump FORMAT_VERSION on any incompatible change.
"""

from __future__ import annotations

import os
import stat
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import ScaleprobeRuntimeError

FORMAT_NAME = "scaleprobe-run"
FORMAT_VERSION = 1


class RunFileError(ScaleprobeRuntimeError):
    """A run file that cannot be read at all (missing, not a run file, other format version)."""


@dataclass(frozen=True, slots=True)
class Region:
    id: int
    kind: str
    name: str
    file: str
    line: int


@dataclass(slots=True)  # one per call path and file: a modeler reads millions (review 21)
class ProfileStats:
    """Stats of one call path. Min, max and sumsq are per timed visit and inclusive.

    `recursive` counts the recursive calls folded into a running visit of the same call path
    (direct, or through other regions: docs/format.md): they are included in `visits` but add no
    inclusive time (inclusive time is never counted twice).
    """

    visits: int = 0
    incl_ns: int = 0
    excl_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0
    sumsq_ns: float = 0.0
    recursive: int = 0

    def add(self, other: "ProfileStats") -> None:
        if other.visits == 0 and other.incl_ns == 0:
            return
        # min and max are over timed visits: a record of folded recursive visits only (a flush
        # while the outer visit was open) has none, and its 0 is no minimum (review 48 F4)
        if other.visits > other.recursive:
            if self.visits == self.recursive:
                self.min_ns, self.max_ns = other.min_ns, other.max_ns
            else:
                self.min_ns = min(self.min_ns, other.min_ns)
                self.max_ns = max(self.max_ns, other.max_ns)
        self.visits += other.visits
        self.incl_ns += other.incl_ns
        self.excl_ns += other.excl_ns
        self.sumsq_ns += other.sumsq_ns
        self.recursive += other.recursive

    @property
    def mean_ns(self) -> float:
        return self.incl_ns / self.visits if self.visits else 0.0

    @property
    def variance_ns2(self) -> float:
        """Population variance of the inclusive time per timed visit."""
        n = self.visits - self.recursive
        if n <= 0:
            return 0.0
        mean = self.incl_ns / n
        return max(self.sumsq_ns / n - mean * mean, 0.0)


_STATS_FIELDS = ("visits", "incl_ns", "excl_ns", "min_ns", "max_ns", "sumsq_ns", "recursive")


class PackedProfile(Mapping):
    """A file's profile once read, packed (`Run.pack`): call path -> `ProfileStats`, made on access.

    A modeler holds every file of a sweep while it puts the runs together: as a dict of objects, a
    profile record took about 680 bytes (the stats, seven numbers, the path and the dict entry); here
    one number takes 8 bytes in a column (`array`), and the path tuples are shared between the files
    that `Run.pack` is given one `shared` dict for. Read-only. `rows()` gives the columns the
    modeler sums without making objects."""

    __slots__ = ("_paths", "_columns", "_index")

    def __init__(self, profile: Mapping[tuple[int, ...], ProfileStats],
                 shared: dict[tuple[int, ...], tuple[int, ...]] | None = None) -> None:
        paths = list(profile)
        if shared is not None:
            paths = [shared.setdefault(p, p) for p in paths]
        self._paths = paths
        stats = list(profile.values())
        self._columns = tuple(_column([getattr(st, f) for st in stats]) for f in _STATS_FIELDS)
        self._index: dict[tuple[int, ...], int] | None = None

    def __len__(self) -> int:
        return len(self._paths)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return iter(self._paths)

    def __contains__(self, path: object) -> bool:
        return path in self._positions()

    def __getitem__(self, path: tuple[int, ...]) -> ProfileStats:
        return self._stats(self._positions()[path])

    def _positions(self) -> dict[tuple[int, ...], int]:
        if self._index is None:  # made on the first look-up: summing the profile needs none
            self._index = {p: i for i, p in enumerate(self._paths)}
        return self._index

    def _stats(self, i: int) -> ProfileStats:
        return ProfileStats(*(c[i] for c in self._columns))

    def items(self) -> Iterator[tuple[tuple[int, ...], ProfileStats]]:  # type: ignore[override]
        return ((p, self._stats(i)) for i, p in enumerate(self._paths))

    def values(self) -> Iterator[ProfileStats]:  # type: ignore[override]
        return (self._stats(i) for i in range(len(self._paths)))

    def rows(self) -> Iterator[tuple[tuple[int, ...], int | float, int | float, int | float]]:
        """(path, visits, incl_ns, excl_ns) of every call path, in the order read."""
        visits, incl, excl = self._columns[:3]
        return zip(self._paths, visits, incl, excl)


class PackedRecords(Sequence):
    """A file's step or epoch records once read, packed (`Run.pack`): the same dicts, made on access.

    As dicts, a step record took about 590 bytes held (review 21: a run of a million steps per rank
    is held whole by the modeler); here a field takes 8 bytes in a column (`array` for integers and
    floats, a list otherwise) and a nested object (`memory`) is packed the same way. Read-only."""

    __slots__ = ("_n", "_columns")

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self._n = len(records)
        keys: dict[str, None] = {}
        for rec in records:
            keys.update(dict.fromkeys(rec))
        self._columns = [(k, _Column([rec.get(k, _ABSENT) for rec in records])) for k in keys]

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._record(j) for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("record index out of range")
        return self._record(i)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self._record(i) for i in range(self._n))

    def _record(self, i: int) -> dict[str, Any]:
        out = {}
        for k, col in self._columns:
            v = col.get(i)
            if v is not _ABSENT:
                out[k] = v
        return out


_ABSENT = object()  # a field a record does not have


class _Column:
    """One field of packed records: integers or floats in an `array` (with a mask for None and
    missing values), dicts as packed records of their own, anything else in a list."""

    __slots__ = ("_kind", "_values", "_mask")

    _NONE, _MISSING = 1, 2

    def __init__(self, values: list[Any]) -> None:
        have = [v for v in values if v is not None and v is not _ABSENT]
        self._mask: bytearray | None = None
        if len(have) < len(values):
            self._mask = bytearray(self._NONE if v is None else self._MISSING if v is _ABSENT else 0 for v in values)
        self._kind, self._values = "list", values
        if have and all(type(v) is dict for v in have):
            self._kind, self._values = "dicts", PackedRecords([v if type(v) is dict else {} for v in values])
            return
        for code, kind in (("q", int), ("d", float)):
            if have and all(type(v) is kind for v in have):
                try:
                    self._kind = "array"
                    self._values = array(code, [v if type(v) is kind else 0 for v in values])
                    return
                except OverflowError:
                    self._kind = "list"
        if self._mask is not None and self._kind == "list" and not have:
            self._values = []  # None or missing everywhere: the mask says which

    def get(self, i: int) -> Any:
        if self._mask is not None and self._mask[i]:
            return None if self._mask[i] == self._NONE else _ABSENT
        return self._values[i]


def profile_rows(profile: Mapping[tuple[int, ...], ProfileStats]) -> Iterator[tuple[tuple[int, ...], Any, Any, Any]]:
    """(path, visits, incl_ns, excl_ns) of a profile, packed or not."""
    if isinstance(profile, PackedProfile):
        return profile.rows()
    return ((p, st.visits, st.incl_ns, st.excl_ns) for p, st in profile.items())


def _column(values: list[int | float]) -> array:
    """Integers as 64-bit integers, as written; a column with a fraction (or past 2**63) as floats."""
    try:
        return array("q", values)
    except (TypeError, OverflowError):
        return array("d", values)


def is_helper_process(header: dict[str, Any]) -> bool:
    """A process started by a rank (DataLoader or multiprocessing worker, forked or spawned), not a rank."""
    return bool(header.get("child_of") or header.get("forked_from"))


@dataclass
class Run:
    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    regions: dict[int, Region] = field(default_factory=dict)
    #: a dict while read; a `PackedProfile` once `pack`ed
    profile: Mapping[tuple[int, ...], ProfileStats] = field(default_factory=dict)
    iterations: dict[int, int] = field(default_factory=dict)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    comms: list[dict[str, Any]] = field(default_factory=list)
    throttled: dict[int, dict[str, Any]] = field(default_factory=dict)
    gpu_regions: dict[int, dict[str, int]] = field(default_factory=dict)  # rid -> {samples, gpu_ns}
    events: list[tuple[int, int, int, int]] = field(default_factory=list)  # SCALEPROBE_TRACE: (rid, start_ns, end_ns, tid)
    threads: dict[int, str] = field(default_factory=dict)  # SCALEPROBE_TRACE: native thread id -> Python thread name
    end: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    # lines whose record was malformed or out of place and left out (reported in `problems`): what
    # they held is missing from the totals above
    dropped_lines: list[int] = field(default_factory=list)

    @property
    def is_helper_process(self) -> bool:
        return is_helper_process(self.header)

    def pack(self, shared: dict[Any, Any] | None = None) -> None:
        """Pack the profile (`PackedProfile`) and the step and epoch records (`PackedRecords`),
        read-only from now on, and share the path tuples and
        `Region`s with the other files packed with the same `shared` dict: a reader that keeps
        many files (the modeler) holds about a tenth of the memory."""
        if not isinstance(self.profile, PackedProfile):
            self.profile = PackedProfile(self.profile, shared)
        if not isinstance(self.steps, PackedRecords):
            self.steps = PackedRecords(self.steps)  # type: ignore[assignment]
            self.epochs = PackedRecords(self.epochs)  # type: ignore[assignment]
        if shared is not None:
            self.regions = {rid: shared.setdefault(reg, reg) for rid, reg in self.regions.items()}

    def callpath_name(self, path: tuple[int, ...], sep: str = "->") -> str:
        """Call path of region ids as names joined by `sep` (unknown ids as `#<id>`)."""
        return sep.join(self.regions[r].name if r in self.regions else f"#{r}" for r in path)


def _loads():
    try:
        import orjson

        return orjson.loads
    except ImportError:  # orjson is optional: the standard library is enough, only slower
        import json

        decoder = json.JSONDecoder(parse_constant=_not_json)

        def loads(line: bytes) -> Any:
            return decoder.decode(line.decode("utf-8"))

        return loads


def _not_json(name: str) -> Any:
    """NaN, Infinity and -Infinity, which json.loads accepts: not JSON, and orjson refuses them."""
    raise ValueError(f"{name} is not valid JSON")


def _valid_utf8(value: Any) -> Any:
    """`value` with lone surrogates in its strings shown as escapes: a file name or argument that is
    not valid UTF-8 (`run_\\xff.py`, which Python holds as `run_\\udcff.py`) reaches the header and
    the region table, and orjson takes no such string."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_valid_utf8(k): _valid_utf8(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_utf8(v) for v in value]
    return value


def load_encoder() -> None:
    """Import orjson (where it is installed) now, not when the recorder first writes. The launcher
    calls this before it turns SIGTERM into SystemExit: that exception raised inside orjson's module
    initialisation (the scheduler stopping a slow-starting rank while its recorder opened its file)
    crashed the interpreter with SIGSEGV, leaving neither run file nor error file (review 72 F7)."""
    try:
        import orjson  # noqa: F401
    except ImportError:  # optional: the standard library's json is imported before any handler too
        import json  # noqa: F401


def _dumps():
    """Return a function: list of records -> bytes of complete lines."""
    try:
        import orjson

        dumps = orjson.dumps
        opt = orjson.OPT_NON_STR_KEYS

        def encode(records: Iterable[dict]) -> bytes:
            try:
                return b"".join(dumps(r, option=opt) + b"\n" for r in records)
            except TypeError:  # a str orjson refuses: see _valid_utf8 (records are lists: read again)
                return b"".join(dumps(_valid_utf8(r), option=opt) + b"\n" for r in records)

    except ImportError:
        import json

        dumps = json.dumps

        def encode(records: Iterable[dict]) -> bytes:
            # UTF-8 as orjson writes it; a lone surrogate (see _valid_utf8) would be written as a
            # \udcff escape, which orjson, and so the readers where it is installed, refuses
            try:
                return "".join(dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records).encode()
            except UnicodeEncodeError:  # records are lists: read again
                return "".join(dumps(_valid_utf8(r), separators=(",", ":"), ensure_ascii=False) + "\n"
                               for r in records).encode()

    return encode


def file_on_the_way(path: Any) -> str | None:
    """What stands where `path` or one of its parents should be a folder, said as such (`X is a file,
    not a folder`; a device, a FIFO, a socket or a broken link too: review 65 F6, `/dev/full` said
    `File exists`), or None."""
    if not path:
        return None
    p = Path(os.fsdecode(path))
    for q in (p, *p.parents):
        try:
            mode = q.stat().st_mode
        except OSError:
            if q.is_symlink():
                return f"{q} is a broken symbolic link, not a folder"
            continue
        if stat.S_ISDIR(mode):
            continue
        kind = ("a file" if stat.S_ISREG(mode) else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a folder either")
        return f"{q} is {kind}, not a folder"
    return None


def _identity(fd: int) -> tuple[int, int] | None:
    """The file a descriptor names (device, inode), or None where it is closed."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def run_file_name(rank: int, pid: int, n: int = 0) -> str:
    """The name of a process's run file; `n` > 0: the next free one for the same process (a program
    that replaced itself with `os.exec*` keeps its pid; a pid the system reused)."""
    return f"rank{rank}.{pid}.jsonl" if n == 0 else f"rank{rank}.{pid}.{n}.jsonl"


#: how many names `claim_run_file` tries before it gives up (a folder full of one pid's files)
_NAMES_TRIED = 1000


def above_stdio(fd: int) -> int:
    """`fd`, moved above 0, 1 and 2 where it is one of them: a program started with its stderr
    closed (`2>&-`) got its run file as descriptor 2, and what it wrote to stderr went into the
    run file (review 58 F9). The low descriptor is closed again, as the program had it."""
    if fd > 2:
        return fd
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def claim_run_file(directory: str, rank: int, pid: int) -> tuple[str, int]:
    """Create the first free run file name of this process in `directory`, never another file's:
    (its path, an open descriptor). The folder must exist."""
    for n in range(_NAMES_TRIED):
        path = os.path.join(directory, run_file_name(rank, pid, n))
        try:
            return path, above_stdio(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644))
        except FileExistsError:
            continue
    raise FileExistsError(17, f"{_NAMES_TRIED} run files of process {pid} already", os.path.join(directory, run_file_name(rank, pid)))


def header_record(header: Mapping[str, Any]) -> dict[str, Any]:
    rec = {"type": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION}
    rec.update(header)
    return rec


def rename_run_file(path: str, rank: int, pid: int) -> str:
    """Give the run file at `path` the name of `rank`, never taking another file's (the file of this
    process's image before an `os.exec*` has that rank's name already): its new path, or `path`
    where it has that name already or the rename failed."""
    directory = os.path.dirname(path)
    for n in range(_NAMES_TRIED):
        named = os.path.join(directory, run_file_name(rank, pid, n))
        if named == path:
            return path
        try:
            os.link(path, named)  # fails where `named` exists: never replaces it, as rename would
        except FileExistsError:
            continue
        except OSError:  # a filesystem without hard links
            if os.path.exists(named):
                continue
            try:
                os.rename(path, named)
            except OSError:
                return path
            return named
        try:
            os.unlink(path)
        except OSError:
            pass
        return named
    return path


class RunWriter:
    """Appends complete lines to one run file; every batch goes out in one write call.

    Lines reach the kernel with each `write_records`, so a process killed with SIGKILL leaves a file
    readable up to its last batch; `sync=True` also fsyncs (used for the final batch).

    A write that fails (disk full, file size limit) raises, but its bytes are kept: the next
    `write_records` writes them first, so a temporary failure loses nothing and a line cut by a
    partial write is completed rather than left in the middle of the file. `pending` says how many
    bytes are waiting; `drop_pending()` gives them up (the next batch then starts on a fresh line).

    The descriptor is checked before each batch: a program that closes descriptors it does not own
    (`os.closerange`, a daemon library) may have it closed, or reused for a file of its own, which
    our records must never reach (review 26: they went into the program's output file). The run
    file is then opened again by its path, the program's descriptor left alone. `removed` says
    whether the file was deleted while written (its data is then lost).
    """

    def __init__(self, path: str | os.PathLike[str], fd: int | None = None) -> None:
        """`fd`: the file at `path`, opened already (`claim_run_file`)."""
        self.path = Path(path)
        if fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = above_stdio(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        self._fd = fd
        self._identity = _identity(self._fd)
        self._encode = _dumps()
        self._pending = bytearray()  # bytes of earlier batches that could not be written yet
        self._midline = False  # the file ends in a cut-off line whose rest was dropped
        self._at_line_start = True  # the last byte written ends a line

    @property
    def pending(self) -> int:
        return len(self._pending)

    def drop_pending(self) -> int:
        """Give up the bytes a failed write left; returns how many there were."""
        n = len(self._pending)
        if n:
            self._midline = self._midline or not self._at_line_start
            self._pending = bytearray()
        return n

    def write_header(self, header: dict[str, Any]) -> None:
        self.write_records([header_record(header)])

    @classmethod
    def create(cls, directory: str, rank: int, pid: int, header: dict[str, Any]) -> "RunWriter":
        """The run file of this process in `directory` (`claim_run_file`), its header written at once:
        encoded first, so that nothing slow (the encoder's import) lies between the file's creation
        and its first line, where a signal's default action left an empty file (review 51 F2)."""
        encode = _dumps()
        first = encode([header_record(header)])
        path, fd = claim_run_file(directory, rank, pid)
        try:
            written = os.write(fd, first)
        except OSError:
            written = 0
        w = cls(path, fd)
        w._encode = encode
        if written < len(first):  # a short write, or a failed one (disk full): tried again, raised
            w._pending += first[written:]
            w._at_line_start = False
            try:
                w.write_records([])
            except OSError:
                w.close()
                raise
        return w

    def write_records(self, records: Iterable[dict[str, Any]], sync: bool = False) -> None:
        data = self._encode(records)
        if self._midline:  # after a dropped partial line: never glue a record onto its half
            self._pending += b"\n"
            self._midline = False
        self._pending += data
        self._still_ours()
        pending = self._pending
        view = memoryview(pending)
        done = 0
        try:
            while done < len(view):
                done += os.write(self._fd, view[done:])
        finally:
            if done:
                self._at_line_start = pending[done - 1] == 0x0A
                # a new buffer, never a resize: a failed write's traceback may still hold a view
                self._pending = pending[done:]
        if sync:
            try:
                os.fsync(self._fd)
            except OSError:  # some filesystems (pipes, /dev/null) refuse fsync; the data is written
                pass

    def _still_ours(self) -> None:
        """Open the run file again by its path where our descriptor was closed or now names another
        file (the program's: it is not ours to close)."""
        if self._fd >= 0 and _identity(self._fd) != self._identity:
            self._fd = above_stdio(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
            self._identity = _identity(self._fd)

    @property
    def removed(self) -> bool:
        """The file was deleted (or its folder) while it was written: what it holds is lost."""
        if self._fd < 0:
            return not self.path.exists()
        try:
            return os.fstat(self._fd).st_nlink == 0
        except OSError:
            return False

    def close(self) -> None:
        if self._fd >= 0:
            if _identity(self._fd) == self._identity:  # never the program's descriptor of the same number
                os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BOM = b"\xef\xbb\xbf"
_STATS_KEYS = ("visits", "incl_ns", "excl_ns", "min_ns", "max_ns", "sumsq_ns")


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read one run file. Cut-off or malformed lines are skipped and listed in `run.problems`."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            return _read_lines(p, f)
    except OSError as e:
        raise RunFileError(f"{p}: cannot read run file: {e.strerror or e}") from e


def _read_lines(p: Path, f: Any) -> Run:
    """`read_run` of the open file `f`, a line at a time: the file is never held whole (review 54
    F2: 2.25x its size, 684 MB for an hour's 304 MB file)."""
    loads = _loads()
    run = Run(path=p)
    seen_header = False
    for lineno, line in enumerate(f, 1):
        if lineno == 1:
            if line.startswith(b"\x1f\x8b"):
                raise RunFileError(f"{p}: compressed with gzip, not a run file as written: decompress it (gunzip) first")
            if line.startswith(_BOM):
                line = line[len(_BOM):]  # saved by an editor that marks UTF-8 (review 26)
            if not line.endswith(b"\n") and b"\r" in line.rstrip(b"\r"):
                raise RunFileError(f"{p}: its lines end with a carriage return alone, not a newline: not a run file "
                                   "as written (convert the line ends)")  # (review 57 F3)
        if not line.strip():
            continue
        if not line.endswith(b"\n"):  # the last line only
            run.problems.append(f"{p}:{lineno}: incomplete last line (process killed while writing?)")
            continue
        try:
            rec = loads(line)
        except ValueError as e:
            run.problems.append(f"{p}:{lineno}: not valid JSON: {e}")
            run.dropped_lines.append(lineno)
            continue
        if not isinstance(rec, dict) or "type" not in rec:
            run.problems.append(f"{p}:{lineno}: not a record object with a 'type'")
            run.dropped_lines.append(lineno)
            continue
        if not seen_header:
            if rec["type"] != "header" or rec.get("format") != FORMAT_NAME:
                if run.problems:  # the header line itself did not parse (review 26: NaN in its params)
                    raise RunFileError(f"{run.problems[0]}; no complete header")
                raise RunFileError(f"{p}:{lineno}: not a scaleprobe run file (first record is not a header)")
            if type(rec.get("version")) is not int or rec["version"] != FORMAT_VERSION:  # (`true` == 1: review 57 F8)
                raise RunFileError(
                    f"{p}: run file format version {rec.get('version')!r}, this scaleprobe reads version {FORMAT_VERSION}"
                )
            why = _bad_header(rec)
            if why:  # the file's rank or process cannot be told (review 57 F1, F8)
                raise RunFileError(f"{p}:{lineno}: bad header: {why}")
            run.header = {k: v for k, v in rec.items() if k not in ("type", "format", "version")}
            seen_header = True
            continue
        t = rec["type"]
        if not isinstance(t, str):  # (an object is unhashable: review 57 F1)
            run.problems.append(f"{p}:{lineno}: record type {t!r} is not a string; skipped")
            run.dropped_lines.append(lineno)
            continue
        out_of_place = ("a second header record (two runs written to one file?)" if t == "header"
                        else f"{t!r} record after the end record" if run.end is not None else None)
        if out_of_place:
            run.problems.append(f"{p}:{lineno}: {out_of_place}; skipped")
            run.dropped_lines.append(lineno)
            continue
        if t not in _RECORD_TYPES:
            # Newer minor additions are skipped rather than failing old readers.
            run.problems.append(f"{p}:{lineno}: unknown record type {t!r} skipped")
            continue
        try:
            _apply(run, rec)
        except KeyError as e:
            run.problems.append(f"{p}:{lineno}: bad {t!r} record: missing field {e.args[0]!r}")
            run.dropped_lines.append(lineno)
        except (TypeError, ValueError) as e:
            why = str(e) if isinstance(e, _NotANumber) else f"{type(e).__name__}: {e}"
            run.problems.append(f"{p}:{lineno}: bad {t!r} record: {why}")
            run.dropped_lines.append(lineno)
    if not seen_header:
        if run.problems:
            raise RunFileError(f"{run.problems[0]}; no complete header")
        raise RunFileError(f"{p}: empty run file (no header)")
    if run.end is None:
        run.problems.append(f"{p}: no end record (process still running or killed)")
    elif run.end.get("lost_flushes"):
        run.problems.append(f"{p}: {run.end['lost_flushes']} flush(es) could not be written (disk full?):"
                            " the run's totals are short")
    return run


def _apply(run: Run, rec: dict[str, Any]) -> None:
    t = rec["type"]
    if t == "profile":
        ids = rec["path"]
        # What the writer writes takes the fast tests (exact int and float types, within the
        # limits: NaN fails a comparison); anything else the full checks, which name the field.
        # They cost the reader 18% (review 60); the fast tests take half the time of the old code.
        if ids.__class__ is list and ids and all(x.__class__ is int for x in ids):
            path = tuple(ids)
        else:
            if not isinstance(ids, list):  # (a string "12" read as ids 1, 2: review 57 F8)
                raise _NotANumber(f"path={ids!r} is not a list of region ids")
            if not ids:  # (dropped without a word further on: review 101 L1)
                raise _NotANumber("path=[] names no region")
            path = tuple(_whole_value(x, "path") for x in ids)
        vals = [rec[k] for k in _STATS_KEYS]
        for v, most in zip(vals, _LIMITS):
            c = v.__class__
            if not ((c is int or c is float) and -most <= v <= most):
                vals = [_count(rec, k) for k in _STATS_KEYS]  # raises, naming the field
                break
        r = rec.get("recursive", 0)
        st = ProfileStats(*vals, recursive=r if r.__class__ is int else _whole_value(r, "recursive"))
        have = run.profile.get(path)
        if have is None:
            run.profile[path] = st
        else:
            have.add(st)
    elif t == "region":
        rid = _whole(rec, "id")
        region = Region(rid, _text(rec, "kind"), _text(rec, "name"), _text(rec, "file", ""), _whole(rec, "line", 0))
        have = run.regions.get(rid)
        if have is not None and have != region:  # the call paths would change under the records read so far
            raise _NotANumber(f"region id {rid} defined again as {region.kind} {region.name!r} "
                              f"({have.kind} {have.name!r} before); the first definition is kept")
        run.regions[rid] = region
    elif t == "iterations":
        rid = _whole(rec, "region")
        run.iterations[rid] = run.iterations.get(rid, 0) + _whole(rec, "count")
    elif t == "epoch":
        run.epochs.append(_series(rec))
    elif t == "step":
        run.steps.append(_series(rec))
    elif t == "comm":
        run.comms.append(_comm(rec))
    elif t == "events":
        listed = rec["events"]
        if listed.__class__ is not list:
            raise _NotANumber(f"events={listed!r} is not a list of events")
        # each event alone: one bad value left 8 of 410 slices (review 101 L3)
        events = []
        for e in listed:
            if e.__class__ is list and len(e) == 4 and all(x.__class__ is int for x in e):
                events.append(tuple(e))
            elif isinstance(e, list) and len(e) == 4:
                try:
                    events.append(tuple(_whole_value(x, "events") for x in e))
                except _NotANumber:
                    pass
        names = rec.get("threads")
        if isinstance(names, dict):  # (newer files: the Python names of the threads)
            for tid, name in names.items():
                if isinstance(name, str) and isinstance(tid, str) and tid.isdigit():
                    run.threads[int(tid)] = name
        run.events.extend(events)
        if len(events) < len(listed):
            raise _NotANumber(f"{len(listed) - len(events)} of its {len(listed)} events are not [region, start_ns, "
                              "end_ns, thread id] in whole numbers: left out, the others kept")
    elif t == "gpu":
        rid, samples, gpu_ns = _whole(rec, "region"), _whole(rec, "samples"), _whole(rec, "gpu_ns")
        g = run.gpu_regions.setdefault(rid, {"samples": 0, "gpu_ns": 0})
        g["samples"] += samples
        g["gpu_ns"] += gpu_ns
    elif t == "throttled":
        run.throttled[_whole(rec, "region")] = {k: v for k, v in rec.items() if k not in ("type", "region")}
    elif t == "end":
        why = _bad_end(rec)
        if why:  # (`lost_flushes: -1` read as flushes lost, `exit_code: "x"` as ok: review 57 F8)
            raise _NotANumber(why)
        run.end = {k: v for k, v in rec.items() if k != "type"}
    elif t == "rank":
        # torch.distributed's rank and world size, known once its group was up: they stand for the
        # header's, and a process that a multiprocessing parent started as a rank is no helper
        rank, world = _whole(rec, "rank"), _whole(rec, "world_size")
        if rank < 0 or world < 1 or rank >= world:
            raise ValueError(f"rank {rank} of world size {world}")
        header = {k: v for k, v in run.header.items() if k not in ("child_of", "forked_from")}
        header.update(rank=rank, world_size=world, rank_from="torch.distributed")
        if rec.get("started_by") is not None:
            header["started_by"] = rec["started_by"]
        if isinstance(rec.get("recorded_ranks"), list):
            header["recorded_ranks"] = rec["recorded_ranks"]
        run.header = header


class _NotANumber(ValueError):
    pass


def _count(rec: dict[str, Any], key: str) -> int | float:
    """A profile field, checked before anything is added: a string or NaN would leave the sums half updated."""
    v = rec[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise _NotANumber(f"{key}={v!r} is not a number")
    if abs(v) > (_MOST_SQUARED if key == "sumsq_ns" else _MOST):
        # (1e200 ns made the fit's squares overflow: review 57 F2)
        raise _NotANumber(f"{key}={v!r} is more than a run can record ({_MOST:.3g} ns, 2^63)")
    return v


_MOST = float(1 << 63)  # a count or a time in ns: the C probes' 64-bit counters
_MOST_INT = 1 << 63
_MOST_SQUARED = _MOST * _MOST
_LIMITS = (_MOST,) * (len(_STATS_KEYS) - 1) + (_MOST_SQUARED,)  # sumsq_ns last


_MISSING = object()


def _whole_value(v: Any, key: str) -> int:
    """`v` as an int: a JSON integer, or a float with no fraction (`true` is no number here)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise _NotANumber(f"{key}={v!r} is not a whole number")
    return int(v)


def _whole(rec: dict[str, Any], key: str, default: Any = _MISSING) -> int:
    """The whole-number field `key` (KeyError where it is missing and has no default)."""
    v = rec[key] if default is _MISSING else rec.get(key, default)
    return _whole_value(v, key)


def _text(rec: dict[str, Any], key: str, default: Any = _MISSING) -> str:
    v = rec[key] if default is _MISSING else rec.get(key, default)
    if not isinstance(v, str):
        raise _NotANumber(f"{key}={v!r} is not a string")
    return v


# header fields that say which process of which rank wrote the file: (key, lowest value)
_HEADER_WHOLE = (("rank", 0), ("world_size", 1), ("local_rank", 0), ("pid", 0), ("ppid", 0))


def _bad_header(rec: dict[str, Any]) -> str | None:
    """Why the header's rank or process fields cannot be right, or None (a field left out or null
    is not checked: older files and helper processes leave some out)."""
    whole = {}
    for key, low in _HEADER_WHOLE:
        v = rec.get(key)
        if v is None:
            continue
        try:
            n = whole[key] = _whole_value(v, key)
        except _NotANumber as e:
            return str(e)
        if n < low:
            return f"{key}={v!r} is below {low}"
    if "rank" in whole and "world_size" in whole and whole["rank"] >= whole["world_size"]:
        # (review 118 LOW-3: such a file stood in for another rank of its run, unnamed)
        return f"rank={rec['rank']!r} is not below world_size={rec['world_size']!r}"
    return None


def _bad_end(rec: dict[str, Any]) -> str | None:
    """Why the end record cannot be read as how the process ended, or None."""
    lost = rec.get("lost_flushes")
    if lost is not None and (isinstance(lost, bool) or not isinstance(lost, int) or lost < 0):
        return f"lost_flushes={lost!r} is not a count"
    code = rec.get("exit_code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        return f"exit_code={code!r} is not an exit status"
    status = rec.get("status")
    if status is not None and not isinstance(status, str):
        return f"status={status!r} is not a string"
    return None


_RECORD_TYPES = frozenset(("profile", "region", "iterations", "epoch", "step", "comm", "events", "gpu", "throttled", "end",
                           "rank"))


# a step's or epoch's fields: those it must have, and those that are whole numbers or null (review
# 101 H1/H2: a `duration_ns` of "x" crashed `modeler timeline`; in fit, report and export the step
# was left out of step_time and kept in data_wait, 2^70 ns taken as a time, a weight of 0 made a
# step count for nothing, all without a word)
_SERIES_NEEDED = ("region", "index", "duration_ns")
_SERIES_WHOLE = ("start_ns", "data_wait_ns", "comm_ns", "gpu_ns", "step", "tid")
# a comm record's whole-number fields (null where the table allows it)
_COMM_WHOLE = ("flush", "bytes", "calls", "time_ns", "gpu_calls", "gpu_ns", "group_size", "failed", "unfinished")


def _bounded(v: Any, key: str) -> int:
    """`v` as a whole number a run can record (at most 2^63 in size), naming `key` where it is not."""
    n = _whole_value(v, key)
    if not -_MOST <= n <= _MOST:
        raise _NotANumber(f"{key}={v!r} is more than a run can record ({_MOST:.3g} ns, 2^63)")
    return n


def _series(rec: dict[str, Any]) -> dict[str, Any]:
    """A step or epoch record (the parsed dict itself, without its type), its fields checked (the
    writer's exact ints take the fast test): a record with a field of the wrong type is left out
    whole, named, for every metric alike."""
    get = rec.get
    for k in _SERIES_NEEDED:
        v = rec[k]  # KeyError: named as a missing field
        if v.__class__ is not int or v > _MOST_INT or v < -_MOST_INT:
            rec[k] = _bounded(v, k)
    for k in _SERIES_WHOLE:
        v = get(k)
        if v is not None and (v.__class__ is not int or v > _MOST_INT or v < -_MOST_INT):
            rec[k] = _bounded(v, k)
    w = get("weight")
    if w is not None and (w.__class__ is not int or w > _MOST_INT or w < 1):
        w = rec["weight"] = _bounded(w, "weight")
        if w == 0:  # (a negative one is named as impossible with the other negative values)
            raise _NotANumber("weight=0: a step record stands for at least its own step")
    active = get("active")
    if active is not None and active.__class__ is not bool:
        raise _NotANumber(f"active={active!r} is not true or false")
    memory = get("memory", _MISSING)
    if memory is _MISSING:
        rec["memory"] = None
    elif memory is not None and memory.__class__ not in (dict, int, float):  # (a byte count in older files)
        raise _NotANumber(f"memory={memory!r} is not an object")
    for k in ("data_wait_ns", "comm_ns", "gpu_ns"):
        if k not in rec:
            rec[k] = None
    del rec["type"]
    return rec


def _comm(rec: dict[str, Any]) -> dict[str, Any]:
    """A comm record (the parsed dict itself, without its type), its fields checked as `_series`
    checks a step's (review 101 H2: an `op` of 5 or a `callpath` of "1,2" became call paths, a
    `time_ns` of "x" vanished, 2.5 calls were counted)."""
    op = rec["op"]  # KeyError: named as a missing field
    if op.__class__ is not str:
        raise _NotANumber(f"op={op!r} is not the name of an operation")
    path = rec.get("callpath")
    if path is not None and not (path.__class__ is list and all(x.__class__ is int for x in path)):
        if not isinstance(path, list):
            raise _NotANumber(f"callpath={path!r} is not a list of region ids")
        rec["callpath"] = [_whole_value(x, "callpath") for x in path]
    get = rec.get
    for k in _COMM_WHOLE:
        v = get(k)
        if v is not None and (v.__class__ is not int or v > _MOST_INT or v < -_MOST_INT):
            rec[k] = _bounded(v, k)
    del rec["type"]
    return rec


def find_run_files(directory: str | os.PathLike[str]) -> list[Path]:
    """All run files under `directory` (recursively), sorted."""
    d = Path(directory)
    if not d.is_dir():
        raise RunFileError(f"{d}: not a directory")
    return sorted(d.rglob("rank*.jsonl"))


def iter_runs(directory: str | os.PathLike[str]) -> Iterator[Run]:
    for f in find_run_files(directory):
        yield read_run(f)
