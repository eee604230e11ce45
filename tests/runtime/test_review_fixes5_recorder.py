"""Fifth round of review fixes, recorder side: a step's communication time is the union of its calls'
intervals, throttling is never decided at the final flush, failed writes keep their measurements
(and the final one no longer fails the program), long-lived threads' open visits are recorded,
a visit left open no longer counts its children twice, a manual region may end on another thread,
and scatter counts what the source rank sends."""

from __future__ import annotations

import errno
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import comm, series
from runtime.runfile import RunWriter, find_run_files, read_run

from .test_backend import BACKENDS, _by_path, fresh_backend
from .test_review_fixes2 import _env, _python

MS = 1_000_000

PURE = [{"SCALEPROBE_PURE": "1"}] + ([{"SCALEPROBE_PURE": "0"}] if len(BACKENDS) > 1 else [])


@pytest.fixture(params=BACKENDS)
def b(request):
    mod = fresh_backend(request.param)
    yield mod
    mod.reset_after_fork()


def _run(tmp_path: Path, source: str, extra: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, object]:
    (tmp_path / "prog.py").write_text(source)
    done = _python(["prog.py"], tmp_path, extra)
    files = find_run_files(tmp_path / "runs") if (tmp_path / "runs").is_dir() else []
    return done, (read_run(files[0]) if len(files) == 1 else None)


def _named(run) -> dict[str, object]:
    return {run.callpath_name(p): s for p, s in run.profile.items()}


# ----- 2: a step's comm_ns is the union of its calls' intervals, clipped to the step ------------------

def _fake_rec(records: list) -> SimpleNamespace:
    return SimpleNamespace(cfg=SimpleNamespace(schedule=None), gpu=None, gpu_rotation=None, finished=False,
                           steps_seen=0, series=records, request_flush=lambda: None, comm_spans=comm.CommSpans(),
                           comm_lock=threading.Lock(), comm={})


def test_overlapping_calls_are_charged_once_and_only_inside_the_step():
    records: list = []
    rec = _fake_rec(records)
    before = time.perf_counter_ns()
    time.sleep(0.02)
    for _ in series.wrap(1, iter(range(2)), "step", rec):
        t0 = time.perf_counter_ns()
        time.sleep(0.04)
        t1 = time.perf_counter_ns()
        # Two buckets in flight together (as DDP's are), and one that began before the step.
        comm.record(rec, "ddp_allreduce", 4, 2, t1 - t0, (9,), None, t0)
        comm.record(rec, "ddp_allreduce", 4, 2, t1 - t0 - 10 * MS, (9,), None, t0 + 10 * MS)
        comm.record(rec, "all_reduce", 4, 2, t0 - before, (8,), None, before)
    assert len(records) == 2
    for r in records:
        # The old code charged the sum of the calls' times: 30 + 40 + 20 (+ 40 before the 2nd step).
        assert 35 * MS <= r["comm_ns"] <= r["duration_ns"], r
    assert rec.comm_spans.open == {} and rec.comm_spans.starts == []  # nothing kept once the loop ended
    assert sum(s[2] for s in rec.comm.values()) > 2 * 70 * MS  # the comm records keep every call's own time


def test_comm_spans_fold_old_intervals_without_changing_the_total():
    spans = comm.CommSpans()
    spans.LIMIT = 8
    spans.begin(1, 0)
    for k in range(100):
        spans.add(10 * k, 10 * k + 5)
        spans.add(10 * k + 3, 10 * k + 6)  # overlaps the one before: merged
    assert len(spans.starts) <= 8
    assert spans.end(1, 10_000) == 100 * 6


# ----- 3 and 12: no throttling at the final flush; the end record counts what the file says -----------

THROTTLE = """\
import sys
from runtime import probe
from runtime.manual import region
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3000):
    with region("tiny"):
        pass
if 'mid' in sys.argv:
    probe.flush()  # a throttle decided while the program runs
    for _ in range(50):
        with region("tiny"):
            pass
"""


def test_a_run_shorter_than_the_flush_interval_is_not_throttled(tmp_path):
    done, run = _run(tmp_path, THROTTLE, {"SCALEPROBE_THROTTLE_CALLS": "1000", "SCALEPROBE_THROTTLE_NS": "1000000000"})
    assert done.returncode == 0, done.stderr
    assert run.throttled == {} and run.end["throttled"] == 0  # the old code: a throttled record, and 0
    assert _named(run)["tiny"].visits == 3000
    assert "throttled" not in done.stderr


def test_a_throttle_decided_mid_run_is_counted_in_the_end_record(tmp_path):
    (tmp_path / "prog.py").write_text(THROTTLE)
    done = _python(["prog.py", "3000", "mid"], tmp_path,  # (SCALEPROBE_QUIET=1 leaves its line out: review 107 LOW-4)
                   {"SCALEPROBE_THROTTLE_CALLS": "1000", "SCALEPROBE_THROTTLE_NS": "1000000000",
                    "SCALEPROBE_QUIET": "0"})
    assert done.returncode == 0, done.stderr
    [f] = find_run_files(tmp_path / "runs")
    run = read_run(f)
    assert len(run.throttled) == 1 and run.end["throttled"] == 1
    assert _named(run)["tiny"].visits == 3000  # the visits after the decision are not timed
    assert done.stderr.count("scaleprobe: throttled tiny: 3000 visits") == 1


# ----- 4: a failed write keeps its bytes; a cut line is completed ----------------------------------------

class _Disk:
    """os.write that fails with ENOSPC while `full`, after writing `partial` bytes of the call."""

    def __init__(self, real):
        self.real, self.full, self.partial = real, False, 0

    def __call__(self, fd, data):
        if self.full:
            if self.partial:
                n, self.partial = self.real(fd, bytes(data[: self.partial])), 0
                return n
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(fd, data)


def _writer_on_a_full_disk(tmp_path, monkeypatch, partial: int):
    """A RunWriter whose header is written, on a disk that is now full (a write gets `partial` bytes
    through, then fails)."""
    import runtime.runfile as runfile

    disk = _Disk(runfile.os.write)
    monkeypatch.setattr(runfile.os, "write", disk)
    w = RunWriter(tmp_path / "rank0.1.jsonl")
    w.write_header({"run_id": "x"})
    disk.full, disk.partial = True, partial
    return w, disk


def test_the_writer_keeps_what_a_failed_write_left_and_completes_the_cut_line(tmp_path, monkeypatch):
    w, disk = _writer_on_a_full_disk(tmp_path, monkeypatch, 30)
    prof = {"type": "profile", "flush": 1, "path": [1], "visits": 2, "incl_ns": 5, "excl_ns": 5, "min_ns": 2,
            "max_ns": 3, "sumsq_ns": 13.0, "recursive": 0}
    with pytest.raises(OSError):
        w.write_records([{"type": "region", "id": 1, "kind": "function", "name": "f", "file": "", "line": 1}, prof])
    assert w.pending > 0
    with pytest.raises(OSError):
        w.write_records([dict(prof, flush=2)])
    disk.full = False
    w.write_records([{"type": "end", "status": "ok"}])
    w.close()
    run = read_run(tmp_path / "rank0.1.jsonl")
    assert run.problems == [] and run.profile[(1,)].visits == 4 and run.end == {"status": "ok"}


def test_a_record_after_given_up_bytes_starts_on_a_fresh_line(tmp_path, monkeypatch):
    w, disk = _writer_on_a_full_disk(tmp_path, monkeypatch, 10)
    with pytest.raises(OSError):
        w.write_records([{"type": "iterations", "flush": 1, "region": 1, "count": 3}])
    assert w.drop_pending() > 0 and w.pending == 0
    disk.full = False
    w.write_records([{"type": "end", "status": "ok"}])
    run = read_run(tmp_path / "rank0.1.jsonl")
    assert run.end == {"status": "ok"}  # not glued to the half line before it
    assert len(run.problems) == 1 and "rank0.1.jsonl:2: not valid JSON" in run.problems[0]


DISK_FULL = """\
import errno, os, sys
import runtime.runfile as runfile
from runtime import probe, recorder
from runtime.manual import region

real = runfile.os.write
state = {"full": False, "partial": 0}
def write(fd, data):
    if state["full"]:
        if state["partial"]:
            n, state["partial"] = real(fd, bytes(data[:state["partial"]])), 0
            return n
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(fd, data)
runfile.os.write = write
if "give-up" in sys.argv:
    recorder.MAX_UNWRITTEN_BYTES = 0
for k in range(4):
    state["full"], state["partial"] = k in (1, 2), 40
    with region("work"):
        pass
    probe.flush()
"""


def test_a_temporary_write_failure_loses_nothing_and_is_said_once(tmp_path):
    done, run = _run(tmp_path, DISK_FULL)
    assert done.returncode == 0, done.stderr
    path = run.path
    assert done.stderr.splitlines() == [
        f"scaleprobe: cannot write run file {path}: No space left on device; keeping the measurements and trying"
        " again at the next flush",
        f"scaleprobe: run file {path} written again after 2 failed flush(es), nothing lost",
    ]
    assert run.problems == [] and _named(run)["work"].visits == 4  # the old code: 2, and a broken line
    assert run.end["status"] == "ok" and run.end["lost_flushes"] == 0


def test_measurements_given_up_are_counted_and_the_reader_says_the_run_is_short(tmp_path):
    done, run = _run(tmp_path, DISK_FULL.replace("sys.argv", "['give-up']"))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("are given up (the end record counts them in lost_flushes)") == 2
    assert run.end["lost_flushes"] == 2 and _named(run)["work"].visits == 2
    assert any("2 flush(es) could not be written" in p for p in run.problems)


# ----- 5: the final flush cannot be written: said in one line, the program's status stands ----------------

# 2000 regions in the final flush: far more than the 32 KiB the file may grow to
BIG = """\
from runtime.manual import region
for i in range(2000):
    with region(f"region_{i}"):
        pass
print("program done")
"""


def _fsize_limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, 32 * 1024))


@pytest.mark.parametrize("launched", [False, True])
def test_a_final_flush_past_the_file_size_limit_keeps_the_exit_status(tmp_path, launched):
    (tmp_path / "prog.py").write_text(BIG)
    env = _env({"SCALEPROBE_OUT": str(tmp_path / "runs")})
    cmd = [sys.executable, *(["-m", "runtime.launch", "--out", str(tmp_path / "launched")] if launched else []),
           "prog.py"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_fsize_limit)
    assert done.returncode == 0, done.stderr  # the old code: 1 under the launcher
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("scaleprobe: cannot write run file")]
    assert len(lines) == 1 and "File too large" in lines[0] and "the end record among them, are missing" in lines[0], done.stderr
    [f] = find_run_files(tmp_path / ("launched" if launched else "runs"))
    assert read_run(f).end is None  # the file reads as cut off, which it is


# ----- 9: threads that outlive the program's end ---------------------------------------------------------------

# The program ends once the pump has finished ten items (it then goes on, open, until the exit): what the
# test asserts comes from those ten sleeps, which surely happened, not from how long the main thread waited.
DAEMON = """\
import threading, time
from runtime.manual import region

ten_items = threading.Event()

def pump():
    with region("pump"):
        n = 0
        while True:
            with region("item"):
                time.sleep(0.005)
            n += 1
            if n == 10:
                ten_items.set()

threading.Thread(target=pump, daemon=True).start()
assert ten_items.wait(60), "the pump never finished ten items"
"""


@pytest.mark.parametrize("extra", PURE)
def test_a_daemon_threads_open_visits_end_with_the_run(tmp_path, extra):
    done, run = _run(tmp_path, DAEMON, extra)
    assert done.returncode == 0, done.stderr
    got = _named(run)
    # ten items of a 5 ms sleep each were done inside 'pump' before the exit
    assert got["pump"].visits == 1 and got["pump"].incl_ns >= 10 * 5 * MS  # the old code: no 'pump' at all
    assert got["pump->item"].visits >= 10 and got["pump"].excl_ns <= got["pump"].incl_ns - got["pump->item"].incl_ns + MS
    assert run.end["closed_at_end"] >= 1 and run.end["dropped"] == 0


def test_final_deltas_count_other_threads_open_visits_once(b):
    go, stop = threading.Event(), threading.Event()

    def worker():
        b.enter(1)
        b.enter(2)
        time.sleep(0.02)
        b.exit(2)
        b.enter(3)
        go.set()
        stop.wait()

    t = threading.Thread(target=worker)
    t.start()
    go.wait()
    time.sleep(0.02)
    closed, deltas = b.take_final_deltas()
    stop.set()
    t.join()
    d = _by_path(deltas)
    assert closed == 2 and set(d) == {(1,), (1, 2), (1, 3)}
    assert d[(1,)][1] == d[(1, 3)][1] == 1 and d[(1, 3)][2] >= 15 * MS
    assert d[(1,)][2] >= d[(1, 2)][2] + d[(1, 3)][2]
    assert abs(d[(1,)][3] - (d[(1,)][2] - d[(1, 2)][2] - d[(1, 3)][2])) < 1000  # its children's time is not its own


# ----- 10: a visit left open; a manual region that ends on another thread ---------------------------------------

def test_a_dropped_visits_children_are_not_counted_again_in_the_survivor(b):
    b.enter(1)
    b.enter(2)  # left open: its exit never comes
    b.enter(3)
    time.sleep(0.02)
    b.exit(3)
    b.exit(1)  # drops 2
    d = _by_path(b.take_deltas())
    assert set(d) == {(1,), (1, 2), (1, 2, 3)} and b.dropped() == 1
    incl1, excl1, incl3 = d[(1,)][2], d[(1,)][3], d[(1, 2, 3)][2]
    assert incl3 >= 20 * MS
    assert excl1 <= incl1 - incl3  # the old code: excl1 == incl1, the 20 ms counted twice
    # review 48 F1: the dropped visit counts no visit and no own time; its path's inclusive time
    # is what its closed children took, so incl = excl + children's incl holds under it too
    visits2, incl2, excl2 = d[(1, 2)][1:4]
    assert (visits2, excl2) == (0, 0) and abs(incl2 - incl3) <= 1


def test_exit_says_when_the_region_is_not_open_on_this_thread(b):
    b.set_off(9, True)
    out = []
    t = threading.Thread(target=lambda: out.extend([b.exit(4), b.exit(9)]))
    t.start()
    t.join()
    b.enter(1)
    assert (b.exit(4), b.exit(9), b.exit(1)) == (False, None, None)
    assert out == [False, None]


def test_exit_elsewhere_closes_the_visit_where_it_is_innermost(b):
    b.enter(1)
    b.enter(4)
    time.sleep(0.01)
    out = []
    t = threading.Thread(target=lambda: out.extend([b.exit(4), b.exit_elsewhere(4), b.exit_elsewhere(4)]))
    t.start()
    t.join()
    assert out == [False, True, False]
    b.enter(6)
    b.exit(6)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert set(d) == {(1,), (1, 4), (1, 6)} and b.dropped() == 0
    assert d[(1, 4)][2] >= 10 * MS and d[(1,)][3] <= d[(1,)][2] - d[(1, 4)][2]


HANDOVER = """\
import threading, time
from runtime.manual import region

with region("main"):
    r = region("xfer")
    r.__enter__()
    with region("busy"):
        time.sleep(0.01)
    t = threading.Thread(target=r.__exit__, args=(None, None, None))
    t.start(); t.join()
    with region("later"):
        time.sleep(0.02)
    other = region("nowhere")
    t = threading.Thread(target=other.__exit__, args=(None, None, None))
    t.start(); t.join()
"""


@pytest.mark.parametrize("extra", PURE)
def test_a_manual_region_may_end_on_another_thread(tmp_path, extra):
    done, run = _run(tmp_path, HANDOVER, extra)
    assert done.returncode == 0, done.stderr
    got = _named(run)
    assert set(got) == {"main", "main->xfer", "main->xfer->busy", "main->later"}  # not main->xfer->later
    own = got["main"].incl_ns - got["main->xfer"].incl_ns - got["main->later"].incl_ns
    assert abs(got["main"].excl_ns - own) < 1000 and run.end["dropped"] == 0  # its children counted once
    assert got["main->xfer"].incl_ns >= 10 * MS and got["main->later"].incl_ns >= 20 * MS
    assert done.stderr.count("scaleprobe: region 'nowhere' left on thread") == 1


# ----- 12: scatter counts what the source rank sends ---------------------------------------------------------------

class _Tensor:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n

    def element_size(self):
        return 4


def test_scatter_counts_the_source_ranks_scatter_list(monkeypatch):
    from runtime import _backend

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)
    rec = SimpleNamespace(on=True, gpu=None, comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={})

    def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False):
        return None

    wrapped = comm._wrap(rec, "scatter", scatter, 150, ["tensor", "scatter_list", "src", "group", "async_op"])
    wrapped(_Tensor(5), [_Tensor(5), _Tensor(5)], 0)  # the source: sends 2 x 20 B
    assert [s[1] for s in rec.comm.values()] == [40]  # the old code: 20, the buffer it receives into
    rec.comm.clear()
    wrapped(_Tensor(5), scatter_list=None, src=0)  # another rank: receives 20 B
    assert [s[1] for s in rec.comm.values()] == [20]


# ----- the format documents what `visits` counts for generators and coroutines ---------------------------------

def test_format_doc_says_visits_of_generators_are_resumptions():
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "format.md").read_text().split())
    assert "each resumption" in text and "lost_flushes" in text and "closed_at_end" in text


def test_region_records_given_up_are_written_again(tmp_path):
    """Review 22: a region first used in a flush whose bytes were given up lost its region record,
    and the later records that used it made the run damaged (undefined region id)."""
    source = DISK_FULL.replace("sys.argv", "['give-up']").replace('with region("work")', 'with region("work" if k == 0 else "late")')
    done, run = _run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert run.end["lost_flushes"] == 2
    assert _named(run)["late"].visits == 1  # named: its region record is in the file
    used = {r for path in run.profile for r in path}
    assert used <= set(run.regions)
