"""Review 91, docs/launch.md against the launcher: an error in a process the rank forked is not the
rank's (F1); a KeyboardInterrupt the program raised itself is not SIGINT's (F2); a run directory
name too long for the file system is an error naming the parameter (F3); a program that replaces
the launcher's own process with os.exec* is not recorded with exit status 0 (F4); a resume compares
--ranks-by-program, --spawn and the interpreter's options (F5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import launch
from tests.envclean import clean_env
from tests.runtime.test_review71_launch import here  # noqa: F401 (the fixture: a clean launcher environment)

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "launch.md").read_text()

# the child of a raw os.fork() ends in an exception; the rank itself ends normally (exit status 0)
FORKS = ("import os\n"
         "pid = os.fork()\n"
         "if pid == 0:\n"
         "    raise ValueError('child broke')\n"
         "os.waitpid(pid, 0)\n"
         "print('parent ok', flush=True)\n")

# actions by argument: kbint=R (rank R raises KeyboardInterrupt itself), term=R (rank R sends
# itself SIGTERM), int=R (rank R sends itself SIGINT), sleep=R:S, exec=N (replace itself with a
# python that exits N)
PROG = ("import os, signal, sys, time\n"
        "rank = int(os.environ.get('RANK', '0'))\n"
        "for a in sys.argv[1:]:\n"
        "    k, _, v = a.partition('=')\n"
        "    if k == 'sleep':\n"
        "        r, s = v.split(':')\n"
        "        if rank == int(r): time.sleep(float(s))\n"
        "    if k == 'kbint' and rank == int(v): raise KeyboardInterrupt('self-raised')\n"
        "    if k == 'term' and rank == int(v): os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "    if k == 'int' and rank == int(v): os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
        "    if k == 'exec':\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'import sys; sys.exit(%s)' % v])\n")

# a --spawn command: starts N copies of the command with RANK/WORLD_SIZE set and waits for all
FAKESPAWN = ("import os, subprocess, sys\n"
             "n = int(sys.argv[1])\n"
             "procs = [subprocess.Popen(sys.argv[2:], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),\n"
             "         WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))) for r in range(n)]\n"
             "sys.exit(max(p.wait() for p in procs))\n")


def run(tmp_path, *args, python=(), env=None, timeout=120):
    e = clean_env(PYTHONPATH=str(REPO))
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    return subprocess.run([sys.executable, *python, "-m", "runtime.launch", "--out", "runs", *args], cwd=tmp_path,
                          env=e, capture_output=True, text=True, timeout=timeout)


def run_dir(tmp_path, experiment):
    (directory,) = (tmp_path / "runs" / experiment).iterdir()
    return directory


def record(directory):
    return json.loads((directory / "launch.json").read_text())


# ----- F1 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--nproc", "2"], ["--sweep", "n=1"]])
def test_an_error_in_a_forked_child_is_not_the_ranks(tmp_path, extra):
    (tmp_path / "forks.py").write_text(FORKS)
    p = run(tmp_path, *extra, "forks.py")
    assert p.returncode == 0, p.stderr
    assert "ValueError: child broke" in p.stderr  # on stderr, as without the launcher
    directory = run_dir(tmp_path, "forks")
    assert not list(directory.glob("rank*.error.txt"))
    rec = record(directory)
    assert rec["status"] == "ok" and rec["error"] is None, rec
    assert "failed:" not in p.stderr, p.stderr


def test_the_docs_say_a_forked_childs_error_is_not_the_ranks():
    assert "Only the rank's own process writes its error file" in DOCS


# ----- F2 ---------------------------------------------------------------------------------------------

def test_a_self_raised_keyboard_interrupt_is_the_ranks_own_error(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    p = run(tmp_path, "--nproc", "2", "prog.py", "kbint=1", "sleep=0:3")
    assert p.returncode == 130, p.stderr
    directory = run_dir(tmp_path, "prog")
    first = (directory / "rank1.error.txt").read_text().splitlines()[0]
    assert first == "KeyboardInterrupt: self-raised", first
    assert "rank 1 failed: KeyboardInterrupt: self-raised" in p.stderr, p.stderr


def test_a_self_raised_keyboard_interrupt_in_the_launchers_process(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    p = run(tmp_path, "prog.py", "kbint=0")
    assert p.returncode == 130, p.stderr
    assert "run failed (exit status 130): KeyboardInterrupt: self-raised" in p.stderr, p.stderr
    assert "stopped by SIGINT" not in p.stderr


def test_a_sigint_the_program_sent_itself_is_still_sigints(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    p = run(tmp_path, "--timeout", "60", "prog.py", "int=0")
    assert p.returncode == 130, p.stderr
    first = (run_dir(tmp_path, "prog") / "rank0.error.txt").read_text().splitlines()[0]
    assert first.startswith("stopped by SIGINT (not sent by the launcher"), first
    assert first.endswith("then KeyboardInterrupt"), first


def test_spawn_takes_the_rank_that_raised_keyboard_interrupt_for_the_failed_one(tmp_path):
    # rank 0 is stopped by a SIGTERM (its error file first); rank 1 then raises KeyboardInterrupt
    # itself: that is the rank that failed, not a stopped one
    (tmp_path / "prog.py").write_text(PROG)
    (tmp_path / "fakespawn.py").write_text(FAKESPAWN)
    p = run(tmp_path, "--spawn", f"{sys.executable} fakespawn.py {{ranks}}", "--param", "ranks=2", "--",
            "prog.py", "term=0", "sleep=1:1.5", "kbint=1")
    directory = run_dir(tmp_path, "prog")
    rec = record(directory)
    assert rec["status"] == "failed", rec
    assert rec["failed_rank"] == 1 and rec["error"] == "KeyboardInterrupt: self-raised", (rec, p.stderr)


# ----- F3 ---------------------------------------------------------------------------------------------

LONG = "x" * 300


@pytest.mark.parametrize("args", [["--sweep", f"a={LONG},y"], ["--sweep", f"a={LONG},y", "--dry-run"],
                                  ["--param", f"a={LONG}"], ["--sweep", "b=1,2", "--param", f"a={LONG}"]])
def test_a_run_directory_name_too_long_is_an_error_naming_the_parameter(here, capsys, args):
    code = launch.main(["--out", "runs", *args, "main.py"])
    err = capsys.readouterr().err
    assert code == 2, err
    option = args[-2] if args[-1] != "--dry-run" else args[0]
    assert f"error: {option} a=xxx" in err, err
    assert f"the run directory's name would be {320 if 'b=1,2' in args else 316} bytes" in err, err
    assert "give 'a' a shorter value (it takes 302 bytes of the name)" in err, err
    assert "unreadable launch record" not in err and "delete it" not in err
    assert not (here / "runs").exists()


def test_a_run_directory_name_too_long_from_a_sweep_file(here, capsys):
    (here / "d.toml").write_text(f'[params]\na = "{LONG}"\n[sweep]\nb = [1, 2]\n')
    code = launch.main(["--out", "runs", "--sweep-file", "d.toml", "main.py"])
    err = capsys.readouterr().err
    assert code == 2 and "error: sweep file d.toml: params.a: the run directory's name would be" in err, err


def test_a_record_under_a_name_too_long_is_not_called_damaged(tmp_path):
    from runtime.launch_errors import LaunchError
    from runtime.sweep_state import read_record

    with pytest.raises(LaunchError) as caught:
        read_record(tmp_path / ("n" * 300))
    said = str(caught.value)
    assert "too long for the file system" in said and "delete it" not in said and "unreadable" not in said


def test_the_docs_give_the_name_length_limit():
    assert "give 'a' a shorter value" in DOCS and "255 bytes" in DOCS


# ----- F4 ---------------------------------------------------------------------------------------------

def test_a_program_that_execs_in_the_launchers_process_has_no_exit_status_recorded(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    p = run(tmp_path, "prog.py", "exec=3")
    assert p.returncode == 3, p.stderr
    rec = record(run_dir(tmp_path, "prog"))
    assert rec["exit_code"] is None and rec["status"] == "ok", rec
    assert "replaced itself with os.exec*" in rec["error"] and "not known to the launcher" in rec["error"], rec
    assert "run data in" not in p.stderr, p.stderr
    assert "recorded ok without an exit status" in p.stderr, p.stderr
    assert "run record in runs/prog/ranks-1_rep-0 (no run file was written before it)" in p.stderr, p.stderr


def test_a_program_that_execs_on_a_rank_process_fails_with_its_status(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    p = run(tmp_path, "--sweep", "n=1", "prog.py", "exec=3")
    assert p.returncode == 1, p.stderr
    rec = record(run_dir(tmp_path, "prog"))
    assert (rec["status"], rec["exit_code"]) == ("failed", 3), rec


def test_the_docs_say_what_an_exec_in_the_launchers_process_records():
    assert "`ok` with `exit_code` null" in DOCS


# ----- F5 ---------------------------------------------------------------------------------------------

def _plan(out):
    lines = out.splitlines()
    return {line.split()[1]: (line.split()[0], lines[i + 1].strip() if i + 1 < len(lines)
                              and lines[i + 1].startswith(" ") else "")
            for i, line in enumerate(lines) if line.startswith(("done", "run "))}


@pytest.fixture
def swept(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    (tmp_path / "fakespawn.py").write_text(FAKESPAWN)
    p = run(tmp_path, "--sweep", "ranks=1,2", "--", "prog.py", "r={ranks}")
    assert p.returncode == 0, p.stderr
    return tmp_path


def test_a_resume_does_not_take_runs_made_another_way_for_done(swept):
    same = run(swept, "--sweep", "ranks=1,2", "--dry-run", "--", "prog.py", "r={ranks}")
    assert [s for s, _ in _plan(same.stdout).values()] == ["done", "done"], same.stdout

    by_program = run(swept, "--sweep", "ranks=1,2", "--ranks-by-program", "--dry-run", "--", "prog.py", "r={ranks}")
    plan = _plan(by_program.stdout)
    assert [s for s, _ in plan.values()] == ["run", "run"], by_program.stdout
    assert all("recorded as completed, but made without --ranks-by-program (a process per rank), which this "
               "launch gives: making it again" in why for _, why in plan.values()), by_program.stdout

    spawned = run(swept, "--sweep", "ranks=1,2", "--spawn", f"{sys.executable} fakespawn.py {{ranks}}", "--dry-run",
                  "--", "prog.py", "r={ranks}")
    plan = _plan(spawned.stdout)
    assert [s for s, _ in plan.values()] == ["run", "run"], spawned.stdout + spawned.stderr
    assert all("made without --spawn (the launcher started the ranks itself), which this launch gives" in why
               for _, why in plan.values()), spawned.stdout

    optimized = run(swept, "--sweep", "ranks=1,2", "--dry-run", "--", "prog.py", "r={ranks}", python=["-O"])
    plan = _plan(optimized.stdout)
    assert [s for s, _ in plan.values()] == ["run", "run"], optimized.stdout
    assert all("made by python without options, where this launch runs python -O" in why
               for _, why in plan.values()), optimized.stdout


def test_a_resume_says_why_it_makes_a_run_made_another_way_again(swept):
    p = run(swept, "--sweep", "ranks=1", "--ranks-by-program", "--", "prog.py", "r={ranks}")
    assert p.returncode == 0, p.stderr
    assert ("runs/prog/ranks-1_rep-0: recorded as completed, but made without --ranks-by-program (a process per "
            "rank), which this launch gives: making it again") in p.stderr, p.stderr
    # and back: the run is now --ranks-by-program's
    back = run(swept, "--sweep", "ranks=1", "--dry-run", "--", "prog.py", "r={ranks}")
    assert "made with --ranks-by-program (the program started its ranks), which this launch does not give" \
        in back.stdout, back.stdout


def test_start_mode_reads_the_recorded_command():
    from runtime.sweep_state import StartMode, other_start, start_mode

    py = "/venv/bin/python"
    assert start_mode([py, "-m", "runtime.launch", "--child", "--", "main.py", "--ranks-by-program"]) == \
        StartMode((), False, ())
    assert start_mode(["srun", "-n", "2", py, "-O", "-X", "dev", "-Wdefault", "-m", "runtime.launch", "--child",
                       "--ranks-by-program", "-m", "pkg.train"]) == \
        StartMode(("srun", "-n", "2"), True, ("-O", "-X", "dev", "-Wdefault"))
    # a run in the launcher's own process records the command line as typed
    assert start_mode([py, "-m", "runtime.launch", "--out", "runs", "main.py", "--ranks-by-program"]) == \
        StartMode((), False, ())
    assert start_mode(["main.py"]) is None
    assert other_start(["x"], [py, "-m", "runtime.launch"]) == []
    assert other_start([py, "-X", "dev", "-O", "-m", "runtime.launch"], [py, "-O", "-X", "dev", "-m",
                                                                           "runtime.launch"]) == []


def test_the_docs_say_how_runs_were_started_is_compared():
    assert "How the runs were started is compared too" in DOCS
