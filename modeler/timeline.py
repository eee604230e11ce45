"""`modeler timeline RUN -o trace.json`: one run as a Chrome trace (opens in Perfetto and chrome://tracing).

One process per rank (DataLoader workers as processes of their own, next to their rank; the images
of a process that replaced itself with os.exec* one after the other in it), with
threads for epochs, steps (the data wait drawn inside each step, where it happens: at the start of
the iteration), and, for runs recorded with `SCALEPROBE_TRACE=1`, one thread per recorded thread
with every region visit as a slice. Ranks are aligned on wall-clock time from each file's header
(`start_unix` taken at `start_ns`), so on one host the ranks line up to the clock's precision.
A run thinned by SCALEPROBE_STEP_RECORDS has its written steps drawn as they are (gaps between
them), each with its `weight` among its args.

What the trace cannot show is said on stderr (also with `-o -`, whose stdout carries only the JSON)
and in `otherData`: ranks that ended without an end record or with a failure (also in the process's
name), lines of the run files that were cut off or malformed, region events dropped, unmatched
(SCALEPROBE_SCHEDULE) or throttled (review 74).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from runtime.runfile import is_helper_process

from .commands.inputs import output_arg, refuse_output_among_inputs
from .errors import InputError
from .listing import listing
from .replace_file import replacing, why_not_written
from .runchoice import RunEntry, find_run, listed

TID_EPOCHS, TID_STEPS, TID_REGIONS = 1, 2, 10
#: tracks of more lanes of epochs and steps (threads of their own, loops that overlap), and where the
#: recorded threads' tracks are placed: after every epoch and step track
TID_MORE_LOOPS, SORT_REGIONS = 1_000_000, 100_000


@dataclass
class _File:
    run: Any
    rank: int
    worker: bool
    offset_ns: int = 0  # added to this process's clock: ns since the earliest file's start
    #: the process that started the ranks (torch.multiprocessing.spawn): no rank (`readers.runs.starters`)
    starter: bool = False
    #: the process it is an image of (`readers.runs.process_images`): its number among them
    process: int = 0

    def wall(self) -> float | None:
        """Wall-clock seconds at which this process's clock read 0, or None without a header clock."""
        h = self.run.header
        start_unix, start_ns = h.get("start_unix"), h.get("start_ns")
        if isinstance(start_unix, (int, float)) and isinstance(start_ns, (int, float)):
            return float(start_unix) - float(start_ns) * 1e-9
        return None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="RUN", help="a run directory, or the rank files of one run")
    parser.add_argument("-o", "--output", metavar="FILE", default="trace.json", type=output_arg,
                        help="where to write the trace (default: trace.json; '-' for stdout)")
    parser.add_argument("--run", metavar="RUN_ID",
                        help="the run to draw when the inputs hold several: its id, directory or directory name")
    parser.add_argument("--ranks", metavar="LIST", help="only these ranks: 0,1,4-7")
    parser.add_argument("--window", metavar="FROM:TO",
                        help="only the slices that overlap this span, in seconds from the trace's start: 10:12, 30: "
                             "or :5 (with the slices around them)")
    parser.add_argument("--min-dur", metavar="SECONDS", default="0",
                        help="only region visits at least this long, 1e-4 or 100us (steps and epochs are kept)")


#: an output past this many bytes gets a warning: chrome://tracing loads JSON of up to about 256 MB
#: (catapult trace-viewer #627), the Perfetto UI a trace of about 2 GB of its memory
LARGE_TRACE_BYTES = 250_000_000


def _parse_window(text: str | None) -> tuple[float, float] | None:
    """`--window FROM:TO` in seconds (either end may be left out), as (from, to)."""
    if text is None:
        return None
    a, sep, b = text.partition(":")
    try:
        if not sep:
            raise ValueError
        lo = float(a) if a.strip() else 0.0
        hi = float(b) if b.strip() else float("inf")
    except ValueError:
        raise InputError(f"--window: expected FROM:TO in seconds from the trace's start (10:12, 30:, :5), "
                         f"got {text!r}") from None
    if not (lo >= 0 and hi > lo):
        raise InputError(f"--window: {text!r}: FROM must be at least 0 and TO above FROM")
    return lo, hi


_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _parse_duration(text: str, option: str) -> float:
    """`1e-4`, `100us`, `2ms`, `0.5s` as seconds."""
    t = text.strip()
    unit = next((u for u in sorted(_UNITS, key=len, reverse=True) if t.endswith(u)), "s")
    number = t[: len(t) - len(unit)] if t.endswith(unit) else t
    try:
        v = float(number) * _UNITS[unit]
    except ValueError:
        raise InputError(f"{option}: expected a duration like 1e-4, 100us or 2ms, got {text!r}") from None
    if not v >= 0 or v == float("inf"):
        raise InputError(f"{option}: {text!r}: must be a finite duration of at least 0")
    return v


def _parse_ranks(text: str | None) -> set[int] | None:
    if text is None:
        return None
    if not text.strip(", "):  # review 40: `--ranks ""` wrote every rank
        raise InputError("--ranks: empty: give ranks and ranges like 0,1,4-7 (leave the option out for every rank)")
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                if int(b) < int(a):  # (review 101 L7: read as no rank at all)
                    raise InputError(f"--ranks: {part!r} is a range from {a} down to {b}: give it as {b}-{a}")
                out.update(range(int(a), int(b) + 1))
            elif part:
                out.add(int(part))
        except ValueError:
            raise InputError(f"--ranks: expected numbers and ranges like 0,1,4-7, got {part!r}") from None
    return out


#: what the warning of a rank file left out for having no header ends with (`_read`, `run`'s exit code)
_DIED_AT_START = "left out (a rank that died at start-up?)"


def _read(paths: Sequence[str], warnings: list[str] | None = None) -> list[Any]:
    """The run files under `paths`. An Extra-P export (`modeler export --extrap`) named on the
    command line is an error that says what it is; one found inside a directory is left out, with
    a warning in `warnings`. So is a rank file that has no header to read (empty, cut inside it,
    compressed, not a run file: a rank that died at start-up), where others are read (review 101
    M1: one such rank refused the whole run, its other ranks' data not drawn)."""
    from runtime.runfile import RunFileError, read_run

    from .readers import expand
    from .readers.unusable import COMPRESSED_SUFFIXES

    runs = []
    unread: list[RunFileError] = []
    for path, explicit in expand(paths):
        if not path.name.endswith(tuple(".jsonl" + c for c in ("", *COMPRESSED_SUFFIXES))):
            continue  # (a compressed run file: read_run names it: review 102 LOW-3)
        try:
            runs.append(read_run(path))
        except RunFileError as e:
            if _is_extrap_export(path):
                what = (f"{path} is an Extra-P export (modeler export --extrap: params, callpath, metric, value "
                        "per line), not a run file")
                if explicit or warnings is None:
                    raise InputError(f"{what}: a timeline is drawn from a run's rank files (runs/.../rank*.jsonl); "
                                     f"fit the export with `modeler fit {path}`") from e
                warnings.append(f"{what}: left out")
                continue
            if warnings is None:
                raise InputError(str(e)) from e
            unread.append(e)
    if unread and runs:
        warnings.extend(f"{e}: {_DIED_AT_START}" for e in unread)  # type: ignore[union-attr]
    elif unread:
        raise InputError(str(unread[0])) from unread[0]
    if not runs:
        raise InputError(f"no run files (*.jsonl) in {', '.join(paths)}")
    return runs


def _is_extrap_export(path: Path) -> bool:
    from .readers.extrap import sniff_extrap

    return sniff_extrap(path) == "extrap-jsonl"


def select_run(runs: Sequence[Any], run_id: str | None) -> list[Any]:
    """The files of one run: `run_id` (as `modeler fit` and `report` name runs, see
    `readers.runs.run_names`), or the only run there is."""
    from .readers.runs import run_names

    by_id: dict[str, list[Any]] = {}
    for r, name in zip(runs, run_names([r.header for r in runs], [getattr(r, "path", i) for i, r in enumerate(runs)])):
        by_id.setdefault(name, []).append(r)
    entries = [RunEntry(name, rs[0].header.get("params") or {}, rs[0].header.get("repetition"),
                        tuple(sorted({Path(r.path).parent for r in rs if getattr(r, "path", None) is not None})))
               for name, rs in sorted(by_id.items())]
    if run_id is not None:
        return by_id[find_run(entries, run_id).name]
    if len(by_id) > 1:
        raise InputError(f"the inputs hold {len(by_id)} runs ({listed(entries)}); choose one with --run")
    return next(iter(by_id.values()))


def _events_of(run: Any) -> Iterable[tuple[int, int, int, int]]:
    """Per-visit events as (region id, thread, start_ns, end_ns), in whatever shape the reader keeps
    them: dicts with region/start_ns/end_ns (or duration_ns)/tid, or (rid, start, end[, tid]) tuples."""
    for ev in getattr(run, "events", None) or ():
        if isinstance(ev, dict):
            rid = ev.get("region", ev.get("rid"))
            start = ev.get("start_ns")
            end = ev.get("end_ns")
            if end is None and ev.get("duration_ns") is not None and start is not None:
                end = start + ev["duration_ns"]
            tid = ev.get("tid", ev.get("thread", 0))
        else:
            rid, start, end, *rest = ev
            tid = rest[0] if rest else 0
        if rid is None or start is None or end is None:
            continue
        yield int(rid), int(tid or 0), int(start), int(end)


def build_trace(runs: Sequence[Any], ranks: set[int] | None = None, **cuts: Any) -> dict:
    """The Chrome trace-event JSON object for the files of one run (`cuts`: as `trace_parts`)."""
    events, meta, _ = trace_parts(runs, ranks, **cuts)
    return {"traceEvents": [json.loads(e) for e in events], "displayTimeUnit": "ms", "otherData": meta}


def _loop_lanes(recs: Sequence[dict]) -> list[tuple[tuple, list[dict]]]:
    """Epoch or step records split into lanes whose slices nest, each keyed by (its thread, its
    number among that thread's lanes): a record's thread is its `tid` (None in files written
    before records carried one). Within a thread a record goes to the first lane where it starts
    after the lane's open records end or lies inside the innermost one still open (review 90 F2:
    step loops of two threads at once crossed on one track, and Perfetto drops crossing slices)."""
    by_thread: dict[Any, list[dict]] = {}
    for r in recs:
        tid = r.get("tid")
        by_thread.setdefault(tid if isinstance(tid, int) and not isinstance(tid, bool) else None, []).append(r)
    out: list[tuple[tuple, list[dict]]] = []
    for thread, rs in by_thread.items():
        lanes: list[tuple[list[dict], list[int]]] = []  # its records, the ends of those still open
        for r in sorted(rs, key=lambda r: (int(r["start_ns"]), -int(r.get("duration_ns") or 0))):
            start = int(r["start_ns"])
            end = start + int(r.get("duration_ns") or 0)
            for members, open_ends in lanes:
                while open_ends and open_ends[-1] <= start:
                    open_ends.pop()
                if not open_ends or end <= open_ends[-1]:
                    open_ends.append(end)
                    members.append(r)
                    break
            else:
                lanes.append(([r], [end]))
        out.extend(((thread, k), members) for k, (members, _) in enumerate(lanes))
    return out


def _name_loop_tracks(add: Any, tracks: dict[tuple[int, str, tuple], int], main_of: dict[int, Any],
                      thread_names: dict[int, dict[int, str]]) -> None:
    """Names and places the epoch and step tracks: `epochs` and `steps` where a process has one of
    each kind; else `steps (wk0)` per thread (`steps (main thread)`), and `steps 2` for a second
    lane of one thread. Epochs first, then steps, each kind in the order its lanes began."""
    per_kind: dict[tuple[int, str], list[tuple]] = {}
    for pid, kind, lane in tracks:
        per_kind.setdefault((pid, kind), []).append(lane)
    place: dict[int, int] = {}
    for (pid, kind), lanes in sorted(per_kind.items(), key=lambda kv: (kv[0][0], kv[0][1] != "epoch")):
        threads = {thread for thread, _ in lanes}
        for thread, k in lanes:
            name = kind + "s"
            if len(threads) > 1 and thread is not None:
                who = ("main thread" if thread == main_of.get(pid)
                       else thread_names.get(pid, {}).get(thread) or f"thread {thread}")
                name += f" ({who})"
            if k:
                name += f" {k + 1}"
            tid = tracks[(pid, kind, (thread, k))]
            place[pid] = place.get(pid, 0) + 1
            add({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
            add({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": place[pid]}})


def trace_parts(runs: Sequence[Any], ranks: set[int] | None = None, *, window: tuple[float, float] | None = None,
                min_dur: float = 0.0) -> tuple[list[str], dict, int]:
    """The trace of `build_trace` as it is written: (its events, each as JSON text, in order; the
    `otherData` object; how many slices). Each event is held as its text, not as a dict, and the
    trace is written event by event (review 54 F5: 4.1M slices held 3.3 GB as dicts and one text).
    `window` (seconds from the trace's start): only the slices that overlap it; `min_dur`
    (seconds): only region slices at least that long (review 90 F5: a trace of millions of slices
    is past what the viewers load)."""
    from .readers.runs import images_share_their_role, process_images, spawned_by_rank, starters

    # as the readers take them (`readers.runs._group`): a process's images are one rank (or helper);
    # the process that started the ranks is none, and no rank's worker either
    images_share_their_role(runs)
    away = {id(r) for r in starters(runs)}
    ranked = [r for r in runs if id(r) not in away]
    spawned = {id(r): s for r, s in zip(ranked, spawned_by_rank([r.header for r in ranked]))}
    files, there = [], set()
    for n, images in enumerate(process_images(runs)):
        h = images[0].header
        rank = int(h.get("rank") or 0)
        there.add(rank)
        if ranks is not None and rank not in ranks:
            continue
        starter = id(images[0]) in away
        worker = not starter and (is_helper_process(h) or spawned.get(id(images[0]), False))
        files.extend(_File(r, rank, worker, starter=starter, process=n) for r in images)
    if not files:
        raise InputError(f"--ranks: none of the selected ranks is in the run; it has {listing([str(r) for r in sorted(there)], 16, 'more ranks')}")
    order = {id(f.run): i for i, f in enumerate(files)}  # a process's images in the order they ran
    files.sort(key=lambda f: (not f.starter, f.rank, f.worker, int(f.run.header.get("pid") or 0), f.process,
                              order[id(f.run)]))

    # A unix time in float seconds resolves only ~0.2 us: align the files once, then stay in
    # integer ns so that a slice ending where the next one starts never overlaps it.
    # how each process ended (review 74 F2), in the words of `report` and `fit` (readers.runjudge);
    # the last image of a process (os.exec*) says how it ended
    endings = {id(f.run): _ending(f) for f in files}
    ending_of: dict[int, str | None] = {}
    for f in files:
        if endings[id(f.run)] is not None or f.process not in ending_of:
            ending_of[f.process] = endings[id(f.run)]
    problems, incomplete = _file_problems(files, endings)

    walls = [w for w in (f.wall() for f in files) if w is not None]
    ref = min(walls) if walls else 0.0
    for f in files:
        w = f.wall()
        f.offset_ns = 0 if w is None else int(round((w - ref) * 1e9))
    starts = []
    first: dict[tuple[int, int], int] = {}  # (process, recorded thread) -> its first visit's start
    for f in files:
        for rec in list(f.run.steps) + list(f.run.epochs):
            if isinstance(rec.get("start_ns"), (int, float)):
                starts.append(int(rec["start_ns"]) + f.offset_ns)
        for _rid, thread, start, _end in _events_of(f.run):
            start += f.offset_ns
            starts.append(start)
            if start < first.get((f.process, thread), start + 1):
                first[f.process, thread] = start
    origin = min(starts) if starts else 0

    def us(f: _File, t_ns: float) -> float:
        return round((int(t_ns) + f.offset_ns - origin) / 1e3, 3)

    def span(f: _File, start_ns: float, dur_ns: float) -> dict:
        ts = us(f, start_ns)
        return {"ts": ts, "dur": round(us(f, int(start_ns) + int(dur_ns)) - ts, 3)}

    items: list[tuple[tuple, str]] = []  # (order, the event's JSON text)
    slices = 0
    below_min = outside = 0
    # an open end (`30:`) is infinite: kept as a float, never made an int (review 93 HIGH-1: OverflowError)
    window_ns = None if window is None else (window[0] * 1e9, window[1] * 1e9)
    min_dur_ns = int(round(min_dur * 1e9))

    def keep(f: _File, start_ns: float, dur_ns: float) -> bool:
        """Whether a slice overlaps `--window` (a slice around a kept one overlaps it too, so the
        nesting stays whole); the others are counted."""
        nonlocal outside
        if window_ns is None:
            return True
        a = int(start_ns) + f.offset_ns - origin
        if a + int(dur_ns) < window_ns[0] or a > window_ns[1]:
            outside += 1
            return False
        return True

    loop_tracks: dict[tuple[int, str, tuple], int] = {}  # (pid, kind, lane) -> its track

    def loop_tid(pid: int, kind: str, lane: tuple) -> int:
        """The track of a lane of epochs or steps: the first of each kind in a process on
        TID_EPOCHS or TID_STEPS, named `epochs`/`steps` while it is the only one."""
        key = (pid, kind, lane)
        if key not in loop_tracks:
            first = not any(k[:2] == (pid, kind) for k in loop_tracks)
            loop_tracks[key] = (TID_EPOCHS if kind == "epoch" else TID_STEPS) if first else TID_MORE_LOOPS + len(loop_tracks)
        return loop_tracks[key]

    def add(e: dict) -> None:
        """An event, kept as its place in the order and its text."""
        nonlocal slices
        slices += e["ph"] == "X"
        # parents before children where they start together: some importers nest by order
        items.append(((e["ph"] != "M", e["pid"], e.get("tid", 0), e.get("ts", 0.0), -e.get("dur", 0.0)),
                      _dumps(e)))

    traced = False
    pids: dict[int, int] = {}  # process number -> its pid in the trace
    threads_of: dict[int, dict[int, int]] = {}  # per pid: recorded thread -> its track
    process_of: dict[int, int] = {}  # pid in the trace -> process number
    main_of: dict[int, Any] = {}  # per pid: the main thread's id (the process's own pid)
    thread_names: dict[int, dict[int, str]] = {}  # per pid: recorded thread -> its Python name
    for f in files:
        h = f.run.header
        new_process = f.process not in pids
        # Perfetto draws processes by pid; keep ranks in order and workers next to them; the images of
        # one process (os.exec*) in one, each on its own clock's offset
        pid = pids.setdefault(f.process, len(pids) + 1)
        if new_process:
            label = "the ranks' starter" if f.starter else f"rank {f.rank}" + (" worker" if f.worker else "")
            ending = ending_of.get(f.process)
            add({"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                           "args": {"name": f"{label} ({h.get('host', '?')}, pid {h.get('pid', '?')})"
                                            + (f" \u2014 {ending}" if ending else "")}})
            add({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}})
        names = {rid: reg.name for rid, reg in f.run.regions.items()}
        kinds = {rid: reg.kind for rid, reg in f.run.regions.items()}
        threads = threads_of.setdefault(pid, {})
        process_of[pid] = f.process
        main_thread = main_of.setdefault(pid, h.get("pid"))
        names_here = getattr(f.run, "threads", None)
        if isinstance(names_here, dict):
            thread_names.setdefault(pid, {}).update(names_here)
        for kind, recs in (("epoch", f.run.epochs), ("step", f.run.steps)):
            timed = [r for r in recs if isinstance(r.get("start_ns"), (int, float))]
            for lane_key, lane in _loop_lanes(timed):
                tid = loop_tid(pid, kind, lane_key)
                for r in lane:
                    dur = float(r.get("duration_ns") or 0)
                    if not keep(f, r["start_ns"], dur):
                        continue
                    args = {k: r[k] for k in ("index", "step", "active", "data_wait_ns", "comm_ns", "gpu_ns", "weight")
                            if r.get(k) is not None}
                    if isinstance(r.get("memory"), dict):
                        args.update({f"memory.{k}": v for k, v in r["memory"].items()})
                    add({
                        # a step outside a schedule's active window (review 90 F3): a category of its own
                        "ph": "X", "pid": pid, "tid": tid, "cat": kind + (",inactive" if r.get("active") is False else ""),
                        "name": f"{kind} {r.get('index', '')} ({names.get(r.get('region'), r.get('region'))})",
                        **span(f, r["start_ns"], dur), "args": args,
                    })
                    wait = r.get("data_wait_ns")
                    if kind == "step" and isinstance(wait, (int, float)) and 0 < wait <= dur:
                        add({"ph": "X", "pid": pid, "tid": tid, "cat": "data_wait", "name": "data wait",
                             **span(f, r["start_ns"], wait)})
        for rid, thread, start, end in _events_of(f.run):
            traced = True
            if end - start < min_dur_ns:
                below_min += 1
                continue
            if not keep(f, start, end - start):
                continue
            tid = threads.get(thread)
            if tid is None:  # the main thread's track first, the others' after it
                tid = threads[thread] = (TID_REGIONS if thread == main_thread
                                         else TID_REGIONS + 1 + sum(t != main_thread for t in threads))
            add({
                "ph": "X", "pid": pid, "tid": tid, "cat": kinds.get(rid, "region"),
                "name": names.get(rid, f"region {rid}"), **span(f, start, end - start),
            })
    _name_loop_tracks(add, loop_tracks, main_of, thread_names)
    for pid, threads in threads_of.items():
        # named once per thread (review 74 F6): the main thread (its id is the process's pid) by that,
        # the others by their Python names where the run file has them; the main thread's track
        # first, the others in the order they began
        main_thread, pynames = main_of.get(pid), thread_names.get(pid, {})
        n = process_of[pid]
        order = sorted(threads, key=lambda th: (th != main_thread, first.get((n, th), 0), th))
        for k, thread in enumerate(order):
            tid = threads[thread]
            if thread == main_thread:
                name = f"main thread (tid {thread})"
            elif main_thread is None and len(threads) == 1:
                name = "main thread"
            elif pynames.get(thread):
                name = f"{pynames[thread]} (tid {thread})"
            else:
                name = f"thread {thread}"
            add({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
            add({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": SORT_REGIONS + k}})
    head = files[0].run.header
    traced_on = any(isinstance(f.run.header.get("trace"), dict) for f in files)
    if not slices:
        paths = [str(f.run.path) for f in files if getattr(f.run, "path", None) is not None]
        where = f" ({listing(paths, 3, 'more files')})" if paths else ""
        if below_min or outside:
            why = (f"every slice is outside --window or shorter than --min-dur ({outside + below_min} left out); "
                   "widen them")
        elif traced_on:
            # review 90 F4: the advice to record with SCALEPROBE_TRACE=1 went to a run recorded so;
            # review 93 MED-1: not every such run lost its events: one may have visited no region
            why = "it was recorded with SCALEPROBE_TRACE=1 " + _untraced_why(files, bool(incomplete or problems))
        else:
            why = "record it with SCALEPROBE_TRACE=1 for region events, or instrument a program with a training loop"
        raise InputError(
            f"run {head.get('run_id')}{where} has no timed steps, epochs or region events to draw: {why}",
            warnings=_warnings({"problems": problems, "incomplete_ranks": incomplete}),
        )
    items.sort(key=lambda it: it[0])
    dropped = sum(_count(f.run, "trace_dropped") for f in files)
    unmatched = sum(_count(f.run, "trace_unmatched") for f in files)
    thinned = sum(_thinned(f.run) for f in files)
    throttled = sorted({f.run.regions[rid].name if rid in f.run.regions else f"region {rid}"
                        for f in files for rid in (getattr(f.run, "throttled", None) or {})}) if traced else []
    meta = {"run_id": head.get("run_id"), "experiment": head.get("experiment"), "params": head.get("params"),
            "world_size": head.get("world_size"), "region_events": traced, "events_dropped": dropped,
            "events_unmatched": unmatched, "throttled_regions": throttled,
            "steps_thinned": thinned, "incomplete_ranks": incomplete, "problems": problems,
            "traced": traced_on, "origin_unix": ref + origin * 1e-9 if walls else None,
            "left_out": {"outside_window": outside, "below_min_dur": below_min}}
    return [text for _, text in items], meta, slices


def _untraced_why(files: Sequence[_File], cut: bool) -> str:
    """Why a run recorded with SCALEPROBE_TRACE=1 has no region event, after "it was recorded with
    SCALEPROBE_TRACE=1 ": its events were lost (`cut`: a process without its end record, or a cut
    line), not kept (SCALEPROBE_TRACE_MAX, the probes switched off around them), or no region ran
    (review 94 MED-2: dropped and unmatched visits were called "no timed region ran")."""
    if cut:
        return ("but its events were lost: a process ended before its first flush (SCALEPROBE_FLUSH_INTERVAL), "
                "or the line that held them was cut")
    dropped = sum(_count(f.run, "trace_dropped") for f in files)
    unmatched = sum(_count(f.run, "trace_unmatched") for f in files)
    if dropped or unmatched:
        said = [f"{dropped} dropped at SCALEPROBE_TRACE_MAX" if dropped else "",
                f"{unmatched} open while the probes were switched off" if unmatched else ""]
        return f"but none of its region visits was kept ({' and '.join(x for x in said if x)})"
    return "and ended as it should, with no region visit recorded (no timed region ran)"


def _count(run: Any, key: str) -> int:
    n = (run.end or {}).get(key)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _ending(f: _File) -> str | None:
    """How the file's process ended, when not as it should (`readers.runjudge` words it: no end
    record, a failure's status, exit code, exception, signal, or flushes lost); None when ok or
    when it replaced itself (os.exec*: its next image goes on)."""
    from .readers.runjudge import _by_launcher, _detail

    end = f.run.end
    if isinstance(end, dict) and not end.get("lost_flushes"):
        code = end.get("exit_code")
        if end.get("status") == "exec" or (end.get("status", "ok") == "ok"
                                            and not (isinstance(code, int) and code != 0)):
            return None
    return _detail(f) + (" (the launcher's SIGTERM?)" if _by_launcher(f) else "")


def _file_problems(files: Sequence[_File], endings: dict[int, str | None]) -> tuple[list[str], list[dict]]:
    """The run files' cut-off and malformed lines (`Run.problems`, as `read_run` words them), and
    the processes that did not end as they should."""
    problems: list[str] = []
    incomplete: list[dict] = []
    for f in files:
        ending = endings[id(f.run)]
        for msg in getattr(f.run, "problems", None) or ():
            # said by the ending instead (runjudge's words)
            if "no end record" in msg or (ending is not None and "flush(es) could not be written" in msg):
                continue
            problems.append(msg)
        if ending is None:
            continue
        end = f.run.end if isinstance(f.run.end, dict) else None
        incomplete.append({
            "rank": f.rank, "worker": f.worker, "starter": f.starter,
            "file": str(f.run.path) if getattr(f.run, "path", None) is not None else None,
            "pid": f.run.header.get("pid"), "status": end.get("status") if end else None,
            "end_record": end is not None, "why": ending,
        })
    return problems, incomplete


def _warnings(meta: dict) -> list[str]:
    """What stderr says before the trace is written: the run files' problems, then the ranks (and
    the ranks' starter) that did not end as they should. A worker's ending is in its process name
    only: its rank often ends it (runjudge)."""
    out = list(meta.get("problems") or ())
    for d in meta.get("incomplete_ranks") or ():
        if d["worker"]:
            continue
        who = "the ranks' starter" if d["starter"] else f"rank {d['rank']}"
        where = f"{d['file']}: " if d["file"] else ""
        text = f"{where}{who} {d['why']}"
        if not d["end_record"]:
            text += ": its timeline ends at its last flush, without the regions open then"
        out.append(text)
    return out


def _thinned(run: Any) -> int:
    """Steps the process measured but did not write (the end record's `steps_thinned`)."""
    counts = (run.end or {}).get("steps_thinned")
    if not isinstance(counts, dict):
        return 0
    return sum(int(n) for n in counts.values() if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0)


def run(args: argparse.Namespace) -> int:
    read_warnings: list[str] = []
    try:
        found = _read(args.inputs, read_warnings)
        refuse_output_among_inputs("-o", args.output, [r.path for r in found])
        runs = select_run(found, args.run)
        cuts = {"window": _parse_window(getattr(args, "window", None)),
                "min_dur": _parse_duration(getattr(args, "min_dur", "0"), "--min-dur")}
        events, meta, n = trace_parts(runs, _parse_ranks(args.ranks), **cuts)
    except InputError as e:
        e.warnings[:0] = read_warnings
        raise
    left_out = any(w.endswith(_DIED_AT_START) for w in read_warnings)
    # on stderr with `-o -` too (review 74 F5): stdout carries only the JSON
    for w in read_warnings + _warnings(meta):
        print(f"modeler: warning: {w}", file=sys.stderr)
    if args.output == "-":
        size = _write_trace(sys.stdout, events, meta)
        sys.stdout.flush()
        where = "stdout"
    else:
        out = Path(args.output)
        try:
            with replacing(out) as stream:  # whole or not at all: a failed write keeps the old trace
                size = _write_trace(stream, events, meta)
        except OSError as e:
            raise InputError(f"-o: cannot write {out}: {why_not_written(e)}") from e
        where = str(out.resolve())
    print(f"timeline of run {meta['run_id']}: {n} slices written to {where}{_notes(meta)}; "
          f"open it in https://ui.perfetto.dev or chrome://tracing", file=sys.stderr)
    if size > LARGE_TRACE_BYTES:
        print(f"modeler: warning: the trace is {size / 1e6:.0f} MB: chrome://tracing loads up to about 256 MB and "
              "the Perfetto UI slows past a few hundred; keep less with --window, --min-dur or --ranks, or open it "
              "with Perfetto's trace_processor --httpd (docs/report.md)", file=sys.stderr)
    return 3 if left_out else 0  # a file left out, as `modeler fit` says it


def _notes(meta: dict) -> str:
    """What the trace leaves out by design, said after the summary line."""
    if meta["region_events"]:
        note = ""
    elif not meta.get("traced"):
        note = " (steps and epochs only: record with SCALEPROBE_TRACE=1 for every region visit)"
    elif meta["events_dropped"] or meta.get("events_unmatched"):
        note = " (steps and epochs only: recorded with SCALEPROBE_TRACE=1, but no region visit was kept, as follows)"
    else:
        note = " (steps and epochs only: recorded with SCALEPROBE_TRACE=1, but no region visit was recorded)"
    if meta["events_dropped"]:
        note += (f" ({meta['events_dropped']} region events were dropped while recording: raise "
                 f"SCALEPROBE_TRACE_MAX or trace a shorter run; the events kept are the first of each flush "
                 f"interval with the regions open around them)")
    if meta.get("events_unmatched"):
        note += (f" ({meta['events_unmatched']} region visits open while the probes were switched off "
                 f"(SCALEPROBE_SCHEDULE, set_enabled) are not drawn: their exits could not be told from later calls)")
    if meta.get("throttled_regions"):
        names = meta["throttled_regions"]
        note += (f" ({len(names)} region(s) throttled while recording ({listing(names, 3)}): their visits after "
                 f"that are not drawn; SCALEPROBE_THROTTLE_CALLS=0 keeps timing them)")
    left = meta.get("left_out") or {}
    said = [f"{left['outside_window']} slices outside --window" if left.get("outside_window") else "",
            f"{left['below_min_dur']} region visits shorter than --min-dur" if left.get("below_min_dur") else ""]
    if any(said):  # (only the cut asked for: review 95 LOW-4)
        note += f" ({' and '.join(x for x in said if x)} left out)"
    if meta["steps_thinned"]:
        note += (f" ({meta['steps_thinned']} steps were measured but not written (SCALEPROBE_STEP_RECORDS): "
                 f"the steps drawn thin out along the run, each standing for its block of steps, its weight)")
    return note


def _event_text() -> Any:
    """An event as compact JSON text: orjson's where installed (a dependency; the standard
    library's is a third of the time of a timeline of many slices), else the standard one's."""
    try:
        from orjson import dumps

        return lambda e: dumps(e).decode()
    except ImportError:  # pragma: no cover - installed with scaleprobe
        return lambda e: json.dumps(e, separators=(",", ":"))


_dumps = _event_text()


def _write_trace(stream: Any, events: Sequence[str], meta: dict) -> int:
    """`build_trace`'s object as JSON text, as `json.dumps` writes it, an event at a time; returns
    its length in characters (bytes but for names beyond ASCII)."""
    size = len('{"traceEvents":[')
    stream.write('{"traceEvents":[')
    for i, text in enumerate(events):
        stream.write("," + text if i else text)
        size += len(text) + bool(i)
    tail = '],"displayTimeUnit":"ms","otherData":' + json.dumps(meta, separators=(",", ":")) + "}\n"
    stream.write(tail)
    return size + len(tail)
