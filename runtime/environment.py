"""Which rank this process is, whoever started it.

Reads the variables of torchrun, our own launcher, SLURM, Open MPI, MPICH/PMI (Hydra, Intel MPI,
Cray PMI), PMIx, PALS (Cray/HPE PBS), MVAPICH2 (`mpirun_rsh`) and Flux (`flux run`), and can export
the torchrun-style variables that `torch.distributed`'s `env://` rendezvous expects when a process
was started by srun or mpiexec.

Imported by the recorder on every rank at start-up: standard library only, nothing heavy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, MutableMapping

from runtime.errors import ScaleprobeRuntimeError

LAUNCHERS = ("launch", "torchrun", "slurm", "mpi", "none")


class RankEnvironmentError(ScaleprobeRuntimeError):
    """The environment names a rank but is inconsistent or incomplete."""


@dataclass(frozen=True)
class ProcessIdentity:
    rank: int
    #: None where nothing says (RANK/WORLD_SIZE set by hand, no scheduler's local id): never made up
    local_rank: int | None
    world_size: int
    launcher: str
    host: str

    @property
    def distributed(self) -> bool:
        return self.launcher != "none"


def _hostname() -> str:
    try:
        return os.uname().nodename
    except AttributeError:  # Windows has no os.uname
        import socket

        return socket.gethostname()


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise RankEnvironmentError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < 0:
        raise RankEnvironmentError(f"environment variable {name}={raw!r} is negative")
    return value


def _first(env: Mapping[str, str], *names: str) -> tuple[str, int] | None:
    """The first of `names` that is set, with its value."""
    for name in names:
        value = _int(env, name)
        if value is not None:
            return name, value
    return None


# Each MPI flavour: (rank variables, world-size variables, local-rank variables), first found wins.
# PMIx and PALS export no world size of their own; the PMI/Open MPI/SLURM ones that come with them do.
# MVAPICH2's mpirun_rsh and Flux's `flux run` are MPI-style launchers too (launcher `mpi`).
_MPI_RANK = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PALS_RANKID", "MV2_COMM_WORLD_RANK", "FLUX_TASK_RANK")
_MPI_SIZE = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE", "FLUX_JOB_SIZE",
             "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
_MPI_LOCAL = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK",
              "MV2_COMM_WORLD_LOCAL_RANK", "FLUX_TASK_LOCAL_ID", "SLURM_LOCALID")
_MPI_LOCAL_SIZE = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")

Named = tuple[str, int]  # (variable, its value): errors name the variables that were read
Found = tuple[int, "int | None", int, str]  # rank, local rank (None: nothing says), world size, launcher


@dataclass(frozen=True)
class _Scheduled:
    """A rank as srun or an MPI launcher names it, with the variables it was read from."""
    rank: Named
    size: Named
    local: int | None
    launcher: str

    def found(self) -> Found:
        return self.rank[1], self.local, self.size[1], self.launcher


def _check(rank: Named, size: Named, local: Named | None) -> None:
    (rank_var, r), (size_var, s) = rank, size
    if s < 1:
        raise RankEnvironmentError(f"{size_var}={s} is not a positive world size")
    if r >= s:
        raise RankEnvironmentError(f"{rank_var}={r} is not below {size_var}={s}")
    if local is not None and local[1] > r:
        raise RankEnvironmentError(f"{local[0]}={local[1]} is above {rank_var}={r}: a local rank is at most the rank")


def _from_torchrun(env: Mapping[str, str]) -> Found | None:
    rank = _int(env, "RANK")
    if rank is None:
        return None
    size = _int(env, "WORLD_SIZE")
    if size is None:
        raise RankEnvironmentError("RANK is set but WORLD_SIZE is not")
    local = _int(env, "LOCAL_RANK")
    # Our launcher and export_torch_env() both set RANK and say who they are; plain RANK is torchrun's.
    named = env.get("SCALEPROBE_LAUNCHER", "")
    ours = named in LAUNCHERS and named != "none"
    launcher = named if ours else "torchrun"
    _check(("RANK", rank), ("WORLD_SIZE", size), None if local is None else ("LOCAL_RANK", local))
    if ours or "TORCHELASTIC_RUN_ID" in env:
        # torchrun's agent numbers its workers itself (inside an srun step too): its RANK is the rank
        return rank, local if local is not None else (0 if size == 1 else None), size, launcher
    # RANK/WORLD_SIZE set by hand or by a wrapper (`RANK=$SLURM_PROCID`) in an srun step or an MPI
    # launch: the scheduler's own variables must agree, and they know the local rank (review 72 F3, F6)
    scheduled = _scheduled(env)
    if scheduled is not None and scheduled.size[1] == size:
        if scheduled.rank[1] != rank:
            raise RankEnvironmentError(
                f"RANK={rank} but {scheduled.rank[0]}={scheduled.rank[1]} in a launch of "
                f"{scheduled.size[0]}={size} = WORLD_SIZE processes: several processes would claim rank {rank} "
                f"(RANK exported once for the whole job?); set RANK per process (srun sh -c 'RANK=$SLURM_PROCID "
                "...'), or leave RANK and WORLD_SIZE unset: the launcher reads the rank from the scheduler")
        if local is None:
            return rank, scheduled.local, size, scheduled.launcher
    if local is None:
        # never made up from the global rank (review 72 F3): that is another node's device number
        lws = _int(env, "LOCAL_WORLD_SIZE")
        local = 0 if size == 1 else rank if lws == size else None
    return rank, local, size, launcher


def _scheduled(env: Mapping[str, str]) -> _Scheduled | None:
    """The rank srun or an MPI launcher gives this process, or None (also where their variables are
    incomplete: RANK is what counts then)."""
    for source in (_mpi, _slurm):
        try:
            found = source(env)
        except RankEnvironmentError:
            return None
        if found is not None:
            return found
    return None


def _mpi(env: Mapping[str, str]) -> _Scheduled | None:
    rank = _first(env, *_MPI_RANK)
    if rank is None:
        return None
    size = _first(env, *_MPI_SIZE)
    if size is None:
        raise RankEnvironmentError(
            f"{rank[0]} is set but no world size is: expected one of {', '.join(_MPI_SIZE)}")
    local = _first(env, *_MPI_LOCAL)
    _check(rank, size, local)
    if local is not None:
        local_rank = local[1]
    else:
        local_size = _first(env, *_MPI_LOCAL_SIZE)
        # Without a local rank, assume ranks are packed by node, which mpiexec does by default;
        # without a local size either, nothing says (never the global rank: review 72 F3)
        local_rank = (rank[1] % local_size[1] if local_size and local_size[1] else
                      0 if size[1] == 1 else None)
    # srun --mpi=pmix/pmi2 sets both SLURM's and the MPI variables: the job step is SLURM's.
    slurm = (_int(env, "SLURM_PROCID"), _int(env, "SLURM_STEP_NUM_TASKS"))
    launcher = "slurm" if slurm == (rank[1], size[1]) else "mpi"
    return _Scheduled(rank, size, local_rank, launcher)


def _slurm(env: Mapping[str, str]) -> _Scheduled | None:
    rank = _int(env, "SLURM_PROCID")
    # Only srun sets the step's task count. The batch script and an salloc shell also see
    # SLURM_PROCID=0 and the job's SLURM_NTASKS, but they are not rank 0 of anything: taking them
    # for one would hang torch.distributed waiting for ranks that never come.
    size = _int(env, "SLURM_STEP_NUM_TASKS")
    if rank is None or size is None:
        return None
    local = _int(env, "SLURM_LOCALID")
    _check(("SLURM_PROCID", rank), ("SLURM_STEP_NUM_TASKS", size), None if local is None else ("SLURM_LOCALID", local))
    if local is None:
        local = 0 if size == 1 else None
    return _Scheduled(("SLURM_PROCID", rank), ("SLURM_STEP_NUM_TASKS", size), local, "slurm")


def _from_mpi(env: Mapping[str, str]) -> Found | None:
    found = _mpi(env)
    return None if found is None else found.found()


def _from_slurm(env: Mapping[str, str]) -> Found | None:
    found = _slurm(env)
    return None if found is None else found.found()


def detect(environ: Mapping[str, str] | None = None) -> ProcessIdentity:
    """Rank, local rank, world size and launcher of this process, from its environment.

    torchrun-style RANK/WORLD_SIZE win (they are what torch.distributed will use), then MPI
    (mpiexec inside a SLURM allocation also inherits SLURM's variables), then an srun step (a
    batch script or salloc shell is no rank: `none`). Raises
    RankEnvironmentError naming the variable when the environment contradicts itself.
    """
    env = os.environ if environ is None else environ
    for source in (_from_torchrun, _from_mpi, _from_slurm):
        found = source(env)
        if found is not None:
            rank, local, size, launcher = found
            return ProcessIdentity(rank, local, size, launcher, _hostname())
    return ProcessIdentity(0, 0, 1, "none", _hostname())


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list such as `gpu[007-010,012],cpu3` (here `gpu007`)."""
    item, depth = [], 0
    for char in nodelist.strip():
        if char == "," and depth == 0:
            break
        depth += char == "["
        depth -= char == "]"
        item.append(char)
    text = "".join(item)
    out, pos = [], 0
    while True:
        start = text.find("[", pos)
        if start < 0:
            out.append(text[pos:])
            break
        end = text.find("]", start)
        if end < 0:
            raise RankEnvironmentError(f"SLURM host list {nodelist!r} has an unclosed '['")
        out.append(text[pos:start])
        out.append(text[start + 1:end].split(",")[0].split("-")[0])
        pos = end + 1
    host = "".join(out)
    if not host:
        raise RankEnvironmentError(f"SLURM host list {nodelist!r} is empty")
    return host


def _master_addr(env: Mapping[str, str], identity: ProcessIdentity) -> str | None:
    if identity.world_size == 1:
        return "127.0.0.1"
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if env.get(name):
            return first_host(env[name])
    nodefile = env.get("PBS_NODEFILE")
    if nodefile:
        try:
            with open(nodefile, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        return line.strip()
        except OSError as exc:
            raise RankEnvironmentError(f"PBS_NODEFILE {nodefile}: {exc.strerror}") from None
    return None


def _job_number(env: Mapping[str, str]) -> int | None:
    """The batch job's id as a number (SLURM, PBS, LSF, Cobalt, Flux), or None."""
    for name in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID"):
        digits = "".join(ch for ch in env.get(name, "").split(".")[0] if ch.isdigit())
        if digits:
            return int(digits)
    flux = env.get("FLUX_JOB_ID", "")
    return None if not flux else int(flux) if flux.isdigit() else _number(flux)


def _number(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode("utf-8", "surrogateescape"))


def launch_id(env: Mapping[str, str]) -> tuple[str, str] | None:
    """What tells the launches of one job apart, alike for every rank of one launch: the PMIx
    namespace (one per mpirun, and per srun step under --mpi=pmix), a Flux job's id (each `flux run`
    is a job), srun's step id; None where there is none (MPICH's mpiexec inside a batch job)."""
    if env.get("PMIX_NAMESPACE"):
        return "pmix", env["PMIX_NAMESPACE"]
    if env.get("FLUX_JOB_ID"):
        return "flux", env["FLUX_JOB_ID"]
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    if step and env.get("SLURM_JOB_ID"):
        return "step", step
    return None


#: folds the launch into the port: odd and prime to 5, so that the steps of one job never share a port
_STEP_FACTOR = 12361


def _master_port(env: Mapping[str, str]) -> str | None:
    # Every rank must agree without talking to each other, and concurrent launches of one job (srun
    # steps packed into an allocation, mpiruns started in the background) must not (review 72 F1):
    # derived from the job id and the launch's id, in the unprivileged range below the usual
    # ephemeral ports, as several cluster launch scripts do.
    job = _job_number(env)
    launch = launch_id(env)
    if job is None and launch is None:
        return None
    number = 0
    if launch is not None:
        kind, text = launch
        number = int(text) if kind == "step" and text.isdigit() else _number(text)
    return str(15000 + ((job or 0) + _STEP_FACTOR * number) % 20000)


def _free_port() -> str:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def export_torch_env(identity: ProcessIdentity | None = None,
                     environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set RANK, LOCAL_RANK, WORLD_SIZE (and MASTER_ADDR/MASTER_PORT when missing and derivable).

    For processes started by srun or mpiexec, so that `torch.distributed.init_process_group()`
    with its default `env://` works unchanged. Variables already set are kept (a user's MASTER_ADDR
    wins); LOCAL_RANK only where the launcher gives it. A world of one rank gets a free port, as a
    plain run does. Returns what was set. Under `none` nothing is exported.
    """
    env = os.environ if environ is None else environ
    ident = detect(env) if identity is None else identity
    if ident.launcher == "none":
        return {}
    wanted = {
        "RANK": str(ident.rank),
        "WORLD_SIZE": str(ident.world_size),
        "SCALEPROBE_LAUNCHER": ident.launcher,
    }
    if ident.local_rank is not None:
        wanted["LOCAL_RANK"] = str(ident.local_rank)
    if "MASTER_ADDR" not in env:
        addr = _master_addr(env, ident)
        if addr is not None:
            wanted["MASTER_ADDR"] = addr
    if "MASTER_PORT" not in env:
        port = _free_port() if ident.world_size == 1 else _master_port(env)
        if port is not None:
            wanted["MASTER_PORT"] = port
    # An existing RANK & co. is what detect() read in the first place: only fill in what is missing.
    changed = {k: v for k, v in wanted.items() if k not in env}
    env.update(changed)
    return changed


def job_run_id(env: Mapping[str, str]) -> str | None:
    """An id every rank of one launch derives alike from the launcher's or scheduler's variables
    (None where they do not give one: then the ranks cannot agree on an id without being told).

    torchrun's comes first: several torchrun launches in one batch job (an sbatch script, an salloc
    shell: no job step of their own) share the job's id, but not the agent's."""
    if "TORCHELASTIC_RUN_ID" in env:
        if env["TORCHELASTIC_RUN_ID"] not in ("", "none"):
            return "torchrun-" + env["TORCHELASTIC_RUN_ID"]
        if env.get("LOCAL_WORLD_SIZE") == env.get("WORLD_SIZE"):
            # torchrun's default rendezvous id is "none"; on one node, the workers' shared parent
            # is the torchrun agent itself.
            return f"torchrun-{os.uname().nodename}-{os.getppid()}"
    # A launch's own id before its batch job's: the mpiruns (and `flux run`s) of one job are
    # launches of their own, which may run at once (review 72 F4).
    launch = launch_id(env)
    if launch is not None and launch[0] != "step":  # (an srun step is named with its job, below)
        return f"{launch[0]}-{launch[1]}"
    if env.get("SLURM_JOB_ID"):
        step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
        return f"slurm-{env['SLURM_JOB_ID']}" + (f".{step}" if step else "")
    if env.get("PBS_JOBID"):
        return "pbs-" + env["PBS_JOBID"].split(".")[0]
    if env.get("LSB_JOBID"):
        return "lsf-" + env["LSB_JOBID"]
    return None


def usable_cpus() -> int | None:
    """The CPUs this process may run on: its affinity mask (`taskset`, a cgroup's cpuset, srun's or
    mpirun's binding), else `os.cpu_count()`; None where neither says. A CPU quota (`docker --cpus`)
    is not counted."""
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return os.cpu_count()


def cpu_affinity() -> str | None:
    """This process's affinity mask in Linux's cpulist form (`0-3,8`), or None where it cannot be read:
    ranks on one host bound to disjoint CPUs (srun, mpirun) do not share them, ranks with one mask do."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    spans: list[list[int]] = []
    for c in cpus:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans) or None


def parse_cpu_list(text: object) -> set[int] | None:
    """The CPUs of a cpulist text (`0-3,8`), or None where it is not one."""
    if not isinstance(text, str) or not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            a, _, b = part.partition("-")
            lo, hi = int(a), int(b or a)
            if lo < 0 or hi < lo or hi - lo > 1 << 16:
                return None
            cpus.update(range(lo, hi + 1))
    except ValueError:
        return None
    return cpus
