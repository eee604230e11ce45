"""Checks of a whole sweep before any of its runs starts: swept values the modeler cannot fit over
(a warning) or fits as constant (2 values: a note), run directory names too long for the file
system, and launch records a resume could not read (errors naming the parameter, and every
damaged record)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from runtime.launch_args import Options
from runtime.launch_errors import LaunchError
from runtime.sweep_design import Run, legacy_directories
from runtime.sweep_state import RECORD, read_record


def non_numeric_warnings(opts: Options) -> list[str]:
    """A swept parameter with a value that is not a number (`1K`, `0x10`, `"a"`): the runs are made
    (a program may take strings), but `modeler fit` refuses a parameter that varies over values
    that are not all numbers, so the sweep could not be modeled over it. Said before any run."""
    warnings = []
    for name, values in opts.design.sweep.items():
        if len(values) < 2:
            warnings.extend(_one_value_warning(opts, name, values))
            continue
        texts = opts.design.spelled.get(name, {})
        bad = [texts.get(v, str(v)) for v in values if isinstance(v, str)]
        if not bad:
            continue
        shown = ", ".join(repr(t) for t in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        where = opts.sweep_origin.get(name, "--sweep")
        warnings.append(f"scaleprobe launch: warning: {where}: {'values' if len(bad) > 1 else 'value'} {shown} of "
                        f"{name!r} {'are not numbers' if len(bad) > 1 else 'is not a number'}, so modeler fit cannot fit a "
                        f"model over {name!r} (it models a parameter only over numbers, written as decimals such as 1024, "
                        "0.5 or 1e3); the runs are made anyway")
    return warnings


def few_values_notes(opts: Options) -> list[str]:
    """A swept parameter with 2 numeric values (review 128 LOW-7): `modeler fit` needs at least
    MIN_POINTS (modeler/estimator.py: 3) values of a parameter to fit a term in it; a region whose
    values differ between the two is modeled at the target's value alone (modeler/levels.py). One line each, before any run
    (and at --dry-run), not with SCALEPROBE_QUIET (a note, as the launcher's OMP_NUM_THREADS line);
    the runs are made as asked."""
    from runtime.sweep_run import _quiet

    if _quiet():
        return []
    notes = []
    for name, values in opts.design.sweep.items():
        numbers = {v for v in values if not isinstance(v, str)}
        if len(numbers) != 2 or len(numbers) != len(set(values)):
            continue  # one value (held, or `_one_value_warning`), 3 or more, or not numbers (warned of)
        where = opts.sweep_origin.get(name, "--sweep")
        notes.append(f"scaleprobe launch: note: {where}: 2 values of {name!r}; modeler fit needs at least "
                     f"{MIN_VALUES} values of a parameter to fit a term in it: how the time changes with {name!r} "
                     f"is not modeled (a region that differs between the two is modeled at the target's value of "
                     f"{name!r} alone; give it {MIN_VALUES} values or more, or hold it with --param {name}=N)")
    return notes


#: modeler/estimator.py MIN_POINTS: the values of a parameter its models need a term in it (the
#: runtime does not import the modeler)
MIN_VALUES = 3


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _one_value_warning(opts: Options, name: str, values: list) -> list[str]:
    """A single value that is numbers joined by another separator than `,` (`batch=32;64`, `32 64`),
    or in a sweep file's string by any (`batch = "32,64"`): a sweep that makes one run where several
    were meant (review 36)."""
    if len(values) != 1 or not isinstance(values[0], str):
        return []
    text = opts.design.spelled.get(name, {}).get(values[0], str(values[0]))
    where = opts.sweep_origin.get(name, "--sweep")
    # a sweep file's string may hold a ',' too: `n = "1,2"` (review 119 L3)
    from_file = where.startswith("--sweep-file")
    for sep in (";", "|", ":", " ", "/", *([","] if from_file else [])):
        parts = [p.strip() for p in text.split(sep) if p.strip()]
        if len(parts) > 1 and all(_NUMBER.fullmatch(p) for p in parts):
            fix = (f"a sweep file lists them as an array ({name} = [{', '.join(parts)}])" if from_file
                   else f"values are separated by ',' ({name}={','.join(parts)})")
            return [f"scaleprobe launch: warning: {where}: {name}={text!r} is one value, not {len(parts)}: {fix}; "
                    "one run is made with it"]
    return []


#: a file name's longest, in bytes, where the file system does not say (ext4, XFS, Btrfs, ...)
NAME_MAX = 255


def _name_max(folder: Path) -> int:
    """The longest name, in bytes, a file in `folder` (or in the nearest folder on the way that
    exists) may have."""
    for there in (folder, *folder.parents):
        if os.path.isdir(there):
            try:
                return int(os.pathconf(there, "PC_NAME_MAX"))
            except (OSError, ValueError, AttributeError):
                return NAME_MAX
    return NAME_MAX


def _shown(text: str, most: int = 60) -> str:
    return text if len(text) <= most else f"{text[:most - 3]}..."


def check_name_lengths(opts: Options, runs: list[Run]) -> None:
    """Refuse, before any run starts (a dry run too), parameter values that make a run directory's
    name longer than the file system takes (review 91 F3: a sweep said "unreadable launch record
    (File name too long); delete it", of a record that was never there). Names the parameter whose
    value takes most of the name, and where it was given."""
    if not runs:
        return
    longest = max(runs, key=lambda run: len(os.fsencode(run.directory.name)))
    size = len(os.fsencode(longest.directory.name))
    limit = _name_max(longest.directory.parent)
    if size <= limit:
        return
    from runtime.sweep_design import point_name

    parts = {name: len(os.fsencode(point_name({name: value}))) for name, value in longest.params.items()}
    rest = size - sum(parts.values())
    if not parts or rest > max(parts.values()):
        # the name's own part takes most (review 94 LOW-1: a long --run-id was blamed on `ranks`)
        raise LaunchError(f"the run directory's name would be {size} bytes ({_shown(longest.directory.name)}), "
                          f"over the {limit} bytes the file system allows in a name (under --out {opts.out}): "
                          f"{rest} bytes of it are not a parameter's but the run's id (--run-id, or the job id "
                          "of torchrun, SLURM, PBS, LSF): give a shorter one")
    name = max(parts, key=lambda k: parts[k])
    where = opts.param_origin.get(name, f"parameter {name!r}")
    where = _shown(where) if where.startswith(("--sweep ", "--param ")) else where
    others = len(parts) > 1 and size - parts[name] > limit
    raise LaunchError(f"{where}: the run directory's name would be {size} bytes "
                      f"({_shown(longest.directory.name)}), over the {limit} bytes the file system allows in a name "
                      f"(under --out {opts.out}): give {name!r} a shorter value (it takes {parts[name]} bytes of the "
                      "name)" + ("; the other parameters' names and values are too long as well" if others else ""))


def check_records(runs: list[Run]) -> None:
    """Read the launch record of every directory a resumed sweep will look at (each run's, its
    older name's and its `_alt-<n>` ones) before any run starts; name every damaged one at once
    (exit 2) rather than stop the sweep midway at the first. Nothing is removed or overwritten:
    whether a damaged run is made again is the user's choice."""
    if not runs:
        return
    names = {run.directory.name for run in runs}
    names |= {legacy.name for run in runs for legacy in legacy_directories(run, True)}
    roots = {run.directory.parent for run in runs}
    bad = []
    for root in sorted(roots):
        try:
            entries = sorted(root.iterdir())
        except OSError:  # no such directory yet (a first run), or the error comes with --out's check
            continue
        for directory in entries:
            if re.sub(r"_alt-\d+\Z", "", directory.name) not in names or not directory.is_dir():
                continue
            try:
                read_record(directory, advice=False)
            except LaunchError as exc:
                bad.append(str(exc))
    if bad:
        listed = "\n  ".join(bad)
        raise LaunchError(f"{len(bad)} launch record{'s are' if len(bad) > 1 else ' is'} damaged, so this sweep "
                          f"cannot tell whether {'those runs were' if len(bad) > 1 else 'that run was'} made; "
                          f"nothing was run:\n  {listed}\nDelete each such {RECORD} to make its run again (its "
                          "rank files are then replaced), or move its run directory out of the way to keep it")


#: `--spawn` programs that start their ranks on this host unless told of other hosts
_LOCAL_STARTERS = {"mpiexec", "mpirun", "mpiexec.hydra", "orterun", "prterun", "torchrun"}
#: options of those that put ranks on other hosts
_HOST_OPTIONS = ("-H", "-host", "--host", "-hosts", "--hosts", "-hostfile", "--hostfile", "-machinefile",
                 "--machinefile", "-f", "--default-hostfile", "-machine", "--rdzv-endpoint", "--rdzv_endpoint",
                 "--master-addr", "--master_addr")


def spawn_is_local(spawn: str | None, env: dict[str, str] | None = None) -> bool:
    """Whether `--spawn`'s command starts the ranks on this host: mpiexec, mpirun or torchrun (also
    `python -m torch.distributed.run`) given no host list or host file (nor torchrun `--nnodes` above
    1), outside a batch allocation of several nodes (`SLURM_JOB_NUM_NODES` above 1, `PBS_NODEFILE`,
    `LSB_MCPU_HOSTS` naming more than one host). Anything else (srun, flux run, a wrapper script) is
    taken to place its ranks itself."""
    import os
    import shlex

    env = os.environ if env is None else env
    try:
        words = shlex.split(spawn or "")
    except ValueError:
        return False
    while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] == "env"):
        words = words[1:]  # `env OMP_NUM_THREADS=2 mpiexec ...`
    if not words:
        return False
    program = os.path.basename(words[0])
    if re.fullmatch(r"python[0-9.]*", program) and words[1:3] == ["-m", "torch.distributed.run"]:
        program, words = "torchrun", words[2:]
    if program not in _LOCAL_STARTERS:
        return False
    for i, word in enumerate(words[1:], start=1):
        name, _, value = word.partition("=")
        if name in _HOST_OPTIONS:
            return False
        if name == "--nnodes" and (value or (words[i + 1] if i + 1 < len(words) else "")) not in (
                "1", "1:1"):
            return False
    for var in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        if env.get(var, "1").isdigit() and int(env.get(var, "1")) > 1:
            return False
    if env.get("PBS_NODEFILE"):
        return False
    if len(env.get("LSB_MCPU_HOSTS", "").split()) > 2:  # `host1 n1 host2 n2`
        return False
    return True


def spawn_threads(spawn: str | None) -> str | None:
    """The OMP_NUM_THREADS that `--spawn`'s command gives its ranks itself, or None: a leading
    `OMP_NUM_THREADS=N` (also after `env`), Open MPI's `-x OMP_NUM_THREADS=N`, MPICH's `-genv` or
    `-env OMP_NUM_THREADS N`. It replaces what the launcher's environment holds."""
    import shlex

    try:
        words = shlex.split(spawn or "")
    except ValueError:
        return None
    found = None
    i = 0
    while i < len(words) and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[i]) or words[i] == "env"):
        name, _, value = words[i].partition("=")
        if name == "OMP_NUM_THREADS":
            found = value
        i += 1
    for j, word in enumerate(words[i:], start=i):
        following = words[j + 1] if j + 1 < len(words) else ""
        if word == "-x" and following.startswith("OMP_NUM_THREADS="):
            found = following.partition("=")[2]
        elif word in ("-genv", "-env", "--env") and following == "OMP_NUM_THREADS" and j + 2 < len(words):
            found = words[j + 2]
        elif word in ("-genv", "-env", "--env") and following.startswith("OMP_NUM_THREADS="):
            found = following.partition("=")[2]
    return found


def threads_per_rank(env: dict[str, str] | None = None, spawn: str | None = None) -> int:
    """The threads each rank computes with, as the launcher counts them: `OMP_NUM_THREADS` where set
    (its first number: `4,2` is 4), by `--spawn`'s command itself (`spawn_threads`) or else in the
    environment; otherwise 1, which the launcher sets itself for every rank it starts, the program
    starts (`--ranks-by-program`) or `--spawn` starts, where a run has more than one rank. A single
    rank with it unset uses torch's default (one thread per physical core), taken to fit the host and
    counted as 1."""
    import os

    env = os.environ if env is None else env
    given = spawn_threads(spawn)
    m = re.match(r"\s*(\d+)", given if given is not None else env.get("OMP_NUM_THREADS", ""))
    return max(1, int(m.group(1))) if m else 1


def local_ranks(opts: Options) -> bool:
    """Whether each run's ranks run on this host: `--nproc`, a sweep over `ranks` without `--spawn`,
    `--ranks-by-program`, or a `--spawn` command that starts them here (`spawn_is_local`)."""
    return opts.spawn is None or spawn_is_local(opts.spawn)


def oversubscription_warnings(opts: Options, runs: list[Run], cpus: int | None = None,
                              env: dict[str, str] | None = None) -> list[str]:
    """One warning (or none) for the points whose ranks on this host, times the threads per rank,
    outnumber the CPUs this process may use: those ranks share cores, and what their times measure is
    the contention (review 71 F2: the README's ranks=16 on 2 cores was modeled as sqrt(ranks))."""
    import os

    from runtime.environment import usable_cpus

    if not runs or not local_ranks(opts):
        return []
    cpus = usable_cpus() if cpus is None else cpus
    if not cpus:
        return []
    threads = threads_per_rank(env, opts.spawn)
    counts = sorted({run.ranks for run in runs})
    if "OMP_NUM_THREADS" not in (os.environ if env is None else env) and spawn_threads(opts.spawn) is None:
        counts = [n for n in counts if n > 1]  # a lone rank with torch's default threads: not counted
    over = [n for n in counts if n * threads > cpus]
    if not over:
        return []
    ranks_text = ", ".join(str(n) for n in over)
    products = ", ".join(str(n * threads) for n in over)
    fit = max(1, cpus // threads)
    where = ("ranks --spawn starts" if opts.spawn is not None else
             "program's ranks" if opts.ranks_by_program else "ranks")
    return [f"scaleprobe launch: warning: ranks={ranks_text} on this host x {threads} thread"
            f"{'s' if threads > 1 else ''} = {products} > {cpus} usable CPUs: the {where} share cores and their "
            f"times measure the contention, not the program's scaling, and models over ranks extrapolate it; on this "
            f"host give ranks up to {fit}"
            + (" (or fewer OMP_NUM_THREADS)" if threads > 1 else "")
            + ", or start the ranks on more hosts (--spawn 'srun -n {ranks}'). The runs are made anyway"]

