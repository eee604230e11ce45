"""Whether the ranks will record and whether they did: the launcher checks the runtime's
SCALEPROBE_* variables before it starts anything, and after a run says where the data went, or
that no run file was written (the script was most likely not instrumented).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from runtime.config import Config, ConfigError, from_env
from runtime.launch_args import Options
from runtime.launch_errors import LaunchError

# Set by the launcher itself for every run: what the caller's environment holds for them is replaced.
_SET_PER_RUN = ("SCALEPROBE_OUT", "SCALEPROBE_EXPERIMENT", "SCALEPROBE_RUN_ID", "SCALEPROBE_PARAMS",
                "SCALEPROBE_REPETITION", "SCALEPROBE_LAUNCHER")


def check_environment() -> Config:
    """The runtime's settings as every rank will read them; a bad value is the launcher's error
    (exit 2, naming the variable) before any rank or sweep run starts, not each rank's."""
    try:
        return from_env({k: v for k, v in os.environ.items() if k not in _SET_PER_RUN})
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None


def wrote_run_file(directory: Path) -> bool:
    return any(directory.glob("rank*.jsonl"))


def nothing_recorded(cfg: Config, opts: Options, runs: str = "the run") -> str | None:
    """The warning for runs that completed without writing a run file (None when that was asked for)."""
    if cfg.disable:
        return None
    main = Path(_module_file(opts.module)) if opts.module is not None else opts.script
    if not opts.instrument and main is not None and _nvtx_build(main):
        # review 70 F9: it said "is main.py instrumented?" of an NVTX-backend build
        if opts.nsys:
            return None  # its data is the nsys reports
        return (f"scaleprobe launch: warning: {runs} completed without a run file: {main} is an NVTX-only build "
                "(instrument --backend nvtx), which writes none; its regions are NVTX ranges, which a profiler "
                "records: add --nsys, or build with the default backend (instrument SRC -o build/) for run files")
    if opts.instrument and main is not None and (left := _left_as_is(main)) is not None:
        # review 119, left open then: "found nothing to record" followed the line that said why
        why = f"--instrument could not instrument {main}, which ran as it is ({left})"
    elif opts.instrument:
        why = ("--instrument found nothing to record under the project root "
               "(--project-root, default: the script's directory; with -m, the directory holding the "
               "module's top-level package)")
    elif opts.module is not None:
        why = f"is the module {opts.module} instrumented? {how_to_instrument(opts)}"
    else:
        why = f"is {opts.script} instrumented? {how_to_instrument(opts)}"
    if cfg.ranks:
        why = f"does SCALEPROBE_RANKS={cfg.ranks!r} select none of the ranks? Else: {why}"
    return f"scaleprobe launch: warning: {runs} completed but no run file was written: {why}"


def how_to_instrument(opts: Options) -> str:
    """How to run the program instrumented, for a warning that it was not."""
    if opts.module is not None:
        return (f"Run it from the instrumented copy (instrument SRC -o build/ --main {_module_file(opts.module)}, "
                f"then run -m {opts.module} in build/) or add --instrument")
    return (f"Run the instrumented copy (instrument SRC -o build/, then build/{opts.script.name}) or add "
            "--instrument")


def _left_as_is(path: Path) -> str | None:
    """Why --instrument's hook ran the entry `path` uninstrumented, where it says (a byte it cannot decode)."""
    try:
        from instrumentor.importhook import left_as_is
    except ImportError:
        return None
    return left_as_is(path)


def _nvtx_build(path: Path) -> bool:
    """Whether `path` was written by `instrument --backend nvtx` (its header imports nvtx as
    `__sp_nvtx__`, as instrumentor.prechecks.backend_of reads it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return any(line.rstrip() == b"import nvtx as __sp_nvtx__" for line in head.splitlines())


def say(line: str) -> None:
    """One of the launcher's lines on stderr, after a program that ran in this process: on the
    program's sys.stderr, else on the interpreter's own; none where the program closed both (review
    58 F8: the line raised there, and the launcher's exit status became 1 where python's was 0).
    Never on file descriptor 2 itself: closed with them, it may be another file now."""
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            print(line, file=stream, flush=True)
            return
        except (OSError, ValueError, AttributeError):
            continue


def report_single_run(opts: Options, cfg: Config, directory: Path, recorded: bool, ok: bool) -> None:
    """After one run (not a sweep): where the data went (unless SCALEPROBE_QUIET), or, when it
    ended ok with nothing recorded, the warning; a run that did not end ok and wrote no run file
    still names its directory, which holds its launch.json and its error files (review 77 L6)."""
    if recorded:
        if not cfg.quiet:
            say(f"scaleprobe launch: run data in {directory}")
        return
    if not ok and not cfg.quiet:
        say(f"scaleprobe launch: run record in {directory} (no run file was written)")
    warning = nothing_recorded(cfg, opts) if ok else None
    if warning is not None:
        say(warning)


def _module_file(module: str) -> str:
    """The file `python -m module` runs, relative to the working directory: `pkg/__main__.py` for
    a package."""
    path = module.replace(".", "/")
    return f"{path}/__main__.py" if os.path.isdir(path) and not os.path.isfile(f"{path}.py") else f"{path}.py"
