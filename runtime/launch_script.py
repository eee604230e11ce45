"""Run the user's script in this process the way `python script.py args` would (or a module, the
way `python -m module args` would).

A fresh `__main__` module, `sys.argv` and `sys.path[0]` of the script, its exit code passed
through, and tracebacks that start at the user's code: the launcher's own frames are cut off.
SIGTERM becomes `SystemExit(143)` so that `finally` blocks and the recorder's exit-time flush run.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import signal
import sys
import traceback
import types
from pathlib import Path
from typing import Callable

from runtime.launch_errors import LaunchError
from runtime.fork_signals import stand_in
from runtime.signal_disguise import real_getsignal, real_signal
from runtime.launch_toplevel import run_toplevel
from runtime.sysexit import exit_status, print_message

SIGTERM_EXIT = 128 + signal.SIGTERM
SIGINT_EXIT = 128 + signal.SIGINT
_OUR_FILES = frozenset(os.path.realpath(Path(__file__).parent / name) for name in
                       ("launch.py", "launch_script.py", "launch_child.py", "launch_modes.py"))


received_sigterm = False
_owner = 0  # the process whose SIGTERM unwinds (the rank), not its forked children


def _exit_on_sigterm(signum: int, frame: object) -> None:
    global received_sigterm
    if os.getpid() != _owner:
        # A forked child (a Pool or DataLoader worker) dies of SIGTERM as it would without the
        # launcher: raised there, SystemExit can land in an at-fork callback, where Python drops it,
        # and a worker that Pool.terminate() stopped would go on and hang its parent.
        real_signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    received_sigterm = True
    raise SystemExit(SIGTERM_EXIT)


# In a forked child the handler ends the process as the default action would (above): the recorder,
# which chains to it, then writes the child's end record first, as it does before a default action
_exit_on_sigterm.__sp_ends_process__ = lambda: os.getpid() != _owner  # type: ignore[attr-defined]


def install_sigterm_exit() -> None:
    """Let SIGTERM unwind the program instead of killing it, unless someone already handles it."""
    global _owner
    if real_getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        _owner = os.getpid()
        real_signal(signal.SIGTERM, _exit_on_sigterm)
        stand_in(signal.SIGTERM, _exit_on_sigterm)  # (shown to the program as SIG_DFL: review 64 F2)


def compile_script(path: Path) -> types.CodeType:
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise LaunchError(f"cannot read script {path}: {exc.strerror}") from None
    # A built tree's entry script gets its original file name and lines, as its modules do.
    from runtime.original_lines import entry_code

    code = entry_code(str(path), source)
    if code is not None:
        return code
    # Bytes, so that compile() honours a coding cookie the way the interpreter does.
    return compile(source, str(path), "exec", dont_inherit=True)


# imported by every interpreter before sys.path[0] is set (besides builtin and frozen modules, whose
# finders come before the program's folder): the program gets these without the launcher too
_STARTUP = frozenset({"__main__", "__mp_main__", "encodings", "sitecustomize", "usercustomize"})


def shadowed_warnings(directory: str) -> list[str]:
    """A warning for each module of the program's folder (`sys.path[0]`) named like a top-level
    module that is already imported here (the standard library's, libcst, ... which the launcher
    and the instrumentor imported before the program started): the program's `import` of that
    name gets the cached module, not its own file, where `python` gives it its file (review 79 F2:
    a `platform.py` beside the script silently lost to the standard library's)."""
    import _imp

    found = []
    for name, module in sorted(sys.modules.items()):
        if "." in name or name in _STARTUP or name in sys.builtin_module_names or module is None:
            continue
        try:
            if _imp.is_frozen(name):
                continue
            spec = importlib.machinery.PathFinder.find_spec(name, [directory])
        except (ImportError, ValueError, OSError):
            continue
        if spec is None or not spec.has_location or not spec.origin:
            continue  # nothing of that name there, or a namespace folder, which a module wins over
        ours = getattr(module, "__file__", None)
        ours = ours if isinstance(ours, str) else None
        if ours and os.path.realpath(ours) == os.path.realpath(spec.origin):
            continue  # that very file (the launcher run from its own repository)
        found.append((name, spec.origin, ours))
    # a module that `python` itself imports at start-up (site's .pth files: an editable install's
    # finder imports re, types, pathlib...) is the program's without the launcher too (review 84 L1)
    startup = _startup_modules(directory) if found else frozenset()
    warnings = []
    for name, origin, ours in found:
        if name in startup:
            continue
        shown = os.path.relpath(origin)
        shown = origin if shown.startswith("..") else shown
        where = f" ({ours})" if ours else ""
        warnings.append(f"scaleprobe launch: warning: {shown} is named like the module {name!r}{where}, which the "
                        f"launcher imported before the program started: the program's `import {name}` gets that "
                        "module, not this file; rename the file")
    return warnings


def _startup_modules(directory: str) -> frozenset[str]:
    """The top-level modules a plain `python` (this interpreter, its options and environment) has
    imported when a program in `directory` starts: asked of one, only where some file of the
    program's folder is named like an imported module (nothing is started otherwise)."""
    import subprocess

    probe = "import sys; print(' '.join(n for n in sys.modules if '.' not in n))"
    try:
        done = subprocess.run([sys.executable, *subprocess._args_from_interpreter_flags(), "-c", probe],
                              cwd=directory, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(done.stdout.split()) if done.returncode == 0 else frozenset()


def _warn_shadowed(directory: str) -> None:
    for warning in shadowed_warnings(directory):
        print(warning, file=sys.stderr)


def _user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) in _OUR_FILES:
        tb = tb.tb_next
    return tb


def _format(exc: BaseException, tb: types.TracebackType | None) -> str:
    # Frames of a built instrumented tree at the user's original files and lines, as shown.
    try:
        from runtime.linemap import format_exception

        return format_exception(exc, tb) or ""
    except Exception:  # noqa: BLE001 - a broken line map must not lose the traceback
        return "".join(traceback.format_exception(type(exc), exc, tb))


def error_summary(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        # sys.exit("message") carries its message; argparse and sys.exit(N) printed theirs on stderr
        if isinstance(exc.code, str):
            return f"SystemExit: {exc.code}"
        from runtime import stderr_tail

        said = stderr_tail.last_line() if stderr_tail._installed else None
        if said is None:
            return f"SystemExit: exited with status {exit_status(exc.code)} (its own message, if any, is on its stderr)"
        return f"SystemExit: exited with status {exit_status(exc.code)}; its stderr ended with: {said}"
    if isinstance(exc, NoModule):
        return f"-m: {exc}"
    lines = traceback.format_exception_only(type(exc), exc)
    text = lines[-1].strip() if lines else type(exc).__name__
    head, _, rest = text.partition("\n")
    said = [ln.strip() for ln in rest.splitlines() if ln.strip()]
    if said and head.rstrip().endswith(":"):
        # a message that starts on its next line (torch's ProcessRaisedException: "\n\n-- Process 1
        # terminated with the following error: ... RuntimeError: ..."): its last line, on this one
        text = f"{head.rstrip()} {said[-1]}"
    return text


class NoModule(Exception):
    """`-m NAME` names nothing that `python -m NAME` could run (its message is Python's)."""


class _CompileFailed(Exception):
    def __init__(self, error: SyntaxError) -> None:
        super().__init__(error)
        self.error = error


def _compile_entry(code_for: Callable[[Path], types.CodeType], path: Path) -> types.CodeType:
    try:
        return code_for(path)
    except SyntaxError as exc:
        raise _CompileFailed(exc) from None


def run_script(path: Path, args: list[str],
               code_for: Callable[[Path], types.CodeType] = compile_script,
               on_error: Callable[[BaseException, str], None] | None = None, *,
               warn_shadowed: bool = True) -> int:
    """Execute `path` as `__main__` with `args`; return the exit status Python would have had.

    `on_error(exc, formatted_traceback)` is called for an uncaught exception (not SystemExit 0).
    With `warn_shadowed`, modules of the script's folder that the program cannot get are named
    first (`shadowed_warnings`).
    """
    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"script {path} does not exist or is not a file")
    # Since Python 3.9 a script's __file__ and traceback file names are absolute; argv[0] is not.
    absolute = Path(os.path.abspath(path))

    def prepare() -> tuple[types.CodeType, dict]:
        code = _compile_entry(code_for, absolute)
        main = types.ModuleType("__main__")
        # As `python script.py` sets them: the builtins *module* (our own `__builtins__` is its dict),
        # a source loader (`__loader__.get_source` works), an empty `__annotations__`.
        from importlib.machinery import SourceFileLoader

        main.__dict__.update({"__file__": str(absolute), "__builtins__": builtins, "__spec__": None,
                              "__loader__": SourceFileLoader("__main__", str(absolute)), "__package__": None,
                              "__cached__": None, "__annotations__": {}})
        sys.argv = [str(path), *args]
        # `python -m` puts the working directory first; `python script.py` puts the script's directory,
        # symlinks resolved (a linked script imports its neighbours in the target's folder)
        sys.path[0] = os.path.dirname(os.path.realpath(absolute))
        if warn_shadowed:  # after the entry compiled: --instrument's compiler has imported what it needs
            _warn_shadowed(sys.path[0])
        # The user's module stays `__main__` after it returns: atexit handlers and pickling by
        # reference (multiprocessing's spawn) may still need it.
        sys.modules["__main__"] = main
        return code, main.__dict__

    return _execute(prepare, on_error)


def find_main_module(name: str) -> importlib.machinery.ModuleSpec:
    """The spec `python -m name` runs, as runpy finds it: the parent packages imported first (their
    code runs, as with `python -m`), a package runs its `__main__` submodule."""
    import importlib.util
    import warnings

    if name.startswith("."):
        raise NoModule("Relative module names not supported")
    package = name.rpartition(".")[0]
    if package:
        try:
            __import__(package)
        except ImportError as exc:
            # As runpy: a missing parent is "not found"; an ImportError raised by its code is too.
            if exc.name is None or (exc.name != package and not package.startswith(exc.name + ".")):
                raise
            raise NoModule(f"Error while finding module specification for {name!r} "
                           f"({type(exc).__name__}: {exc})") from None
        existing = sys.modules.get(name)
        if existing is not None and not hasattr(existing, "__path__"):
            warnings.warn(RuntimeWarning(
                f"{name!r} found in sys.modules after import of package {package!r}, but prior to execution "
                f"of {name!r}; this may result in unpredictable behaviour"))
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise NoModule(f"Error while finding module specification for {name!r} ({type(exc).__name__}: {exc})"
                       ) from None
    if spec is None:
        raise NoModule(f"No module named {name}")
    if spec.submodule_search_locations is not None:
        if name == "__main__" or name.endswith(".__main__"):
            raise NoModule("Cannot use package as __main__ module")
        try:
            return find_main_module(name + ".__main__")
        except NoModule as exc:
            raise NoModule(f"{exc}; {name!r} is a package and cannot be directly executed") from None
    if spec.loader is None:
        raise NoModule(f"No code object available for {name}")
    return spec


def run_module(name: str, args: list[str],
               code_for: Callable[[Path], types.CodeType] = compile_script,
               on_error: Callable[[BaseException, str], None] | None = None, *,
               warn_shadowed: bool = True) -> int:
    """Execute module `name` as `__main__` the way `python -m name args` does (runpy's rules):
    the working directory first on `sys.path`, the parent packages imported first, `__spec__`
    and `__package__` set so that relative imports work, `sys.argv[0]` the module's file. Its
    source file is compiled by `code_for`, as a script's is (a built tree's original lines,
    --instrument). With `warn_shadowed`, as `run_script`, for the working directory."""
    sys.path[0] = os.getcwd()
    sys.argv = ["-m", *args]  # what the parent packages see while they are imported, as with python -m

    def prepare() -> tuple[types.CodeType, dict]:
        if warn_shadowed:  # before the parent packages, the program's own code, are imported
            _warn_shadowed(sys.path[0])
        spec = find_main_module(name)
        origin = spec.origin
        if spec.has_location and origin and origin.endswith(".py") and os.path.isfile(origin):
            code = _compile_entry(code_for, Path(origin))
        else:  # a .pyc without source, a zip archive's module: as Python's loader gives it
            code = spec.loader.get_code(spec.name)
            if code is None:
                raise NoModule(f"No code object available for {name}")
        main = types.ModuleType("__main__")
        main.__dict__.update({"__file__": origin, "__cached__": spec.cached, "__doc__": None,
                              "__loader__": spec.loader, "__package__": spec.parent, "__spec__": spec,
                              "__builtins__": builtins, "__annotations__": {}})  # as the interpreter's __main__
        sys.argv[0] = origin
        sys.modules["__main__"] = main
        return code, main.__dict__

    return _execute(prepare, on_error)


def _execute(prepare: Callable[[], tuple[types.CodeType, dict]],
             on_error: Callable[[BaseException, str], None] | None) -> int:
    started = False
    try:
        code, namespace = prepare()
        started = True
        run_toplevel(code, namespace)
    except _CompileFailed as failed:
        # As the interpreter shows it: where, and no traceback through the compiler's caller; a
        # line that starts with a tab as Python 3.10 to 3.12 show it (runtime.linemap, review 44 F4).
        exc = failed.error.with_traceback(None)
        try:
            from runtime.linemap import format_exception

            formatted = format_exception(exc, _uncaught=True) or ""
        except Exception:  # noqa: BLE001 - as _format: the error must be shown whatever happens
            formatted = ""
        formatted = formatted or "".join(traceback.format_exception_only(type(exc), exc))
        if on_error is not None:
            on_error(exc, formatted)
        print(formatted, end="", file=sys.stderr)
        return 1
    except NoModule as exc:
        # As `python -m nosuch` says it (exit status 1), naming the option.
        formatted = f"-m: {exc}\n"
        if on_error is not None:
            on_error(exc, formatted)
        print(f"scaleprobe launch: {formatted}", end="", file=sys.stderr)
        return 1
    except SystemExit as exc:
        # The interpreter's own rules for `sys.exit(x)`: the message once, then the status.
        print_message(exc.code)
        status = exit_status(exc.code)
        if status and on_error is not None:
            on_error(exc, error_summary(exc) + "\n")
        return status
    except BaseException as exc:  # noqa: BLE001 - we are the interpreter's top level here
        # A Ctrl-C while the entry script compiles (before any of its lines ran) is shown as the
        # interpreter shows one then: `KeyboardInterrupt`, with no traceback through the launcher.
        tb = None if isinstance(exc, KeyboardInterrupt) and not started else _user_traceback(exc.__traceback__)
        exc.__traceback__ = tb
        formatted = _format(exc, tb)
        if on_error is not None:
            on_error(exc, formatted)
        # The user's own excepthook still decides how an uncaught exception is shown.
        sys.excepthook(type(exc), exc, tb)
        return SIGINT_EXIT if isinstance(exc, KeyboardInterrupt) else 1
    finally:
        _flush_std()
    return 0


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
