"""On-the-fly instrumentation in `multiprocessing` children started with "spawn".

A spawned child is a fresh interpreter: the import hook that `--instrument` installed in its
parent is not there, so the child would run the project uninstrumented and record nothing
(`torch.multiprocessing.spawn` ranks, DataLoader workers under the spawn start method). `propagate`
makes every child the parent spawns from now on install the same hook first: it prefixes the
`-c` program of `multiprocessing.spawn.get_command_line` with a call to `child`. `child` installs
the hook and has the parent's main script, which the child re-runs as `__mp_main__` to find the
target function, compiled instrumented too: the file the parent's `instrument_entry` compiled,
whatever its name (`python trainer`, review 79 F3), or a file the hook owns. Forked children need
none of this: they inherit the hook with the parent's memory.
"""

from __future__ import annotations

import multiprocessing.spawn as mp_spawn
import os
import sys
import types
from pathlib import Path

_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
_original_command_line = None
_entry: str | None = None  # the entry script instrument_entry compiled in this process


def note_entry(path: str) -> None:
    """Children spawned from now on re-run `path` (absolute) instrumented when it is their main script."""
    global _entry
    _entry = path


def propagate(project_root: Path, cache_dir: Path | None, backend: str) -> None:
    """Spawned children install the import hook for `project_root` before anything else runs."""
    global _original_command_line
    if _original_command_line is not None:
        return
    _original_command_line = mp_spawn.get_command_line
    setup = (
        f"import sys; sys.path.append({_PACKAGE_PARENT!r}) if {_PACKAGE_PARENT!r} not in sys.path else None; "
        f"from instrumentor.spawnhook import child; "
        f"child({str(project_root)!r}, {None if cache_dir is None else str(cache_dir)!r}, {backend!r}"
    )

    def get_command_line(**kwds):
        cmd = _original_command_line(**kwds)
        if "-c" in cmd:  # not a frozen executable
            i = cmd.index("-c") + 1
            call = setup + ("); " if _entry is None else f", entry={_entry!r}); ")
            cmd = cmd[:i] + [call + cmd[i]] + cmd[i + 1 :]
        return cmd

    mp_spawn.get_command_line = get_command_line


def stop() -> None:
    global _original_command_line, _entry
    if _original_command_line is not None:
        mp_spawn.get_command_line = _original_command_line
        _original_command_line = None
    _entry = None


def child(project_root: str, cache_dir: str | None, backend: str, entry: str | None = None) -> None:
    """In a spawned child: install the hook, and run the parent's main script instrumented (`entry`:
    the script the parent instrumented as its entry, which the hook may not own by its name)."""
    from .importhook import install, instrument_entry, owned

    install(Path(project_root), cache_dir=None if cache_dir is None else Path(cache_dir), backend=backend)
    plain = mp_spawn._fixup_main_from_path

    def fixup_main_from_path(main_path: str) -> None:
        current = sys.modules["__main__"]
        if getattr(current, "__file__", None) == main_path:
            return plain(main_path)
        if not (entry is not None and os.path.abspath(main_path) == entry) and not owned(Path(main_path)):
            return plain(main_path)
        # what multiprocessing does (runpy.run_path under the name __mp_main__), on instrumented code
        mp_spawn.old_main_modules.append(current)
        module = types.ModuleType("__mp_main__")
        module.__file__ = main_path
        module.__builtins__ = __builtins__
        sys.modules["__main__"] = sys.modules["__mp_main__"] = module
        try:
            exec(instrument_entry(main_path), module.__dict__)
        except BaseException:
            sys.modules["__main__"] = current
            raise

    mp_spawn._fixup_main_from_path = fixup_main_from_path
