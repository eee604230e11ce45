"""Review 36, a user's sweep of a modern DDP project: threads per rank as torchrun sets them, a resume
that remakes finished runs says why, a separator typo in --sweep is named; a run whose ranks exit 0
after a signal stays interrupted (review 37)."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime.launch_ranks import Member, run_members
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
# one write of one line: two ranks' lines never mix on the shared pipe (print writes its parts apart
# where PYTHONUNBUFFERED is set)
PRINT_ENV = ('import os, sys\nos.write(1, f"OMP {os.environ.get(\'OMP_NUM_THREADS\')} {os.environ.get(\'RANK\')} '
             '{sys.argv[1:]}\\n".encode())\n')


def launch(tmp_path, *args, env=None):
    e = clean_env(PYTHONPATH=str(REPO))
    e.pop("OMP_NUM_THREADS", None)  # the launcher's choice is what these tests check
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=tmp_path, env=e,
                          capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def sigterm_fails_the_test():
    """run_members runs in this process, pytest's: a SIGTERM that reaches it outside the launcher's
    inbox (whose exit puts back what was there before) fails the test instead of ending the session."""
    stray = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: stray.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
    assert not stray, "a SIGTERM reached this process outside the launcher's inbox"


def test_ranks_get_one_openmp_thread_each_as_under_torchrun(tmp_path):
    (tmp_path / "t.py").write_text(PRINT_ENV)
    p = launch(tmp_path, "--out", "runs", "--nproc", "2", "t.py")
    assert p.returncode == 0, p.stderr
    assert sorted(line for line in p.stdout.splitlines() if line.startswith("OMP")) == ["OMP 1 0 []", "OMP 1 1 []"]
    assert p.stderr.count("OMP_NUM_THREADS=1 in each of the 2 ranks") == 1
    mine = launch(tmp_path, "--out", "runs2", "--nproc", "2", "t.py", env={"OMP_NUM_THREADS": "3"})
    assert sorted(line for line in mine.stdout.splitlines() if line.startswith("OMP")) == ["OMP 3 0 []", "OMP 3 1 []"]
    assert "OMP_NUM_THREADS=1" not in mine.stderr  # the user's choice stands, unsaid
    one = launch(tmp_path, "--out", "runs3", "t.py")  # one rank, in the launcher's process
    assert "OMP None 0 []" in one.stdout and "OMP_NUM_THREADS" not in one.stderr


def test_a_sweep_over_ranks_gives_its_ranks_1_runs_one_thread_too(tmp_path):
    """Review 39: in a sweep over ranks, ranks=1 had every core and ranks=2 one thread each: the model
    of the ranks fitted the change of threads."""
    (tmp_path / "t.py").write_text(PRINT_ENV)
    p = launch(tmp_path, "--out", "runs", "--sweep", "ranks=1,2", "t.py")
    assert p.returncode == 0, p.stderr
    assert sorted(line for line in p.stdout.splitlines() if line.startswith("OMP")) == ["OMP 1 0 []", "OMP 1 0 []", "OMP 1 1 []"]
    assert p.stderr.count("OMP_NUM_THREADS=1 in every rank of every run (ranks=1 too") == 1, p.stderr
    mine = launch(tmp_path, "--out", "runs2", "--sweep", "ranks=1,2", "t.py", env={"OMP_NUM_THREADS": "2"})
    assert sorted(line for line in mine.stdout.splitlines() if line.startswith("OMP")) == ["OMP 2 0 []", "OMP 2 0 []", "OMP 2 1 []"]
    alone = launch(tmp_path, "--out", "runs3", "--sweep", "batch=1,2", "t.py")  # ranks=1 throughout: as it was
    assert [line for line in alone.stdout.splitlines() if line.startswith("OMP")] == ["OMP None 0 []"] * 2, alone.stdout


def test_a_resume_that_remakes_finished_runs_for_another_command_says_so(tmp_path):
    (tmp_path / "t.py").write_text(PRINT_ENV)
    first = launch(tmp_path, "--out", "runs", "--sweep", "batch=1,2", "--", "t.py", "--steps", "3")
    assert first.returncode == 0, first.stderr
    again = launch(tmp_path, "--out", "runs", "--sweep", "batch=1,2", "--", "t.py", "--steps", "3")
    assert "OMP" not in again.stdout  # both done: nothing remade, nothing said
    assert "another program command" not in again.stderr
    dry = launch(tmp_path, "--out", "runs", "--sweep", "batch=1,2", "--dry-run", "--", "t.py", "--steps", "4")
    assert dry.stdout.count("recorded as completed, but by another program command (t.py --steps 3)") == 2, dry.stdout
    edited = launch(tmp_path, "--out", "runs", "--sweep", "batch=1,2", "--", "t.py", "--steps", "4")
    assert edited.stderr.count("recorded as completed, but by another program command (t.py --steps 3): "
                               "making it again") == 2, edited.stderr


def test_a_sweep_value_of_numbers_joined_by_another_separator_is_named(tmp_path):
    (tmp_path / "t.py").write_text(PRINT_ENV)
    p = launch(tmp_path, "--out", "runs", "--sweep", "batch=32;64", "--dry-run", "--", "t.py", "{batch}")
    assert "batch='32;64' is one value, not 2: values are separated by ',' (batch=32,64)" in p.stderr, p.stderr
    fine = launch(tmp_path, "--out", "runs", "--sweep", "batch=32", "--sweep", "model=resnet", "--dry-run", "--", "t.py")
    assert "warning" not in fine.stderr.replace("warning: t.py has no probes", "")  # review 128 MED-3: its own


def test_ranks_that_exit_0_after_a_signal_still_make_an_interrupted_run(tmp_path):
    """Review 36 asked that ranks which had finished as the signal came make a complete run; review 37
    found what that costs: a program that checkpoints and exits 0 on SIGTERM (preemptible jobs) was
    recorded complete, cut short, and a resume skipped it. The launcher cannot tell the two apart,
    so such a run stays `interrupted` (a resume makes it again)."""
    prog = ("import os, pathlib, signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "os.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(5)\npathlib.Path(sys.argv[1]).write_text('')\n")
    members = [Member([sys.executable, "-c", prog, str(tmp_path / f"finished{rank}")], clean_env(), rank)
               for rank in range(2)]
    with sigterm_fails_the_test():
        outcome = run_members(members, tmp_path, grace=10.0)
    assert (outcome.status, outcome.signal) == ("interrupted", signal.SIGTERM)
    # the ranks ended on the signal, with status 0, before their work was done
    assert not [rank for rank in range(2) if (tmp_path / f"finished{rank}").exists()]


def test_modeler_names_the_runs_left_out_when_one_point_is_left(tmp_path):
    """An interrupted sweep of two parameters left one completed run: the error told the user to
    sweep a parameter."""
    sys.path.insert(0, str(REPO / "tests" / "modeler"))
    try:
        from modeler_synthetic_runs import write_rank_file
    finally:
        sys.path.pop(0)
    profile = {(0,): (1, 5_000_000, 5_000_000)}
    write_rank_file(tmp_path / "a", run_id="a", params={"batch": 32, "width": 64}, profile=profile)
    write_rank_file(tmp_path / "b", run_id="b", params={"batch": 64, "width": 64}, profile=profile, end=None)
    p = subprocess.run([sys.executable, "-m", "modeler", "fit", str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert p.returncode != 0
    assert "left out" in p.stderr
    assert "what is left after the 1 run(s) left out above was measured at one point" in p.stderr, p.stderr
    assert "sweep at least one parameter" not in p.stderr


def test_a_signal_that_comes_after_the_ranks_ended_is_not_dropped(tmp_path, monkeypatch):
    """Review 38: the launcher's inbox for one run dropped a signal that came after its ranks had all
    ended, before it saw them end: the sweep went on and exited 0. The run stands as it ended, and
    its outcome carries the signal, which stops the sweep (`sweep_run._execute`)."""
    from runtime import launch_ranks

    # Each rank says its pid, then waits for `go`: the launcher's first poll finds both running.
    prog = ("import os, pathlib, sys, time\npathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\n"
            "deadline = time.monotonic() + 60\nwhile not os.path.exists(sys.argv[2]):\n"
            "    if time.monotonic() > deadline:\n        sys.exit(1)\n    time.sleep(0.005)\n")
    go = tmp_path / "go"
    members = [Member([sys.executable, "-c", prog, str(tmp_path / f"pid{rank}"), str(go)], clean_env(), rank)
               for rank in range(2)]
    sent = []

    def pids():
        try:
            return [int((tmp_path / f"pid{rank}").read_text()) for rank in range(2)]
        except (FileNotFoundError, ValueError):  # not written yet
            return None

    def sleep(seconds):  # the launcher's wait before its next poll: both ranks end in it, then the signal comes
        if sent:
            return time.sleep(seconds)
        deadline = time.monotonic() + 60
        while pids() is None:
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.005)
        go.touch()
        for pid in pids():  # until the rank has exited; left unreaped, for the launcher's poll
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        sent.append(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # its handler has run when this returns

    monkeypatch.setattr(launch_ranks, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    with sigterm_fails_the_test():
        outcome = run_members(members, tmp_path, grace=10.0)
    assert sent == [signal.SIGTERM]
    assert (outcome.status, outcome.exit_code, outcome.signal) == ("ok", 0, signal.SIGTERM)


def test_a_child_the_program_forks_leaves_the_launchers_record_alone(tmp_path):
    """Review 38: a forked child that leaves by sys.exit() unwinds through the launcher's frames (the
    program runs in the launcher's process) and rewrote the run's launch.json mid-run."""
    (tmp_path / "prog.py").write_text(
        "import glob, json, os, sys, time\npid = os.fork()\nif pid == 0:\n    time.sleep(0.2)\n    sys.exit(0)\n"
        "time.sleep(1.5)\n[p] = glob.glob(os.environ['SCALEPROBE_OUT'] + '/launch.json')\n"
        "print('MID', json.load(open(p))['status'], flush=True)\nos.waitpid(pid, 0)\nraise SystemExit(3)\n")
    p = launch(tmp_path, "--out", "runs", "prog.py")
    assert p.returncode == 3
    assert "MID running" in p.stdout, p.stdout
    assert p.stderr.count("scaleprobe launch: run failed") == 1, p.stderr  # the parent's; none of the child's
    [record] = [json.loads(f.read_text()) for f in (tmp_path / "runs").rglob("launch.json")]
    assert (record["status"], record["exit_code"]) == ("failed", 3)
