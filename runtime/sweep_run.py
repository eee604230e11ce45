"""Run a list of runs one after the other, each on its own fresh set of rank processes.

Skips runs a previous invocation completed, records every run's outcome in its launch.json, goes on
after a failed or timed-out run, and stops (resumably) at Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.config import Config, ConfigError, _flag
from runtime.launch_args import FIRST_FAILURES, Options, child_flags, launcher_command, without_dry_run
from runtime.launch_recording import nothing_recorded, report_single_run, wrote_run_file
from runtime.launch_ranks import Member, Outcome, SignalInbox, free_port, run_members
from runtime.launch_errors import LaunchError
from runtime.sweep_design import Run, legacy_directories
from runtime.sweep_progress import Progress
from runtime.sweep_files import (directory_identity, done_before_the_signal, ended_files, removed_while_running,
                                 unended_rank_files, without_end_record)
from runtime.sweep_state import (Claim, RunRecord, claim, clear_attempt, completion, place, recorded_nothing,
                                 write_record)
from runtime.sweep_values import substitute

if TYPE_CHECKING:
    from runtime.launch_build import StaleCheck

# Variables that would make a rank believe it is someone else's rank: never inherited from our own
# environment (the launcher may itself run inside an sbatch script or a torchrun job).
_IDENTITY = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
             "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SCALEPROBE_LAUNCHER",
             "SCALEPROBE_NSYS_ACTIVE", "SCALEPROBE_PARENT_PID", "SCALEPROBE_LAUNCHER_PID")


def new_run_id() -> str:
    return os.urandom(6).hex()


def run_environment(opts: Options, run: Run, run_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _IDENTITY}
    env.update({
        "SCALEPROBE_OUT": str(run.directory.resolve()),
        "SCALEPROBE_EXPERIMENT": opts.experiment,
        "SCALEPROBE_RUN_ID": run_id,
        "SCALEPROBE_PARAMS": json.dumps(run.params),
        "SCALEPROBE_REPETITION": str(run.repetition),
        "SCALEPROBE_LAUNCHER_PID": str(os.getpid()),  # see launch_modes.parent_gone
    })
    from runtime.launch_build import CHECKED_VARIABLE, checked

    if checked[0] is not None:  # the launcher says whether its SRC changed: not every rank of every run
        env[CHECKED_VARIABLE] = checked[0]
    return env


def program_of(opts: Options, run: Run) -> list[str]:
    return [*opts.program_words(), *run.args]


def spawn_prefix(opts: Options, run: Run) -> list[str]:
    """`--spawn`'s command for this run: `{name}` replaced in each word as in the program's arguments."""
    if opts.spawn is None:
        return []
    return substitute(shlex.split(opts.spawn), run.texts, run.repetition, "--spawn argument")


def check_spawn(opts: Options, runs: list[Run]) -> None:
    """Refuse an unknown `{name}` in `--spawn`, and a sweep over `ranks` it does not pass on, before
    any run starts."""
    from runtime.sweep_world_size import check_spawn_ranks

    for run in runs:
        spawn_prefix(opts, run)
    check_spawn_ranks(opts)


def child_command(opts: Options, run: Run) -> list[str]:
    # `-m module` ends the launcher's options itself; a script comes after `--`.
    program = opts.program_words() if opts.module is not None else ["--", str(opts.script)]
    return [*launcher_command(), *child_flags(opts), *program, *run.args]


def rank_command(opts: Options, run: Run) -> list[str]:
    """What starts the run's ranks: each local rank runs the child command; `--spawn`'s command
    (srun, mpiexec) runs it once, and each rank reads its rank from the scheduler."""
    return spawn_prefix(opts, run) + child_command(opts, run)


def members_for(opts: Options, run: Run, run_id: str) -> list[Member]:
    base = _with_threads(opts, run, run_environment(opts, run, run_id))
    command = rank_command(opts, run)
    if opts.spawn is not None:
        # the command (srun, mpiexec) inherits this environment and gives it to the ranks it starts
        return [Member(command, base, None)]
    if opts.ranks_by_program:
        # one process, which starts the ranks itself: it gets a free port for them, and no rank
        env = dict(base, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), SCALEPROBE_LAUNCHER="launch",
                   SCALEPROBE_PARENT_PID=str(os.getpid()))
        return [Member(command, env, None)]
    n = run.ranks
    port = str(free_port())
    members = []
    for rank in range(n):
        env = dict(base)
        env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(n),
                    "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port, "SCALEPROBE_LAUNCHER": "launch",
                    "SCALEPROBE_PARENT_PID": str(os.getpid())})
        members.append(Member(command, env, rank))
    return members


def _with_threads(opts: Options, run: Run, base: dict[str, str]) -> dict[str, str]:
    """`OMP_NUM_THREADS=1` where it is not set and a run of this launch has more than one rank, as
    torchrun does for more than one process per node: the ranks share the node's cores. In a sweep
    over ranks the ranks=1 runs too, so that a rank has the same threads at every point (review 39:
    ranks=1 with every core measured another regime than the ranks above it). For every way the
    launcher starts ranks: its own (`--nproc`, a sweep), the program's (`--ranks-by-program`, whose
    ranks inherit the process's environment) and `--spawn`'s, whose command inherits it (review 77
    M1: those two ran torch's thread per core while the oversubscription check counted 1). Not where
    `--spawn`'s command sets OMP_NUM_THREADS itself (`env OMP_NUM_THREADS=4 mpiexec ...`)."""
    from runtime.sweep_checks import spawn_threads

    n = run.ranks
    counts = {int(p["ranks"]) for p in opts.design.points(opts.nproc or 1)} | {n}
    if max(counts) > 1 and "OMP_NUM_THREADS" not in base and spawn_threads(opts.spawn) is None:
        base = dict(base, OMP_NUM_THREADS="1")
        _say_omp_once(n, counts)
    return base


_omp_said = [False]


def _say_omp_once(n: int, counts: set[int]) -> None:
    """torchrun says it too: the threads per rank are part of what a sweep over ranks measures."""
    if _omp_said[0] or _quiet():
        return
    _omp_said[0] = True
    if len(counts) == 1:
        said = f"in each of the {n} ranks"
    else:
        said = "in every rank of every run" + (
            f" (ranks=1 too, so that a rank has the same threads at every point up to ranks={max(counts)})"
            if 1 in counts else "")
    print(f"scaleprobe launch: OMP_NUM_THREADS=1 {said}, as torchrun sets it for more than one rank per node; "
          "set OMP_NUM_THREADS to choose the threads per rank", file=sys.stderr)


def _quiet() -> bool:
    """SCALEPROBE_QUIET as the runtime reads it (review 65 F4: `0`, `false` and `no` hid this line)."""
    try:
        return _flag(os.environ, "SCALEPROBE_QUIET")
    except ConfigError:  # the launcher refused such a value before any run started
        return False


def describe(opts: Options, run: Run, command: list[str]) -> str:
    params = " ".join(f"{k}={v}" for k, v in run.params.items())
    return f"{run.directory}  [{params} rep={run.repetition}]  {shlex.join(command)}"


def dry_run(opts: Options, runs: list[Run], in_process_argv: list[str] | None = None, stream=None,
            recording: bool = True) -> int:
    """List each run with `done` or `run` and the command launch.json would record for it: the
    command that starts its ranks, or, for a run in this very process, the launcher itself
    (`in_process_argv`: this launcher's own arguments)."""
    stream = stream or sys.stdout
    todo = 0
    for run in runs:
        if opts.sweeping:
            run = dataclasses.replace(run, directory=place(run.directory, run.params, legacy_directories(run, True)))
        done, problems = completion(run.directory, run.params, program_of(opts, run),
                                    opts.instrument and recording, rank_command(opts, run)
                                    ) if opts.sweeping else (False, [])
        todo += not done
        command = (rank_command(opts, run) if in_process_argv is None
                   else [*launcher_command(), *without_dry_run(in_process_argv)])
        print(f"{'done' if done else 'run '}  {describe(opts, run, command)}", file=stream)
        if problems:
            print(f"      ({_redo_reason(problems)})", file=stream)
    print(f"{todo} of {len(runs)} runs would run", file=stream)
    return 0


def execute(opts: Options, runs: list[Run], cfg: Config, stale: "StaleCheck | None" = None) -> int:
    """Run every run not completed before; exit status 0 only if every run completed. `stale`: the
    check of the entry's build, repeated after each run until it finds SRC edited (said once)."""
    # Between runs no rank is alive to forward a signal to: note it and stop before the next run.
    # A reader of the sweep's stderr that went away (a pipe's) ends its lines, not the sweep.
    from runtime.stderr_gone import tolerant_stderr

    with SignalInbox() as between, tolerant_stderr():
        return _execute(opts, runs, cfg, between, stale)


def _execute(opts: Options, runs: list[Run], cfg: Config, between: SignalInbox,
             stale: "StaleCheck | None" = None) -> int:
    progress = None
    if opts.sweeping:
        from runtime.sweep_checks import local_ranks

        # the time left weighs each run left by its ranks (review 71 F5)
        progress = Progress(total=len(runs), ranks=[r.ranks for r in runs], by_ranks=local_ranks(opts))
    interrupted: Outcome | None = None
    stopped: str | None = None  # why the sweep stopped early (the launcher cannot write its records)
    last_code = 0
    unrecorded = 0  # runs that ended ok without a run file
    skipped_empty = 0  # runs skipped as done before that wrote no run file then
    todo: list[Run] = list(runs)
    held_elsewhere: dict[Path, str] = {}  # runs another launcher holds: tried again at the end
    waiting = False
    in_a_row = 0  # runs that failed or timed out since the last one that completed
    failed_points: set[str] = set()  # the points of the runs that failed while none completed
    points = len({_point(r) for r in runs})
    while todo:
        if between.received:
            sig = between.received[0]
            name = signal.Signals(sig).name
            interrupted = Outcome("interrupted", 128 + sig, None, f"interrupted by {name}", 0.0, sig)
            break
        run = todo.pop(0)
        taken = _take(opts, run)
        if isinstance(taken, str):
            if not opts.sweeping:
                raise LaunchError(f"{run.directory} is being run by another launcher ({taken}); "
                                  "give another --repetition or wait for it")
            if run.directory not in held_elsewhere:
                held_elsewhere[run.directory] = taken
                print(f"scaleprobe launch: {run.directory} is being run by another launcher ({taken}): "
                      "coming back to it at the end", file=sys.stderr)
            todo.append(run)
            # Only runs held elsewhere are left: wait for them, a little at a time.
            if all(r.directory in held_elsewhere for r in todo):
                if not waiting:
                    waiting = True
                    print(f"scaleprobe launch: waiting for {len(todo)} run(s) another launcher is "
                          "running on this --out", file=sys.stderr)
                time.sleep(WAIT_S)
            continue
        claim, run = taken
        try:
            done, problems = completion(run.directory, run.params, program_of(opts, run),
                                        opts.instrument and not cfg.disable, rank_command(opts, run)
                                        ) if opts.sweeping else (False, [])
            if done:
                assert progress is not None
                progress.skip(run.ranks)
                skipped_empty += recorded_nothing(run.directory)
                continue
            if problems:
                print(f"scaleprobe launch: {run.directory}: {_redo_reason(problems)}", file=sys.stderr)
            code, outcome, recorded, stopped = _run_one(opts, run, cfg, progress)
        finally:
            claim.release()
        if outcome is None:  # the launcher could not record the run: nothing else can be recorded
            last_code = code
            break
        last_code = outcome.exit_code
        unrecorded += outcome.status == "ok" and not recorded
        if unrecorded == 1 and outcome.status == "ok" and not recorded and progress is not None and todo:
            # review 128 MED-3: said after the first such run, not only after the last; the sweep goes on
            warning = nothing_recorded(cfg, opts, f"the run {run.directory.name}")
            if warning is not None:
                print(f"{warning}; the runs after it will most likely write none either (the sweep goes on)",
                      file=sys.stderr)
        if stale is not None and (warning := stale.warning()) is not None:  # SRC edited while the sweep runs
            print(warning, file=sys.stderr)
        if outcome.status == "interrupted":
            interrupted = outcome
            break
        if outcome.signal is not None:  # it came as the run's ranks ended: the run stands, the sweep stops
            name = signal.Signals(outcome.signal).name
            interrupted = Outcome("interrupted", 128 + outcome.signal, None, f"interrupted by {name}", 0.0,
                                  outcome.signal)
            break
        if stopped is not None:
            break
        in_a_row = in_a_row + 1 if outcome.status in ("failed", "timeout") else 0
        if in_a_row:
            failed_points.add(_point(run))
        stopped = _too_many_failures(opts, in_a_row, progress, outcome, len(failed_points), points) if todo else None
        if stopped is not None:
            break
    if progress is not None:
        why = interrupted.error if interrupted else (f"stopped: {stopped}" if stopped else None)
        print(progress.summary(why), file=sys.stderr)
        warning = nothing_recorded(cfg, opts, f"{unrecorded} of {progress.ok} runs") if unrecorded else None
        if warning is not None:
            print(warning, file=sys.stderr)
        if skipped_empty and not cfg.disable:
            # review 58 F3: the resume said nothing, and the sweep had no data
            how = ("delete their launch.json" if opts.instrument else
                   "resume with --instrument or with the instrumented copy of the program, or delete their "
                   "launch.json")
            print(f"scaleprobe launch: warning: {skipped_empty} of the runs skipped as done before wrote no run "
                  f"file when they were made; to make them again, {how}", file=sys.stderr)
    elif stopped is not None:
        print(f"scaleprobe launch: error: {stopped}", file=sys.stderr)
    if interrupted is not None:
        return interrupted.exit_code
    if progress is not None:
        return 1 if progress.failed or stopped else 0
    return last_code


WAIT_S = 0.2


def _redo_reason(problems: list[str]) -> str:
    return f"recorded as completed, but {'; '.join(problems)}: making it again"


def _point(run: Run) -> str:
    return json.dumps(run.params, sort_keys=True, default=str)


def _too_many_failures(opts: Options, in_a_row: int, progress: Progress | None, last: Outcome,
                       failed_points: int = 0, points: int = 1) -> str | None:
    """Why the sweep stops after `in_a_row` runs failed or timed out, or None: at `--max-failures N`
    in a row; without it, when the sweep's first runs all failed (none completed, none was done
    before), at `FIRST_FAILURES` different points (or at every point of a smaller sweep, as soon as
    each has failed once): a mistyped option fails every point alike; never at `--max-failures 0`."""
    if opts.max_failures:
        if in_a_row >= opts.max_failures:
            return (f"{in_a_row} runs in a row failed (--max-failures {opts.max_failures}), the last with: "
                    f"{last.error}. Fix the cause first: a resume tries the failed runs again before the others "
                    "(or give a larger --max-failures)")
    elif opts.max_failures is None and in_a_row >= min(FIRST_FAILURES, points) and progress is not None \
            and progress.finished == in_a_row and failed_points >= min(FIRST_FAILURES, points):
        # at 3 points (or all there are, review 77 L4: a sweep of 2 points made a third run after both
        # had failed): one point of several that fails under --repeat 3 is data (review 22)
        return (f"the first {in_a_row} runs all failed, the last with: {last.error}. Fix the cause first (a resume "
                f"tries the failed runs again before the others), or give --max-failures 0 to run every point "
                f"whatever fails")
    return None


def _take(opts: Options, run: Run) -> tuple[Claim, Run] | str:
    """The run, in the directory that is its own, held by this launcher; or who holds it."""
    # A plain run without --repetition took a fresh repetition: never an older run's directory.
    legacy = legacy_directories(run, opts.sweeping or opts.repetition is not None)
    while True:
        directory = place(run.directory, run.params, legacy)
        held = claim(directory)
        if isinstance(held, str):
            return held
        if place(run.directory, run.params, legacy) == directory:  # still ours once held
            return held, dataclasses.replace(run, directory=directory)
        held.release()


def _run_one(opts: Options, run: Run, cfg: Config,
             progress: Progress | None) -> tuple[int, Outcome | None, bool, str | None]:
    """Run one run in its held directory: (exit code, outcome, wrote a run file, why to stop the
    sweep). The outcome is None when the run could not start because its record cannot be written."""
    clear_attempt(run.directory)
    run_id = new_run_id()
    members = members_for(opts, run, run_id)
    record = RunRecord(experiment=opts.experiment, run_id=run_id, params=run.params,
                       repetition=run.repetition, command=members[0].command, program=program_of(opts, run),
                       instrument=opts.instrument)
    try:
        write_record(run.directory, record)
    except LaunchError as exc:
        if progress is not None:
            progress.record(str(run.directory), "failed", str(exc), 0.0, run.ranks)
        return 2, None, False, str(exc)
    identity = directory_identity(run.directory)
    outcome = run_members(members, run.directory, timeout=opts.timeout, grace=opts.grace)
    if directory_identity(run.directory) != identity:
        outcome = removed_while_running(outcome)
    outcome = without_end_record(outcome, unended_rank_files(run.directory), run.directory)
    if not opts.ranks_by_program:
        outcome = done_before_the_signal(outcome, run.directory, run.ranks)
    record.files = ended_files(run.directory)
    record.status, record.exit_code = outcome.status, outcome.exit_code
    record.failed_rank, record.error, record.wall_s = outcome.failed_rank, outcome.error, round(outcome.wall_s, 3)
    stopped = None
    try:
        write_record(run.directory, record)
    except LaunchError as exc:
        # The record still says `running`: a resumed sweep makes this run again.
        stopped = f"{exc} (the run ended {outcome.status}; its record still says 'running')"
    recorded = wrote_run_file(run.directory)
    if outcome.status == "failed" and not opts.sweeping:
        who = ("the program (which started the ranks)" if opts.ranks_by_program
               else f"rank {outcome.failed_rank}" if outcome.failed_rank is not None else "the run")
        print(f"scaleprobe launch: {who} failed: {outcome.error}", file=sys.stderr)
    elif outcome.status == "timeout" and not opts.sweeping:
        print(f"scaleprobe launch: {outcome.error}", file=sys.stderr)
    if not opts.sweeping and outcome.status == "interrupted":
        # where the partial data is, which is what a user who pressed Ctrl-C wants to know (review 20)
        print(f"scaleprobe launch: {outcome.error}" + (f"; the data recorded until then is in {run.directory} "
                                                         "(modeler --include-incomplete uses it)" if recorded else ""),
              file=sys.stderr)
    elif not opts.sweeping:
        report_single_run(opts, cfg, run.directory, recorded, outcome.status == "ok")
    if progress is not None:
        status, error = outcome.status, outcome.error
        if stopped is not None and status == "ok":
            status, error = "failed", stopped
        progress.record(str(run.directory), status,
                        (f"rank {outcome.failed_rank}: " if outcome.failed_rank is not None else "")
                        + (error or ""), outcome.wall_s, run.ranks)
    return outcome.exit_code, outcome, recorded, stopped
