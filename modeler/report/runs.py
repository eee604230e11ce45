"""Group rank files into runs and pull out what the report shows per run.

The report needs more than the fitted dataset keeps: which run failed, how long each rank spent in
each region (imbalance), the steps' split into compute, communication and data wait, and one run's
call tree. It starts from the readers' `RunSet` (so that both agree on which runs failed) and keeps, per
rank, only what the reader contract documents (header, regions, profile, comms, end) and its steps' and
epochs' values per loop (`loop_stats`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from runtime.runfile import ProfileStats, profile_rows

from ..aggregate import loop_callpaths, loop_records, per_step, record_weight, weighted_mean
from ..dataset import RANKS_PARAMETER
from ..readers.runs import process_images

# Header keys that differ per rank or per run; everything else in a header describes the environment.
PER_RUN_KEYS = frozenset(
    {"run_id", "params", "rank", "local_rank", "world_size", "pid", "repetition", "start", "start_ns",
     "started", "start_time", "time", "out", "path", "type", "kind", "experiment", "ppid",
     "start_unix", "forked_from", "argv", "exec_of", "started_by"}
)


@dataclass
class RankData:
    rank: int
    header: dict
    names: dict[int, str]
    profile: Mapping[tuple[int, ...], Any]  # a packed profile (`runtime.runfile.PackedProfile`)
    comms: list[dict]
    ok: bool
    status: str
    problems: list[str]
    #: per kind ("steps", "epochs") and loop call path: this rank's values, see `loop_stats`
    loops: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: the rank's run time where its process replaced itself with os.exec*: each image's longest
    #: top-level region, added up (the images ran one after the other); None: `profile`'s longest
    run_ns: int | None = None
    #: the same: per image, in the order they ran, the ids of its top-level regions in `profile`
    image_roots: list[frozenset[int]] | None = None

    def callpath(self, path: tuple[int, ...]) -> str:
        return "->".join(self.names.get(r, f"region{r}") for r in path)

    def total_ns(self) -> int:
        """Time of the instrumented program on this rank: the inclusive time of its top-level regions."""
        return sum(int(s.incl_ns) for p, s in self.profile.items() if len(p) == 1)

    def longest_root_ns(self) -> int:
        """The inclusive time of the longest top-level region: the run's time on this rank. The
        top-level regions are not summed: those of other threads run in parallel with the main one;
        those of the images of a process that replaced itself with os.exec* are (`run_ns`)."""
        if self.run_ns is not None:
            return self.run_ns
        return max((int(s.incl_ns) for p, s in self.profile.items() if len(p) == 1), default=0)

    def roots(self) -> set[str]:
        """Call paths of the top-level regions of the rank's main process (those of all its threads:
        a profile is merged over threads)."""
        return {self.callpath(p) for p in self.profile if len(p) == 1}

    def root_stages(self) -> list[set[str]]:
        """The top-level regions' call paths per image of the process, in the order they ran (one
        set: a process that never replaced itself with os.exec*). Within a set they may run in
        parallel (threads); the sets ran one after the other."""
        if self.image_roots is None:
            return [self.roots()]
        return [{self.callpath((r,)) for r in ids} for ids in self.image_roots]

    def incl_by_callpath(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p, s in self.profile.items():
            key = self.callpath(p)
            out[key] = out.get(key, 0) + int(s.incl_ns)
        return out


@dataclass
class RunGroup:
    """All rank files of one run (one `run_id`): one configuration, one repetition."""

    run_id: str
    params: dict[str, float]
    repetition: int
    world_size: int
    ranks: list[RankData] = field(default_factory=list)
    status: str = "ok"
    reason: str = ""
    #: ranks whose only file could not be read (empty, cut in its header): they died at start-up
    lost_ranks: list[int] = field(default_factory=list)
    #: where its files lie (`--run` takes a run's directory too)
    directories: tuple[Path, ...] = ()

    @property
    def missing_ranks(self) -> list[int]:
        have = {r.rank for r in self.ranks}
        return [r for r in range(self.world_size) if r not in have]

    @property
    def left_out_ranks(self) -> list[int]:
        """Ranks without a file in a run the readers accept: rank selection (`SCALEPROBE_RANKS`)
        left them out, and they write no file. The readers tell that from a rank that died
        (`lost_ranks`, or a failed or unfinished rank: the run's status), as `modeler fit` does, and
        the run's values come from the recorded ranks."""
        if self.status != "ok":
            return []
        return [r for r in self.missing_ranks if r not in self.lost_ranks]

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.ranks) and all(r.ok for r in self.ranks) and not self.lost_ranks

    def failure(self) -> str:
        if self.status != "ok" and self.reason:
            return f"{self.status}: {self.reason}"
        if self.lost_ranks:
            return f"no readable file for rank(s) {', '.join(map(str, self.lost_ranks[:8]))}"
        if self.missing_ranks and self.status != "ok":
            return f"no file for rank(s) {', '.join(map(str, self.missing_ranks[:8]))}"
        bad = [r for r in self.ranks if not r.ok]
        return "; ".join(f"rank {r.rank}: {r.status}" for r in bad[:4])

    def time_ns(self) -> int:
        """The run's time: its slowest rank's longest top-level region (`RankData.longest_root_ns`)."""
        return max((r.longest_root_ns() for r in self.ranks), default=0)

    def loop_stats(self, kind: str = "steps") -> dict[str, dict[str, float]]:
        """Per step (or epoch) loop, by call path: the mean over the ranks that ran it of each rank's
        median `duration` and `gpu`, mean `mean_duration`, and mean `data_wait` and `comm` (ns) over its
        active steps (`loop_stats` below), and `count`, the mean number of those steps per rank.
        Under `--ranks mean` this is what `modeler fit` gives as `step_time`, `data_wait`,
        `step_comm_time`, `step_gpu_time` (and `epoch_time`)."""
        per_loop: dict[str, list[dict[str, float]]] = defaultdict(list)
        for r in self.ranks:
            for cp, st in r.loops.get(kind, {}).items():
                per_loop[cp].append(st)
        out: dict[str, dict[str, float]] = {}
        for cp, sts in per_loop.items():
            stats = {}
            for key in (*STEP_FIELDS, "mean_duration", "count"):
                vals = [st[key] for st in sts if key in st]
                # no duration: nothing to show; no wait, communication or GPU time: none recorded
                stats[key] = sum(vals) / len(vals) if vals else math.nan if key.endswith("duration") else 0.0
            out[cp] = stats
        return out


#: the fields of a step or epoch record that the training view shows, by their record field
STEP_FIELDS = {"duration": "duration_ns", "data_wait": "data_wait_ns", "comm": "comm_ns", "gpu": "gpu_ns"}


def loop_stats(files: Sequence[Any], names: Any) -> dict[str, dict[str, dict[str, float]]]:
    """One rank's steps and epochs per loop: {kind: {loop call path: {field: ns, "count": n}}}.

    Over the records `modeler fit` takes `step_time`, `data_wait`, `step_comm_time`,
    `step_gpu_time` and `epoch_time` from (`aggregate.loop_records`: active steps only, each loop
    under its call path), and reduced as it does (`aggregate.per_step`), so that the report and
    `modeler fit` agree: a field a record lacks is not counted; `duration` and `gpu` (the step's
    span on the GPU) are medians, which a slow first step does not dominate; the parts of a step
    (`data_wait`, `comm`) are the mean per step, as is `mean_duration`, which they split: a part
    that happens on some steps only (the synchronizing micro-steps of gradient accumulation) is not
    dropped."""
    samples: dict[str, dict[str, dict[str, list[float]]]] = {"steps": {}, "epochs": {}}
    weights: dict[str, dict[str, dict[str, list[float]]]] = {"steps": {}, "epochs": {}}
    counts: dict[str, dict[str, float]] = {"steps": defaultdict(float), "epochs": defaultdict(float)}
    for rf in files:
        for kind, cp, rec in loop_records(rf, loop_callpaths(rf, names)):
            kind = f"{kind}s"
            w = record_weight(rec) if kind == "steps" else 1  # a thinned run's record: several steps
            counts[kind][cp] += w
            fields = samples[kind].setdefault(cp, {})
            wts = weights[kind].setdefault(cp, {})
            for key, name in STEP_FIELDS.items():
                v = _as_number(rec.get(name))
                if v is not None:
                    fields.setdefault(key, []).append(v)
                    wts.setdefault(key, []).append(w)
    return {kind: {cp: {**{k: per_step(STEP_FIELDS[k], v, weights[kind][cp][k]) for k, v in fields.items() if v},
                        **({"mean_duration": weighted_mean(d, weights[kind][cp]["duration"])}
                           if (d := fields.get("duration")) else {}),
                        "count": float(counts[kind][cp])}
                   for cp, fields in loops.items()}
            for kind, loops in samples.items()}


def _as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        num = float(v)
    except (TypeError, ValueError):
        return None
    return num if math.isfinite(num) else None


def _rank_data(rank: int, files: Sequence[Any], names: Any) -> RankData:
    """One rank from its process files. DataLoader workers write files of their own (their header
    has `child_of`), as do scripts the rank starts with subprocess; their time overlaps the main
    process's, so only the main process counts. Where that process replaced itself with os.exec*,
    each image wrote a file (`readers.runs.process_images`): they are one process, added up, and
    the last says how it ended (review 52 F1: one image was taken, and its `exec` end made the run
    look failed)."""
    processes = process_images(files)
    images = next((p for p in processes if not p[0].is_child), processes[0])
    first = images[0]
    ends = [f.run.end for f in images]
    end = ends[-1]
    status = "no end record" if any(e is None for e in ends) else str((end or {}).get("status", "ok"))
    header = dict(first.run.header)
    # the header is written before the program imports torch: its versions are known only at the end
    for key in ("torch", "cuda"):
        if header.get(key) is None:
            header[key] = next((e[key] for e in ends if e and e.get(key) is not None), header.get(key))
    if len(images) == 1:
        run = first.run
        region_names = {int(rid): names.label(first, int(rid)) for rid in run.regions}
        profile, comms, run_ns, image_roots = run.profile, list(run.comms), None, None
    else:
        region_names, profile, comms, image_roots = _images_added(images, names)
        run_ns = sum(max((int(incl) for path, _, incl, _ in profile_rows(f.run.profile) if len(path) == 1),
                         default=0) for f in images)
    return RankData(
        rank=rank,
        header=header,
        names=region_names,
        profile=profile,
        comms=comms,
        # an image that ends by os.exec* with no later one: the program it became records nothing
        # (as the readers take it: `RankFile.status`)
        ok=status in ("ok", "exec"),
        status=status,
        problems=[p for f in files for p in f.run.problems],
        loops=loop_stats(files, names),
        run_ns=run_ns,
        image_roots=image_roots,
    )


def _images_added(images: Sequence[Any], names: Any) -> tuple[dict[int, str], dict[tuple[int, ...], ProfileStats],
                                                              list[dict], list[frozenset[int]]]:
    """The profiles (and communication records) of one process's images as one: each image
    numbers its regions itself, so a region is known by what it is (kind, name, file, line) and
    given one id here; (its label, the profile, the comm records with their call paths in those ids,
    per image the ids of its top-level regions)."""
    ids: dict[tuple[Any, ...], int] = {}
    labels: dict[int, str] = {}
    profile: dict[tuple[int, ...], ProfileStats] = {}
    comms: list[dict] = []
    image_roots: list[frozenset[int]] = []
    for f in images:
        mine: dict[int, int] = {}  # this image's region id -> the process's
        for rid in {r for path in f.run.profile for r in path} | set(f.run.regions) | {
                r for rec in f.run.comms if isinstance(rec.get("callpath"), (list, tuple))
                for r in rec["callpath"] if isinstance(r, int) and not isinstance(r, bool)}:
            reg = f.run.regions.get(rid)
            key = (reg.kind, reg.name, reg.file, reg.line) if reg is not None else ("undefined", names.label(f, rid))
            mine[rid] = ids.setdefault(key, len(ids))
            labels.setdefault(mine[rid], names.label(f, rid))
        for path, st in f.run.profile.items():
            profile.setdefault(tuple(mine[int(r)] for r in path), ProfileStats()).add(st)
        image_roots.append(frozenset(mine[int(path[0])] for path in f.run.profile if len(path) == 1))
        for rec in f.run.comms:
            cp = rec.get("callpath")
            if isinstance(cp, (list, tuple)) and all(isinstance(r, int) and not isinstance(r, bool) for r in cp):
                rec = dict(rec, callpath=[mine[r] for r in cp])
            comms.append(rec)
    return labels, profile, comms, image_roots


def groups_from_runset(runset: Any) -> list[RunGroup]:
    """The report's view of `modeler.readers.runs.RunSet`: one group per run, sorted by parameters."""
    from ..aggregate import RegionNames

    names = RegionNames(runset.runs)
    groups = []
    for rec in runset.runs:
        params = {str(k): n for k, v in rec.params.items() if (n := _as_number(v)) is not None}
        g = RunGroup(
            run_id=str(rec.run_id),
            params=params,
            repetition=int(rec.repetition or 0),
            world_size=int(rec.world_size),
            ranks=[_rank_data(rank, files, names) for rank, files in rec.ranks.items()],
            status=str(rec.status),
            reason=str(rec.reason),
            lost_ranks=sorted({rank for rank, _, _ in rec.unreadable}),
            directories=tuple(sorted({Path(f.path).parent for f in rec.files})),
        )
        groups.append(g)
    return sorted(groups, key=lambda g: (sorted(g.params.items()), g.world_size, g.repetition, g.run_id))


def rank_axis(parameters: Sequence[str], groups: Sequence[RunGroup]) -> str | None:
    """The parameter that counts ranks (`RANKS_PARAMETER`, as `modeler fit` derives speedup and cost
    against it), or "world_size" when only the headers vary it. Other names (an Extra-P file's `p`)
    are not guessed to count ranks: they may well be a problem size."""
    if RANKS_PARAMETER in parameters:
        return RANKS_PARAMETER
    sizes = {g.world_size for g in groups}
    return "world_size" if len(sizes) > 1 else None


def coordinate(g: RunGroup, name: str) -> float | None:
    if name == "world_size":
        return float(g.world_size)
    return g.params.get(name)
