"""The launcher's own record of each run, `<run-dir>/launch.json`, and resuming from it.

The record is written when a run starts (status `running`) and replaced, atomically, when it ends.
A re-run of the same sweep skips every run whose record says `ok` for the same parameters; any
other run is started again from scratch, after its old rank files are removed.
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


def write_record(directory: Path, record: RunRecord) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{RECORD}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(record), indent=1) + "\n", encoding="utf-8")
    # Atomic: a sweep killed mid-write leaves the old record or the new one, never half of one.
    os.replace(tmp, directory / RECORD)


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


def is_complete(directory: Path, params: dict[str, Any], program: list[str] | None = None) -> bool:
    """A finished run of these parameters (and, when both are known, of the same program arguments)."""
    record = read_record(directory)
    if record is None or record.status != "ok" or record.params != params:
        return False
    return not program or not record.program or record.program == program


def clear_attempt(directory: Path) -> None:
    """Remove what an unfinished attempt left, so the modeler never mixes two attempts' rank files."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.name.startswith("rank") and path.suffix in (".jsonl", ".txt", ".nsys-rep", ".qdrep"):
            path.unlink()
