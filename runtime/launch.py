"""`python -m runtime.launch [options] script.py [args...]`: run a program with scaleprobe's runtime.

Which way it runs (see docs/launch.md):
- `--sweep`, `--sweep-file`, `--repeat`, `--nproc`, `--spawn`, `--timeout`: each run on fresh rank
  processes started by us, one run after another, recorded in `<run-dir>/launch.json`;
- started by srun, mpiexec or torchrun: this process is the rank its environment names;
- otherwise: one rank, in this process, like `python script.py`.
"""

from __future__ import annotations

import re
import sys

from runtime.environment import RankEnvironmentError, detect
from runtime.errors import ScaleprobeRuntimeError
from runtime.launch_args import Options, parse, unused_sweep_warnings
from runtime.launch_errors import LaunchError
from runtime.launch_recording import check_environment
from runtime.launch_toplevel import restore_program_limit
from runtime.sweep_design import Run, legacy_names, run_name
from runtime.sweep_values import MAX_INT
from runtime.sweep_state import check_folder, prepare_root


def _next_repetition(opts: Options, params: dict) -> int:
    """A plain run repeated by hand gets the next free repetition index rather than overwriting.
    Repetitions an older scaleprobe made of this point under its older names (`legacy_names`: the
    parameters in the order given, without the hash) count too, unless their record says they are
    another point's."""
    from runtime.sweep_state import read_record

    names = {run_name(params), *legacy_names(params)}
    pattern = re.compile("(" + "|".join(re.escape(n) for n in names) + r")_rep-(\d+)\Z")
    root = opts.out / opts.experiment
    taken = []
    for p in (root.iterdir() if root.is_dir() else ()):
        m = pattern.match(p.name)
        if m is None:
            continue
        if m.group(1) != run_name(params):  # an older name, which two points may share
            try:
                record = read_record(p)
            except LaunchError:
                record = None  # unreadable: counted, as it may be this point's
            if record is not None and record.params != params:
                continue
        if int(m.group(2)) < MAX_INT:  # no repetition a run header can hold: not a run of ours (review 58 F7)
            taken.append(int(m.group(2)))
    return max(taken) + 1 if taken else 0


def _claim_repetition(opts: Options, runs: list[Run]) -> list[Run]:
    """Make the run directory of the next free repetition, atomically: of launchers started at once
    on one --out (a job array), each gets a repetition of its own."""
    (run,) = runs
    while True:
        try:
            run.directory.mkdir()
            return [run]
        except FileExistsError:
            rep = run.repetition + 1
            run = opts.design.run(run.params, rep, run.directory.with_name(
                f"{run_name(run.params)}_rep-{rep}"), opts.args)
        except OSError as exc:
            raise LaunchError(f"--out {opts.out}: cannot create the run directory {run.directory}: "
                              f"{exc.strerror}") from None


def check_module(name: str) -> None:
    """Refuse `-m NAME` that `python -m NAME` run here could not find, before any run starts, without
    running any of the program's code (its packages' `__init__.py` are not imported here: the ranks
    import them). Only what the path finder can see is checked."""
    import importlib.machinery
    import importlib.util
    import os

    parts = name.split(".")  # identifiers: checked with the options
    cwd = os.getcwd()
    spec = importlib.machinery.PathFinder.find_spec(parts[0], [cwd, *sys.path[1:]])
    if spec is None:
        try:  # another finder (an editable install's) may know it: finding a top-level name runs nothing
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise LaunchError(f"-m {name}: no module named {parts[0]!r} in the working directory {cwd} or on "
                              "sys.path (run from the directory that holds it, or add that to PYTHONPATH)")
        return
    for i, part in enumerate(parts[1:], start=1):
        locations = spec.submodule_search_locations
        if locations is None:
            raise LaunchError(f"-m {name}: {'.'.join(parts[:i])} ({spec.origin}) is a module, not a package")
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), list(locations))
        if spec is None:
            raise LaunchError(f"-m {name}: no module named {'.'.join(parts[:i + 1])!r} in "
                              f"{', '.join(map(str, locations))}")
    if spec.submodule_search_locations is not None:
        found = importlib.machinery.PathFinder.find_spec(name + ".__main__", list(spec.submodule_search_locations))
        if found is None:
            raise LaunchError(f"-m {name}: {name} is a package without a __main__ module: name the module to "
                              f"run, as in -m {name}.train")


def _runs(opts: Options, nproc: int) -> list[Run]:
    if opts.sweeping:
        return opts.design.runs(opts.out, opts.experiment, opts.args, nproc)
    (params,) = opts.design.points(nproc)
    first = opts.repetition if opts.repetition is not None else _next_repetition(opts, params)
    return opts.design.runs(opts.out, opts.experiment, opts.args, nproc, first_repetition=first)


def _dispatch(opts: Options, argv: list[str]) -> int:
    from runtime import launch_modes

    cfg = check_environment()  # a bad SCALEPROBE_* value stops us here, not in every rank of every run
    if opts.child:
        return launch_modes.run_child(opts, argv)
    spawned = (opts.sweeping or opts.nproc is not None or opts.spawn is not None or opts.timeout is not None
               or opts.ranks_by_program)
    identity = detect()
    if identity.launcher in ("slurm", "mpi", "torchrun"):
        if not spawned:
            return launch_modes.run_scheduled(opts, identity, argv, cfg)
        if identity.world_size > 1:
            # Every one of the job's ranks would run the whole sweep.
            raise LaunchError(f"this process is rank {identity.rank} of {identity.world_size} "
                              f"({identity.launcher}), but a sweep, --nproc, --spawn or --timeout starts its own "
                              "ranks: run the launcher once, outside srun/mpiexec, e.g. with "
                              "--spawn 'srun -n {ranks}' (see docs/launch.md)")
    if opts.run_id is not None:
        # review 77 L3: it was accepted and did nothing; the runs the launcher makes get ids of their own
        raise LaunchError(f"--run-id {opts.run_id}: applies only to a launcher started as a rank by srun, mpiexec or "
                          "torchrun (without a sweep, --nproc, --spawn, --timeout or --ranks-by-program), where it is "
                          "the id the job's ranks share; every run this launcher makes itself gets an id of its own")
    runs = _runs(opts, opts.nproc or 1)  # a bad `{name}` is an error before any warning about it
    from runtime.sweep_checks import check_name_lengths, check_records, few_values_notes, non_numeric_warnings

    check_name_lengths(opts, runs)  # a single run and a dry run too (review 91 F3)

    for warning in [*unused_sweep_warnings(opts), *non_numeric_warnings(opts), *few_values_notes(opts)]:
        print(warning, file=sys.stderr)
    if opts.spawn is not None:
        from runtime.sweep_run import check_spawn

        check_spawn(opts, runs)
    if opts.sweeping:
        check_records(runs)  # every damaged launch record named before anything runs
    in_process = not (spawned or opts.nsys or runs[0].ranks != 1)
    if not in_process:
        from runtime.sweep_checks import oversubscription_warnings

        for warning in oversubscription_warnings(opts, runs):  # once, before any run (review 71 F2)
            print(warning, file=sys.stderr)
    # before a dry run too: its plan would not run (review 39: a misspelled script got a plan and exit 0)
    if opts.module is not None:
        check_module(opts.module)
    elif not opts.script.is_file():
        if str(opts.script) == "-m":
            hint = "; to run a module, give -m MODULE before any --, as in python -m runtime.launch -m pkg.train"
        elif (opts.script / "__main__.py").is_file():
            # `python dir` runs dir/__main__.py with dir first on sys.path, as the file itself would be run
            hint = (f"; it is a directory: give its {opts.script / '__main__.py'}, which runs as "
                    f"python {opts.script} would (or -m with its package's name)")
        else:
            hint = ""
        raise LaunchError(f"script {opts.script} does not exist or is not a file{hint}")
    if opts.cache_dir is not None:
        check_folder(opts.cache_dir, f"--cache-dir {opts.cache_dir}")  # unusable, it was silently no cache
    if opts.nsys:
        from runtime.launch_nsys import check_nvtx, nsys_executable

        nsys_executable()  # fail before any run starts (and a dry run: its plan would not run)
        check_nvtx()
    stale = None
    if not in_process or opts.dry_run:  # a run in this process says both itself, when it has run
        from runtime.launch_build import before_first_run

        from runtime.stderr_gone import TolerantStream

        lines, stale = before_first_run(opts, cfg)  # review 128 MED-2, MED-3: not after the last run
        said = TolerantStream(sys.stderr)  # a reader gone stops no sweep (review 95 MED-1)
        for line in lines:
            print(line, file=said)
    if opts.dry_run:
        from runtime.sweep_run import dry_run

        check_folder(opts.out / opts.experiment, f"--out {opts.out}")
        return dry_run(opts, runs, argv if in_process else None, recording=not cfg.disable)
    prepare_root(opts.out, opts.experiment)
    if not opts.sweeping and opts.repetition is None:
        runs = _claim_repetition(opts, runs)
    if not in_process:
        from runtime.sweep_run import execute

        return execute(opts, runs, cfg, stale)
    return launch_modes.run_plain(opts, runs[0], argv, cfg)


def main(argv: list[str] | None = None) -> int:
    """The launcher's exit status (also the `scaleprobe-launch` console script's)."""
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        # A limit the program set below the launcher's own depth comes back now that the stack is
        # shallow again (see launch_toplevel), for `python -m runtime.launch` and the console script.
        restore_program_limit()


def _main(argv: list[str]) -> int:
    try:
        opts = parse(argv)
        return _dispatch(opts, argv)
    except KeyboardInterrupt:
        # Only outside the program and outside a run: both handle Ctrl-C themselves.
        print("scaleprobe launch: interrupted", file=sys.stderr)
        return 130
    except (LaunchError, RankEnvironmentError) as exc:
        print(f"scaleprobe launch: error: {exc}", file=sys.stderr)
        return 2
    except ScaleprobeRuntimeError as exc:
        print(f"scaleprobe launch: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the instrumentor's own errors, when --instrument is on
        if type(exc).__module__.startswith("instrumentor"):
            print(f"scaleprobe launch: instrument: error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
