"""Records whose values cannot be right: negative counts, times or bytes, and region ids that the
file never defines.

`runtime.runfile.read_run` checks that a record parses and has its fields; what the values mean
is the modeler's business. A record with an impossible value is reported as `file:line: why` and
taken back out of the `Run` (as a malformed line is never put in). A region id without a region
record (its line was bad, or never written) cannot be named: the records that use it are reported
once per id, and the caller leaves the run out rather than filing them under `#<id>`.

Reading every file a second time would double the reading cost, so the lines are looked at only
when the parsed run shows an undefined id or the raw bytes after the header hold a negative number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from runtime.runfile import Run

# a minus before a digit: a negative number, or a name that holds one; a literal first character
# makes the search fast, and '-' is rare after the header (`_has_negative` tells names apart)
_NEGATIVE = re.compile(rb"-[0-9]")


def _has_negative(raw: bytes, start: int) -> bool:
    """Whether a JSON number after `start` may be negative: a minus before a digit where a value
    starts (after `:`, `,` or `[`). Review 54 F4: a region's file `exp-1/train.py`, in every
    rank's file, had every file parsed twice, the second time with the standard `json` (1.8x)."""
    for m in _NEGATIVE.finditer(raw, start):
        i = m.start() - 1
        while i >= 0 and raw[i] in b" \t":
            i -= 1
        if i >= 0 and raw[i] in b":,[":
            return True
    return False


# fields that hold counts, durations or bytes, per record type
_NON_NEGATIVE: dict[str, tuple[str, ...]] = {
    "profile": ("visits", "incl_ns", "excl_ns", "min_ns", "max_ns", "sumsq_ns", "recursive"),
    "step": ("duration_ns", "data_wait_ns", "comm_ns", "gpu_ns", "weight"),
    "epoch": ("duration_ns", "data_wait_ns", "comm_ns", "gpu_ns"),
    "comm": ("bytes", "calls", "time_ns", "gpu_ns", "group_size"),
    "gpu": ("samples", "gpu_ns"),
    "iterations": ("count",),
}
_PROFILE_SUMS = ("visits", "incl_ns", "excl_ns", "sumsq_ns", "recursive")


@dataclass
class ValueCheck:
    """What `check_values` found in one file."""

    warnings: list[str] = field(default_factory=list)
    undefined: dict[int, int] = field(default_factory=dict)  # undefined region id -> first line using it
    # call paths (region ids) whose totals miss a profile record that was left out: unknown on this
    # rank, neither a value nor 0
    unknown_paths: set[tuple[int, ...]] = field(default_factory=set)
    # left-out comm records (their call path and operation are unknown on this rank) and the region
    # ids of left-out gpu records
    unknown_comms: list[dict[str, Any]] = field(default_factory=list)
    unknown_gpu: set[int] = field(default_factory=set)
    # the first left-out record whose loss cannot be pinned on call paths: (line, what it was)
    lost: tuple[int, str] | None = None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ids(rtype: str, rec: dict[str, Any]) -> list[int]:
    """The region ids a record refers to."""
    if rtype == "profile":
        ref = rec.get("path")
    elif rtype == "comm":
        ref = rec.get("callpath")
    else:
        ref = [rec.get("region")]
    if not isinstance(ref, (list, tuple)):
        return []
    return [int(x) for x in ref if _number(x) and float(x).is_integer()]


def _negative(rtype: str, rec: dict[str, Any]) -> str | None:
    """Why the record's values cannot be right, or None."""
    bad = [f"{k}={rec[k]}" for k in _NON_NEGATIVE.get(rtype, ()) if _number(rec.get(k)) and rec[k] < 0]
    mem = rec.get("memory")
    if isinstance(mem, dict):
        bad += [f"memory.{k}={v}" for k, v in mem.items() if "bytes" in str(k) and _number(v) and v < 0]
    return f"negative {', '.join(bad)}" if bad else None


def _undefined_ids(run: Run) -> set[int]:
    """Ids used by the parsed run that have no region record."""
    used: set[int] = {r for path in run.profile for r in path}
    used.update(run.gpu_regions, run.throttled, run.iterations)
    for rec in (*run.steps, *run.epochs):
        used.update(_ids("step", rec))
    for rec in run.comms:
        used.update(_ids("comm", rec))
    return used - set(run.regions)


def _records(path: Path, raw: bytes, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of the lines `read_run` applied: lines it reported are left alone."""
    reported = {p[len(f"{path}:"):].split(":", 1)[0] for p in problems if p.startswith(f"{path}:")}
    lines = raw.split(b"\n")
    for lineno, line in enumerate(lines, 1):
        if lineno == 1 or not line.strip() or str(lineno) in reported:
            continue
        if lineno == len(lines) and not raw.endswith(b"\n"):
            continue  # the cut-off last line, reported by read_run
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("type"), str):
            yield lineno, rec


def check_values(path: Path, run: Run) -> ValueCheck:
    """Report impossible values of `run` (read from `path`) with their lines and take those records
    back out of `run`; list the region ids it uses without defining them, and the totals that the
    records left out (by read_run or here) took from."""
    out = _check_values(path, run)
    n_lost = len(out.unknown_paths) + len(out.unknown_comms) + len(out.unknown_gpu)
    if n_lost and not out.lost and not out.undefined:
        out.warnings.append(
            f"{path}: {n_lost} left-out record(s) held part of a total (time, visits, communication or GPU "
            f"time): this run gives those call paths no value for it (neither a value nor 0)"
        )
    return out


def _check_values(path: Path, run: Run) -> ValueCheck:
    out = ValueCheck()
    undefined = _undefined_ids(run)
    try:
        raw = path.read_bytes()
    except OSError:
        return out  # read_run has just read it; a file gone since keeps what was read
    if run.dropped_lines:
        _note_dropped(raw, run.dropped_lines, out)
    if not undefined and not _has_negative(raw, raw.find(b"\n") + 1):
        return out
    counts: dict[int, int] = {}
    for lineno, rec in _records(path, raw, run.problems):
        rtype = rec["type"]
        missing = [r for r in _ids(rtype, rec) if r in undefined]
        for rid in missing:
            out.undefined.setdefault(rid, lineno)
            counts[rid] = counts.get(rid, 0) + 1
        why = _negative(rtype, rec)
        if why and not missing:
            out.warnings.append(f"{path}:{lineno}: impossible {rtype!r} record: {why}; record skipped")
            _take_back(run, rtype, rec)
            _note_loss(lineno, rec, out)
    for rid, lineno in sorted(out.undefined.items(), key=lambda kv: kv[1]):
        out.warnings.append(
            f"{path}:{lineno}: region id {rid} is not defined in this file (its region record is missing or "
            f"was bad), yet {counts[rid]} record(s) use it"
        )
    for rid in undefined - set(out.undefined):
        out.undefined[rid] = 0  # seen in the parsed run only (a line read_run reported is its source)
        out.warnings.append(f"{path}: region id {rid} is not defined in this file, yet records use it")
    return out


# records that add up into totals the modeler uses: one left out makes them short. Steps and epochs
# are samples of a median (one fewer changes little), iteration counts are not modeled, regions are
# checked as undefined ids when used.
_ADDITIVE = ("profile", "comm", "gpu")


def _note_loss(lineno: int, rec: Any, out: ValueCheck) -> None:
    """Record what leaving out `rec` (None: its line could not be read) takes from the totals: the
    keys it adds to become unknown on this rank, or, where they cannot be told, the file is `lost`."""
    rtype = rec.get("type") if isinstance(rec, dict) else None
    if not isinstance(rtype, str):  # (a type that is an object: what it held cannot be told, review 57 F1)
        rtype = None
    if rtype is not None and rtype not in _ADDITIVE:
        return
    if rtype == "profile":
        if rec.get("path") == []:  # a call path of no region: no call path's totals miss it
            return
        ids = _ids("profile", rec)
        if ids and len(ids) == len(rec.get("path") or ()):
            out.unknown_paths.add(tuple(ids))
            return
    elif rtype == "comm":
        if isinstance(rec.get("op"), str) and _ids("comm", rec):
            out.unknown_comms.append(rec)
            return
    elif rtype == "gpu":
        ids = _ids("gpu", rec)
        if ids:
            out.unknown_gpu.add(ids[0])
            return
    if out.lost is None:
        out.lost = (lineno, f"a {rtype!r} record" if rtype else "a line that is not a record")


def _note_dropped(raw: bytes, linenos: list[int], out: ValueCheck) -> None:
    """The lines `read_run` left out, read leniently (NaN allowed) to tell what they held."""
    lines = raw.split(b"\n")
    for lineno in linenos:
        line = lines[lineno - 1] if lineno <= len(lines) else b""
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            rec = _salvage(line)
        _note_loss(lineno, rec, out)


_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]+)"')
_PATH = re.compile(rb'"path"\s*:\s*\[([0-9,\s]+)\]')


def _salvage(line: bytes) -> dict[str, Any] | None:
    """What a line that is not JSON still says: its record type and a profile record's path."""
    t = _TYPE.search(line)
    if t is None:
        return None
    rec: dict[str, Any] = {"type": t.group(1).decode()}
    path = _PATH.search(line)
    if path is not None:
        rec["path"] = [int(x) for x in path.group(1).split(b",") if x.strip()]
    return rec


def _take_back(run: Run, rtype: str, rec: dict[str, Any]) -> None:
    """Undo what `read_run` did with `rec`: deltas are subtracted, listed records removed."""
    if rtype == "profile":
        key = tuple(int(x) for x in rec.get("path", ()))
        st = run.profile.get(key)
        if st is None:
            return
        for k in _PROFILE_SUMS:
            if _number(rec.get(k)):
                setattr(st, k, getattr(st, k) - rec[k])
        # min and max of the other deltas are gone: keep what is possible
        st.min_ns, st.max_ns = max(st.min_ns, 0), max(st.max_ns, 0)
        if st.visits <= 0 and st.incl_ns <= 0:
            del run.profile[key]
    elif rtype in ("step", "epoch", "comm"):
        entries = {"step": run.steps, "epoch": run.epochs, "comm": run.comms}[rtype]
        entries[:] = [e for e in entries if _negative(rtype, e) is None]
    elif rtype == "gpu":
        g = run.gpu_regions.get(int(rec.get("region", -1)))
        if g is not None:
            for k in ("samples", "gpu_ns"):
                g[k] -= int(rec[k]) if _number(rec.get(k)) else 0
    elif rtype == "iterations":
        rid = int(rec.get("region", -1))
        if rid in run.iterations and _number(rec.get("count")):
            run.iterations[rid] -= int(rec["count"])

