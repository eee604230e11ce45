"""Review 77, docs/launch.md against the launcher: OMP_NUM_THREADS=1 for the ranks of
--ranks-by-program and --spawn too, and the oversubscription check counts what they get (M1); the
ranks' error file at Ctrl-C (L1) and for a SIGTERM the launcher did not send (L2); --run-id and
--max-failures where they cannot apply are errors (L3); the first-failures stop of a small sweep
(L4); the warning's doubled "the" (L5); a failed single run names its directory (L6); exit status
127 documented (L7); number options' values as typed (L8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime import launch
from tests.envclean import clean_env
from tests.runtime.test_review71_launch import here  # noqa: F401 (the fixture: a clean launcher environment)

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "launch.md").read_text()

# writes its OMP_NUM_THREADS and rank to a file of its own in the run directory
SHOW = ("import os, sys, time\n"
        "out = os.environ['SCALEPROBE_OUT']\n"
        "name = f\"omp.{os.environ.get('RANK', 'p')}.{os.getpid()}\"\n"
        "open(os.path.join(out, name), 'w').write(str(os.environ.get('OMP_NUM_THREADS')))\n"
        "for a in sys.argv[1:]:\n"
        "    if a.startswith('sleep='):\n"
        "        open(os.path.join(out, f'ready.{os.getpid()}'), 'w').close()\n"
        "        time.sleep(float(a[6:]))\n"
        "    if a.startswith('code='):\n"
        "        sys.exit(int(a[5:]))\n"
        "    if a.startswith('kill='):\n"
        "        os.kill(os.getpid(), int(a[5:])); time.sleep(5)\n")

# a --spawn command: starts N copies of the command with RANK/WORLD_SIZE set, as mpiexec would
FAKESPAWN = ("import os, subprocess, sys\n"
             "n = int(sys.argv[1])\n"
             "procs = [subprocess.Popen(sys.argv[2:], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),\n"
             "         WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))) for r in range(n)]\n"
             "sys.exit(max(p.wait() for p in procs))\n")


def run(tmp_path, *args, env=None, timeout=120):
    e = clean_env(PYTHONPATH=str(REPO))
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "runtime.launch", "--out", "runs", *args], cwd=tmp_path, env=e,
                          capture_output=True, text=True, timeout=timeout)


def omp_values(tmp_path, run_name):
    (directory,) = [d for d in (tmp_path / "runs").glob(f"*/{run_name}")]
    return sorted(p.read_text() for p in directory.glob("omp.*"))


def _cpu_warnings(err):
    return [line for line in err.splitlines() if "usable CPUs" in line]


# ----- M1 ---------------------------------------------------------------------------------------------

def test_ranks_by_program_gets_one_thread_per_rank_above_one_rank(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "--ranks-by-program", "--sweep", "ranks=1,2", "--", "show.py", "np={ranks}")
    assert p.returncode == 0, p.stderr
    assert omp_values(tmp_path, "ranks-2_rep-0") == ["1"]
    assert omp_values(tmp_path, "ranks-1_rep-0") == ["1"]  # the same threads at every point
    assert "OMP_NUM_THREADS=1 in every rank of every run" in p.stderr


def test_spawned_ranks_get_one_thread_each_unless_set(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    (tmp_path / "fakespawn.py").write_text(FAKESPAWN)
    spawn = f"{sys.executable} fakespawn.py {{ranks}}"
    p = run(tmp_path, "--spawn", spawn, "--param", "ranks=2", "show.py")
    assert p.returncode == 0, p.stderr
    assert omp_values(tmp_path, "ranks-2_rep-0") == ["1", "1"]
    mine = run(tmp_path, "--out", "runs2", "--spawn", spawn, "--param", "ranks=2", "show.py",
               env={"OMP_NUM_THREADS": "3"})
    assert mine.returncode == 0, mine.stderr
    (directory,) = (tmp_path / "runs2").glob("*/ranks-2_rep-0")
    assert sorted(p.read_text() for p in directory.glob("omp.*")) == ["3", "3"]
    assert "OMP_NUM_THREADS=1" not in mine.stderr


def test_a_lone_spawned_rank_keeps_torchs_default(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    (tmp_path / "fakespawn.py").write_text(FAKESPAWN)
    p = run(tmp_path, "--spawn", f"{sys.executable} fakespawn.py {{ranks}}", "show.py")
    assert p.returncode == 0, p.stderr
    assert omp_values(tmp_path, "ranks-1_rep-0") == ["None"]


def test_the_check_counts_the_threads_a_spawn_command_sets_itself(here, capsys):
    code = launch.main(["--out", "runs", "--sweep", "ranks=1,2", "--spawn",
                        "env OMP_NUM_THREADS=2 mpiexec -n {ranks}", "--dry-run", "main.py"])
    err = capsys.readouterr().err
    assert code == 0
    [warning] = _cpu_warnings(err)
    assert "ranks=2 on this host x 2 threads = 4 > 2 usable CPUs" in warning, warning
    code = launch.main(["--out", "runs", "--param", "ranks=3", "--spawn", "mpiexec -x OMP_NUM_THREADS=2 -n {ranks}",
                        "--dry-run", "main.py"])
    [warning] = _cpu_warnings(capsys.readouterr().err)
    assert "ranks=3 on this host x 2 threads = 6 > 2 usable CPUs" in warning, warning


def test_spawn_threads_reads_the_usual_forms():
    from runtime.sweep_checks import spawn_threads, threads_per_rank

    assert spawn_threads("mpiexec -n 4") is None
    assert spawn_threads("OMP_NUM_THREADS=3 mpiexec -n 4") == "3"
    assert spawn_threads("env FOO=1 OMP_NUM_THREADS=5 mpirun -n 4") == "5"
    assert spawn_threads("mpiexec -genv OMP_NUM_THREADS 6 -n 4") == "6"
    assert spawn_threads("mpirun -x OMP_NUM_THREADS=7 -n 4") == "7"
    assert threads_per_rank({"OMP_NUM_THREADS": "2"}, "env OMP_NUM_THREADS=4 mpiexec") == 4
    assert threads_per_rank({}, None) == 1


def test_the_docs_say_which_modes_get_the_thread_setting():
    row = next(line for line in DOCS.splitlines() if line.startswith("| `OMP_NUM_THREADS` |"))
    assert "--ranks-by-program" in row and "--spawn" in row


# ----- L1, L2 -----------------------------------------------------------------------------------------

def _wait_for(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_ranks_stopped_at_ctrl_c_say_so(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-m", "runtime.launch", "--out", "runs", "--nproc", "2", "show.py",
                             "sleep=30"], cwd=tmp_path, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert _wait_for(lambda: len(list((tmp_path / "runs").glob("*/*/ready.*"))) == 2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    (directory,) = (tmp_path / "runs" / "show").iterdir()
    for rank in (0, 1):
        first = (directory / f"rank{rank}.error.txt").read_text().splitlines()[0]
        assert first.startswith("stopped by SIGINT (the launcher was sent SIGINT, Ctrl-C,"), first
        assert first.endswith("then KeyboardInterrupt"), first


def test_a_sigterm_the_program_sent_itself_is_not_put_on_the_launcher(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "--timeout", "30", "show.py", "kill=15")
    assert p.returncode == 143, p.stderr
    assert "rank 0 failed: stopped by SIGTERM (not sent by the launcher" in p.stderr, p.stderr
    assert "stops every rank when one fails, at --timeout" not in p.stderr


def test_a_rank_the_launcher_stopped_says_why(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "--timeout", "1", "show.py", "sleep=30")
    assert p.returncode == 124, p.stderr
    (directory,) = (tmp_path / "runs" / "show").iterdir()
    first = (directory / "rank0.error.txt").read_text().splitlines()[0]
    assert first == "stopped by SIGTERM (the launcher stops every rank at --timeout 1 s)", first


# ----- L3 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--nproc", "2"], ["--sweep", "n=1,2"]])
def test_run_id_where_the_launcher_makes_the_runs_is_an_error(here, capsys, extra):
    code = launch.main(["--out", "runs", "--run-id", "try3", *extra, "main.py"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--run-id try3: applies only to a launcher started as a rank by srun, mpiexec or torchrun" in err
    assert not (here / "runs").exists()


def test_max_failures_without_a_sweep_is_an_error(here, capsys):
    code = launch.main(["--out", "runs", "--max-failures", "2", "main.py"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-failures 2 applies to a sweep" in err, err
    assert launch.main(["--out", "runs", "--max-failures", "2", "--repeat", "2", "--dry-run", "main.py"]) == 0


# ----- L4 ---------------------------------------------------------------------------------------------

def test_a_small_sweep_stops_once_every_point_failed(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "--sweep", "c=3,4", "--repeat", "2", "--", "show.py", "code={c}")
    assert p.returncode == 1, p.stderr
    assert "the first 2 runs all failed" in p.stderr, p.stderr
    records = [json.loads(f.read_text()) for f in (tmp_path / "runs").rglob("launch.json")]
    assert len(records) == 2 and {r["status"] for r in records} == {"failed"}


# ----- L5 ---------------------------------------------------------------------------------------------

def test_the_ranks_by_program_warning_has_one_the(here, capsys):
    code = launch.main(["--out", "runs", "--ranks-by-program", "--sweep", "ranks=1,4", "--dry-run", "--",
                        "main.py", "{ranks}"])
    [warning] = _cpu_warnings(capsys.readouterr().err)
    assert code == 0
    assert "the the" not in warning and "the program's ranks share cores" in warning, warning


# ----- L6 ---------------------------------------------------------------------------------------------

def test_a_failed_single_run_without_a_run_file_names_its_directory(tmp_path):
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "show.py", "code=3")
    assert p.returncode == 3, p.stderr
    lines = p.stderr.splitlines()
    assert lines[-2].startswith("scaleprobe launch: run failed (exit status 3)"), p.stderr
    assert lines[-1] == f"scaleprobe launch: run record in {Path('runs/show/ranks-1_rep-0')} (no run file was written)"
    quiet = run(tmp_path, "show.py", "code=3", env={"SCALEPROBE_QUIET": "1"})
    assert "run record in" not in quiet.stderr


# ----- L7 ---------------------------------------------------------------------------------------------

def test_exit_status_127_is_documented_and_given(tmp_path):
    section = DOCS[DOCS.index("## Exit status"):]
    assert "127" in section and "--spawn" in section
    (tmp_path / "show.py").write_text(SHOW)
    p = run(tmp_path, "--spawn", "./nonexist -n {ranks}", "show.py")
    assert p.returncode == 127, p.stderr
    assert "cannot start ./nonexist: No such file or directory" in p.stderr


# ----- L8 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, said", [
    (["--timeout", "0"], "--timeout 0: must be a positive finite number of seconds"),
    (["--timeout", "-1"], "--timeout -1: must be"),
    (["--grace", "-1"], "--grace -1: must be"),
    (["--grace", "inf"], "--grace inf: must be"),
    (["--nproc", "00"], "--nproc 00: must be at least 1"),
    (["--repeat", "0"], "--repeat 0: must be at least 1"),
    (["--repetition", "-01"], "--repetition -01: must not be negative"),
])
def test_number_options_are_named_with_their_value_as_typed(here, capsys, args, said):
    code = launch.main(["--out", "runs", *args, "main.py"])
    err = capsys.readouterr().err
    assert code == 2 and f"scaleprobe launch: error: {said}" in err, err
