"""Run the user's script in this process the way `python script.py args` would.

A fresh `__main__` module, `sys.argv` and `sys.path[0]` of the script, its exit code passed
through, and tracebacks that start at the user's code: the launcher's own frames are cut off.
SIGTERM becomes `SystemExit(143)` so that `finally` blocks and the recorder's exit-time flush run.
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import traceback
import types
from pathlib import Path
from typing import Callable

from runtime.launch_errors import LaunchError
from runtime.fork_signals import stand_in
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
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    received_sigterm = True
    raise SystemExit(SIGTERM_EXIT)


def install_sigterm_exit() -> None:
    """Let SIGTERM unwind the program instead of killing it, unless someone already handles it."""
    global _owner
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        _owner = os.getpid()
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        stand_in(signal.SIGTERM, _exit_on_sigterm)


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
        return f"SystemExit: exited with status {exit_status(exc.code)} (its own message, if any, is on its stderr)"
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def run_script(path: Path, args: list[str],
               code_for: Callable[[Path], types.CodeType] = compile_script,
               on_error: Callable[[BaseException, str], None] | None = None) -> int:
    """Execute `path` as `__main__` with `args`; return the exit status Python would have had.

    `on_error(exc, formatted_traceback)` is called for an uncaught exception (not SystemExit 0).
    """
    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"script {path} does not exist or is not a file")
    # Since Python 3.9 a script's __file__ and traceback file names are absolute; argv[0] is not.
    absolute = Path(os.path.abspath(path))
    try:
        code = code_for(absolute)
    except SyntaxError as exc:
        # As the interpreter shows it: where, and no traceback through the compiler's caller.
        formatted = "".join(traceback.format_exception_only(type(exc), exc))
        if on_error is not None:
            on_error(exc, formatted)
        print(formatted, end="", file=sys.stderr)
        return 1
    main = types.ModuleType("__main__")
    # As `python script.py` sets them: the builtins *module* (our own `__builtins__` is its dict),
    # a source loader (`__loader__.get_source` works), an empty `__annotations__`.
    from importlib.machinery import SourceFileLoader

    main.__dict__.update({"__file__": str(absolute), "__builtins__": builtins, "__spec__": None,
                          "__loader__": SourceFileLoader("__main__", str(absolute)), "__package__": None,
                          "__cached__": None, "__annotations__": {}})
    sys.argv = [str(path), *args]
    # `python -m` puts the working directory first; `python script.py` puts the script's directory.
    sys.path[0] = str(absolute.parent)
    # The user's module stays `__main__` after it returns: atexit handlers and pickling by
    # reference (multiprocessing's spawn) may still need it.
    sys.modules["__main__"] = main
    try:
        run_toplevel(code, main.__dict__)
    except SystemExit as exc:
        # The interpreter's own rules for `sys.exit(x)`: the message once, then the status.
        print_message(exc.code)
        status = exit_status(exc.code)
        if status and on_error is not None:
            on_error(exc, error_summary(exc) + "\n")
        return status
    except BaseException as exc:  # noqa: BLE001 - we are the interpreter's top level here
        tb = _user_traceback(exc.__traceback__)
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
