"""The launcher's own record of each run, `<run-dir>/launch.json`, and resuming from it.

The record is written when a run starts (status `running`) and replaced, atomically, when it ends.
A re-run of the same sweep skips every run whose record says `ok` for the same parameters and the
same program (the script compared as the file it resolves to, however it was spelled); any other run
is started again from scratch, after its old rank files are removed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runtime.launch_errors import LaunchError

RECORD = "launch.json"
RECORD_VERSION = 1
STATUSES = ("running", "ok", "failed", "timeout", "interrupted")


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed
        return ""


@dataclass
class RunRecord:
    experiment: str
    run_id: str
    params: dict[str, Any]
    repetition: int
    command: list[str]
    status: str = "running"
    exit_code: int | None = None
    failed_rank: int | None = None
    error: str | None = None
    wall_s: float | None = None
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    version: int = RECORD_VERSION
    # the user's program and its arguments after substitution: a resumed sweep must not take a run
    # made with other program arguments for a finished one (empty in records of older launchers)
    program: list[str] = field(default_factory=list)
    # the launcher's working directory, which a relative script path in `program` is relative to
    # (empty in records of older launchers)
    cwd: str = field(default_factory=_cwd)


def prepare_root(out: Path, experiment: str) -> None:
    """Create `<out>/<experiment>` before anything runs; a path that cannot be one is an error naming --out."""
    root = out / experiment
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchError(f"--out {out}: cannot create the directory {root}: {exc.strerror}") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise LaunchError(f"--out {out}: the directory {root} is not writable")


def write_record(directory: Path, record: RunRecord) -> None:
    tmp = directory / f".{RECORD}.{os.getpid()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(asdict(record), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        # Atomic: a sweep killed mid-write leaves the old record or the new one, never half of one.
        os.replace(tmp, directory / RECORD)
    except OSError as exc:
        raise LaunchError(f"cannot write the launch record {directory / RECORD}: {exc.strerror}") from None


def read_record(directory: Path) -> RunRecord | None:
    """The run's record, or None when there is none yet; a broken record is an error naming it."""
    path = directory / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LaunchError(f"{path}: unreadable launch record ({exc}); delete it to re-run this run") from None
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
        raise LaunchError(f"{path}: launch record version {data.get('version') if isinstance(data, dict) else '?'}"
                          f", expected {RECORD_VERSION}")
    try:
        return RunRecord(**data)
    except TypeError as exc:
        raise LaunchError(f"{path}: malformed launch record ({exc})") from None


def script_path(script: str, cwd: str = "") -> str:
    """The file a script path names, from the directory it was given in (default: the current one)."""
    return os.path.realpath(os.path.join(cwd or _cwd(), script))


def same_program(record: RunRecord, program: list[str]) -> bool:
    """The same arguments, and the same script file however its path was spelled and wherever from
    (a record of an older launcher, which kept no working directory, is taken as from here)."""
    if record.program[1:] != program[1:]:
        return False
    return script_path(record.program[0], record.cwd) == script_path(program[0])


def is_complete(directory: Path, params: dict[str, Any], program: list[str] | None = None) -> bool:
    """A finished run of these parameters (and, when both are known, of the same program)."""
    record = read_record(directory)
    if record is None or record.status != "ok" or record.params != params:
        return False
    return not program or not record.program or same_program(record, program)


def clear_attempt(directory: Path, rank: int | None = None) -> None:
    """Remove what an earlier attempt left, so the modeler never mixes two attempts' rank files.

    With `rank`, only that rank's files: each rank of srun/mpiexec clears its own, so that no rank
    removes a file another rank of this attempt already writes.
    """
    if not directory.is_dir():
        return
    prefix = "rank" if rank is None else f"rank{rank}."
    for path in directory.iterdir():
        if path.name.startswith(prefix) and path.suffix in (".jsonl", ".txt", ".nsys-rep", ".qdrep"):
            path.unlink(missing_ok=True)
