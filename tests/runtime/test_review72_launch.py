"""Review 72, the launcher under srun/mpiexec and --spawn: a sweep over ranks whose --spawn ignores
{ranks} (F2), concurrent launches into one run directory (F4), ranks claimed twice and files of live
processes (F6), and orjson imported before SIGTERM raises SystemExit (F7). The schedulers are faked
with their variables, or with a small stand-in script in tmp_path."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.sweep_state import clear_attempt
from tests.envclean import clean_env as _clean

REPO = Path(__file__).resolve().parents[2]

# hand-instrumented as the instrumentor would: the recorder starts at its first line
SHOW = '''
import json, os, sys
from runtime.probe import define, enter, exit
define(__name__, globals(), "show.py", ((0, "function", "work", 1),))
enter(0); exit(0)
if os.environ.get("DELETE_OWN_FILE"):
    import glob
    for p in glob.glob(os.path.join(os.environ["SCALEPROBE_OUT"], "rank*.%d.jsonl" % os.getpid())):
        os.unlink(p)
'''


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in _clean().items() if not k.startswith(("MV2_", "FLUX_"))}
    return {**base, "PYTHONPATH": str(REPO), **extra}


def launch(args: list[str], cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=env(**(extra or {})),
                          capture_output=True, text=True, timeout=120)


def slurm(rank: int, n: int, job: str = "7", step: str = "0") -> dict[str, str]:
    return {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_NTASKS": str(n),
            "SLURM_STEP_NUM_TASKS": str(n), "SLURM_STEP_ID": step, "SLURM_JOB_ID": job,
            "SLURM_STEP_NODELIST": "localhost"}


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# -- F2 ---------------------------------------------------------------------------------------------


def test_a_sweep_over_ranks_whose_spawn_has_no_ranks_is_refused_before_anything_runs(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = launch(["--dry-run", "--sweep", "ranks=1,2,4", "--spawn", "srun -n 2", "show.py"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--spawn 'srun -n 2' has no {ranks}" in done.stderr and "--sweep ranks=1,2,4" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "runs").exists()
    # with {ranks}, or one number of ranks that the command may give itself, it runs
    assert launch(["--dry-run", "--sweep", "ranks=1,2", "--spawn", "srun -n {ranks}", "show.py"],
                  tmp_path).returncode == 0
    assert launch(["--dry-run", "--param", "ranks=2", "--spawn", "srun -n 2", "show.py"], tmp_path).returncode == 0


FAKE_SRUN = '''
import os, subprocess, sys
n = int(sys.argv[1])
procs = [subprocess.Popen(sys.argv[2:], env=dict(os.environ, SLURM_PROCID=str(r), SLURM_LOCALID=str(r),
         SLURM_NTASKS=str(n), SLURM_STEP_NUM_TASKS=str(n), SLURM_STEP_ID="0", SLURM_JOB_ID="99",
         SLURM_STEP_NODELIST="localhost")) for r in range(n)]
sys.exit(max(p.wait() for p in procs))
'''


def test_each_rank_stops_where_the_spawn_started_another_number_of_ranks(tmp_path):
    write(tmp_path / "show.py", SHOW)
    fake = write(tmp_path / "fake_srun.py", FAKE_SRUN)
    done = launch(["--param", "ranks=4", "--spawn", f"{sys.executable} {fake} 2", "show.py"], tmp_path)
    assert done.returncode != 0, done.stderr
    message = "this run's parameter ranks=4, but the slurm launch has 2 rank(s)"
    assert message in done.stderr
    run_dir = tmp_path / "runs" / "show" / "ranks-4_rep-0"
    record = json.loads((run_dir / "launch.json").read_text())
    assert record["status"] == "failed" and message in record["error"]
    assert not list(run_dir.glob("rank*.jsonl"))  # nothing recorded under a wrong label
    # the number it starts, given: the run is made
    ok = launch(["--param", "ranks=2", "--spawn", f"{sys.executable} {fake} 2", "show.py"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert len(list((tmp_path / "runs" / "show" / "ranks-2_rep-0").glob("rank*.jsonl"))) == 2


# -- F4 ---------------------------------------------------------------------------------------------

HOLDER = '''
import fcntl, json, os, socket, sys
run_dir = sys.argv[1]
os.makedirs(run_dir, exist_ok=True)
fd = os.open(os.path.join(run_dir, ".launch.rank0.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.write(fd, ("pid %d on %s\\n" % (os.getpid(), socket.gethostname())).encode())
with open(os.path.join(run_dir, "rank0.%d.jsonl" % os.getpid()), "w") as f:
    f.write(json.dumps({"type": "header", "rank": 0, "pid": os.getpid(), "host": os.uname().nodename}) + "\\n")
print("held", flush=True)
sys.stdin.read()
'''


def test_a_second_launch_into_a_run_directory_in_use_is_refused_and_deletes_nothing(tmp_path):
    write(tmp_path / "show.py", SHOW)
    run_dir = tmp_path / "runs" / "show" / "ranks-1_rep-0_slurm-7.0"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        done = launch(["show.py"], tmp_path, slurm(0, 1))
        assert done.returncode == 2, done.stderr
        assert f"rank 0 is being run by another process (pid {holder.pid} on" in done.stderr
        assert "--repetition" in done.stderr
        assert [p.name for p in run_dir.glob("rank*")] == [f"rank0.{holder.pid}.jsonl"]
        assert not (run_dir / "launch.json").exists()
    finally:
        holder.communicate("", timeout=30)
    # once it is gone, the launch replaces that earlier attempt, as before
    again = launch(["show.py"], tmp_path, slurm(0, 1))
    assert again.returncode == 0, again.stderr
    assert not (run_dir / f"rank0.{holder.pid}.jsonl").exists()


def test_a_rank_whose_run_file_was_deleted_while_it_ran_does_not_exit_0(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = launch(["show.py"], tmp_path, {**slurm(0, 1), "DELETE_OWN_FILE": "1"})
    assert done.returncode == 1, done.stderr
    assert "scaleprobe launch: error: rank 0's run file" in done.stderr
    assert "was deleted while the program ran" in done.stderr
    record = json.loads((tmp_path / "runs" / "show" / "ranks-1_rep-0_slurm-7.0" / "launch.json").read_text())
    assert record["status"] == "failed" and "was deleted while the program ran" in record["error"]


# -- F6 ---------------------------------------------------------------------------------------------


def test_rank_exported_for_a_whole_step_exits_2_before_running(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = launch(["show.py"], tmp_path, {**slurm(1, 3), "RANK": "0", "WORLD_SIZE": "3"})
    assert done.returncode == 2, done.stderr
    assert "RANK=0 but SLURM_PROCID=1" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_clear_attempt_keeps_the_file_of_a_live_process_on_this_host(tmp_path, capsys):
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        here = os.uname().nodename
        for pid in (live.pid, gone.pid):
            (tmp_path / f"rank0.{pid}.jsonl").write_text(json.dumps({"type": "header", "pid": pid, "host": here}) + "\n")
        (tmp_path / "rank0.error.txt").write_text("old\n")
        kept = clear_attempt(tmp_path, 0)
        assert kept == [f"rank0.{live.pid}.jsonl"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"rank0.{live.pid}.jsonl"]
        assert f"pid {live.pid} on {here} still writes it" in capsys.readouterr().err
    finally:
        live.communicate(b"", timeout=30)
    assert clear_attempt(tmp_path, 0) == [] and not list(tmp_path.iterdir())


# -- F7 ---------------------------------------------------------------------------------------------

WATCH_HANDLER = '''
import sys
import runtime.launch_child as launch_child
seen = []
install = launch_child.install_sigterm_exit

def watched():
    seen.append("orjson" in sys.modules)
    install()

launch_child.install_sigterm_exit = watched
from runtime.launch import main
code = main(sys.argv[1:])
print("orjson imported before the SIGTERM handler:", seen, file=sys.stderr)
sys.exit(code)
'''


@pytest.mark.skipif(importlib.util.find_spec("orjson") is None, reason="orjson is not installed")
@pytest.mark.parametrize("scheduled", [False, True])
def test_orjson_is_imported_before_sigterm_raises_systemexit(tmp_path, scheduled):
    """SystemExit raised inside orjson's module initialisation crashed the interpreter (SIGSEGV):
    the recorder imported it when it opened its file, after SIGTERM had been made to raise."""
    write(tmp_path / "show.py", SHOW)
    done = subprocess.run([sys.executable, "-c", WATCH_HANDLER, "show.py"], cwd=tmp_path,
                          env=env(**(slurm(0, 1) if scheduled else {})), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "orjson imported before the SIGTERM handler: [True]" in done.stderr
