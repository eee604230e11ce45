"""Instrument a whole project: choose files, run the rewrite in worker processes, write OUT.

OUT gets the instrumented modules, every other file copied byte for byte, and `.scaleprobe/` with
`manifest.json` (regions), `linemap.json` (out line -> original line per instrumented file),
`columns.json`, `sources.json` (the hash of each instrumented file's source) and `state.json` (content hashes and id blocks, so a re-run only redoes files that changed and a file's
region ids stay the same across re-runs).
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import io
import json
import multiprocessing
import os
import shutil
import signal
import stat
import sys
import threading
import time
import tokenize
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from . import __version__
from .emit import NvtxBackend
from .errors import InstrumentError
from .fileerrors import cannot_read, decode_failure, io_failure, parse_failure
from .foreign import environment, foreign_name, installed_outside
from .graph import ImportFacts, ImportGraph, cache_entry, cached_facts, entry_package, resolve, scan_imports
from .linemap import MAP_FORMAT
from .outdir import (OutTree, case_twin, check_out, fold_index, into_src, link_target, open_out, real_folder,
                     replace_file, writing)
from .prechecks import define_relpath, define_table
from .quiet import quiet_warnings
from .regions import (STATE_DIR, IdAllocator, Region, in_runtime_ids, manifest_path, past_runtime_ids, read_manifest,
                      region_bound, write_manifest)
from .results import FileResult, Skip
from .revision import BUILD, PROBE_ABI, REWRITE_REVISION
from .shadowing import shadow_warnings, top_level_modules
from .stateshape import state_in_shape, written_in_shape
from .transform import instrument_source

LINEMAP_NAME = "linemap.json"
COLUMNS_NAME = "columns.json"
# relpath -> [hash of the SRC file an instrumented file was built from, hash of the file written]:
# runtime.original_lines compiles OUT's file with SRC's lines only while both are those
SOURCES_NAME = "sources.json"
STATE_NAME = "state.json"
STATE_VERSION = 1
# REWRITE_REVISION (instrumentor/revision.py, with its log) is bumped when the same source is rewritten
# differently, so a re-run redoes files kept from before
# libcst recurses once per nesting level (long `a + b + ...` chains); the import hook uses the same
RECURSION_LIMIT = 20000
# Never copied: VCS data, caches, our own state (rewritten), virtualenvs (found by pyvenv.cfg).
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", STATE_DIR, ".mypy_cache", ".pytest_cache", ".tox", ".nox"}


@dataclass
class Options:
    src: Path
    out: Path | None
    mains: list[str] = field(default_factory=list)
    all: bool = False
    backend: str = "runtime"
    jobs: int = 1
    file_timeout: int = 120  # seconds per file in a worker; 0: none


@dataclass
class Summary:
    instrumented: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)  # unchanged since the last run, not redone
    copied: int = 0
    regions: Counter = field(default_factory=Counter)
    skipped: list[tuple[str, Skip]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "relpath:line: why"
    warnings: list[str] = field(default_factory=list)  # "relpath: why"; the build is made all the same
    graph: ImportGraph | None = None
    results: dict[str, FileResult] = field(default_factory=dict)


def _diff_lines(text: str) -> list[str]:
    """Lines as diff and patch see them: ended by "\n" only (str.splitlines also splits at a form
    feed, "\x1c" or "\u2028", which would read as a line without its end)."""
    found = [line + "\n" for line in text.split("\n")]
    found[-1] = found[-1][:-1]
    return found if found[-1] else found[:-1]


def list_files(src: Path, unreadable: list[tuple[str, str]] | None = None) -> tuple[list[str], set[str]]:
    """All files under SRC (posix relpaths) and the subset that are the project's own modules.
    A symlinked folder is listed as the link it is (never looked into), and a folder in which
    nothing is listed as `rel/` (an empty folder of SRC, made in OUT too: review 68 H6, M1).
    A folder that cannot be listed (`rel/`), or a file that cannot be looked at, is added to
    `unreadable` with its message `rel: cannot read: why` (SRC itself: InstrumentError)."""
    files: list[str] = []
    own: set[str] = set()
    unreadable = [] if unreadable is None else unreadable
    foreign_dirs: set[Path] = set()  # folders (relative to SRC) whose modules are not the project's

    def unlisted(exc: OSError) -> None:
        rel = Path(exc.filename).relative_to(src).as_posix() if exc.filename is not None else "."
        if rel == ".":
            raise InstrumentError(f"{src}: cannot read: {exc.strerror or exc}")
        unreadable.append((rel + "/", cannot_read(rel + "/", exc)))

    for dirpath, dirnames, filenames in os.walk(src, onerror=unlisted):
        rel_dir = Path(dirpath).relative_to(src)
        keep = []
        listed = []  # this folder's files and symlinked folders
        looked_at = len(unreadable)
        for d in sorted(dirnames):
            full = Path(dirpath, d)
            if d in _SKIP_DIRS or environment(full):
                continue
            if full.is_symlink():
                listed.append(d)  # copied as the link, with its target (`Project._copy`)
                continue
            keep.append(d)
            if rel_dir in foreign_dirs or foreign_name(rel_dir.name or None, d, full):
                foreign_dirs.add(rel_dir / d)
        dirnames[:] = keep
        foreign = rel_dir in foreign_dirs
        for name in sorted(filenames):
            rel = (rel_dir / name).as_posix()
            full = os.path.join(dirpath, name)
            try:
                mode = os.lstat(full).st_mode
            except FileNotFoundError:
                continue  # gone since the folder was listed
            except OSError as exc:
                unreadable.append((rel, cannot_read(rel, exc)))
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                continue  # named pipes, sockets, devices: nothing to copy (reading a pipe would block)
            listed.append(name)
            # a dangling link is copied as the link it is, never read as a module
            if name.endswith(".py") and not foreign and os.path.isfile(full):
                own.add(rel)
        files.extend((rel_dir / name).as_posix() for name in sorted(listed))
        if not listed and not keep and rel_dir.parts and len(unreadable) == looked_at:
            files.append(rel_dir.as_posix() + "/")  # an empty folder: the program may write there
    return files, own


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _add_failure(summary: Summary, problem: str | None) -> None:
    """A file's reason in "files failed", once (reading a file fails alike when it is instrumented and copied)."""
    if problem is not None and problem not in summary.failed:
        summary.failed.append(problem)


def _carried_clashes(carried: dict[str, list[tuple[int, str, str, int]]]) -> list[str]:
    """Warnings for modules carried over already instrumented whose ids collide with each other's
    (instrumented by separate builds): the runtime refuses such a program at import."""
    owner: dict[int, str] = {}
    said = []
    for rel in sorted(carried):
        for rid, *_ in carried[rel]:
            first = owner.setdefault(rid, rel)
            if first != rel:
                said.append(f"{rel}: already instrumented by another build than {first}: both use region id {rid}, "
                            "and the runtime will refuse the program; instrument the original sources of both")
                break
    return said


def _carried_runtime_ids(carried: dict[str, list[tuple[int, str, str, int]]]) -> list[str]:
    """Warnings for modules carried over already instrumented with ids among the runtime's own
    (`regions.RUNTIME_IDS`, given by a build before they were kept out of builds): the runtime
    refuses such a module where it has made a region of that id already (a manual region, a
    collective's) when the module is imported."""
    said = []
    for rel in sorted(carried):
        ids = [rid for rid, *_ in carried[rel] if in_runtime_ids(rid)]
        if ids:
            said.append(f"{rel}: already instrumented with region ids the runtime hands out itself ({min(ids)}"
                        f"{'' if len(ids) == 1 else f' to {max(ids)}'}, given by an earlier scaleprobe): the runtime "
                        "refuses it where the program has made a region of the same id (a manual region, a "
                        "collective) before importing it; instrument its original source")
    return said


def _ids_lost(entry: dict, reserved: set[int]) -> bool:
    """Whether a file's ids or its block (its state `entry`) include ids it must not keep: those
    of a module carried over (`reserved`), or the runtime's own (`regions.RUNTIME_IDS`)."""
    block = entry["block"]
    if any(r["id"] in reserved or in_runtime_ids(r["id"]) for r in entry["regions"]):
        return True
    if not block:
        return False
    return (past_runtime_ids(block[0], block[1] - block[0]) != block[0]
            or any(block[0] <= i < block[1] for i in reserved))


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _same_hash(path: Path, digest: object) -> bool:
    """Whether the file at `path` has the `_hash` `digest` (None: none known, never the same)."""
    if digest is None:
        return False
    try:
        return _hash(path.read_bytes()) == digest
    except OSError:
        return False


def decode(data: bytes) -> tuple[str, str]:
    """Text and encoding as Python reads a source file (PEP 263 cookie, BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def _work(job: tuple) -> FileResult:
    relpath, path, pool, prior, backend, timeout, *rest = job
    epoch_callees = rest[0] if rest else frozenset()
    entry = bool(rest[1]) if len(rest) > 1 else False
    # libcst's native parser takes minutes on some inputs (a chain of 4000 `+` took 60 s, growing
    # faster than quadratically) and cannot be interrupted from Python: SIGALRM's default action
    # ends this worker, and run_jobs reports the file as failed.
    if timeout:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(timeout)
    try:
        return _instrument_file(relpath, path, pool, prior, backend, epoch_callees, entry)
    finally:
        if timeout:
            signal.alarm(0)


def _instrument_file(relpath: str, path: str, pool: tuple, prior: dict, backend: str | NvtxBackend,
                     epoch_callees: frozenset[str] = frozenset(), entry: bool = False) -> FileResult:
    # Deeper than RECURSION_LIMIT, the native parser may overflow the C stack and kill this
    # worker, which run_jobs reports for this file.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(relpath, "failed", error=cannot_read(relpath, exc))
    try:
        source, encoding = decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FileResult(relpath, "failed", error=decode_failure(relpath, data, exc))
    result = instrument_source(source, relpath, ids=IdAllocator(range(*pool), prior), backend=backend,
                               epoch_callees=epoch_callees, entry=entry)
    if result.code is not None:
        result.code = result.code.encode(encoding)  # type: ignore[assignment]  # bytes back to the parent
    return result


def _epoch_bodies_of(data: bytes) -> set[str]:
    """`facts.epoch_bodies` of one file; nothing for a file that does not parse (its own job says why)."""
    import ast

    from .facts import collect, epoch_bodies

    try:
        source, _ = decode(data)
        if "backward" not in source and ".step(" not in source and "scaleprobe:" not in source:
            return set()
        with quiet_warnings("<unknown>"):  # the user's SyntaxWarnings are Python's to show
            tree = ast.parse(source)
        return epoch_bodies(collect(tree, source).facts)
    except (SyntaxError, ValueError, UnicodeDecodeError, LookupError, RecursionError, MemoryError):
        return set()


# How the worker processes start, named for every version (Python 3.14 makes "forkserver" the
# default on Linux): "fork" where there is one. A fork server or "spawn" would re-import the calling
# script in each worker (a script calling `instrumentor.cli.main` without `if __name__ ==
# "__main__":` then ran again in every worker, and every file "failed"), and a fork server is the
# calling program's too: its preload list and server would be ours (review 17). Where there is no
# fork: "spawn".
START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
#: how long a new pool waits for the threads of the previous one to be gone before it forks
_STRAY_THREADS_WAIT_S = 0.5


def _pool_context() -> multiprocessing.context.BaseContext:
    return multiprocessing.get_context(START_METHOD)


def _os_threads() -> int | None:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _wait_for_stray_threads() -> None:
    """Before a fork: let the threads of an earlier pool (its manager and queue feeder, joined but
    not yet gone from the OS) end, so that the workers are not forked from a process with threads
    (Python 3.12+ warns "This process is multi-threaded, use of fork() may lead to deadlocks").
    The calling program's own threads are its own: they stay, as with any fork."""
    if START_METHOD != "fork":
        return
    deadline = time.monotonic() + _STRAY_THREADS_WAIT_S
    while (n := _os_threads()) is not None and n > threading.active_count() and time.monotonic() < deadline:
        time.sleep(0.002)


def run_jobs(jobs: list[tuple], workers: int, work=_work) -> dict[str, FileResult]:
    """Run `work` in worker processes; a file that kills its worker fails alone, copied unchanged.
    Never more workers than files: a fork pool starts all of them at once (review 39: `-j 1000000`
    on a project of 2 files started processes until the machine ran out of memory)."""
    results: dict[str, FileResult] = {}
    workers = max(1, min(workers, len(jobs)))
    ctx = _pool_context()
    pending = jobs
    isolate = False
    while pending:
        broken: list[tuple] = []
        groups = [[job] for job in pending] if isolate else [pending]
        for group in groups:
            try:
                _wait_for_stray_threads()
                with ProcessPoolExecutor(max_workers=1 if isolate else workers, mp_context=ctx) as pool:
                    futures = [(job, pool.submit(work, job)) for job in group]
                    for job, future in futures:
                        try:
                            results[job[0]] = future.result()
                        except BrokenProcessPool:
                            if isolate:
                                results[job[0]] = FileResult(
                                    job[0], "failed",
                                    error=f"{job[0]}:1: the parser's worker process died or ran past --file-timeout on this file",
                                )
                            else:
                                broken.append(job)
            except BrokenProcessPool:
                pass
        pending = broken
        isolate = True
    return results


def _resolve(path: Path, name: str) -> Path:
    """`path` resolved; a symlink loop on the way is an InstrumentError naming it (review 119 M1: a
    traceback and exit 1; 3.11's resolve() raises RuntimeError for it, 3.13's OSError)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else os.strerror(errno.ELOOP)
        loop = isinstance(exc, RuntimeError) or exc.errno == errno.ELOOP
        raise InstrumentError(f"{name}: {'a symlink loop' if loop else 'cannot be resolved'} ({why})") from None


def decode_problem(rel: str, data: bytes) -> str | None:
    """`rel:line: cannot read: why` where the build cannot decode the module's bytes (a byte not in
    its encoding, also in a comment, which Python 3.11 lets pass; an unknown coding cookie), else None."""
    try:
        decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as bad:
        return decode_failure(rel, data, bad)
    return None


def _scan_failure(rel: str, data: bytes, exc: Exception) -> str:
    """Why the module `rel` does not parse, as the build says it (`_instrument_file`)."""
    return decode_problem(rel, data) or parse_failure(rel, decode(data)[0], exc)


def _broken_link(path: Path) -> str | None:
    """What the symlink `path` is where it leads to no file (`a symlink loop`, `a broken symlink to
    x.py`); None for a link that leads somewhere, or no link."""
    if not path.is_symlink():
        return None
    try:
        path.stat()
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"a broken symlink to {os.readlink(path)}"
    return None


class Project:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.src = _resolve(opts.src, str(opts.src))
        if not self.src.is_dir():
            raise InstrumentError(f"{opts.src}: {'not a directory' if self.src.exists() else 'does not exist'}")
        self.out = _resolve(opts.out, f"-o {opts.out}") if opts.out is not None else None
        if self.out is not None and (self.out == self.src or self.src in self.out.parents):
            raise InstrumentError(f"-o {opts.out}: the output must not be the source directory or inside it")
        self.unreadable: list[tuple[str, str]] = []  # folders (`rel/`) and files of SRC that could not be looked at
        self.files, self.own = list_files(self.src, self.unreadable)
        # an entry that is a symlink -> the file in SRC that Python runs for it (`entries`)
        self.linked: dict[str, str] = {}
        runtime_module = self._own_runtime()
        if opts.backend == "runtime" and runtime_module is not None:
            raise InstrumentError(
                f"{opts.src}: the project has its own top-level module 'runtime' ({runtime_module}), which would "
                "shadow scaleprobe's runtime package that the instrumented code imports; use --backend nvtx"
            )
        own_runtime = runtime_module is not None
        # NVTX modules register their line maps with scaleprobe's runtime.linemap where it can be
        # imported; never with (and never importing) a project's own module `runtime`
        self.backend: str | NvtxBackend = NvtxBackend(map_lines=False) if opts.backend == "nvtx" and own_runtime else opts.backend
        self.state = self._load_state()
        self.fingerprint = f"{__version__}.{REWRITE_REVISION}:{opts.backend}{':nomap' if own_runtime else ''}:{MAP_FORMAT}"
        if self.out is not None:
            # SRC inside OUT (`instrument src -o .`) is built as any OUT, unless a path of the build
            # is SRC's own (`a/helper.py` of SRC `big/a` is `big/a/helper.py` under `-o big`: a
            # re-run wrote instrumented code over SRC's `helper.py`, review 68 M2), or one an earlier
            # build wrote there, which a re-run would remove
            if (clash := into_src(self.out, self.src, self.files)) is not None:
                raise InstrumentError(
                    f"-o {opts.out}: holds the source directory {opts.src}, and the build would write into it "
                    f"({clash} of SRC is {self.out / clash}); give an output directory outside SRC")
            if (clash := into_src(self.out, self.src, self.state.get("written", []))) is not None:
                raise InstrumentError(
                    f"-o {opts.out}: holds the source directory {opts.src}, where an earlier build into it "
                    f"wrote {self.out / clash}, which a re-run would remove; give an output directory outside SRC")
        if opts.all and opts.mains:
            # --main under --all: checked as without it, and an entry without .py is the project's
            # module, instrumented (review 68 M6)
            self.entries()

    # -- state ---------------------------------------------------------------------------------

    def _load_state(self) -> dict:
        empty = {"version": STATE_VERSION, "next_id": 0, "files": {}, "imports": {}}
        if self.out is None:
            return empty
        path = self.out / STATE_DIR / STATE_NAME
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return empty
        # a state that is no object of this version (edited, or another version's) is none
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            return empty
        written = state.get("written")
        if written is not None and not written_in_shape(written):
            del state["written"]  # edited out of shape: no record of what builds wrote (`OutTree`)
        if not state_in_shape(state):  # edited out of shape: start over, keeping the record
            return {**empty, **({"written": state["written"]} if "written" in state else {})}
        return state

    # -- graph ---------------------------------------------------------------------------------

    def entries(self) -> list[str]:
        mains = [self._entry(m) for m in self.opts.mains] or (["main.py"] if "main.py" in self.own else [])
        for given, main in zip(self.opts.mains, mains):
            if main not in self.files:
                if os.path.isdir(self.src / main):  # review 68 L5: said "no such file"
                    raise InstrumentError(f"--main {given}: is a folder; the entry is a file "
                                          f"(`{main.rstrip('/')}/__main__.py`, or the script `python` runs)")
                hint = "" if os.path.isabs(given) else " (--main is relative to SRC)"
                raise InstrumentError(f"--main {given}: no such file under {self.opts.src}{hint}")
            if (link := _broken_link(self.src / main)) is not None:  # review 119 L2: built nothing, exit 0
                raise InstrumentError(f"--main {given}: is {link}; name the file Python runs")
        runs = []
        for given, main in zip([*self.opts.mains] or [None], mains):
            main = self._runs(main, given)
            if main not in self.own and os.path.isfile(self.src / main) and not os.path.islink(self.src / main):
                # a script without .py (`python trainer` runs it): named as the entry, it is the
                # project's, as under the launcher's --instrument (review 40: copied uninstrumented,
                # 0 regions and exit 0)
                self.own.add(main)
            if main not in runs:
                runs.append(main)
        return runs

    def _scripts(self) -> list[str]:
        """The entries Python runs as scripts (`python OUT/main.py`), not as a package's modules
        (`python -m pkg.app`, where runpy runs them): those get the runtime header even with no
        region (`transform.instrument_source`'s `entry`)."""
        try:
            entries = self.entries()
        except InstrumentError:
            return []
        return [m for m in entries if entry_package(m, self.own) is None]

    def _runs(self, main: str, given: str | None) -> str:
        """The file `python MAIN` runs for the entry `main`: itself, or for a symlink its target,
        whose folder Python puts first on sys.path (review 82 F2: the graph resolved the imports
        from the link's folder, and the built entry, written over the link, ran other modules than
        the original). The link stays a link in OUT, to the built target (`_copy`). An entry in a
        package is imported through the link (`python -m pkg.app`): itself. A target outside SRC,
        or one the build does not copy, cannot run from OUT as from SRC: InstrumentError."""
        path = self.src / main
        if not path.is_symlink() or entry_package(main, self.own) is not None:
            return main
        target = Path(os.path.realpath(path))
        if not target.is_file():
            return main  # dangling (or a folder): copied as the link it is, as any link
        name = f"--main {given}" if given is not None else f"{Path(self.opts.src, main)} (the entry file)"
        if self.src not in target.parents:
            raise InstrumentError(
                f"{name}: is a symlink to {target}, outside SRC: `python {main}` runs that file with its folder "
                f"{target.parent} first on sys.path, which a build of SRC cannot reproduce; instrument the project "
                f"that holds it (SRC {target.parent} or a folder above it), or give SRC a copy of the script")
        rel = target.relative_to(self.src).as_posix()
        if rel not in self.files:
            raise InstrumentError(
                f"{name}: is a symlink to {rel}, which the build does not copy (a folder it leaves out: VCS "
                "data, a cache, a Python environment); name a script of the project with --main")
        self.linked[main] = rel
        return rel

    def _own_runtime(self) -> str | None:
        """The project's module or package named `runtime` that would come before scaleprobe's on
        the program's sys.path: at SRC's top, or beside an entry file (its folder is first there;
        review 82 F1: `scripts/runtime.py` beside `scripts/main.py` was neither refused nor warned
        of, and the built program could not start)."""
        for folder in ["", *self._entry_folders()]:
            found = top_level_modules(self.files, folder).get("runtime")
            if found is not None:
                return found
        return None

    def _entry(self, main: str) -> str:
        """`--main` as a posix path relative to SRC: given relative to SRC, or absolute and inside SRC."""
        path = Path(os.path.normpath(main))
        if not path.is_absolute() and path.parts[:1] == ("..",):
            # `--main ../src/main.py` given relative to SRC may still name a file inside it (review 40)
            path = Path(os.path.normpath(os.path.join(os.path.abspath(self.opts.src), main)))
        if path.is_absolute():  # inside SRC as given, SRC resolved, or through a symlinked folder
            pairs = ((path, Path(os.path.abspath(self.opts.src))), (path, self.src), (_resolve(path.parent, f"--main {main}") / path.name, self.src))
            path = next((p.relative_to(root) for p, root in pairs if root in p.parents), Path(".."))
        if path.parts[:1] == ("..",):
            raise InstrumentError(f"--main {main}: not inside SRC {self.opts.src}: the entry file must be one of "
                                  "the project's files, relative to SRC or an absolute path inside it")
        return path.as_posix()

    def graph(self, unread: list[str] | None = None) -> ImportGraph:
        """The import graph; a module it could not read or parse is added to `unread` (`rel: cannot
        read: why`, `rel:line: syntax error: why`)."""
        entries = self.entries()
        cache = self.state.setdefault("imports", {})

        def scan(rel: str) -> ImportFacts:
            try:
                data = (self.src / rel).read_bytes()
            except OSError as exc:  # resolve() goes on without its imports
                if unread is not None and cannot_read(rel, exc) not in unread:  # once, if reached under two names
                    unread.append(cannot_read(rel, exc))
                raise
            # review 119, left open then: Python parses a byte that is not UTF-8 in a comment, the
            # build does not read it: --graph names it as the build does, and follows its imports
            if unread is not None and (why := decode_problem(rel, data)) and why not in unread:
                unread.append(why)
            digest = _hash(data)
            # kept under the scanner's version: lists an earlier scanner made are made again (review 68 L3)
            facts = cached_facts(cache.get(rel), digest)
            if facts is None:
                try:
                    facts = scan_imports(data, rel)
                except (SyntaxError, ValueError) as exc:  # named as the build names it (review 119 M3: exit 0, unnamed)
                    if unread is not None and (why := _scan_failure(rel, data, exc)) not in unread:
                        unread.append(why)
                    raise
                cache[rel] = cache_entry(digest, facts)
            return facts

        # each entry's imports resolved with its own sys.path; all of SRC's files, for what hides a module
        graph = resolve(entries, sorted(self.own), scan, self.files, installed_outside(self.src),
                        scripts=set(self.linked.values()))
        graph.not_reached = [r for r in graph.not_reached if r not in self.linked]  # runs as its target
        return graph

    def _no_entry(self) -> str:
        # review 119 L2: a main.py that is a symlink loop was "no main.py"
        link = None if self.opts.mains else _broken_link(self.src / "main.py")
        missing = "no main.py" if link is None else f"main.py is {link}"
        return f"{self.opts.src}: no entry file ({missing}; name one with --main or use --all)"

    def _summary(self) -> Summary:
        """A summary that starts with the folders and files of SRC that could not be looked at."""
        return Summary(failed=[why for _, why in self.unreadable])

    def show_graph(self) -> Summary:
        """`--graph`: the import graph, and what it could not read (folders, modules reached) in
        `failed`, named as the build names them."""
        summary = self._summary()
        graph = self.graph(summary.failed)
        if not graph.reached and not self.opts.all:  # as the build and --diff say (review 68 L1: exit 0)
            raise InstrumentError(self._no_entry())
        # an own folder that could not be listed is no third-party module (review 31)
        # (top-level ones only: a nested `vendor/json5/` is no module `json5`, review 32)
        unlisted = {folder.rstrip("/") for folder, _ in self.unreadable if folder.endswith("/") and folder.count("/") == 1}
        graph.third_party = [t for t in graph.third_party if t not in unlisted]
        summary.graph = graph
        summary.warnings = list(graph.unfollowed)
        return summary

    def targets(self) -> tuple[list[str], ImportGraph | None]:
        if self.opts.all:
            self.entries()  # finds the entries that are links (and refuses one that cannot be built)
            # a linked entry stays a link to its target, which is instrumented (`_runs`)
            return sorted(r for r in self.own if r not in self.linked), None
        graph = self.graph()
        if not graph.reached:
            raise InstrumentError(self._no_entry())
        return [r for r in graph.reached if r in self.own and r not in self.linked], graph

    # -- build ---------------------------------------------------------------------------------

    def transform(self, targets: list[str], summary: Summary, *, reuse: bool) -> dict[str, FileResult]:
        files_state = self.state.setdefault("files", {})
        callees = self._epoch_callees(targets)
        # a file's loops depend on the other modules' epoch functions: other ones, rewrite again
        fingerprint = self.fingerprint + ":" + _hash("\0".join(sorted(callees)).encode())[:8]
        entries = set(self._scripts()) if self.opts.backend == "runtime" else set()
        src_manifest = self._source_manifest()
        next_id = max([self.state.get("next_id", 0), *(r.id + 1 for r in src_manifest)])
        jobs, results = [], {}
        contents: dict[str, bytes] = {}
        for rel in targets:
            try:
                contents[rel] = (self.src / rel).read_bytes()
            except OSError as exc:  # unreadable, or gone since SRC was listed: copied (or kept) as it is
                results[rel] = FileResult(rel, "failed", error=cannot_read(rel, exc))
                files_state.setdefault(rel, {"hash": None, "fingerprint": "", "block": None, "regions": [],
                                             "status": "failed", "out_size": -1})
        # modules carried over already instrumented keep the ids their own build gave: no other
        # module gets them (review 89 L1: with that build's .scaleprobe/ left behind, ids collided)
        carried, renamed = self._carried_tables(contents)
        reserved = {r[0] for table in carried.values() for r in table}
        summary.warnings.extend(renamed)
        if reserved:
            next_id = max(next_id, max(reserved) + 1)
            summary.warnings.extend(_carried_clashes(carried))
            summary.warnings.extend(_carried_runtime_ids(carried))
        for rel, data in contents.items():
            digest = _hash(data)
            entry = files_state.get(rel)
            out_file = self.out / rel if self.out else None
            if entry and rel not in carried and _ids_lost(entry, reserved):
                # its ids, or its block, given before the module came, or among the runtime's own (a
                # build before they were kept out of builds): others
                entry = dict(entry, block=None, fingerprint="",
                             regions=[r for r in entry["regions"] if r["id"] not in reserved and not in_runtime_ids(r["id"])])
            if (
                reuse and entry and entry["hash"] == digest and entry["fingerprint"] == fingerprint
                and out_file is not None and out_file.exists() and out_file.stat().st_size == entry["out_size"]
                and (entry["status"] != "instrumented" or _same_hash(out_file, entry.get("out_hash")))
                # an entry's header alone, where the file became or stopped being an entry (--main)
                and (rel in entries) <= (entry["status"] != "unchanged")
                and (rel not in entries) <= (entry["status"] != "instrumented" or bool(entry["regions"]))
            ):
                summary.reused.append(rel)
                results[rel] = FileResult(rel, entry["status"], regions=[Region(**r) for r in entry["regions"]],
                                          skipped=[Skip(**s) for s in entry.get("skipped", [])],
                                          linemap=entry.get("linemap"), columns=entry.get("columns"),
                                          warnings=list(entry.get("warnings", [])))
                continue
            bound = region_bound(data.decode("latin-1"))
            block = entry["block"] if entry else None
            prior = {r["key"]: r["id"] for r in entry["regions"]} if entry else {}
            # the ids of the known regions stay theirs (IdAllocator leaves them out of the pool), so
            # the block must hold `bound` more: a file rewritten with other regions needs new ids
            if block is None or block[1] - block[0] - sum(block[0] <= i < block[1] for i in prior.values()) < bound:
                start = past_runtime_ids(next_id, max(bound, 1))  # a build of more than 65536 ids
                block = [start, start + max(bound, 1)]
                next_id = block[1]
                # the outgrown block stays this file's, so its known regions keep their ids
            jobs.append((rel, str(self.src / rel), tuple(block), prior, self.backend, self.opts.file_timeout, callees,
                         rel in entries))
            files_state[rel] = {"hash": digest, "fingerprint": fingerprint, "block": block, "regions": [], "status": "?", "out_size": -1}
        self.state["next_id"] = next_id
        results.update(run_jobs(jobs, max(1, self.opts.jobs)))
        by_rel = {r.file: [] for r in src_manifest}
        for region in src_manifest:
            by_rel[region.file].append(region)
        src_linemaps = self._source_state(LINEMAP_NAME)
        src_columns = self._source_state(COLUMNS_NAME)
        for rel, result in results.items():
            if result.status == "already":  # keep what the run that instrumented it recorded
                result.regions = by_rel.get(rel) or [Region(rid, kind, name, rel, line, f"carried:{rid}")
                                                     for rid, kind, name, line in carried.get(rel, [])]
                result.linemap = src_linemaps.get(rel)
                result.columns = src_columns.get(rel)
        return results

    def _carried_tables(self, contents: dict[str, bytes]) -> tuple[dict[str, list[tuple[int, str, str, int]]], list[str]]:
        """relpath -> region table of each module that is already instrumented for the runtime
        backend (prechecks.define_table), parsed only where the text holds a define call; and the
        warnings for those built under another name than they now have."""
        import ast

        tables = {}
        renamed: list[str] = []
        for rel, data in contents.items():
            if b"__sp_define__" not in data:
                continue
            try:
                source, _ = decode(data)
                with quiet_warnings(rel):
                    tree = ast.parse(source, filename=rel)
                table = define_table(tree)
            except (SyntaxError, ValueError, UnicodeDecodeError, LookupError, RecursionError, MemoryError):
                continue  # its own job says why
            if table:
                tables[rel] = table
                named = define_relpath(tree)
                if named is not None and named != rel:
                    # review 96 LOW-3: its run records, tracebacks and line maps name the file it was built as
                    renamed.append(
                        f"{rel}: already instrumented as {named}: its regions are recorded under {named}, and its "
                        f"tracebacks map through {named}'s lines; instrument its original source with the project")
        return tables, renamed

    def _epoch_callees(self, targets: list[str]) -> frozenset[str]:
        """Names of the functions of the modules to instrument that run one epoch
        (`facts.epoch_bodies`), remembered per file content in the state."""
        known = self.state.setdefault("epoch_bodies", {})
        names: set[str] = set()
        for rel in targets:
            try:
                data = (self.src / rel).read_bytes()
            except OSError:
                continue
            digest = _hash(data)
            entry = known.get(rel)
            if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == digest and entry[2] == self.fingerprint):
                entry = known[rel] = [digest, sorted(_epoch_bodies_of(data)), self.fingerprint]
            names.update(entry[1])
        for rel in set(known) - set(targets):
            del known[rel]
        return frozenset(names)

    def _source_manifest(self) -> list[Region]:
        path = manifest_path(self.src)
        return read_manifest(path) if path.exists() else []

    def build(self) -> Summary:
        if self.out is None:
            raise InstrumentError("no output directory (-o OUT)")
        check_out(self.out, self.opts.out, self.files)
        recorded = self.state.get("written")  # what earlier builds wrote
        if recorded is None and not (self.out / STATE_DIR).is_dir():
            recorded = []  # no earlier build: check_out found none of the build's names there
        summary = self._summary()
        targets, summary.graph = self.targets()
        summary.warnings = shadow_warnings(self.own, self._entry_folders(), self.opts.backend)
        if summary.graph is not None:
            summary.warnings += summary.graph.unfollowed
        results = self.transform(targets, summary, reuse=True)
        summary.results = results
        open_out(self.out, self.opts.out)
        # what builds killed outright left is removed by the first build alone in OUT (review 34)
        with writing(self.out, {*self.files, *self.state.get("written", [])}):
            return self._write(results, summary, recorded)

    def _write(self, results: dict[str, FileResult], summary: Summary, recorded: list[str] | None) -> Summary:
        """Write the build into OUT (holding its lock), its record last."""
        tree = OutTree(self.out, recorded, self.src)
        self._record_new(tree.new(self.files))
        written = set()
        linemaps: dict[str, list[int]] = {}
        columns: dict[str, dict] = {}
        sources: dict[str, list[str]] = {}
        src_sources = self._source_state(SOURCES_NAME)
        regions: list[Region] = []
        files_state = self.state["files"]
        for rel in self.files:
            dest = self.out / rel
            result = results.get(rel)
            problem = None
            try:
                self._place(rel, result, tree, summary)
                written.add(rel)
            except OSError as exc:  # unreadable, gone, OUT not writable there, the user's in the way: it fails alone
                problem = io_failure(rel, exc, self.src, self.out)
                if tree.kept(rel):
                    written.add(rel)
                if result is not None and result.status != "failed":
                    result = results[rel] = FileResult(rel, "failed", error=problem)
            if result is None:
                _add_failure(summary, problem)
                continue
            entry = files_state[rel]
            if rel not in summary.reused:
                entry.update(
                    status=result.status, regions=[asdict(r) for r in result.regions],
                    skipped=[asdict(s) for s in result.skipped], warnings=result.warnings,
                    linemap=result.linemap, columns=result.columns, out_size=_size(dest),
                    # what was written: a module edited in OUT, also to the same size, is written again (review 82 F5)
                    out_hash=_hash(result.code) if result.status == "instrumented" else None,  # type: ignore[arg-type]
                )
            if result.status == "instrumented":
                summary.instrumented.append(rel)
            if result.linemap:
                linemaps[rel] = result.linemap
                if result.status == "instrumented" and entry.get("hash"):
                    # what this build wrote, or what a reused file was found to hold (`transform`)
                    sources[rel] = [entry["hash"], entry.get("out_hash") or _hash(dest.read_bytes())]
                elif result.status == "already" and rel in src_sources:  # its map points there too
                    sources[rel] = src_sources[rel]
            if result.columns:
                columns[rel] = result.columns
            regions.extend(result.regions)
            summary.regions.update(r.kind for r in result.regions)
            summary.skipped.extend((rel, s) for s in result.skipped)
            summary.warnings.extend(result.warnings)
            if result.status == "failed":
                _add_failure(summary, result.error or f"{rel}: failed")
                _add_failure(summary, problem)
                entry["hash"] = None  # retry next time
        for rel in set(files_state) - set(results):
            del files_state[rel]
        # the files of a folder that could not be listed stay in OUT (and on the record) as they were
        kept = {rel for rel in self.state.get("written", []) if self._under_unreadable(rel)}
        written |= kept
        self._remove_stale(written)
        try:
            write_manifest(self.out, regions, backend=self.opts.backend, source=self._manifest_source(), build=BUILD,
                           abi=PROBE_ABI if self.opts.backend == "runtime" else None)
            state_dir = self.out / STATE_DIR
            (state_dir / LINEMAP_NAME).write_text(json.dumps(linemaps, separators=(",", ":")) + "\n", encoding="utf-8")
            (state_dir / COLUMNS_NAME).write_text(json.dumps(columns, separators=(",", ":")) + "\n", encoding="utf-8")
            (state_dir / SOURCES_NAME).write_text(json.dumps(sources, separators=(",", ":")) + "\n", encoding="utf-8")
            self.state["written"] = sorted(written)
            (state_dir / STATE_NAME).write_text(json.dumps(self.state, separators=(",", ":")), encoding="utf-8")
        except OSError as exc:
            where = exc.filename or self.out
            raise InstrumentError(f"-o {self.opts.out}: cannot write {where}: {exc.strerror or exc}") from None
        return summary

    def _record_new(self, new: list[str]) -> None:
        """Put the files this build will create on OUT's record before any is written (the state of
        the last build, as it is on disk, with them added), so that a re-run after a build stopped
        halfway knows them as a build's and replaces them."""
        if not new:
            return
        path = self.out / STATE_DIR / STATE_NAME
        try:
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):  # a new OUT (or a state gone since it was read)
                state = {"version": STATE_VERSION, "written": self.state.get("written", [])}
            state["written"] = sorted({*state.get("written", []), *new})
            path.write_text(json.dumps(state, separators=(",", ":")), encoding="utf-8")
        except OSError as exc:
            raise InstrumentError(f"-o {self.opts.out}: cannot write {exc.filename or path}: {exc.strerror or exc}") from None

    def _place(self, rel: str, result: FileResult | None, tree: OutTree, summary: Summary) -> None:
        """Write one file into OUT: its instrumented code, a copy, or nothing (unchanged since the last run)."""
        if result is not None and rel in summary.reused:
            if result.status != "instrumented":
                # a module with nothing to instrument, counted as the first build did (review 40), and
                # copied again where its copy differs, as any file copied (review 82 F5)
                self._copy(rel, tree)
                summary.copied += 1
            return
        if result is not None and result.status == "instrumented":
            dest = tree.ready(rel)
            code = result.code

            def write(tmp: Path) -> None:
                tmp.write_bytes(code)  # type: ignore[arg-type]
                shutil.copymode(self.src / rel, tmp)

            replace_file(dest, write)
        elif rel.endswith("/"):
            tree.folder(rel)  # an empty folder of SRC: made, not counted as a file copied
        else:
            self._copy(rel, tree)
            summary.copied += 1

    def _under_unreadable(self, rel: str) -> bool:
        return any(rel.startswith(folder) for folder, _ in self.unreadable if folder.endswith("/"))

    def _entry_folders(self) -> list[str]:
        """The folders first on `sys.path` when the program runs: each entry file's, and the one above
        the package of an entry inside a package (`python -m pkg.app`); SRC without entries."""
        try:
            entries = self.entries()
        except InstrumentError:
            entries = []
        folders = {Path(m).parent.as_posix() for m in entries}
        scripts = set(self.linked.values())  # run as scripts, through their links
        folders |= {found[0] for m in entries if m not in scripts and (found := entry_package(m, self.own)) is not None}
        return sorted("" if f == "." else f for f in folders) or [""]

    def _manifest_source(self) -> str:
        """The absolute SRC for OUT's manifest: tracebacks then name the user's own files.

        An instrumented SRC passes on the source recorded in its own manifest: its line maps,
        carried over, point into that tree, not into SRC.
        """
        try:
            inherited = json.loads(manifest_path(self.src).read_text(encoding="utf-8")).get("source")
        except (OSError, ValueError, AttributeError):
            inherited = None
        return inherited if isinstance(inherited, str) else str(self.src)

    def _source_state(self, name: str) -> dict:
        """SRC's own `.scaleprobe/<name>` (linemap.json, columns.json, sources.json) when SRC is an instrumented tree."""
        path = self.src / STATE_DIR / name
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _copy(self, rel: str, tree: OutTree) -> None:
        """Copy one file that is not instrumented; a symlink (to a file or a folder) stays a symlink
        to the same target (`link_target`). Nothing is ever written through a symlink already in
        OUT: it may point at the user's own files."""
        source, dest = self.src / rel, tree.ready(rel)
        if source.is_symlink():
            target = link_target(self.src, rel)
            if rel in self.linked:  # an entry: to the built target, wherever SRC's link points (`_runs`)
                target = os.path.relpath(self.linked[rel], PurePosixPath(rel).parent.as_posix())
            if dest.is_symlink() and os.readlink(dest) == target:
                return
            if dest.exists() or dest.is_symlink():
                dest.unlink()
            dest.symlink_to(target)
            return
        if not dest.is_symlink() and dest.exists():
            a, b = source.stat(), dest.stat()
            # copy2 keeps the nanosecond mtime: a file rewritten within the same second differs there
            if a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns:
                return
        replace_file(dest, lambda tmp: shutil.copy2(source, tmp))

    def _remove_stale(self, written: set[str]) -> None:
        """Remove what earlier builds wrote that SRC no longer has, and then the folders they made
        that are left empty and that SRC no longer has (review 68 H7: an empty `plugin/` of a
        package deleted from SRC imported as a namespace package). Nothing is removed through a
        link in OUT (a symlinked folder of SRC is copied as the link), and a folder is removed only
        while it is empty."""
        by_fold = None
        emptied: set[str] = set()  # folders of OUT that held what was removed
        for rel in set(self.state.get("written", [])) - written:
            path = self.out / rel
            by_fold = fold_index(written) if by_fold is None else by_fold
            if case_twin(self.out, rel, by_fold) is not None:
                continue  # the file this build wrote under SRC's new case, where OUT ignores case (review 31)
            if not real_folder(self.out, path.parent):
                continue  # under a link (or gone): not ours to look into
            try:
                if rel.endswith("/"):  # an empty folder of SRC that a build made
                    emptied.add(rel.rstrip("/"))
                elif path.is_symlink() or path.is_file():  # a copied link too, even dangling (review 31)
                    path.unlink()
            except OSError:
                pass  # left in OUT: nothing is lost
            emptied.add(PurePosixPath(rel.rstrip("/")).parent.as_posix())
        # the folders this build writes into, and those of SRC's files whatever became of them
        needed = {PurePosixPath(r.rstrip("/")).as_posix() for r in {*written, *self.files} if r.endswith("/")}
        needed |= {p.as_posix() for r in {*written, *self.files} for p in PurePosixPath(r.rstrip("/")).parents}
        by_fold_needed = fold_index(needed)
        # deepest first, so that a folder emptied by removing the one inside it goes too
        for folder in sorted(emptied, key=lambda f: (-len(PurePosixPath(f).parts), f)):
            current = PurePosixPath(folder)
            while current.parts and current.as_posix() not in needed:
                path = self.out / current
                if case_twin(self.out, current.as_posix(), by_fold_needed) is not None:
                    break  # the folder this build writes into, under SRC's new case
                if not real_folder(self.out, path):
                    break
                try:
                    os.rmdir(path)  # only while empty: a file of the user's there keeps it
                except OSError:
                    break
                current = current.parent

    def diff(self) -> tuple[str, Summary]:
        """The rewrite as a patch, and the summary the build would give, with its warnings (review 82 F6)."""
        summary = self._summary()
        targets, summary.graph = self.targets()
        summary.warnings = shadow_warnings(self.own, self._entry_folders(), self.opts.backend)
        if summary.graph is not None:
            summary.warnings += summary.graph.unfollowed
        results = summary.results = self.transform(targets, summary, reuse=False)
        chunks = []
        for rel in targets:
            result = results[rel]
            if result.status == "failed":
                summary.failed.append(result.error or rel)
            summary.skipped.extend((rel, s) for s in result.skipped)
            summary.warnings.extend(result.warnings)
            if result.status == "already":  # carried over: counted as the build counts it (review 96 LOW-1)
                summary.regions.update(r.kind for r in result.regions)
            if result.status != "instrumented":
                continue
            before, encoding = decode((self.src / rel).read_bytes())
            after = result.code.decode(encoding)  # type: ignore[union-attr]
            for line in difflib.unified_diff(_diff_lines(before), _diff_lines(after), f"a/{rel}", f"b/{rel}"):
                # a last line without "\n" gets diff's marker, or it runs into the next line and the
                # patch does not apply (review 68 M5)
                chunks.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
            summary.instrumented.append(rel)
            summary.regions.update(r.kind for r in result.regions)
        # every file the build would copy: the others, less SRC's empty folders (made, not copied)
        summary.copied = sum(not rel.endswith("/") for rel in self.files) - len(summary.instrumented)
        return "".join(chunks), summary
