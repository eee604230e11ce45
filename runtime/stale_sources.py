"""Source files edited since their build (review 128 MED-2): a stale build runs the code as it was
built, which a user who edited SRC and forgot `instrument` does not expect.

`OUT/.scaleprobe/sources.json` holds the hash of each instrumented module's SRC file as the build
read it. The runtime hashes a module's SRC file anyway when it imports it (`original_lines`, to run
it at SRC's lines): where the hash differs, `say_once` prints one line on stderr. The launcher
hashes the files of the entry's build before a sweep's first run and after each run
(`changed_files`, `runtime.launch_build`), and says it once for the whole sweep (the ranks it
starts get `SCALEPROBE_BUILD_CHECKED=OUT` and stay silent about that build).

    digest(data)                the hash sources.json holds (blake2b, 16 bytes, hex)
    differs(src, built)         whether a file differs from the content of a hash
    changed_files(root)         SRC files of built tree `root` that differ from the build's
    say_once(src, root)         the runtime's one line, on the first changed module of a process
    message(files, root)        the line's text
"""

from __future__ import annotations

import os
import sys

_said = [False]


def digest(data: bytes) -> str:
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def changed_files(root: str) -> list[str]:
    """The SRC files (absolute paths) of built tree `root` whose content differs from the one the
    build was made from, in sources.json's order; a file gone from SRC is not one (the build's copy
    runs, as documented). Empty where the build records no source or no hashes."""
    from . import linemap, original_lines

    real = os.path.realpath(root)
    tree = linemap._load(real + os.sep)
    if tree is None or tree.source is None:
        return []
    return [src for relpath, (src_hash, _) in original_lines._read_hashes(real).items()
            if differs(src := os.path.join(tree.source, *relpath.split("/")), src_hash)]


def differs(src: str, built: str) -> bool:
    """Whether the file `src` differs from the content of hash `built` (`digest`); a file that
    cannot be read does not (the build's copy runs, as documented)."""
    try:
        with open(src, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return digest(data) != built


def message(files: list[str], root: str, who: str = "scaleprobe") -> str:
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    were = "were" if len(files) > 1 else "was"
    return (f"{who}: warning: {shown} changed since the build {root} was made from "
            f"{'them' if len(files) > 1 else 'it'}: the program runs, and is measured, as it {were} built "
            "(tracebacks show the build's lines); run instrument again to measure the edited code")


def said() -> bool:
    """Whether this process has come to its line (said or not): nothing more to check."""
    return _said[0]


def say_once(src: str, root: str) -> None:
    """The runtime's line for a module whose SRC file changed since the build: once per process, by
    the rank 0 of a job (or a process that is no rank), not by a multiprocessing child (its parent
    said it), not in the ranks of a `python -m runtime.launch` that checks this build itself
    (`SCALEPROBE_BUILD_CHECKED`: it says it once for the whole sweep), not with SCALEPROBE_QUIET (a notice, as the run file's name)."""
    if _said[0]:
        return
    _said[0] = True
    try:
        env = os.environ
        if env.get("SCALEPROBE_BUILD_CHECKED") == root.rstrip(os.sep):  # runtime.launch_build
            return
        from .config import ConfigError, _flag

        try:
            if _flag(env, "SCALEPROBE_QUIET"):
                return
        except ConfigError:
            pass
        mp = sys.modules.get("multiprocessing")
        if mp is not None and mp.parent_process() is not None:
            return
        from .environment import detect

        try:
            if detect().rank != 0:
                return
        except Exception:  # noqa: BLE001 - an environment that contradicts itself: said, by every process
            pass
        print(message([src], root.rstrip(os.sep)), file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a notice never stops the program's import
        pass
