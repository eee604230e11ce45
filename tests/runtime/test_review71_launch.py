"""Review 71: the launcher warns where its local ranks outnumber the usable CPUs and records them in
every header (F2); the time left weighs the runs left by their ranks (F5); `--version` (F7)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import launch
from runtime.sweep_progress import Progress
from tests.envclean import LAUNCH_PREFIXES, LAUNCH_VARS, clean_env

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A clean launcher environment in tmp_path, with a main.py, and 2 usable CPUs."""
    for k in list(os.environ):
        if k in LAUNCH_VARS or k.startswith(LAUNCH_PREFIXES) or k == "OMP_NUM_THREADS":
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text("")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    from runtime import sweep_run

    monkeypatch.setattr(sweep_run, "_omp_said", [False])  # said once per process: not this test's to use up
    return tmp_path


def _launch(capsys, *args):
    code = launch.main(["--out", "runs", *args])
    return code, capsys.readouterr().err


def _cpu_warnings(err):
    return [line for line in err.splitlines() if "usable CPUs" in line]


# ----- F2 ---------------------------------------------------------------------------------------------

def test_a_sweep_over_more_ranks_than_cpus_is_warned_once_naming_the_points(here, capsys):
    code, err = _launch(capsys, "--sweep", "ranks=1,2,4,8", "--dry-run", "main.py")
    assert code == 0
    [warning] = _cpu_warnings(err)
    assert ("scaleprobe launch: warning: ranks=4, 8 on this host x 1 thread = 4, 8 > 2 usable CPUs: the ranks "
            "share cores and their times measure the contention") in warning
    assert "give ranks up to 2" in warning


def test_threads_per_rank_count(here, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    code, err = _launch(capsys, "--nproc", "2", "--dry-run", "main.py")
    [warning] = _cpu_warnings(err)
    assert "ranks=2 on this host x 2 threads = 4 > 2 usable CPUs" in warning


def test_ranks_that_fit_are_not_warned_of(here, capsys):
    code, err = _launch(capsys, "--nproc", "2", "--dry-run", "main.py")
    assert code == 0 and _cpu_warnings(err) == []
    code, err = _launch(capsys, "--sweep", "batch=1,2", "--dry-run", "main.py")
    assert code == 0 and _cpu_warnings(err) == []


def test_without_an_affinity_mask_the_cpu_count_is_used(here, capsys, monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    code, err = _launch(capsys, "--nproc", "4", "--dry-run", "main.py")
    [warning] = _cpu_warnings(err)
    assert "ranks=4 on this host x 1 thread = 4 > 3 usable CPUs" in warning


def test_a_spawn_command_that_starts_the_ranks_here_is_checked_and_one_that_places_them_is_not(here, capsys):
    code, err = _launch(capsys, "--sweep", "ranks=2,4", "--spawn", "mpiexec -n {ranks}", "--dry-run", "main.py")
    [warning] = _cpu_warnings(err)
    assert "ranks=4 on this host x 1 thread = 4 > 2 usable CPUs: the ranks --spawn starts share cores" in warning
    for spawn in ("srun -n {ranks}", "mpiexec --hostfile hosts -n {ranks}", "flux run -n {ranks}"):
        code, err = _launch(capsys, "--sweep", "ranks=2,4", "--spawn", spawn, "--dry-run", "main.py")
        assert code == 0 and _cpu_warnings(err) == [], spawn


PROGRAM = "def work():\n    return sum(range(1000))\n\nwork()\n"


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(os, "sched_getaffinity"),
                    reason="needs taskset and an affinity mask")
def test_every_header_records_the_usable_cpus_and_the_modeler_warns(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    env.pop("OMP_NUM_THREADS", None)
    cpu = min(os.sched_getaffinity(0))
    p = subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-m", "runtime.launch", "--out", "runs",
                        "--nproc", "2", "--instrument", "prog.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert "ranks=2 on this host x 1 thread = 2 > 1 usable CPUs" in p.stderr
    files = sorted((tmp_path / "runs").rglob("rank*.jsonl"))
    assert len(files) == 2
    for f in files:
        header = json.loads(f.read_text().splitlines()[0])
        assert (header["cpus_usable"], header["cpu_affinity"]) == (1, str(cpu)), header
    from modeler.readers.runs import load_runs

    warnings = [w for w in load_runs([tmp_path / "runs"]).warnings if "usable CPUs" in w]
    assert len(warnings) == 1 and "2 ranks on " in warnings[0] and ", 1 usable CPUs" in warnings[0]


# ----- F5 ---------------------------------------------------------------------------------------------

def test_the_time_left_weighs_the_runs_left_by_their_ranks():
    import io

    progress = Progress(total=6, stream=io.StringIO(), ranks=[1, 1, 4, 4, 16, 16])
    progress.record("a", "ok", None, 10.0, 1)
    # one ranks=1 run left at 10 s; ranks=4 and 16 not run yet: 4x and 16x the ranks=1 runs' mean
    assert progress.left_s() == 10 + 2 * 40 + 2 * 160
    progress.record("b", "ok", None, 12.0, 1)
    progress.record("c", "failed", "x", 20.0, 4)
    # measured at ranks=4: 20 s there, and ranks=16 from the nearest measured, ranks=4
    assert progress.left_s() == 20 + 2 * 80
    progress.skip(4)
    assert progress.left_s() == 2 * 80


def test_ranks_placed_elsewhere_take_the_mean_where_not_measured():
    import io

    progress = Progress(total=3, stream=io.StringIO(), ranks=[1, 64, 64], by_ranks=False)
    progress.record("a", "ok", None, 10.0, 1)
    assert progress.left_s() == 20


def test_the_sweep_gives_its_progress_the_ranks(here, capsys, monkeypatch):
    from runtime import sweep_run
    from runtime.launch_ranks import Outcome

    # a run costs 10 s per rank; the fake ranks write nothing
    monkeypatch.setattr(sweep_run, "run_members", lambda members, run_dir, **kw: Outcome(
        "ok", 0, None, None, 10.0 * len(members)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    code, err = _launch(capsys, "--sweep", "ranks=1,4", "main.py")
    assert code == 0, err
    lines = [line for line in err.splitlines() if "runs, " in line and "elapsed" in line]
    assert "1/2 runs" in lines[0] and lines[0].endswith("~0:40 left"), lines


# ----- F7 ---------------------------------------------------------------------------------------------

def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        launch.main(["--version"])
    assert exc.value.code == 0
    from runtime import __version__

    assert capsys.readouterr().out == f"scaleprobe-launch (scaleprobe) {__version__}\n"
