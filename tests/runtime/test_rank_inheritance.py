"""Which rank a child process records as (review 23): a rank variable the parent set for it wins over
the parent's own rank; a rank that rank selection leaves out passes that on to its workers; a
program that a rank starts (a subprocess) without a rank of its own is that rank's helper where it
shares the run (the launcher's run id), and makes a run of its own otherwise (review 24)."""
import json
import subprocess
import sys
from pathlib import Path

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import multiprocessing as mp, os, subprocess, sys
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((1, "function", "work", 6),))


def work():
    if __sp_on__: __sp_enter__(1)
    try:
        pass
    finally:
        if __sp_on__: __sp_exit__(1)


if __name__ == "__main__":
    work()
    mode = sys.argv[1]
    if mode == "own-rank":  # a hand-made launcher: each child gets its own RANK
        for i in range(2):
            os.environ.update(RANK=str(i), WORLD_SIZE="2", LOCAL_RANK=str(i))
            p = mp.get_context("spawn").Process(target=work)
            p.start()
            p.join()
    elif mode == "workers":  # a rank's spawned worker
        p = mp.get_context("spawn").Process(target=work)
        p.start()
        p.join()
    elif mode == "relaunch":  # rank 0 starts rank 1 as a program of its own, which starts a worker
        env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
        subprocess.run([sys.executable, sys.argv[0], "workers"], env=env, check=True)
    elif mode == "subprocess":  # a rank runs a program of its own
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        subprocess.run([sys.executable, sys.argv[0], "plain"], env=env, check=True)
    print(os.getpid())
'''


def _run(tmp_path: Path, mode: str, **env: str) -> list:
    (tmp_path / "prog.py").write_text(PROGRAM)
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), **env)
    p = subprocess.run([sys.executable, "prog.py", mode], env=e, cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return [read_run(f) for f in find_run_files(tmp_path / "out")] if (tmp_path / "out").is_dir() else []


def test_a_rank_variable_the_parent_set_for_its_child_wins(tmp_path):
    runs = _run(tmp_path, "own-rank")
    children = sorted((r.header["rank"], r.header["world_size"]) for r in runs if r.header.get("child_of"))
    assert children == [(0, 2), (1, 2)], [r.header for r in runs]


def test_the_workers_of_a_rank_that_selection_leaves_out_record_nothing(tmp_path):
    runs = _run(tmp_path, "relaunch", SCALEPROBE_RANKS="0")
    # rank 0 (the first program) records; rank 1 and its worker do not (the worker took rank 0's run)
    assert [(r.header["rank"], r.header.get("child_of")) for r in runs] == [(0, None)], [r.header for r in runs]


def test_a_program_a_rank_starts_is_that_ranks(tmp_path):
    from modeler.readers import ReadOptions
    from modeler.readers.runs import load_runs

    # under the launcher (its run id): rank 1's subprocess, rank 0 by default, was a second rank 0
    runs = _run(tmp_path, "subprocess", RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", SCALEPROBE_RUN_ID="r1")
    assert sorted((r.header["rank"], r.header["rank_source"]) for r in runs) == [(0, "none"), (1, "variable")]
    (run,) = load_runs([tmp_path / "out"], ReadOptions()).runs
    assert run.status != "ambiguous" and list(run.ranks) == [1], run.reason
    assert [f.is_child for f in run.ranks[1]].count(False) == 1
    # without it, the subprocess makes a run of its own, as any program does (review 24)
    (tmp_path / "plain").mkdir()
    runs = _run(tmp_path / "plain", "subprocess", RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert len({r.header["run_id"] for r in runs}) == 2


def test_a_process_that_never_became_a_selected_rank_leaves_nothing(tmp_path):
    """SCALEPROBE_RANKS=1 on a program that never learns a rank (no rank variable, no
    init_process_group): it records provisionally and removes its file, and its default directory."""
    (tmp_path / "prog.py").write_text(PROGRAM)
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_RANKS="1")
    p = subprocess.run([sys.executable, "prog.py", "plain"], env=e, cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "run data written" not in p.stderr
    left = list((tmp_path / "scaleprobe-runs").rglob("*")) if (tmp_path / "scaleprobe-runs").exists() else []
    assert left == [], left
