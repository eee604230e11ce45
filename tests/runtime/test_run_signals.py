"""Review 38 #1: a program that handles SIGTERM or SIGINT itself (checkpoint and exit 0 on a Slurm
preemption, a loop that catches KeyboardInterrupt) was cut short, yet its run file ended `ok` and
the launcher recorded it `ok`: the modeler took it for a whole run. `runtime.run_signals` counts
the stop signals that come to the process, whoever's handler takes them."""
from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

needs_watch = pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None,
                                 reason="runtime._sigwatch is not built (no C compiler): nothing is counted")

# MODE "term": its own SIGTERM handler ends the loop; "int": it catches KeyboardInterrupt; "done":
# its own handler, and the loop ends by itself after a few steps
PROGRAM = '''\
import os, signal, sys, time
MODE = sys.argv[1]
stop = False


def on_term(signum, frame):
    global stop
    stop = True


def work():
    return sum(range(1000))


def main():
    if MODE in ("term", "done"):
        signal.signal(signal.SIGTERM, on_term)
    assert signal.getsignal(signal.SIGTERM) is (on_term if MODE != "int" else signal.getsignal(signal.SIGTERM))
    print("READY", os.getpid(), flush=True)
    steps = 0
    try:
        while not stop and (MODE != "done" or steps < 5):
            work()
            steps += 1
            time.sleep(0.02)
    except KeyboardInterrupt:
        print("CAUGHT", flush=True)
    print("SAVED", flush=True)


main()
'''


def _env() -> dict[str, str]:
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", SCALEPROBE_QUIET="1")
    return env


def _launch(tmp_path: Path, mode: str, signum: int | None) -> tuple[int, str, dict, dict]:
    (tmp_path / "prog.py").write_text(PROGRAM)
    cmd = [sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
           str(tmp_path / "prog.py"), mode]
    with subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        if signum is not None:
            time.sleep(0.3)
            proc.send_signal(signum)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        out = proc.stdout.read() + proc.stderr.read()
    [path] = list((tmp_path / "runs").rglob("*.jsonl"))
    [end] = [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "end"]
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    return code, out, end, record


@needs_watch
@pytest.mark.parametrize("mode, signum", [("term", signal.SIGTERM), ("int", signal.SIGINT)])
def test_a_stop_signal_the_program_handles_itself_marks_its_run_stopped(tmp_path, mode, signum):
    code, out, end, record = _launch(tmp_path, mode, signum)
    # the program behaves as without scaleprobe: its own handler ran, it saved and exited 0
    assert code == 0 and "SAVED" in out, (code, out)
    assert ("CAUGHT" in out) == (mode == "int"), out
    # ... and its run says it was cut short: the run file (what the modeler reads) and the launcher's record
    assert (end["status"], end["signal"], end["exit_code"]) == ("signal", signum, 0), end
    name = signal.Signals(signum).name
    assert (record["status"], record["error"], record["exit_code"]) == ("interrupted", f"interrupted by {name}", 0), record


@needs_watch
def test_a_program_with_its_own_handler_that_no_signal_reaches_ends_ok(tmp_path):
    code, out, end, record = _launch(tmp_path, "done", None)
    assert code == 0 and "SAVED" in out, (code, out)
    assert (end["status"], end["signal"]) == ("ok", None), end
    assert record["status"] == "ok", record


# In a process where counting started: signal.signal still behaves as signal.signal (its errors show
# no frame of ours), the program's handler is the one installed, and a fork counts its own arrivals.
CHECKS = '''\
import os, signal, sys, threading, traceback
from runtime import run_signals
errors = []
def in_thread():
    try:
        signal.signal(signal.SIGTERM, print)
    except ValueError:
        errors.append(traceback.format_exc())
t = threading.Thread(target=in_thread)  # the error as without scaleprobe
t.start(); t.join()
original = signal.signal
run_signals.start()
assert signal.signal is not original
mark = run_signals.mark()
seen = []
def handler(signum, frame):
    seen.append(signum)
assert signal.signal(signal.SIGTERM, handler) is signal.SIG_DFL
assert signal.getsignal(signal.SIGTERM) is handler
os.kill(os.getpid(), signal.SIGTERM)
assert seen == [signal.SIGTERM] and run_signals.since(mark) == signal.SIGTERM, (seen, run_signals.since(mark))
assert run_signals.since(run_signals.mark()) is None
t = threading.Thread(target=in_thread)
t.start(); t.join()
assert len(errors) == 2 and "run_signals" not in errors[1] and errors[0].count("File ") == errors[1].count("File "), errors
try:
    signal.signal(signal.NSIG + 5, handler)
except ValueError as exc:
    assert "signal number out of range" in str(exc) and "run_signals" not in "".join(traceback.format_exc())
else:
    raise AssertionError("no error")
pid = os.fork()
if pid == 0:
    ok = run_signals.since(mark) is None  # the parent's arrival is not the child's
    os.kill(os.getpid(), signal.SIGTERM)
    ok = ok and run_signals.since(mark) == signal.SIGTERM
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert status == 0, status
signal.signal(signal.SIGTERM, signal.SIG_DFL)
print("CHECKED")
'''


@needs_watch
def test_counting_leaves_signal_signal_as_it_was(tmp_path):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECKS)], env=_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "CHECKED" in p.stdout, (p.stdout, p.stderr)


WRAPPED = '''\
import signal
from runtime import run_signals
run_signals.start()  # the launcher
ours = signal.signal
calls = []
def theirs(signalnum, handler):  # a library's wrapper, put in after it
    calls.append(signalnum)
    return ours(signalnum, handler)
signal.signal = theirs
run_signals.start()  # the recorder, at the first instrumented import
assert signal.signal is theirs, signal.signal
m = run_signals.mark()
signal.signal(signal.SIGTERM, lambda s, f: None)
import os
os.kill(os.getpid(), signal.SIGTERM)
assert calls == [signal.SIGTERM] and run_signals.since(m) == signal.SIGTERM
print("KEPT")
'''


@needs_watch
def test_a_wrapper_put_in_after_counting_started_is_kept(tmp_path):
    p = subprocess.run([sys.executable, "-c", WRAPPED], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "KEPT" in p.stdout, (p.stdout, p.stderr)
