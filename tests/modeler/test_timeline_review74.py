"""Review 74: what `modeler timeline` says about what it cannot draw.

F2: ranks without an end record or with a failure, cut-off and malformed lines: warned on stderr,
    in the process's name and in `otherData`.
F5: the warnings and notes are on stderr with `-o -` too (stdout carries only the JSON).
F6: thread tracks named (the main thread, Python names), the main thread first.
F7: an Extra-P export, and a run with nothing to draw, named as what they are.
F1/F3: throttled regions and unmatched visits are said.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from modeler.errors import InputError
from modeler.timeline import build_trace, run as timeline_run
from runtime.runfile import RunWriter, read_run, run_file_name

REGIONS = [{"type": "region", "id": 1, "kind": "function", "name": "main", "file": "t.py", "line": 1},
           {"type": "region", "id": 2, "kind": "function", "name": "work", "file": "t.py", "line": 5},
           {"type": "region", "id": 3, "kind": "step", "name": "main:for@3", "file": "t.py", "line": 3},
           {"type": "region", "id": 4, "kind": "function", "name": "tiny", "file": "t.py", "line": 9}]


def write_rank(d: Path, rank: int, *, end: dict | None = None, events: list | None = None, extra: list | None = None,
               threads: dict | None = None, pid: int | None = None) -> Path:
    pid = pid or 100 + rank
    h = {"run_id": "r74", "params": {"ranks": 2}, "rank": rank, "world_size": 2, "host": "h", "pid": pid,
         "start_unix": 1000.0, "start_ns": 0}
    recs = list(REGIONS)
    recs.append({"type": "step", "region": 3, "index": 0, "start_ns": 1000, "duration_ns": 5000})
    ev = {"type": "events", "flush": 1, "events": events if events is not None else [[2, 1000, 2000, pid], [1, 500, 9000, pid]]}
    if threads is not None:
        ev["threads"] = threads
    recs.append(ev)
    recs.extend(extra or [])
    if end is not None:
        recs.append(end)
    path = d / run_file_name(rank, pid)
    with RunWriter(path) as w:
        w.write_header(h)
        w.write_records(recs)
    return path


OK = {"type": "end", "status": "ok", "exit_code": 0}


def timeline(capsys, *inputs, output: str = "-", ranks: str | None = None) -> tuple[int, str, str]:
    rc = timeline_run(argparse.Namespace(inputs=[str(i) for i in inputs], output=output, run=None, ranks=ranks))
    out, err = capsys.readouterr()
    return rc, out, err


def process_names(trace: dict) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}


# ----- F2 ------------------------------------------------------------------------------------------


def test_a_rank_without_end_record_and_a_signalled_rank_are_warned_and_named(tmp_path, capsys):
    f0 = write_rank(tmp_path, 0, end={"type": "end", "status": "signal", "exit_code": 143, "signal": 15})
    f1 = write_rank(tmp_path, 1)  # killed: no end record
    rc, out, err = timeline(capsys, tmp_path)
    assert rc == 0
    trace = json.loads(out)
    assert f"{f1}: rank 1 has no end record (killed, or still running): its timeline ends at its last flush" in err
    assert f"{f0}: rank 0 ended with status=signal, exit_code=143, signal=15 (the launcher's SIGTERM?)" in err
    names = process_names(trace)
    assert names[1].startswith("rank 0 (h, pid 100)") and "status=signal" in names[1]
    assert names[2].startswith("rank 1 (h, pid 101)") and "no end record" in names[2]
    inc = {d["rank"]: d for d in trace["otherData"]["incomplete_ranks"]}
    assert inc[0]["status"] == "signal" and inc[0]["end_record"] is True
    assert inc[1]["status"] is None and inc[1]["end_record"] is False and inc[1]["file"] == str(f1)


def test_cut_and_malformed_lines_are_warned(tmp_path, capsys):
    f = write_rank(tmp_path, 0, end=OK)
    lines = f.read_bytes().splitlines(keepends=True)
    lines.insert(3, b'{"type": "step", "region": 3,\n')  # garbage in the middle
    f.write_bytes(b"".join(lines) + b'{"type": "events", "flush": 9, "ev')  # and cut at the end
    rc, out, err = timeline(capsys, f)
    assert rc == 0
    assert f"{f}:4: not valid JSON" in err
    assert f"{f}:{len(lines) + 1}: incomplete last line" in err
    problems = json.loads(out)["otherData"]["problems"]
    assert any(":4: not valid JSON" in p for p in problems) and len(problems) == 2


def test_a_complete_run_gives_no_warning_and_plain_names(tmp_path, capsys):
    write_rank(tmp_path, 0, end=OK)
    write_rank(tmp_path, 1, end=OK)
    rc, out, err = timeline(capsys, tmp_path)
    assert rc == 0 and "warning" not in err
    trace = json.loads(out)
    assert process_names(trace) == {1: "rank 0 (h, pid 100)", 2: "rank 1 (h, pid 101)"}
    assert trace["otherData"]["incomplete_ranks"] == [] and trace["otherData"]["problems"] == []


# ----- F5 ------------------------------------------------------------------------------------------


def test_notes_and_warnings_go_to_stderr_with_stdout_output(tmp_path, capsys):
    write_rank(tmp_path, 0, end={**OK, "trace_dropped": 89})
    write_rank(tmp_path, 1)
    rc, out, err = timeline(capsys, tmp_path, output="-")
    assert rc == 0
    json.loads(out)  # only the JSON on stdout
    assert "89 region events were dropped" in err
    assert "rank 1 has no end record" in err
    # the same with a file
    rc, out2, err2 = timeline(capsys, tmp_path, output=str(tmp_path / "t.json"))
    assert out2 == "" and "89 region events were dropped" in err2 and "rank 1 has no end record" in err2


# ----- F1 / F3 notes -----------------------------------------------------------------------------


def test_throttled_regions_and_unmatched_visits_are_said(tmp_path, capsys):
    write_rank(tmp_path, 0, end={**OK, "trace_unmatched": 4},
               extra=[{"type": "throttled", "region": 4, "visits": 100001, "mean_ns": 500.0}])
    rc, out, err = timeline(capsys, tmp_path)
    meta = json.loads(out)["otherData"]
    assert meta["throttled_regions"] == ["tiny"] and meta["events_unmatched"] == 4
    assert "throttled while recording (tiny)" in err
    assert "4 region visits open while the probes were switched off" in err


# ----- F6 ------------------------------------------------------------------------------------------


def thread_meta(trace: dict, pid: int = 1) -> tuple[dict[int, str], dict[int, int]]:
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name" and e["pid"] == pid}
    order = {e["tid"]: e["args"]["sort_index"] for e in trace["traceEvents"]
             if e["name"] == "thread_sort_index" and e["pid"] == pid}
    return names, order


def test_thread_tracks_are_named_and_the_main_thread_comes_first(tmp_path):
    # the worker thread's first visit ends first (events are written in the order visits end)
    events = [[2, 600, 700, 555], [2, 1000, 2000, 100], [1, 500, 9000, 100], [2, 3000, 3500, 556]]
    f = write_rank(tmp_path, 0, end=OK, events=events, threads={"100": "MainThread", "555": "loader"})
    trace = build_trace([read_run(f)])
    names, order = thread_meta(trace)
    main = next(t for t, n in names.items() if n == "main thread (tid 100)")
    loader = next(t for t, n in names.items() if n == "loader (tid 555)")
    other = next(t for t, n in names.items() if n == "thread 556")  # no name recorded
    assert order[main] < order[loader] < order[other]
    assert main < loader and main < other
    mains = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "function" and e["tid"] == main]
    assert sorted(e["name"] for e in mains) == ["main", "work"]


def test_old_run_files_without_thread_names_still_draw(tmp_path):
    events = [[2, 600, 700, 555], [1, 500, 9000, 100]]
    trace = build_trace([read_run(write_rank(tmp_path, 0, end=OK, events=events))])
    names, order = thread_meta(trace)
    assert set(names.values()) >= {"main thread (tid 100)", "thread 555"}


# ----- F7 ------------------------------------------------------------------------------------------


def test_an_extrap_export_is_named_as_one(tmp_path, capsys):
    ex = tmp_path / "ex.jsonl"
    ex.write_text('{"params": {"ranks": 2}, "callpath": "main", "metric": "time", "value": [0.1, 0.09]}\n')
    with pytest.raises(InputError, match=r"ex\.jsonl is an Extra-P export \(modeler export --extrap"):
        timeline(capsys, ex)
    # beside the run files of a directory: left out, with a warning
    runs = tmp_path / "runs"
    runs.mkdir()
    write_rank(runs, 0, end=OK)
    (runs / "ex.jsonl").write_text(ex.read_text())
    rc, out, err = timeline(capsys, runs)
    assert rc == 0 and "is an Extra-P export" in err and "left out" in err


def test_a_run_with_nothing_to_draw_names_the_run_and_its_files(tmp_path, capsys):
    h = {"run_id": "nt1", "rank": 0, "world_size": 1, "host": "h", "pid": 7, "start_unix": 1.0, "start_ns": 0}
    f = tmp_path / run_file_name(0, 7)
    with RunWriter(f) as w:
        w.write_header(h)
        w.write_records([REGIONS[0], OK])
    with pytest.raises(InputError, match=r"run nt1 \(.*rank0\.7\.jsonl\) has no timed steps, epochs or region events"):
        timeline(capsys, tmp_path)
