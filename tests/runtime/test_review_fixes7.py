"""Seventh review, runtime and launcher: a plain run never writes into a run an older scaleprobe made
of the same point (it takes a fresh repetition that counts those), ranks of a launcher that is PID 1
do not take it for dead, a manual region entered with probes off ends without touching another
thread's visit, the pure-Python final flush counts a daemon thread's visit once, and an error file
is written whole or not at all (an empty one is no message)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime import launch_child, sweep_run
from runtime.launch_args import parse
from runtime.launch_ranks import Member, _error_ranks, run_members
from runtime.sweep_design import point_name, run_name
from runtime.sweep_state import RECORD, RunRecord, place, read_record, write_record

from .test_backend import fresh_backend
from .test_launch_cluster import write
from .test_launch_e2e import clean_env, launch
from .test_review_fixes5_recorder import PURE, _named, _run

# Writes a marker naming the value it ran with, as a run file would be written.
MARKER = '''
import os, sys
open(os.path.join(os.environ["SCALEPROBE_OUT"], "rank0.999.jsonl"), "w").write("marker " + sys.argv[1] + "\\n")
'''


def _record(directory: Path, params: dict, repetition: int = 0, run_id: str = "old") -> None:
    write_record(directory, RunRecord(experiment="marker", run_id=run_id, params=params, repetition=repetition,
                                      command=["c"], status="ok"))


# ----- F1: a plain run never overwrites a run an older scaleprobe made of the same point -------------------

@pytest.mark.parametrize("mode", [[], ["--nproc", "1"]], ids=["in-process", "nproc"])
def test_a_plain_run_adds_a_repetition_beside_an_older_runs_one(tmp_path, mode):
    write(tmp_path / "marker.py", MARKER)
    point = {"ranks": 1, "model": "res_50"}
    root = tmp_path / "runs" / "marker"
    old = root / f"{point_name(point)}_rep-0"  # how the previous version named it
    _record(old, point)
    (old / "rank0.1.jsonl").write_text("old run\n")
    done = launch([*mode, "--param", "model=res_50", "marker.py", "new"], tmp_path)
    assert done.returncode == 0, done.stderr
    # the old run is as it was
    assert read_record(old).run_id == "old" and (old / "rank0.1.jsonl").read_text() == "old run\n"
    assert not (old / "rank0.999.jsonl").exists()
    # the new one is the next repetition, under the new name; no empty directory is left
    new = root / f"{run_name(point)}_rep-1"
    assert sorted(p.name for p in root.iterdir()) == sorted([old.name, new.name])
    assert (new / "rank0.999.jsonl").read_text() == "marker new\n"
    assert read_record(new).repetition == 1 and read_record(new).status == "ok"


def test_older_names_count_for_the_repetition_only_when_they_are_this_points(tmp_path):
    from runtime import launch as launcher

    write(tmp_path / "main.py", "")
    opts = parse(["--out", str(tmp_path / "runs"), "--param", "x=a/b", "main.py"])
    mine, theirs = {"ranks": 1, "x": "a/b"}, {"ranks": 1, "x": "a_b"}
    root = tmp_path / "runs" / "main"
    _record(root / f"{point_name(mine)}_rep-3", theirs)  # the same old name, another point's run
    assert launcher._next_repetition(opts, mine) == 0
    _record(root / f"{point_name(mine)}_rep-2", mine)
    (root / f"{point_name(mine)}_rep-4").mkdir()  # no record (yet): may be this point's
    assert launcher._next_repetition(opts, mine) == 5
    (run,) = launcher._runs(opts, 1)
    assert run.directory.name == f"{run_name(mine)}_rep-5"


def test_the_older_name_is_used_only_where_point_and_repetition_name_one_run(tmp_path):
    from runtime.sweep_design import legacy_directories

    point = {"ranks": 1, "x": "a/b"}
    opts = parse(["--out", str(tmp_path / "runs"), "--param", "x=a/b", "main.py"])
    (run,) = opts.design.runs(opts.out, "e", [], 1)
    old = run.directory.with_name(f"{point_name(point)}_rep-0")  # the name without the hash
    assert old in legacy_directories(run, True)
    _record(old, point)
    assert legacy_directories(run, False) == []
    assert place(run.directory, point, legacy_directories(run, False)) == run.directory
    # a sweep, or --repetition K, resumes or replaces that very run where it is
    assert place(run.directory, point, legacy_directories(run, True)) == old


# ----- F2: a launcher that is PID 1 is not taken for dead ---------------------------------------------------

def test_a_rank_compares_its_parent_with_the_launchers_pid():
    from runtime.launch_modes import LAUNCHER_PID, PARENT_PID, parent_gone

    assert not parent_gone(1, {PARENT_PID: "1"})  # the launcher is PID 1 (a container's entrypoint)
    assert not parent_gone(4242, {PARENT_PID: "4242"})
    assert parent_gone(1, {PARENT_PID: "4242"})  # reparented to init
    assert parent_gone(777, {PARENT_PID: "4242"})  # reparented to a subreaper (tini, systemd --user)
    # under --spawn the rank's parent is the spawn command's, whose pid it does not know
    assert not parent_gone(777, {LAUNCHER_PID: "4242"})
    assert parent_gone(1, {LAUNCHER_PID: "4242"})
    assert not parent_gone(1, {LAUNCHER_PID: "1"})
    assert not parent_gone(1, {PARENT_PID: "1", LAUNCHER_PID: "1"})


def test_the_ranks_the_launcher_starts_are_told_its_pid(tmp_path):
    PARENT_PID, LAUNCHER_PID = "SCALEPROBE_PARENT_PID", "SCALEPROBE_LAUNCHER_PID"
    write(tmp_path / "main.py", "")
    opts = parse(["--out", str(tmp_path / "runs"), "--nproc", "2", "main.py"])
    (run,) = opts.design.runs(opts.out, opts.experiment, opts.args, 2)
    members = sweep_run.members_for(opts, run, "id")
    assert [m.env[PARENT_PID] for m in members] == [str(os.getpid())] * 2
    assert [m.env[LAUNCHER_PID] for m in members] == [str(os.getpid())] * 2
    spawned = parse(["--out", str(tmp_path / "runs"), "--param", "ranks=2", "--spawn", "srun -n {ranks}", "main.py"])
    (member,) = sweep_run.members_for(spawned, run, "id")
    assert PARENT_PID not in member.env and member.env[LAUNCHER_PID] == str(os.getpid())


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _unshare_works(),
                    reason="needs unshare --pid (Linux, privileges)")
def test_ranks_run_when_the_launcher_is_pid_1(tmp_path):
    # one write per rank: two ranks' print() pieces could interleave on the shared pipe
    write(tmp_path / "main.py", "import os\nos.write(1, f\"parent {os.getppid()} seen {os.environ.get('SCALEPROBE_PARENT_PID')}\\n\".encode())\n")
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "runtime.launch",
                           "--nproc", "2", "main.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("parent 1 seen None") == 2, done.stdout  # the program does not see it
    (run_dir,) = (tmp_path / "runs" / "main").iterdir()
    assert json.loads((run_dir / RECORD).read_text())["status"] == "ok"


# ----- F3: a manual region entered with probes off -----------------------------------------------------------

ONOFF = """\
import threading, time
from runtime.manual import region
from runtime.probe import set_enabled

inside, left, go = threading.Event(), threading.Event(), threading.Event()
span = []
def helper():
    with region("load"):
        t0 = time.perf_counter()
        inside.set()
        go.wait()
        span.append(time.perf_counter() - t0)
        with region("after"):     # inside the helper's visit: main's exit left it open
            time.sleep(0.001)

set_enabled(False)
with region("solo"):              # entered with probes off, no other thread
    set_enabled(True)
t = threading.Thread(target=helper, name="helper")
t.start()
inside.wait()
set_enabled(False)
with region("load"):              # entered with probes off while the helper has its own open
    set_enabled(True)
go.set()
t.join()
print(round(span[0] * 1e9))
"""


@pytest.mark.parametrize("extra", PURE)
def test_a_region_entered_with_probes_off_ends_without_touching_another_threads(tmp_path, extra):
    done, run = _run(tmp_path, ONOFF, extra)
    assert done.returncode == 0, done.stderr
    assert "left on thread" not in done.stderr, done.stderr
    got = _named(run)
    assert set(got) == {"load", "load->after"}  # neither main's visits, entered with probes off
    # The helper's visit ends when the helper leaves it, not when main left its own: what it ran
    # after main's exit is its child. Open across the window with probes off, it ends as a dropped
    # one (no visit, its child's time as its inclusive time: runtime/stale_visits.py).
    assert got["load->after"].visits == 1
    assert got["load"].visits == 0 and got["load"].incl_ns == got["load->after"].incl_ns > 0
    assert run.end["dropped"] == 1 and run.end["closed_at_end"] == 0


HANDOVER_OFF = """\
import threading
from runtime.manual import region
from runtime.probe import set_enabled

set_enabled(False)
r = region("xfer")
r.__enter__()                     # not timed
set_enabled(True)
with region("outer"):
    t = threading.Thread(target=r.__exit__, args=(None, None, None))
    t.start(); t.join()           # left on another thread: nothing to end
    with region("inner"):
        pass
never = region("never")
never.__exit__(None, None, None)  # never entered: said, nothing touched
"""


@pytest.mark.parametrize("extra", PURE)
def test_only_a_visit_the_region_object_opened_is_ended_elsewhere(tmp_path, extra):
    done, run = _run(tmp_path, HANDOVER_OFF, extra)
    assert done.returncode == 0, done.stderr
    assert "'xfer'" not in done.stderr, done.stderr
    assert done.stderr.count("region 'never' left on thread 'MainThread', but this region object was never "
                             "entered") == 1, done.stderr
    assert set(_named(run)) == {"outer", "outer->inner"} and run.end["dropped"] == 0


# ----- F4: the pure-Python final flush counts a daemon thread's visit once -----------------------------------

@pytest.fixture
def py():
    mod = fresh_backend("runtime._pyprobe")
    yield mod
    mod.reset_after_fork()


def test_a_visit_left_between_the_final_steps_is_counted_once(py, monkeypatch):
    entered, leave, out = threading.Event(), threading.Event(), []

    def worker():
        py.enter(1)
        py.enter(2)
        entered.set()
        leave.wait()
        out.extend([py.exit(2), py.exit(1)])

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    entered.wait()
    take_deltas = py.take_deltas

    def leave_first():  # the thread leaves its visits between the two steps (a GIL switch)
        leave.set()
        t.join()
        return take_deltas()

    monkeypatch.setattr(py, "take_deltas", leave_first)
    closed, deltas = py.take_final_deltas()
    d = {x[0]: x for x in deltas}
    assert closed == 2 and d[(1,)][1] == 1 and d[(1, 2)][1] == 1, deltas
    assert out == [False, False]  # counted already: not open any more


class _Racing(list):
    """A thread's stack whose thread leaves its innermost visit just before the first pop."""

    raced = False

    def pop(self, *index):
        if not self.raced:
            self.raced = True
            list.pop(self)  # the thread's own exit, which counts that visit itself
            raise IndexError("pop index out of range")
        return list.pop(self, *index)


def test_a_visit_the_thread_leaves_meanwhile_is_left_to_it(py):
    import weakref

    root, a, b = py._new_node(py._ROOT_RID, None), None, None
    a = py._new_node(1, root)
    b = py._new_node(2, a)
    root[py._KIDS][1], a[py._KIDS][2] = a, b
    marker = py._Marker()
    stack = _Racing([root, a, b])
    py._roots.append((root, weakref.ref(marker), stack))
    assert py._close_open() == 1  # only a: b was the thread's to count
    assert list(stack) == [root] and (a[py._V], b[py._V]) == (1, 0)


# ----- F5: an error file is written whole or not at all --------------------------------------------------------

def test_an_error_file_that_cannot_be_written_is_not_left_empty(tmp_path, monkeypatch):
    def full_disk(self, text, encoding=None, errors=None):
        open(self, "w").close()  # created, then the write fails
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    launch_child.write_error(tmp_path / "rank0.error.txt", "RuntimeError: boom\n")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    launch_child.write_error(tmp_path / "rank0.error.txt", "RuntimeError: boom\n\ntraceback\n")
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.error.txt"]
    assert launch_child.read_error(tmp_path, 0) == "RuntimeError: boom"


def test_an_empty_error_file_is_no_message(tmp_path):
    (tmp_path / "rank0.error.txt").write_text("")
    assert launch_child.read_error(tmp_path, 0) is None and _error_ranks(tmp_path) == []
    outcome = run_members([Member([sys.executable, "-c", "pass"], clean_env(), 0)], tmp_path)
    assert (outcome.status, outcome.error) == ("ok", None)
