"""Review 90: `modeler timeline`.

F2: step loops of two threads at once crossed on the one `steps` track (Perfetto drops crossing
    slices): a track per thread where records name it, and lanes whose slices nest.
F3: a step's `active` and `step` in its arguments, and inactive steps in a category of their own.
F4: a run recorded with SCALEPROBE_TRACE=1 whose events were lost is not told to record with it.
F5: --window, --min-dur, and a warning for a trace past what the viewers load.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import pytest

from modeler import timeline as tl
from modeler.errors import InputError
from modeler.timeline import build_trace
from runtime.runfile import RunWriter, read_run, run_file_name

REGIONS = [{"type": "region", "id": 1, "kind": "function", "name": "main", "file": "t.py", "line": 1},
           {"type": "region", "id": 2, "kind": "function", "name": "work", "file": "t.py", "line": 5},
           {"type": "region", "id": 3, "kind": "step", "name": "loop:for@3", "file": "t.py", "line": 3}]
OK = {"type": "end", "status": "ok", "exit_code": 0}
PID = 100


def write(d: Path, records: list, header: dict | None = None, end: dict | None = OK) -> Path:
    h = {"run_id": "r90", "params": {}, "rank": 0, "world_size": 1, "host": "h", "pid": PID,
         "start_unix": 1000.0, "start_ns": 0, **(header or {})}
    path = d / run_file_name(0, PID)
    with RunWriter(path) as w:
        w.write_header(h)
        w.write_records([*REGIONS, *records, *([end] if end else [])])
    return path


def step(i: int, start: int, dur: int, **more) -> dict:
    return {"type": "step", "region": 3, "index": i, "start_ns": start, "duration_ns": dur, "data_wait_ns": 100,
            **more}


def crossings(trace: dict) -> int:
    """Pairs of slices on one track that overlap without one holding the other."""
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    n = 0
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for a, b in spans:
            while stack and stack[-1] <= a:
                stack.pop()
            if stack and b > stack[-1]:
                n += 1
            stack.append(b)
    return n


def track_names(trace: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}


def two_threads(tid: bool) -> list[dict]:
    """Two threads each running 4 steps of 6 us, the second 3 us behind the first."""
    out = []
    for k, (t0, thread) in enumerate(((0, PID), (3000, 555))):
        for i in range(4):
            out.append(step(i, t0 + i * 6000, 6000, **({"tid": thread} if tid else {})))
    return out


@pytest.mark.parametrize("tid", [True, False])
def test_step_loops_of_two_threads_at_once_do_not_cross_on_one_track(tmp_path, tid):
    records = two_threads(tid)
    trace = build_trace([read_run(write(tmp_path, records, {"pid": PID}))])
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) == 8  # every step drawn
    assert crossings(trace) == 0
    names = sorted(track_names(trace).values())
    if tid:
        assert names == ["steps (main thread)", "steps (thread 555)"]
    else:
        assert names == ["steps", "steps 2"]


def test_the_tracks_take_the_threads_python_names(tmp_path):
    records = [*two_threads(True), {"type": "events", "flush": 1, "events": [[2, 10, 20, 555]],
                                    "threads": {"555": "loader"}}]
    trace = build_trace([read_run(write(tmp_path, records))])
    assert "steps (loader)" in track_names(trace).values()


def test_one_threads_nested_step_loops_stay_on_one_track(tmp_path):
    outer = [step(i, i * 10_000, 10_000, tid=PID) for i in range(2)]
    inner = [step(j, i * 10_000 + 1000 + j * 2000, 2000, tid=PID) for i in range(2) for j in range(3)]
    trace = build_trace([read_run(write(tmp_path, outer + inner))])
    assert list(track_names(trace).values()) == ["steps"] and crossings(trace) == 0


def test_a_steps_active_and_step_number_are_in_its_arguments(tmp_path):
    records = [step(0, 0, 1000, step=0, active=False), step(1, 1000, 1000, step=1, active=True)]
    trace = build_trace([read_run(write(tmp_path, records))])
    steps = sorted((e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"].startswith("step")),
                   key=lambda e: e["ts"])
    assert [e["args"]["active"] for e in steps] == [False, True]
    assert [e["args"]["step"] for e in steps] == [0, 1]
    assert [e["cat"] for e in steps] == ["step,inactive", "step"]


def test_a_traced_run_whose_events_were_lost_is_not_told_to_trace(tmp_path):
    run = read_run(write(tmp_path, [], {"trace": {"max": 1000000}}, end=None))  # killed before its first flush
    with pytest.raises(InputError, match="recorded with SCALEPROBE_TRACE=1 but its events were lost") as e:
        build_trace([run])
    assert "record it with SCALEPROBE_TRACE=1" not in str(e.value)
    # review 93 MED-1: one that ended as it should lost nothing: it visited no region
    done = read_run(write(tmp_path / "ok", [], {"trace": {"max": 1000000}}))
    with pytest.raises(InputError, match="recorded with SCALEPROBE_TRACE=1 and ended as it should, with no region "
                                         "visit recorded") as e:
        build_trace([done])
    assert "lost" not in str(e.value)
    untraced = read_run(write(tmp_path / "u", []))
    with pytest.raises(InputError, match="record it with SCALEPROBE_TRACE=1"):
        build_trace([untraced])


def visits(n: int) -> list[dict]:
    """`main` over 1 ms .. n ms, and n visits of `work`, one a ms: 100 us, 900 us alternately."""
    ev = [[1, 1_000_000, (n + 1) * 1_000_000, PID]]
    ev += [[2, (k + 1) * 1_000_000, (k + 1) * 1_000_000 + (100_000 if k % 2 else 900_000), PID] for k in range(n)]
    return [{"type": "events", "flush": 1, "events": ev}]


def region_slices(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "function"]


def test_window_keeps_the_slices_that_overlap_it_and_those_around_them(tmp_path):
    run = read_run(write(tmp_path, visits(10)))
    whole = build_trace([run])
    origin = min(e["ts"] for e in region_slices(whole))
    assert origin == 0
    cut = build_trace([run], window=(0.0035, 0.0055))  # seconds from the trace's start
    kept = region_slices(cut)
    # work k runs from k ms (900 us for even k, 100 us for odd): those of 4 and 5 ms reach into 3.5-5.5 ms
    assert sorted(e["ts"] for e in kept if e["name"] == "work") == [4000.0, 5000.0]
    assert any(e["name"] == "main" for e in kept)  # around them
    assert cut["otherData"]["left_out"]["outside_window"] == 11 - len(kept)
    assert crossings(cut) == 0


def test_min_dur_leaves_out_short_region_visits(tmp_path):
    run = read_run(write(tmp_path, visits(10)))
    trace = build_trace([run], min_dur=0.0005)
    work = [e for e in region_slices(trace) if e["name"] == "work"]
    assert len(work) == 5 and all(e["dur"] == 900.0 for e in work)
    assert trace["otherData"]["left_out"]["below_min_dur"] == 5


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    from modeler import cli

    try:
        rc = cli.main(["timeline", *argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, message", [
    (["--window", "5"], "--window: expected FROM:TO"),
    (["--window", "3:1"], "--window: '3:1': FROM must be at least 0 and TO above FROM"),
    (["--window", "a:b"], "--window: expected FROM:TO"),
    (["--min-dur", "fast"], "--min-dur: expected a duration like 1e-4, 100us or 2ms, got 'fast'"),
    (["--min-dur=-1ms"], "--min-dur: '-1ms': must be a finite duration of at least 0"),
])
def test_bad_cuts_are_named(tmp_path, capsys, argv, message):
    write(tmp_path, visits(4))
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", "-", *argv)
    assert rc == 1 and message in err  # an option's error (2: a malformed command line)


def test_cli_cuts_and_says_what_it_left_out(tmp_path, capsys):
    write(tmp_path, visits(10))
    rc, out, err = run_cli(capsys, str(tmp_path), "-o", "-", "--window", "0.0035:0.0055", "--min-dur", "500us")
    assert rc == 0
    trace = json.loads(out)
    assert sorted(e["ts"] for e in region_slices(trace) if e["name"] == "work") == [4000.0]  # 5 ms's is 100 us
    left = trace["otherData"]["left_out"]
    assert "slices outside --window" in err and f"{left['below_min_dur']} region visits shorter than --min-dur" in err


def test_a_trace_past_what_the_viewers_load_gets_a_warning(tmp_path, capsys, monkeypatch):
    write(tmp_path, visits(10))
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", str(tmp_path / "t.json"))
    assert rc == 0 and "chrome://tracing loads up to" not in err
    size = (tmp_path / "t.json").stat().st_size
    monkeypatch.setattr(tl, "LARGE_TRACE_BYTES", size - 1)
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", str(tmp_path / "t2.json"))
    assert rc == 0 and "chrome://tracing loads up to about 256 MB" in err and "--window" in err
    monkeypatch.setattr(tl, "LARGE_TRACE_BYTES", size)
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", str(tmp_path / "t3.json"))
    assert "chrome://tracing loads up to" not in err  # the size written is the file's


def test_a_window_with_an_open_end_keeps_everything_after_its_start(tmp_path, capsys):
    # review 93 HIGH-1: `--window 30:` (docs/report.md's example) raised OverflowError
    write(tmp_path, visits(10))
    for window in ("0.0035:", "0.0035:1e300"):
        rc, out, err = run_cli(capsys, str(tmp_path), "-o", "-", "--window", window)
        assert rc == 0, err
        work = sorted(e["ts"] for e in region_slices(json.loads(out)) if e["name"] == "work")
        assert work == [4000.0, 5000.0, 6000.0, 7000.0, 8000.0, 9000.0]


def test_a_traced_run_with_steps_but_no_region_visit_is_not_told_to_trace(tmp_path, capsys):
    write(tmp_path, [step(0, 0, 1000)], {"trace": {"max": 1000}})
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", "-")
    assert rc == 0 and "recorded with SCALEPROBE_TRACE=1, but no region visit was recorded" in err
    assert "record with SCALEPROBE_TRACE=1" not in err
