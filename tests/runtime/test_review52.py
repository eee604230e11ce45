"""Review 52: visits left open (probes switched off before they ended) on every thread and
however the run ends, end as dropped visits do: no visit, no own time, their closed children's
time as their inclusive time (commit ec5bd8d's rule, which held only for the main thread at its
own exits and at a normal end)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import read_run

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

SCHEDULED_EXEC = """\
import os, shutil, sys

def work(n):
    return sum(i * i for i in range(n))

def train():
    total = 0
    for step in range(8):  # scaleprobe: step
        total += work(20000)
    return total

def main():
    print(train(), flush=True)
    if sys.argv[1] == "exec":
        os.execv(shutil.which("true"), ["true"])

main()
"""

THREAD_LEFT_OPEN = """\
import threading
from runtime.probe import set_enabled

def work(n):
    return sum(i * i for i in range(n))

measured, off = threading.Event(), threading.Event()

def helper():
    for k in range(3):
        work(20000)
        if k == 0:
            measured.set()
            off.wait(10)  # probes go off here: the loop and helper end unseen

def main():
    t = threading.Thread(target=helper, daemon=DAEMON)
    t.start()
    measured.wait(10)
    set_enabled(False)
    off.set()
    if not DAEMON:
        t.join()
    work(1000)

main()
"""


def _build_and_run(tmp_path: Path, source: str, args: list[str], **env: str):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(source)
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), **env)
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=e,
                   check=True, timeout=120)
    done = subprocess.run([sys.executable, "main.py", *args], cwd=out, env=e, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    [f] = (tmp_path / "runs").glob("*.jsonl")
    return read_run(f)


def _named(run) -> dict[tuple[str, ...], object]:
    names = {rid: reg.name for rid, reg in run.regions.items()}
    return {tuple(names[i] for i in p): st for p, st in run.profile.items()}


def _assert_exact(run) -> None:
    """Every path's parent is in the profile, its inclusive time is its exclusive time plus its
    children's (to the ns the pure backend rounds to), and the exclusive times add up to the roots'."""
    prof = run.profile
    for path, st in prof.items():
        assert len(path) == 1 or path[:-1] in prof, f"orphan {path}"
        kids = [k for k in prof if len(k) == len(path) + 1 and k[:-1] == path]
        assert abs(st.incl_ns - st.excl_ns - sum(prof[k].incl_ns for k in kids)) <= len(kids) + 1, path
    roots = sum(st.incl_ns for p, st in prof.items() if len(p) == 1)
    assert abs(sum(st.excl_ns for st in prof.values()) - roots) <= len(prof)


@pytest.mark.parametrize("pure", ["0", "1"])
@pytest.mark.parametrize("how", ["exit", "exec"])
def test_visits_a_schedule_left_open_end_as_dropped_whatever_ends_the_run(tmp_path, pure, how):
    """F4: an image that ended by exec (and a run that SIGTERM's default action ended) counted the
    visits the schedule had left open as whole ones: the time outside the window became the step
    loop's own (13 ms against 3.9 ms measured)."""
    run = _build_and_run(tmp_path, SCHEDULED_EXEC, [how], SCALEPROBE_PURE=pure,
                         SCALEPROBE_SCHEDULE="skip_first=2,wait=0,warmup=0,active=2,repeat=1")
    assert run.end["status"] == {"exit": "ok", "exec": "exec"}[how]
    p = _named(run)
    loop = next(k for k in p if len(k) == 3 and k[2].startswith("train:for@"))
    assert [(p[k].visits, p[k].excl_ns) for k in (("main",), ("main", "train"), loop)] == [(0, 0)] * 3, \
        {k: (v.visits, v.excl_ns) for k, v in p.items()}
    assert p[(*loop, "work")].visits == 2  # the two active steps
    assert run.end["dropped"] == 3 and run.end["closed_at_end"] == 0
    _assert_exact(run)


@pytest.mark.parametrize("pure", ["0", "1"])
@pytest.mark.parametrize("daemon", [False, True])
def test_a_thread_s_visits_left_open_end_as_dropped(tmp_path, pure, daemon):
    """F5: a thread that ended (or, a daemon, ran on) with visits the probes left open: its closed
    children were in the profile under paths that were not (orphans, shown as roots by the report),
    or, a daemon's, its loop counted whole, its own time the time the probes were off."""
    run = _build_and_run(tmp_path, THREAD_LEFT_OPEN.replace("DAEMON", str(daemon)), [], SCALEPROBE_PURE=pure)
    p = _named(run)
    loop = next(k for k in p if len(k) == 2 and k[0] == "helper")
    assert p[(*loop, "work")].visits == 1, {k: (v.visits, v.excl_ns) for k, v in p.items()}
    assert [(p[k].visits, p[k].excl_ns) for k in (("helper",), loop)] == [(0, 0)] * 2
    assert run.end["closed_at_end"] == 0 and run.end["dropped"] >= 2
    _assert_exact(run)
