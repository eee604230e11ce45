"""Fixes from review 8 of the runtime (manual regions' per-thread bookkeeping, the launcher's pid
variables); each test fails on the code before the fix."""

from __future__ import annotations

import pytest

from runtime import launch_modes

from .test_review_fixes5_recorder import PURE, _run

# N1: one region object, entered and left by many threads at once (probes switched on and off
# meanwhile): nothing may be left behind in its bookkeeping, and nothing said about other threads.
SHARED = """\
import threading
from runtime.manual import region
from runtime.probe import set_enabled

r = region("shared")
def work(i):
    for k in range(40000):
        with r:
            pass
        if i == 0 and k % 5000 == 0:
            set_enabled(k % 10000 != 0)
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
set_enabled(True)
print("left", len(r._opened) + len(r._skipped))
"""


@pytest.mark.parametrize("extra", PURE)
def test_a_region_object_shared_by_threads_leaves_nothing_behind(tmp_path, extra):
    done, run = _run(tmp_path, SHARED, extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["left", "0"], done.stdout
    assert "left on thread" not in done.stderr, done.stderr
    # a visit entered with probes on and left with them off stays open, and ends as dropped when
    # its thread does (review 52 F5): how many, the threads' interleaving decides; what was
    # measured stays whole (the region's time is its own, none beyond its 8 threads' run)
    [shared] = run.profile.values()
    assert run.end["closed_at_end"] == 0 and 0 < shared.excl_ns <= shared.incl_ns <= 8 * run.end["duration_ns"]


def test_the_launcher_pids_do_not_reach_the_program(monkeypatch):
    monkeypatch.setenv(launch_modes.PARENT_PID, "12345")
    monkeypatch.setenv(launch_modes.LAUNCHER_PID, "12345")
    monkeypatch.setattr(launch_modes.sys, "platform", "darwin")  # no prctl on the test process itself
    launch_modes.die_with_parent()
    assert launch_modes.PARENT_PID not in launch_modes.os.environ
    assert launch_modes.LAUNCHER_PID not in launch_modes.os.environ


def test_an_error_file_naming_a_file_that_is_not_valid_utf8_is_written(tmp_path):
    from runtime.launch_child import write_error

    target = tmp_path / "rank0.error.txt"
    write_error(target, 'ZeroDivisionError: division by zero\n  File "run_\udcff.py", line 3\n')
    assert target.read_text(encoding="utf-8").splitlines()[1] == '  File "run_\\udcff.py", line 3'
