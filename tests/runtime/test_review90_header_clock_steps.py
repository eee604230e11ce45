"""Review 90, the runtime's side of `modeler timeline`:

F1: the header's `start_unix` was read up to a few ms after `start_ns`, with other work between
    (a DataLoader worker was drawn 1.9 ms off its own rank): both now come from one
    `clock_pair()`, in a forked child too.
F2: step and epoch records name the thread that ran the loop (`tid`), as trace events do.
F4: the header says whether the process recorded per-visit events (`trace`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import process_identity
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def test_clock_pair_takes_the_tightest_of_its_tries(monkeypatch):
    # perf_counter readings around each wall-clock reading: 100 ns apart, then 10, then 40
    perf = iter([1_000, 1_100, 2_000, 2_010, 3_000, 3_040])
    wall = iter([5_000_000_000, 6_000_000_000, 7_000_000_000])
    monkeypatch.setattr(process_identity.time, "perf_counter_ns", lambda: next(perf))
    monkeypatch.setattr(process_identity.time, "time_ns", lambda: next(wall))
    assert process_identity.clock_pair(tries=3) == (2_005, 6.0)


def test_clock_pair_reads_clocks_that_agree_with_each_other():
    import time

    start_ns, start_unix = process_identity.clock_pair()
    # the pair maps the monotonic clock to wall time: a reading now maps to about now
    now_ns, now_unix = time.perf_counter_ns(), time.time()
    assert abs((start_unix + (now_ns - start_ns) / 1e9) - now_unix) < 1.0  # the same clocks, not a timing bound


PROGRAM = '''\
import os, sys, threading
from runtime import process_identity
pairs = iter([(123, 456.0), (789, 1011.0)])
process_identity.clock_pair = lambda tries=5: next(pairs)
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__, iterate as __sp_iterate__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "step", "loop:for@9", 9),))


def loop():
    if __sp_on__: __sp_enter__(0)
    try:
        for i in __sp_iterate__(0, range(3)):
            pass
    finally:
        if __sp_on__: __sp_exit__(0)


loop()
t = threading.Thread(target=loop, name="worker")
t.start()
t.join()
print(threading.main_thread().native_id, t.native_id)
if os.environ.get("FORK") == "1":
    pid = os.fork()
    if pid == 0:
        loop()
        sys.exit(0)
    os.waitpid(pid, 0)
'''


def run(tmp_path: Path, **env: str) -> tuple[list, list[int]]:
    (tmp_path / "prog.py").write_text(PROGRAM)
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_OUT=str(tmp_path / "out"),
                                     **env))
    assert p.returncode == 0, p.stderr
    return [read_run(f) for f in find_run_files(tmp_path / "out")], [int(x) for x in p.stdout.split()]


def test_the_header_clocks_come_from_one_clock_pair_also_in_a_forked_child(tmp_path):
    runs, _ = run(tmp_path, FORK="1")
    by_pid = sorted(runs, key=lambda r: "forked_from" in r.header)
    parent, child = by_pid
    assert (parent.header["start_ns"], parent.header["start_unix"]) == (123, 456.0)
    assert (child.header["start_ns"], child.header["start_unix"]) == (789, 1011.0)


def test_step_records_name_the_thread_that_ran_the_loop(tmp_path):
    [r], (main_tid, worker_tid) = run(tmp_path)
    tids = [s["tid"] for s in r.steps]
    assert tids == [main_tid] * 3 + [worker_tid] * 3


@pytest.mark.parametrize("env, expected", [({"SCALEPROBE_TRACE": "1", "SCALEPROBE_TRACE_MAX": "500"}, {"max": 500}),
                                           ({}, None)])
def test_the_header_says_whether_events_were_recorded(tmp_path, env, expected):
    [r], _ = run(tmp_path, **env)
    assert r.header["trace"] == expected
    assert json.loads(json.dumps(r.header))["trace"] == expected
