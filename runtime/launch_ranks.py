"""Start the processes of one run, watch them, and stop them all when one fails.

Each process gets a session of its own, so a Ctrl-C in the terminal reaches only the launcher,
which forwards it (and SIGTERM) to every process: the ranks then unwind and flush their data. A
process still alive `grace` seconds after being asked to stop is killed with its whole group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from runtime.launch_child import clear_stop_mark, mark_stopping, read_error, stopped_by_sigterm

POLL_S = 0.05


@dataclass(frozen=True)
class Member:
    """One process of a run: a rank we started, or (rank None) a command that starts several."""

    command: list[str]
    env: dict[str, str]
    rank: int | None


@dataclass(frozen=True)
class Outcome:
    status: str  # ok, failed, timeout, interrupted
    exit_code: int
    failed_rank: int | None
    error: str | None
    wall_s: float
    # the signal that interrupted the run, when one did; or, with another status, one that came as
    # its ranks ended and was not forwarded to them: it stops the sweep after this run
    signal: int | None = None


def free_port() -> int:
    # The port is free now; torchrun takes the same small risk that another process grabs it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def describe_exit(code: int) -> str:
    if code < 0:
        if -code == getattr(signal, "SIGKILL", None):
            # nothing in the process could say why (review 39: ranks the OOM killer took)
            return "killed by SIGKILL (the kernel's out-of-memory killer sends it, as do schedulers at a limit: see dmesg)"
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def status_code(code: int) -> int:
    """A shell-style exit status: 128+N for a process killed by signal N."""
    return 128 - code if code < 0 else code


class SignalInbox:
    """Collect SIGINT/SIGTERM while a run is watched; the watcher forwards them."""

    def __enter__(self) -> "SignalInbox":
        self.received: list[int] = []
        self._old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in self._old:
            signal.signal(s, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        self.received.append(signum)

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)


def _signal(proc: subprocess.Popen, sig: int, group: bool = False) -> None:
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def _error_ranks(run_dir: Path) -> list[int]:
    """Ranks that left an error file with a message, oldest first (an empty one says nothing)."""
    found = []
    for path in run_dir.glob("rank*.error.txt"):
        try:
            rank = int(path.name[4:].split(".")[0])
            if read_error(run_dir, rank) is not None:
                found.append((path.stat().st_mtime, rank))
        except (OSError, ValueError):
            continue
    return [rank for _, rank in sorted(found)]


def _ranks_without_end(run_dir: Path) -> list[int]:
    """Ranks whose own run file (not a helper process's) has no end record: killed, or crashed."""
    from runtime.runfile import RunFileError, read_run

    ranks = set()
    for path in sorted(run_dir.glob("rank*.jsonl")):
        try:
            run = read_run(path)
        except RunFileError:
            continue
        if run.end is None and not run.is_helper_process:
            try:
                ranks.add(int(path.name[4:].split(".")[0]))
            except ValueError:
                continue
    return sorted(ranks)


def _spawned_failure(run_dir: Path, code: int) -> tuple[int | None, str | None]:
    """Which rank of a spawn command (srun, mpiexec) failed. Its ranks' error files say, but a rank
    that srun stopped with SIGTERM after another one failed leaves one too, marked as such; a rank
    killed by a signal (a segfault, SIGKILL, the OOM killer) leaves none, only a run file without
    an end record."""
    stopped = None
    for rank in _error_ranks(run_dir):
        error = read_error(run_dir, rank)
        if not stopped_by_sigterm(error):
            return rank, error
        stopped = stopped or (rank, error)
    for rank in _ranks_without_end(run_dir):
        if read_error(run_dir, rank) is None:
            return rank, (f"died without an error message (its run file has no end record; "
                          f"the spawn command {describe_exit(code)})")
    return stopped or (None, None)


def _failed_member(members: Sequence[Member], procs: list[subprocess.Popen], run_dir: Path,
                   first: int) -> tuple[int | None, str]:
    member, code = members[first], procs[first].returncode
    rank = member.rank
    if rank is None:
        rank, error = _spawned_failure(run_dir, code)
    else:
        error = read_error(run_dir, rank)
    return rank, error or describe_exit(code)


def run_members(members: Sequence[Member], run_dir: Path, *, timeout: float | None = None,
                grace: float = 10.0) -> Outcome:
    start = time.monotonic()
    procs: list[subprocess.Popen] = []
    clear_stop_mark(run_dir)
    with SignalInbox() as inbox:
        try:
            for m in members:
                procs.append(subprocess.Popen(m.command, env=m.env, start_new_session=True))
        except OSError as exc:
            for p in procs:
                _signal(p, signal.SIGKILL, group=True)
                p.wait()
            return Outcome("failed", 127, members[len(procs)].rank,
                           f"cannot start {members[len(procs)].command[0]}: {exc.strerror}",
                           time.monotonic() - start)
        first_failure: int | None = None
        status, stop_at, stop_signal = "ok", None, None
        forwarded = 0
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            if first_failure is None and stop_at is None:
                for i, c in enumerate(codes):
                    if c is not None and c != 0:
                        first_failure, status, stop_at = i, "failed", now + grace
                        mark_stopping(run_dir, "the launcher stops every rank when one fails")
                        for p in procs:
                            _signal(p, signal.SIGTERM)
                        break
            if timeout is not None and stop_at is None and now - start > timeout:
                status, stop_at = "timeout", now + grace
                mark_stopping(run_dir, f"the launcher stops every rank at --timeout {timeout:g} s")
                for p in procs:
                    _signal(p, signal.SIGTERM)
            while forwarded < len(inbox.received):
                sig = inbox.received[forwarded]
                forwarded += 1
                if status == "interrupted" and sig == signal.SIGINT:
                    stop_at = now  # a second Ctrl-C: no more waiting
                if status != "interrupted":
                    status, stop_signal, stop_at = "interrupted", sig, now + grace
                    mark_stopping(run_dir, f"the launcher was sent {signal.Signals(sig).name}"
                                           + (", Ctrl-C," if sig == signal.SIGINT else "")
                                           + " and passes it on to every rank")
                for p in procs:
                    _signal(p, sig)
            if stop_at is not None and now >= stop_at:
                for p in procs:
                    if p.poll() is None:
                        _signal(p, signal.SIGKILL, group=True)
                stop_at = now + 3600  # killed: only the reaping is left
            time.sleep(POLL_S)
    wall = time.monotonic() - start
    codes = [p.returncode for p in procs]
    # a signal that came as the last rank ended, never forwarded: the run is done as it ended, and
    # the signal still stops what comes after it (review 38: the sweep went on and exited 0)
    late = inbox.received[forwarded:] if status != "interrupted" else []
    if status == "ok" and any(codes):
        first_failure, status = next(i for i, c in enumerate(codes) if c), "failed"
    if status == "failed" and first_failure is not None:
        rank, error = _failed_member(members, procs, run_dir, first_failure)
        return Outcome("failed", status_code(codes[first_failure]), rank, error, wall, late[0] if late else None)
    if status == "timeout":
        return Outcome("timeout", 124, None, f"timed out after {timeout:g} s", wall, late[0] if late else None)
    if status == "ok":
        # Every rank exited 0, but one may have said that its run file could not be written
        # (launch_child: a full disk, a file size limit): the run's data is not complete.
        for rank in _error_ranks(run_dir):
            return Outcome("failed", 0, rank, read_error(run_dir, rank) or "left an error file", wall,
                           late[0] if late else None)
    if status == "interrupted":
        name = signal.Signals(stop_signal).name if stop_signal else "signal"
        return Outcome("interrupted", 128 + (stop_signal or 0), None, f"interrupted by {name}", wall,
                       stop_signal)
    return Outcome("ok", 0, None, None, wall, late[0] if late else None)
