"""Who this process is, for the run file's header: its rank, world size, host and launcher
(`_identity`), the CPUs it may use (`_cpus`), the run id its job's scheduler gives (`_job_run_id`),
what its multiprocessing parent passed on (`_from_mp_parent`, `_mp_parent_pid`,
`SCALEPROBE_MP_PARENT`), the torch and CUDA versions it runs with, and its clocks read together
(`clock_pair`). Read by the recorder
(runtime.recorder) at start-up and at the end record; nothing here keeps state."""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def clock_pair(tries: int = 5) -> tuple[int, float]:
    """(`perf_counter_ns()`, `time.time()`) as read at one moment: the header's `start_ns` and
    `start_unix`, by which `modeler timeline` aligns the processes of a run. Of a few tries, the one
    whose two monotonic readings around the wall clock's lie closest, with their midpoint (review 90
    F1: the wall clock was read up to a few ms after the monotonic one, with other work between, and
    a DataLoader worker was drawn 1.9 ms off its own rank)."""
    best = None
    for _ in range(tries):
        a = time.perf_counter_ns()
        w = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2, w)
    return best[1], best[2] / 1e9


def _identity() -> dict[str, Any]:
    try:
        from .environment import detect

        ident = detect()
        return {"rank": ident.rank, "local_rank": ident.local_rank, "world_size": ident.world_size,
                "host": ident.host, "launcher": ident.launcher}
    except ImportError:
        env = os.environ
        return {"rank": int(env.get("RANK", 0)), "local_rank": int(env.get("LOCAL_RANK", 0)),
                "world_size": int(env.get("WORLD_SIZE", 1)), "host": os.uname().nodename, "launcher": None}


def _cpus() -> dict[str, Any]:
    """The CPUs this process may use (`cpus_usable`) and which (`cpu_affinity`): the modeler says where
    a run's ranks on one host outnumber them (docs/format.md)."""
    try:
        from .environment import cpu_affinity, usable_cpus

        return {"cpus_usable": usable_cpus(), "cpu_affinity": cpu_affinity()}
    except ImportError:
        return {"cpus_usable": os.cpu_count(), "cpu_affinity": None}


def _job_run_id(world_size: int) -> str | None:
    """The ranks of one job started without our launcher (`torchrun main.py`, `srun python
    main.py`) share the id their scheduler gives the job, so their files form one run."""
    if world_size <= 1:
        return None
    try:
        from .environment import job_run_id
    except ImportError:
        return None
    return job_run_id(os.environ)


_MP_PARENT = "SCALEPROBE_MP_PARENT"


def _from_mp_parent(parent: int | None) -> dict | None:
    """What this process's multiprocessing parent passed on (`Recorder._tell_mp_children`): its run
    id, rank and world size; None where the parent is not the process that wrote it."""
    if parent is None and "multiprocessing.forkserver" in sys.modules:
        parent = os.getppid()  # a forkserver: its forked children are the ranks of its starter's run
    if parent is None:
        # a program a recording process starts (subprocess, a shell) makes a run of its own, as it
        # did (review 24: joined, a benchmark driver's runs were summed, a shell's made it ambiguous)
        return None
    import json

    try:
        got = json.loads(os.environ.get(_MP_PARENT, ""))
    except ValueError:
        return None
    if not isinstance(got, dict) or not (got.get("pid") == parent or _is_ancestor(got.get("pid"))):
        return None
    if not isinstance(got.get("rank"), int) or not isinstance(got.get("world_size"), int):
        return None
    got.setdefault("source", "none")
    return got


def _is_ancestor(pid: Any, levels: int = 6) -> bool:
    """Whether `pid` started this process's parent, or its parent (Linux `/proc`): a forkserver's
    children were forked by the server, which their starter started; its variables are the starter's."""
    if not isinstance(pid, int):
        return False
    at = os.getppid()
    for _ in range(levels):
        try:
            with open(f"/proc/{at}/stat", "rb") as f:
                at = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if at == pid:
            return True
        if at <= 1:
            return False
    return False


def _mp_parent_pid() -> int | None:
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return None
    try:
        parent = mp.parent_process()
        if parent is not None:
            return parent.pid
        # A spawned child imports the main module (and so starts recording) before
        # parent_process() is set, but after it got its process name.
        if mp.current_process().name != "MainProcess":
            return os.getppid()
    except Exception:  # an unusual multiprocessing context: treat as a top-level process
        return None
    return None


def _torch_version() -> str | None:
    t = sys.modules.get("torch")
    return getattr(t, "__version__", None) if t is not None else None


def _cuda_version() -> str | None:
    t = sys.modules.get("torch")
    v = getattr(getattr(t, "version", None), "cuda", None) if t is not None else None
    return v
