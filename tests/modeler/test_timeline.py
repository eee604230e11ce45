"""`modeler timeline`: a run as Chrome trace events, one process per rank, aligned on wall-clock time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from modeler.errors import InputError
from modeler.timeline import _parse_ranks, build_trace, select_run
from runtime.runfile import Region, RunWriter, read_run, run_file_name

REPO = Path(__file__).resolve().parents[2]
REGIONS = [{"type": "region", "id": 1, "kind": "epoch", "name": "train", "file": "t.py", "line": 1},
           {"type": "region", "id": 2, "kind": "step", "name": "train_epoch", "file": "t.py", "line": 2}]


def write_rank(d: Path, rank: int, *, run_id: str = "r1", start_unix: float = 1000.0, start_ns: int = 0,
               steps: int = 3, worker: bool = False, spawned: bool = False, header: dict | None = None,
               sub: str = "") -> Path:
    """A rank whose process clock starts at `start_ns` at wall time `start_unix`; steps of 10 ms
    (2 ms of it data wait) back to back from 5 ms after the start."""
    h = {"run_id": run_id, "params": {"ranks": 2}, "rank": rank, "world_size": 2, "host": "h", "pid": 100 + rank,
         "start_unix": start_unix, "start_ns": start_ns}
    if worker:  # a forked worker names its parent twice; a spawned one only in child_of
        h.update(child_of=100 + rank, pid=200 + rank)
        if not spawned:
            h.update(forked_from=100 + rank)
    recs = list(REGIONS)
    t0 = start_ns + 5_000_000
    for i in range(steps):
        recs.append({"type": "step", "region": 2, "index": i, "start_ns": t0 + i * 10_000_000,
                     "duration_ns": 10_000_000, "data_wait_ns": 2_000_000, "comm_ns": 1_000_000, "gpu_ns": None,
                     "memory": {"rss_peak_bytes": 1 << 20}})
    recs.append({"type": "epoch", "region": 1, "index": 0, "start_ns": t0, "duration_ns": steps * 10_000_000})
    recs.append({"type": "end", "status": "ok", "exit_code": 0})
    h.update(header or {})
    path = d / (sub or run_id) / run_file_name(rank, h["pid"])
    with RunWriter(path) as w:
        w.write_header(h)
        w.write_records(recs)
    return path


def slices(trace: dict, **match) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and all(e.get(k) == v for k, v in match.items())]


def test_ranks_are_processes_aligned_on_wall_clock(tmp_path):
    # rank 1's process clock reads 7 s at the same wall time at which rank 0's reads 0, and it
    # started 1 ms later: its first step must be drawn 1 ms after rank 0's
    runs = [read_run(write_rank(tmp_path, 0)), read_run(write_rank(tmp_path, 1, start_unix=1000.001, start_ns=7 * 10**9))]
    trace = build_trace(runs)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {1: "rank 0 (h, pid 100)", 2: "rank 1 (h, pid 101)"}
    s0 = [e for e in slices(trace, pid=1, cat="step")]
    s1 = [e for e in slices(trace, pid=2, cat="step")]
    assert [e["ts"] for e in s0] == [0.0, 10_000.0, 20_000.0]
    assert [e["ts"] for e in s1] == pytest.approx([1000.0, 11_000.0, 21_000.0], abs=0.01)
    assert all(e["dur"] == 10_000.0 for e in s0 + s1)
    assert s0[0]["args"]["comm_ns"] == 1_000_000 and s0[0]["args"]["memory.rss_peak_bytes"] == 1 << 20


def test_data_wait_is_drawn_inside_its_step_and_epochs_enclose_steps(tmp_path):
    trace = build_trace([read_run(write_rank(tmp_path, 0))])
    steps = slices(trace, cat="step")
    waits = slices(trace, cat="data_wait")
    assert len(waits) == len(steps) == 3
    for s, w in zip(steps, waits):
        assert w["tid"] == s["tid"] and w["ts"] == s["ts"] and w["dur"] == 2000.0
    (epoch,) = slices(trace, cat="epoch")
    assert epoch["ts"] == steps[0]["ts"] and epoch["dur"] == pytest.approx(sum(s["dur"] for s in steps))
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"steps", "epochs"}
    assert trace["otherData"]["region_events"] is False


def test_region_events_become_nested_slices_per_thread():
    regions = {1: Region(1, "function", "main", "m.py", 1), 2: Region(2, "method", "Model.forward", "m.py", 9)}
    run = SimpleNamespace(
        header={"run_id": "t", "rank": 0, "world_size": 1, "start_unix": 50.0, "start_ns": 0},
        regions=regions, steps=[], epochs=[], end={"status": "ok", "trace_dropped": 3},
        events=[{"region": 1, "tid": 7, "start_ns": 0, "end_ns": 9_000}, (2, 1_000, 4_000, 7), (2, 500, 800, 8)],
    )
    trace = build_trace([run])
    main = slices(trace, name="main")[0]
    fwd = sorted(slices(trace, name="Model.forward"), key=lambda e: e["ts"])
    assert main["dur"] == 9.0 and main["cat"] == "function"
    assert fwd[1]["tid"] == main["tid"] and main["ts"] <= fwd[1]["ts"] and fwd[1]["ts"] + fwd[1]["dur"] <= 9.0
    assert fwd[0]["tid"] != main["tid"]  # another thread, another track
    assert trace["otherData"]["region_events"] is True
    assert trace["otherData"]["events_dropped"] == 3
    # slices come parent first on each track: sorted by start, longer first at the same start
    track = [(e["ts"], -e["dur"]) for e in slices(trace) if e["tid"] == main["tid"]]
    assert track == sorted(track)


@pytest.mark.parametrize("spawned", [False, True])
def test_workers_are_processes_next_to_their_rank(tmp_path, spawned):
    runs = [read_run(write_rank(tmp_path, r, worker=w, spawned=spawned)) for r in (1, 0) for w in (True, False)]
    trace = build_trace(runs)
    names = [e["args"]["name"] for e in sorted(trace["traceEvents"], key=lambda e: e["pid"])
             if e["name"] == "process_name"]
    assert [n.split(" (")[0] for n in names] == ["rank 0", "rank 0 worker", "rank 1", "rank 1 worker"]


def test_rank_filter_and_run_choice(tmp_path):
    files = [write_rank(tmp_path, 0), write_rank(tmp_path, 1), write_rank(tmp_path, 0, run_id="r2")]
    runs = [read_run(f) for f in files]
    with pytest.raises(InputError, match="2 runs .*choose one with --run"):
        select_run(runs, None)
    with pytest.raises(InputError, match="--run: no run 'r9'"):
        select_run(runs, "r9")
    chosen = select_run(runs, "r1")
    assert len(chosen) == 2
    trace = build_trace(chosen, {1})
    assert {e["args"]["name"].split(" (")[0] for e in trace["traceEvents"] if e["name"] == "process_name"} == {"rank 1"}
    with pytest.raises(InputError, match="--ranks: none of the selected ranks is in the run; it has 0, 1"):
        build_trace(chosen, {5})  # review 40: which ranks there are, as report --rank says
    with pytest.raises(InputError, match="--ranks: empty"):
        _parse_ranks(" , ")  # review 40: `--ranks ""` wrote every rank
    assert _parse_ranks(None) is None and _parse_ranks("0,2-3") == {0, 2, 3}


def test_a_script_the_rank_started_with_subprocess_is_drawn_as_its_helper(tmp_path):
    # no child_of/forked_from: only its ppid says that rank 0's process started it
    runs = [read_run(write_rank(tmp_path, 0, header={"ppid": 1})),
            read_run(write_rank(tmp_path, 0, header={"pid": 300, "ppid": 100}))]
    trace = build_trace(runs)
    names = [e["args"]["name"].split(" (")[0] for e in sorted(trace["traceEvents"], key=lambda e: e["pid"])
             if e["name"] == "process_name"]
    assert names == ["rank 0", "rank 0 worker"]


def test_launches_of_one_job_are_chosen_by_the_names_fit_and_report_give_them(tmp_path):
    # every launch in one PBS job has run id pbs-77; --repetition tells them apart
    files = [write_rank(tmp_path, r, run_id="pbs-77", header={"repetition": rep}, sub=f"rep{rep}")
             for rep in (0, 1) for r in (0, 1)]
    runs = [read_run(f) for f in files]
    with pytest.raises(InputError, match=r"2 runs \(pbs-77 \(repetition 0, ranks=2\), pbs-77 \(repetition 1, ranks=2\)\)"):
        select_run(runs, None)
    chosen = select_run(runs, "pbs-77 (repetition 1, ranks=2)")
    assert sorted((r.header["repetition"], r.header["rank"]) for r in chosen) == [(1, 0), (1, 1)]


def test_a_run_with_nothing_timed_is_an_error_that_says_what_to_do():
    untimed = SimpleNamespace(header={"rank": 0}, regions={}, steps=[{"region": 2, "index": 0, "duration_ns": 5}],
                              epochs=[], end=None)
    with pytest.raises(InputError, match="SCALEPROBE_TRACE=1"):
        build_trace([untimed])


def test_command_writes_a_trace_file(tmp_path):
    write_rank(tmp_path / "runs", 0)
    write_rank(tmp_path / "runs", 1)
    out = tmp_path / "trace.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "modeler", "timeline", str(tmp_path / "runs"), "-o", str(out)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert str(out.resolve()) in p.stderr and "SCALEPROBE_TRACE=1" in p.stderr
    trace = json.loads(out.read_text())
    assert {e["pid"] for e in trace["traceEvents"]} == {1, 2}
    # every complete event has what chrome://tracing and Perfetto require
    for e in slices(trace):
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(e) and e["dur"] >= 0
    # written an event at a time (review 54 F5): the same trace as build_trace's, on stdout too
    assert trace == build_trace([read_run(f) for f in sorted((tmp_path / "runs").rglob("*.jsonl"))])
    p = subprocess.run([sys.executable, "-m", "modeler", "timeline", str(tmp_path / "runs"), "-o", "-"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout) == trace and p.stdout.endswith("}\n")


def test_back_to_back_steps_never_overlap_at_real_clock_values(tmp_path):
    # a unix time near 1.8e9 s resolves only ~0.2 us in a float: the timeline must not add it to
    # every timestamp, or a step ending where the next starts overlaps it (Perfetto then mis-nests)
    run = read_run(write_rank(tmp_path, 0, start_unix=1_795_294_305.469836, start_ns=123_456_789_012_345))
    steps = slices(build_trace([run]), cat="step")
    for a, b in zip(steps, steps[1:]):
        assert a["ts"] + a["dur"] == b["ts"]
