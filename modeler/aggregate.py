"""From runs to series: metrics per rank, reduced across ranks, repetitions kept apart.

For every completed run each rank's files (the rank's main process and its workers, summed)
give one value per (call path, metric); the ranks' values are reduced with the chosen aggregate
(mean, max, min or sum; `sum` adds up no value per step or epoch and no peak: `NOT_SUMMED`) and
the rank imbalance (max/mean of inclusive time) is a metric of its own. Runs at the same parameter
point are repetitions: they stay separate in `Series.repetitions` for the estimator to reduce
(median by default) and to use their spread.

A call path that a completed rank did not visit took no time there: additive metrics (time,
visits, communication) count it as 0 on that rank, and in a repetition that did not visit it where
another run of the same experiment at that point did. Per-step values (the median step, the mean
data wait and communication per step: `STEP_PARTS`, the median GPU time) exist only where steps ran; a step
record with a `weight` (a run thinned by SCALEPROBE_STEP_RECORDS) counts as that many steps in them.
A rank whose profile is empty was not profiled (rank selection) and does not count at all.

A call path that only some of a run's ranks ran (a rank-0 checkpoint: `RunMetrics.partial`) keeps
that mean with 0 for the others as its `time`, so that parts add up to their whole; its per-rank
time, which speedup, efficiency and cost derive from, is the mean over the ranks that ran it, and
under `--ranks mean` a warning names it (`some_ranks_note`) and the ranking takes the growth of that
time (`RunShares.some_ranks`, `derived.some_ranks_series`; review 88 MED-1).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from runtime.runfile import profile_rows

from .callpath_text import step
from .dataset import PER_RANK_COMBINATIONS, RANKS_PARAMETER, Dataset, MetricNote, RunShares, Series, SeriesNote, ranks_text
from .errors import InputError
from .listing import listing
from .pointtext import param_text
from .readers.runs import RankFile, RunRecord, RunSet

RANK_AGGREGATES = ("mean", "max", "min", "sum")


@dataclass(frozen=True)
class Metric:
    unit: str
    additive: bool  # a rank without a record for it contributes 0 (else it contributes nothing)
    description: str


METRICS: dict[str, Metric] = {
    "time": Metric("s", True, "inclusive time of the call path over the run"),
    "exclusive_time": Metric("s", True, "time in the region itself, callees excluded"),
    "visits": Metric("", True, "number of visits (calls, loop statements)"),
    "step_time": Metric("s", False, "median duration of one training step"),
    "epoch_time": Metric("s", False, "median duration of one epoch"),
    "data_wait": Metric("s", False, "mean time per step spent waiting for the data loader"),
    "step_comm_time": Metric("s", False, "mean communication time per step"),
    "step_gpu_time": Metric("s", False, "median GPU time per step, its span on the GPU (runs on a GPU only)"),
    "peak_memory": Metric("B", False, "peak GPU memory allocated up to the loop's last step (runs on a GPU only)"),
    "peak_rss": Metric("B", False, "largest peak resident memory of an epoch"),
    "gpu_time": Metric("s", False, "GPU time of a region, from sampled visits scaled to all visits (GPU runs only)"),
    "comm_time": Metric("s", True, "time in a communication operation over the run"),
    "comm_bytes": Metric("B", True, "bytes moved by a communication operation over the run"),
    "comm_calls": Metric("", True, "calls of a communication operation"),
    "comm_gpu_time": Metric("s", True, "GPU time of a communication operation (NCCL on a GPU only)"),
    "imbalance": Metric("", False, "max/mean over ranks of the inclusive time (1 on one rank; left out when no run has 2+ ranks)"),
    "speedup": Metric("", False, "time at the fewest ranks measured / time (other parameters fixed)"),
    "parallel_efficiency": Metric("", False, "speedup * fewest ranks / ranks"),
    "cost": Metric("s", False, "time x ranks (rank-seconds)"),
}

# plain Python: these reduce a handful of ranks, thousands of times, where numpy's call overhead dominates
_REDUCE: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda a: sum(a) / len(a),
    "max": max,
    "min": min,
    "sum": lambda a: float(sum(a)),
}
# speedup, efficiency and cost need a per-rank time: a sum over ranks is rank-seconds already, and
# the fastest rank does not say how long the ranks were held; those two derive from the mean
_PER_RANK = {"mean": "mean", "max": "max", "min": "mean", "sum": "mean"}
#: What `--ranks sum` does not add up over the ranks, and what it takes instead. These are no totals
#: over the run: a step's or an epoch's duration and the parts of a step describe the same step on
#: every rank (summed, 4 ranks made a step 4x as long: review 49), so they keep the mean over ranks,
#: as `--ranks mean` and the report's Training table (`report.runs.RunGroup.loop_stats`) give them;
#: a peak is one process's, and the sum of peaks reached at different times is no peak of anything,
#: so they keep the largest rank's (what has to fit in one process's or one GPU's memory).
NOT_SUMMED = {"step_time": "mean", "epoch_time": "mean", "data_wait": "mean", "step_comm_time": "mean",
              "step_gpu_time": "mean", "peak_memory": "max", "peak_rss": "max"}

Key = tuple[str, str]  # (call path, metric)

#: what the call paths of a program that a rank started with subprocess begin with
SUBPROCESS_PREFIX = "[subprocess] "


class RegionNames:
    """Region labels for call paths, consistent over all runs: the region's name, or
    `file:name` where two different regions share a name.

    Only regions with values count where several files define a name (review 66 F5: one run file's
    stray `main`, in file `m`, whose only record was bad, renamed every call path `main.py:main...`):
    a name is bare for the one file whose regions of that name have values (appear in a call path
    of the profile, a communication record, a step or epoch record, or a GPU record), and
    `file:name` for every file where two or more have values; a region of that name without values
    in another file is `file:name` too, so that what its left-out records leave unknown is never
    taken for the other's. A name that no region has values of is told by all its files. A label
    never holds `->`, which joins them (`callpath_text.step`: `a->b` is `a-\\>b`)."""

    def __init__(self, runs: Iterable[RunRecord]) -> None:
        runs = list(runs)
        declared: dict[str, set[str]] = defaultdict(set)
        for run in runs:
            for rf in run.files:
                for reg in rf.run.regions.values():
                    declared[reg.name].add(reg.file)
        self._owners = {name: files for name, files in declared.items() if len(files) > 1}
        if self._owners:  # rare: a name defined in two files; which of them have values?
            valued: dict[str, set[str]] = defaultdict(set)
            for run in runs:
                for rf in run.files:
                    shared = {rid: reg for rid, reg in rf.run.regions.items() if reg.name in self._owners}
                    if shared:
                        used = _valued_regions(rf.run, set(shared))
                        for rid in used:
                            valued[shared[rid].name].add(shared[rid].file)
            for name in self._owners:
                if valued.get(name):
                    self._owners[name] = valued[name]
        self._labels: dict[int, dict[int, str]] = {}
        # one object for each call path and (call path, metric), whichever file and run it comes
        # from: every run's values are held until the series are made (a tenth of their memory)
        self._shared: dict[Any, Any] = {}

    def _table(self, rf: RankFile) -> dict[int, str]:
        table = self._labels.get(id(rf.run))
        if table is None:
            # a name holding `->` is escaped, or it would merge with a call path of two regions
            # (`callpath_text`; review 69 F3)
            table = {
                rid: step(f"{reg.file}:{reg.name}" if self._owners.get(reg.name, {reg.file}) != {reg.file} else reg.name)
                for rid, reg in rf.run.regions.items()
            }
            self._labels[id(rf.run)] = table
        return table

    def label(self, rf: RankFile, rid: int) -> str:
        return self._table(rf).get(rid) or f"#{rid}"

    def callpath(self, rf: RankFile, path: Iterable[int]) -> str:
        table = self._table(rf)
        text = "->".join(table.get(r) or f"#{r}" for r in path)
        if rf.spawned and text:
            # a program the rank started with subprocess ran while the rank waited for it, inside
            # the rank's own call paths: under the same names its time would count twice (review 58
            # F2: `main` 0.97 s where the whole tree took 0.57 s), so its paths are its own
            text = SUBPROCESS_PREFIX + text
        return self._shared.setdefault(text, text)

    def key(self, key: Key) -> Key:
        """`key`, or the equal (call path, metric) seen before."""
        return self._shared.setdefault(key, key)


def _valued_regions(run: Any, among: set[int]) -> set[int]:
    """The regions of `among` that a record with values refers to: a call path of the profile (as
    any of its regions), a communication record's call path, a step or epoch record's loop, a GPU
    record. A record left out for bad values is in none of them."""
    found: set[int] = set()
    for path in run.profile:
        found.update(among.intersection(path))
    for rec in run.comms:
        cp = rec.get("callpath")
        if isinstance(cp, (list, tuple)):
            found.update(r for r in cp if isinstance(r, int) and r in among)
    for rec in (*run.steps, *run.epochs):
        rid = rec.get("region")
        if isinstance(rid, int) and rid in among:
            found.add(rid)
    found.update(rid for rid in run.gpu_regions if rid in among)
    return found


def _ns(v: Any) -> float | None:
    n = _number(v)
    return None if n is None else n / 1e9


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bytes(mem: Any, skip: str) -> float | None:
    """A peak-memory figure: a number, or the largest byte count in a dict (keys containing `skip` aside)."""
    if isinstance(mem, dict):
        vals = [_number(v) for k, v in mem.items() if "bytes" in str(k) and skip not in str(k)]
        vals = [v for v in vals if v is not None]
        return max(vals) if vals else None
    return _number(mem)


def _peak(peaks: dict[Key, float], key: Key, v: float | None) -> None:
    if v is not None:
        peaks[key] = max(peaks.get(key, v), v)


def _median(values: list[float]) -> float:
    return float(np.median(values))


def _comm_callpath(names: RegionNames, rf: RankFile, rec: dict[str, Any]) -> str:
    """The operation's call path: as recorded when it ends in the operation's own `comm` region
    (then its time and its bytes share a call path), else with the operation's name appended."""
    op = str(rec.get("op") or "comm")
    cp = rec.get("callpath")
    if isinstance(cp, (list, tuple)) and cp:
        last = rf.run.regions.get(int(cp[-1]))
        text = names.callpath(rf, cp)
        if last is not None and last.kind == "comm":
            return text
        cp = text
    elif not isinstance(cp, str):
        cp = ""
    if not cp:
        return op
    return cp if cp.split("->")[-1] == op else f"{cp}->{op}"


_COMM_FIELDS = (("time_ns", "comm_time", 1e-9), ("bytes", "comm_bytes", 1.0), ("calls", "comm_calls", 1.0),
                ("gpu_ns", "comm_gpu_time", 1e-9))
_COMM_METRICS = tuple(m for _, m, _ in _COMM_FIELDS)


@dataclass
class RankMetrics:
    values: dict[Key, float]
    profiled: bool  # False: the rank recorded nothing (probes off by rank selection)
    unknown: set[Key]  # measured only in part (throttled regions): no value, and not 0 either
    throttled: set[str]  # call paths of throttled regions
    #: the rank's run time: the longest top-level region of its main process (its workers' and
    #: helper processes' top-level regions run beside it), of each of its images added up where it
    #: replaced itself with os.exec*; 0 without a main process's profile, and where a main process's
    #: file has no end record (kept by --include-incomplete): its top-level region's record may never
    #: have been written, and the longest one flushed can be microseconds (review 133 MED-1: shares of
    #: 570,324 let 38 regions under 1% through --min-share); the shares come from the other ranks
    run_time: float = 0.0
    #: call paths of the main process's top-level regions
    roots: frozenset[str] = frozenset()


#: a step record's fields and the metrics they give (an epoch's duration gives `epoch_time`)
LOOP_FIELDS = (("duration_ns", "step_time"), ("data_wait_ns", "data_wait"), ("comm_ns", "step_comm_time"),
               ("gpu_ns", "step_gpu_time"))
#: The parts of a step: they may happen on some steps only (under gradient accumulation DDP
#: synchronizes on every k-th micro-step, the `no_sync` ones communicate nothing; a loader waits
#: when its prefetch runs dry), so a median over steps would drop them. Their value per step is
#: the mean over the active steps (their total / the steps): the mean step is then compute +
#: communication + data wait. A step's duration stays the median, which a slow first step does
#: not dominate; so does its GPU time, the span of the step's work on the GPU, which every step
#: has: on an H100 the first step's (cuDNN's autotuning, CUDA's lazy loading: 0.72-0.86 s against
#: 7-30 ms for later ones) made the mean of 10 steps a constant 66 ms at every point of a sweep.
STEP_PARTS = frozenset({"data_wait_ns", "comm_ns"})
_FIELD_OF = {m: f for f, m in LOOP_FIELDS} | {"epoch_time": "duration_ns"}  # metric -> record field


def record_weight(rec: dict[str, Any]) -> float:
    """How many steps a step record stands for: its `weight` (runs thinned by
    SCALEPROBE_STEP_RECORDS), 1 without one. A weight that is not a finite number of at least 0
    counts as 1 (a negative one is left out with its record by `readers.runvalues`)."""
    w = rec.get("weight")
    if w is None or isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w < float("inf"):
        return 1
    return w


def weighted_median(values: list[float], weights: list[float]) -> float:
    """The median of `values` where each stands for `weights` of them: the value at which half the
    total weight is reached, the mean of two neighbours where it is reached exactly between them,
    so that all weights 1 give `np.median`."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    half = cum[-1] / 2
    i = int(np.searchsorted(cum, half, side="left"))
    if cum[i] == half:
        j = i + 1 + int(np.searchsorted(cum[i + 1:], half, side="right"))  # skip weight-0 values
        if j < len(v):
            return float((v[i] + v[j]) / 2)
    return float(v[i])


def weighted_mean(values: list[float], weights: list[float] | None = None) -> float:
    """The mean of `values`, each counted `weights` times where given (and the weights not all 0)."""
    if weights is not None:
        total = sum(weights)
        if total > 0:
            return sum(v * w for v, w in zip(values, weights)) / total
    return sum(values) / len(values)


def per_step(field: str, values: list[float], weights: list[float] | None = None) -> float:
    """One rank's value of a step record's `field` over its active steps: the mean for the parts
    of a step (`STEP_PARTS`), else the median; each value counted `weights` times where given
    (`record_weight`: a thinned run's record stands for several steps)."""
    if weights is not None and any(w != 1 for w in weights) and sum(weights) > 0:
        return weighted_mean(values, weights) if field in STEP_PARTS else weighted_median(values, weights)
    return sum(values) / len(values) if field in STEP_PARTS else _median(values)


def loop_callpaths(rf: RankFile, names: RegionNames,
                   ends_in: dict[int, set[str]] | None = None) -> Callable[[Any], str]:
    """How a step or epoch record's loop (a region id) is named: its call path when the file reaches
    it one way only, else its bare name. `ends_in`: region id -> the call paths ending in it, when
    the caller has them already."""
    if ends_in is None:
        ends_in = defaultdict(set)
        for path in rf.run.profile:
            if path:
                ends_in[path[-1]].add(names.callpath(rf, path))

    def loop_callpath(rid: Any) -> str:
        paths = ends_in.get(int(rid), set()) if isinstance(rid, int) else set()
        return next(iter(paths)) if len(paths) == 1 else (names.label(rf, rid) if isinstance(rid, int) else str(rid))

    return loop_callpath


def loop_records(rf: RankFile, loop_callpath: Callable[[Any], str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """("step" or "epoch", loop call path, record) of a file's steps and epochs; steps outside the
    schedule's active window (warm-up, skipped steps) are left out. A step record may stand for
    several steps (`record_weight`)."""
    for rec in rf.run.steps:
        if rec.get("active") is not False:
            yield "step", loop_callpath(rec.get("region")), rec
    for rec in rf.run.epochs:
        yield "epoch", loop_callpath(rec.get("region")), rec


def rank_metrics(files: list[RankFile], names: RegionNames) -> RankMetrics:
    """One rank's metrics, its processes summed."""
    totals: dict[Key, float] = defaultdict(float)
    samples: dict[Key, list[float]] = defaultdict(list)
    weights: dict[Key, list[float]] = defaultdict(list)  # of the step samples: see record_weight
    peaks: dict[Key, float] = {}
    unknown: set[Key] = set()
    throttled: set[str] = set()
    profiled = False
    run_time = 0.0
    run_time_known = True
    roots: set[str] = set()
    for rf in files:
        run = rf.run
        if not rf.is_child:
            run_time_known = run_time_known and rf.status != "incomplete"
            # the rank's main process; its images one after the other where it replaced itself
            # with os.exec* (each a file of its own: `RankFile.continues`)
            longest = 0.0
            for path, _, incl, _ in profile_rows(run.profile):
                if len(path) == 1:
                    roots.add(names.callpath(rf, path))
                    longest = max(longest, incl / 1e9)
            run_time += longest
        ends_in: dict[int, set[str]] = defaultdict(set)
        visits_of: dict[int, int] = defaultdict(int)
        for path, visits, incl, excl in profile_rows(run.profile):
            if not path:
                continue
            profiled = True
            cp = names.callpath(rf, path)
            ends_in[path[-1]].add(cp)
            visits_of[path[-1]] += visits
            if path in rf.check.unknown_paths:
                continue  # see below
            if path[-1] in run.throttled:
                # timing stopped after the throttle limit: what was recorded is a part of unknown size
                throttled.add(cp)
                unknown.update((cp, m) for m in ("time", "exclusive_time", "visits"))
                continue
            totals[(cp, "time")] += incl / 1e9
            totals[(cp, "exclusive_time")] += excl / 1e9
            totals[(cp, "visits")] += visits

        # records left out for bad values (runvalues): the totals they add to are short, or gone
        for path in rf.check.unknown_paths:
            unknown.update((names.callpath(rf, path), m) for m in ("time", "exclusive_time", "visits"))
        for rec in rf.check.unknown_comms:
            unknown.update((_comm_callpath(names, rf, rec), m) for m in _COMM_METRICS)

        loop_callpath = loop_callpaths(rf, names, ends_in)
        for kind, cp, rec in loop_records(rf, loop_callpath):
            if kind == "step":
                w = record_weight(rec)
                for field, metric in LOOP_FIELDS:
                    v = _ns(rec.get(field))
                    if v is not None:
                        samples[(cp, metric)].append(v)
                        weights[(cp, metric)].append(w)
            else:
                v = _ns(rec.get("duration_ns"))
                if v is not None:
                    samples[(cp, "epoch_time")].append(v)
            if kind == "step":
                _peak(peaks, (cp, "peak_memory"), _bytes(rec.get("memory"), "rss"))
            elif isinstance(mem := rec.get("memory"), dict):
                _peak(peaks, (cp, "peak_rss"), _number(mem.get("rss_peak_bytes")))
        for rid, g in run.gpu_regions.items():
            n, ns = _number(g.get("samples")), _number(g.get("gpu_ns"))
            if rid in rf.check.unknown_gpu:
                unknown.add((loop_callpath(rid), "gpu_time"))
            elif n and ns is not None and visits_of.get(rid) and rid not in run.throttled:
                # sampled visits: the mean GPU time per visit, scaled to all visits of the region
                cp = loop_callpath(rid)
                totals[(cp, "gpu_time")] += ns / n * visits_of[rid] / 1e9
        for rec in run.comms:
            cp = _comm_callpath(names, rf, rec)
            profiled = True
            for field, metric, scale in _COMM_FIELDS:
                v = rec.get(field)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    totals[(cp, metric)] += float(v) * scale
    # An operation with no region of its own in the profile (DDP's gradient all-reduce, run from
    # autograd's thread by its comm hook) has its communication time as its time: otherwise the
    # cost that grows most with ranks is in no ranking of `time`.
    for cp, metric in [k for k in totals if k[1] == "comm_time"]:
        if (cp, "time") not in totals and (cp, "time") not in unknown and (cp, "comm_time") not in unknown:
            totals[(cp, "time")] = totals[(cp, "exclusive_time")] = totals[(cp, "comm_time")]
            if (cp, "comm_calls") in totals:
                totals[(cp, "visits")] = totals[(cp, "comm_calls")]
    out: dict[Key, float] = dict(totals)
    out.update((k, per_step(_FIELD_OF[k[1]], v, weights.get(k))) for k, v in samples.items() if v)
    out.update(peaks)
    for k in unknown:
        out.pop(k, None)
    return RankMetrics(out, profiled, unknown, throttled, run_time if run_time_known else 0.0, frozenset(roots))


@dataclass
class RunMetrics:
    values: dict[Key, float]
    unknown: set[Key]
    throttled: set[str]
    rank_time: dict[str, float]  # call path -> per-rank time that speedup, efficiency and cost use
    #: call path -> its share of the run's time on the rank where that share is largest (its time
    #: there over the rank's `RankMetrics.run_time`), whatever `ranks` reduces the values with
    shares: dict[str, float] = field(default_factory=dict)
    roots: frozenset[str] = frozenset()  # the main processes' top-level call paths
    #: the same for its exclusive time (`--metric exclusive_time` leaves a call path whose own time is
    #: small out, whatever its callees take)
    own_shares: dict[str, float] = field(default_factory=dict)
    #: metrics of `NOT_SUMMED` that `--ranks sum` reduced otherwise here (from 2 or more ranks)
    not_summed: frozenset[str] = frozenset()
    #: call path -> (ranks that visited it, ranks profiled) where fewer of the run's profiled ranks
    #: than all of them visited it, in a run with two or more (a rank-0 checkpoint): its `time` is
    #: the mean over all of them, 0 for the others, and its `rank_time` the mean over those that ran it
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)


def run_metrics(run: RunRecord, names: RegionNames, ranks: str = "mean") -> RunMetrics:
    """One value per (call path, metric) for a run: its ranks' values reduced with `ranks`; under
    `sum` the metrics of `NOT_SUMMED` with the reduction named there."""
    reduce, per_rank_time = _REDUCE[ranks], _REDUCE[_PER_RANK[ranks]]
    reduce_of = {m: _REDUCE[NOT_SUMMED[m]] if ranks == "sum" and m in NOT_SUMMED else reduce for m in METRICS}
    not_summed: set[str] = set()
    rank_time: dict[str, float] = {}
    per_rank = []
    unknown: set[Key] = set()
    throttled: set[str] = set()
    shares: dict[str, float] = {}
    own_shares: dict[str, float] = {}
    roots: set[str] = set()
    for _, files in run.ranks.items():
        rm = rank_metrics(files, names)
        unknown |= rm.unknown
        throttled |= rm.throttled
        if rm.profiled or rm.values:
            per_rank.append(rm.values)
        roots |= rm.roots
        if rm.run_time > 0:
            for (cp, metric), v in rm.values.items():
                into = shares if metric == "time" else own_shares if metric == "exclusive_time" else None
                if into is not None and (cp, metric) not in rm.unknown:
                    into[cp] = max(into.get(cp, 0.0), v / rm.run_time)
    keys = (set().union(*per_rank) if per_rank else set()) - unknown
    out: dict[Key, float] = {}
    partial: dict[str, tuple[int, int]] = {}
    for key in keys:
        additive = METRICS[key[1]].additive
        vals = [m.get(key, 0.0) for m in per_rank] if additive else [m[key] for m in per_rank if key in m]
        if vals:
            out[names.key(key)] = reduce_of[key[1]](vals)
            if len(vals) > 1 and reduce_of[key[1]] is not reduce:
                not_summed.add(key[1])
            if key[1] == "time":
                visited = [m[key] for m in per_rank if key in m]
                if 1 < len(per_rank) and len(visited) < len(per_rank):
                    # run by some of the ranks only (a rank-0 checkpoint, a subgroup's collective):
                    # the others did not wait in it, so its mean over all ranks, T * visited / ranks,
                    # falls with more ranks while the ranks that ran it took as long (review 88
                    # MED-1: a constant 0.4 s checkpoint had speedup = ranks, efficiency 1); the
                    # speedup, efficiency and cost take the mean over the ranks that ran it
                    partial[key[0]] = (len(visited), len(per_rank))
                    rank_time[key[0]] = per_rank_time(visited)
                else:
                    rank_time[key[0]] = per_rank_time(vals)
        # imbalance needs every rank: with rank selection, one recorded rank of many says nothing
        if key[1] == "time" and (len(per_rank) > 1 or run.world_size == 1):
            mean = sum(vals) / len(vals)
            if mean > 0:
                out[names.key((key[0], "imbalance"))] = max(vals) / mean
    for into, metric in ((shares, "time"), (own_shares, "exclusive_time")):
        for cp in [cp for cp in into if (cp, metric) in unknown]:
            del into[cp]
    return RunMetrics(out, unknown, throttled, rank_time, shares, frozenset(roots), own_shares, frozenset(not_summed),
                      partial)


Point = tuple[float, ...]


def _derived(
    times: dict[Point, list[dict[str, float]]], parameters: tuple[str, ...]
) -> tuple[dict[Point, list[dict[Key, float]]], dict[str, set[float]]]:
    """speedup, parallel efficiency and cost of every call path's per-rank time, per repetition;
    and the call paths whose baseline is not the fewest ranks of their points (-> those ranks).

    A call path's baseline is the point with the fewest ranks, the other parameters the same, where
    its time (the median of the repetitions that have it) is above 0: communication exists only from
    2 ranks on, not measured at 1 rank or measured 0 there (review 66 F1: a baseline of 0 gave a
    speedup and efficiency of 0 everywhere), and its speedup is relative to that. No speedup or
    efficiency without one, nor below its ranks."""
    r = parameters.index(RANKS_PARAMETER)

    def others(pt: Point) -> Point:
        return pt[:r] + pt[r + 1 :]

    fewest: dict[Point, float] = {}
    base_of: dict[tuple[Point, str], Point] = {}
    base_time: dict[tuple[Point, str], float] = {}
    for pt, reps in times.items():
        fewest[others(pt)] = min(fewest.get(others(pt), pt[r]), pt[r])
        for cp in {cp for rep in reps for cp in rep}:
            cur = base_of.get((others(pt), cp))
            if pt[r] <= 0 or (cur is not None and cur[r] <= pt[r]):
                continue  # a per-rank time at 0 ranks is no baseline (as `derived.baselines`)
            t0 = _median([rep[cp] for rep in reps if cp in rep])
            if t0 > 0:
                base_of[(others(pt), cp)], base_time[(others(pt), cp)] = pt, t0
    late: dict[str, set[float]] = defaultdict(set)
    for (o, cp), pt in base_of.items():
        if pt[r] > fewest[o]:
            late[cp].add(pt[r])
    out: dict[Point, list[dict[Key, float]]] = {}
    for pt, reps in times.items():
        rows = []
        for rep in reps:
            row: dict[Key, float] = {}
            for cp, t in rep.items():
                row[(cp, "cost")] = t * pt[r]
                base = base_of.get((others(pt), cp))
                if base is not None and t > 0 and pt[r] > 0 and pt[r] >= base[r]:
                    t0 = base_time[(others(pt), cp)]
                    row[(cp, "speedup")] = t0 / t
                    row[(cp, "parallel_efficiency")] = t0 / t * base[r] / pt[r]
            rows.append(row)
        out[pt] = rows
    return out, late


def _repetitions(
    measured: dict[Point, list[dict[Key, float]]], unknown: dict[Point, list[set[Key]]],
    experiments: dict[Point, list[str]], passes: dict[Point, list[int | None]],
) -> dict[Key, dict[Point, list[tuple[float, int | None]]]]:
    """key -> point -> repetitions, each with its run's pass (`RunRecord.repetition`). A repetition
    lacking an additive metric measured it 0 (the run completed without visiting the call path)
    when another run of its experiment at that point has it; a run of another program is not a run
    that skipped the call path."""
    by_key: dict[Key, dict[Point, list[tuple[float, int | None]]]] = defaultdict(dict)
    for pt, reps in measured.items():
        for key in set().union(*reps):
            if METRICS[key[1]].additive:
                having = {e for rep, e in zip(reps, experiments[pt]) if key in rep}
                vals = [rep.get(key, 0.0 if e in having and key not in unk else None)
                        for rep, unk, e in zip(reps, unknown[pt], experiments[pt])]
            else:
                vals = [rep.get(key) for rep in reps]
            kept = [(v, k) for v, k in zip(vals, passes[pt]) if v is not None]
            if kept:
                by_key[key][pt] = kept
    return by_key


def _series(cp: str, metric: str, by_point: dict[Point, list[tuple[float, int | None]]], n_params: int) -> Series:
    """One series from `_repetitions`' values of a key, each run labelled with its pass (-1 for a
    run whose header names none: it is never left out, `modeler.passes`)."""
    pts = sorted(by_point)
    labels = tuple(np.array([-1 if k is None else k for _, k in by_point[p]], dtype=np.int64) for p in pts)
    return Series(cp, metric, np.array(pts, dtype=float).reshape(len(pts), n_params),
                  tuple(np.array([v for v, _ in by_point[p]]) for p in pts), METRICS[metric].unit, labels)


def _fill_unvisited(
    times: dict[Point, list[dict[str, float]]], unknown: dict[Point, list[set[Key]]],
    experiments: dict[Point, list[str]],
) -> None:
    """Per-rank times of 0 where `_repetitions` counts `time` as 0: a repetition that completed
    without visiting a call path that another run of its experiment at the point visited. Cost,
    speedup and efficiency then see the same repetitions as `time` (cost = time x ranks holds)."""
    for pt, reps in times.items():
        for cp in set().union(*reps):
            having = {e for rep, e in zip(reps, experiments[pt]) if cp in rep}
            for rep, unk, e in zip(reps, unknown[pt], experiments[pt]):
                if cp not in rep and e in having and (cp, "time") not in unk:
                    rep[cp] = 0.0


def dataset_from_runs(runset: RunSet, *, ranks: str = "mean", derived: bool = True) -> Dataset:
    """The completed runs of `runset` as a Dataset over its varying parameters."""
    if ranks not in _REDUCE:
        raise InputError(f"--ranks: unknown aggregate {ranks!r}; choose one of {', '.join(RANK_AGGREGATES)}")
    runs = runset.completed()
    names = RegionNames(runs)
    params = runset.parameters
    measured: dict[Point, list[dict[Key, float]]] = defaultdict(list)
    unknown: dict[Point, list[set[Key]]] = defaultdict(list)
    experiments: dict[Point, list[str]] = defaultdict(list)
    passes: dict[Point, list[int | None]] = defaultdict(list)
    times: dict[Point, list[dict[str, float]]] = defaultdict(list)
    throttled: dict[str, int] = defaultdict(int)  # call path -> runs in which it was throttled
    shares: dict[str, dict[Point, list[float]]] = defaultdict(lambda: defaultdict(list))
    own_shares: dict[str, dict[Point, list[float]]] = defaultdict(lambda: defaultdict(list))
    roots: set[str] = set()
    not_summed: set[str] = set()
    some_ranks: dict[str, set[tuple[int, int]]] = defaultdict(set)  # call path -> (ran it, profiled) of runs
    partial_runs: dict[str, int] = defaultdict(int)  # call path -> runs in which only some ranks ran it
    multi_runs: dict[str, int] = defaultdict(int)  # call path -> runs of 2+ ranks that ran it at all
    for run in runs:
        rm = run_metrics(run, names, ranks)
        not_summed |= rm.not_summed
        for cp, pair in rm.partial.items():
            some_ranks[cp].add(pair)
            partial_runs[cp] += 1
        if len(run.ranks) > 1:
            for cp in rm.rank_time:
                multi_runs[cp] += 1
        pt = runset.point(run)
        for cp, v in rm.shares.items():
            shares[cp][pt].append(v)
        for cp, v in rm.own_shares.items():
            own_shares[cp][pt].append(v)
        roots |= rm.roots
        measured[pt].append(rm.values)
        unknown[pt].append(rm.unknown)
        experiments[pt].append(run.experiment_key)
        passes[pt].append(run.repetition)
        times[pt].append(rm.rank_time)
        for cp in rm.throttled:
            throttled[cp] += 1
    if not any(len(run.ranks) > 1 for run in runs):
        # max/mean over one rank is 1 by definition: a series that says nothing
        for reps in measured.values():
            for rep in reps:
                for key in [k for k in rep if k[1] == "imbalance"]:
                    del rep[key]
    warnings = list(runset.warnings)
    if not_summed:
        warnings.append(_not_summed_note(not_summed))
    partial_paths = sorted(some_ranks, key=lambda c: (c.count("->"), c))
    if ranks != "mean":
        some_ranks.clear()  # their time is the largest rank's, a sum or the fastest rank's, as asked
    elif some_ranks:
        # the runs in which every rank ran it, said (review 93 LOW-3: "run by 1 of 2-6 ranks" hid them)
        every = {cp: (partial_runs[cp], multi_runs[cp]) for cp in some_ranks if multi_runs[cp] > partial_runs[cp]}
        warnings.append(some_ranks_note(some_ranks, derived and RANKS_PARAMETER in params, every))
    if derived and RANKS_PARAMETER in params and measured:
        _fill_unvisited(times, unknown, experiments)
        rows, late = _derived(times, params)
        for pt, extra in rows.items():
            for rep, row in zip(measured[pt], extra):
                rep.update(row)
        warnings.extend(_derived_notes(ranks, late, partial_paths))

    by_key = _repetitions(measured, unknown, experiments, passes)
    n_points = len(measured)
    series: list[Series] = []
    partial: dict[tuple[str, str], int] = {}  # (call path, metric) -> its points, where not all
    for (cp, metric) in sorted(by_key, key=lambda k: (k[0], list(METRICS).index(k[1]))):
        n = len(by_key[(cp, metric)])
        if n < n_points:
            partial[(cp, metric)] = n
        series.append(_series(cp, metric, by_key[(cp, metric)], len(params)))
    if throttled:
        items = [f"{cp} ({n} run{'s' if n > 1 else ''})" for cp, n in sorted(throttled.items())]
        shown = listing(items, 8)
        warnings.append(
            f"{len(items)} call path(s) were throttled by the runtime (many very short visits): their time "
            f"and visits are left out where that happened: {shown}"
        )
    if partial:
        warnings.append(partial_points_note(partial, n_points))
    sources = sorted({str(f.path) for r in runs for f in r.files})
    # the median over the repetitions at a point, the largest over the points (`modeler.share`)
    run_shares = RunShares(_largest_median(shares), frozenset(roots), _largest_median(own_shares),
                           {cp: tuple(sorted(v)) for cp, v in some_ranks.items()}) if runs else None
    # how the ranks were combined, for `fit_dataset` as for the commands (review 106 MED-1: the
    # Dataset said "mean" and a time per rank under ranks="sum", and speedup came from a summed time)
    return Dataset(params, series, warnings, sources, run_shares, across_ranks=ranks,
                   time_per_rank=ranks in PER_RANK_COMBINATIONS)


def _largest_median(shares: dict[str, dict[Point, list[float]]]) -> dict[str, float]:
    return {cp: max(_median(v) for v in by_pt.values()) for cp, by_pt in shares.items()}


#: the metrics that a call path run by some ranks only is said of (`some_ranks_note`)
SOME_RANKS_METRICS = tuple(m for m, d in METRICS.items() if d.additive) + ("imbalance", "speedup",
                                                                            "parallel_efficiency", "cost")


def partial_points_note(partial: dict[tuple[str, str], int], n_points: int,
                        keys: frozenset[tuple[str, str]] | None = None) -> SeriesNote:
    """The warning naming the call paths with series not measured at every point of `n_points`
    (`partial`: (call path, metric) -> its points; derived metrics such as speedup can have fewer,
    needing a baseline run), each with the most points among its series; of `keys` only, if given.
    `modeler export` drops it (`export_text` None): its own note names the series it left out."""
    mine = {k: n for k, n in partial.items() if keys is None or k in keys}
    most: dict[str, int] = {}
    for (cp, _), n in mine.items():
        most[cp] = max(most.get(cp, 0), n)
    items = [f"{cp} ({k} of {n_points})" for cp, k in most.items()]
    note = SeriesNote(f"{len(items)} call path(s) were not measured at every point ({len(mine)} series); they are "
                      f"modeled on the points they have, where those are enough: {listing(items, 8)}",
                      mine, functools.partial(partial_points_note, partial, n_points))
    note.export_text = None
    return note


def _some_ranks_of(some_ranks: dict[str, set[tuple[int, int]]], derived: bool, every: dict[str, tuple[int, int]] | None,
                   kept: frozenset[tuple[str, str]]) -> SeriesNote:
    """`some_ranks_note` of the call paths in `kept` ((call path, metric)) only."""
    cps = {cp for cp, _ in kept}
    return some_ranks_note({cp: v for cp, v in some_ranks.items() if cp in cps}, derived, every)


def some_ranks_note(some_ranks: dict[str, set[tuple[int, int]]], derived: bool,
                    every: dict[str, tuple[int, int]] | None = None) -> SeriesNote:
    """The warning naming the call paths that only some ranks of a run ran (review 88 MED-1), the
    outermost first, each with how many of how many ranks ran it (`ranks_text`) and, in `every`,
    (runs in which only some ranks ran it, runs of 2+ ranks that ran it) where every rank ran it in
    the others. `derived`: speedup, parallel efficiency and cost are derived (`ranks` is a parameter)."""
    every = every or {}

    def runs(cp: str) -> str:
        if cp not in every:
            return ""
        k, n = every[cp]
        return f" in {k} of {n} runs (every rank in the others)"

    items = [f"{cp}: run by {ranks_text(some_ranks[cp])} ranks{runs(cp)}"
             for cp in sorted(some_ranks, key=lambda c: (c.count("->"), c))]
    n = len(items)
    text = (f"{n} call path{'s' if n > 1 else ''} {'were' if n > 1 else 'was'} run by only some of the ranks "
            f"(--ranks mean): {listing(items, 4)}; {'the time of each' if n > 1 else 'its time'}, a mean over all "
            "ranks with 0 for the others, ")
    if derived:
        text += ("falls as 1/ranks (where as many ranks run it at every size) although the ranks that ran it took "
                 "as long")
    else:
        text += "is the time of the ranks that ran it times their share of the ranks"
    if derived:
        text += ("; speedup, parallel_efficiency and cost are derived from the mean time over the ranks that ran "
                 "it, and the ranking takes that time's growth where it is faster (marked (ranks that ran it); not "
                 "under --compat extrap)")
    note = SeriesNote(text + "; --ranks max gives the time of the slowest rank that ran it",
                      ((cp, m) for cp in some_ranks for m in SOME_RANKS_METRICS),
                      functools.partial(_some_ranks_of, some_ranks, derived, every))
    # as `modeler export --extrap` says it: the export holds that mean, and nothing is ranked there
    # (review 92 LOW-2: it repeated the ranking's words)
    note.export_text = (f"{n} call path{'s' if n > 1 else ''} {'were' if n > 1 else 'was'} run by only some of the "
                        f"ranks (--ranks mean): {listing(items, 4)}; {'the time of each' if n > 1 else 'its time'} in "
                        "the export (and its visits, exclusive time and communication) is a mean over all ranks with 0 "
                        "for the others"
                        + (", and its speedup, parallel_efficiency and cost come from the time of the ranks that ran it"
                           if derived else "")
                        + "; --ranks max exports the time of the slowest rank that ran it")
    return note


def _not_summed_note(metrics: set[str]) -> str:
    """The warning that `--ranks sum` did not sum `metrics` (of `NOT_SUMMED`) over the ranks."""
    order = list(METRICS)
    per_step = sorted((m for m in metrics if NOT_SUMMED[m] == "mean"), key=order.index)
    peaks = sorted((m for m in metrics if NOT_SUMMED[m] == "max"), key=order.index)
    said = []
    if per_step:
        said.append(f"{', '.join(per_step)} {'is' if len(per_step) == 1 else 'are'} the mean over ranks (a time "
                    "per step or epoch, the same step on every rank: as under --ranks mean and in the report's "
                    "Training table)")
    if peaks:
        said.append(f"{', '.join(peaks)} {'is' if len(peaks) == 1 else 'are'} the largest rank's peak (a peak is "
                    "one process's; peaks reached at different times do not add up)")
    return MetricNote(f"--ranks sum: not summed over the ranks: {'; '.join(said)}", metrics)


def _derived_notes(ranks: str, late: dict[str, set[float]], partial: Sequence[str] = ()) -> list[str]:
    """`partial`: the call paths that only some ranks of a run ran, whose per-rank time is the mean
    over those ranks (`run_metrics`), said under `sum` and `min` too (review 93 LOW-4: nothing named
    them there, and a summed time of 0.4 s beside a cost of 2.4 s at 6 ranks went unexplained)."""
    notes = []
    if _PER_RANK[ranks] != ranks:
        why = ("a sum over ranks is rank-seconds already" if ranks == "sum"
               else "the fastest rank's time is not how long the ranks were held")
        its = "summed" if ranks == "sum" else "fastest rank's"
        some = (f"; for a call path that only some ranks ran, the mean over the ranks that ran it, so its cost is "
                f"not its {its} time x ranks: {listing(list(partial), 4)}" if partial else "")
        notes.append(MetricNote(
            f"--ranks {ranks}: speedup, parallel_efficiency and cost are derived from the mean time over "
            f"ranks ({why}){some}", ("speedup", "parallel_efficiency", "cost")))
    if late:
        items = [f"{cp} (from {' or '.join(param_text(r) for r in sorted(rs))} ranks)" for cp, rs in sorted(late.items())]
        notes.append(MetricNote(
            f"{len(items)} call path(s) were not measured at the fewest ranks, or took no time there: their "
            f"speedup and parallel_efficiency are relative to the fewest ranks where their time was above 0: "
            f"{listing(items, 8)}",
            ("speedup", "parallel_efficiency")))
    return notes
