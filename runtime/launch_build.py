"""The program's entry as the launcher sees it before a sweep's first run (and at --dry-run): is it
instrumented at all, and was its build made from the sources as they are now (review 128 MED-3,
MED-2). A sweep of the wrong copy of a program used to say so only after its last run.

    entry_file(opts)              the file the ranks run: the script, or the file of `-m module`
    before_first_run(opts, cfg)   the warnings to print before the first run, and the StaleCheck
    not_instrumented(opts, cfg)   the warning for an entry with no probes in no build, or None
    StaleCheck(opts)              the build's SRC files edited since it was made: said once, before
                                  the first run or after the run it was found at
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.config import Config
from runtime.launch_args import Options

STATE_DIR = ".scaleprobe"  # runtime.linemap.STATE_DIR
# the first line of each backend's header (instrumentor/emit.py: RuntimeBackend, NvtxBackend)
_HEADERS = (b"from runtime.probe import ", b"import nvtx as __sp_nvtx__")


def entry_file(opts: Options) -> Path | None:
    if opts.module is not None:
        from runtime.launch_child import module_file

        return module_file(opts.module)
    return opts.script if opts.script is not None and opts.script.is_file() else None


def built_root(path: Path) -> Path | None:
    """The built tree (`instrument SRC -o OUT`: it has `.scaleprobe/`) that holds `path`, or None."""
    here = Path(os.path.realpath(path)).parent
    for folder in (here, *here.parents):
        if (folder / STATE_DIR).is_dir():
            return folder
    return None


def has_probes(path: Path) -> bool:
    """Whether `path` starts with a build's header (after its docstring and `__future__` imports);
    True where it cannot be read (no warning on a guess)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return True
    return any(line.startswith(_HEADERS) for line in data.splitlines())


def not_instrumented(opts: Options, cfg: Config) -> str | None:
    """Before any run: the entry has no probes and lies in no built tree, so its runs will most
    likely write no run file (the launcher warns again after the first run that wrote none, and at
    the end). Not with --instrument (it instruments the entry as it starts), nor SCALEPROBE_DISABLE.
    An entry of no build that imports the modules of one records all the same: the warning says so."""
    if opts.instrument or cfg.disable:
        return None
    main = entry_file(opts)
    if main is None or has_probes(main) or built_root(main) is not None:
        return None
    from runtime.launch_recording import how_to_instrument

    return (f"scaleprobe launch: warning: {main} has no probes and is in no instrumented build, so its runs will "
            f"most likely write no run file (unless it imports instrumented modules). {how_to_instrument(opts)}; "
            "the runs are made anyway")


#: the build a StaleCheck of this launcher watches: its runs' ranks get it as CHECKED_VARIABLE
checked: list[str | None] = [None]
CHECKED_VARIABLE = "SCALEPROBE_BUILD_CHECKED"


class StaleCheck:
    """The SRC files of the entry's build that changed since the build, said once: by the
    launcher, for every run it starts (their ranks stay silent: `stale_sources.say_once`)."""

    def __init__(self, opts: Options) -> None:
        main = entry_file(opts) if not opts.instrument else None
        self.root = built_root(main) if main is not None else None
        self.said = False
        checked[0] = str(self.root) if self.root is not None else None

    def warning(self) -> str | None:
        if self.said or self.root is None:
            return None
        from runtime.stale_sources import changed_files, message

        try:
            changed = changed_files(str(self.root))
        except Exception:  # noqa: BLE001 - a damaged build state: the runs say what they find
            return None
        if not changed:
            return None
        self.said = True
        return message(changed, str(self.root), who="scaleprobe launch")


def before_first_run(opts: Options, cfg: Config) -> tuple[list[str], StaleCheck]:
    """The warnings for runs the launcher starts (a sweep, --nproc, --spawn, a dry run), before the
    first: an uninstrumented entry, a stale build; and the check of the build to repeat after each
    run. Never an error: the runs are made as asked."""
    lines = []
    early = not_instrumented(opts, cfg)
    if early is not None:
        lines.append(early)
    stale = StaleCheck(opts)
    found = stale.warning()
    if found is not None:
        lines.append(found)
    return lines, stale
