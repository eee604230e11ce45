"""Measurement readers and `load(paths) -> Dataset`.

`load` expands directories and globs, detects each file's format with the sniffers in
`SNIFFERS` (in order; the first that claims a file wins), reads every file with the reader
registered for its format in `READERS`, and merges the results into one `Dataset`.

Our run files are read as one batch (ranks and repetitions of a run live in different files);
the other formats yield one dataset per file. A file that cannot be read is reported with the
reason and skipped; the batch goes on. A reader or sniffer module that fails to import is an error,
never skipped.
"""

from __future__ import annotations

import glob
import hashlib
import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from ..dataset import PER_RANK_COMBINATIONS, Dataset, RunShares, Series
from ..errors import InputError, ModelerError
from ..listing import listing
from ..pointfilter import OF_RUNS, PointFilter, drop_single_valued, filter_dataset, nothing_left, point_values, values_of
from ..pointfilter import excluded_nothing as excluded_nothing_warning
from ..ranks_name import ranks_parameter
from .unusable import (COMPRESSED_SUFFIXES, LAUNCHER_FILE, NOT_MEASUREMENTS, compressed_reason, damaged_reason,
                       is_launcher_file, no_usable_message)


#: why an Extra-P input found in a directory beside run files is not read
BESIDE_RUNS = ("an Extra-P input found beside run files (an export of them, `modeler export --extrap`?): not read, "
               "so that no measurement counts twice; name the file itself to read it")


def is_rank_file_name(path: Path) -> bool:
    """Named as the runtime names a process's run file (`rank<R>.<pid>.jsonl`)."""
    from .runjudge import run_file_rank  # it needs FileResult, defined here

    return run_file_rank(path) is not None


class ReaderImportError(ModelerError):
    """A registered reader or sniffer module could not be imported."""


@dataclass(frozen=True)
class ReaderSpec:
    """Where a format's reader lives. `batch` readers take every file of the format at once:
    `read(paths, options) -> (Dataset, list[FileResult])`; the others `read(path) -> Dataset`."""

    module: str
    function: str
    batch: bool = False


class Sniffer(Protocol):
    """Says which format a file is in (a key of READERS), or None when it is not one of its own."""

    def __call__(self, path: Path) -> str | None: ...


class FileReader(Protocol):
    """Reads one file into a Dataset; raises InputError (naming the file) when it cannot."""

    def __call__(self, path: Path) -> Dataset: ...


class BatchReader(Protocol):
    """Reads all files of its format together; reports each file's fate in the FileResults."""

    def __call__(self, paths: list[Path], options: "ReadOptions") -> tuple[Dataset, list["FileResult"]]: ...


# Order matters: our run files are the common case and their sniffer is cheapest.
SNIFFERS: tuple[tuple[str, str], ...] = (
    ("modeler.readers.runs", "sniff_runs"),
    ("modeler.readers.extrap", "sniff_extrap"),
)

READERS: dict[str, ReaderSpec] = {
    "runs": ReaderSpec("modeler.readers.runs", "read_runs_batch", batch=True),
    "extrap-jsonl": ReaderSpec("modeler.readers.extrap", "read_extrap_jsonl"),
    "extrap-text": ReaderSpec("modeler.readers.extrap", "read_extrap_text"),
}
FORMATS = tuple(READERS)

# suffixes looked at when a directory is given; explicit files and globs are sniffed whatever their name
DIRECTORY_SUFFIXES = (".jsonl", ".txt")


@dataclass(frozen=True)
class ReadOptions:
    """How our run files become series (other formats arrive already aggregated)."""

    ranks: str = "mean"  # across ranks: mean, max, min or sum
    include_incomplete: bool = False  # keep runs whose files have no end record
    derived: bool = True  # speedup, parallel efficiency and cost when `ranks` is a parameter
    experiments: tuple[str, ...] = ()  # only runs of these experiments (empty: all)
    #: only the points (runs, or an Extra-P input's points) this keeps (`--where`, `--exclude`)
    points: PointFilter = PointFilter()
    #: the parameter that counts the ranks the work is split over (`--ranks-parameter`,
    #: `Dataset.ranks_parameter`); None: `ranks`
    ranks_parameter: str | None = None


@dataclass(frozen=True)
class FileResult:
    """What became of one input file: `read`; `skipped` (unreadable, with the reason); `left out`
    (a run that failed or did not finish, its file was fine); `ignored` (a file found in a
    directory that no reader recognizes)."""

    path: str
    format: str | None
    status: str
    reason: str = ""
    warnings: tuple[str, ...] = ()  # what the reader noticed before giving up on a skipped file
    run: str = ""  # a left-out file's run, and its status (failed, incomplete, ...)
    run_status: str = ""


@dataclass
class Loaded:
    dataset: Dataset
    files: list[FileResult] = field(default_factory=list)
    #: what a batch reader gives besides (the runs reader: its `RunSet`, which `modeler report` shows)
    batches: list[Any] = field(default_factory=list)

    @property
    def skipped(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "skipped"]


def _import(module: str, attr: str) -> Callable:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        raise ReaderImportError(f"reader module {module!r} failed to import: {type(exc).__name__}: {exc}") from exc
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ReaderImportError(f"reader module {module!r} has no function {attr}()")
    return fn


def sniff(path: Path) -> str | None:
    """The format name of `path`, or None when no registered reader recognizes it."""
    for module, attr in SNIFFERS:
        fmt = _import(module, attr)(path)
        if fmt is not None:
            if fmt not in READERS:
                raise ReaderImportError(f"{module}.{attr} returned format {fmt!r}, which has no registered reader")
            return fmt
    return None


def expand(paths: Iterable[str | os.PathLike[str]],
           unlisted: list[tuple[Path, str]] | None = None, empty: list[Path] | None = None) -> list[tuple[Path, bool]]:
    """Files named by `paths` as (file, explicit): directories recursively (files ending in
    .jsonl or .txt, hidden ones left out), globs expanded; each file once, in a stable order.
    A path that names nothing is an InputError. The folders inside a directory that could not be
    listed go to `unlisted` as (folder, why) (review 26: a run folder of another user's, mode 700,
    vanished from the results without a word); the folders a pattern matches that hold no such
    file go to `empty`, an InputError only where nothing the pattern matches holds one (review 101
    M2: one run folder with only its `launch.json` stopped `modeler fit 'runs/*'`)."""
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()

    def add(p: Path, explicit: bool) -> None:
        key = Path(os.path.realpath(p))  # (Path.resolve raises on a symbolic-link loop: review 102 MED-1)
        if key not in seen:
            seen.add(key)
            out.append((p, explicit))
        elif explicit:  # named after the directory that holds it (review 27): it counts as named
            out[:] = [(q, True) if Path(os.path.realpath(q)) == key else (q, e) for q, e in out]

    for raw in paths:
        text = os.fspath(raw)
        if not text:  # Path("") is the current directory (review 40: `modeler fit "$RUNS"`, RUNS unset)
            raise InputError("an input is an empty path (an unset shell variable?)")
        p = Path(text)
        if p.is_dir():
            before = len(unlisted) if unlisted is not None else 0
            found = _files_under(p, unlisted)
            if not found and (unlisted is None or len(unlisted) == before):
                raise InputError(f"{text}: directory holds no .jsonl or .txt files")
            for f in found:
                add(f, False)
        elif p.is_file() or _dangling(p):  # a dangling link: named as unreadable
            add(p, True)
        elif glob.has_magic(text):
            matches = sorted(glob.glob(text, recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file() or _dangling(Path(m))]
            dirs = [Path(m) for m in matches if Path(m).is_dir()]
            if not files and not dirs:
                raise InputError(f"{text}: no file matches this pattern")
            for f in files:
                add(f, True)
            hollow = []
            for d in dirs:
                before = len(unlisted) if unlisted is not None else 0
                found = _files_under(d, unlisted)
                if not found and (unlisted is None or len(unlisted) == before):
                    hollow.append(d)
                for f in found:
                    add(f, False)
            if hollow and not files and len(hollow) == len(dirs):
                raise InputError(f"{text}: the folders this pattern matches hold no .jsonl or .txt files")
            if empty is not None:
                empty.extend(hollow)
        elif p.exists():  # (review 57 F7: /dev/null was "no such file")
            raise InputError(f"{text}: not a regular file or directory (a device, a pipe or a socket)")
        else:
            raise InputError(f"{text}: no such file or directory")
    return out


def _dangling(p: Path) -> bool:
    """A symbolic link that leads nowhere: kept, to be named as unreadable."""
    return p.is_symlink() and not p.exists()


#: names of files read in folders: measurements, and compressed copies of them (named as such)
_WANTED = tuple(s + c for s in DIRECTORY_SUFFIXES for c in ("", *COMPRESSED_SUFFIXES))


def _files_under(root: Path, unlisted: list[tuple[Path, str]] | None) -> list[Path]:
    """The files ending in `DIRECTORY_SUFFIXES` (or a compressed copy of one, `.jsonl.gz`, to be
    named as such) under `root`, hidden files and folders left out; symbolic links to folders
    followed, each folder once (a link back up is no loop); a link named so that leads nowhere is
    kept, to be named as unreadable (review 101 M3: a linked run folder, a dangling rank file's
    link and a gzipped rank file were left out without a word). The folders that could not be
    listed go to `unlisted`."""

    def failed(exc: OSError) -> None:
        if unlisted is not None:
            unlisted.append((Path(exc.filename or root), exc.strerror or str(exc)))

    found = []
    top = os.path.realpath(root)
    walked = {top}
    for folder, dirs, files in os.walk(root, onerror=failed, followlinks=True):
        kept = []
        for d in dirs:
            real = os.path.realpath(os.path.join(folder, d))
            # (a link back up is no loop; `/` too: review 102 LOW-1)
            if not d.startswith(".") and real not in walked and os.path.commonpath([top, real]) != real:
                walked.add(real)
                kept.append(d)
        dirs[:] = kept
        for name in files:
            f = Path(folder) / name
            if not name.startswith(".") and name.endswith(_WANTED) and (f.is_file() or _dangling(f)):
                found.append(f)
    return sorted(found)


def merge(datasets: Sequence[Dataset]) -> Dataset:
    """One dataset from several over the same parameters (in any order); a (call path, metric)
    found in several gets the union of their points, repetitions at a shared point concatenated."""
    if not datasets:
        raise InputError("no measurements to merge")
    if len(datasets) == 1:
        return datasets[0]
    params = datasets[0].parameters
    for d in datasets[1:]:
        if set(d.parameters) != set(params):
            a, b = _sources(datasets[0].sources, "the first input"), _sources(d.sources, "another input")
            raise InputError(
                f"inputs disagree on the parameters: {a} has ({', '.join(params)}), "
                f"{b} has ({', '.join(d.parameters)}); model them separately"
            )
    merged: dict[tuple[str, str], dict[tuple[float, ...], list[np.ndarray]]] = {}
    labels: dict[tuple[str, str], dict[tuple[float, ...], list[np.ndarray]] | None] = {}
    units: dict[tuple[str, str], str] = {}
    offset = 0  # the passes of each input are numbered on from the last input's
    for d in datasets:
        order = [d.parameters.index(p) for p in params]
        last = 0
        for s in d.series:
            key = (s.callpath, s.metric)
            units.setdefault(key, s.unit)
            by_point = merged.setdefault(key, {})
            passes = labels.setdefault(key, {})
            if s.passes is None:
                labels[key] = None
            for i, (pt, reps) in enumerate(zip(s.points[:, order], s.repetitions)):
                by_point.setdefault(tuple(float(v) for v in pt), []).append(reps)
                if passes is not None and s.passes is not None:
                    # (a run that names no pass stays -1)
                    passes.setdefault(tuple(float(v) for v in pt), []).append(
                        np.where(s.passes[i] >= 0, s.passes[i] + offset, -1))
                    last = max(last, int(s.passes[i].max()) + 1)
        offset += last
    series = []
    for (cp, metric), by_point in merged.items():
        pts = sorted(by_point)
        passes = labels[(cp, metric)]
        series.append(
            Series(cp, metric, np.array(pts, dtype=float).reshape(len(pts), len(params)),
                   tuple(np.concatenate(by_point[p]) for p in pts), units[(cp, metric)],
                   None if passes is None else tuple(np.concatenate(passes[p]) for p in pts))
        )
    return Dataset(
        params,
        series,
        [w for d in datasets for w in d.warnings] + _given_twice(datasets, params),
        [s for d in datasets for s in d.sources],
        RunShares.merged([d.run_shares for d in datasets]),
        {k: v for k, v in datasets[0].held.items() if all(d.held.get(k) == v for d in datasets[1:])},
    )


def _given_twice(datasets: Sequence[Dataset], params: Sequence[str]) -> list[str]:
    """A warning for each two inputs that hold the very same values at most of the (call path,
    metric, point)s they share, some not whole numbers: the same measurements given twice (runs and
    their export, named both), which would count twice as repetitions (review 118 LOW-4: said
    nowhere). Counts alike in two experiments (visits) are no sign."""
    cells: list[set[tuple[str, str, tuple[float, ...]]]] = []
    alike: dict[tuple[str, str, tuple[float, ...], bytes], list[int]] = {}  # equal values: the inputs holding them
    for i, d in enumerate(datasets):
        order = [d.parameters.index(p) for p in params]
        mine = set()
        for s in d.series:
            for pt, reps in zip(s.points[:, order], s.repetitions):
                cell = (s.callpath, s.metric, tuple(pt.tolist()))
                mine.add(cell)
                alike.setdefault((*cell, np.asarray(reps, dtype=float).tobytes()), []).append(i)
        cells.append(mine)
    same: dict[tuple[int, int], list[int]] = {}  # (input, input): [same values, same and not whole]
    for key, holders in alike.items():
        holders = sorted(set(holders))
        if len(holders) < 2:
            continue
        values = np.frombuffer(key[3])
        for a in range(len(holders)):
            for b in range(a + 1, len(holders)):
                counts = same.setdefault((holders[a], holders[b]), [0, 0])
                counts[0] += 1
                counts[1] += bool(np.any(values != np.round(values)))
    out = []
    for (i, j), (n_same, fractional) in same.items():
        shared = len(cells[i] & cells[j])
        if fractional and 2 * n_same > shared:
            a, b = _sources(datasets[i].sources, "an input"), _sources(datasets[j].sources, "another input")
            out.append(f"{a} and {b} hold the same values at {n_same} of the {shared} (call path, metric, point)s they "
                       f"share: the same measurements given twice (runs and their export?) count twice as "
                       f"repetitions, which narrows the ranges; give one of them")
    return out


def read_inputs(
    paths: Iterable[str | os.PathLike[str]], options: ReadOptions | None = None, *, format: str | None = None
) -> Loaded:
    """Read every file named by `paths` (see `expand`), each in its detected format (or `format`)."""
    options = options or ReadOptions()
    if format is not None and format not in READERS:
        raise InputError(f"--input-format: unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    files: list[FileResult] = []
    by_format: dict[str, list[Path]] = {}
    unlisted: list[tuple[Path, str]] = []
    empty: list[Path] = []
    found_beside: list[Path] = []  # Extra-P inputs found in a directory, not named
    expanded = expand(paths, unlisted, empty)
    files.extend(FileResult(str(d), None, "skipped", f"cannot list this folder: {why}") for d, why in unlisted)
    files.extend(FileResult(str(d), None, "skipped", "a folder the pattern matches that holds no .jsonl or .txt "
                            "files (a run that wrote nothing?)") for d in empty)
    for path, explicit in expanded:
        if (why := _unreadable(path)) is not None:
            if format in (None, "runs") and is_rank_file_name(path):
                by_format.setdefault("runs", []).append(path)  # its run is told it lacks that rank
            else:
                files.append(FileResult(str(path), format, "skipped", f"cannot read: {why}"))
            continue
        fmt = format or sniff(path)
        if fmt != "runs" and _is_empty(path):
            # an empty file among measurements is most likely a process that died before writing
            # (the runs reader takes an empty rank file: it tells which run lacks that rank)
            files.append(FileResult(str(path), format, "skipped", "empty file"))
            continue
        if fmt is None and is_launcher_file(path):
            # the launcher's own files beside the run files (rank0.error.txt): never measurements
            files.append(FileResult(str(path), None, "ignored", LAUNCHER_FILE))
            continue
        if fmt is None and (why := compressed_reason(path)) is not None:
            files.append(FileResult(str(path), None, "skipped", why))  # in a folder too (review 101 M3)
            continue
        if fmt is None and not explicit and (why := damaged_reason(path)) is not None:
            files.append(FileResult(str(path), None, "skipped", why))  # named, in a folder too
            continue
        if fmt is None:
            # inside a directory, other files (logs, notes) are expected; a file named explicitly is not
            status = "skipped" if explicit else "ignored"
            files.append(FileResult(str(path), None, status, NOT_MEASUREMENTS))
            continue
        by_format.setdefault(fmt, []).append(path)
        if not explicit and fmt != "runs":
            found_beside.append(path)

    if by_format.get("runs") and found_beside:
        # review 26: `modeler export --extrap runs/x.jsonl runs/` then `modeler fit runs/` read every
        # measurement twice (and an export of another experiment stopped the batch)
        for path in found_beside:
            fmt = next(f for f, ps in by_format.items() if path in ps)
            by_format[fmt].remove(path)
            files.append(FileResult(str(path), fmt, "ignored", BESIDE_RUNS))
        by_format = {f: ps for f, ps in by_format.items() if ps}

    extrap_inputs = [str(p) for f, ps in by_format.items() if f != "runs" for p in ps]
    if options.experiments and extrap_inputs and not by_format.get("runs"):
        # review 46: the option was silently ignored where there are no runs to choose from
        raise InputError(f"--experiment: no run of experiment {options.experiments[0]!r}: the inputs are Extra-P "
                         f"files, which name no experiment ({listing(extrap_inputs, 3, 'more')})")
    datasets: list[Dataset] = []
    origins: list[list[int]] = []  # the indices in `files` of each dataset's files
    batches: list[Any] = []
    copies: list[str] = []
    narrowed: set[str] = set()  # parameters that --where/--exclude left with one value in an Extra-P input
    filtered_points: set[tuple[tuple[str, float], ...]] = set()  # the Extra-P inputs' points before the filter
    unfiltered: list[Dataset] = []  # Extra-P inputs of which --where/--exclude left no point
    for fmt, fpaths in by_format.items():
        spec = READERS[fmt]
        reader = _import(spec.module, spec.function)
        if spec.batch:
            # a batch reader fails as a whole only for reasons that concern every file (runs that
            # cannot be put together): that error stops the command
            ds, results, *extra = reader(fpaths, options)
            batches.extend(extra)
            first = len(files)
            files.extend(results)
            if ds.series or ds.parameters:
                datasets.append(ds)
                origins.append([first + i for i, r in enumerate(results) if r.status == "read"])
        else:
            seen: dict[bytes, Path] = {}
            for p in fpaths:
                first = _copy_of(p, seen)
                if first is not None:
                    # a copy (a backup in a sub-folder) would add its values again as repetitions
                    files.append(FileResult(str(p), fmt, "duplicate", f"a copy of {first}: read once"))
                    copies.append(f"{p} (= {first})")
                    continue
                try:
                    ds = reader(p)
                except (InputError, OSError, UnicodeDecodeError) as exc:
                    files.append(FileResult(str(p), fmt, "skipped", str(exc), tuple(getattr(exc, "warnings", ()))))
                    continue
                if not ds.sources:
                    ds.sources.append(str(p))
                if options.points:
                    whole = ds
                    filtered_points |= point_values(ds)
                    ds, single = filter_dataset(ds, options.points, str(p))  # an unknown name stops the command
                    if not ds.series:
                        unfiltered.append(whole)
                        files.append(FileResult(str(p), fmt, "deselected", f"no point selected ({options.points})"))
                        continue
                    narrowed |= single
                origins.append([len(files)])
                files.append(FileResult(str(p), fmt, "read"))
                datasets.append(ds)

    runsets = [b for b in batches if hasattr(b, "unmatched")]
    unmatched_warnings = _excluded_nothing(options.points, filtered_points, runsets) if filtered_points else []
    datasets = _most_common_parameters(_aligned(datasets), origins, files)
    # a skipped file's own warnings (its bad lines) come first: they say why it was skipped
    noticed = [w for f in files if f.status == "skipped" for w in f.warnings]
    if not datasets and unfiltered:
        values: dict[str, set[float]] = {}
        for d in unfiltered:
            for name, vals in values_of(d).items():
                values.setdefault(name, set()).update(vals)
        raise nothing_left(options.points, values, "point")
    if not datasets:
        raise InputError(no_usable_message(files, options.include_incomplete), warnings=noticed)
    # a parameter with one value at every point read is a constant, as the runs' constants are
    # (review 78 MED-4: an Extra-P file's own `ranks: 1` stayed a parameter, `--at ranks=1024` was
    # taken and the file would not merge with runs whose constant it is); what --where/--exclude
    # left one value of (`narrowed`) is among them
    dataset = drop_single_valued(merge(datasets), _all_parameters(datasets) | narrowed)
    if filtered_points and runsets:  # said over both kinds of input at once, not by the runs alone
        said_by_runs = {excluded_nothing_warning(c, OF_RUNS) for r in runsets for c in r.unmatched}
        dataset.warnings[:] = [w for w in dataset.warnings if w not in said_by_runs]
    from ..renamed_loops import renamed_loops_warnings

    dataset.warnings.extend(renamed_loops_warnings(dataset))
    if options.experiments and extrap_inputs:
        dataset.warnings.append(f"--experiment chooses among runs only: the Extra-P inputs are read whole "
                                f"({listing(extrap_inputs, 3, 'more')})")
    if copies:
        dataset.warnings.append(f"{len(copies)} file(s) are byte-for-byte copies of another input, read once: "
                                f"{listing(copies, 3, 'more')}")
    dataset.warnings.extend(noticed)
    dataset.warnings.extend(unmatched_warnings)
    dataset.warnings.extend(skipped_warning(f) for f in files if f.status == "skipped")
    dataset.warnings.extend(f"{f.path}: {f.reason}" for f in files if f.status == "ignored" and f.reason == BESIDE_RUNS)
    formats = {f.format for f in files if f.status == "read"}
    # how the values relate to the ranks, for the API as for the commands (review 103 MED-1)
    dataset.across_ranks = options.ranks if "runs" in formats else "mean"
    dataset.time_per_rank = options.ranks in PER_RANK_COMBINATIONS and formats <= {"runs"}
    dataset.ranks_parameter = ranks_parameter(options.ranks_parameter, dataset)
    return Loaded(dataset, files, batches)


def _all_parameters(datasets: Sequence[Dataset]) -> set[str]:
    return {p for d in datasets for p in d.parameters}


def _aligned(datasets: Sequence[Dataset]) -> list[Dataset]:
    """`datasets`, each given a column for the parameters the others have and it holds as a
    constant (`Dataset.held`: the runs' constants): runs whose `ranks` is 1 throughout merge with an
    Extra-P file that has a `ranks` of 1 (or of other values: it is then a parameter of the
    merged inputs, as it is of runs of several values). A dataset that lacks a parameter it does
    not hold is left as it is, for `merge` to refuse."""
    if len(datasets) < 2:
        return list(datasets)
    columns = list(dict.fromkeys(p for d in datasets for p in d.parameters))
    out = []
    for d in datasets:
        missing = [p for p in columns if p not in d.parameters]
        if not missing or not all(p in d.held for p in missing):
            out.append(d)
            continue
        fill = np.array([d.held[p] for p in missing], dtype=float)
        series = [Series(s.callpath, s.metric, np.hstack([s.points, np.tile(fill, (s.n_points, 1))]),
                         s.repetitions, s.unit, s.passes) for s in d.series]
        out.append(Dataset((*d.parameters, *missing), series, d.warnings, d.sources, d.run_shares,
                           {k: v for k, v in d.held.items() if k not in missing}))
    return out


def _most_common_parameters(datasets: Sequence[Dataset], origins: Sequence[Sequence[int]],
                            files: list[FileResult]) -> list[Dataset]:
    """The datasets over the parameters that most input files share; the files of the others are
    made `skipped` in `files`, naming their parameters (review 118 MED-2: one Extra-P file over other
    parameters stopped a batch of good ones, where a run over other parameters is left out). Where
    no set of parameters has more files than every other, all are kept, for `merge` to refuse."""
    groups: dict[frozenset[str], list[int]] = {}
    for i, d in enumerate(datasets):
        groups.setdefault(frozenset(d.parameters), []).append(i)
    if len(groups) < 2:
        return list(datasets)
    weight = {key: sum(max(len(origins[i]), 1) for i in members) for key, members in groups.items()}
    most, second = sorted(weight.values(), reverse=True)[:2]
    if most == second:
        return list(datasets)
    best = max(weight, key=weight.__getitem__)
    kept = datasets[groups[best][0]].parameters
    for key, members in groups.items():
        if key == best:
            continue
        for i in members:
            why = (f"its parameters ({', '.join(datasets[i].parameters)}) differ from those of the other inputs "
                   f"({', '.join(kept)}: {most} of {sum(weight.values())} files): model it separately")
            for j in origins[i]:
                f = files[j]
                files[j] = FileResult(f.path, f.format, "skipped", why,
                                      tuple(datasets[i].warnings) if len(origins[i]) == 1 else f.warnings)
    return [datasets[i] for i in groups[best]]


def _excluded_nothing(points: PointFilter, extrap_points: set[tuple[tuple[str, float], ...]],
                      runsets: Sequence[Any]) -> list[str]:
    """A warning for each `--exclude` condition that matched none of the Extra-P inputs' points, over
    all of them at once (review 27: each input said it on its own), nor any run where runs were
    read beside them (review 29: the Extra-P inputs warned of a condition that excluded runs)."""
    unmatched = points.unmatched(dict(p) for p in extrap_points)
    if not runsets:
        return [excluded_nothing_warning(c, "the points of the Extra-P inputs") for c in unmatched]
    in_runs = {c for r in runsets for c in r.unmatched}
    return [excluded_nothing_warning(c, "the runs nor the points of the Extra-P inputs")
            for c in unmatched if c in in_runs]


def _sources(sources: Sequence[str], fallback: str) -> str:
    if not sources:
        return fallback
    return listing(sources, 3, "more file(s)")


def skipped_warning(f: FileResult) -> str:
    """The warning for a skipped file, naming it once."""
    if f.reason.startswith(f.path):
        return f"{f.reason}; file skipped"
    return f"{f.path}: skipped: {f.reason}"


def _copy_of(path: Path, seen: dict[bytes, Path]) -> Path | None:
    """The earlier input whose bytes `path` repeats, else None (and `path` is noted in `seen`)."""
    try:
        digest = hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
    except OSError:
        return None  # the reader says why it cannot be read
    first = seen.setdefault(digest, path)
    return None if first is path else first


def _unreadable(path: Path) -> str | None:
    """Why `path` cannot be opened for reading, or None (review 26: an unreadable file in a
    directory was taken for "not measurements" and left out without a word)."""
    try:
        with open(path, "rb"):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False  # the reader reports why it cannot be read


def load(paths: Sequence[str | os.PathLike[str]], options: ReadOptions | None = None, *, format: str | None = None) -> Dataset:
    """Every measurement under `paths` as one Dataset; problems are in `Dataset.warnings`."""
    return read_inputs(paths, options, format=format).dataset
