"""The sweep's progress line after every run, and the summary at the end."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

BAR = 24


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass
class Progress:
    total: int
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    ok: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run directory, first error line)
    skipped: int = 0
    interrupted: int = 0  # runs started and stopped by Ctrl-C or SIGTERM (recorded `interrupted`)
    ran_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def finished(self) -> int:
        return self.ok + len(self.failed) + self.skipped + self.interrupted

    def skip(self) -> None:
        self.skipped += 1

    def record(self, run_dir: str, status: str, error: str | None, wall_s: float) -> None:
        self.ran_s += wall_s
        if status == "ok":
            self.ok += 1
        elif status == "interrupted":
            self.interrupted += 1
        else:
            self.failed.append((run_dir, f"{status}: {error}" if error else status))
        self.show()

    def left_s(self) -> float | None:
        ran = self.ok + len(self.failed)
        if ran == 0:
            return None
        return self.ran_s / ran * (self.total - self.finished)

    def line(self) -> str:
        filled = BAR * self.finished // max(self.total, 1)
        left = self.left_s()
        return (f"[{'#' * filled}{'.' * (BAR - filled)}] {self.finished}/{self.total} runs, "
                f"{self.ok} ok, {len(self.failed)} failed, "
                + (f"{self.interrupted} interrupted, " if self.interrupted else "")
                + f"{self.skipped} skipped (done before), "
                f"elapsed {clock(time.monotonic() - self.started)}"
                + (f", ~{clock(left)} left" if left is not None else ""))

    def show(self) -> None:
        print(f"scaleprobe launch: {self.line()}", file=self.stream, flush=True)

    def summary(self, interrupted: str | None = None) -> str:
        lines = [f"scaleprobe launch: {self.ok} runs completed, {len(self.failed)} failed, "
                 + (f"{self.interrupted} interrupted, " if self.interrupted else "")
                 + f"{self.skipped} skipped as done before, {self.total - self.finished} not run; "
                 f"total time {clock(time.monotonic() - self.started)}"]
        if interrupted:
            lines.append(f"  sweep {interrupted}: run the same command again to resume")
        for run_dir, error in self.failed:
            lines.append(f"  FAILED {run_dir}: {error}")
        return "\n".join(lines)
