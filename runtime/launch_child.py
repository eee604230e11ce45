"""One rank in this process: optional on-the-fly instrumentation, then the user's script.

Used by every rank the launcher spawns (`--child`) and by a launcher started as one rank of
srun/mpiexec/torchrun. When the script fails, its traceback goes to `<SCALEPROBE_OUT>/rank<R>.error.txt`
(first line: the error itself) so that the parent launcher can say which rank failed and why.
A rank that ends because it was sent SIGTERM (the launcher or srun stopping it because another rank
failed, `--timeout`) says so in that first line, `STOPPED_BY_SIGTERM ...`, so that it is not taken for
the rank that failed; one that ends in the KeyboardInterrupt of a SIGINT (Ctrl-C, which the launcher
passes on) says `STOPPED_BY_SIGINT ...`, only where a SIGINT came (`run_signals`: a KeyboardInterrupt
the program raised itself is its own error). Who sent it is said only where the launcher left its mark
(`STOP_MARK`) before it signalled the ranks (review 77 L2: a SIGTERM the program sent itself was put
on the launcher). Only the rank's own process writes its error file, not one the program forked.
"""

from __future__ import annotations

import os
import signal
import sys
import types
from pathlib import Path
from typing import Callable

from runtime import launch_script, output_copy, stderr_tail
from runtime.launch_errors import LaunchError
from runtime.launch_script import compile_script, error_summary, install_sigterm_exit, run_module, run_script


def module_root(module: str) -> Path:
    """The directory `python -m module` finds the module's top-level package (or module) in,
    without running any of its code; the working directory when it cannot tell."""
    import importlib.machinery

    top = module.split(".")[0]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd(), *sys.path[1:]])
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    if spec is not None and spec.origin:
        return Path(spec.origin).parent
    return Path(os.getcwd())


def module_file(module: str) -> Path | None:
    """The file `python -m module` would run, found by the path finder alone (none of the program's
    code runs: a package that changes its `__path__` is not followed); None when it cannot tell."""
    import importlib.machinery

    parts = module.split(".")
    path = [os.getcwd(), *sys.path[1:]]
    spec = None
    try:
        for i in range(len(parts)):
            if spec is not None:
                if spec.submodule_search_locations is None:
                    return None
                path = list(spec.submodule_search_locations)
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), path)
            if spec is None:
                return None
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            spec = importlib.machinery.PathFinder.find_spec(module + ".__main__", list(spec.submodule_search_locations))
    except (ImportError, ValueError, OSError):
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return Path(spec.origin)


def entry_outside_root(script: Path | None, module: str | None, project_root: Path) -> str | None:
    """Why `--project-root` cannot be the project of the entry (the script, or the file of `-m
    module`): it does not hold it. None when it does, or when that cannot be told here (a missing
    script, a root that is no folder: said elsewhere). As the build refuses `--main` outside SRC
    (review 79 F6: the entry was instrumented under its bare name, two entries of one name got
    the same regions, and spawned children ran it uninstrumented)."""
    if not project_root.is_dir():
        return None
    if module is None:
        if script is None or not script.is_file():
            return None
        entry, what = Path(os.path.abspath(script)), f"the script {script}"
    else:
        found = module_file(module)
        if found is None:
            return None
        entry, what = Path(os.path.abspath(found)), f"the module {module} ({found})"
    root = Path(os.path.abspath(project_root))
    # inside the root as given or resolved, or through a symlinked folder on the way to it (the
    # build's rule for an entry)
    forms = ((entry, root), (entry, root.resolve()), (entry.parent.resolve() / entry.name, root.resolve()))
    if any(base in path.parents for path, base in forms):
        return None
    return (f"--project-root {project_root}: {what} is not inside it ({root}): --instrument instruments the entry "
            "as one of the project's files; give a --project-root that holds it")


def instrumenting_compiler(script: Path, project_root: Path | None,
                           cache_dir: Path | None, default_root: Path | None = None
                           ) -> Callable[[Path], types.CodeType]:
    """Install the instrumentor's import hook; return what compiles the entry script instrumented."""
    try:
        from instrumentor.importhook import install, instrument_entry
    except ImportError as exc:
        if not (exc.name or "").startswith("instrumentor"):
            raise
        raise LaunchError("--instrument needs instrumentor.importhook (install, instrument_entry), "
                          f"which cannot be imported: {exc}") from None
    if project_root is not None:
        root = project_root
    else:
        # the script's folder as named (a symlinked script's link, not its target: review 79 F4)
        root = default_root if default_root is not None else Path(os.path.abspath(script)).parent
    if not root.is_dir():
        raise LaunchError(f"--project-root {root}: not a directory")
    install(root, cache_dir=cache_dir, backend="runtime")
    return instrument_entry


STOPPED_BY_SIGTERM = "stopped by SIGTERM"
STOPPED_BY_SIGINT = "stopped by SIGINT"
#: in the run directory: why the launcher is stopping the run's ranks, written before it signals them
STOP_MARK = ".launch.stopping"
#: who sent the signal, where the launcher left no mark
_NOT_THE_LAUNCHER = {
    "SIGTERM": "not sent by the launcher: by a scheduler, which stops every rank when one fails and at its time "
               "limit, or by another process, the program's own included",
    "SIGINT": "not sent by the launcher: Ctrl-C in a terminal, or another process, the program's own included",
}


def mark_stopping(directory: Path, why: str) -> None:
    """Say, for the ranks about to be signalled, why the launcher stops them (see STOP_MARK)."""
    try:
        (directory / STOP_MARK).write_text(why, encoding="utf-8")
    except OSError:
        pass  # the ranks then say that the launcher did not send it: only the wording is lost


def clear_stop_mark(directory: Path) -> None:
    try:
        (directory / STOP_MARK).unlink(missing_ok=True)
    except OSError:
        pass


def _who_stopped(signame: str) -> str:
    out = os.environ.get("SCALEPROBE_OUT")
    if out:
        try:
            why = (Path(out) / STOP_MARK).read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            why = ""
        if why:
            return why
    return _NOT_THE_LAUNCHER[signame]
# Set by run_rank when the program ran but its run file could not be written to the end.
run_file_problem: str | None = None


def error_file(rank: int) -> Path | None:
    out = os.environ.get("SCALEPROBE_OUT")
    return Path(out) / f"rank{rank}.error.txt" if out else None


def run_rank(script: Path | None, args: list[str], rank: int, *, instrument: bool = False,
             project_root: Path | None = None, cache_dir: Path | None = None,
             module: str | None = None) -> int:
    """Run the script (or, with `module`, the module as `python -m` does) as this rank."""
    install_sigterm_exit()
    output_copy.install(rank)  # what the program prints, kept as rank<R>.output.txt (review 128 LOW-8)
    stderr_tail.install()  # the end of what the program says on stderr goes to the error file too
    code_for = compile_script
    if instrument:
        # Installed before anything of the program is imported (with -m: its parent packages).
        code_for = instrumenting_compiler(script or Path("."), project_root, cache_dir,
                                          module_root(module) if module is not None else None)
    target = error_file(rank)
    # The rank is this process (or an image it replaced itself with that runs the launcher again,
    # as under --nsys): a process the program forked with os.fork() that leaves by an exception
    # unwinds through here too, and its error is not the rank's (review 91 F1: a run whose ranks
    # all exited 0 was `failed` in a sweep, for ever). Its traceback is on stderr, as without the
    # launcher. multiprocessing's children (also torch.multiprocessing.spawn's ranks under
    # --ranks-by-program) never come here: forked ones leave by os._exit, spawned ones are other
    # programs.
    owner = os.getpid()
    # the stop signals that reach the rank from now on (run_signals: also where the program's own
    # handler takes them), so that only a SIGINT's KeyboardInterrupt is called one (review 91 F2)
    from runtime import run_signals

    run_signals.start()
    signals_before = run_signals.mark()

    def record(exc: BaseException, formatted: str) -> None:
        if os.getpid() != owner:
            return
        if launch_script.received_sigterm:
            # Not this rank's own failure: someone stopped it (see the module's docstring).
            summary = f"{STOPPED_BY_SIGTERM} ({_who_stopped('SIGTERM')})"
            if not (isinstance(exc, SystemExit) and exc.code == launch_script.SIGTERM_EXIT):
                summary += f"; then {error_summary(exc)}"
        elif isinstance(exc, KeyboardInterrupt) and run_signals.arrived(signals_before, signal.SIGINT) is not False:
            # SIGINT's own exception (review 77 L1: at Ctrl-C each rank's file read as a failure);
            # not one the program raised itself, with no SIGINT (review 91 F2: it was taken for a
            # stopped rank, and --spawn's failed rank was looked for elsewhere). Where arrivals
            # cannot be counted (no C extension: None), as before.
            summary = f"{STOPPED_BY_SIGINT} ({_who_stopped('SIGINT')}); then {error_summary(exc)}"
        else:
            summary = error_summary(exc)
        # a traceback after the summary line; a SystemExit has none, only that line again
        details = "" if formatted.strip() == error_summary(exc) else f"\n{formatted}"
        write_error(target, f"{summary}\n{details}{_stderr_section()}")

    # said by one rank: every rank runs the same program from the same folder
    if module is not None:
        code = run_module(module, args, code_for, record, warn_shadowed=rank == 0)
    else:
        code = run_script(script, args, code_for, record, warn_shadowed=rank == 0)
    code = _wind_down(code)
    global run_file_problem
    run_file_problem = problem = _finish_recorder(code)
    if problem is not None and not code and os.getpid() == owner:
        # The program's own exit status stands; what went wrong is the run file's, said as such.
        write_error(target, f"{problem}\n")
    return code


STDERR_HEADER = "--- the last lines the rank wrote to its stderr before it ended ---"


def _stderr_section() -> str:
    said = stderr_tail.tail()
    if not said.strip():
        return ""
    return f"\n{STDERR_HEADER}\n{said}\n"


def write_error(target: Path | None, text: str) -> None:
    """Write the error file whole or not at all: a write that fails (a full disk) leaves no empty
    or cut file, which would read as a rank that failed without a message."""
    if target is None:
        return
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # a traceback through a file whose name is not valid UTF-8 holds lone surrogates
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(tmp, target)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        # the message still reaches stderr; losing the copy must not mask the error


def stopped_by_sigterm(first_line: str | None) -> bool:
    """Whether a rank's error file says it was stopped (SIGTERM, or SIGINT's KeyboardInterrupt)."""
    return bool(first_line) and first_line.startswith((STOPPED_BY_SIGTERM, STOPPED_BY_SIGINT))


def recorder_started() -> bool:
    """Whether this process ran instrumented code (also on a rank that SCALEPROBE_RANKS leaves out)."""
    recorder = sys.modules.get("runtime.recorder")
    return recorder is not None and recorder.get() is not None


def _wind_down(code: int) -> int:
    """Where the program recorded: what the interpreter does next at exit, before the run file is
    ended (review 42: the end record was written when the script's code returned, and a training
    thread that outlived it, or instrumented work in an atexit handler, was lost): `threading`'s
    shutdown (its atexit callbacks, which stop `concurrent.futures` executors, then the wait for
    non-daemon threads) and the atexit handlers, the program's outcome noted first, as the
    recorder's own atexit handler writes it. Python's exit then finds both done. The exit status
    stands, as at exit; a SIGTERM while the threads are waited for makes it 143."""
    if not recorder_started():
        return code
    import atexit
    import threading

    rec = sys.modules["runtime.recorder"].get()
    rec.exit_code = code
    if launch_script.received_sigterm:
        rec.status = "signal"
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        try:
            shutdown()
        except BaseException:  # noqa: BLE001 - the launcher's SIGTERM (SystemExit), or Ctrl-C, while waiting
            # (at exit Python says "Exception ignored" and goes on to the atexit handlers, as here)
            if launch_script.received_sigterm:
                code = rec.exit_code = launch_script.SIGTERM_EXIT
                rec.status = "signal"
    atexit._run_exitfuncs()
    return code


def _finish_recorder(code: int) -> str | None:
    """Write the run file's end record with the script's own exit status, if anything recorded;
    what went wrong when the run file cannot be written (a full disk, a file size limit)."""
    if not recorder_started():
        return None
    from runtime.probe import finish

    rec = sys.modules["runtime.recorder"].get()
    where = getattr(rec, "path", None) or "(unknown)"
    try:
        # Exceptions were already seen by the recorder's excepthook; a SIGTERM only by us.
        finish(status="signal" if launch_script.received_sigterm else None, exit_code=code)
    except OSError as exc:  # a recorder that raises its final write's error
        problem = f"cannot write run file {where}: {exc.strerror or exc}"
        print(f"scaleprobe: {problem}", file=sys.stderr)
        return problem
    if getattr(rec, "failed_writes", 0):  # the recorder said why on stderr
        return f"cannot write run file {where}: its end record is missing (the rank's stderr says why)"
    return None


def read_error(directory: Path, rank: int) -> str | None:
    """The first line a failed rank left in its error file, if it left one; None also for an empty
    one (an older scaleprobe left one on a full disk): no message."""
    try:
        with open(directory / f"rank{rank}.error.txt", encoding="utf-8") as handle:
            return handle.readline().strip() or None
    except OSError:
        return None
