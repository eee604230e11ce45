"""A SIGTERM sent to a forked child whose handler is scaleprobe's stand-in for the default action
(the launcher's, the recorder's) must end the child, as the kernel's default action would without
scaleprobe. Two ways it was lost, each of which left a `Pool.terminate()` waiting forever:

- sent before the child first ran: CPython clears arrived signals in a fresh child
  (`runtime.fork_signals` blocks them across fork);
- sent just before the child's main thread blocked on a lock: the C handler took it and the Python
  handler never ran (`runtime.signal_watch`: the flush thread takes it after a grace period).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import signal_watch
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "sched_setaffinity"),
                                reason="needs fork and sched_setaffinity (Linux)")

# On one CPU the parent goes on after fork() and signals the child before the child has run once.
EARLY = '''\
import os, signal, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
outcomes = []
for i in range(5):
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(7)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 2.0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            outcomes.append(os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            outcomes.append(0)
            break
        time.sleep(0.01)
print("OUTCOMES", outcomes)
'''

# The child's main thread blocks where a signal never reaches Python: pthread_mutex_lock on a mutex
# it holds (glibc restarts the futex wait after the C handler), as a lost wakeup leaves a Pool
# worker in sem_wait. MODE says what the program did first; the parent waits DEADLINE seconds for
# the child to end after its SIGTERM. The child writes its mutex's address to READY: the signal is
# sent once its main thread waits on it (/proc's syscall file: the futex is the first argument).
# Sent before, it reaches Python (the program's own handler would end the child).
BLOCKED = '''\
import ctypes, os, signal, sys, time

def work():
    return sum(range(1000))

MODE, READY, DEADLINE = sys.argv[1], sys.argv[2], float(sys.argv[3])
if MODE == "own-handler":
    signal.signal(signal.SIGTERM, lambda s, f: os._exit(3))
work()
pid = os.fork()
if pid == 0:
    work()
    print("CHILD-FD", signal.set_wakeup_fd(-1), flush=True)
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
    with open(READY + ".tmp", "w") as f:
        f.write(hex(ctypes.addressof(mutex)))
    os.rename(READY + ".tmp", READY)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # blocks for good; signals do not end the wait
    os._exit(0)
deadline = time.monotonic() + 60
while True:
    try:
        with open(READY) as f, open(f"/proc/{pid}/task/{pid}/syscall") as g:
            if g.read().split()[1:2] == [f.read()]:
                break
    except FileNotFoundError:
        pass
    except PermissionError:  # no ptrace access to the child's /proc files: give it a second to block
        time.sleep(1.0)
        break
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        sys.exit("the child never blocked on its mutex")
    time.sleep(0.01)
os.kill(pid, signal.SIGTERM)
deadline = time.monotonic() + DEADLINE
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("CHILD survived", flush=True)
        sys.exit(0)
    time.sleep(0.02)
print("CHILD", "signal" if os.WIFSIGNALED(status) else "exit",
      os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)
'''

# A forked worker that stops a child of its own early (its own Pool.terminate()) must live on
# (review 16 F0: the grandchild's signal was counted in the worker, whose watch then killed it),
# and its fds stay its own (F1: a wakeup-fd pipe read by the flush thread stole a program's data).
NESTED = '''\
import os, signal, sys, time

def work():
    return sum(range(1000))

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the grandchild has not run when it is signalled
work()
pid = os.fork()
if pid == 0:
    work()
    for i in range(5):
        g = os.fork()
        if g == 0:
            time.sleep(5)
            os._exit(0)
        os.kill(g, signal.SIGTERM)
        os.waitpid(g, 0)
    os.closerange(3, 256)  # as daemons do
    pipes = [os.pipe() for _ in range(6)]
    for r, w in pipes:
        os.write(w, b"x" * 100)
    time.sleep(1.5)  # three grace periods of the watch
    for r, w in pipes:
        os.set_blocking(r, False)
        try:
            print("WORKER read", len(os.read(r, 1000)), flush=True)
        except BlockingIOError:
            print("WORKER read 0", flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("WORKER", "signal" if os.WIFSIGNALED(status) else "exit",
      os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)
'''


# How long the parent waits for the SIGTERMed child: where the watch must end it (8 s, under load
# too), and where it must not: twice the longest a wrong take could come after the signal (the
# grace period, the main process's longer one to be safe, and the poll that sees it): 2.4 s today.
KILLED_S = 8.0
SURVIVES_S = 2 * (max(signal_watch.GRACE_S, signal_watch.MAIN_GRACE_S) + signal_watch.POLL_S)


def _env() -> dict[str, str]:
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    return env


def _launch(tmp_path: Path, script: str, *args: str, instrument: bool = True) -> subprocess.CompletedProcess:
    (tmp_path / "prog.py").write_text(script)
    cmd = [sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs")]
    cmd += ["--instrument"] if instrument else []
    return subprocess.run([*cmd, str(tmp_path / "prog.py"), *args], env=_env(), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("instrument", [False, True], ids=["launcher", "launcher+recorder"])
def test_a_sigterm_sent_before_the_child_first_runs_ends_it(tmp_path, instrument):
    proc = _launch(tmp_path, EARLY, instrument=instrument)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOMES"))
    assert line == "OUTCOMES [15, 15, 15, 15, 15]", line  # 0: survived the SIGTERM, killed after 2 s


def _child_files(tmp_path: Path) -> list[dict]:
    ends = []
    for path in (tmp_path / "runs").rglob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if records and records[0].get("forked_from"):
            ends.append(records[-1])
    return ends


def _has_sigwatch() -> bool:
    import importlib.util

    return importlib.util.find_spec("runtime._sigwatch") is not None


@pytest.mark.skipif(not _has_sigwatch(), reason="runtime._sigwatch is not built (no C compiler): no watch")
def test_a_stand_in_sigterm_that_never_reaches_python_still_ends_the_forked_child(tmp_path):
    proc = _launch(tmp_path, BLOCKED, "plain", str(tmp_path / "ready"), str(KILLED_S))
    assert "CHILD-FD -1" in proc.stdout, proc.stdout + proc.stderr  # no wakeup fd of ours (review 16 F7)
    assert "CHILD signal 15" in proc.stdout, proc.stdout + proc.stderr
    ends = _child_files(tmp_path)
    assert len(ends) == 1 and ends[0]["type"] == "end", ends
    assert ends[0]["status"] == "signal" and ends[0]["signal"] == 15, ends[0]


def test_the_watch_leaves_a_program_that_handles_sigterm_itself_alone(tmp_path):
    # its handler never runs either (the thread is blocked for good): the child lives on, as without us
    proc = _launch(tmp_path, BLOCKED, "own-handler", str(tmp_path / "ready"), str(SURVIVES_S))
    assert "CHILD survived" in proc.stdout, proc.stdout + proc.stderr


def test_a_worker_that_stops_its_own_child_lives_on_and_keeps_its_fds(tmp_path):
    proc = _launch(tmp_path, NESTED)
    assert proc.stdout.count("WORKER read 100") == 6, proc.stdout + proc.stderr
    assert "WORKER exit 0" in proc.stdout, proc.stdout + proc.stderr
    plain = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=_env(), capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert plain.stdout == proc.stdout


def test_without_the_flush_thread_nothing_is_watched(tmp_path):
    env = _env()
    env["SCALEPROBE_FLUSH_INTERVAL"] = "0"
    (tmp_path / "prog.py").write_text(BLOCKED)
    proc = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
                           str(tmp_path / "prog.py"), "plain", str(tmp_path / "ready"), str(SURVIVES_S)], env=env,
                          capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert "CHILD survived" in proc.stdout, proc.stdout + proc.stderr


# The program puts a C handler of its own on SIGTERM (ctypes, an extension) after the stand-in:
# the signal is the program's, and its forked worker lives on (review 17 F1: the watch went in
# front of any C handler and killed the worker half a second later).
OWN_C_HANDLER = '''\\
import ctypes, os, signal, time
libc = ctypes.CDLL(None)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.signal(signal.SIGTERM, ctypes.cast(libc.srand, ctypes.c_void_p))  # a C handler that does nothing

def work():
    return sum(range(1000))

work()
pid = os.fork()
if pid == 0:
    work()
    time.sleep(2)
    os._exit(0)
time.sleep(0.5)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("CHILD", "signal" if os.WIFSIGNALED(status) else "exit",
      os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)
'''


def test_a_sigterm_the_program_handles_in_c_is_left_to_it(tmp_path):
    proc = _launch(tmp_path, OWN_C_HANDLER)
    plain = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=_env(), capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert plain.stdout == "CHILD exit 0\n"
    assert proc.stdout == plain.stdout, proc.stdout + proc.stderr
