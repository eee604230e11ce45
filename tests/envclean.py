"""The environment of the processes the tests start: the test run's own, less scaleprobe's
variables and a launcher's (review 47 F2).

A test run inside an sbatch script, a torchrun job or an mpirun has RANK, WORLD_SIZE, MASTER_PORT,
SLURM_* and the like set: a program the test starts would record as that job's rank (rank1.*.jsonl
where the test looks for rank0), name its run after the job, start a rendezvous on its port, or
refuse to sweep ("this process is rank 1 of 2"). `from tests.envclean import clean_env` works
from every test folder: tests/ is a package and pytest's pythonpath has the repository root.
"""

from __future__ import annotations

import os

# torchrun's (torch.distributed's env://) and its agent's
LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
               "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# scaleprobe's own; torchrun's agent; the schedulers and MPI launchers that runtime/environment.py
# reads a rank, a job id or a node list from (Slurm, Open MPI, PMI, PMIx, PALS, PBS, Intel MPI, LSF, Cobalt)
LAUNCH_PREFIXES = ("SCALEPROBE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "PALS_", "PBS_", "MPI_LOCAL",
                   "LSB_", "COBALT_")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without scaleprobe's and the launchers' variables, then `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS and not k.startswith(LAUNCH_PREFIXES)}
    env.update(extra)
    return env
