"""Our run files, read only through `runtime.runfile.read_run`, grouped into runs.

A run is every process file sharing a header `run_id`: one file per rank and process (DataLoader
workers write their own). Parameters come from the header's `params`, never from file names.

`load_runs(paths) -> RunSet` is the reusable part (the report uses it too); `read_runs(paths)`
turns a RunSet into a `Dataset` with `modeler.aggregate`.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from runtime.runfile import FORMAT_NAME, Run, RunFileError, is_helper_process, read_run

from ..dataset import LARGEST_VALUE, RANKS_PARAMETER, Dataset
from ..errors import InputError
from ..listing import listing
from ..pointfilter import OF_RUNS, Condition, PointFilter, excluded_nothing, nothing_left
from . import FileResult, ReadOptions, expand
from .runjudge import attribute_unreadable, drop_copies, judge, run_file_rank
from .runvalues import ValueCheck, check_values

_NO_END = "no end record"
#: how the runtime's writer starts every run file (compact JSON, the record type first)
_HEADER_OPENING = b'{"type":"header"'
#: the status of a run that did not fail but whose parameters are not those of the others: another
#: set of names, or a value that is not a number where the others have numbers (review 29: such
#: runs were counted as failed)
ODD = "odd parameters"



def sniff_runs(path: Path) -> str | None:
    """"runs" when the file's first line is a scaleprobe run-file header (any version: reading
    then says which version it is)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 16)
    except OSError:
        return None
    if run_file_rank(path) is not None:
        # named as the runtime names a rank's file, whatever it holds: empty (a process that died
        # before its header), compressed, garbled, or a header line damaged or not ended by "\n":
        # the runs reader names it and its run is told of the rank (review 26: a gzipped rank file
        # was "not measurements", and its run modeled without it; review 57 F3: one whose first line
        # starts with "{" and does not parse)
        return "runs"
    if not first.endswith(b"\n") and (first.startswith(_HEADER_OPENING) or _HEADER_OPENING.startswith(first)) and first:
        return "runs"  # cut off inside its header: the reader says so, with the file's name
    # a cheap byte test first, so that large Extra-P files are not parsed here
    if b'"header"' not in first or FORMAT_NAME.encode() not in first:
        return None
    try:
        import json

        rec = json.loads(first)
    except ValueError:
        return None
    return "runs" if isinstance(rec, dict) and rec.get("type") == "header" and rec.get("format") == FORMAT_NAME else None


@dataclass
class RankFile:
    """One process's run file."""

    path: Path
    run: Run
    #: region ids used, never defined; totals short of left-out records (runvalues.ValueCheck)
    check: ValueCheck = field(default_factory=ValueCheck)
    #: started by another process of its rank without the multiprocessing markers (a subprocess that
    #: runs an instrumented script inherits the rank and run id): see `spawned_by_rank`
    spawned: bool = False

    @property
    def header(self) -> dict[str, Any]:
        return self.run.header

    @property
    def rank(self) -> int:
        r = self.run.header.get("rank", 0)
        return int(r) if isinstance(r, (int, float)) else 0

    @property
    def is_child(self) -> bool:
        """A process started by a rank (a DataLoader or multiprocessing worker, forked or spawned, or
        a subprocess whose parent is another process of the rank)."""
        return self.run.is_helper_process or self.spawned

    @property
    def continues(self) -> bool:
        """A later image of a process that replaced itself with `os.exec*` (header `exec_of`): its
        values add to the process's, and it says how the process ended."""
        return bool(self.header.get("exec_of"))

    @property
    def status(self) -> str:
        """`ok`, `failed` (the end record says so) or `incomplete` (no end record, or records the
        recorder could not write and gave up: `lost_flushes`, its totals are short).

        A non-zero exit code fails the run even when the status says ok: `sys.exit(2)` from an
        argument check ends the program cleanly as far as the recorder is concerned. An image that
        ended by replacing itself (`exec`) is ok: a later image, if it recorded, says how the process
        ended."""
        end = self.run.end
        if end is None or end.get("lost_flushes"):
            return "incomplete"
        if end.get("status") == "exec":
            return "ok"
        code = end.get("exit_code")
        if end.get("status", "ok") != "ok" or (isinstance(code, int) and code != 0):
            return "failed"
        return "ok"


@dataclass
class RunRecord:
    """All process files of one run (one point of the sweep, one repetition)."""

    run_id: str
    files: list[RankFile]
    params: dict[str, Any] = field(default_factory=dict)
    #: ok, failed, incomplete, ambiguous, damaged (see runjudge.judge), or `ODD` (see `_parameters`)
    status: str = "ok"
    reason: str = ""
    # (rank, file, why) of the ranks whose only file could not be read
    unreadable: list[tuple[int, Path, str]] = field(default_factory=list)
    kept_incomplete: str = ""  # why the run is incomplete, when --include-incomplete kept it
    disagree: str = ""  # why its ranks' parameters make the run unusable (see _merge_disagreeing)
    #: the processes that started the run's ranks themselves (`torch.multiprocessing.spawn`), and
    #: their other helpers: no rank's, so in no value (`starters`)
    starters: list[RankFile] = field(default_factory=list)

    @property
    def all_files(self) -> list[RankFile]:
        """Every file of the run read: its ranks' and their starters'."""
        return [*self.files, *self.starters]

    @property
    def header(self) -> dict[str, Any]:
        return self.files[0].header

    @property
    def experiment(self) -> str | None:
        return self.header.get("experiment")

    @property
    def experiment_key(self) -> str:
        """What tells experiments apart: the header's experiment name, else the program run."""
        if self.experiment:
            return str(self.experiment)
        argv = self.header.get("argv")
        return f"program {argv[0]}" if isinstance(argv, list) and argv else ""

    @property
    def repetition(self) -> int | None:
        r = self.header.get("repetition")
        return int(r) if isinstance(r, (int, float)) else None

    @property
    def world_size(self) -> int:
        ws = self.header.get("world_size")
        return int(ws) if isinstance(ws, (int, float)) and ws >= 1 else len(self.ranks)

    @property
    def ranks(self) -> dict[int, list[RankFile]]:
        """Files by rank; several files for one rank are its worker processes."""
        out: dict[int, list[RankFile]] = {}
        for f in self.files:
            out.setdefault(f.rank, []).append(f)
        return dict(sorted(out.items()))


@dataclass
class RunSet:
    """Every run found, failed ones included, with the parameters that vary over the completed ones."""

    runs: list[RunRecord]
    parameters: tuple[str, ...]
    constants: dict[str, Any]
    files: list[FileResult]
    warnings: list[str] = field(default_factory=list)
    #: the `--exclude` conditions that held for none of the runs (each is warned about, as `OF_RUNS`)
    unmatched: tuple[Condition, ...] = ()

    def completed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status == "ok"]

    def failed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status != "ok"]

    def point(self, run: RunRecord) -> tuple[float, ...]:
        return tuple(float(run.params[p]) for p in self.parameters)

    def values(self) -> dict[str, list[float]]:
        """Every measured value of each parameter, sorted."""
        return {p: sorted({float(r.params[p]) for r in self.completed()}) for p in self.parameters}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def run_key(header: dict[str, Any]) -> tuple[str, str]:
    """(run id, the attempt within it). The run id alone is not enough: every launch inside one PBS,
    LSF or fixed-id torchrun job gets the job's id, so launches with other repetition indexes or
    parameters in one job are told apart by those."""
    attempt = json.dumps([header.get("repetition"), header.get("params")], sort_keys=True, default=str)
    return str(header.get("run_id")), attempt


def run_names(headers: Sequence[dict[str, Any]], paths: Sequence[Any]) -> list[str]:
    """The run each file belongs to, by name: its run id, or, where one run id holds several
    attempts (launches of one job), `<run id> (repetition R, p=4)`. Without a run id a file cannot
    be matched to other ranks: it is a run of its own, named by its path."""
    keys = [run_key(h) if h.get("run_id") not in (None, "") else (f"<no run_id>:{p}", "")
            for h, p in zip(headers, paths)]
    attempts = Counter(run_id for run_id, _ in set(keys))
    names = []
    for (run_id, _), h in zip(keys, headers):
        if attempts[run_id] > 1:
            run_id = f"{run_id} (repetition {h.get('repetition')}, {_params_text(h.get('params'))})"
        names.append(run_id)
    return names


def _group(rank_files: list[RankFile]) -> list[RunRecord]:
    groups: dict[str, list[RankFile]] = {}
    for rf, name in zip(rank_files, run_names([rf.header for rf in rank_files], [rf.path for rf in rank_files])):
        groups.setdefault(name, []).append(rf)
    runs = []
    for name, files in groups.items():
        files.sort(key=lambda f: (f.rank, str(f.path)))
        images_share_their_role(files)
        # the starter first: a spawned rank 0's parent is the starter, also "rank 0" (review 22)
        away = starters(files)
        files = [f for f in files if not any(f is s for s in away)]  # a rank declared itself: never empty
        pids = {f.header.get("pid") for f in files} - {None}
        for f, spawned in zip(files, spawned_by_rank([f.header for f in files])):
            # also a program that a rank started without a rank of its own (rank 0 by default), as
            # under the launcher, where it shares the run id (review 23: a subprocess of rank 1)
            orphan = f.header.get("rank_source") == "none" and f.header.get("ppid") in pids \
                and f.header.get("ppid") != f.header.get("pid") and not is_helper_process(f.header)
            f.spawned = (spawned or orphan) and not f.header.get("rank_from")
        _helpers_follow_their_rank(files)
        files.sort(key=lambda f: (f.rank, str(f.path)))
        params = files[0].header.get("params") or {}
        runs.append(RunRecord(name, files, dict(params) if isinstance(params, dict) else {}, starters=away))
    return _merge_disagreeing(runs)


def process_images(files: Sequence[Any]) -> list[list[Any]]:
    """The files of one run by process: each process's images in the order they ran, one after
    the other where it replaced itself with `os.exec*` (a later image's header `exec_of` names the
    file of the image it replaced, of the same pid); a process that never did, one file. Takes
    `RankFile`s or `runtime.runfile.Run`s (anything with `header` and `path`), and gives every file
    once, in the order of `files` by each process's first image. A later image whose earlier one is
    not among `files` starts a process of its own."""
    by_name: dict[tuple[Any, str], list[Any]] = defaultdict(list)
    for f in files:
        by_name[(f.header.get("pid"), _where(f).name)].append(f)
    after: dict[int, list[Any]] = defaultdict(list)  # id(image) -> the images that replaced it
    continues: set[int] = set()
    for f in files:
        of = f.header.get("exec_of")
        if not of:
            continue
        # the image it replaced: that name and pid, in its own directory first (never itself)
        before = [g for g in by_name.get((f.header.get("pid"), str(of)), []) if g is not f]
        if before:
            before.sort(key=lambda g: _where(g).parent != _where(f).parent)
            after[id(before[0])].append(f)
            continues.add(id(f))
    out: list[list[Any]] = []
    placed: set[int] = set()

    def chain(first: Any) -> list[Any]:
        images, f = [], first
        while f is not None and id(f) not in placed:
            placed.add(id(f))
            images.append(f)
            nxt = [g for g in after.get(id(f), []) if id(g) not in placed]
            f = nxt[0] if nxt else None
        return images

    for f in files:  # each process from its first image; then what a loop of names left over
        if id(f) not in continues and id(f) not in placed:
            out.append(chain(f))
    for f in files:
        if id(f) not in placed:
            out.append(chain(f))
    return out


def _where(f: Any) -> Path:
    return Path(str(getattr(f, "path", None) or ""))


#: what a `rank` record (torch.distributed's rank) sets in the header it stands for (runtime.runfile)
_RANK_ROLE = ("rank", "world_size", "rank_from", "started_by", "recorded_ranks")


def images_share_their_role(files: Sequence[Any]) -> None:
    """The images of one process (`process_images`) are one rank, or one helper: where
    torch.distributed made the process a rank (a `rank` record: header `rank_from`, `started_by`)
    in one image, the others are that rank too. A later image's header has the rank the earlier one
    knew, but no `rank` record of its own (review 52 F2: the images after an exec of a rank that
    `torch.multiprocessing.spawn` started were taken for helpers of the process that started the
    ranks, `starters`, and left out of every value); an image before `init_process_group` says it
    is its parent's helper (`child_of`), as such a file's own header does before its `rank` record.
    Takes `RankFile`s or `runtime.runfile.Run`s, and changes their headers."""
    for images in process_images(files):
        known = next((f for f in images if f.header.get("rank_from")), None)
        if known is None or len(images) < 2:
            continue
        role = {k: known.header[k] for k in _RANK_ROLE if k in known.header}
        for f in images:
            if not f.header.get("rank_from"):
                header = {k: v for k, v in f.header.items() if k not in ("child_of", "forked_from")}
                (f.run if isinstance(f, RankFile) else f).header = dict(header, **role)


def _helpers_follow_their_rank(files: Sequence[RankFile]) -> None:
    """A helper process's rank is its parent's: one started before torch.distributed made its parent
    a rank (a Pool or DataLoader worker made before `init_process_group`) says rank 0 in its header
    (review 23: its work was counted in rank 0's), and so does a program a rank started where no rank
    variable told it its own. Only where torch.distributed named the ranks, or the helper had no rank
    of its own (header `rank_source` "none")."""
    named = any(f.header.get("rank_from") for f in files)
    by_pid = {f.header.get("pid"): f for f in files if f.header.get("pid") is not None}
    for _ in range(8):  # helpers of helpers
        moved = False
        for f in files:
            if not f.is_child or not (named or f.header.get("rank_source") == "none"):
                continue
            up = by_pid.get(f.header.get("child_of") or f.header.get("forked_from") or f.header.get("ppid"))
            if up is not None and up is not f and up.rank != f.rank:
                f.run.header = dict(f.run.header, rank=up.rank, world_size=up.header.get("world_size"))
                moved = True
        if not moved:
            return


def starters(files: Sequence[RankFile]) -> list[RankFile]:
    """The files of the processes that started ranks themselves, and of their other helpers: a rank
    that `torch.multiprocessing.spawn` started says so in a `rank` record (`started_by`, its
    parent's pid; docs/format.md). The starter waits for the ranks, so its own time is theirs
    again, and it is no rank: counted as one (or as the helper of one), it would double rank 0."""
    by = {f.header.get("started_by") for f in files if f.header.get("rank_from")}
    by.discard(None)
    if not by:
        return []
    away = [f for f in files if not f.header.get("rank_from") and f.header.get("pid") in by]
    # and what else they started that is no rank: a forkserver, a manager, their workers
    pids = {f.header.get("pid") for f in away} - {None}
    grew = True
    while grew:
        more = [f for f in files if not f.header.get("rank_from") and f.header.get("pid") not in pids
                and any(f.header.get(k) in pids for k in ("child_of", "forked_from", "ppid"))]
        away += more
        pids |= {f.header.get("pid") for f in more}
        grew = bool(more)
    return away


def _merge_disagreeing(runs: list[RunRecord]) -> list[RunRecord]:
    """One run whose ranks disagree on the parameters, not several: the run-key (run id, repetition,
    parameters) split it into parts, each with some of its ranks. Parts of one run id and repetition
    whose main ranks do not overlap and are each fewer than the world size are one launch (separate
    launches of one job each have every rank); joined, the run is `disagree`, and left out."""
    by_attempt: dict[tuple[str, Any], list[RunRecord]] = defaultdict(list)
    for r in runs:
        if r.header.get("run_id") not in (None, ""):
            by_attempt[(str(r.header.get("run_id")), json.dumps(r.header.get("repetition"), default=str))].append(r)
    merged: dict[int, RunRecord] = {}
    for parts in by_attempt.values():
        if len(parts) < 2:
            continue
        ranks = [{f.rank for f in p.files if not f.is_child} for p in parts]
        if sum(map(len, ranks)) != len(set().union(*ranks)) or any(len(rk) >= p.world_size for rk, p in zip(ranks, parts)):
            continue
        files = sorted((f for p in parts for f in p.files), key=lambda f: (f.rank, str(f.path)))
        run = RunRecord(str(parts[0].header.get("run_id")), files, dict(parts[0].params),
                        starters=[f for p in parts for f in p.starters])
        said = "; ".join(f"rank{'s' if len(rk) > 1 else ''} {', '.join(map(str, sorted(rk)))}: {_params_text(p.header.get('params'))}"
                         for rk, p in sorted(zip(ranks, parts), key=lambda x: min(x[0])))
        run.disagree = f"its ranks disagree on the parameters ({said}): which point it measured is unknown"
        for p in parts:
            merged[id(p)] = run
    out, seen = [], set()
    for r in runs:
        m = merged.get(id(r), r)
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def _params_text(params: Any) -> str:
    if not isinstance(params, dict) or not params:
        return "no parameters"
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def spawned_by_rank(headers: Sequence[dict[str, Any]]) -> list[bool]:
    """Per file of one run, whether its process's parent (header `ppid`) is another process of the
    same rank: a script the rank started with subprocess writes a file of its own, with the rank's
    run id and rank but none of the multiprocessing markers. Its work belongs to the rank, like a
    worker's; it is not a second attempt of the rank (a restarted rank's parent is the launcher).
    A DataLoader or multiprocessing worker (header `child_of` or `forked_from`) is none: its `ppid`
    is the rank's too (review 128 LOW-4: every real worker file was taken for a subprocess script and
    its call paths shown as `[subprocess] ...`), and its time is summed into the rank's."""
    pids = {(h.get("rank", 0), h.get("pid")) for h in headers if isinstance(h.get("pid"), int)}
    return [isinstance(h.get("ppid"), int) and h.get("ppid") != h.get("pid") and (h.get("rank", 0), h.get("ppid")) in pids
            and not is_helper_process(h) for h in headers]


def _ranks_of_spawned(runs: list[RunRecord]) -> list[str]:
    """Runs whose ranks the program started itself (`RunRecord.starters`): their `ranks` is the world
    size torch.distributed gave the ranks, not the number of processes a launcher started; a
    parameter that then says the same in every run (`--sweep nprocs=1,2,4` passed to the program)
    is that number again, and is not modeled beside it."""
    spawned = [r for r in runs if r.starters or any(f.header.get("rank_from") for f in r.files)]
    for r in spawned:
        r.params[RANKS_PARAMETER] = r.world_size
    if not spawned:
        return []
    same = sorted(k for k in spawned[0].params if k != RANKS_PARAMETER and all(
        _is_number(r.params.get(k)) and float(r.params[k]) == r.world_size for r in spawned))
    for r in runs:
        for k in same:
            r.params.pop(k, None)
    return [f"{len(spawned)} run(s) started their ranks themselves (torch.multiprocessing.spawn): 'ranks' is "
            "the world size torch.distributed gave them" + (f", and {listing(same, 3)} (the same in every run) "
                                                             "is not modeled beside it" if same else "")]


def _ranks_against_world_size(runs: list[RunRecord]) -> list[str]:
    """Say where a `ranks` parameter is not the world size the run's headers give: cost (time x
    ranks), speedup and efficiency take the parameter (a `--param ranks=...` beside a fixed
    `torchrun --nproc`?)."""
    off = [r for r in runs if _is_number(r.params.get(RANKS_PARAMETER)) and isinstance(r.header.get("world_size"), int)
           and float(r.params[RANKS_PARAMETER]) != r.world_size]
    if not off:
        return []
    r = off[0]
    return [
        f"{len(off)} run(s) have a 'ranks' parameter other than their world size (e.g. run {r.run_id}: ranks="
        f"{r.params[RANKS_PARAMETER]}, world size {r.world_size}): cost, speedup and parallel_efficiency use the parameter"
    ]


def _parameters(runs: list[RunRecord], warnings: list[str]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """Modeling parameters: those that vary over the completed runs; the others are constants.

    Runs lacking a parameter the majority has are left out; a varying parameter that is not a
    number cannot be modeled and stops the read with a message naming it."""
    ok = [r for r in runs if r.status == "ok"]
    warnings.extend(_ranks_of_spawned(runs))
    if ok and not any(RANKS_PARAMETER in r.params for r in ok) and len({r.world_size for r in ok}) > 1:
        for r in runs:
            r.params[RANKS_PARAMETER] = r.world_size
        warnings.append("parameter 'ranks' taken from the headers' world_size (the runs do not record it)")
    else:
        warnings.extend(_ranks_against_world_size(ok))
    sets = Counter(tuple(sorted(r.params)) for r in ok)
    if len(sets) > 1:
        common = set(sets.most_common(1)[0][0])
        for r in ok:
            if set(r.params) != common:
                r.status = ODD
                r.reason = (
                    f"{r.files[0].path}: parameters ({', '.join(sorted(r.params)) or 'none'}) differ from "
                    f"those of most runs ({', '.join(sorted(common))})"
                )
        ok = [r for r in ok if r.status == "ok"]
    while True:  # again after leaving out runs whose parameter is not a number
        varying, constants, odd = _varying(ok)
        if not odd:
            _too_large(ok, varying)
            return tuple(varying), constants
        p, runs_of = odd
        for r in runs_of:
            r.status, r.reason = ODD, (f"{r.files[0].path}: parameter {p!r} is {r.params[p]!r}, not a number "
                                            f"as in the other runs")
        ok = [r for r in ok if r.status == "ok"]


def _too_large(ok: list[RunRecord], varying: list[str]) -> None:
    """Stop at a value of a varying parameter above `LARGEST_VALUE`, naming a file that has it: its
    powers overflow (review 101 M4: `modeler report` modeled every series as a constant, without a
    word, where `fit` stopped naming no file)."""
    for p in varying:
        big = [r for r in ok if abs(float(r.params[p])) > LARGEST_VALUE]
        if big:
            top = max(big, key=lambda r: abs(float(r.params[p])))
            raise InputError(f"parameter {p!r}: {top.params[p]!r} (in {top.files[0].path}) is too large to model: "
                             f"values above {LARGEST_VALUE:g} overflow their powers; give it in larger units "
                             "(thousands, millions)")


#: at most this share of the runs may have a parameter that is not a number where the others have
#: numbers, to be left out as odd headers; more is a parameter of categories (review 27: a sweep
#: `prec=16,32,bf16` lost its bf16 runs), which stops the read
ODD_RUNS = 0.1


def _varying(ok: list[RunRecord]) -> tuple[list[str], dict[str, Any], tuple[str, list[RunRecord]] | None]:
    """The parameters that vary over `ok` and the constants; and a parameter that is a number in
    most runs with the runs where it is not (hand-edited or odd headers, review 26: the whole read
    stopped without naming a file; at most `ODD_RUNS` of them), to be left out. Any other parameter
    that varies and is not always a number stops the read."""
    names: list[str] = []
    for r in ok:
        names.extend(p for p in r.params if p not in names)
    varying, constants = [], {}
    for p in names:
        # 4 and 4.0 are the same value (JSON writers differ); other values compare by their repr
        vals = {float(v) if _is_number(v) else repr(v) for v in (r.params[p] for r in ok)}
        if len(vals) == 1:
            constants[p] = ok[0].params[p]
            continue
        odd = [r for r in ok if not _is_number(r.params[p])]
        numbers = {float(r.params[p]) for r in ok if _is_number(r.params[p])}
        if odd and len(numbers) >= 2 and len(odd) <= ODD_RUNS * len(ok):
            return varying, constants, (p, odd)
        if odd:
            bad = sorted({repr(r.params[p]) for r in odd})
            raise InputError(
                f"parameter {p!r} varies over the runs but is not always a number ({', '.join(bad[:5])}; e.g. in "
                f"{odd[0].files[0].path}); model the runs of each value separately (--where {p}=...)"
            )
        varying.append(p)
    return varying, constants, None


def load_runs(paths: Sequence[str | os.PathLike[str]] | Iterable[Path], options: ReadOptions | None = None) -> RunSet:
    """Read run files (directories and globs expanded) and group them into runs.

    Unreadable files are skipped and listed in `RunSet.files` (and make their run incomplete when it
    has no other file of that rank); malformed lines and impossible values are warnings naming
    file:line; copies of one process's file are read once; runs that failed, did not finish, have
    two main files for a rank or use undefined region ids are kept in `runs` with their status and
    reason (`runjudge.judge`), and `completed()` leaves them out."""
    options = options or ReadOptions()
    files: list[FileResult] = []
    warnings: list[str] = []
    rank_files: list[RankFile] = []
    unreadable: list[tuple[Path, str]] = []
    shared: dict[Any, Any] = {}  # the call paths and regions the files have in common (`Run.pack`)
    for p in [Path(p) for p, _ in expand(paths)]:
        try:
            if p.stat().st_size == 0:
                raise RunFileError("empty file")
            run = read_run(p)
        except (RunFileError, OSError) as exc:
            said = f"cannot read: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, FileNotFoundError) and p.is_symlink():
                said += f" (a symbolic link to {os.readlink(p)}, which is not there)"
            files.append(FileResult(str(p), "runs", "skipped", said))
            cause = exc if isinstance(exc, OSError) else exc.__cause__
            why = ("empty" if str(exc) == "empty file" else
                   f"cannot read: {cause.strerror or cause}" if isinstance(cause, OSError) else "no readable header")
            unreadable.append((p, why))
            continue
        warnings.extend(msg for msg in run.problems if _NO_END not in msg)
        check = check_values(p, run)
        warnings.extend(check.warnings)
        run.pack(shared)  # a tenth of the memory: every file is held until the runs are put together
        rank_files.append(RankFile(p, run, check))
    rank_files, copies, copy_results = drop_copies(rank_files)
    warnings.extend(copies)
    files.extend(copy_results)
    runs = _group(rank_files)
    attribute_unreadable(unreadable, runs)
    for r in runs:
        judge(r, options.include_incomplete)
    if options.experiments:
        runs, others = select_experiments(runs, options.experiments)
        files.extend(FileResult(str(f.path), "runs", "deselected", f"experiment {r.experiment_key or '(unnamed)'!r} "
                                "not selected (--experiment)") for r in others for f in r.all_files)
    if options.points:
        recorded = _ranks_recorded(runs)
        unmatched = options.points.unmatched(_point_values(r, recorded) for r in runs)
        warnings.extend(excluded_nothing(c, OF_RUNS) for c in unmatched)
        runs, others = select_points(runs, options.points)
        files.extend(FileResult(str(f.path), "runs", "deselected", f"{_params_text(r.params)} not selected "
                                f"({options.points})") for r in others for f in r.all_files)
    else:
        unmatched = ()
    parameters, constants = _parameters(runs, warnings)
    warnings.extend(_experiments_warning(runs, parameters))
    warnings.extend(oversubscribed_warning(runs))
    kept = [r for r in runs if r.status == "ok" and r.kept_incomplete]
    if kept:
        items = [f"run {r.run_id} ({r.kept_incomplete})" for r in kept]
        warnings.append(
            f"--include-incomplete kept {len(kept)} incomplete run(s): a rank without an end record counts up "
            f"to its last flush, one without a readable file not at all: {listing(items, 5, 'more run(s)')}"
        )
    # left out by rank selection (or, in files of an older runtime that did not name its selection,
    # perhaps); a run whose ranks' files were lost is incomplete (runjudge), said above when kept
    partial = [r for r in runs if r.status == "ok" and len(r.ranks) < r.world_size and not r.unreadable
               and not r.kept_incomplete]
    if partial:
        r = partial[0]
        named = any(isinstance(f.header.get("recorded_ranks"), list) for f in r.files)
        warnings.append(
            f"{len(partial)} run(s) have files of fewer ranks than their world size (e.g. run {r.run_id}: "
            f"{len(r.ranks)} of {r.world_size}; rank selection{'' if named else '?'}): their values come from the "
            "recorded ranks"
        )
    for r in runs:
        if r.status == "ok":
            files.extend(FileResult(str(f.path), "runs", "read") for f in r.all_files)
        else:
            warnings.append(f"run {r.run_id} left out ({r.status}): {r.reason}")
            files.extend(FileResult(str(f.path), "runs", "left out", f"run {r.status}: {r.reason}", run=r.run_id,
                                    run_status=r.status) for f in r.all_files)
    return RunSet(runs, parameters, constants, files, warnings, unmatched)


def select_experiments(runs: list[RunRecord], names: Sequence[str]) -> tuple[list[RunRecord], list[RunRecord]]:
    """(the runs of the experiments `names`, the others). An experiment is the header's name, or for
    runs without one `program <argv[0]>` as `experiment_key` says; a name no run has is an error
    that lists the experiments there are."""
    have = sorted({r.experiment_key for r in runs})
    unknown = [n for n in names if n not in have]
    if unknown:
        shown = ", ".join(repr(e) for e in have if e) or "none named"
        raise InputError(f"--experiment: no run of experiment {unknown[0]!r}; the runs have: {shown}")
    wanted = set(names)
    return [r for r in runs if r.experiment_key in wanted], [r for r in runs if r.experiment_key not in wanted]


def _ranks_recorded(runs: list[RunRecord]) -> bool:
    return any(RANKS_PARAMETER in x.params for x in runs)


def _point_values(r: RunRecord, ranks_recorded: bool) -> dict[str, Any]:
    """A run's parameters as `--where` and `--exclude` see them: `ranks` is the world size where no
    run records it (`ranks_recorded`), as `_parameters` takes it."""
    return r.params if ranks_recorded else {**r.params, RANKS_PARAMETER: r.world_size}


def select_points(runs: list[RunRecord], points: PointFilter) -> tuple[list[RunRecord], list[RunRecord]]:
    """(the runs whose parameters `points` keeps, the others); `ranks` is the world size where no
    run records it, as `_parameters` takes it. A parameter no run has, or a filter that leaves no
    completed run, is an error naming the option."""
    recorded = _ranks_recorded(runs)

    def values(r: RunRecord) -> dict[str, Any]:
        return _point_values(r, recorded)

    points.check_names({k for r in runs for k in values(r)}, "the runs")
    keep = [points.keeps(values(r)) for r in runs]
    chosen = [r for r, k in zip(runs, keep) if k]
    if any(r.status == "ok" for r in runs) and not any(r.status == "ok" for r in chosen):
        have: dict[str, list[Any]] = defaultdict(list)
        for r in runs:
            if r.status == "ok":
                for k, v in values(r).items():
                    have[k].append(v)
        raise nothing_left(points, have, "completed run")
    return chosen, [r for r, k in zip(runs, keep) if not k]


def _host_cpus(files: list[RankFile]) -> int | None:
    """The CPUs the ranks of one host could use together: the union of their `cpu_affinity` where
    every one records it (ranks bound to disjoint CPUs by srun or mpirun do not share them), else the
    most `cpus_usable` of them; None where none records it (files of an older runtime)."""
    from runtime.environment import parse_cpu_list

    sets = [parse_cpu_list(f.header.get("cpu_affinity")) for f in files]
    if all(cpus for cpus in sets):
        return len(set().union(*sets))
    counts = [c for f in files if isinstance(c := f.header.get("cpus_usable"), int) and not isinstance(c, bool)
              and c > 0]
    return max(counts) if counts else None


def oversubscribed_warning(runs: list[RunRecord]) -> list[str]:
    """Runs whose ranks on one host outnumbered the CPUs they could use there (header `cpus_usable`,
    `cpu_affinity`): their times measure the ranks' contention for the cores, and a model over
    `ranks` extrapolates it (review 71 F2: 16 ranks on 2 cores were fitted as ranks^(1/2))."""
    found = []
    for r in runs:
        if r.status != "ok":
            continue
        by_host: dict[str, dict[int, RankFile]] = {}
        for f in r.files:
            if not f.is_child and not f.continues:
                by_host.setdefault(str(f.header.get("host")), {}).setdefault(f.rank, f)
        for host, ranks in sorted(by_host.items()):
            cpus = _host_cpus(list(ranks.values()))
            if cpus is not None and len(ranks) > cpus:
                found.append((r, host, len(ranks), cpus))
                break
    if not found:
        return []
    r, host, n, cpus = max(found, key=lambda x: x[2] / x[3])
    return [f"{len(found)} run(s) had more ranks on one host than CPUs they could use there (e.g. run {r.run_id}: "
            f"{n} ranks on {host}, {cpus} usable CPUs): their ranks shared cores, so their times measure the "
            "contention, and models over 'ranks' extrapolate it"]


def _experiments_warning(runs: list[RunRecord], parameters: tuple[str, ...]) -> list[str]:
    """Say what reading runs of several experiments together does to the data."""
    ok = [r for r in runs if r.status == "ok"]
    experiments = sorted({r.experiment_key for r in ok})
    if len(experiments) < 2:
        return []
    at: dict[tuple[Any, ...], set[str]] = {}
    for r in ok:
        at.setdefault(tuple(r.params.get(p) for p in parameters), set()).add(r.experiment_key)
    shared = [pt for pt, exps in at.items() if len(exps) > 1]
    names = ", ".join(e or "(unnamed)" for e in experiments)
    if not shared:
        return [f"runs of {len(experiments)} experiments are modeled together: {names}; they share no point"]
    example = ", ".join(f"{p}={v}" for p, v in zip(parameters, shared[0]))
    return [
        f"runs of {len(experiments)} experiments are modeled together: {names}; at {len(shared)} point(s) "
        f"(e.g. {example}) runs of several experiments are repetitions of each other for the call paths they "
        f"share, and a call path one experiment did not measure there is not counted as 0 in its runs; "
        f"--experiment NAME models one of them"
    ]


def read_runs_batch(paths: Sequence[Path], options: ReadOptions) -> tuple[Dataset, list[FileResult], RunSet]:
    """The batch reader registered for the "runs" format; the runs too, for `modeler report`."""
    from ..aggregate import dataset_from_runs

    runset = load_runs(paths, options)
    dataset = dataset_from_runs(runset, ranks=options.ranks, derived=options.derived)
    # the numbers every run has alike (the sweep's constants, or what --where/--exclude left one of)
    dataset.held.update({k: float(v) for k, v in runset.constants.items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return dataset, runset.files, runset


def read_runs(paths: Sequence[str | os.PathLike[str]], options: ReadOptions | None = None) -> Dataset:
    """Run files straight to a Dataset."""
    return read_runs_batch(list(paths), options or ReadOptions())[0]
