"""The launcher's own record of each run, `<run-dir>/launch.json`, and resuming from it.

The record is written when a run starts (status `running`) and replaced, atomically, when it ends.
A re-run of the same sweep skips every run whose record says `ok` for the same parameters and the
same program (the script compared as the file it resolves to, however it was spelled), started the
same way (`start_mode`: --ranks-by-program, --spawn, the interpreter's options) and whose run files
are all still there with their end records (sweep_files); any other run is started again from
scratch, after its old rank files are removed.

A launcher holds a lock on `<run-dir>/.launch.lock` (flock) while it decides about a run and runs it,
so that two launchers on one `--out` never run, clear or record the same run at once; the lock goes
with the launcher's process, however it ends. Under srun, mpiexec and torchrun each rank holds its
own, `<run-dir>/.launch.rank<R>.lock`, so that two launches into one run directory at once (or two
processes that took the same rank) are refused rather than removing each other's live files. A
directory whose record belongs to other parameters is never cleared: the run takes the next name
`<name>_alt-<n>` instead.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import socket
import sys
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

from runtime.launch_errors import LaunchError
from runtime.runfile import above_stdio

RECORD = "launch.json"
LOCK = ".launch.lock"
RECORD_VERSION = 1
STATUSES = ("running", "ok", "failed", "timeout", "interrupted")


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed
        return ""


@dataclass
class RunRecord:
    experiment: str
    run_id: str
    params: dict[str, Any]
    repetition: int
    command: list[str]
    status: str = "running"
    exit_code: int | None = None
    failed_rank: int | None = None
    error: str | None = None
    wall_s: float | None = None
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    version: int = RECORD_VERSION
    # the user's program and its arguments after substitution: a resumed sweep must not take a run
    # made with other program arguments for a finished one (empty in records of older launchers)
    program: list[str] = field(default_factory=list)
    # the launcher's working directory, which a relative script path in `program` is relative to
    # (empty in records of older launchers)
    cwd: str = field(default_factory=_cwd)
    # the run files (`rank*.jsonl`) that had their end record when the run ended: a resume makes
    # the run again when one is gone or cut off (None in records of older launchers)
    files: list[str] | None = None
    # whether the launcher ran the program with --instrument (None in records of older launchers): a
    # run that wrote no run file without it is made again by a resume with it (review 58 F3)
    instrument: bool | None = None


def prepare_root(out: Path, experiment: str) -> None:
    """Create `<out>/<experiment>` before anything runs; a path that cannot be one is an error naming --out."""
    root = out / experiment
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchError(f"--out {out}: cannot create the directory {root}: {exc.strerror}") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise LaunchError(f"--out {out}: the directory {root} is not writable")


def check_folder(folder: Path, option: str) -> None:
    """Whether `folder` can be made and written, leaving nothing behind (review 40: for --dry-run,
    and --cache-dir, which was silently unused): the nearest existing folder on the way must be a
    writable folder. `option` (`--out runs`) names it in the error."""
    for there in (folder, *folder.parents):
        if os.path.lexists(there):
            if not os.path.isdir(there):
                raise LaunchError(f"{option}: cannot create the directory {folder}: {there} is a file, not a folder")
            if not os.access(there, os.W_OK | os.X_OK):
                raise LaunchError(f"{option}: the directory {there} is not writable")
            _try_folder(there, folder, option)
            return


def _try_folder(there: Path, folder: Path, option: str) -> None:
    """Make a folder in `there` (`folder`, or the nearest folder on the way to it that exists) and
    remove it again: `os.access` says yes to root everywhere, also where nothing can be made
    (review 79 F9: `--cache-dir /proc/x` passed, and the hook then silently cached nothing)."""
    import tempfile

    try:
        probe = tempfile.mkdtemp(prefix=".scaleprobe-check-", dir=there)
    except OSError as exc:
        what = "write in" if there == folder else f"create the directory {folder} in"
        raise LaunchError(f"{option}: cannot {what} {there}: {exc.strerror or exc}") from None
    try:
        os.rmdir(probe)
    except OSError:
        pass


def write_record(directory: Path, record: RunRecord) -> None:
    tmp = directory / f".{RECORD}.{os.getpid()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(asdict(record), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        # Atomic: a sweep killed mid-write leaves the old record or the new one, never half of one.
        os.replace(tmp, directory / RECORD)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise LaunchError(f"cannot write the launch record {directory / RECORD}: {exc.strerror}") from None


def read_record(directory: Path, advice: bool = True) -> RunRecord | None:
    """The run's record, or None when there is none yet; a broken record is an error naming it and
    what is wrong with it (with `advice`, also what to do)."""
    path = directory / RECORD
    todo = "; delete it to re-run this run" if advice else ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise LaunchError(f"{path}: unreadable launch record (a directory, not a file){todo}") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            # no record to delete: the name is what is wrong (review 91 F3; the launcher checks the
            # names of a sweep's runs before it reads any: sweep_checks.check_name_lengths)
            raise LaunchError(f"{directory}: the run directory's name is too long for the file system ({exc.strerror}: "
                              f"{len(os.fsencode(directory.name))} bytes, the path "
                              f"{len(os.fsencode(os.path.abspath(path)))}): shorten the parameter values or --out"
                              ) from None
        raise LaunchError(f"{path}: unreadable launch record ({exc.strerror or exc}){todo}") from None
    except UnicodeDecodeError as exc:
        raise LaunchError(f"{path}: unreadable launch record (not UTF-8: byte 0x{exc.object[exc.start]:02x} "
                          f"at offset {exc.start}){todo}") from None
    except ValueError as exc:
        raise LaunchError(f"{path}: unreadable launch record (not valid JSON: {exc}){todo}") from None
    what = _malformed(data)
    if what is not None:
        raise LaunchError(f"{path}: {what}{todo}")
    known = {f.name for f in fields(RunRecord)}
    # keys a newer launcher may add are left out, as a run file's unknown records are
    return RunRecord(**{k: v for k, v in data.items() if k in known})


_KINDS = {dict: "a JSON object", list: "a JSON list", str: "a JSON string", bool: "a JSON boolean",
          int: "a JSON number", float: "a JSON number", type(None): "JSON null"}


def _malformed(data: Any) -> str | None:
    """What makes `data` no launch record, or None."""
    if not isinstance(data, dict):
        return f"unreadable launch record ({_KINDS.get(type(data), type(data).__name__)}, not an object)"
    if "version" not in data:
        return "malformed launch record (no 'version' field)"
    if data["version"] != RECORD_VERSION:
        return f"launch record version {data['version']!r}, expected {RECORD_VERSION} (written by another scaleprobe?)"
    missing = [f.name for f in fields(RunRecord)
               if f.default is MISSING and f.default_factory is MISSING and f.name not in data]
    if missing:
        return f"malformed launch record (no {', '.join(repr(m) for m in missing)} field{'s' if len(missing) > 1 else ''})"
    expected = {"params": (dict,), "status": (str,), "program": (list,), "command": (list,), "cwd": (str,),
                "files": (list, type(None)), "repetition": (int,)}
    for key, kinds in expected.items():
        if key in data and not isinstance(data[key], kinds):
            return f"malformed launch record ({key!r} is {_KINDS.get(type(data[key]), type(data[key]).__name__)})"
    if data["status"] not in STATUSES:
        return f"malformed launch record (status {data['status']!r}, expected one of {', '.join(STATUSES)})"
    for key in ("program", "files"):
        if not all(isinstance(x, str) for x in data.get(key) or ()):
            return f"malformed launch record ({key!r} holds something that is not a string)"
    return None


def script_path(script: str, cwd: str = "") -> str:
    """The file a script path names, from the directory it was given in (default: the current one)."""
    return os.path.realpath(os.path.join(cwd or _cwd(), script))


def same_program(record: RunRecord, program: list[str]) -> bool:
    """The same arguments, and the same script file however its path was spelled and wherever from
    (a record of an older launcher, which kept no working directory, is taken as from here)."""
    if record.program[1:] != program[1:]:
        return False
    if program[:1] == ["-m"] or record.program[:1] == ["-m"]:
        # The same module name (compared above) found from the same working directory.
        return program[:1] == record.program[:1] and script_path(".", record.cwd) == script_path(".")
    return script_path(record.program[0], record.cwd) == script_path(program[0])


@dataclass(frozen=True)
class StartMode:
    """How a run's command (launch.json's `command`) started the program: after a `--spawn`
    command (`spawn`: its words) or on processes the launcher started itself, with
    `--ranks-by-program` or not, and the interpreter's options (`-O`, `-X dev`, ...) the launcher
    passed on, which change what runs (`-O`: no asserts, `__debug__` False)."""

    spawn: tuple[str, ...]
    ranks_by_program: bool
    options: tuple[str, ...]


def start_mode(command: Sequence[str]) -> StartMode | None:
    """`command`'s StartMode: `[spawn..., python, options..., -m, runtime.launch, flags...]`; None
    where it is not such a command."""
    words = list(command)
    at = next((i for i in range(len(words) - 1) if words[i:i + 2] == ["-m", "runtime.launch"]), None)
    if at is None:
        return None
    k = at - 1  # back over the interpreter's options (`-X name` is two words) to the interpreter
    while k >= 0:
        if k >= 1 and words[k - 1] == "-X":
            k -= 2
        elif words[k].startswith("-"):
            k -= 1
        else:
            break
    if k < 0:
        return None
    flags = []
    for word in words[at + 2:]:
        if word in ("--", "-m"):
            break
        flags.append(word)
    # only a rank process's command (`--child`, first) holds the launcher's own flags: a run in the
    # launcher's own process records the command line as typed, program arguments and all
    by_program = flags[:1] == ["--child"] and "--ranks-by-program" in flags
    return StartMode(tuple(words[:k]), by_program, tuple(words[k + 1:at]))


def other_start(recorded: Sequence[str], current: Sequence[str]) -> list[str]:
    """How the run recorded with command `recorded` was started otherwise than this launch starts it
    (`current`): a run made with(out) --ranks-by-program, with(out) --spawn, or by an interpreter with
    other options is not this sweep's (review 91 F5: they were skipped as done, and the sweep mixed
    two ways of running the program). Nothing where either cannot be told."""
    was, now = start_mode(recorded), start_mode(current)
    if was is None or now is None:
        return []
    said = []
    if was.ranks_by_program != now.ranks_by_program:
        said.append("with --ranks-by-program (the program started its ranks), which this launch does not give"
                    if was.ranks_by_program else
                    "without --ranks-by-program (a process per rank), which this launch gives")
    if bool(was.spawn) != bool(now.spawn):
        said.append(f"with --spawn ({shlex.join(was.spawn)}), which this launch does not give" if was.spawn else
                    "without --spawn (the launcher started the ranks itself), which this launch gives")
    if sorted(was.options) != sorted(now.options):
        said.append(f"by python {' '.join(was.options) or 'without options'}, where this launch runs python "
                    f"{' '.join(now.options) or 'without options'} (the interpreter's options change what runs: "
                    "-O turns the asserts off)")
    return [f"made {what}" for what in said]


def completion(directory: Path, params: dict[str, Any],
               program: list[str] | None = None, instrument: bool = False,
               command: Sequence[str] | None = None) -> tuple[bool, list[str]]:
    """Whether the directory holds a finished run of these parameters (and, when both are known,
    of the same program) with all its run files; and, for a run recorded as finished whose run
    files are not all there (deleted, cut off), or that another program command made, why it is
    not (see sweep_files). With `instrument` (this launch instruments the program with --instrument
    and records), a run that wrote no run file, made without --instrument, is not finished either
    (review 58 F3: the launcher's advice after an uninstrumented sweep, "add --instrument", skipped
    every run as done); see `recorded_nothing` for the others. With `command` (what this launch
    starts the run with), a run started otherwise is not finished either (`other_start`)."""
    record = read_record(directory)
    if record is None or record.status != "ok" or record.params != params:
        return False, []
    if program and record.program and not same_program(record, program):
        # said: an accidental edit of a long sweep's command line remakes its finished runs (review 36)
        return False, [f"by another program command ({shlex.join(record.program)})"]
    if command and record.command:
        other = other_start(record.command, command)
        if other:
            return False, other
    from runtime.sweep_files import missing_files

    problems = missing_files(directory, record.files)
    if instrument and record.instrument is not True and not problems and _wrote_nothing(directory, record):
        problems = ["it wrote no run file, and this launch instruments the program (--instrument)"]
    return not problems, problems


def _wrote_nothing(directory: Path, record: RunRecord) -> bool:
    """A run recorded by this launcher (`files: []`; older ones have None, kept as done: see
    sweep_files) whose directory holds no rank's data."""
    return record.files == [] and not _holds_data(directory)


def recorded_nothing(directory: Path) -> bool:
    """Whether a run a resume skips as done wrote no run file (an uninstrumented program,
    SCALEPROBE_RANKS that selected no rank, SCALEPROBE_DISABLE=1): the resume says so, and how to
    make it again (review 58 F3)."""
    try:
        record = read_record(directory)
    except LaunchError:
        return False
    return record is not None and _wrote_nothing(directory, record)


def _holds_data(directory: Path) -> bool:
    """Whether a run directory holds a rank's data: a run file, or an `--nsys` report (a run of an
    NVTX-only build records nothing else, and making it again would replace its reports)."""
    try:
        return any(p.name.startswith("rank") and p.name.endswith((".jsonl", ".nsys-rep", ".qdrep"))
                   for p in directory.iterdir())
    except OSError:
        return False


def is_complete(directory: Path, params: dict[str, Any], program: list[str] | None = None,
                instrument: bool = False) -> bool:
    """A finished run of these parameters (and of the same program), its run files all there."""
    return completion(directory, params, program, instrument)[0]


def clear_attempt(directory: Path, rank: int | None = None) -> list[str]:
    """Remove what an earlier attempt left, so the modeler never mixes two attempts' rank files;
    returns the run files kept because a live process on this host writes them.

    With `rank`, only that rank's files: each rank of srun/mpiexec clears its own, so that no rank
    removes a file another rank of this attempt already writes. A run file whose process is still
    alive on this host (its pid in the name, its host in the header) is never removed (review 72 F6:
    two processes that took the same rank deleted each other's live files): it is kept, said on
    stderr, and the modeler then sees the rank twice.
    """
    if not directory.is_dir():
        return []
    prefix = "rank" if rank is None else f"rank{rank}."
    kept = []
    for path in directory.iterdir():
        if path.name.startswith(prefix) and path.suffix in (".jsonl", ".txt", ".nsys-rep", ".qdrep"):
            writer = live_writer(path)
            if writer is not None:
                kept.append(path.name)
                print(f"scaleprobe launch: warning: {path} is not removed: {writer} still writes it (another "
                      "launch into this run directory?)", file=sys.stderr)
                continue
            path.unlink(missing_ok=True)
    return kept


_RUN_FILE = re.compile(r"^rank\d+\.(\d+)(?:\.\d+)?\.jsonl$")


def live_writer(path: Path) -> str | None:
    """`pid N on host H` for a run file whose process is alive on this host, else None (not a run
    file, another host's, or its process is gone). This process's own pid is no other writer."""
    m = _RUN_FILE.match(path.name)
    if m is None or int(m.group(1)) == os.getpid():
        return None
    pid = int(m.group(1))
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline(1 << 16))
    except (OSError, ValueError):
        header = None
    host = header.get("host") if isinstance(header, dict) else None
    here = os.uname().nodename if hasattr(os, "uname") else socket.gethostname()
    if host is not None and host != here:
        return None  # another node's: its process cannot be seen from here (the rank locks see it)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return None
    return f"pid {pid} on {here}"


def rank_lock(rank: int) -> str:
    """The lock file each rank of a launch under srun, mpiexec or torchrun holds in its run
    directory while it runs (`claim(directory, rank_lock(rank))`)."""
    return f".launch.rank{rank}.lock"


class Claim:
    """This launcher's hold on a run directory (released by `release`, or when the process ends)."""

    def __init__(self, directory: Path, fd: int | None) -> None:
        self.directory = directory
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases the flock
            self._fd = None


_no_locks: list[str] = []  # why this file system cannot lock, once said


def claim(directory: Path, lock: str = LOCK) -> Claim | str:
    """Take the run directory for this launcher (with `lock`, one rank's part of it: `rank_lock`),
    or say who holds it (`pid N on host H`)."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: nothing to hold
        directory.mkdir(parents=True, exist_ok=True)
        return Claim(directory, None)
    path = directory / lock
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # never descriptor 0-2, which a launcher started with them closed would hand on (review 58 F9)
        fd = above_stdio(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        raise LaunchError(f"cannot create the lock file {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip()
        except OSError:
            holder = ""
        os.close(fd)
        return holder or "another launcher"
    except OSError as exc:  # a file system without flock (some Lustre and NFS mounts)
        if not _no_locks:
            _no_locks.append(str(exc))
            print(f"scaleprobe launch: warning: cannot lock {path} ({exc.strerror}): two launchers "
                  "on this --out would not see each other; run one at a time", file=sys.stderr)
        return Claim(directory, fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
    except OSError:
        pass  # the lock holds without its note
    return Claim(directory, fd)


def place(directory: Path, params: dict[str, Any], legacy: Sequence[Path] = ()) -> Path:
    """The directory of the run of `params` that is named `directory`: that one, unless its record
    belongs to other parameters (an older scaleprobe named points alike that differ only in
    characters a file name cannot hold), or it has no record while an older name does; then
    `legacy` (the older name, or names: the first that holds this point), else the first
    `<name>_alt-<n>` that is this point's or free. Never another point's."""
    def owner(d: Path) -> dict[str, Any] | None:
        record = read_record(d)
        return None if record is None else record.params

    first = owner(directory)
    if first == params:
        return directory
    for older in legacy:
        if older != directory and owner(older) == params:
            return older  # a run of this point an older scaleprobe made: resumed where it is
    if first is None:
        return directory
    n = 2
    while True:
        alt = directory.with_name(f"{directory.name}_alt-{n}")
        held = owner(alt)
        if held is None or held == params:
            return alt
        n += 1
