"""A SIGTERM that comes to a forked worker just as it starts writing its end record on its own.

`Pool.terminate()` sends SIGTERM to a worker that may be leaving its loop for good (terminate() also
sends the end of its tasks): its exit writes the end record (`Recorder._finish`, from
multiprocessing's finalizers). The recorder's stand-in SIGTERM handler that ran right after
`_finish` had set `finishing`, before it had said whose (`finishing_thread`), took the write for the
signal watch's in another thread, waited for nothing (the lock is re-entrant) and ended the process:
its file had its header and no end record (test_sigterm_blocked's pool test, about one run in 10).

Here the signal is sent at exactly that point: a trace function in the child's main thread sends it
at the first line of `_finish` run once `finishing` is set. The child dies of SIGTERM, as it
would without scaleprobe, and its file ends with its end record.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROG = '''\
import multiprocessing as mp, os, signal, sys
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 3),))
import runtime.recorder as recorder

FINISH = recorder.Recorder._finish.__code__


def at_finishing(frame, event, arg):
    rec = frame.f_locals.get("self")
    if event == "line" and rec is not None and rec.finishing:
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, in this very frame's thread
        return None
    return at_finishing


def tracer(frame, event, arg):
    return at_finishing if frame.f_code is FINISH else None


def work():
    sys.settrace(tracer)  # the child's main thread, whose exit writes the end record


if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=work)
    p.start()
    p.join()
    print("CHILD", p.exitcode, flush=True)
'''


def _env(**extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", SCALEPROBE_QUIET="1", **extra)
    return env


@pytest.mark.parametrize("launcher", [True, False], ids=["launcher", "plain"])
def test_a_worker_signalled_as_it_starts_its_end_record_writes_it(tmp_path, launcher):
    (tmp_path / "prog.py").write_text(PROG)
    out = tmp_path / "runs"
    if launcher:  # the launcher's SIGTERM handler, which ends a forked child, is the one chained to
        cmd, env = [sys.executable, "-m", "runtime.launch", "--out", str(out), str(tmp_path / "prog.py")], _env()
    else:  # SIGTERM at its default action: the recorder's handler stands in for it
        cmd, env = [sys.executable, str(tmp_path / "prog.py")], _env(SCALEPROBE_OUT=str(out))
    p = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    [line] = [ln for ln in p.stdout.splitlines() if ln.startswith("CHILD ")]
    assert p.returncode == 0 and line.split()[1] == str(-signal.SIGTERM), (p.stdout, p.stderr)
    files = sorted(out.rglob("*.jsonl"))
    assert len(files) == 2, files
    for path in files:
        text = path.read_text()
        assert text.endswith("\n"), text[-300:]
        records = [json.loads(ln) for ln in text.splitlines()]
        ends = [r for r in records if r["type"] == "end"]
        assert len(ends) == 1, (path.name, text[-600:])
        if "forked_from" in records[0]:  # the child: the signal came as it was ending
            assert ends[0]["signal"] == signal.SIGTERM and ends[0]["status"] == "signal", ends[0]
