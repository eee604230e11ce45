"""A program that replaces itself with `os.exec*` (a wrapper script that execs `torchrun`, a
training script that restarts itself): the process image ends there, and neither atexit nor the
final flush runs. Without this, what was measured since the last flush was lost and the run file
had no end record (a crashed rank, to readers); the new image, recording too, appended a second
header to the same file (`rank<R>.<pid>.jsonl`: the pid stays).

`install()` wraps `os.execv` and `os.execve`, through which every `os.exec*` function of the
standard library goes (`execl`, `execle`, `execlp`, `execvp`, ... look them up when called). Where
the call will most likely replace the process (an executable ELF file, or a script whose `#!`
interpreter is there, with arguments that fit; a descriptor), the run ends first, with status
`exec`: the final flush, and the process's open visits end there, as at a signal's default action.
`SCALEPROBE_EXEC_OF` tells the new image, if it records, which file and run it continues: it writes
a file of its own (`rank<R>.<pid>.1.jsonl`), in the same run, with `exec_of` in its header, so
readers add it to the rank (not where the program passes an environment without scaleprobe's
folder: that image makes a run of its own). `os.execvp` tries each folder of PATH: the tries that
cannot succeed pass through untouched. A call that still fails after the run ended (rare: a
damaged executable) raises as before; the rest of the process is not recorded, and stderr says so.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

EXEC_OF = "SCALEPROBE_EXEC_OF"
_installed: list[bool] = [False]
# What runs before a replacement, in order: the recorder's end of the run (returns what the new
# image is told), the launcher's end of its run record where the program runs in its process
_before_exec: list[Callable[[], dict[str, Any] | None]] = []


def install(end_run: Callable[[], dict[str, Any] | None] | None = None) -> Callable[[], None]:
    """Wrap os.execv and os.execve (once), and have `end_run()` run before a replacement: it ends a
    run and returns what the new image is told, or None. Returns what takes `end_run` out again."""
    if end_run is not None:
        _before_exec.append(end_run)

    def remove() -> None:
        if end_run in _before_exec:
            _before_exec.remove(end_run)

    if _installed[0]:
        return remove
    _installed[0] = True
    real_execv, real_execve = os.execv, os.execve

    def execv(path, argv, /):
        told = _before(path, argv, os.environ)
        if told is not None:
            os.environ[EXEC_OF] = told
        try:
            return real_execv(path, argv)
        except BaseException:
            if told is not None:
                _failed("os.execv")
            raise

    def execve(path, argv, env, /):
        told = _before(path, argv, env)
        if told is not None and _records_alike(env):
            try:
                env = {**env, EXEC_OF: told}
            except TypeError:  # not a mapping: os.execve says so
                pass
        try:
            return real_execve(path, argv, env)
        except BaseException:
            if told is not None:
                _failed("os.execve")
            raise

    for wrapper, real in ((execv, real_execv), (execve, real_execve)):
        wrapper.__doc__ = real.__doc__
        wrapper.__wrapped__ = real  # type: ignore[attr-defined]
    os.execv, os.execve = execv, execve
    return remove


def _records_alike(env: Any) -> bool:
    """Whether the new image, given `env`, would write where this process does: a program that
    passes an environment without scaleprobe's folder makes a run of its own elsewhere, not a
    continuation of this one (review 52 F8)."""
    try:
        return env.get("SCALEPROBE_OUT") == os.environ.get("SCALEPROBE_OUT")
    except AttributeError:
        return False


def _before(path: Any, argv: Any, env: Any) -> str | None:
    if not _before_exec or not _will_replace(path, argv, env):
        return None
    told = None
    for end_run in list(_before_exec):
        try:
            told = end_run() or told
        except Exception as e:  # noqa: BLE001 - the program's exec goes ahead whatever happened here
            print(f"scaleprobe: ending the run before os.exec* failed: {e!r}", file=sys.stderr)
    if told is None:
        return None
    import json  # not at import: the runtime's import stays cheap (tests/runtime/test_recorder.py)

    return json.dumps(told)


def _will_replace(path: Any, argv: Any, env: Any) -> bool:
    """Whether exec of `path` will most likely succeed: a descriptor (os.execve supports them), or an
    executable regular file that the kernel can run, with arguments and environment it takes. The
    tries of os.execvp in PATH folders without the program, or with a broken one (a script whose
    `#!` interpreter is gone: a stale virtual environment's), fail here and pass through untouched
    (review 52 F3, F7)."""
    if isinstance(path, int):
        return True
    try:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return False
        with open(path, "rb") as f:
            head = f.read(256)  # what Linux reads of a `#!` line (BINPRM_BUF_SIZE)
    except (OSError, TypeError, ValueError):  # what exec itself will refuse
        return False
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        if not words or not (os.path.isfile(words[0]) and os.access(words[0], os.X_OK)):
            return False
    elif sys.platform.startswith("linux") and not head.startswith(b"\x7fELF"):
        return False  # ENOEXEC: os.exec* runs no shell for a file without `#!`, unlike execvp(3)
    return _fits(argv, env)


def _fits(argv: Any, env: Any) -> bool:
    """Whether the arguments and environment fit what exec takes (else E2BIG)."""
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (AttributeError, OSError, ValueError):
        return True
    try:
        sizes = [len(os.fsencode(a)) + 1 for a in argv]
        if env is not None:
            sizes += [len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items()]
    except (AttributeError, TypeError, ValueError):  # exec refuses these itself
        return False
    # each string also takes a pointer; Linux refuses a single one above 32 pages (MAX_ARG_STRLEN)
    return sum(sizes) + 8 * len(sizes) < limit and max(sizes, default=0) <= 32 * 4096


def _failed(name: str) -> None:
    os.environ.pop(EXEC_OF, None)
    print(f"scaleprobe: {name} failed after the run file was ended for it: the rest of this process "
          "is not recorded", file=sys.stderr)


def continued(pid: int) -> dict[str, Any] | None:
    """What the image this process replaced told it (`SCALEPROBE_EXEC_OF`), if it was this very
    process (a program it started inherits the variable and is no continuation); the variable is
    removed either way."""
    text = os.environ.pop(EXEC_OF, None)
    if not text:
        return None
    import json

    try:
        got = json.loads(text)
    except ValueError:
        return None
    if not isinstance(got, dict) or got.get("pid") != pid or not isinstance(got.get("file"), str):
        return None
    return got
