"""A program that starts its own ranks with `torch.multiprocessing.spawn` (review 20): each rank
says its rank once `init_process_group` gave it (a `rank` record; its file is renamed to it), all
processes of a plain run share one run id, the launcher runs such a program as one process per run
with `--ranks-by-program`, and the modeler models the ranks, not their starter."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the program needs torch")

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, world, fail):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    if fail and rank == world - 1:
        raise RuntimeError("the last rank failed")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if len(sys.argv) > 3:
        os.environ["MASTER_PORT"] = sys.argv[3]  # the test's free port, whatever the environment says
    else:
        os.environ.setdefault("MASTER_PORT", "29500")
    mp.start_processes(work, args=(int(sys.argv[1]), sys.argv[2] == "fail"), nprocs=int(sys.argv[1]),
                       start_method=sys.argv[4] if len(sys.argv) > 4 else "spawn")
'''


def _env(**extra: str) -> dict:
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


def _free_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_a_plain_run_of_spawned_ranks_is_one_run_whose_ranks_say_who_they_are(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "prog.py").write_text(PROGRAM)
    built = subprocess.run([sys.executable, "-m", "instrumentor", "src", "-o", "build", "--main", "prog.py", "-q"],
                           cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    p = subprocess.run([sys.executable, "prog.py", "2", "fail", _free_port()], cwd=tmp_path / "build",
                       env=_env(SCALEPROBE_OUT=str(tmp_path / "out")), capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "the last rank failed" in p.stderr
    runs = {f.name: read_run(f) for f in find_run_files(tmp_path / "out")}
    assert len({r.header["run_id"] for r in runs.values()}) == 1, {f: r.header["run_id"] for f, r in runs.items()}
    ranks = {r.header["rank"]: r for r in runs.values() if r.header.get("rank_from") == "torch.distributed"}
    assert sorted(ranks) == [0, 1] and all(r.header["world_size"] == 2 for r in ranks.values())
    assert all(f.startswith(f"rank{r.header['rank']}.") for f, r in runs.items())  # renamed to their rank
    assert not any(r.is_helper_process for r in ranks.values())
    # the rank that raised says so (multiprocessing prints its traceback, no excepthook runs)
    assert (ranks[1].end["status"], ranks[1].end["exit_code"]) == ("exit", 1)


def test_the_launcher_runs_a_program_that_starts_its_ranks_and_the_modeler_models_them(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    p = subprocess.run([sys.executable, "-m", "runtime.launch", "--instrument", "--ranks-by-program",
                        "--sweep", "ranks=1,2", "--out", str(tmp_path / "runs"), "--", "prog.py", "{ranks}", "ok"],
                       cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    two = [read_run(f) for f in find_run_files(tmp_path / "runs") if "ranks-2" in str(f)]
    assert sorted(r.header["rank"] for r in two) == [0, 0, 1]  # the starter, and ranks 0 and 1
    from modeler.readers import ReadOptions
    from modeler.readers.runs import load_runs

    runset = load_runs([tmp_path / "runs"], ReadOptions())
    assert [(r.status, r.world_size, len(r.ranks), len(r.starters)) for r in
            sorted(runset.runs, key=lambda r: r.world_size)] == [("ok", 1, 1, 1), ("ok", 2, 2, 1)]
    fit = subprocess.run([sys.executable, "-m", "modeler", "fit", str(tmp_path / "runs"), "--min-points", "2",
                          "--min-share", "0", "--format", "json", "-q"], env=_env(), capture_output=True, text=True,
                         timeout=300)
    assert fit.returncode == 0, fit.stderr
    models = json.loads(fit.stdout)["models"]
    assert any(m["callpath"] == "work" for m in models)
    assert not any(m["callpath"].startswith("<module>") or m["callpath"] == "main" for m in models)


def _build(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "prog.py").write_text(PROGRAM)
    built = subprocess.run([sys.executable, "-m", "instrumentor", "src", "-o", "build", "--main", "prog.py", "-q"],
                           cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return tmp_path / "build"


@pytest.mark.parametrize("method, selected", [("forkserver", None), ("fork", "1")])
def test_forkserver_ranks_join_the_run_and_rank_selection_waits_for_the_rank(tmp_path, method, selected):
    """Review 22: forkserver-started ranks made runs of their own (the forkserver their parent), and
    SCALEPROBE_RANKS was decided while every spawned rank still looked like rank 0 (=1: nothing)."""
    build = _build(tmp_path)
    extra = {"SCALEPROBE_OUT": str(tmp_path / "out")} | ({"SCALEPROBE_RANKS": selected} if selected else {})
    p = subprocess.run([sys.executable, "prog.py", "2", "ok", _free_port(), method], cwd=build, env=_env(**extra),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    runs = [read_run(f) for f in find_run_files(tmp_path / "out")]
    assert len({r.header["run_id"] for r in runs}) == 1, [r.header for r in runs]
    ranks = sorted(r.header["rank"] for r in runs if r.header.get("rank_from"))
    if selected is None:
        assert ranks == [0, 1] and len(runs) == 3  # and the starter
    else:
        assert ranks == [1] and len(runs) == 1  # rank 0 and the starter, not selected, left no file
        assert runs[0].header["recorded_ranks"] == [1] and runs[0].header["world_size"] == 2
