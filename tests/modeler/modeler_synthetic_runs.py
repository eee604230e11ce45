"""Synthetic run files for the modeler's tests, written through runtime.runfile's RunWriter.

The records are the ones runtime.runfile reads (region, profile, step, epoch, comm, end); the
format itself (header, framing, version) stays owned by runtime/runfile.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from runtime.runfile import RunWriter, run_file_name

# (id, kind, name, file, line)
REGIONS = (
    (0, "function", "main", "main.py", 1),
    (1, "epoch", "train", "train.py", 10),
    (2, "step", "train_epoch", "train.py", 20),
    (3, "method", "Model.forward", "model.py", 5),
    (4, "function", "load_batch", "data.py", 7),
)

MS = 10**6
OK_END = {"status": "ok", "exit_code": 0}


def write_rank_file(
    directory: Path,
    *,
    run_id: str,
    params: Mapping[str, float],
    rank: int = 0,
    world_size: int = 1,
    repetition: int = 0,
    pid: int | None = None,
    regions: Iterable[tuple] = REGIONS,
    profile: Mapping[tuple[int, ...], tuple[int, int, int]] = (),
    steps: Iterable[Mapping] = (),
    epochs: Iterable[Mapping] = (),
    comms: Iterable[Mapping] = (),
    records: Iterable[Mapping] = (),
    end: Mapping | None = OK_END,
    header: Mapping | None = None,
    tail: bytes = b"",
    image: int = 0,
) -> Path:
    """One process's run file; `profile` maps a path of region ids to (visits, incl_ns, excl_ns).
    `tail` is appended raw after the records, to simulate damage; `image` > 0: the file of a later
    image of the process (os.exec*), named as the runtime names it (give `exec_of` in `header`)."""
    pid = pid if pid is not None else 1000 + rank
    path = Path(directory) / run_file_name(rank, pid, image)
    h = {
        "run_id": run_id, "experiment": "synthetic", "params": dict(params), "repetition": repetition,
        "rank": rank, "local_rank": rank, "world_size": world_size, "host": "testhost", "pid": pid,
    }
    h.update(header or {})
    recs: list[dict] = []
    for rid, kind, name, file, line in regions:
        recs.append({"type": "region", "id": rid, "kind": kind, "name": name, "file": file, "line": line})
    for p, (visits, incl, excl) in dict(profile).items():
        recs.append({"type": "profile", "path": list(p), "visits": visits, "incl_ns": int(incl), "excl_ns": int(excl),
                     "min_ns": int(incl) // max(visits, 1), "max_ns": int(incl) // max(visits, 1), "sumsq_ns": 0.0})
    for i, s in enumerate(steps):
        recs.append({"type": "step", "index": i, **s})
    for i, e in enumerate(epochs):
        recs.append({"type": "epoch", "index": i, **e})
    for c in comms:
        recs.append({"type": "comm", **c})
    recs.extend(dict(r) for r in records)  # other record types, given whole
    if end is not None:
        recs.append({"type": "end", **end})
    with RunWriter(path) as w:
        w.write_header(h)
        w.write_records(recs)
    if tail:
        with open(path, "ab") as f:
            f.write(tail)
    return path


def write_sweep(
    root: Path,
    grid: Mapping[str, Sequence[float]],
    *,
    repetitions: int = 1,
    time_s: Callable[[dict, int, int], float],
    ranks_of: Callable[[dict], int] = lambda p: int(p.get("ranks", 1)),
) -> list[Path]:
    """One run per grid point and repetition; `time_s(params, rank, repetition)` is the inclusive
    time of main->train (the step loop gets 80% of it, forward 50%)."""
    files = []
    names = list(grid)
    for n, values in enumerate(itertools.product(*(grid[k] for k in names))):
        params = dict(zip(names, values))
        for rep in range(repetitions):
            run_id = f"run{n}-{rep}"
            run_dir = Path(root) / run_id
            world = ranks_of(params)
            for rank in range(world):
                t = int(time_s(params, rank, rep) * 1e9)
                files.append(
                    write_rank_file(
                        run_dir, run_id=run_id, params=params, rank=rank, world_size=world, repetition=rep,
                        profile={(0,): (1, t + 10**6, 10**6), (0, 1): (1, t, t // 5), (0, 1, 2): (3, t * 4 // 5, t * 3 // 10),
                                 (0, 1, 2, 3): (30, t // 2, t // 2)},
                        steps=[{"region": 2, "duration_ns": t * 4 // 15, "data_wait_ns": 1000 * (rank + 1),
                                "comm_ns": 0, "gpu_ns": None, "memory": None} for _ in range(3)],
                        epochs=[{"region": 1, "duration_ns": t, "memory": {"rss_peak_bytes": 2**20}}],
                    )
                )
    return files
