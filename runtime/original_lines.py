"""A built tree's modules, compiled with the user's own line numbers.

`instrument SRC -o OUT` writes files whose lines are shifted: probes need lines of their own. When
the first instrumented module of OUT registers (`linemap.register`), `install(root)` puts a finder
in `sys.meta_path`, just before Python's own path finder (import hooks installed before it, such
as pytest's assertion rewriting, keep their modules). From then on, a module of OUT whose file in
SRC is still the one OUT was built from (`OUT/.scaleprobe/sources.json` holds its hash) is compiled
from OUT's text with every line and column set back to SRC's, and `linecache` holds SRC's text
under OUT's file name (read again after `linecache.clearcache()`). The names stay OUT's
(`__file__`, `co_filename`), the numbers and the text become SRC's, so everything that reads code
agrees with itself and with the uninstrumented program: `frame.f_lineno`, `inspect.stack()`,
`inspect.getsource` of a function, class or module, `logging`'s `%(lineno)d`, `warnings`, the
tracebacks the program formats itself, a debugger.

Under the launcher the entry script is compiled so too (`entry_code`); `python OUT/main.py` compiles
it before any of this runs, and its header runs it again so compiled (`probe.define`); run by pdb,
cProfile or runpy it keeps OUT's lines (uncaught tracebacks are mapped by `runtime.linemap`). A module whose SRC file is gone or edited since the build, or whose
OUT file no longer matches its map, is compiled by Python as usual; an edited one is said once on
stderr (`runtime.stale_sources`). `SCALEPROBE_OUT_LINES=1` keeps
OUT's lines everywhere.

The code is cached beside Python's own, as `__pycache__/NAME.TAG.opt-scaleprobe.pyc`, valid for
the same OUT text, file name and source hash; Python's own loader never reads it.

    install(root)                 compile the modules of built tree `root` with original lines
    entry_code(path, data)        the entry script's code so compiled, or None
    compiled                      {OUT file name: SRC file name} of the modules compiled so
    remap_tree, indent_shifts     set an AST's lines and columns back (the import hook uses them)
    statement_ends                where SRC's compound statements end (probe lines close ours)
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
import threading
from collections.abc import Mapping
from types import CodeType
from typing import Any

from . import linemap as _linemap

SOURCES_NAME = "sources.json"  # same as instrumentor.project.SOURCES_NAME
_CACHE_TAG = "scaleprobe"
_CODE_VERSION = b"1"  # bumped when the same OUT text and maps compile to other code here
_NEWLINE = re.compile(r"\r\n|\r|\n")

_lock = threading.Lock()
# real OUT root -> {relpath: (blake2b of the SRC file it was built from, blake2b of the OUT file written)}
_roots: dict[str, dict[str, tuple[str, str]]] = {}
_names: set[str] = set()  # last parts of the module names those files can have
_finder: "_Finder | None" = None
compiled: dict[str, str] = {}  # OUT file name -> the SRC file whose lines and text it runs with


def install(root: str) -> None:
    """From now on, compile the modules of built tree `root` with their original lines."""
    global _finder
    real = os.path.realpath(root)
    with _lock:
        if real in _roots:
            return
        _roots[real] = {}
        if os.environ.get("SCALEPROBE_OUT_LINES", "").strip().lower() in ("1", "true", "yes", "on"):
            return
        hashes = _read_hashes(real)
        if not hashes:
            return  # built before sources.json existed, or nothing instrumented
        _roots[real] = hashes
        for relpath in hashes:
            parts = [os.path.basename(real), *relpath.split("/")]  # OUT itself may be a package
            _names.add(parts[-2] if parts[-1] == "__init__.py" else parts[-1].rsplit(".", 1)[0])
        if _finder is None:
            _finder = _Finder()
            # just before Python's path finder: the hooks in front of it (pytest's assertion
            # rewriting, typeguard's, a user's) keep the modules they take
            at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
                      len(sys.meta_path))
            sys.meta_path.insert(at, _finder)
            _keep_source_after_clearcache()


def check_source(root: str, relpath: str) -> None:
    """For a module of built tree `root` that registers without having been compiled here (the
    first module of the tree, which the finder comes too late for: an entry run as `python -m`;
    one another import hook took; every one under SCALEPROBE_OUT_LINES=1): hash its SRC file as
    `_original_code` does, and say once that it changed since the build (review 128 MED-2). One
    read and hash of that file, at its import."""
    from . import stale_sources

    if stale_sources.said():
        return
    real = os.path.realpath(root)
    hashes = _roots.get(real) or _read_hashes(real)
    built = hashes.get(relpath)
    if built is None:
        return
    tree = _linemap._load(root if root.endswith(os.sep) else root + os.sep)
    if tree is None or tree.source is None:
        return
    src = os.path.join(tree.source, *relpath.split("/"))
    if stale_sources.differs(src, built[0]):
        stale_sources.say_once(src, real)


def entry_code(path: str, data: bytes) -> CodeType | None:
    """The code of an entry script of a built tree, compiled with its original lines; None when it
    is not in one (or cannot be: see the module's doc)."""
    real = os.path.realpath(path)
    parent = os.path.dirname(real)
    while True:
        if os.path.isdir(os.path.join(parent, _linemap.STATE_DIR)):
            install(parent)
            return _guarded(path, data, cached=False)  # Python keeps no compiled script either
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up


def _read_hashes(root: str) -> dict[str, tuple[str, str]]:
    import json

    try:
        with open(os.path.join(root, _linemap.STATE_DIR, SOURCES_NAME), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: (v[0], v[1]) for k, v in found.items()
            if isinstance(k, str) and isinstance(v, list) and len(v) == 2 and all(isinstance(h, str) for h in v)}


def _where(path: str) -> tuple[str, str, tuple[str, str]] | None:
    """(real OUT root, relpath, (source hash, OUT hash)) of a file of a built tree handled here."""
    real = os.path.realpath(path)
    parent = os.path.dirname(real)
    rel = [os.path.basename(real)]
    while True:
        hashes = _roots.get(parent)
        if hashes is not None:
            relpath = "/".join(reversed(rel))
            digest = hashes.get(relpath)
            return (parent, relpath, digest) if digest else None
        up = os.path.dirname(parent)
        if up == parent:
            return None
        rel.append(os.path.basename(parent))
        parent = up


class _Finder:
    """Meta-path finder: modules of a built tree get `_Loader`; everything else is left alone."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.rpartition(".")[2] not in _names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return None
        if _where(spec.origin) is None:
            return None
        spec.loader = _Loader(fullname, spec.origin)
        if spec.cached is not None:
            spec.cached = _cache_path(spec.origin) or spec.cached  # the file this loader writes
        return spec

    def invalidate_caches(self) -> None:
        pass


class _Loader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> CodeType | None:
        path = self.get_filename(fullname)
        try:
            data = self.get_data(path)
        except OSError:
            return super().get_code(fullname)
        code = _guarded(path, data)
        return code if code is not None else super().get_code(fullname)

    def get_source(self, fullname: str) -> str | None:
        """SRC's text where the module runs with its lines (doctest, and whatever asks the loader)."""
        src = compiled.get(self.get_filename(fullname))
        if src is not None:
            try:
                with open(src, "rb") as handle:
                    from importlib.util import decode_source

                    return decode_source(handle.read())
            except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
                pass
        return super().get_source(fullname)


def _guarded(path: str, data: bytes, cached: bool = True) -> CodeType | None:
    try:
        return _original_code(path, data, cached)
    except Exception:  # noqa: BLE001 - a damaged map or cache: Python compiles OUT's file as usual
        return None


def _original_code(path: str, data: bytes, cached: bool = True) -> CodeType | None:
    where = _where(path)
    if where is None:
        return None
    root, relpath, (digest, out_digest) = where
    tree = _linemap._load(root + os.sep)
    if tree is None or tree.source is None or relpath not in tree.linemaps:
        return None
    src = os.path.join(tree.source, *relpath.split("/"))
    try:
        with open(src, "rb") as handle:
            src_data = handle.read()
    except OSError:
        return None
    import hashlib

    if hashlib.blake2b(src_data, digest_size=16).hexdigest() != digest:
        # edited since the build: its lines are no longer the ones OUT was made from, and the run
        # measures the code as built, which is said once (review 128 MED-2)
        from .stale_sources import say_once

        say_once(src, root)
        return None
    if hashlib.blake2b(data, digest_size=16).hexdigest() != out_digest:
        return None  # OUT's file was edited after the build: it runs as written, at its own lines
    # an entry script's code is neither read from nor written to the cache: `python main.py` writes
    # no __pycache__ file for it (review 102 LOW-2)
    cache = _cache_path(path) if cached else None
    maps = repr((tree.linemaps[relpath], tree.columns.get(relpath))).encode()
    key = hashlib.blake2b(b"\0".join((_CODE_VERSION, data, path.encode("utf-8", "surrogatepass"), digest.encode(), maps)),
                          digest_size=8).digest()
    code = _read_cache(cache, key)
    if code is None:
        # first, so that the compiler's warnings (at SRC's lines) are shown with SRC's name and text
        compiled[path] = src
        try:
            code = _compile(data, src_data, path, tree.linemaps[relpath], tree.columns.get(relpath), src)
        finally:
            if code is None:  # also when it raised: Python compiles OUT's file, at OUT's lines
                compiled.pop(path, None)
        if code is None:
            return None
        _write_cache(cache, key, code)
    _show_source(path, src_data)
    compiled[path] = src
    return code


def _show_source(path: str, src_data: bytes) -> list[str] | None:
    """linecache holds SRC's text under OUT's file name: the lines the code now names are those.
    An entry without a modification time is never checked against the file (`linecache.checkcache`).
    The lines, or None where SRC's text cannot be decoded."""
    import io
    import linecache
    from importlib.util import decode_source

    try:
        lines = io.StringIO(decode_source(src_data)).readlines()
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[path] = (len(src_data), None, lines, path)
    return lines


_linecache_update: Any = None  # linecache.updatecache as it was before _keep_source_after_clearcache


def _keep_source_after_clearcache() -> None:
    """`linecache.clearcache()` drops the entries `_show_source` made, and linecache then read OUT's
    file for the lines of a module compiled with SRC's lines: every later traceback through it
    (unittest's reports too), `inspect.getsource`, showed OUT's text at SRC's line numbers (review
    107 LOW-3: test_traceback's `clearcache()`). linecache reads a file it does not hold with
    `updatecache` (from getlines, also after a `lazycache` entry): wrapped, it puts SRC's text back
    for those files and reads every other file as before. A line linecache holds is read as before,
    with no call of ours (`getline`, `getlines`); an entry of ours has no modification time, so
    `checkcache()` keeps it."""
    global _linecache_update
    import linecache

    if _linecache_update is not None:
        return
    _linecache_update = linecache.updatecache
    linecache.updatecache = _updatecache


def _updatecache(filename: str, module_globals: Any = None) -> list[str]:
    """linecache.updatecache, which for a module compiled with SRC's lines (`compiled`) puts SRC's
    text in the cache again, as at its import; where SRC can no longer be read, no lines (OUT's
    would be another file's text at those numbers), as for a file that is gone."""
    src = compiled.get(filename) if isinstance(filename, str) else None
    if src is None:
        return _linecache_update(filename, module_globals)
    import linecache

    try:
        with open(src, "rb") as handle:
            lines = _show_source(filename, handle.read())
    except OSError:
        lines = None
    if lines is None:
        linecache.cache.pop(filename, None)
        return []
    return lines


def _compile(data: bytes, src_data: bytes, path: str, lines: list[int], columns: Any,
             src: str | None = None) -> CodeType | None:
    """OUT's code at SRC's lines. What compiling warns about (SyntaxWarning: `"is" with a literal`,
    `invalid escape sequence`) is said as Python says it compiling SRC: the parser's warnings come
    from parsing SRC's text (under SRC's name, `src`), those of OUT's text are ignored; the
    compiler's come from the remapped tree, at SRC's lines (runtime.linemap shows SRC's name)."""
    import ast
    from importlib.util import decode_source

    try:
        text, original = decode_source(data), decode_source(src_data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None
    if len(_split_lines(text)) != len(lines):
        return None  # OUT's file was edited after the build: its map no longer holds
    try:
        original_tree = ast.parse(original, filename=src or path)
        with quiet_warnings(path):
            tree = ast.parse(text, filename=path)
        remap_tree(tree, lines, indent_shifts(original, text, lines), columns if isinstance(columns, dict) else None,
                   statement_ends(original_tree))
        return compile(tree, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError, IndexError, RecursionError):
        return None  # Python's own compile of OUT's text says what is wrong, at OUT's lines


class quiet_warnings:
    """Ignore the warnings about file `filename` that compiling it gives (they name the module
    Python derives from the file name) while in the block, and nothing else.

    `warnings.catch_warnings` would do it, but entering and leaving it bumps the filters' version,
    which empties every module's `__warningregistry__`: a warning the program has shown once at a
    line (the default filter) would show again after every import. This adds one filter in place
    and takes it out again, which does not."""

    def __init__(self, filename: str) -> None:
        module = filename[:-3] if filename.endswith(".py") else filename or "<unknown>"
        self._entry = ("ignore", None, Warning, re.compile(re.escape(module) + r"\Z"), 0)

    def __enter__(self) -> None:
        import warnings

        self._filters = warnings.filters  # the list the C code reads now
        self._filters.insert(0, self._entry)

    def __exit__(self, *exc: Any) -> None:
        for index, item in enumerate(self._filters):
            if item is self._entry:
                del self._filters[index]
                break


def _cache_path(path: str) -> str | None:
    level = sys.flags.optimize
    try:
        from importlib.util import cache_from_source

        return cache_from_source(path, optimization=f"{_CACHE_TAG}{level or ''}")
    except (NotImplementedError, ValueError):
        return None


def _read_cache(cache: str | None, key: bytes) -> CodeType | None:
    if cache is None:
        return None
    import marshal
    from importlib.util import MAGIC_NUMBER

    try:
        with open(cache, "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    head = MAGIC_NUMBER + key
    if not blob.startswith(head):
        return None
    try:
        code = marshal.loads(blob[len(head):])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write_cache(cache: str | None, key: bytes, code: CodeType) -> None:
    if cache is None or sys.dont_write_bytecode:
        return
    import marshal
    from importlib.util import MAGIC_NUMBER

    tmp = f"{cache}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(MAGIC_NUMBER + key + marshal.dumps(code))
        os.replace(tmp, cache)  # ranks that import at once each write a whole file
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (str.splitlines also splits on form feeds)."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def indent_shifts(source: str, code: str, linemap: list[int]) -> list[int]:
    """Per out line, original indentation minus ours (the try blocks indent the body further)."""
    orig = _split_lines(source)
    out = _split_lines(code)
    shifts = []
    for text, line in zip(out, linemap):
        before = orig[line - 1] if 0 < line <= len(orig) else ""
        if before.strip() and before.strip() == text.strip():
            shifts.append((len(before) - len(before.lstrip())) - (len(text) - len(text.lstrip())))
        else:
            shifts.append(0)
    return shifts


def statement_ends(tree: Any) -> dict[tuple[int, int, str], tuple[int, int]]:
    """(line, column, kind) -> (end line, end column) of the compound statements of the original
    source's AST. An instrumented def, class, loop or with ends on a probe line (`finally:
    __sp_exit__(...)`), which has no original position: `remap_tree` gives them these ends, which
    tools that match bytecode positions to the source (`executing`, and what uses it) rely on."""
    ends = {}
    todo = list(getattr(tree, "body", ()))
    while todo:
        node = todo.pop()
        children = [getattr(node, name, None) for name in ("body", "orelse", "finalbody", "handlers", "cases")]
        if any(children) and hasattr(node, "lineno"):  # a match_case has no position of its own
            ends[(node.lineno, node.col_offset, type(node).__name__)] = (node.end_lineno, node.end_col_offset)
        for group in children:
            if group:
                todo.extend(group)
    return ends


def remap_tree(tree: Any, linemap: list[int], shifts: list[int] | None = None,
               columns: Mapping[str, list[list[int]]] | None = None,
               ends: Mapping[tuple[int, int, str], tuple[int, int]] | None = None) -> Any:
    """Set every node's lines (and, given `shifts`, columns) to the original ones. `columns`
    (instrumentor.positions.column_points) maps the columns of lines changed in place, where no
    shift holds; `ends` (`statement_ends`) where the original compound statements end.

    It runs over every node of a module at its first import without a cache (380,000 nodes for
    25,000 lines), so the walk and the work per node are written out in one loop, with no call,
    `min`/`max` or key for `ends` per node in the common case: 0.25 s for that module where a call
    per column and a lookup of `ends` per node took 0.55 s (review 44 F5,
    benchmarks/original_lines_compile.py)."""
    import ast

    last = len(linemap)
    if not last:
        return tree
    points = {int(line): dict(map(tuple, pairs)) for line, pairs in (columns or {}).items()}
    kinds = {kind for _, _, kind in ends} if ends else set()  # the only types `ends` can hold
    leaves = _leaf_types()
    AST = ast.AST
    todo = [tree]
    while todo:
        node = todo.pop()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                if type(value) not in leaves:
                    todo.append(value)
            elif isinstance(value, list):
                todo.extend([v for v in value if isinstance(v, AST)])
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        end = getattr(node, "end_lineno", None) or lineno
        lineno = lineno if lineno < last else last
        end = end if end < last else last
        col, end_col = node.col_offset, getattr(node, "end_col_offset", None)
        if shifts is not None:
            if lineno in points:
                col = _point_column(points[lineno], col)
            else:  # moved with its line's indentation
                col += shifts[lineno - 1]
                col = col if col > 0 else 0
            node.col_offset = col
            if end_col is not None:
                if end in points:
                    end_col = _point_column(points[end], end_col)
                else:
                    end_col += shifts[end - 1]
                    end_col = end_col if end_col > 0 else 0
                node.end_col_offset = end_col
        first = node.lineno = linemap[lineno - 1]
        end = linemap[end - 1]
        end = end if end > first else first
        if kinds and type(node).__name__ in kinds:
            found = ends.get((first, col, type(node).__name__))  # type: ignore[union-attr]
            if found is not None:
                end, end_col = found
                node.end_col_offset = end_col
        node.end_lineno = end
        if end == first and end_col is not None and end_col < col:
            node.end_col_offset = col  # compile() checks the ranges
    return tree


def _point_column(found: dict[int, int], col: int) -> int:
    """A column on a line changed in place: its node's original column, or for probe code there,
    where the original code before it ends."""
    if col in found:
        return found[col]
    before = [c for c in found if c <= col]
    return found[max(before)] if before else 0


_leaves: frozenset[type] | None = None


def _leaf_types() -> frozenset[type]:
    """The AST classes without fields or positions (Load, Store, Add, ...). The parser shares one
    instance of each, which a quarter of a module's nodes are: `remap_tree` need not visit them."""
    global _leaves
    if _leaves is None:
        import ast

        _leaves = frozenset(t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, ast.AST)
                            and not t._fields and not getattr(t, "_attributes", ()))
    return _leaves
