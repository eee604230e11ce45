"""Whether a run can be modeled, and why not: the same process's file seen twice, two main files
for one rank, failed or unfinished ranks, unreadable rank files, damaged files.

Only the ranks' main processes say whether a run completed: forked or spawned children
(DataLoader workers) are often terminated by their parent at shutdown and keep what they flushed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..listing import listing
from . import FileResult

if TYPE_CHECKING:
    from .runs import RankFile, RunRecord

#: how the runtime names a run file (`runtime.runfile.run_file_name`): rank, pid, and the number of
#: a later image of the process (`os.exec*`)
_RUN_FILE_NAME = re.compile(r"^rank(\d+)\.(\d+)(?:\.\d+)?\.jsonl$")
_LAUNCHER_SIGNAL = 15  # the launcher stops the other ranks of a failed run with SIGTERM
_NO_END = "has no end record (killed, or still running)"


def run_file_rank(path: Path) -> int | None:
    """The rank a run file's name gives, or None when it is not named like one."""
    m = _RUN_FILE_NAME.match(path.name)
    return int(m.group(1)) if m else None


def _copy_key(rf: "RankFile") -> tuple[Any, ...]:
    """Two paths with this key hold the same process's file: in one directory a rank and a pid
    name one file (`rank<R>.<pid>.jsonl`), so the same run (id, repetition, parameters), rank and
    pid under two paths is a copy; launches of one job that reuse a pid differ in repetition or
    parameters; the images of a process that replaced itself with `os.exec*` keep its pid and differ
    in `exec_of`. Files without a pid are compared by content."""
    pid = rf.header.get("pid")
    run_id = rf.header.get("run_id")
    if isinstance(pid, int) and run_id not in (None, ""):
        from .runs import run_key

        return (*run_key(rf.header), rf.rank, pid, str(rf.header.get("exec_of")))
    try:
        return ("content", hashlib.sha1(rf.path.read_bytes()).hexdigest())
    except OSError:
        return ("path", str(rf.path))


def _fuller(rf: "RankFile") -> tuple[int, int]:
    """Which of two copies to keep: the one that ended, then the longer one."""
    try:
        size = rf.path.stat().st_size
    except OSError:
        size = 0
    return (rf.run.end is not None, size)


def drop_copies(rank_files: list["RankFile"]) -> tuple[list["RankFile"], list[str], list[FileResult]]:
    """Each process's file once: copies (a run folder copied inside the input, a second rsync) are
    read once, with a warning naming both paths; summing them would double every value."""
    by_key: dict[tuple[Any, ...], list["RankFile"]] = defaultdict(list)
    for rf in rank_files:
        by_key[_copy_key(rf)].append(rf)
    kept: list["RankFile"] = []
    same: list[str] = []
    warnings: list[str] = []
    results: list[FileResult] = []
    for copies in by_key.values():
        best = max(copies, key=_fuller)  # max keeps the first of equals: the first path in order
        kept.append(best)
        for other in copies:
            if other is best:
                continue
            results.append(FileResult(str(other.path), "runs", "duplicate", f"a copy of {best.path}: read once"))
            if _same_bytes(best.path, other.path):
                same.append(f"{other.path} (= {best.path})")
            else:
                warnings.append(
                    f"{best.path} and {other.path} are copies of one process's file (run "
                    f"{best.header.get('run_id')}, rank {best.rank}, pid {best.header.get('pid')}) that differ: "
                    f"read once, from the {_why_kept(best, other)} one, {best.path}"
                )
    if same:
        warnings.insert(0, (
            f"{len(same)} file(s) are the same as other files read (a copied run folder?): each process's "
            f"file is read once: {listing(same, 3, 'more')}"
        ))
    order = {id(rf): i for i, rf in enumerate(rank_files)}
    kept.sort(key=lambda rf: order[id(rf)])
    return kept, warnings, results


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _why_kept(best: "RankFile", other: "RankFile") -> str:
    return "complete" if best.run.end is not None and other.run.end is None else "longer"


def attribute_unreadable(unreadable: list[tuple[Path, str]], runs: list["RunRecord"]) -> None:
    """Give each run the rank files of its directory that could not be read (empty, cut in the
    header): a rank that left such a file and no readable one died at start-up, it was not left out
    by rank selection (those ranks write no file). A directory holding files of several runs says
    nothing about whose file it was."""
    in_dir: dict[Path, set[str]] = defaultdict(set)
    by_id = {r.run_id: r for r in runs}
    for r in runs:
        for f in r.files:
            in_dir[f.path.parent].add(r.run_id)
    for path, why in unreadable:
        owners = in_dir.get(path.parent, set())
        rank = run_file_rank(path)
        if len(owners) != 1 or rank is None:
            continue
        run = by_id[next(iter(owners))]
        if rank < run.world_size and not any(f.rank == rank and not f.is_child for f in run.files):
            run.unreadable.append((rank, path, why))


def _launch_record(run: "RunRecord") -> tuple[Path, dict[str, Any]] | None:
    """The launcher's `launch.json` of this run (docs/launch.md), when it lies beside its files."""
    for d in sorted({f.path.parent for f in run.files}):
        p = d / "launch.json"
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and str(rec.get("run_id")) == run.run_id:
            return p, rec
    return None


def _detail(f: "RankFile", known: str = "") -> str:
    """How the rank's main process ended; `known`: what the launcher says of it."""
    end = f.run.end
    if end is None:
        return f"has no end record ({known or 'killed, or still running'})"
    if end.get("lost_flushes") and end.get("status", "ok") == "ok":
        return (f"ended, but {end['lost_flushes']} flush(es) of its records could not be written (disk full?): "
                "its totals are short")
    detail = ", ".join(f"{k}={end[k]}" for k in ("status", "exit_code", "exception", "error", "signal")
                       if end.get(k) is not None)
    return f"ended with {detail or 'a failure'}" + (f" ({known})" if known else "")


def _by_launcher(f: "RankFile") -> bool:
    end = f.run.end or {}
    return end.get("status") == "signal" and end.get("signal") == _LAUNCHER_SIGNAL


def _failure(run: "RunRecord", bad: list["RankFile"]) -> str:
    """Name the rank that failed first, then every other failed rank briefly. The launcher's
    `failed_rank` knows; without it a rank without an end record (SIGKILL, `os._exit`, a crash)
    comes first, then an exception or exit status, and last the ranks stopped by SIGTERM (the
    launcher stops the others when one fails)."""
    launch = _launch_record(run)
    # the launcher's rank is the starter where the program started its ranks itself (review 23)
    failed_rank = launch[1].get("failed_rank") if launch and not run.starters else None
    bad = sorted(bad, key=lambda f: (f.rank != failed_rank, f.run.end is not None, _by_launcher(f), f.rank))
    parts = []
    first = bad[0] if bad else None
    if launch and failed_rank is None and launch[1].get("error"):
        # the launcher ended the run itself (review 49 F4: a hang stopped at --timeout was told only
        # as the ranks' SIGTERM): its reason comes first
        parts.append(f"{launch[0]}: {launch[1]['error']}")
    if launch and isinstance(failed_rank, int) and (first is None or first.rank != failed_rank):
        parts.append(f"{launch[0]}: rank {failed_rank} failed ({launch[1].get('error') or 'no error line'})")
    if first is not None:
        error = launch[1].get("error") if launch and first.rank == failed_rank else None
        known = f"launch.json: {error}" if error else ""
        parts.append(f"{first.path}: rank {first.rank} {_detail(first, known)}")
    others = [f"rank {f.rank} {_detail(f)}" + (" (the launcher's SIGTERM?)" if _by_launcher(f) else "")
              for f in bad[1:]]
    others += [f"rank {rank}'s file could not be read ({why})" for rank, _, why in run.unreadable]
    return "; ".join(parts) + (f"; also {'; '.join(others)}" if others else "")


def _unfinished(run: "RunRecord", incomplete: list["RankFile"]) -> str:
    """Name the ranks without an end record, the launcher's `failed_rank` first with its error, as
    `_failure` does (review 88 LOW-3: a rank SIGKILLed after its last flush was told `killed, or
    still running` beside a launch.json that said `killed by SIGKILL`)."""
    launch = _launch_record(run)
    failed_rank = launch[1].get("failed_rank") if launch and not run.starters else None
    error = launch[1].get("error") if launch and isinstance(failed_rank, int) else None
    incomplete = sorted(incomplete, key=lambda f: f.rank != failed_rank)  # stable: the others as they were
    parts = [f"{f.path}: rank {f.rank} {_detail(f, f'launch.json: {error}' if error and f.rank == failed_rank else '')}"
             for f in incomplete]
    parts += [f"{p}: rank {rank}'s file could not be read ({why})" for rank, p, why in run.unreadable]
    return parts[0] + (f"; also {'; '.join(parts[1:])}" if parts[1:] else "")


def judge(run: "RunRecord", include_incomplete: bool) -> None:
    """Set the run's status (ok, ambiguous, damaged, failed, incomplete) and the reason."""
    main = [f for f in run.files if not f.is_child]
    per_rank: dict[int, list["RankFile"]] = defaultdict(list)
    for f in main:
        if not f.continues:  # a later image of the rank's process (os.exec*) is no second attempt
            per_rank[f.rank].append(f)
    doubled = {r: fs for r, fs in sorted(per_rank.items()) if len(fs) > 1}
    damaged = [f for f in run.files if f.check.undefined or f.check.lost]
    failed = [f for f in main if f.status == "failed"]
    incomplete = [f for f in main if f.status == "incomplete"]
    if run.disagree:
        run.status, run.reason = "failed", run.disagree
    elif doubled:
        rank, fs = next(iter(doubled.items()))
        run.status, run.reason = "ambiguous", (
            f"rank {rank} has {len(fs)} main-process files ({', '.join(str(f.path) for f in fs)}; a restarted "
            f"rank, or files of two attempts): which one holds the run is unknown, and summing them would "
            f"count the rank twice" + (f" (and {len(doubled) - 1} more rank(s) alike)" if len(doubled) > 1 else "")
        )
    elif damaged:
        f = damaged[0]
        if f.check.undefined:
            ids = ", ".join(str(i) for i in sorted(f.check.undefined))
            run.status, run.reason = "damaged", (
                f"{f.path}: records use region id(s) {ids} that the file does not define: their call paths "
                f"cannot be named, and the rank's values would miss them"
            )
        else:
            assert f.check.lost is not None
            run.status, run.reason = "damaged", (
                f"{f.path}:{f.check.lost[0]}: {f.check.lost[1]} could not be used (see the warning for that line): "
                f"the rank's totals would be short by what it held"
            )
    elif failed and all(_interrupted(f) for f in failed):
        # stopped by Ctrl-C or a signal (the others by the launcher's SIGTERM), none failed on its own:
        # its values up to then are measurements, of fewer steps (review 20: a Ctrl-C'd run could not
        # be used at all, --include-incomplete notwithstanding)
        why = _failure(run, failed + incomplete)
        if include_incomplete:
            run.kept_incomplete = f"interrupted: {why}"
        else:
            # its own status, as docs/modeler.md names it (review 92 LOW-5: it was counted as failed)
            run.status, run.reason = "interrupted", f"{why} (interrupted: --include-incomplete uses it, up to then)"
    elif failed:
        run.status, run.reason = "failed", _failure(run, failed + incomplete)
    elif bad_starter := next((f for f in run.starters if not f.is_child and f.status == "failed"), None):
        run.status, run.reason = "failed", (f"{bad_starter.path}: the process that started the ranks "
                                            f"{_detail(bad_starter)}")
    elif incomplete or run.unreadable:
        if include_incomplete:
            run.kept_incomplete = _unfinished(run, incomplete)
        else:
            run.status, run.reason = "incomplete", _unfinished(run, incomplete)
    elif _unrecorded(main, per_rank):
        missing = _unrecorded(main, per_rank)
        why = (f"no file for rank(s) {_ranks_text(missing)}, which rank selection (SCALEPROBE_RANKS) had to record: "
               "the rank ended before recording began")
        if include_incomplete:
            run.kept_incomplete = why
        else:
            run.status, run.reason = "incomplete", why
    elif missing := _missing(run, main, per_rank):
        why = (f"no file for rank(s) {_ranks_text(missing)} of its {run.world_size}, and its headers name no rank "
               "selection (recorded_ranks): their files were lost (a node-local --out on another node, a rank "
               "killed before its first write, ranks given different --repetition or --param)")
        if include_incomplete:
            run.kept_incomplete = why
        else:
            run.status, run.reason = "incomplete", why


def _interrupted(f: "RankFile") -> bool:
    """Ended by a signal (SIGINT, SIGTERM, or Ctrl-C's KeyboardInterrupt), not by its own failure."""
    return (f.run.end or {}).get("status") == "signal"


def _unrecorded(main: list["RankFile"], per_rank: dict) -> list[int]:
    """Ranks the run's headers say record (`recorded_ranks`, under rank selection) without a file."""
    for f in main:
        selected = f.header.get("recorded_ranks")
        if isinstance(selected, list):
            return [r for r in selected if isinstance(r, int) and r not in per_rank]
    return []


def _ranks_text(ranks: list[int]) -> str:
    return f"{', '.join(map(str, ranks[:8]))}{' ...' if len(ranks) > 8 else ''}"


def _missing(run: "RunRecord", main: list["RankFile"], per_rank: dict) -> list[int]:
    """The ranks below the run's world size without a file, in a run whose headers name no rank
    selection (review 72 F5: a lost rank's file was taken for one left out by a selection). Only
    for headers of a runtime that names its selection (`recorded_ranks` came before `rank_source`);
    an older file may have been written under a selection it does not name."""
    if not main or any(isinstance(f.header.get("recorded_ranks"), list) for f in main) \
            or not all("rank_source" in f.header for f in main):
        return []
    return [r for r in range(run.world_size) if r not in per_rank]
