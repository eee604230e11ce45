"""Run a list of runs one after the other, each on its own fresh set of rank processes.

Skips runs a previous invocation completed, records every run's outcome in its launch.json, goes on
after a failed or timed-out run, and stops (resumably) at Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys

from runtime.config import Config
from runtime.launch_args import Options, child_flags, without_dry_run
from runtime.launch_recording import nothing_recorded, report_single_run, wrote_run_file
from runtime.launch_ranks import Member, Outcome, SignalInbox, free_port, run_members
from runtime.sweep_design import Run
from runtime.sweep_progress import Progress
from runtime.sweep_state import RunRecord, clear_attempt, is_complete, write_record
from runtime.sweep_values import substitute

# Variables that would make a rank believe it is someone else's rank: never inherited from our own
# environment (the launcher may itself run inside an sbatch script or a torchrun job).
_IDENTITY = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
             "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SCALEPROBE_LAUNCHER",
             "SCALEPROBE_NSYS_ACTIVE")


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
    })
    return env


def program_of(opts: Options, run: Run) -> list[str]:
    return [str(opts.script), *run.args]


def spawn_prefix(opts: Options, run: Run) -> list[str]:
    """`--spawn`'s command for this run: `{name}` replaced in each word as in the program's arguments."""
    if opts.spawn is None:
        return []
    return substitute(shlex.split(opts.spawn), run.texts, run.repetition, "--spawn argument")


def check_spawn(opts: Options, runs: list[Run]) -> None:
    """Refuse an unknown `{name}` in `--spawn` before any run starts."""
    for run in runs:
        spawn_prefix(opts, run)


def child_command(opts: Options, run: Run) -> list[str]:
    return [sys.executable, "-m", "runtime.launch", *child_flags(opts), "--", str(opts.script), *run.args]


def rank_command(opts: Options, run: Run) -> list[str]:
    """What starts the run's ranks: each local rank runs the child command; `--spawn`'s command
    (srun, mpiexec) runs it once, and each rank reads its rank from the scheduler."""
    return spawn_prefix(opts, run) + child_command(opts, run)


def members_for(opts: Options, run: Run, run_id: str) -> list[Member]:
    base = run_environment(opts, run, run_id)
    command = rank_command(opts, run)
    if opts.spawn is not None:
        return [Member(command, base, None)]
    n = run.ranks
    port = str(free_port())
    members = []
    for rank in range(n):
        env = dict(base)
        env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(n),
                    "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port, "SCALEPROBE_LAUNCHER": "launch"})
        members.append(Member(command, env, rank))
    return members


def describe(opts: Options, run: Run, command: list[str]) -> str:
    params = " ".join(f"{k}={v}" for k, v in run.params.items())
    return f"{run.directory}  [{params} rep={run.repetition}]  {shlex.join(command)}"


def dry_run(opts: Options, runs: list[Run], in_process_argv: list[str] | None = None, stream=None) -> int:
    """List each run with `done` or `run` and the command launch.json would record for it: the
    command that starts its ranks, or, for a run in this very process, the launcher itself
    (`in_process_argv`: this launcher's own arguments)."""
    stream = stream or sys.stdout
    todo = 0
    for run in runs:
        done = opts.sweeping and is_complete(run.directory, run.params, program_of(opts, run))
        todo += not done
        command = (rank_command(opts, run) if in_process_argv is None
                   else [sys.executable, "-m", "runtime.launch", *without_dry_run(in_process_argv)])
        print(f"{'done' if done else 'run '}  {describe(opts, run, command)}", file=stream)
    print(f"{todo} of {len(runs)} runs would run", file=stream)
    return 0


def execute(opts: Options, runs: list[Run], cfg: Config) -> int:
    """Run every run not completed before; exit status 0 only if every run completed."""
    # Between runs no rank is alive to forward a signal to: note it and stop before the next run.
    with SignalInbox() as between:
        return _execute(opts, runs, cfg, between)


def _execute(opts: Options, runs: list[Run], cfg: Config, between: SignalInbox) -> int:
    progress = Progress(total=len(runs)) if opts.sweeping else None
    interrupted: Outcome | None = None
    last_code = 0
    unrecorded = 0  # runs that ended ok without a run file
    for run in runs:
        if between.received:
            sig = between.received[0]
            name = signal.Signals(sig).name
            interrupted = Outcome("interrupted", 128 + sig, None, f"interrupted by {name}", 0.0, sig)
            break
        if opts.sweeping and is_complete(run.directory, run.params, program_of(opts, run)):
            assert progress is not None
            progress.skip()
            continue
        clear_attempt(run.directory)
        run_id = new_run_id()
        members = members_for(opts, run, run_id)
        record = RunRecord(experiment=opts.experiment, run_id=run_id, params=run.params,
                           repetition=run.repetition, command=members[0].command, program=program_of(opts, run))
        write_record(run.directory, record)
        outcome = run_members(members, run.directory, timeout=opts.timeout, grace=opts.grace)
        record.status, record.exit_code = outcome.status, outcome.exit_code
        record.failed_rank, record.error, record.wall_s = outcome.failed_rank, outcome.error, round(outcome.wall_s, 3)
        write_record(run.directory, record)
        last_code = outcome.exit_code
        recorded = wrote_run_file(run.directory)
        unrecorded += outcome.status == "ok" and not recorded
        if outcome.status == "failed" and not opts.sweeping:
            who = f"rank {outcome.failed_rank}" if outcome.failed_rank is not None else "the run"
            print(f"scaleprobe launch: {who} failed: {outcome.error}", file=sys.stderr)
        elif outcome.status == "timeout" and not opts.sweeping:
            print(f"scaleprobe launch: {outcome.error}", file=sys.stderr)
        if not opts.sweeping and outcome.status != "interrupted":
            report_single_run(opts, cfg, run.directory, recorded, outcome.status == "ok")
        if progress is not None:
            progress.record(str(run.directory), outcome.status,
                            (f"rank {outcome.failed_rank}: " if outcome.failed_rank is not None else "")
                            + (outcome.error or ""), outcome.wall_s)
        if outcome.status == "interrupted":
            interrupted = outcome
            break
    if progress is not None:
        print(progress.summary(interrupted.error if interrupted else None), file=sys.stderr)
        warning = nothing_recorded(cfg, opts, f"{unrecorded} of {progress.ok} runs") if unrecorded else None
        if warning is not None:
            print(warning, file=sys.stderr)
    if interrupted is not None:
        return interrupted.exit_code
    if progress is not None:
        return 1 if progress.failed else 0
    return last_code
