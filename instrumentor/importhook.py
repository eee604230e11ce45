"""On-the-fly instrumentation: a meta-path finder that instruments the project's modules on import.

Used by `python -m runtime.launch --instrument`. Each module is rewritten with local ids 0..n-1
(cached on disk by content hash), shifted by a base from `runtime.probe.reserve(n)` in the AST, and
compiled after its line numbers were set back to the original ones, under the original file name:
tracebacks, `inspect` and debuggers see the user's own file and lines. Nothing is written next to
the user's sources (no `__pycache__` of instrumented code that a plain run could pick up).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import CodeType

from . import __version__, spawnhook
from .linemap import MAP_FORMAT
from .quiet import quiet_warnings
from .foreign import foreign
from .fileerrors import decode_failure
from .project import RECURSION_LIMIT as _RECURSION_LIMIT, decode, decode_problem
from .regions import IdAllocator, region_bound
from .revision import REWRITE_REVISION
from .transform import instrument_source

# scaleprobe's own packages, found by path: a project may have modules of those names itself
# (`modeler.py`, an `nvtx.py` shim), which are its own code like any other
_OURS = tuple(Path(__file__).resolve().parent.parent / name for name in ("runtime", "instrumentor", "modeler"))
_NOT_OWN = {"__pycache__", ".git", ".tox", ".nox"}
_ID_CALLS = {"__sp_enter__", "__sp_exit__", "__sp_mark__", "__sp_iterate__", "__sp_tick__", "__sp_untick__"}
_ID_TUPLE_CALLS = {"__sp_aiter__", "__sp_actx__"}  # their first argument is a tuple of region ids

_lock = threading.Lock()
_nvtx_next = 0


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "scaleprobe" / "instrument"


class Instrumenter:
    """Instruments source files of one project and compiles them with their original lines."""

    def __init__(self, project_root: Path, cache_dir: Path | None, backend: str) -> None:
        # as given (made absolute): a module is named by its path as Python found it, relative to
        # the root as given or resolved, as the build names it relative to SRC (review 79 F4)
        self.root = Path(os.path.abspath(project_root))
        self.real_root = self.root.resolve()
        self.cache_dir = cache_dir
        self.backend = backend
        self.memory: dict[str, dict] = {}
        self.prefix = Path(sys.prefix).resolve()
        self._links: dict[Path, bool] = {}

    def relative(self, path: Path) -> tuple[Path | None, Path] | None:
        """(root, path relative to it): `path` as it is spelt (made absolute, not resolved) under the
        root as given or resolved; or (None, relative path) for a path outside both whose folder,
        resolved, is under the resolved root (found through a `sys.path` entry, or an entry script's
        folder, that is a link into the project). None outside the root."""
        path = Path(os.path.abspath(path))
        for root in (self.root, self.real_root):
            if root in path.parents:
                return root, path.relative_to(root)
        real = path.parent.resolve() / path.name
        if self.real_root in real.parents:
            return None, real.relative_to(self.real_root)
        return None

    def _through_link(self, root: Path | None, rel: Path) -> bool:
        """Whether a folder between `root` and `root/rel` is a symlink: the build does not look
        into a symlinked folder of the project (its modules are not the project's,
        docs/instrument.md). A path whose folder was resolved (`root` None) has none."""
        if root is None:
            return False
        folder = root
        for part in rel.parts[:-1]:
            folder = folder / part
            linked = self._links.get(folder)
            if linked is None:
                linked = self._links[folder] = folder.is_symlink()
            if linked:
                return True
        return False

    def owns(self, path: Path, fullname: str) -> bool:
        # by name as well: the top-level modules the probes import (`from runtime.probe import ...`,
        # the NVTX backend's `import nvtx`) are never rewritten to import themselves
        top = fullname.split(".")[0]
        if path.suffix != ".py" or top == "runtime" or (top == "nvtx" and self.backend == "nvtx"):
            return False
        resolved = path.resolve()
        if any(resolved.is_relative_to(ours) for ours in _OURS):
            return False
        found = self.relative(path)
        if found is None:
            return False
        root, rel = found
        if self._through_link(root, rel):
            return False
        if (self.real_root != self.prefix and self.prefix.is_relative_to(self.real_root)
                and resolved.is_relative_to(self.prefix)):
            return False  # a virtualenv inside the project
        folders = rel.parts[:-1]
        # build output, installed packages, a conda environment or standard library inside the
        # project: the build's rule (`instrumentor.foreign`)
        return (not any(part in _NOT_OWN or part.startswith(".venv") for part in folders)
                and not foreign(self.real_root if root is None else root, folders))

    def _rewrite(self, path: Path, data: bytes) -> dict:
        """Instrumented text with local ids (cached), or {"code": None} when nothing changes."""
        # the revision too: a rewrite that changed keeps the version number until the next release;
        # and the interpreter: what parses and compiles (an entry's "invalid") is this Python's, and
        # the default cache is shared by every Python of the user (review 79 F1: 3.11's "invalid"
        # made 3.12 run a module with 3.12 syntax uninstrumented, silently)
        salt = f"|{__version__}.{REWRITE_REVISION}|{self.backend}|{MAP_FORMAT}|{sys.implementation.cache_tag}"
        digest = hashlib.blake2b(data + salt.encode(), digest_size=16).hexdigest()
        found = self.relative(path)
        # an entry script outside the project root (only where instrument_entry is called
        # directly: the launcher refuses one, review 79 F6)
        relpath = path.name if found is None else found[1].as_posix()
        key = f"{digest}-{relpath}"
        entry = self.memory.get(key)
        if entry is not None:
            return entry
        cache_file = self.cache_dir / f"{hashlib.blake2b(key.encode('utf-8', 'surrogatepass'), digest_size=16).hexdigest()}.json" if self.cache_dir else None
        if cache_file is not None:
            try:
                entry = json.loads(cache_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                entry = None
        if entry is None:
            try:
                source, _ = decode(data)
            except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
                # review 119 M2: Python 3.11 runs a file with a byte that is not UTF-8 in a comment,
                # which ran uninstrumented without a word; Python's own loader says why it refuses one
                entry = {"code": None, "n": 0, "linemap": None, "shifts": None, "columns": None,
                         "error": decode_failure(relpath, data, exc)}
                transient, source = False, data
            else:
                bound = region_bound(source)
                result = _instrument_deep(source, relpath, bound, self.backend)
                from runtime.original_lines import indent_shifts  # the hook runs in a process of the runtime

                shifts = indent_shifts(source, result.code, result.linemap) if result.code else None
                entry = {"code": result.code, "n": bound, "linemap": result.linemap, "shifts": shifts,
                         "columns": result.columns, "error": result.error}
                transient = result.transient
            if entry["error"] and not _compiles(source, path):
                entry["invalid"] = True  # Python's own loader reports it, exactly as without scaleprobe
            # a failure of this process (recursion, memory) is tried again next time
            if cache_file is not None and not transient:
                _write_atomic(cache_file, json.dumps(entry))
        if entry.get("error") and not entry.get("invalid"):  # computed or cached: said once per process
            print(f"scaleprobe: not instrumented: {entry['error']}", file=sys.stderr)
        self.memory[key] = entry
        return entry

    def invalid(self, path: Path) -> bool:
        """Whether the module does not compile even uninstrumented (a syntax error)."""
        try:
            return bool(self._rewrite(path, path.read_bytes()).get("invalid"))
        except OSError:
            return True  # unreadable: Python's loader says why

    def compile(self, path: Path, data: bytes) -> CodeType:
        entry = self._rewrite(path, data)
        if entry["code"] is None:
            return compile(data, str(path), "exec", dont_inherit=True)
        from runtime.original_lines import remap_tree, statement_ends

        # what compiling the file warns about, as Python says it: the parser's warnings from the
        # original text, the compiler's from the tree at the original lines; the instrumented
        # text's (at other lines) are not shown
        original = ast.parse(data, filename=str(path))
        with quiet_warnings(str(path)):
            tree = ast.parse(entry["code"], filename=str(path))
        found = self.relative(path)
        shift_ids(tree, self._base(entry["n"], path.name if found is None else found[1].as_posix()))
        remap_tree(tree, entry["linemap"], entry["shifts"], entry.get("columns"), statement_ends(original))
        return compile(tree, str(path), "exec", dont_inherit=True)

    def _base(self, n: int, relpath: str | None = None) -> int:
        global _nvtx_next
        if self.backend == "runtime":
            from runtime.probe import reserve

            from .revision import BUILD

            return reserve(n, relpath, BUILD)
        with _lock:  # NVTX ids only key a per-module dict; unique per process is enough
            base, _nvtx_next = _nvtx_next, _nvtx_next + n
        return base


def _instrument_deep(source: str, relpath: str, bound: int, backend: str):
    """instrument_source with the recursion limit `instrument`'s workers have (libcst recurses once
    per nesting level: a chain of 500 `+` needs more than the default 1000), set back after."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        return instrument_source(source, relpath, ids=IdAllocator(range(bound)), backend=backend)
    finally:
        sys.setrecursionlimit(limit)


def _compiles(source: str | bytes, path: Path) -> bool:
    try:
        with quiet_warnings(str(path)):  # shown when the module is compiled for real
            compile(source, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def shift_ids(tree: ast.AST, base: int) -> None:
    """Add `base` to every region id in probe calls, the region table and the NVTX attribute dict."""
    if base == 0:
        return

    def bump(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            node.value += base

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in _ID_CALLS and node.args:
                bump(node.args[0])
            elif name in _ID_TUPLE_CALLS and node.args and isinstance(node.args[0], ast.Tuple):
                for elt in node.args[0].elts:
                    bump(elt)
            elif name == "__sp_define__" and len(node.args) == 4 and isinstance(node.args[3], ast.Tuple):
                for region in node.args[3].elts:
                    if isinstance(region, ast.Tuple) and region.elts:
                        bump(region.elts[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "__sp_attr__":
            bump(node.slice)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "__sp_attr__" for t in node.targets):
                for k in node.value.keys:
                    if k is not None:
                        bump(k)


def _write_atomic(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs time


class _Loader(importlib.machinery.SourceFileLoader):
    instrumenter: Instrumenter

    def get_code(self, fullname: str) -> CodeType:
        path = Path(self.get_filename(fullname))
        return self.instrumenter.compile(path, self.get_data(str(path)))


class InstrumentingFinder:
    """Meta-path finder: the project's own source modules get the instrumenting loader."""

    def __init__(self, instrumenter: Instrumenter) -> None:
        self.instrumenter = instrumenter

    def find_spec(self, fullname: str, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or not spec.origin:
            return None
        origin = Path(spec.origin)
        if not self.instrumenter.owns(origin, fullname):
            return None
        if self.instrumenter.invalid(origin):
            # Left to the path finder after us: its loader raises the SyntaxError from importlib's
            # own frames, which Python hides, where ours would show importlib's and this module's.
            return None
        loader = _Loader(fullname, spec.origin)
        loader.instrumenter = self.instrumenter
        spec.loader = loader
        return spec


_installed: Instrumenter | None = None


def install(project_root: Path, *, cache_dir: Path | None = None, backend: str = "runtime") -> None:
    """Instrument the modules under `project_root` when they are imported from now on, here and in
    the `multiprocessing` children this process spawns (`instrumentor.spawnhook`)."""
    global _installed
    if _installed is not None:
        return
    if cache_dir is None:
        cache_dir = default_cache_dir()
    _installed = Instrumenter(project_root, cache_dir, backend)
    sys.meta_path.insert(0, InstrumentingFinder(_installed))
    spawnhook.propagate(_installed.root, cache_dir, backend)


def uninstall() -> None:
    global _installed
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, InstrumentingFinder)]
    _installed = None
    spawnhook.stop()


def owned(path: Path) -> bool:
    """Whether the installed hook instruments the source file `path`."""
    return _installed is not None and _installed.owns(Path(path), "__main__")


def left_as_is(path: Path | str) -> str | None:
    """Why the hook runs the file at `path` uninstrumented (`main.py:1: cannot read: ...`: a byte
    it cannot decode, where Python runs the file as it is), or None; nothing is printed."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError:
        return None  # Python's loader says why
    return decode_problem(path.name, data)


def instrument_entry(path: Path | str) -> CodeType:
    """The entry script's code object, instrumented, with original file name and lines: the name
    as given, made absolute (review 79 F7: a symlinked entry's traceback showed its target, where
    `__file__` and Python show the link), whatever its suffix."""
    path = Path(os.path.abspath(path))
    instrumenter = _installed or Instrumenter(path.parent, default_cache_dir(), "runtime")
    data = path.read_bytes()
    if instrumenter.invalid(path):
        # Python's own error for a file that does not compile as it is (review 79 F8: an unknown
        # coding cookie showed a chained traceback through tokenize), as for a module
        return compile(data, str(path), "exec", dont_inherit=True)
    if _installed is not None:
        spawnhook.note_entry(str(path))  # spawned children re-run this file instrumented too (review 79 F3)
    return instrumenter.compile(path, data)
