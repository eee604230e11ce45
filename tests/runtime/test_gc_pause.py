"""The cyclic garbage collector never runs inside scaleprobe's code (runtime/gc_pause.py, review 55
F1): a program's finalizers ran on the `scaleprobe-flush` thread, whose allocations started the
collections, and inside the exit handler's final snapshot."""
from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import gc_pause
from runtime.runfile import read_run

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# Garbage that only the cyclic collector frees, left where the program sleeps: the next allocation
# the collector counts, whoever makes it, collects it (threshold 1).
PROGRAM = """\
import atexit, gc, json, sys, threading, time, traceback
from runtime.manual import region

seen = []

class Cyclic:
    def __init__(self, k):
        self.k, self.me = k, self
    def __del__(self):
        seen.append(threading.current_thread().name)
        with region("finalizer"):
            sum(range(100))
        if self.k == 99:
            print(json.dumps([f.name for f in traceback.extract_stack()]), file=sys.stderr)

def step(k):
    with region("step"):
        Cyclic(k)

gc.collect()
gc.set_threshold(1)
for k in range(6):
    step(k)
    time.sleep(0.15)  # the flush thread (interval 0.05) flushes meanwhile
gc.set_threshold(700)
gc.collect()
print(json.dumps({"threads": seen, "enabled": gc.isenabled()}))

def last_words():  # registered after scaleprobe's exit handler: runs before it
    gc.set_threshold(1)
    Cyclic(99)
atexit.register(last_words)
"""


def _run(tmp_path: Path, backend: str, python: str = sys.executable) -> tuple[dict, list[str], Path]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_FLUSH_INTERVAL="0.05",
                    **({"SCALEPROBE_PURE": "1"} if backend == "python" else {}))
    done = subprocess.run([python, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    final_stack = json.loads(done.stderr.strip().splitlines()[-1])
    [f] = (tmp_path / "runs").glob("*.jsonl")
    return json.loads(done.stdout), final_stack, f


@pytest.mark.parametrize("backend", ["c", "python"])
def test_finalizers_run_on_the_programs_thread_never_in_the_flush(tmp_path: Path, backend: str):
    out, final_stack, f = _run(tmp_path, backend)
    # before: every one on scaleprobe-flush
    assert out["threads"] == ["MainThread"] * 6
    assert out["enabled"] is True  # the program's collector is on again after every flush
    # before: ['_at_exit', 'finish', '__del__'], inside the final snapshot
    assert final_stack == ["__del__"], final_stack
    run = read_run(f)
    assert run.end is not None and run.end["status"] == "ok"
    names = {rid: reg.name for rid, reg in run.regions.items()}
    profile = {tuple(names[i] for i in p): st for p, st in run.profile.items()}
    # the six ran inside the program, where the main thread stood: after its step, while it slept
    assert sum(st.visits for p, st in profile.items() if p[-1] == "finalizer") == 6
    assert profile[("step",)].visits == 6


@pytest.mark.parametrize("version", ["3.10", "3.12", "3.13"])
def test_other_interpreters(tmp_path: Path, version: str):
    """3.12 moved collections to the eval breaker (any thread may run one another scheduled); the
    pure backend is what runs there without a build."""
    pythons = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python"))
    if not pythons:
        pytest.skip(f"no Python {version} under /root/.pyenv/versions")
    out, final_stack, _ = _run(tmp_path, "python", str(pythons[-1]))
    assert out["threads"] == ["MainThread"] * 6
    assert final_stack == ["__del__"]


def test_a_program_that_disabled_the_collector_keeps_it_off(tmp_path: Path):
    script = tmp_path / "prog.py"
    script.write_text("import atexit, gc, time\nfrom runtime.manual import region\n"
                      "gc.disable()\n"
                      "for k in range(5):\n    with region('step'):\n        time.sleep(0.06)\n"
                      "print(gc.isenabled())\n"
                      "atexit.register(lambda: print(gc.isenabled()))\n")
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_FLUSH_INTERVAL="0.02")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
    [f] = (tmp_path / "runs").glob("*.jsonl")
    assert read_run(f).end["flushes"] > 1


real_isenabled = gc_pause._gc_isenabled  # the collector's own switch, past the program's view

IMPLS = ["python"] + (["c"] if gc_pause._c is not None else [])


@pytest.fixture(params=IMPLS)
def impl(request):
    """The pause in C (runtime/_gcpause.c, installed where built) and in Python (the fallback), each
    with the collector on around the test."""
    if request.param == "c":
        ns = SimpleNamespace(pause=gc_pause._c.pause, resume=gc_pause._c.resume, enable=gc_pause._c.enable,
                             disable=gc_pause._c.disable, isenabled=gc_pause._c.isenabled, depth=gc_pause._c.depth)
    else:
        ns = SimpleNamespace(pause=gc_pause._py_pause, resume=gc_pause._py_resume, enable=gc_pause._py_enable,
                             disable=gc_pause._py_disable, isenabled=gc_pause._py_isenabled,
                             depth=lambda: gc_pause._depth[0])
    was = real_isenabled()
    gc_pause._gc_enable()
    yield ns
    while ns.depth():  # a failed test's pause
        ns.resume()
    (gc_pause._gc_enable if was else gc_pause._gc_disable)()


def test_pauses_nest(impl):
    impl.pause()
    impl.pause()
    impl.resume()
    assert not real_isenabled()  # still one pause held
    impl.resume()
    assert real_isenabled()
    impl.resume()  # an unmatched resume changes nothing
    assert real_isenabled() and impl.depth() == 0
    impl.disable()
    impl.pause()
    impl.resume()
    assert not real_isenabled()  # off before the pause: off after it


def test_the_program_sees_and_sets_its_own_switch_during_a_pause(impl):
    """Before: gc.isenabled() read False during another thread's write (seen by this file's first
    test, 1 run in 10 or so), and a gc.disable() made during it was undone at its end."""
    impl.pause()
    assert impl.isenabled() and not real_isenabled()
    impl.disable()  # the program's, during the pause
    assert not impl.isenabled()
    impl.resume()
    assert not impl.isenabled() and not real_isenabled()  # kept off
    impl.pause()
    impl.enable()
    assert impl.isenabled() and not real_isenabled()  # (the pause holds it)
    impl.resume()
    assert impl.isenabled() and real_isenabled()


def test_the_program_s_gc_functions_are_the_pause_s():
    assert (gc.enable, gc.disable, gc.isenabled) == (gc_pause.enable, gc_pause.disable, gc_pause.isenabled)
    assert gc.isenabled is (gc_pause._c.isenabled if gc_pause._c is not None else gc_pause._py_isenabled)


def test_wake_is_consumed_by_the_wait():
    was = real_isenabled()
    gc_pause._gc_enable()
    try:
        wake = gc_pause.Wake()
        wake.set()
        wake.set()  # a second call while one is pending is the same call
        gc_pause.pause()
        gc_pause.idle(wake, 60.0)  # returns at once: pending
        assert not real_isenabled()  # paused again after the wait
        gc_pause.resume()
        gc_pause.pause()
        gc_pause.idle(wake, 0.01)  # nothing pending: the timeout
        gc_pause.resume()
        assert real_isenabled()
    finally:
        (gc_pause._gc_enable if was else gc_pause._gc_disable)()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_inherit_another_threads_pause():
    """The flush thread pauses; another thread forks meanwhile: the child has no flush thread to
    resume, and its collector must be the program's (the installed pause's fork hook)."""
    was = real_isenabled()
    gc_pause._gc_enable()
    gc_pause.pause()
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if real_isenabled() and gc_pause.depth() == 0 else 1)
    finally:
        gc_pause.resume()
        (gc_pause._gc_enable if was else gc_pause._gc_disable)()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_pause_inside_a_pause_on_the_same_thread_does_not_block(impl):
    """Review 56: a SIGTERM handler (the recorder's `finish`) that ran while the main thread was
    inside pause() or resume() paused again on that thread, and the lock, not re-entrant, hung the
    process for good. Here the Python form's lock is held as pause() holds it when the handler
    comes (the C form has no lock, and no handler runs inside it)."""
    import threading

    done = []

    def handler_inside_pause():
        gc_pause._lock.acquire()
        try:
            impl.pause()
            impl.resume()
            done.append(real_isenabled())
        finally:
            gc_pause._lock.release()

    t = threading.Thread(target=handler_inside_pause, daemon=True)
    t.start()
    t.join(10)
    assert done == [True]


INTERRUPTED = """\
import signal, sys, time
from runtime.manual import region
from runtime import gc_pause, probe, recorder

with region("start"):  # starts recording
    pass
armed = [False]


def interrupt(signum, frame):
    if armed[0]:
        armed[0] = False  # one at a time: the loop arms it again
        raise KeyboardInterrupt


def spin(deadline):
    while time.monotonic() < deadline:
        probe.set_enabled(False)
        probe.set_enabled(True)  # pauses the collector for the stale-visit check


signal.signal(signal.SIGALRM, interrupt)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
caught = 0
deadline = time.monotonic() + 1.5
for _ in range(100000):
    try:
        if time.monotonic() >= deadline:
            break
        armed[0] = True
        spin(deadline)
    except KeyboardInterrupt:
        caught += 1
armed[0] = False
signal.setitimer(signal.ITIMER_REAL, 0, 0)
end = time.monotonic() + 5
while gc_pause.depth() and time.monotonic() < end:  # the flush thread's own, between its waits
    time.sleep(0.001)
rec = recorder.get()
n = rec.flushes
while rec.flushes <= n + 2 and time.monotonic() < end:  # the flush thread still writes
    time.sleep(0.005)
print(caught, gc_pause.depth(), gc_pause._gc_isenabled(), rec.flushes > n + 2)
"""


@pytest.mark.skipif(gc_pause._c is None, reason="runtime._gcpause (C) not built: the Python form keeps the window")
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_keyboard_interrupts_caught_by_the_program_leave_no_pause_behind(tmp_path: Path):
    """Review 56 F2: a KeyboardInterrupt that the program catches, landing inside the Python pause
    or between a caller's pause() and its try:, left the collector off for good (a pause never
    resumed) or the flush thread blocked on the lock. Thousands of them here, at random points of
    `set_enabled` (before the C pause: hundreds of pauses left, collector off, no more writes)."""
    script = tmp_path / "prog.py"
    script.write_text(INTERRUPTED)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_FLUSH_INTERVAL="0.02",
                    SCALEPROBE_QUIET="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    caught, depth, on, writes = done.stdout.split()
    assert int(caught) > 100  # (the interrupts did land)
    assert (depth, on, writes) == ("0", "True", "True"), done.stdout
