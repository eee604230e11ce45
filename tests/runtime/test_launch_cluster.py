"""The launcher as one rank of srun / mpiexec (their environments simulated), --spawn, and --nsys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.runfile import read_run

from .test_launch_e2e import clean_env

SHOW = '''
import json, os, sys
from runtime.probe import define, enter, exit
define(__name__, globals(), "show.py", ((0, "function", "work", 1),))
enter(0); exit(0)
out = os.environ["SCALEPROBE_OUT"]
os.makedirs(out, exist_ok=True)
env = {k: v for k, v in os.environ.items()
       if k.startswith("SCALEPROBE_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
with open(os.path.join(out, "show%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"argv": sys.argv, "env": env}, f)
'''

# Stands in for Nsight Systems: notes how it was called next to the report it would write, then
# runs the profiled command in its place.
FAKE_NSYS = '''
import json, os, sys
args = sys.argv[1:]
assert args[0] == "profile", args
out = args[args.index("-o") + 1]
first = next(i for i in range(len(args)) if args[i + 1:i + 3] == ["-m", "runtime.launch"])
with open(out + ".nsys-rep", "w") as f:
    json.dump({"nsys_args": args[:first], "nvtx": os.environ.get("SCALEPROBE_NVTX")}, f)
os.execv(args[first], args[first:])
'''


def ranks(args: list[str], cwd: Path, envs: list[dict[str, str]]) -> list[subprocess.CompletedProcess]:
    """Start one launcher per simulated rank, all at once, as srun or mpiexec would."""
    procs = [subprocess.Popen([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=clean_env(e),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for e in envs]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def slurm(rank: int, n: int, job: str = "4242", **extra: str) -> dict[str, str]:
    return {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_NTASKS": str(n),
            "SLURM_STEP_NUM_TASKS": str(n), "SLURM_STEP_ID": "0", "SLURM_JOB_ID": job,
            "SLURM_STEP_NODELIST": "localhost", "SLURM_JOB_NODELIST": "localhost", **extra}


def ompi(rank: int, n: int) -> dict[str, str]:
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
            "OMPI_COMM_WORLD_SIZE": str(n)}


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_under_slurm_each_process_is_its_rank(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = ranks(["--param", "batch=4", "show.py", "q"], tmp_path, [slurm(0, 2), slurm(1, 2)])
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    run_dir = tmp_path / "runs" / "show" / "ranks-2_batch-4_rep-0_slurm-4242.0"
    envs = [json.loads((run_dir / f"show{r}.json").read_text())["env"] for r in (0, 1)]
    assert [(e["RANK"], e["WORLD_SIZE"], e["SCALEPROBE_LAUNCHER"]) for e in envs] == [("0", "2", "slurm"),
                                                                                    ("1", "2", "slurm")]
    # torch.distributed's env:// rendezvous can start: the first node and a port from the job id.
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {("localhost", str(15000 + 4242))}
    headers = [read_run(p).header for p in run_dir.glob("rank*.jsonl")]
    assert sorted(h["rank"] for h in headers) == [0, 1]
    assert {h["run_id"] for h in headers} == {"slurm-4242.0"}
    assert all(h["params"] == {"ranks": 2, "batch": 4} for h in headers)
    launch_record = json.loads((run_dir / "launch.json").read_text())
    assert (launch_record["status"], launch_record["run_id"]) == ("ok", "slurm-4242.0")


def test_under_single_node_torchrun_the_agent_names_the_run(tmp_path):
    write(tmp_path / "show.py", SHOW)
    torchrun = [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                 "TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"} for r in (0, 1)]
    done = ranks(["show.py"], tmp_path, torchrun)
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    (run_dir,) = (tmp_path / "runs" / "show").iterdir()
    # Both workers share their parent (here: this test, there: the torchrun agent), hence one run.
    assert run_dir.name == f"ranks-2_rep-0_torchrun-{os.uname().nodename}-{os.getpid()}"
    headers = [read_run(p).header for p in run_dir.glob("rank*.jsonl")]
    assert sorted(h["rank"] for h in headers) == [0, 1]
    assert {h["launcher"] for h in headers} == {"torchrun"}


def test_dry_run_under_slurm_runs_nothing(tmp_path):
    write(tmp_path / "show.py", SHOW)
    (done,) = ranks(["--dry-run", "show.py"], tmp_path, [slurm(1, 2)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rank 1 of 2 would run runs/show/ranks-2_rep-0_slurm-4242.0")
    assert not (tmp_path / "runs").exists()


def test_under_open_mpi_needs_a_run_id_then_works(tmp_path):
    write(tmp_path / "show.py", SHOW)
    refused = ranks(["show.py"], tmp_path, [ompi(0, 2), ompi(1, 2)])
    assert [d.returncode for d in refused] == [2, 2]
    assert "pass --run-id ID" in refused[0].stderr
    done = ranks(["--run-id", "try1", "--repetition", "3", "show.py"], tmp_path, [ompi(0, 2), ompi(1, 2)])
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    run_dir = tmp_path / "runs" / "show" / "ranks-2_rep-3_try1"
    envs = [json.loads((run_dir / f"show{r}.json").read_text())["env"] for r in (0, 1)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["SCALEPROBE_LAUNCHER"], e["SCALEPROBE_REPETITION"]) for e in envs] == \
        [("0", "0", "mpi", "3"), ("1", "1", "mpi", "3")]
    assert "MASTER_PORT" not in envs[0]  # nothing to derive it from: left to the user, never guessed apart
    assert sorted(read_run(p).header["rank"] for p in run_dir.glob("rank*.jsonl")) == [0, 1]


def test_sweep_inside_a_scheduler_rank_is_refused(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = ranks(["--sweep", "x=1,2", "show.py"], tmp_path, [slurm(0, 2), slurm(1, 2)])
    assert [d.returncode for d in done] == [2, 2]
    assert "--spawn 'srun -n {ranks}'" in done[1].stderr
    assert not (tmp_path / "runs").exists()


def test_spawn_command_starts_each_runs_ranks(tmp_path):
    # A stand-in for srun: starts {ranks} copies of the command with SLURM-style variables.
    fake_srun = write(tmp_path / "fake_srun.py", '''
        import os, subprocess, sys
        n = int(sys.argv[2])
        procs = [subprocess.Popen(sys.argv[3:], env=dict(os.environ, SLURM_PROCID=str(r), SLURM_LOCALID=str(r),
                 SLURM_NTASKS=str(n), SLURM_STEP_NUM_TASKS=str(n), SLURM_STEP_ID="0", SLURM_JOB_ID="99",
                 SLURM_STEP_NODELIST="localhost")) for r in range(n)]
        sys.exit(max(p.wait() for p in procs))
    ''')
    write(tmp_path / "show.py", SHOW)
    proc = subprocess.run([sys.executable, "-m", "runtime.launch", "--sweep", "ranks=1,2",
                           "--spawn", f"{sys.executable} {fake_srun} -n {{ranks}}", "show.py"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for n in (1, 2):
        run_dir = tmp_path / "runs" / "show" / f"ranks-{n}_rep-0"
        launch_record = json.loads((run_dir / "launch.json").read_text())
        headers = [read_run(p).header for p in run_dir.glob("rank*.jsonl")]
        assert sorted(h["rank"] for h in headers) == list(range(n))
        # The run id is the sweep's, not the job step's: every run of the sweep is its own run.
        assert {h["run_id"] for h in headers} == {launch_record["run_id"]}
        assert all(h["params"] == {"ranks": n} and h["launcher"] == "slurm" for h in headers)


def test_nsys_missing_is_a_clear_error(tmp_path):
    write(tmp_path / "show.py", SHOW)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "--nsys", "--nproc", "2", "show.py"],
                          cwd=tmp_path, env=clean_env({"PATH": str(empty)}), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "`nsys` is not on PATH" in done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.fixture
def nsys_on_path(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = write(bindir / "nsys", f"#!{sys.executable}\n" + FAKE_NSYS)
    fake.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_nsys_profiles_only_selected_local_ranks(tmp_path, nsys_on_path):
    write(tmp_path / "show.py", SHOW)
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "--nsys", "--nsys-ranks", "1", "--nproc", "2",
                           "show.py", "arg"], cwd=tmp_path, env=clean_env(nsys_on_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "show" / "ranks-2_rep-0"
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == ["rank1.nsys-rep"]
    report = json.loads((run_dir / "rank1.nsys-rep").read_text())
    assert report == {"nsys_args": ["profile", "-o", str(run_dir / "rank1"), "--trace=cuda,nvtx,osrt",
                                    "--force-overwrite=true"], "nvtx": "1"}
    shown = [json.loads((run_dir / f"show{r}.json").read_text()) for r in (0, 1)]
    assert [s["argv"] for s in shown] == [["show.py", "arg"], ["show.py", "arg"]]
    assert sorted(read_run(p).header["rank"] for p in run_dir.glob("rank*.jsonl")) == [0, 1]


def test_nsys_under_slurm_with_own_arguments(tmp_path, nsys_on_path):
    write(tmp_path / "show.py", SHOW)
    args = ["--nsys", "--nsys-ranks", "::2", "--nsys-args", "-t nvtx", "show.py"]
    done = ranks(args, tmp_path, [dict(slurm(r, 3), **nsys_on_path) for r in range(3)])
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr for d in done]
    run_dir = tmp_path / "runs" / "show" / "ranks-3_rep-0_slurm-4242.0"
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == ["rank0.nsys-rep", "rank2.nsys-rep"]
    report = json.loads((run_dir / "rank2.nsys-rep").read_text())
    assert report["nsys_args"] == ["profile", "-o", str(run_dir / "rank2"), "-t", "nvtx"]
    assert sorted(read_run(p).header["rank"] for p in run_dir.glob("rank*.jsonl")) == [0, 1, 2]


def free_port_in_job_range() -> int:
    """A free port p with a job id that maps to it (p = 15000 + id % 20000)."""
    import socket

    for port in range(15000 + os.getpid() % 20000, 35000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port between 15000 and 35000")


@pytest.mark.slow
def test_torch_distributed_rendezvous_under_simulated_srun(tmp_path):
    pytest.importorskip("torch")
    write(tmp_path / "allreduce.py", '''
        import os
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")  # env:// from what the launcher exported
        t = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(t)
        with open(os.path.join(os.environ["SCALEPROBE_OUT"], "sum%d" % dist.get_rank()), "w") as f:
            f.write("%g %d" % (t.item(), dist.get_world_size()))
        dist.destroy_process_group()
    ''')
    job = str(free_port_in_job_range() - 15000)
    done = ranks(["allreduce.py"], tmp_path, [slurm(r, 2, job=job, OMP_NUM_THREADS="1") for r in (0, 1)])
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    run_dir = tmp_path / "runs" / "allreduce" / f"ranks-2_rep-0_slurm-{job}.0"
    assert [(run_dir / f"sum{r}").read_text() for r in (0, 1)] == ["3 2", "3 2"]
