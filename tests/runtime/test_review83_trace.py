"""Review 83 LOW-5: with SCALEPROBE_TRACE=1, the visits still open on a daemon thread when the run
ends are recorded in the profile as ending then (`closed_at_end`), but had no event: a timeline
lacked the thread. The final flush now gives them their events (runtime/trace.py, `close_at_end`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime.runfile import find_run_files, read_run
from runtime.trace import Tracer
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''\
import threading, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "main", 1), (1, "function", "spin", 2),
                                                             (2, "function", "beat", 3)))
started = threading.Event()


def beat():
    if __sp_on__: __sp_enter__(2)
    try:
        started.set()
        time.sleep(1000)
    finally:
        if __sp_on__: __sp_exit__(2)


def spin():
    if __sp_on__: __sp_enter__(1)
    try:
        beat()
    finally:
        if __sp_on__: __sp_exit__(1)


def main():
    if __sp_on__: __sp_enter__(0)
    try:
        threading.Thread(target=spin, daemon=True, name="heartbeat").start()
        started.wait()
    finally:
        if __sp_on__: __sp_exit__(0)


main()
'''


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_daemon_threads_visits_open_at_the_end_have_events(tmp_path, pure):
    (tmp_path / "prog.py").write_text(PROGRAM)
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_TRACE="1",
                                     SCALEPROBE_PURE=pure, SCALEPROBE_OUT=str(tmp_path / "out")))
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    assert run.problems == [] and run.end["closed_at_end"] == 2, (run.problems, run.end)
    assert (run.end["trace_dropped"], run.end["trace_unmatched"]) == (0, 0), run.end
    by_thread: dict[int, list] = {}
    for rid, t0, t1, tid in run.events:
        by_thread.setdefault(tid, []).append((rid, t0, t1))
    [heartbeat] = [tid for tid, name in run.threads.items() if name == "heartbeat"]
    [main_thread] = [tid for tid, name in run.threads.items() if name == "MainThread"]
    # before: no event of the heartbeat thread at all; now its two visits, innermost first, ending
    # together at the end of the run, after main's
    beat, spin = by_thread[heartbeat]
    assert (beat[0], spin[0]) == (2, 1), by_thread
    assert spin[1] <= beat[1] < beat[2] == spin[2], by_thread
    [main] = [e for e in by_thread[main_thread] if e[0] == 0]
    assert main[2] <= beat[2]


def _tracer():
    t = Tracer(SimpleNamespace(throttled={}), 10**9)
    g = {"__sp_enter__": lambda rid: None, "__sp_exit__": lambda rid: None}
    t.install(g)
    return t, g["__sp_enter__"], g["__sp_exit__"]


def test_close_at_end_leaves_this_threads_visits_unless_told_and_counts_them_with_probes_off():
    import threading

    t, enter, exit = _tracer()
    enter(1)  # this thread: main, still open when the run ends (the profile drops it)
    started, done = threading.Event(), threading.Event()

    def other():
        enter(5), enter(6)
        started.set()
        done.wait()

    th = threading.Thread(target=other)
    th.start()
    started.wait()
    try:
        t.close_at_end(10**18, own=False, left=False)
        assert [(e[0], e[2]) for e in t.events] == [(6, 10**18), (5, 10**18)]
        assert (t.dropped, t.unmatched) == (0, 0)
        exit(1)  # this thread's own stays open until it ends itself
        assert [e[0] for e in t.events] == [6, 5, 1]
        enter(2)
        t.close_at_end(10**18, own=False, left=True)  # probes off: no event, counted as unmatched
        assert t.unmatched == 0  # (this thread's, without `own`: left as they are)
        t.close_at_end(10**18, own=True, left=True)
        assert (len(t.events), t.unmatched) == (3, 1)
    finally:
        done.set()
        th.join()


def test_close_at_end_skips_threads_that_ended():
    import threading

    t, enter, exit = _tracer()

    def gone():
        enter(7)  # left open (as when the probes were switched off mid-visit), and the thread ends

    th = threading.Thread(target=gone)
    th.start()
    th.join()
    t.close_at_end(10**18, own=True, left=False)
    assert t.events == [] and t.unmatched == 0
