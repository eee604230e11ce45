"""Tracebacks of a built instrumented tree, shown at the user's original files and lines.

`instrument SRC -o OUT` cannot keep line numbers (probes need lines of their own), so it writes
`OUT/.scaleprobe/linemap.json` (`{relpath: [original line of out line 1, 2, ...]}`) and records the
absolute SRC in `OUT/.scaleprobe/manifest.json` (`"source"`). At import, `probe.define` only calls
`register(__file__, relpath)`: a dict entry. The map is read the first time a traceback through an
instrumented file is shown, never on the probe path.

    register(filename, relpath)        remember where an instrumented module came from
    format_exception(exc, tb=None)     the traceback text, frames mapped to SRC/relpath:line
    excepthook, thread_excepthook      sys.excepthook and threading.excepthook, installed by the
                                       first register() in front of the hooks already there
    show(tp, value, tb, next_hook)     how excepthooks of the runtime end (the recorder's too)
    hooked(hook, next_hook)            the runtime put a sys.excepthook in (for the exceptiongroup
                                       backport on Python 3.10: see _BackportFinder)

A frame is mapped to `SRC/relpath` when that file still exists, else to `OUT/relpath` with the
original line number (and a note under the exception saying so); a SRC file edited since the build
(`OUT/.scaleprobe/sources.json` holds its hash) is named with the line the build read, which is the
copy's, and a note says so. Frames of other files are left
exactly as Python shows them, and a map that no longer matches its file (edited after the build)
is ignored rather than trusted.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import Any, Callable, Iterator

STATE_DIR = ".scaleprobe"  # same as instrumentor.regions.STATE_DIR; the runtime must not import it

# Python 3.11+: frames have positions (end line, columns: the carets) and exceptions __notes__
_POSITIONS = sys.version_info >= (3, 11)
# Python 3.13+ shows every line of a frame's statement (lineno to end_lineno): a FrameSummary given
# its text must be given all of them, and end_colno is a column of the last one
_ALL_LINES = sys.version_info >= (3, 13)
# Python 3.13+ shows an uncaught exception with the traceback module; before, C code did
# (Python/pythonrun.c), which shows a SyntaxError's line and carets differently (review 44)
_C_DISPLAY = sys.version_info < (3, 13)
# Python 3.10: ExceptionGroup is the `exceptiongroup` backport's, which makes the traceback module
# show a group's exceptions (and puts in a sys.excepthook that prints with it) only if sys.excepthook
# is still Python's own when it is imported (review 50 F1): see _BackportFinder
_BACKPORT = sys.version_info < (3, 11)
# Python 3.13+ colours an uncaught exception's traceback where `_colorize.can_colorize()` says so
_COLORS = sys.version_info >= (3, 13)

_files: dict[str, str] = {}  # co_filename of an instrumented module -> its relpath inside OUT
_trees: dict[str, "_Tree | None"] = {}  # OUT root -> its loaded maps (None: no usable map there)
_roots_seen: set[str] = set()
_lock = threading.Lock()
_installed = False
_next_hook: Callable[..., Any] | None = None
_next_thread_hook: Callable[..., Any] | None = None
_chained: dict[Any, Any] = {}  # the runtime's sys.excepthooks -> the hook each one calls next
_backport_hook: Callable[..., Any] | None = None  # the backport's hook, where our hooks lead to Python's own
_backport_watched = False


class _Tree:
    """One built OUT directory: its line maps and where its source tree was."""

    def __init__(self, root: str, linemaps: dict[str, list[int]], source: str | None,
                 columns: dict | None = None, hashes: dict[str, tuple[str, str]] | None = None) -> None:
        self.root = root
        self.linemaps = linemaps
        # relpath -> {out line: [[out column, original column], ...]} for lines changed in place
        self.columns = columns if isinstance(columns, dict) else {}
        self.source = source if source and os.path.isdir(source) else None
        self.missing_source = source if source and self.source is None else None
        self.checked: dict[str, bool] = {}  # relpath -> map length equals the file's line count
        # relpath -> (hash of the SRC file it was built from, of the OUT file written): sources.json
        self.hashes = hashes or {}
        self._edited: dict[str, bool] = {}

    def edited(self, relpath: str) -> bool:
        """Whether SRC's file of `relpath` differs from the one the build was made from (review 128
        MED-2: its text at the build's line numbers is another line). Read once per file."""
        found = self._edited.get(relpath)
        if found is None:
            from .stale_sources import differs

            built = self.hashes.get(relpath)
            found = built is not None and self.source is not None and \
                differs(os.path.join(self.source, *relpath.split("/")), built[0])
            self._edited[relpath] = found
        return found

    def matches(self, relpath: str, filename: str) -> bool:
        ok = self.checked.get(relpath)
        if ok is None:
            ok = _count_lines(filename) == len(self.linemaps.get(relpath, ()))
            self.checked[relpath] = ok
        return ok


def _count_lines(filename: str) -> int:
    # As the instrumentor counts them (and the tokenizer): a form feed does not end a line.
    import re

    try:
        with open(filename, "rb") as handle:
            data = handle.read()
    except OSError:
        return -1
    return len(re.findall(rb"\r\n|\r|\n", data)) + (1 if data and not data.endswith((b"\n", b"\r")) else 0)


def register(filename: str | None, relpath: str) -> None:
    """Called by `probe.define` for every instrumented module; installs the excepthook once."""
    global _installed, _next_hook, _next_thread_hook
    if not filename:
        return
    _files[filename] = relpath
    root = filename[: len(filename) - len(relpath)]
    from . import original_lines

    if root not in _roots_seen and filename.replace(os.sep, "/").endswith("/" + relpath):
        _roots_seen.add(root)
        original_lines.install(root)  # the tree's other modules get its original lines
    if filename not in original_lines.compiled:
        # it runs at OUT's lines (the tree's first module, SCALEPROBE_OUT_LINES=1, another import
        # hook's, or its SRC file changed): is its SRC file still the build's? (review 128 MED-2)
        original_lines.check_source(root, relpath)
    if not _installed:
        _installed = True
        _preload()
        _next_hook = sys.excepthook
        sys.excepthook = excepthook
        hooked(excepthook, _next_hook)
        _next_thread_hook = threading.excepthook
        threading.excepthook = thread_excepthook
        _map_warnings()


def _preload() -> None:
    """Import now what the hooks need when an exception ends the program. Importing them then would
    run string code (namedtuple and dataclass definitions `exec` their methods), which makes
    CPython forget that the program died of an uncaught KeyboardInterrupt: it would exit 1 instead
    of dying by SIGINT as the program does uninstrumented."""
    import json  # noqa: F401 - the source tree's manifest
    import linecache  # noqa: F401
    import traceback  # noqa: F401 - imports tokenize too


def hooked(hook: Callable[..., Any], next_hook: Callable[..., Any]) -> None:
    """The runtime put `hook` in as sys.excepthook, in front of `next_hook` (here, and in the
    recorder, which may start first). On Python 3.10, from then on, a program's import of the
    exceptiongroup backport sees Python's own hook where ours lead to it (`_BackportFinder`)."""
    global _backport_watched
    _chained[hook] = next_hook
    if _BACKPORT and not _backport_watched and "exceptiongroup" not in sys.modules:
        _backport_watched = True
        sys.meta_path.insert(0, _BackportFinder)


def _leads_to_default(hook: Any) -> bool:
    """Whether `hook`, through the runtime's hooks, ends in Python's own sys.excepthook."""
    for _ in range(len(_chained) + 1):
        if hook not in _chained:
            break
        hook = _chained[hook]
    return hook is sys.__excepthook__


class _BackportFinder:
    """First in sys.meta_path on Python 3.10 until the `exceptiongroup` backport is imported (review
    50 F1). The backport patches the traceback module, so that `traceback.format_exc()`, logging
    and its own sys.excepthook show a group's exceptions, only if sys.excepthook is Python's own
    when it is imported: the runtime's is there. Its package runs with Python's own in place where
    the runtime's hooks lead to it, as in the program uninstrumented; the hook it puts in is then
    where ours end (`show`), and ours are put back in front of it."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "exceptiongroup":
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None) if finder is not cls else None
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None  # not installed: importlib goes on to the next finders
        try:
            sys.meta_path.remove(cls)  # importlib stops at the spec returned: its loop loses nothing
        except ValueError:
            pass
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module: Any) -> None:
            try:
                del loader.exec_module  # this load's only (a loader may serve others)
            except AttributeError:
                pass
            _run_backport(run, module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            pass
        return spec


def _run_backport(run: Callable[[Any], None], module: Any) -> None:
    global _backport_hook
    hook = sys.excepthook
    ours = _leads_to_default(hook)
    if ours:
        sys.excepthook = sys.__excepthook__
    try:
        run(module)
    finally:
        if ours:
            if sys.excepthook is not sys.__excepthook__:
                _backport_hook = sys.excepthook
            sys.excepthook = hook


def _is_backport_hook(hook: Any) -> bool:
    """Whether `hook` is the exceptiongroup backport's sys.excepthook (Python 3.10)."""
    formatting = sys.modules.get("exceptiongroup._formatting") if _BACKPORT else None
    return hook is not None and hook is getattr(formatting, "exceptiongroup_excepthook", None)


def _backport_patched() -> bool:
    """Whether the exceptiongroup backport patched the traceback module (Python 3.10), which then
    shows groups' exceptions and every exception's notes itself."""
    formatting = sys.modules.get("exceptiongroup._formatting") if _BACKPORT else None
    if formatting is None:
        return False
    import traceback

    original = getattr(formatting, "traceback_exception_original_format_exception_only", None)
    return original is not None and traceback.TracebackException.format_exception_only is not original


def _map_warnings() -> None:
    """Warnings name the line that caused them: show the original file and line, not the built
    copy's (warnings.showwarning is the documented hook; a program or library that replaces it
    later, as logging.captureWarnings does, gets the copy's location)."""
    import warnings

    previous = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        try:
            found = _lookup(filename)
            src = _compiled_source(filename)
            if src is not None:
                filename = src  # its lines are SRC's already
            elif found is not None and line is None:
                tree, relpath = found
                lines = tree.linemaps[relpath]
                if 1 <= lineno <= len(lines):
                    lineno = lines[lineno - 1]
                    filename, line = _original(tree, relpath, lineno, filename)
                    line = line or None
        except Exception:  # noqa: BLE001 - a broken map must never hide the warning
            pass
        if previous is getattr(warnings, "_showwarning_orig", None):
            source = _warning_source()
            if source is not None:
                # Python's own display with the warning's source kept: tracemalloc's "Object
                # allocated at" traceback, or its hint (review 44: the hook's arguments lack it)
                warnings._showwarnmsg_impl(warnings.WarningMessage(message, category, filename, lineno, file, line,
                                                                   source))
                return
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning


def _warning_source() -> Any:
    """The `source` of the warning being shown (the object a ResourceWarning is about), which
    `warnings._showwarnmsg` holds but does not pass to a replaced `showwarning`; None where it
    cannot be found or the private names it takes are not there."""
    try:
        import warnings

        caller = sys._getframe(2)
        if caller.f_code.co_name != "_showwarnmsg" or not hasattr(warnings, "_showwarnmsg_impl"):
            return None
        return getattr(caller.f_locals.get("msg"), "source", None)
    except Exception:  # noqa: BLE001 - only a detail of the display is at stake
        return None


def excepthook(tp: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """Print the mapped traceback in place of Python's default; any other hook is called instead."""
    show(tp, value, tb, _next_hook if _next_hook is not None else sys.__excepthook__)


def show(tp: type[BaseException], value: BaseException, tb: TracebackType | None,
         next_hook: Callable[..., Any]) -> None:
    """End of an excepthook chain: `next_hook(tp, value, tb)`, mapped where it is Python's default.

    The recorder's hook ends with this too, so the order in which the two were installed (the
    recorder can start before the first instrumented module, for manual regions) does not matter.
    """
    if next_hook is sys.__excepthook__ and _backport_hook is not None:
        next_hook = _backport_hook  # where the program's import of the backport put it (3.10)
    backport = _is_backport_hook(next_hook)  # it prints traceback.format_exception's text
    if (next_hook is sys.__excepthook__ or backport) and print_mapped(value, tb, uncaught=not backport):
        return
    next_hook(tp, value, tb)


def print_mapped(exc: BaseException, tb: TracebackType | None, *, uncaught: bool = False, prefix: str = "") -> bool:
    """Write `prefix` and the traceback of `exc` mapped back to stderr where it has frames of a
    built tree (`format_exception`), and say whether it did; False where nothing maps (or the map
    fails: a broken map must never hide the user's error), for the caller's own printing."""
    try:
        text = format_exception(exc, tb, _only_if_mapped=True, _uncaught=uncaught)
    except Exception:  # noqa: BLE001 - a broken map must never hide the user's error
        text = None
    if text is None:
        return False
    try:
        sys.stderr.write(prefix + text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    return True


def thread_excepthook(args: Any) -> None:
    """threading.excepthook: Python's own text for an uncaught exception in a thread, mapped."""
    nxt = _next_thread_hook if _next_thread_hook is not None else threading.__excepthook__
    if nxt is threading.__excepthook__ and args.exc_type is not SystemExit and args.exc_value is not None:
        name = args.thread.name if args.thread is not None else threading.get_ident()
        if print_mapped(args.exc_value, args.exc_traceback, uncaught=True, prefix=f"Exception in thread {name}:\n"):
            return
    nxt(args)


def format_exception(exc: BaseException, tb: TracebackType | None = None, *,
                     _only_if_mapped: bool = False, _uncaught: bool = False) -> str | None:
    """`traceback.format_exception(exc)` as one string, with instrumented frames mapped back.

    `tb` defaults to `exc.__traceback__`. Chained exceptions (`__cause__`, `__context__`) and
    exception groups are mapped too. `_uncaught`: the text the interpreter shows for an uncaught
    exception instead (the excepthooks), which differs for a SyntaxError before Python 3.13.
    """
    import traceback

    if tb is None:
        tb = exc.__traceback__
    te = traceback.TracebackException(type(exc), exc, tb, compact=True)
    missing: set[str] = set()
    edited: set[str] = set()  # SRC files changed since the build (review 128 MED-2)
    mapped = _map_all(te, missing, edited)
    if _only_if_mapped and not mapped:
        return None
    if _uncaught and _C_DISPLAY:
        _display_syntax_errors_as_c(te)
    if missing or edited:
        notes = list(getattr(te, "__notes__", None) or [])  # a copy: the exception's own list stays
        for source in sorted(missing):
            where = f"source tree {source} no longer exists" if source else "no source tree was recorded"
            notes.append(f"scaleprobe: {where}; frames in the instrumented copy show their original "
                         "line numbers but the copy's source text")
        if edited:
            shown = ", ".join(sorted(edited))
            notes.append(f"scaleprobe: {shown} changed since the build: {'their' if len(edited) > 1 else 'its'} "
                         "frames show the line numbers and text the build was made from (the code that ran); "
                         "run instrument again")
        te.__notes__ = notes
    text = "".join(te.format(**(_colors() if _uncaught else {})))
    if (missing or edited) and not _POSITIONS and ("format_exception_only" in vars(te) or not _backport_patched()):
        # 3.10 shows no notes (unless the exceptiongroup backport does): after the exception's
        # line, as 3.11 does
        text += "".join(f"{note}\n" for note in notes)
    return text


def _colors() -> dict[str, bool]:
    """TracebackException.format's `colorize` as the interpreter passes it to show an uncaught
    exception (3.13+: `traceback._print_exception_bltin`, on a terminal, `PYTHON_COLORS=1`,
    `FORCE_COLOR`; review 50 F5); nothing where that Python has none."""
    if not _COLORS:
        return {}
    try:
        import _colorize

        return {"colorize": bool(_colorize.can_colorize())}
    except Exception:  # noqa: BLE001 - no colours rather than no traceback
        return {}


def _map_all(te: Any, missing: set[str], edited: set[str] | None = None) -> int:
    return sum(_map_stack(cur.stack, missing, edited) for cur in _chain(te))


def _chain(te: Any) -> Iterator[Any]:
    """`te` and every TracebackException it shows: causes, contexts, members of groups."""
    seen, todo = set(), [te]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend((cur.__cause__, cur.__context__, *(getattr(cur, "exceptions", None) or ())))


def _display_syntax_errors_as_c(te: Any) -> None:
    """Show the SyntaxErrors of `te` as Python 3.10 to 3.12 show them uncaught (review 44): their
    C code strips tabs and form feeds before the line, not only spaces, and places the carets by
    other rules (`_c_syntax_error`); the traceback module's way would show a tab-indented line with
    its tab and a caret line where Python shows none."""
    import functools

    original = None
    if _backport_patched():  # its format_exception_only calls the class's _format_syntax_error
        original = getattr(sys.modules["exceptiongroup._formatting"],
                           "traceback_exception_original_format_exception_only", None)
    for cur in _chain(te):
        if issubclass(cur.exc_type, SyntaxError):
            # format_exception_only calls this method of the instance (3.10 to 3.12 alike)
            cur._format_syntax_error = functools.partial(_c_syntax_error, cur)
            if original is not None:  # the traceback module's own, which does (and shows no notes, as C)
                cur.format_exception_only = functools.partial(original, cur)


def _c_syntax_error(te: Any, stype: str) -> list[str]:
    """The lines of pythonrun.c's `print_exception` for a SyntaxError (3.10 to 3.12), from the
    fields TracebackException copied; the traceback module's lines where its text has no UTF-8
    form (the C code shows next to nothing there)."""
    import traceback

    fields = _c_fields(te)
    if fields is None:  # the C code could not read the fields: it shows str(exc), as for others
        return [traceback._format_final_exc_line(stype, te._str)]
    lineno, offset, end_lineno, end_offset = fields
    lines = [f'  File "{"<string>" if te.filename is None else te.filename}", line {lineno}\n']
    if isinstance(te.text, str):
        try:
            lines += _c_error_text(te.text.encode("utf-8"), lineno, offset, end_lineno, end_offset)
        except UnicodeEncodeError:
            return list(type(te)._format_syntax_error(te, stype))
    lines.append(traceback._format_final_exc_line(stype, te.msg))  # no ": " when msg is None or ""
    return lines


def _c_fields(te: Any) -> tuple[int, int, int, int] | None:
    """(lineno, offset, end_lineno, end_offset) as `parse_syntax_error` reads them (-1: none),
    or None where it fails (no line number). Only SyntaxError itself has its end read: for a
    subclass (IndentationError, TabError) the C code takes none."""
    try:
        lineno = int(te.lineno)  # TracebackException keeps str(exc.lineno)
        offset = -1 if te.offset is None else int(te.offset)
        if te.exc_type is not SyntaxError:
            return lineno, offset, lineno, -1
        end_lineno = lineno if te.end_lineno is None else int(te.end_lineno)
        end_offset = -1 if te.end_offset is None else int(te.end_offset)
    except (TypeError, ValueError):
        return None
    return lineno, offset, end_lineno, end_offset


def _c_error_text(data: bytes, lineno: int, offset: int, end_lineno: int, end_offset: int) -> list[str]:
    """The source line and caret line of `print_error_text`, step by step: it works on the UTF-8
    bytes of the text, with the offsets as given (columns in characters)."""
    size = len(data)
    if end_lineno > lineno:
        end_offset = size  # an error over several lines: carets to the end of the first
    end_offset = min(end_offset, size + 1)
    carets = end_offset - offset if 0 < end_offset and offset < end_offset else 1
    data = data.split(b"\0", 1)[0]  # a C string
    stripped = data.lstrip(b" \t\f")  # all leading whitespace, where traceback strips spaces
    offset = offset - 1 - (len(data) - len(stripped))
    data = stripped
    length = len(data) - 1 if data.endswith(b"\n") else len(data)
    offset = min(offset, length)
    while True:  # the text may hold several lines: the one the offset is on, and those after it
        nl = data.find(b"\n")
        if nl < 0 or nl >= offset:
            break
        data, length, offset = data[nl + 1:], length - nl - 1, offset - nl - 1
    lines = ["    " + data.decode("utf-8") + ("" if data[length:length + 1] == b"\n" else "\n")]
    if offset >= 0:  # no caret line for an offset left of the text
        lines.append("    " + " " * offset + "^" * carets + "\n")
    return lines


# the probes' async wrappers (runtime/probe.py): Python code between the user's `async for` /
# `async with` and the user's __anext__/__aenter__/__aexit__; their frames are left out of a shown
# traceback (errors before those, such as a TypeError for `async for x in 5`, are raised by the
# statement itself: see `series.raise_at_statement`)
_PROBE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
_PASS_THROUGH = frozenset({"__anext__", "__aenter__", "__aexit__"})
#: (file name, line) of the header of an entry script run by `python OUT/main.py` whose code ran again
#: compiled with its original lines (`probe.define`, `probe._entry_relined`): with `define`'s, the
#: outermost frames of a traceback through it, which Python's own run of the script does not have
outer_entry: tuple[str, int] | None = None


def _drop_probe_frames(stack: list) -> int:
    outer = outer_entry
    first = 2 if (outer is not None and len(stack) > 2 and stack[0].name == "<module>"
                  and (stack[0].filename, stack[0].lineno) == outer
                  and stack[1].name == "define" and stack[1].filename == _PROBE_FILE) else 0
    keep = [f for f in stack[first:] if not (f.name in _PASS_THROUGH and f.filename == _PROBE_FILE)]
    dropped = len(stack) - len(keep)
    if dropped:
        stack[:] = keep
    return dropped


def _map_stack(stack: list, missing: set[str], edited: set[str] | None = None) -> int:
    import traceback

    count = _drop_probe_frames(stack)
    for i, frame in enumerate(stack):
        src = _compiled_source(frame.filename)
        if src is not None:
            positions = {"end_lineno": frame.end_lineno, "colno": frame.colno, "end_colno": frame.end_colno} if _POSITIONS else {}
            text = _raw_line(src, frame.lineno)
            if _ALL_LINES and frame.end_lineno is not None and frame.end_lineno > frame.lineno:
                text = _joined(_raw_line(src, n) for n in range(frame.lineno, frame.end_lineno + 1))
            stack[i] = traceback.FrameSummary(
                src, frame.lineno, frame.name, lookup_line=False, locals=frame.locals, line=text, **positions,
            )
            count += 1
            continue
        found = _lookup(frame.filename)
        if found is None:
            continue
        tree, relpath = found
        lines = tree.linemaps[relpath]
        if not 1 <= (frame.lineno or 0) <= len(lines):
            continue
        lineno = lines[frame.lineno - 1]
        end = getattr(frame, "end_lineno", None)
        end_lineno = lines[end - 1] if end is not None and 1 <= end <= len(lines) else lineno
        filename, line = _original(tree, relpath, lineno, frame.filename)
        out_line = _raw_line(frame.filename, frame.lineno)
        copied = filename == frame.filename or tree.edited(relpath)  # the copy's text, at its columns
        if filename != frame.filename and tree.edited(relpath) and edited is not None:
            edited.add(filename)
        points = (tree.columns.get(relpath) or {}).get(str(frame.lineno)) if not copied else None
        colno, end_colno = _shift_columns(frame, out_line, line, points)
        if end_lineno < lineno:
            end_lineno = lineno
        if end_lineno == lineno and end != frame.lineno:
            colno = end_colno = None  # several out lines on one original line: columns mean nothing
        elif _ALL_LINES and end_lineno > lineno:
            # shown from the first line to the last: the end column is one of the last line
            last = _original(tree, relpath, end_lineno, frame.filename)[1]
            last_points = (tree.columns.get(relpath) or {}).get(str(end)) if not copied else None
            end_colno = _shift_column(frame.end_colno, _raw_line(frame.filename, end), last, last_points)
            line = _joined([line] + [_original(tree, relpath, n, frame.filename)[1]
                                     for n in range(lineno + 1, end_lineno)] + [last])
        if tree.source is None:
            missing.add(tree.missing_source or "")
        positions = {"end_lineno": end_lineno, "colno": colno, "end_colno": end_colno} if _POSITIONS else {}
        stack[i] = traceback.FrameSummary(
            filename, lineno, frame.name, lookup_line=False, locals=frame.locals, line=line, **positions,
        )
        count += 1
    return count


def source_lineno(filename: str, lineno: int) -> int:
    """The source's line of line `lineno` of `filename`: mapped where it is a file of a built tree
    that runs with the copy's numbering (the entry script run as `python OUT/main.py`,
    SCALEPROBE_OUT_LINES=1), as it is otherwise (a module compiled with its original lines, a file
    of no built tree)."""
    found = _lookup(filename)
    if found is None:
        return lineno
    tree, relpath = found
    lines = tree.linemaps[relpath]
    return lines[lineno - 1] if 1 <= lineno <= len(lines) else lineno


def _compiled_source(filename: str) -> str | None:
    """SRC's file for a module that runs with its original lines (`runtime.original_lines`): its
    frames need no mapping, only SRC's name where that file still is."""
    from .original_lines import compiled

    src = compiled.get(filename)
    return src if src is not None and os.path.isfile(src) else None


def _lookup(filename: str) -> tuple[_Tree, str] | None:
    relpath = _files.get(filename)
    if relpath is None:
        return None
    built = filename
    if not _named(filename, relpath):
        # an entry script run through a link (OUT keeps SRC's `main.py -> scripts/train.py`): its
        # frames are named by the link, its map by the target's path in OUT
        built = os.path.realpath(filename)
        if built == filename or not _named(built, relpath):
            return None  # compiled under another name (the import hook uses the original file)
    from .original_lines import compiled

    if filename in compiled:
        return None  # compiled with the original lines already
    root = built[: len(built) - len(relpath)]
    tree = _load(root)
    if tree is None or relpath not in tree.linemaps or not tree.matches(relpath, built):
        return None
    return tree, relpath


def _named(filename: str, relpath: str) -> bool:
    """Whether `filename` is the file `relpath` of some folder."""
    norm = filename.replace(os.sep, "/")
    return norm.endswith(relpath) and (len(norm) == len(relpath) or norm[-len(relpath) - 1] == "/")


def _load(root: str) -> _Tree | None:
    with _lock:
        if root in _trees:
            return _trees[root]
        import json

        tree = None
        state = os.path.join(root, STATE_DIR)
        try:
            with open(os.path.join(state, "linemap.json"), encoding="utf-8") as handle:
                linemaps = json.load(handle)
            source = None
            try:
                with open(os.path.join(state, "manifest.json"), encoding="utf-8") as handle:
                    source = json.load(handle).get("source")
            except (OSError, ValueError, AttributeError):
                pass
            columns = None
            try:
                with open(os.path.join(state, "columns.json"), encoding="utf-8") as handle:
                    columns = json.load(handle)
            except (OSError, ValueError):
                pass
            if isinstance(linemaps, dict):
                from .original_lines import _read_hashes

                tree = _Tree(root, linemaps, source if isinstance(source, str) else None, columns,
                             _read_hashes(root.rstrip(os.sep) or os.sep))
        except (OSError, ValueError):
            pass
        _trees[root] = tree
        return tree


def _original(tree: _Tree, relpath: str, lineno: int, out_file: str) -> tuple[str, str]:
    """(file name to show, raw original line) for original line `lineno` of `relpath`. For a SRC
    file edited since the build, SRC's name with the line as the build read it (the copy's): the
    edited file's text at that number would be another line (review 128 MED-2)."""
    if tree.source is not None:
        src = os.path.join(tree.source, *relpath.split("/"))
        if os.path.isfile(src):
            if tree.edited(relpath):
                return src, _built_line(tree, relpath, lineno, out_file)
            line = _raw_line(src, lineno)
            if line.strip():
                return src, line
    return out_file, _built_line(tree, relpath, lineno, out_file)


def _built_line(tree: _Tree, relpath: str, lineno: int, out_file: str) -> str:
    """Original line `lineno` as the copy holds it: the copy holds every original line, re-indented,
    and the first out line mapped to it is it."""
    lines = tree.linemaps[relpath]
    try:
        out_lineno = lines.index(lineno) + 1
    except ValueError:
        return ""
    return _raw_line(out_file, out_lineno)


def _raw_line(filename: str, lineno: int) -> str:
    import linecache

    return linecache.getline(filename, lineno)  # with its newline, as FrameSummary keeps it


def _joined(lines: Any) -> str:
    """A statement's lines as Python 3.13's FrameSummary reads them: each without its line end."""
    return "".join(line.rstrip() + "\n" for line in lines)


def _shift_column(col: int | None, out_line: str, line: str, points: list | None) -> int | None:
    """One column of `out_line` in the original `line` (as `_shift_columns`), or None."""
    if col is None or not line.strip():
        return None
    if points:
        return {p[0]: p[1] for p in points if isinstance(p, list) and len(p) == 2}.get(col)
    if out_line.strip() != line.strip():
        return None
    return col + (len(line) - len(line.lstrip())) - (len(out_line) - len(out_line.lstrip()))


def _shift_columns(frame: Any, out_line: str, line: str, points: list | None = None) -> tuple[int | None, int | None]:
    # Columns point into the instrumented line; instrumenting may re-indent a line (a body moved
    # into `try:`), so they hold for the original one only shifted by the change of indentation.
    # A line changed in place (`points` from columns.json) maps the columns of its nodes instead.
    colno, end_colno = getattr(frame, "colno", None), getattr(frame, "end_colno", None)
    if colno is None or end_colno is None:
        return None, None
    start = _shift_column(colno, out_line, line, points)
    if points and line.strip() and frame.end_lineno != frame.lineno:
        return start, end_colno  # the end is on another line; shown to the line's end
    return start, _shift_column(end_colno, out_line, line, points)
