"""Review 12 (a new user's own program): ranks started by torchrun or srun without our launcher
form one run; the "run data written" line is the program's, not each helper process's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "app.py"

# Starts two "ranks" of app.py as torchrun's agent does: children of one process, torchrun's variables
AGENT = '''\
import json, os, subprocess, sys
procs = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
               **json.loads(sys.argv[2]))
    procs.append(subprocess.Popen([sys.executable, sys.argv[1], *sys.argv[3:]], env=env))
sys.exit(max(p.wait() for p in procs))
'''


def _agent(tmp_path: Path, name: str, value: str, *more: str, mode: tuple[str, ...] = ("ok",)) -> subprocess.CompletedProcess:
    env = clean_env()
    env["PYTHONPATH"] = str(REPO)
    (tmp_path / "agent.py").write_text(AGENT)
    variables = dict(zip((name, *more[::2]), (value, *more[1::2])))
    return subprocess.run([sys.executable, str(tmp_path / "agent.py"), str(APP), json.dumps(variables), *mode],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_ranks_of_plain_torchrun_write_one_run(tmp_path):
    proc = _agent(tmp_path, "TORCHELASTIC_RUN_ID", "none")  # torchrun's default rendezvous id
    assert proc.returncode == 0, proc.stderr
    dirs = sorted(p.name for p in (tmp_path / "scaleprobe-runs").iterdir())
    assert len(dirs) == 1 and dirs[0].startswith("torchrun-"), dirs
    runs = [read_run(f) for f in find_run_files(tmp_path / "scaleprobe-runs")]
    assert sorted(r.header["rank"] for r in runs) == [0, 1]
    assert len({r.header["run_id"] for r in runs}) == 1
    assert proc.stderr.count("scaleprobe: run data written to") == 2  # one per rank


def test_ranks_of_one_slurm_step_write_one_run(tmp_path):
    proc = _agent(tmp_path, "SLURM_JOB_ID", "4242")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "scaleprobe-runs").iterdir()) == ["slurm-4242"]


def test_a_single_process_keeps_its_own_time_and_pid_run_id(tmp_path):
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SLURM_JOB_ID="4242", WORLD_SIZE="1")
    proc = subprocess.run([sys.executable, str(APP), "ok"], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (name,) = [p.name for p in (tmp_path / "scaleprobe-runs").iterdir()]
    assert name.endswith(f"-{read_run(find_run_files(tmp_path / 'scaleprobe-runs')[0]).header['pid']}")


def test_helper_processes_do_not_each_announce_their_file(tmp_path):
    env = clean_env()
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, str(APP), "mp"], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = find_run_files(tmp_path / "scaleprobe-runs")
    assert len(files) >= 2, files  # the program's and its multiprocessing child's
    assert proc.stderr.count("scaleprobe: run data written to") == 1, proc.stderr


def test_max_failures_stops_a_sweep_whose_runs_all_fail(tmp_path):
    """Review 12 F6: a mistyped option of the program failed each of 54 points alike."""
    (tmp_path / "prog.py").write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch')\n"
                                      "p.parse_args()\n")
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")

    def launch(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "runtime.launch", "--sweep", "batch=1,2,3,4", *extra,
                               "--out", str(tmp_path / "runs"), "--", str(tmp_path / "prog.py"), "--batch-sz", "{batch}"],
                              env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    proc = launch("--max-failures", "2")
    assert proc.returncode == 1, proc.stderr
    assert "2 runs in a row failed (--max-failures 2)" in proc.stderr and "a resume tries the failed runs again" in proc.stderr
    assert len(list((tmp_path / "runs" / "prog").iterdir())) == 2  # the other two were not started
    proc = launch("--max-failures", "0")  # resumed with 0: every run is tried
    assert proc.returncode == 1
    assert "stopped" not in proc.stderr
    assert len(list((tmp_path / "runs" / "prog").iterdir())) == 4
    bad = subprocess.run([sys.executable, "-m", "runtime.launch", "--max-failures", "-1", str(tmp_path / "prog.py")],
                         env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and "--max-failures -1: must be at least 1 (or 0: never stop)" in bad.stderr


def _failing_sweep(tmp_path: Path, fails: str, *extra: str) -> subprocess.CompletedProcess:
    """A sweep over batch=1..6 of a program that fails where `fails` (a Python expression of b) holds."""
    (tmp_path / "prog.py").write_text(f"import sys\nb = int(sys.argv[1])\nsys.exit('bad batch' if {fails} else 0)\n")
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    return subprocess.run([sys.executable, "-m", "runtime.launch", "--sweep", "batch=1,2,3,4,5,6", *extra,
                           "--out", str(tmp_path / "runs"), "--", str(tmp_path / "prog.py"), "{batch}"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_a_sweep_whose_first_three_runs_all_fail_stops_by_default(tmp_path):
    """Without --max-failures a mistyped option ran (and failed) every point of the sweep."""
    proc = _failing_sweep(tmp_path, "True")
    assert proc.returncode == 1, proc.stderr
    assert "the first 3 runs all failed, the last with:" in proc.stderr and "--max-failures 0" in proc.stderr
    assert "3 failed" in proc.stderr and "3 not run" in proc.stderr
    assert len(list((tmp_path / "runs" / "prog").iterdir())) == 3


def test_the_repetitions_of_one_failing_point_do_not_stop_a_sweep_by_default(tmp_path):
    """Review 22: under --repeat 3 the three repetitions of the first point, the only one that fails,
    stopped the sweep (and every resume) before any other point ran."""
    proc = _failing_sweep(tmp_path, "b == 1", "--repeat", "3")
    assert proc.returncode == 1, proc.stderr
    assert "stopped" not in proc.stderr and "15 runs completed, 3 failed" in proc.stderr


def test_failures_after_a_completed_run_do_not_stop_a_sweep_by_default(tmp_path):
    """Points that fail once the program has run (too large a batch) are data: the sweep goes on."""
    proc = _failing_sweep(tmp_path, "b > 1")
    assert proc.returncode == 1, proc.stderr
    assert "stopped" not in proc.stderr and "1 runs completed, 5 failed" in proc.stderr


def test_rank_selection_is_in_the_header_and_a_selected_rank_without_a_file_is_told_apart(tmp_path):
    """Review 12 (modeler F1, left open): a rank that rank selection left out writes no file, and
    neither does one that died before recording began: the header now says which ranks record."""
    from modeler.readers import ReadOptions
    from modeler.readers.runs import load_runs

    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_RANKS="0,2", SCALEPROBE_RUN_ID="sel", WORLD_SIZE="4")

    def rank(r: int, out: str) -> None:
        e = dict(env, RANK=str(r), SCALEPROBE_OUT=str(tmp_path / out))
        proc = subprocess.run([sys.executable, str(APP), "ok"], env=e, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr

    for r in range(4):  # ranks 1 and 3 are not selected: no file
        rank(r, "all")
    for r in (0, 1, 3):  # rank 2 was selected but never recorded
        rank(r, "lost")
    (header,) = {json.dumps(read_run(f).header["recorded_ranks"]) for f in find_run_files(tmp_path / "all")}
    assert json.loads(header) == [0, 2]
    assert [r.status for r in load_runs([tmp_path / "all"], ReadOptions()).runs] == ["ok"]
    (lost,) = load_runs([tmp_path / "lost"], ReadOptions()).runs
    assert lost.status == "incomplete" and "no file for rank(s) 2, which rank selection" in lost.reason


def test_two_torchrun_launches_in_one_batch_job_are_two_runs(tmp_path):
    """Review 14 F1: inside an sbatch script (a job id, no step id) both launches took `slurm-<job>`."""
    for _ in range(2):
        proc = _agent(tmp_path, "TORCHELASTIC_RUN_ID", "none", "SLURM_JOB_ID", "77")
        assert proc.returncode == 0, proc.stderr
    dirs = sorted(p.name for p in (tmp_path / "scaleprobe-runs").iterdir())
    assert len(dirs) == 2 and all(d.startswith("torchrun-") for d in dirs), dirs


def test_spawned_workers_of_a_plain_torchrun_rank_join_its_run(tmp_path):
    """Review 14 F2: a spawned worker's parent is the rank, not the torchrun agent, so it derived
    another run id and its file went to a directory of its own."""
    proc = _agent(tmp_path, "TORCHELASTIC_RUN_ID", "none", mode=("mp", "spawn"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = list((tmp_path / "scaleprobe-runs").iterdir())
    headers = [read_run(f).header for f in find_run_files(run_dir)]
    assert sorted(h["rank"] for h in headers if h.get("child_of") is None) == [0, 1]
    assert any(h.get("child_of") for h in headers)  # the workers' files are in the run


THREAD_MASK = '''\
import os, signal, sys, threading
sys.path.insert(0, sys.argv[1])
from runtime.probe import define
define("__main__", globals(), "x.py", ((0, "function", "f", 1),))
flush = [t for t in threading.enumerate() if t.name == "scaleprobe-flush"]
with open(f"/proc/self/task/{flush[0].native_id}/status") as fh:
    blocked = int(next(line for line in fh if line.startswith("SigBlk:")).split()[1], 16)
print("TERM-BLOCKED", bool(blocked & (1 << (signal.SIGTERM - 1))), bool(blocked & (1 << (signal.SIGINT - 1))))
'''

FORKED_CHILD = '''\
import os, signal, time
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(0.5)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("CHILD", "signal" if os.WIFSIGNALED(status) else "exit", os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
'''


def test_the_flush_thread_leaves_the_programs_signals_to_its_threads(tmp_path):
    """Review 12 peers rerun B: a SIGTERM that the flush thread took left a Pool worker blocked on a
    lock alive (terminate() then hung its parent): the thread starts with those signals blocked."""
    if not os.path.exists("/proc/self/task"):
        import pytest
        pytest.skip("needs Linux /proc to read a thread's signal mask")
    (tmp_path / "mask.py").write_text(THREAD_MASK)
    env = clean_env()
    env.update(SCALEPROBE_OUT=str(tmp_path / "out"))
    proc = subprocess.run([sys.executable, str(tmp_path / "mask.py"), str(REPO)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "TERM-BLOCKED True True" in proc.stdout


def test_a_forked_child_under_the_launcher_dies_of_sigterm_as_without_it(tmp_path):
    """The launcher turns SIGTERM into SystemExit(143) in the rank; in a forked child (a Pool or
    DataLoader worker) it is the default action again, as without the launcher: a SystemExit raised
    in an at-fork callback is dropped, and the child went on."""
    (tmp_path / "fork.py").write_text(FORKED_CHILD)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    plain = subprocess.run([sys.executable, str(tmp_path / "fork.py")], env=env, capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    launched = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"),
                               str(tmp_path / "fork.py")], env=env, capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
    assert "CHILD signal 15" in plain.stdout
    assert "CHILD signal 15" in launched.stdout, launched.stdout + launched.stderr
