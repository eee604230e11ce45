"""Review 65 F3: signals other than SIGTERM and SIGINT whose default action ends the process (a
terminal or ssh session that closes: SIGHUP; Slurm's `--signal=USR1@T` warning; a CPU-time limit:
SIGXCPU; an alarm nobody handles) left a run file with its header alone: everything since the last
flush was lost, and the launcher's record of an in-process run said `running` for ever. The
recorder now stands in for them as for SIGTERM: it writes the data, then the process dies of the
signal, as uninstrumented; a main thread blocked in C is taken by the signal watch."""
from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# a region visited every 10 ms, in Python (the handler runs at once); or a main thread blocked in C
PROGRAM = '''\
import ctypes, os, signal, sys, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 5),))


def work():
    if __sp_on__: __sp_enter__(0)
    try:
        time.sleep(0.01)
    finally:
        if __sp_on__: __sp_exit__(0)


print("SEEN", int(signal.getsignal(int(sys.argv[1]))), flush=True)
for _ in range(20):
    work()
print("READY", os.getpid(), flush=True)
if sys.argv[2] == "blocked":
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)
while True:
    work()
'''

SIGNALS = [s for s in ("SIGHUP", "SIGUSR1", "SIGXCPU", "SIGALRM") if hasattr(signal, s)]


def _env(tmp_path: Path) -> dict[str, str]:
    # a flush interval longer than the test: without the stand-in nothing but the header is written
    return clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_FLUSH_INTERVAL="60",
                     SCALEPROBE_OUT=str(tmp_path / "direct"))


def _at_default(signum: int):
    """A preexec_fn: `signum` at its default action in the child, as in a terminal (a test run under
    `nohup` has SIGHUP ignored, and the program, instrumented or not, would ignore it too)."""
    return lambda: signal.signal(signum, signal.SIG_DFL)


def _signal_it(tmp_path: Path, cmd: list[str], signum: int) -> tuple[int, str]:
    """(exit status, what it printed first and its stderr) of `cmd`, sent `signum` once it works."""
    with subprocess.Popen(cmd, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True, preexec_fn=_at_default(signum)) as proc:
        seen = proc.stdout.readline()
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        time.sleep(0.3)
        proc.send_signal(signum)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"{signal.Signals(signum).name}: the process lived on after it")
        return code, seen + proc.stderr.read()


def _records(root: Path) -> list[dict]:
    [path] = list(root.rglob("*.jsonl"))
    text = path.read_text()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


def _check_written(records: list[dict], signum: int) -> None:
    ends = [r for r in records if r["type"] == "end"]
    assert len(ends) == 1 and records[-1] is ends[0], records[-3:]
    assert (ends[0]["status"], ends[0]["signal"], ends[0]["exit_code"]) == ("signal", signum, 128 + signum), ends[0]
    visits = sum(r["visits"] for r in records if r["type"] == "profile" and r["path"][-1] == 0)
    assert visits >= 20, visits  # the work before the signal is there


@pytest.mark.parametrize("name", SIGNALS)
def test_a_signal_left_to_its_default_action_writes_the_data_and_kills_as_before(tmp_path, name):
    signum = getattr(signal, name)
    (tmp_path / "prog.py").write_text(PROGRAM)
    code, out = _signal_it(tmp_path, [sys.executable, "prog.py", str(int(signum)), "python"], signum)
    assert code == -signum, (code, out)
    assert out.startswith("SEEN 0"), out  # the program sees the default action (signal_disguise)
    _check_written(_records(tmp_path / "direct"), signum)


@pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None, reason="runtime._sigwatch is not built: no watch")
def test_a_sighup_to_a_main_thread_blocked_in_c_is_taken_by_the_watch(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    code, out = _signal_it(tmp_path, [sys.executable, "prog.py", str(int(signal.SIGHUP)), "blocked"], signal.SIGHUP)
    assert code == -signal.SIGHUP, (code, out)  # before: only the Python handler, which never ran
    _check_written(_records(tmp_path / "direct"), signal.SIGHUP)


def test_a_sighup_to_a_run_in_the_launchers_own_process_ends_its_record(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    cmd = [sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "prog.py",
           str(int(signal.SIGHUP)), "python"]
    code, out = _signal_it(tmp_path, cmd, signal.SIGHUP)
    assert code == -signal.SIGHUP, (code, out)
    _check_written(_records(tmp_path / "runs"), signal.SIGHUP)
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    assert (record["status"], record["error"]) == ("interrupted", "interrupted by SIGHUP"), record


# faulthandler.register(SIGUSR1), the usual way to see where a hung run is, installs a C handler that
# signal.getsignal reports as SIG_DFL: a stand-in of ours would replace it (and could not call it)
FAULTHANDLER = '''\
import faulthandler, os, signal, sys, time
faulthandler.register(signal.SIGUSR1, file=sys.stdout)
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 5),))
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.2)
print("ALIVE", flush=True)
'''


@pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None,
                    reason="runtime._sigwatch is not built: a C handler cannot be told from SIG_DFL")
def test_a_c_handler_that_python_does_not_know_of_is_left_in_place(tmp_path):
    (tmp_path / "prog.py").write_text(FAULTHANDLER)
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "Current thread" in p.stdout and p.stdout.endswith("ALIVE\n"), (p.returncode, p.stdout,
                                                                                                  p.stderr)
    [end] = [r for r in _records(tmp_path / "direct") if r["type"] == "end"]
    assert end["status"] == "ok", end
