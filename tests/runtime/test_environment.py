"""Rank detection from the variables of each launcher, and the torch.distributed export."""

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.environment import (ProcessIdentity, RankEnvironmentError, detect, export_torch_env,
                                 first_host)

REPO = Path(__file__).resolve().parents[2]


def ident(env: dict[str, str]) -> tuple[int, int, int, str]:
    found = detect(env)
    return found.rank, found.local_rank, found.world_size, found.launcher


def test_plain_process_is_rank_zero_of_one():
    found = detect({})
    assert (found.rank, found.local_rank, found.world_size, found.launcher) == (0, 0, 1, "none")
    assert found.host
    assert not found.distributed


def test_torchrun():
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "x"}
    assert ident(env) == (3, 1, 4, "torchrun")


def test_our_launcher_names_itself():
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "SCALEPROBE_LAUNCHER": "launch"}
    assert ident(env) == (1, 1, 2, "launch")


def test_slurm_srun():
    env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_TASKS": "8"}
    assert ident(env) == (5, 1, 8, "slurm")


def test_slurm_batch_script_is_no_rank():
    # sbatch's script and salloc's shell see the job's variables but were not started by srun.
    env = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "77",
           "SLURM_JOB_NODELIST": "n[1-2]"}
    assert ident(env) == (0, 0, 1, "none")
    assert export_torch_env(environ=env) == {}


def test_slurm_step_size_wins_over_job_size():
    # An srun step of 4 tasks inside a job of 16.
    env = {"SLURM_PROCID": "2", "SLURM_LOCALID": "2", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "4"}
    assert ident(env) == (2, 2, 4, "slurm")


def test_open_mpi():
    env = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8"}
    assert ident(env) == (6, 2, 8, "mpi")


def test_mpiexec_inside_slurm_allocation_is_mpi():
    # The batch script's SLURM_PROCID=0 is inherited by every rank mpiexec starts.
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}
    assert ident(env) == (3, 3, 4, "mpi")


def test_srun_with_pmix_is_slurm():
    env = {"PMIX_RANK": "1", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
           "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0"}
    assert ident(env) == (1, 1, 2, "slurm")


def test_mpich_hydra():
    env = {"PMI_RANK": "4", "PMI_SIZE": "6", "MPI_LOCALRANKID": "0"}
    assert ident(env) == (4, 0, 6, "mpi")


def test_mpich_without_local_rank_uses_local_size():
    env = {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALNRANKS": "4"}
    assert ident(env) == (5, 1, 8, "mpi")


def test_pals_takes_size_from_pmi():
    env = {"PALS_RANKID": "7", "PALS_LOCAL_RANKID": "3", "PMI_SIZE": "8"}
    assert ident(env) == (7, 3, 8, "mpi")


def test_pmix_without_any_size_is_a_clear_error():
    with pytest.raises(RankEnvironmentError, match="PMIX_RANK is set but no world size"):
        detect({"PMIX_RANK": "0"})


@pytest.mark.parametrize("env, message", [
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
    ({"RANK": "0"}, "WORLD_SIZE is not"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "2"}, "negative"),
])
def test_inconsistent_environment(env, message):
    with pytest.raises(RankEnvironmentError, match=message):
        detect(env)


def test_torchrun_variables_win_over_scheduler():
    # torchrun started inside an srun step: torch.distributed uses RANK, so must we.
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}
    assert ident(env) == (3, 3, 8, "torchrun")


@pytest.mark.parametrize("nodelist, first", [
    ("node01", "node01"),
    ("gpu[007-010,012],cpu3", "gpu007"),
    ("a1,b[2-3]", "a1"),
    ("rack[2-3]-n[04-05]", "rack2-n04"),
    ("x[5,1-2]", "x5"),
])
def test_first_host(nodelist, first):
    assert first_host(nodelist) == first


def test_first_host_rejects_unclosed_bracket():
    with pytest.raises(RankEnvironmentError, match="unclosed"):
        first_host("node[1-2")


def test_export_under_slurm_derives_master():
    env = {"SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "4",
           "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "123456", "SLURM_STEP_NODELIST": "gpu[03-04]"}
    changed = export_torch_env(environ=env)
    assert changed == {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "SCALEPROBE_LAUNCHER": "slurm",
                       "MASTER_ADDR": "gpu03", "MASTER_PORT": str(15000 + 123456 % 20000)}
    assert env["RANK"] == "1"
    # Exported again (a second import, a child process): detect() reads the same identity back.
    assert ident(env) == (1, 1, 4, "slurm")
    assert export_torch_env(environ=env) == {}


def test_export_under_pbs_mpiexec_reads_nodefile(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("\nx3001c0s7b0n0\nx3001c0s7b0n0\nx3001c0s13b1n0\n")
    env = {"PALS_RANKID": "2", "PALS_LOCAL_RANKID": "0", "PMI_SIZE": "4", "PBS_NODEFILE": str(nodefile),
           "PBS_JOBID": "4242.polaris-pbs-01"}
    changed = export_torch_env(environ=env)
    assert changed["MASTER_ADDR"] == "x3001c0s7b0n0"
    assert changed["MASTER_PORT"] == str(15000 + 4242)
    assert changed["SCALEPROBE_LAUNCHER"] == "mpi"


def test_export_keeps_user_master_and_skips_underivable():
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "head"}
    changed = export_torch_env(environ=env)
    assert env["MASTER_ADDR"] == "head"
    assert "MASTER_ADDR" not in changed
    # Nothing says which port all ranks agree on: left to the user rather than guessed differently.
    assert "MASTER_PORT" not in env


def test_export_outside_any_launcher_sets_nothing():
    env: dict[str, str] = {}
    assert export_torch_env(environ=env) == {}
    assert env == {}


def test_identity_is_frozen():
    found = ProcessIdentity(0, 0, 1, "none", "h")
    with pytest.raises(AttributeError):
        found.rank = 1  # type: ignore[misc]


def test_import_is_cheap():
    code = ("import sys, runtime.environment; "
            "print(sorted(m for m in ('torch', 'json', 'numpy', 'nvtx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"
