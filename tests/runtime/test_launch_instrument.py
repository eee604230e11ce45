"""`--instrument` with the real instrumentor: the sample application on two ranks, and tracebacks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.runfile import read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "testdata" / "sample_code" / "main.py"


def launch(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = clean_env()
    env.update({"PYTHONPATH": str(REPO), "SCALEPROBE_QUIET": "1", "OMP_NUM_THREADS": "1"})
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the sample application needs torch")
def test_sample_app_instrumented_on_the_fly_on_two_ranks(tmp_path):
    done = launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), "--nproc", "2",
                   "--param", "batch=16", "--out", str(tmp_path / "runs"), str(SAMPLE),
                   "--epochs", "2", "--steps-per-epoch", "2", "--batch-size", "16", "--num-samples", "128",
                   "--eval-samples", "32"], tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "main" / "ranks-2_batch-16_rep-0"
    runs = sorted((read_run(p) for p in run_dir.glob("rank*.jsonl")), key=lambda r: r.header["rank"])
    assert [r.header["rank"] for r in runs] == [0, 1]
    for run in runs:
        assert run.problems == []
        assert run.header["params"] == {"ranks": 2, "batch": 16}
        assert run.header["world_size"] == 2
        assert run.end["status"] == "ok"
        # Functions of several of the project's modules were instrumented, not just the entry.
        assert {Path(region.file).name for region in run.regions.values()} >= {"main.py", "train.py"}
        assert len(run.steps) == 4  # 2 epochs x 2 steps, recorded by the instrumented step loop
    assert {r.header["run_id"] for r in runs} == {json.loads((run_dir / "launch.json").read_text())["run_id"]}


def test_instrumented_traceback_keeps_original_files_and_lines(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "helper.py").write_text(textwrap.dedent('''
        """A module the entry imports: instrumented by the import hook."""


        def divide(a, b):
            for _ in range(1):
                return a / b
    '''))
    (project / "main.py").write_text(textwrap.dedent('''
        from helper import divide


        def main():
            return divide(1, 0)


        main()
    '''))
    done = launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), "proj/main.py"], tmp_path)
    assert done.returncode == 1
    frames = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("File ")]
    assert frames == [f'File "{project / "main.py"}", line 9, in <module>',
                      f'File "{project / "main.py"}", line 6, in main',
                      f'File "{project / "helper.py"}", line 7, in divide'], done.stderr
    assert done.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    # The probes were really there: the run file knows the helper's function.
    (run_file,) = (tmp_path / "runs" / "main" / "ranks-1_rep-0").glob("rank0.*.jsonl")
    run = read_run(run_file)
    assert "divide" in {region.name for region in run.regions.values()}
    assert run.end["status"] == "exception"


def test_spawned_children_are_instrumented_too(tmp_path):
    # a spawn child is a fresh interpreter: without the hook carried over it ran the project
    # uninstrumented and wrote no file. Its target lives in the entry script, which the child
    # re-runs as __mp_main__: that must be instrumented as well.
    project = tmp_path / "proj"
    project.mkdir()
    (project / "helper.py").write_text(textwrap.dedent('''
        def work(n):
            total = 0
            for i in range(n):
                total += i
            return total
    '''))
    (project / "main.py").write_text(textwrap.dedent('''
        import multiprocessing as mp
        from helper import work


        def target(n):
            return work(n) + 1


        def run(n, queue):
            queue.put(target(n))


        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            children = [ctx.Process(target=run, args=(n, queue)) for n in (10, 20, 30)]
            for c in children:
                c.start()
            results = [queue.get() for _ in children]
            for c in children:
                c.join()
            print(sum(results))
    '''))
    done = launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), "proj/main.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["673"], "the program's own output is unchanged"
    runs = [read_run(p) for p in (tmp_path / "runs" / "main" / "ranks-1_rep-0").glob("rank0.*.jsonl")]
    parent = [r for r in runs if "child_of" not in r.header]
    children = [r for r in runs if "child_of" in r.header]
    assert len(parent) == 1 and len(children) == 3
    visits = {}
    for run in children:
        assert run.header["child_of"] == parent[0].header["pid"] and run.end["status"] == "ok"
        names = {rid: region.name for rid, region in run.regions.items()}
        for path, stats in run.profile.items():
            visits[names[path[-1]]] = visits.get(names[path[-1]], 0) + stats.visits
    assert visits["run"] == 3 and visits["target"] == 3 and visits["work"] == 3, visits
