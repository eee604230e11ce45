"""Review 83 LOW-6: SIGVTALRM and SIGPROF end a process by default (a profiling timer, `setitimer`,
that nothing handles), and left a run file without its end record, everything since the last flush
lost. The recorder stands in for them as for SIGHUP or SIGALRM: it writes the data, then the
process dies of the signal. A handler the program installed for them (a sampling profiler's) is
left alone: chained, it would flush the run file at every tick of the profiler's timer."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROBES = '''\
import signal, sys, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 5),))


def work():
    if __sp_on__: __sp_enter__(0)
    try:
        x = 0
        for i in range(2000):
            x += i
    finally:
        if __sp_on__: __sp_exit__(0)
'''

# the timer fires after some CPU time, with the signal at its default action
AT_DEFAULT = PROBES + '''
signum = int(sys.argv[1])
print("SEEN", int(signal.getsignal(signum)), flush=True)
for _ in range(20):
    work()
which = signal.ITIMER_VIRTUAL if signum == signal.SIGVTALRM else signal.ITIMER_PROF
signal.setitimer(which, 0.05)
while True:
    work()
'''

# a sampling profiler's handler, installed before recording starts, ticking every millisecond of CPU
PROFILER = '''\
import signal
ticks = []
def sample(signum, frame):
    ticks.append(frame is not None)
signal.signal(signal.SIGPROF, sample)
''' + PROBES + '''
signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
while len(ticks) < 50:
    work()
signal.setitimer(signal.ITIMER_PROF, 0)
print("OURS", signal.getsignal(signal.SIGPROF) is sample, flush=True)
'''

SIGNALS = [s for s in ("SIGVTALRM", "SIGPROF") if hasattr(signal, s)]


def _env(tmp_path: Path) -> dict[str, str]:
    # a flush interval longer than the test: without the stand-in nothing but the header is written
    return clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_FLUSH_INTERVAL="60",
                     SCALEPROBE_OUT=str(tmp_path / "out"))


def _records(tmp_path: Path) -> list[dict]:
    [path] = list((tmp_path / "out").rglob("*.jsonl"))
    text = path.read_text()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("name", SIGNALS)
def test_a_profiling_timer_nothing_handles_writes_the_data_and_kills_as_before(tmp_path, name):
    signum = int(getattr(signal, name))
    (tmp_path / "prog.py").write_text(AT_DEFAULT)
    p = subprocess.run([sys.executable, "prog.py", str(signum)], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                       text=True, timeout=60, preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    assert p.returncode == -signum, (p.returncode, p.stdout, p.stderr)  # dies of it, as uninstrumented
    assert p.stdout.startswith("SEEN 0"), p.stdout  # the program sees the default action
    records = _records(tmp_path)
    ends = [r for r in records if r["type"] == "end"]  # before: the header alone
    assert len(ends) == 1 and records[-1] is ends[0], records[-3:]
    assert (ends[0]["status"], ends[0]["signal"], ends[0]["exit_code"]) == ("signal", signum, 128 + signum), ends[0]
    assert sum(r["visits"] for r in records if r["type"] == "profile" and r["path"] == [0]) >= 20


@pytest.mark.skipif(not hasattr(signal, "SIGPROF"), reason="no SIGPROF")
def test_a_profilers_own_handler_is_left_alone(tmp_path):
    (tmp_path / "prog.py").write_text(PROFILER)
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout == "OURS True\n", (p.returncode, p.stdout, p.stderr)
    [end] = [r for r in _records(tmp_path) if r["type"] == "end"]
    # not chained: a chained handler flushes at every tick (50 of them)
    assert (end["status"], end["flushes"]) == ("ok", 1), end
