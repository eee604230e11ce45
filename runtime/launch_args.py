"""Command-line options of `python -m runtime.launch`."""

from __future__ import annotations

import argparse
import difflib
import math
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from runtime.launch_errors import LaunchError
from runtime.launch_nsys import parse_rank_filter
from runtime.sweep_design import Design, check_ranks, load_toml
from runtime.sweep_values import check_int, parse_assignment, placeholders

#: without --max-failures, a sweep whose first this many runs all failed stops (a mistyped option)
FIRST_FAILURES = 3
#: the most runs one sweep may have (points x repetitions): its run list is built before it starts
MAX_RUNS = 100_000


def _prog() -> str:
    """As it was started: the console script names itself (review 40: it said python -m runtime.launch)."""
    return "scaleprobe-launch" if os.path.basename(sys.argv[0] or "") == "scaleprobe-launch" else "python -m runtime.launch"


USAGE = f"{_prog()} [options] [--] script.py [args...] | [options] -m module [args...]"


class _Help(argparse.HelpFormatter):
    """Lines broken at spaces only: `--trace=...` in a default was cut after its `--` (review 40)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


@dataclass
class Options:
    script: Path | None  # None when a module runs (`-m module`)
    args: list[str]
    nproc: int | None
    design: Design
    sweeping: bool
    out: Path
    experiment: str
    timeout: float | None
    grace: float
    dry_run: bool
    instrument: bool
    project_root: Path | None
    cache_dir: Path | None
    nsys: bool
    nsys_ranks: str | None
    nsys_args: str | None
    spawn: str | None
    run_id: str | None
    repetition: int | None
    child: bool
    max_failures: int | None = None
    #: the program starts its own ranks (torch.multiprocessing.spawn): one process per run
    ranks_by_program: bool = False
    module: str | None = None  # `-m module`: run it as `python -m module` does
    # swept parameter -> the option that swept it, as typed (`--sweep a=1,2`, `--sweep-file d.toml`)
    sweep_origin: dict[str, str] = field(default_factory=dict)
    # every parameter, swept or fixed -> where it was given (`--sweep a=1,2`, `--param b=3`, `sweep
    # file d.toml: params.b`), for errors that name it
    param_origin: dict[str, str] = field(default_factory=dict)

    def program_words(self) -> list[str]:
        """What runs, as it is written on the command line: the script, or `-m` and the module."""
        return ["-m", self.module] if self.module is not None else [str(self.script)]

    def program_label(self) -> str:
        return f"-m {self.module}" if self.module is not None else str(self.script)


def path_arg(text: str) -> Path:
    """An argparse type: a path, never the empty string, which `Path` takes for the current directory
    (review 40: `--out "$OUT"` with OUT unset wrote the runs into the working directory). A leading
    `~` is the home directory, as in SCALEPROBE_OUT, also where the shell left it (`--out '~/runs'`,
    `--out=~/runs`): review 58 F10, it made a folder named `~`."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?)")
    return Path(os.path.expanduser(text))


class _TypedInt(int):
    typed: str


class _TypedFloat(float):
    typed: str


def _as_typed(kind: type) -> object:
    """An argparse type: the number, which keeps the text typed, for the messages about it (review 77
    L8: `--timeout 0` was said as `--timeout 0.0`). Named as the plain type in argparse's own error."""
    made = _TypedInt if kind is int else _TypedFloat

    def convert(text: str):
        value = made(text)
        value.typed = text
        return value

    convert.__name__ = kind.__name__
    return convert


def _typed(value: object) -> str:
    """A number option's value as typed."""
    return getattr(value, "typed", str(value))


def _plain(value):
    """The number itself, without the text it was typed as."""
    if value is None:
        return None
    return int(value) if isinstance(value, int) else float(value)


#: options of the other commands that are given to the launcher by mistake, and what it has instead
_OTHERS = {"--repetitions": "--repeat N (modeler's --repetitions says how the runs are combined)",
           "--reps": "--repeat N", "--repeats": "--repeat N"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """argparse's error, with the launcher's own option named where an unknown one is like it
        (review 62 F7: `--repetitions 3`, modeler fit's option, failed with a bare `unrecognized
        arguments: --repetitions`)."""
        if message.startswith("unrecognized arguments:"):
            known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
            hints = []
            for token in message.split(":", 1)[1].split():
                name = token.split("=", 1)[0]
                if not name.startswith("--"):
                    continue
                close = _OTHERS.get(name) or next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.75)), None)
                if close:
                    hints.append(f"{name}: did you mean {close}?")
            if hints:
                message += "; " + "; ".join(hints)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=_prog(), usage=USAGE, allow_abbrev=False, formatter_class=_Help,
        description="Run a Python program with scaleprobe's runtime on one or many ranks, "
                    "once or over a parameter sweep. See docs/launch.md.")
    from runtime import __version__

    p.add_argument("--version", action="version", version=f"scaleprobe-launch (scaleprobe) {__version__}")
    run = p.add_argument_group("ranks")
    run.add_argument("--nproc", type=_as_typed(int), metavar="N",
                     help="start N local ranks (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, "
                          "MASTER_PORT set, and OMP_NUM_THREADS=1 above one rank where it is not set)")
    run.add_argument("--spawn", metavar="CMD",
                     help="start each run's ranks with this command instead, e.g. 'srun -n {ranks}'")
    run.add_argument("--timeout", type=_as_typed(float), metavar="S", help="stop a run after S seconds (status timeout)")
    run.add_argument("--ranks-by-program", action="store_true",
                     help="the program starts its own ranks (torch.multiprocessing.spawn): each run is one "
                          "process, given its number of ranks as {ranks} in its arguments")
    run.add_argument("--max-failures", type=_as_typed(int), metavar="N",
                     help="stop a sweep (only) after N runs in a row failed or timed out (a resumed sweep runs them "
                          f"again); default: stop when its first runs all failed, at {FIRST_FAILURES} different points "
                          "(or every point of a smaller sweep); 0: never stop")
    run.add_argument("--grace", type=_as_typed(float), default=10.0, metavar="S",
                     help="seconds between SIGTERM and SIGKILL when ranks are stopped (default 10)")
    exp = p.add_argument_group("parameters and sweeps")
    exp.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="a modeling parameter recorded in the run header (repeatable)")
    exp.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2,...",
                     help="sweep a parameter over values; several --sweep give the cross product; "
                          "{NAME} in the program's arguments is replaced")
    exp.add_argument("--sweep-file", type=path_arg, metavar="TOML", help="read the sweep design from a TOML file")
    exp.add_argument("--repeat", type=_as_typed(int), metavar="N", help="run every point N times")
    exp.add_argument("--out", type=path_arg, default=Path("runs"), metavar="DIR",
                     help="root of the run directories (default runs)")
    exp.add_argument("--experiment", metavar="NAME", help="experiment name (default: the script's name)")
    exp.add_argument("--dry-run", action="store_true",
                     help="list each run and the command that would start it; run nothing")
    sched = p.add_argument_group("under srun, mpiexec or torchrun")
    sched.add_argument("--run-id", metavar="ID",
                       help="run id shared by all ranks when the job id cannot be read from the environment "
                            "(an error where the launcher makes the runs itself)")
    sched.add_argument("--repetition", type=_as_typed(int), metavar="K",
                       help="repetition index of this run, not with a sweep (default: the next free index for a "
                            "plain local run, 0 under srun, mpiexec or torchrun)")
    tools = p.add_argument_group("instrumentation and profiling")
    tools.add_argument("--instrument", action="store_true",
                       help="instrument the project on the fly while importing it (no build step)")
    tools.add_argument("--project-root", type=path_arg, metavar="DIR",
                       help="what --instrument instruments (default: the script's directory; with -m, the "
                            "directory that holds the module's top-level package)")
    tools.add_argument("--cache-dir", type=path_arg, metavar="DIR",
                       help="cache of --instrument's rewritten modules (default: $XDG_CACHE_HOME/scaleprobe/"
                            "instrument, i.e. ~/.cache/scaleprobe/instrument)")
    tools.add_argument("--nsys", action="store_true", help="run ranks under `nsys profile`")
    tools.add_argument("--nsys-ranks", metavar="FILTER",
                       help="ranks to profile with --nsys: 0,1 or 0-3 or ::8 (default: all)")
    tools.add_argument("--nsys-args", metavar="ARGS",
                       help="arguments for `nsys profile` (default '--trace=cuda,nvtx,osrt --force-overwrite=true')")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a module as `python -m MODULE` does (its package's relative imports work); "
                        "the arguments after MODULE are the program's")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def split_argv(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """Launcher options | script and its arguments, kept verbatim (a `--` after the script is the
    program's, as with `python script.py -- x`). `-m MODULE` (or `-mMODULE`) ends the launcher's
    options as `python -m` does: it stays with them, and what follows it is the program's."""
    takes_value = {s for a in parser._actions for s in a.option_strings if a.nargs != 0}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv[:i], argv[i + 1:]
        if not token.startswith("-") or token == "-":
            return argv[:i], argv[i:]
        if token == "-m":
            return argv[:i + 2], argv[i + 2:]
        if token.startswith("-m") and not token.startswith("--"):
            return argv[:i + 1], argv[i + 1:]
        if token in takes_value:
            i += 1
        i += 1
    return argv, []


# the options a PYTHON* variable gives as well: (the variable, whether its value is a level as
# PYTHONOPTIMIZE=2's, rather than on when not empty)
_ENVIRONMENT_GIVES = {"O": ("PYTHONOPTIMIZE", True), "v": ("PYTHONVERBOSE", True), "d": ("PYTHONDEBUG", True),
                      "B": ("PYTHONDONTWRITEBYTECODE", True), "s": ("PYTHONNOUSERSITE", True),
                      "P": ("PYTHONSAFEPATH", False)}


def _environment_level(var: str, counted: bool) -> int:
    """How many times the environment gives an option, as Python reads `var` (empty: unset)."""
    text = os.environ.get(var, "")
    if not text or not counted:
        return 1 if text else 0
    try:
        level = int(text)
    except ValueError:
        return 1  # PYTHONOPTIMIZE=yes is -O once
    return level if level >= 0 else 1


def interpreter_options() -> list[str]:
    """The options this interpreter was started with (`-O`, `-X dev`, `-W error::...`, `-B`, ...),
    as `multiprocessing` passes them to the processes it starts, and every other `-X` option too
    (`-X int_max_str_digits=...`, `-X pycache_prefix=...`, which that list leaves out); [] where this
    Python lacks the private helper. What the environment the ranks inherit gives already
    (PYTHONOPTIMIZE, PYTHONDEVMODE, PYTHONWARNINGS's filters, ...) is left to it: the same setting,
    and no option that a command line copied from launch.json would give twice."""
    try:
        import subprocess  # not at import: every rank imports this module

        options = list(subprocess._args_from_interpreter_flags())  # type: ignore[attr-defined]
    except (ImportError, AttributeError, ValueError):
        return []
    if not sys.flags.ignore_environment:
        for word in list(options):
            letters = word[1:]
            if word.startswith("-") and letters[:1] in _ENVIRONMENT_GIVES and letters == letters[0] * len(letters) \
                    and _environment_level(*_ENVIRONMENT_GIVES[letters[0]]) >= len(letters):
                options.remove(word)
        for inherited in filter(None, os.environ.get("PYTHONWARNINGS", "").split(",")):
            if f"-W{inherited}" in options:
                options.remove(f"-W{inherited}")
        if os.environ.get("PYTHONDEVMODE"):
            for i in range(len(options) - 1):
                if options[i:i + 2] == ["-X", "dev"]:
                    del options[i:i + 2]
                    break
    given = {options[i + 1].split("=", 1)[0] for i, word in enumerate(options[:-1]) if word == "-X"}
    given.add("dev")  # dev mode is -X dev above, or PYTHONDEVMODE's
    for name, value in getattr(sys, "_xoptions", {}).items():
        if name not in given:
            options += ["-X", name if value is True else f"{name}={value}"]
    return options


def launcher_command() -> list[str]:
    """`python -m runtime.launch` with this interpreter and its options: what the launcher starts its
    ranks with (review 65 F1: `python -O -m runtime.launch --nproc 2` ran the ranks without -O, with
    the asserts on, unlike a run in the launcher's own process), and what launch.json records."""
    return [sys.executable, *interpreter_options(), "-m", "runtime.launch"]


def without_dry_run(argv: list[str]) -> list[str]:
    """This launcher's arguments less its own `--dry-run` (the program's arguments are kept as given)."""
    ours, _ = split_argv(build_parser(), argv)
    return [a for a in argv[:len(ours)] if a != "--dry-run"] + argv[len(ours):]


def parse(argv: list[str]) -> Options:
    parser = build_parser()
    ours, program = split_argv(parser, argv)
    ns = parser.parse_args(ours)
    shown = {name: _typed(getattr(ns, name)) for name in ("nproc", "timeout", "max_failures", "grace", "repeat",
                                                          "repetition")}
    for name in shown:
        setattr(ns, name, _plain(getattr(ns, name)))
    ns.shown = shown
    if ns.module is not None:
        if not ns.module or ns.module.startswith("-"):
            raise LaunchError(f"-m {ns.module!r}: give the module to run, as in -m pkg.train")
        if not all(part.isidentifier() for part in ns.module.split(".")):
            raise LaunchError(f"-m {ns.module!r}: not a module name (a dotted name such as pkg.train, "
                              "not a file; a file runs without -m)")
        script, args = None, program
    elif not program:
        parser.error("no script given: " + USAGE)
    elif not program[0]:
        parser.error("the script is an empty path (an unset shell variable?)")
    else:
        script, args = Path(program[0]), program[1:]

    design = load_toml(ns.sweep_file) if ns.sweep_file else Design()
    origin = {name: f"--sweep-file {ns.sweep_file}" for name in design.sweep}
    given: dict[str, str] = {}  # parameter -> the option that defined it on the command line
    for option, texts in (("--sweep", ns.sweep), ("--param", ns.param)):
        for text in texts:
            name, spelled = parse_assignment(text, option)
            if name == "ranks":
                check_ranks(spelled, f"{option} {text!r}")
            if name in given:
                # The command line overrides the sweep file, never itself: a copy-paste slip
                # would silently shrink the design.
                raise LaunchError(f"parameter {name!r} is defined twice: {given[name]} and {option} {text}; "
                                  "give it once")
            given[name] = f"{option} {text}"
            if option == "--sweep":
                design.set_sweep(name, spelled)
                origin[name] = f"--sweep {text}"
            elif len(spelled) != 1:
                raise LaunchError(f"--param {text!r}: one value only; use --sweep for several")
            else:
                design.set_fixed(name, spelled)
    if ns.repeat is not None:
        if ns.repeat < 1:
            raise LaunchError(f"--repeat {shown['repeat']}: must be at least 1")
        design.repeat = ns.repeat
    _check_size(design, ns)
    if ns.nproc is not None and ns.nproc < 1:
        raise LaunchError(f"--nproc {shown['nproc']}: must be at least 1")
    if ns.nproc is not None:
        check_int(ns.nproc, f"--nproc {shown['nproc']}")  # it is the parameter `ranks` of every run header
    if ns.nproc is not None and ("ranks" in design.sweep or "ranks" in design.fixed):
        raise LaunchError(f"--nproc {shown['nproc']} and the parameter ranks both set the number of ranks: give one")
    if ns.timeout is not None and not (0 < ns.timeout < math.inf):
        raise LaunchError(f"--timeout {shown['timeout']}: must be a positive finite number of seconds")
    if not (0 <= ns.grace < math.inf):
        raise LaunchError(f"--grace {shown['grace']}: must be a finite number of seconds, not negative")
    if ns.max_failures is not None and ns.max_failures < 0:
        raise LaunchError(f"--max-failures {shown['max_failures']}: must be at least 1 (or 0: never stop)")
    if ns.nsys_ranks is not None:
        parse_rank_filter(ns.nsys_ranks)
        if not ns.nsys:
            raise LaunchError("--nsys-ranks needs --nsys")
    # review 40: these did nothing without the option they belong to, and said nothing
    if ns.nsys_args is not None and not ns.nsys:
        raise LaunchError("--nsys-args needs --nsys")
    for option, value in (("--project-root", ns.project_root), ("--cache-dir", ns.cache_dir)):
        if value is not None and not ns.instrument:
            raise LaunchError(f"{option} needs --instrument (a built tree is run as it is)")
    if ns.project_root is not None:
        from runtime.launch_child import entry_outside_root

        # before any run starts (and a dry run: its plan would not run)
        problem = entry_outside_root(script, ns.module, ns.project_root)
        if problem is not None:
            raise LaunchError(problem)
    if ns.experiment is not None:
        experiment, where = ns.experiment, f"--experiment {ns.experiment!r}"
    elif design.experiment:
        experiment, where = design.experiment, f"sweep file {ns.sweep_file}: experiment {design.experiment!r}"
    else:
        experiment = ns.module if script is None else _script_name(script)
        where = f"experiment {experiment!r} (the {'module' if script is None else 'script'}'s name; give --experiment)"
    if not experiment or "/" in experiment or experiment in (".", "..") \
            or any(ord(c) < 32 or ord(c) == 127 for c in experiment):  # a newline (review 40); not a non-UTF-8 byte
        raise LaunchError(f"{where}: must be a plain directory name")
    if experiment.startswith("."):
        # a hidden folder, which `modeler fit <out>` never reads
        raise LaunchError(f"{where}: must not start with '.' (modeler fit skips hidden folders)")
    _check_no_placeholders(design, [(f"--out {str(ns.out)!r}", str(ns.out)), (where, experiment)])
    sweeping = bool(ns.sweep or ns.sweep_file or ns.repeat is not None)
    if ns.repetition is not None:
        if ns.repetition < 0:
            raise LaunchError(f"--repetition {shown['repetition']}: must not be negative")
        check_int(ns.repetition, f"--repetition {shown['repetition']}")
        if sweeping:
            design_option = (f"--sweep {ns.sweep[0]}" if ns.sweep else f"--sweep-file {ns.sweep_file}"
                             if ns.sweep_file else f"--repeat {shown['repeat']}")
            raise LaunchError(f"--repetition {shown['repetition']} and {design_option} exclude each other: a sweep "
                              "numbers its repetitions 0 to N-1 itself (--repeat N); --repetition is for one run")
    if ns.max_failures is not None and not sweeping:
        # review 77 L3: it was accepted and did nothing
        raise LaunchError(f"--max-failures {shown['max_failures']} applies to a sweep (--sweep, --sweep-file or "
                          "--repeat), which it stops after that many failed runs in a row; a single run has no runs "
                          "after it to stop")
    if ns.ranks_by_program and (ns.spawn is not None or ns.nproc is not None):
        raise LaunchError(f"--ranks-by-program and {'--spawn' if ns.spawn is not None else '--nproc'} exclude each "
                          "other: the program starts the ranks (sweep or --param ranks=N, and pass {ranks} to it)")
    if ns.spawn is not None and ns.nproc is not None:
        raise LaunchError("--spawn and --nproc exclude each other: --spawn's command starts the ranks")
    if ns.spawn is not None and not _words("--spawn", ns.spawn):
        raise LaunchError("--spawn '': give the command that starts the ranks, e.g. 'srun -n {ranks}'")
    if ns.nsys_args is not None:
        _words("--nsys-args", ns.nsys_args)
    return Options(
        script=script, args=args, nproc=ns.nproc, design=design, sweeping=sweeping, out=ns.out,
        experiment=experiment, timeout=ns.timeout, grace=ns.grace, dry_run=ns.dry_run,
        instrument=ns.instrument, project_root=ns.project_root, cache_dir=ns.cache_dir, nsys=ns.nsys,
        nsys_ranks=ns.nsys_ranks, nsys_args=ns.nsys_args, spawn=ns.spawn, run_id=ns.run_id,
        repetition=ns.repetition, child=ns.child, max_failures=ns.max_failures, module=ns.module,
        ranks_by_program=ns.ranks_by_program,
        sweep_origin={name: origin[name] for name in design.sweep if name in origin},
        param_origin={**{name: f"sweep file {ns.sweep_file}: sweep.{name}" for name in design.sweep},
                      **{name: f"sweep file {ns.sweep_file}: params.{name}" for name in design.fixed}, **given})


def _script_name(script: Path) -> str:
    """The default experiment: the script's name, or for a package's `__main__.py` (what `python dir`
    runs) the name of its directory."""
    if script.name == "__main__.py":
        directory = Path(os.path.abspath(script)).parent.name
        if directory:
            return directory
    return script.stem


def _check_no_placeholders(design: Design, options: list[tuple[str, str]]) -> None:
    """A parameter's `{name}` in `--out` or the experiment's name is an error: it would stay as it is,
    the same folder for every point (review 58: `runs/{n}` made a folder named `{n}`, saying nothing),
    and each point's runs have a folder of their own under them already."""
    names = {*design.sweep, *design.fixed, "ranks", "repetition"}
    for where, text in options:
        named = [name for name in placeholders(text) if name in names]
        if named:
            name = named[0]
            example = {"ranks": "ranks-1_rep-0, ranks-2_rep-0", "repetition": "ranks-1_rep-0, ranks-1_rep-1"}.get(
                name, f"ranks-1_{name}-1_rep-0, ranks-1_{name}-2_rep-0")
            raise LaunchError(f"{where}: {{{name}}} is filled in the program's arguments only; the runs of each "
                              f"point get a folder of their own under <out>/<experiment> already ({example})")


def _check_size(design: Design, ns: argparse.Namespace) -> None:
    """A design of more than MAX_RUNS runs is refused before its run list is built (review 58 F12:
    `--repeat 10000000` grew the launcher's memory by 90 MB/s for minutes, saying nothing)."""
    points = 1
    for values in design.sweep.values():
        points *= len(values)
    total = points * design.repeat
    if total <= MAX_RUNS:
        return
    if ns.repeat is not None:
        repeat = f"--repeat {getattr(ns, 'shown', {}).get('repeat', ns.repeat)}"
    elif design.repeat > 1:
        repeat = f"sweep file {ns.sweep_file}: repeat = {design.repeat}"
    else:
        repeat = "1 repetition"
    raise LaunchError(f"{total} runs ({points} point{'s' if points > 1 else ''} x {repeat}): a sweep may have at "
                      f"most {MAX_RUNS} runs; give fewer values or repetitions, or split it into several sweeps "
                      "(each with its own --experiment or --out)")


def _words(option: str, text: str) -> list[str]:
    """A command line given as one string, split as a shell would; bad quoting names the option."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise LaunchError(f"{option} {text!r}: {exc}") from None


def child_flags(opts: Options) -> list[str]:
    """The options a rank process started by us needs (everything else is in its environment)."""
    # Each value joined to its option with `=`: a value that starts with '-' (`--nsys-args=--trace=cuda`)
    # would otherwise read as an option of its own and fail the rank's argparse.
    flags = ["--child"]
    if opts.ranks_by_program:
        flags.append("--ranks-by-program")  # one process, not a rank: no world size to check (sweep_world_size)
    if opts.instrument:
        flags.append("--instrument")
        if opts.project_root is not None:
            # absolute as given, not resolved: the ranks name the modules as this process would
            # (relative to the root as given, review 79 F4)
            flags.append(f"--project-root={os.path.abspath(opts.project_root)}")
        if opts.cache_dir is not None:
            flags.append(f"--cache-dir={opts.cache_dir.resolve()}")
    if opts.nsys:
        # Each rank re-executes itself under nsys, so local and srun/mpiexec ranks work alike.
        flags.append("--nsys")
        if opts.nsys_ranks is not None:
            flags.append(f"--nsys-ranks={opts.nsys_ranks}")
        if opts.nsys_args is not None:
            flags.append(f"--nsys-args={opts.nsys_args}")
    return flags



# Names people give the number of ranks: a sweep over one of them is most likely meant as `ranks`.
_RANKS_ALIASES = {"nproc", "nprocs", "np", "n", "world_size", "worldsize", "world", "nranks", "n_ranks",
                  "num_ranks", "numranks", "gpus", "ngpus", "num_gpus", "procs", "nodes", "tasks", "ntasks"}


def unused_sweep_warnings(opts: Options) -> list[str]:
    """A swept parameter (other than `ranks`, which sets the number of ranks: a `--spawn` without
    `{ranks}` is an error, sweep_world_size) that no `{name}` of the program's arguments or of
    `--spawn` names: every value of it runs the same command. Not an error: the program may read it
    from SCALEPROBE_PARAMS."""
    from runtime.sweep_values import placeholders
    import difflib

    used = {name for arg in [*opts.args, opts.spawn or ""] for name in placeholders(arg)}
    warnings = []
    for name, values in opts.design.sweep.items():
        if name == "ranks" and opts.ranks_by_program and name not in used and len(values) > 1:
            warnings.append("scaleprobe launch: warning: --ranks-by-program: no {ranks} in the program's arguments, "
                            "so every number of ranks runs the same command (the program sees it only in "
                            "SCALEPROBE_PARAMS)")
        if name == "ranks" or name in used or len(values) < 2:
            continue
        where = opts.sweep_origin.get(name, "--sweep")
        text = (f"scaleprobe launch: warning: {where}: no {{{name}}} in the program's arguments"
                + (" or --spawn" if opts.spawn is not None else "")
                + f", so every value of {name!r} runs the same command (the program sees it only in "
                  "SCALEPROBE_PARAMS)")
        lowered = name.lower()
        if lowered in _RANKS_ALIASES or difflib.get_close_matches(lowered, ["ranks"], n=1, cutoff=0.6):
            text += "; did you mean ranks, the number of ranks of each run?"
        else:
            close = difflib.get_close_matches(name, sorted(used - {"ranks", "repetition"} - set(opts.design.sweep)),
                                              n=1, cutoff=0.6)
            text += f"; did you mean {{{close[0]}}}?" if close else f"; add {{{name}}} where the program takes it"
        warnings.append(text)
    return warnings
