"""Our run files, read only through `runtime.runfile.read_run`, grouped into runs.

A run is every process file sharing a header `run_id`: one file per rank and process (DataLoader
workers write their own). Parameters come from the header's `params`, never from file names.

`load_runs(paths) -> RunSet` is the reusable part (the report uses it too); `read_runs(paths)`
turns a RunSet into a `Dataset` with `modeler.aggregate`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from runtime.runfile import FORMAT_NAME, Run, RunFileError, read_run

from ..dataset import RANKS_PARAMETER, Dataset
from ..errors import InputError
from . import FileResult, ReadOptions, expand

_NO_END = "no end record"
#: how the runtime's writer starts every run file (compact JSON, the record type first)
_HEADER_OPENING = b'{"type":"header"'



def sniff_runs(path: Path) -> str | None:
    """"runs" when the file's first line is a scaleprobe run-file header (any version: reading
    then says which version it is)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 16)
    except OSError:
        return None
    if not first.endswith(b"\n") and (first.startswith(_HEADER_OPENING) or _HEADER_OPENING.startswith(first)) and first:
        return "runs"  # cut off inside its header: the reader says so, with the file's name
    # a cheap byte test first, so that large Extra-P files are not parsed here
    if b'"header"' not in first or FORMAT_NAME.encode() not in first:
        return None
    try:
        import json

        rec = json.loads(first)
    except ValueError:
        return None
    return "runs" if isinstance(rec, dict) and rec.get("type") == "header" and rec.get("format") == FORMAT_NAME else None


@dataclass
class RankFile:
    """One process's run file."""

    path: Path
    run: Run

    @property
    def header(self) -> dict[str, Any]:
        return self.run.header

    @property
    def rank(self) -> int:
        r = self.run.header.get("rank", 0)
        return int(r) if isinstance(r, (int, float)) else 0

    @property
    def is_child(self) -> bool:
        """A process started by a rank (a DataLoader or multiprocessing worker, forked or spawned)."""
        return self.run.is_helper_process

    @property
    def status(self) -> str:
        """`ok`, `failed` (the end record says so) or `incomplete` (no end record).

        A non-zero exit code fails the run even when the status says ok: `sys.exit(2)` from an
        argument check ends the program cleanly as far as the recorder is concerned."""
        end = self.run.end
        if end is None:
            return "incomplete"
        code = end.get("exit_code")
        if end.get("status", "ok") != "ok" or (isinstance(code, int) and code != 0):
            return "failed"
        return "ok"

    def failure(self) -> str:
        end = self.run.end
        if end is None:
            return f"{self.path}: {_NO_END} (killed, or still running)"
        detail = ", ".join(f"{k}={end[k]}" for k in ("status", "exit_code", "error", "signal") if end.get(k) is not None)
        return f"{self.path}: rank {self.rank} ended with {detail or 'a failure'}"


@dataclass
class RunRecord:
    """All process files of one run (one point of the sweep, one repetition)."""

    run_id: str
    files: list[RankFile]
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    reason: str = ""

    @property
    def header(self) -> dict[str, Any]:
        return self.files[0].header

    @property
    def experiment(self) -> str | None:
        return self.header.get("experiment")

    @property
    def repetition(self) -> int | None:
        r = self.header.get("repetition")
        return int(r) if isinstance(r, (int, float)) else None

    @property
    def world_size(self) -> int:
        ws = self.header.get("world_size")
        return int(ws) if isinstance(ws, (int, float)) and ws >= 1 else len(self.ranks)

    @property
    def ranks(self) -> dict[int, list[RankFile]]:
        """Files by rank; several files for one rank are its worker processes."""
        out: dict[int, list[RankFile]] = {}
        for f in self.files:
            out.setdefault(f.rank, []).append(f)
        return dict(sorted(out.items()))


@dataclass
class RunSet:
    """Every run found, failed ones included, with the parameters that vary over the completed ones."""

    runs: list[RunRecord]
    parameters: tuple[str, ...]
    constants: dict[str, Any]
    files: list[FileResult]
    warnings: list[str] = field(default_factory=list)

    def completed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status == "ok"]

    def failed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status != "ok"]

    def point(self, run: RunRecord) -> tuple[float, ...]:
        return tuple(float(run.params[p]) for p in self.parameters)

    def values(self) -> dict[str, list[float]]:
        """Every measured value of each parameter, sorted."""
        return {p: sorted({float(r.params[p]) for r in self.completed()}) for p in self.parameters}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _group(rank_files: list[RankFile]) -> list[RunRecord]:
    groups: dict[str, list[RankFile]] = {}
    for rf in rank_files:
        run_id = rf.header.get("run_id")
        # without a run id the file cannot be matched to other ranks: it is a run of its own
        key = str(run_id) if run_id not in (None, "") else f"<no run_id>:{rf.path}"
        groups.setdefault(key, []).append(rf)
    runs = []
    for run_id, files in groups.items():
        files.sort(key=lambda f: (f.rank, str(f.path)))
        params = files[0].header.get("params") or {}
        runs.append(RunRecord(run_id, files, dict(params) if isinstance(params, dict) else {}))
    return runs


def _judge(run: RunRecord, include_incomplete: bool) -> None:
    # Forked children (DataLoader workers) are often terminated by their parent at shutdown, so
    # only the ranks' main processes say whether the run completed; children keep what they flushed.
    main = [f for f in run.files if not f.is_child]
    failed = [f for f in main if f.status == "failed"]
    incomplete = [f for f in main if f.status == "incomplete"]
    disagree = [f for f in run.files if (f.header.get("params") or {}) != (run.files[0].header.get("params") or {})]
    if failed:
        run.status, run.reason = "failed", failed[0].failure() + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")
    elif disagree:
        run.status, run.reason = "failed", f"{disagree[0].path}: its parameters differ from the other files of run {run.run_id}"
    elif incomplete and not include_incomplete:
        run.status, run.reason = "incomplete", incomplete[0].failure()


def _parameters(runs: list[RunRecord], warnings: list[str]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """Modeling parameters: those that vary over the completed runs; the others are constants.

    Runs lacking a parameter the majority has are left out; a varying parameter that is not a
    number cannot be modeled and stops the read with a message naming it."""
    ok = [r for r in runs if r.status == "ok"]
    if ok and not any(RANKS_PARAMETER in r.params for r in ok) and len({r.world_size for r in ok}) > 1:
        for r in runs:
            r.params[RANKS_PARAMETER] = r.world_size
        warnings.append("parameter 'ranks' taken from the headers' world_size (the runs do not record it)")
    sets = Counter(tuple(sorted(r.params)) for r in ok)
    if len(sets) > 1:
        common = set(sets.most_common(1)[0][0])
        for r in ok:
            if set(r.params) != common:
                r.status = "failed"
                r.reason = (
                    f"{r.files[0].path}: parameters ({', '.join(sorted(r.params)) or 'none'}) differ from "
                    f"those of most runs ({', '.join(sorted(common))})"
                )
        ok = [r for r in ok if r.status == "ok"]
    names: list[str] = []
    for r in ok:
        names.extend(p for p in r.params if p not in names)
    varying, constants = [], {}
    for p in names:
        # 4 and 4.0 are the same value (JSON writers differ); other values compare by their repr
        vals = {float(v) if _is_number(v) else repr(v) for v in (r.params[p] for r in ok)}
        if len(vals) == 1:
            constants[p] = ok[0].params[p]
            continue
        bad = sorted({repr(r.params[p]) for r in ok if not _is_number(r.params[p])})
        if bad:
            raise InputError(
                f"parameter {p!r} varies over the runs but is not always a number ({', '.join(bad[:5])}); "
                f"model the runs of each value separately"
            )
        varying.append(p)
    return tuple(varying), constants


def load_runs(paths: Sequence[str | os.PathLike[str]] | Iterable[Path], options: ReadOptions | None = None) -> RunSet:
    """Read run files (directories and globs expanded) and group them into runs.

    Unreadable files are skipped and listed in `RunSet.files`; malformed lines are warnings naming
    file:line; runs that failed or did not finish are kept in `runs` with their status and reason,
    and `completed()` leaves them out."""
    options = options or ReadOptions()
    files: list[FileResult] = []
    warnings: list[str] = []
    rank_files: list[RankFile] = []
    for p in [p for p, _ in expand(paths)]:
        try:
            run = read_run(p)
        except RunFileError as exc:
            files.append(FileResult(str(p), "runs", "skipped", str(exc)))
            continue
        warnings.extend(msg for msg in run.problems if _NO_END not in msg)
        rank_files.append(RankFile(Path(p), run))
    runs = _group(rank_files)
    for r in runs:
        _judge(r, options.include_incomplete)
    parameters, constants = _parameters(runs, warnings)
    experiments = sorted({str(r.experiment) for r in runs if r.status == "ok" and r.experiment})
    if len(experiments) > 1:
        warnings.append(f"runs of {len(experiments)} experiments are modeled together: {', '.join(experiments)}")
    partial = [r for r in runs if r.status == "ok" and len(r.ranks) < r.world_size]
    if partial:
        r = partial[0]
        warnings.append(
            f"{len(partial)} run(s) have files of fewer ranks than their world size (e.g. run {r.run_id}: "
            f"{len(r.ranks)} of {r.world_size}; rank selection?): their values come from the recorded ranks"
        )
    for r in runs:
        if r.status == "ok":
            files.extend(FileResult(str(f.path), "runs", "read") for f in r.files)
        else:
            warnings.append(f"run {r.run_id} left out ({r.status}): {r.reason}")
            files.extend(FileResult(str(f.path), "runs", "left out", f"run {r.status}: {r.reason}") for f in r.files)
    return RunSet(runs, parameters, constants, files, warnings)


def read_runs_batch(paths: Sequence[Path], options: ReadOptions) -> tuple[Dataset, list[FileResult]]:
    """The batch reader registered for the "runs" format."""
    from ..aggregate import dataset_from_runs

    runset = load_runs(paths, options)
    return dataset_from_runs(runset, ranks=options.ranks, derived=options.derived), runset.files


def read_runs(paths: Sequence[str | os.PathLike[str]], options: ReadOptions | None = None) -> Dataset:
    """Run files straight to a Dataset."""
    return read_runs_batch(list(paths), options or ReadOptions())[0]
