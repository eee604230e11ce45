"""A program that replaces itself with `os.exec*` (a wrapper script that execs `torchrun`, a
training script that restarts itself): the process image ends there, and neither atexit nor the
final flush runs. Without this, what was measured since the last flush was lost and the run file
had no end record (a crashed rank, to readers); the new image, recording too, appended a second
header to the same file (`rank<R>.<pid>.jsonl`: the pid stays).

`install()` wraps `os.execv` and `os.execve`, through which every `os.exec*` function of the
standard library goes (`execl`, `execle`, `execlp`, `execvp`, ... look them up when called). Where
the call will most likely replace the process (an executable file, or a descriptor), the run ends
first, with status `exec`: the final flush, and the process's open visits end there, as at a
signal's default action. `SCALEPROBE_EXEC_OF` tells the new image, if it records, which file and
run it continues: it writes a file of its own (`rank<R>.<pid>.1.jsonl`), in the same run, with
`exec_of` in its header, so readers add it to the rank. `os.execvp` tries each folder of PATH: the
tries that cannot succeed pass through untouched. A call that still fails after the run ended
(rare: a bad interpreter line, E2BIG) raises as before; the rest of the process is not recorded,
and stderr says so.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

EXEC_OF = "SCALEPROBE_EXEC_OF"
_installed: list[bool] = [False]


def install(end_run: Callable[[], dict[str, Any] | None]) -> None:
    """Wrap os.execv and os.execve once. `end_run()` ends the run before a replacement and returns
    what the new image is told (`continued_by`), or None where nothing was recorded."""
    if _installed[0]:
        return
    _installed[0] = True
    real_execv, real_execve = os.execv, os.execve

    def execv(path, argv, /):
        told = _before(path, end_run)
        if told is not None:
            os.environ[EXEC_OF] = told
        try:
            return real_execv(path, argv)
        except BaseException:
            if told is not None:
                _failed("os.execv")
            raise

    def execve(path, argv, env, /):
        told = _before(path, end_run)
        if told is not None:
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


def _before(path: Any, end_run: Callable[[], dict[str, Any] | None]) -> str | None:
    if not _will_replace(path):
        return None
    try:
        told = end_run()
    except Exception as e:  # noqa: BLE001 - the program's exec goes ahead whatever happened here
        print(f"scaleprobe: ending the run before os.exec* failed: {e!r}", file=sys.stderr)
        return None
    import json  # not at import: the runtime's import stays cheap (tests/runtime/test_recorder.py)

    return None if told is None else json.dumps(told)


def _will_replace(path: Any) -> bool:
    """Whether exec of `path` will most likely succeed: a descriptor (os.execve supports them), or
    an executable regular file. The tries of os.execvp in folders without it fail here."""
    if isinstance(path, int):
        return True
    try:
        return os.path.isfile(path) and os.access(path, os.X_OK)
    except (TypeError, ValueError):  # what exec itself will refuse
        return False


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
