"""Review 72, runtime/environment.py: the port of concurrent launches of one job (F1), the local rank
of a RANK set by hand (F3), ranks claimed twice (F6), a launch's own id before its job's (F4), and
MVAPICH2 and Flux (F8). The schedulers' variables are faked: no srun or mpiexec is needed."""

from __future__ import annotations

import pytest

from runtime import environment
from runtime.environment import RankEnvironmentError, detect, export_torch_env, job_run_id


def srun(rank: int, n: int, step: str = "0", job: str = "9001", local: int | None = None) -> dict[str, str]:
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank if local is None else local), "SLURM_STEP_NUM_TASKS": str(n),
            "SLURM_NTASKS": str(n), "SLURM_STEP_NODELIST": "node[0-1]"}


def port(env: dict[str, str]) -> str:
    env = dict(env, MASTER_ADDR="node0")
    export_torch_env(environ=env)
    return env["MASTER_PORT"]


# -- F1: the port of a launch -----------------------------------------------------------------------


def test_the_steps_of_one_job_get_different_ports_and_the_ranks_of_a_step_the_same():
    step0 = {port(srun(r, 2, step="0")) for r in (0, 1)}
    step1 = {port(srun(r, 2, step="1")) for r in (0, 1)}
    assert len(step0) == 1 and len(step1) == 1
    assert step0 != step1
    # step 0 keeps the port the documentation gave for a job (15000 + job id % 20000)
    assert step0 == {str(15000 + 9001 % 20000)}
    # many steps of one job at once: no two share a port
    assert len({port(srun(0, 2, step=str(s))) for s in range(200)}) == 200


def test_concurrent_mpiruns_of_one_batch_job_get_different_ports():
    def ompi(rank: int, namespace: str) -> dict[str, str]:
        return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
                "PMIX_RANK": str(rank), "PMIX_NAMESPACE": namespace, "SLURM_JOB_ID": "55"}

    a = {port(ompi(r, "prterun-n1-1111@1")) for r in (0, 1)}
    b = {port(ompi(r, "prterun-n1-2222@1")) for r in (0, 1)}
    assert len(a) == 1 and len(b) == 1 and a != b


def test_a_world_of_one_takes_a_free_port(monkeypatch):
    monkeypatch.setattr(environment, "_free_port", lambda: "4711")
    env = srun(0, 1)
    export_torch_env(environ=env)
    assert env["MASTER_PORT"] == "4711"
    given = dict(srun(0, 1), MASTER_PORT="1234")  # a port the user gave stays
    export_torch_env(environ=given)
    assert given["MASTER_PORT"] == "1234"


# -- F3: RANK set by hand, LOCAL_RANK not -----------------------------------------------------------


def test_rank_set_from_slurm_takes_slurms_local_id_and_names_slurm():
    # `srun -N 2 -n 4 sh -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS exec ...'`: rank 2 is node1's first
    env = dict(srun(2, 4, local=0), RANK="2", WORLD_SIZE="4")
    found = detect(env)
    assert (found.rank, found.local_rank, found.world_size, found.launcher) == (2, 0, 4, "slurm")
    changed = export_torch_env(environ=env)
    assert changed["LOCAL_RANK"] == "0" and changed["SCALEPROBE_LAUNCHER"] == "slurm"


def test_rank_set_under_open_mpi_takes_its_local_rank():
    env = {"RANK": "3", "WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
    found = detect(env)
    assert (found.local_rank, found.launcher) == (1, "mpi")


def test_rank_set_by_hand_with_nothing_else_invents_no_local_rank():
    env = {"RANK": "3", "WORLD_SIZE": "4"}
    assert detect(env).local_rank is None
    changed = export_torch_env(environ=dict(env, MASTER_ADDR="h", MASTER_PORT="1"))
    assert "LOCAL_RANK" not in changed
    # one node (torchrun's LOCAL_WORLD_SIZE says all ranks are local), or a world of one: known
    assert detect({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}).local_rank == 3
    assert detect({"RANK": "0", "WORLD_SIZE": "1"}).local_rank == 0


def test_an_mpi_launch_that_gives_no_local_rank_gets_none_made_up():
    assert detect({"PMI_RANK": "5", "PMI_SIZE": "8"}).local_rank is None
    assert detect({"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALNRANKS": "4"}).local_rank == 1  # packed by node
    assert detect({"PMI_RANK": "0", "PMI_SIZE": "1"}).local_rank == 0


# -- F6: two processes that claim one rank -----------------------------------------------------------


def test_rank_exported_once_for_a_whole_srun_step_is_an_error():
    # `export RANK=0 WORLD_SIZE=3` in the batch script, then `srun -n 3`
    assert detect(dict(srun(0, 3), RANK="0", WORLD_SIZE="3")).rank == 0
    with pytest.raises(RankEnvironmentError, match=r"RANK=0 but SLURM_PROCID=1 .*several processes would claim rank 0"):
        detect(dict(srun(1, 3), RANK="0", WORLD_SIZE="3"))
    with pytest.raises(RankEnvironmentError, match=r"RANK=0 but OMPI_COMM_WORLD_RANK=2"):
        detect({"RANK": "0", "WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"})


def test_torchrun_inside_srun_numbers_its_workers_itself():
    # one worker per node, the nodes numbered by the rendezvous: RANK need not be SLURM_PROCID
    env = dict(srun(0, 2), RANK="1", LOCAL_RANK="0", WORLD_SIZE="2", TORCHELASTIC_RUN_ID="job")
    found = detect(env)
    assert (found.rank, found.local_rank, found.launcher) == (1, 0, "torchrun")


# -- F4: a launch's own id before its batch job's ---------------------------------------------------------


def test_mpiruns_inside_a_batch_job_get_run_ids_of_their_own():
    job = {"SLURM_JOB_ID": "55", "SLURM_PROCID": "0", "SLURM_NTASKS": "8"}  # the batch script's
    assert job_run_id(dict(job, PMIX_NAMESPACE="prterun-n1-1111@1")) == "pmix-prterun-n1-1111@1"
    assert job_run_id(dict(job, PMIX_NAMESPACE="prterun-n1-2222@1")) == "pmix-prterun-n1-2222@1"
    assert job_run_id(dict(job, SLURM_STEP_ID="3")) == "slurm-55.3"


# -- F8: MVAPICH2 and Flux ------------------------------------------------------------------------------


def test_mvapich2_mpirun_rsh():
    env = {"MV2_COMM_WORLD_RANK": "3", "MV2_COMM_WORLD_SIZE": "4", "MV2_COMM_WORLD_LOCAL_RANK": "1"}
    found = detect(env)
    assert (found.rank, found.local_rank, found.world_size, found.launcher) == (3, 1, 4, "mpi")


def test_flux_run():
    env = {"FLUX_TASK_RANK": "5", "FLUX_JOB_SIZE": "8", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_ID": "ƒ2Ct3Ze1"}
    found = detect(env)
    assert (found.rank, found.local_rank, found.world_size, found.launcher) == (5, 1, 8, "mpi")
    assert job_run_id(env) == "flux-ƒ2Ct3Ze1"
    ports = {port(dict(env, FLUX_TASK_RANK=str(r), FLUX_TASK_LOCAL_ID=str(r % 4))) for r in range(8)}
    assert len(ports) == 1 and 15000 <= int(ports.pop()) < 35000
    assert port(dict(env, FLUX_JOB_ID="ƒ2Ct3Ze2")) != port(env)  # another `flux run`, another port


def test_mvapich2_and_flux_inconsistencies_name_their_variables():
    with pytest.raises(RankEnvironmentError, match="MV2_COMM_WORLD_RANK=2 is not below MV2_COMM_WORLD_SIZE=2"):
        detect({"MV2_COMM_WORLD_RANK": "2", "MV2_COMM_WORLD_SIZE": "2"})
    with pytest.raises(RankEnvironmentError, match="FLUX_TASK_RANK is set but no world size"):
        detect({"FLUX_TASK_RANK": "0"})
