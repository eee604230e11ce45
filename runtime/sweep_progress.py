"""The sweep's progress line after every run, and the summary at the end."""

from __future__ import annotations

import sys
import time
from collections import Counter
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
    #: the number of ranks of every run of the sweep (any order); None: every run left costs the mean
    ranks: list[int] | None = None
    #: a run's cost grows with its ranks where none of its number of ranks ran yet (local ranks share
    #: the host's cores); else such a run costs the mean of the runs made
    by_ranks: bool = True

    def __post_init__(self) -> None:
        self._left: Counter[int] | None = Counter(self.ranks) if self.ranks is not None else None
        self._walls: dict[int, list[float]] = {}  # wall times of the runs made (ok or failed), by ranks

    @property
    def finished(self) -> int:
        return self.ok + len(self.failed) + self.skipped + self.interrupted

    def _done(self, ranks: int | None) -> None:
        if self._left is not None:
            if ranks is None or self._left[ranks] <= 0:
                self._left = None  # cannot tell which runs are left: the plain mean from now on
            else:
                self._left[ranks] -= 1

    def skip(self, ranks: int | None = None) -> None:
        self.skipped += 1
        self._done(ranks)

    def record(self, run_dir: str, status: str, error: str | None, wall_s: float,
               ranks: int | None = None) -> None:
        self.ran_s += wall_s
        self._done(ranks)
        if status != "interrupted" and ranks is not None:
            self._walls.setdefault(ranks, []).append(wall_s)
        if status == "ok":
            self.ok += 1
        elif status == "interrupted":
            self.interrupted += 1
        else:
            self.failed.append((run_dir, f"{status}: {error}" if error else status))
        self.show()

    def left_s(self) -> float | None:
        """The time the runs left should take: each at the mean of the runs made with its number of
        ranks; one whose number of ranks has not run yet, at the mean of the nearest number of ranks
        made, scaled by the ratio of the ranks (local ranks share the host's cores: a run costs about
        its ranks), or at the mean of all runs made where the ranks run elsewhere. Without the ranks
        of the runs: the mean of the runs made times the runs left (review 71 F5: early in a sweep
        over ranks=1..16 that was 3x short)."""
        ran = self.ok + len(self.failed)
        if ran == 0:
            return None
        if self._left is None or not self._walls:
            return self.ran_s / ran * (self.total - self.finished)
        means = {r: sum(w) / len(w) for r, w in self._walls.items()}
        overall = sum(sum(w) for w in self._walls.values()) / sum(len(w) for w in self._walls.values())
        left = 0.0
        for r, count in self._left.items():
            if count <= 0:
                continue
            if r in means:
                each = means[r]
            elif self.by_ranks:
                near = min(means, key=lambda m: (abs(m - r), m))
                each = means[near] * r / near
            else:
                each = overall
            left += count * each
        return left

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
