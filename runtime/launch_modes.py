"""The launcher's ways to run a program in this very process.

- child: a rank we (or our `--spawn` command) started; everything is in its environment already;
- scheduled: one rank of srun, mpiexec or torchrun, started without a parent launcher of ours;
- plain: `python -m runtime.launch main.py`, one rank, like `python main.py` with the runtime on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from runtime import launch_script
from runtime.config import Config
from runtime.environment import ProcessIdentity, detect, export_torch_env, job_run_id
from runtime.launch_args import Options, launcher_command
from runtime.launch_child import read_error, recorder_started, run_rank
from runtime.launch_errors import LaunchError
from runtime.launch_nsys import check_nvtx, nsys_executable, nsys_prefix, parse_rank_filter
from runtime.launch_recording import report_single_run, say, wrote_run_file
from runtime.sweep_design import Run, legacy_directories, run_name
from runtime.sweep_state import RunRecord, claim, clear_attempt, place, prepare_root, rank_lock, write_record

_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


def maybe_exec_nsys(opts: Options, rank: int, out_dir: Path, argv: list[str]) -> None:
    """Re-execute this rank under `nsys profile` when it is one of the ranks to profile."""
    if not opts.nsys or os.environ.get("SCALEPROBE_NSYS_ACTIVE"):
        return
    if opts.nsys_ranks is not None and rank not in parse_rank_filter(opts.nsys_ranks):
        return
    nsys = nsys_executable()
    check_nvtx()  # (under srun/mpiexec each rank checks: no launcher ran before them)
    os.environ["SCALEPROBE_NSYS_ACTIVE"] = "1"
    # Our regions appear as NVTX ranges on the nsys timeline.
    os.environ.setdefault("SCALEPROBE_NVTX", "1")
    out_dir.mkdir(parents=True, exist_ok=True)
    command = nsys_prefix(nsys, out_dir, rank, opts.nsys_args) + [*launcher_command(), *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(nsys, command)


PARENT_PID = "SCALEPROBE_PARENT_PID"  # the launcher's pid, given to the ranks it starts itself
LAUNCHER_PID = "SCALEPROBE_LAUNCHER_PID"  # the launcher's pid, given to every rank (--spawn's too)


def parent_gone(ppid: int, env: os._Environ | dict[str, str]) -> bool:
    """Whether the process that started this rank has died already (this rank's parent is `ppid`
    now). A rank the launcher started itself knows its parent's pid (PARENT_PID): any other parent
    means that it was reparented (to init, to PID 1 of a container, to a subreaper). A rank started
    by a `--spawn` command does not know its parent's pid: reparented to PID 1 is all it can see,
    and only when the launcher itself is not PID 1 (a container's entrypoint, whose ranks' parent
    may be PID 1 alive)."""
    parent = env.get(PARENT_PID, "")
    if parent.isdigit():
        return ppid != int(parent)
    return ppid == 1 and env.get(LAUNCHER_PID) != "1"


def die_with_parent() -> None:
    """Linux: have the kernel send this rank SIGTERM when the process that started it dies, even by
    SIGKILL (the launcher, or the `--spawn` command), so that no rank outlives its launcher and
    competes with a resumed sweep. SIGTERM unwinds the program (`SystemExit(143)`). Elsewhere,
    nothing: see docs/launch.md for the limits."""
    # Read once, and not passed on: the program's own processes (and the program that `--nsys`
    # starts below nsys) have another parent.
    parent = os.environ.pop(PARENT_PID, "")
    launcher = os.environ.pop(LAUNCHER_PID, "")
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if parent_gone(os.getppid(), {PARENT_PID: parent, LAUNCHER_PID: launcher}):
        # The parent died before the request was made: the kernel will not send it now.
        os.kill(os.getpid(), signal.SIGTERM)


def run_child(opts: Options, argv: list[str]) -> int:
    die_with_parent()
    identity = detect()
    if not opts.ranks_by_program:
        from runtime.sweep_world_size import check_world_size

        check_world_size(identity)  # --spawn's command started as many ranks as the run's `ranks`
    export_torch_env(identity)
    out = os.environ.get("SCALEPROBE_OUT")
    if out:
        maybe_exec_nsys(opts, identity.rank, Path(out), argv)
    # The parent launcher replaced the placeholders already: the arguments are the program's.
    return _run(opts, identity, opts.args)


def _run(opts: Options, identity: ProcessIdentity, args: list[str]) -> int:
    from runtime.runfile import load_encoder

    load_encoder()  # before run_rank makes SIGTERM raise SystemExit (review 72 F7)
    return run_rank(opts.script, args, identity.rank, instrument=opts.instrument,
                    project_root=opts.project_root, cache_dir=opts.cache_dir, module=opts.module)


def _record(opts: Options, run: Run, run_id: str, argv: list[str]) -> RunRecord:
    return RunRecord(experiment=opts.experiment, run_id=run_id, params=run.params, repetition=run.repetition,
                     command=[*launcher_command(), *argv],
                     program=[*opts.program_words(), *run.args])


def _set_run_env(opts: Options, run: Run, run_id: str) -> None:
    os.environ.update({
        "SCALEPROBE_OUT": str(run.directory.resolve()),
        "SCALEPROBE_EXPERIMENT": opts.experiment,
        "SCALEPROBE_RUN_ID": run_id,
        "SCALEPROBE_PARAMS": json.dumps(run.params),
        "SCALEPROBE_REPETITION": str(run.repetition),
    })


def _run_in_process(opts: Options, identity: ProcessIdentity, run: Run, record: RunRecord, start: float,
                    cfg: Config, shown: Path) -> tuple[int, int | None]:
    """The program, in this process: its exit status, and a stop signal that came meanwhile
    (`run_signals`: the program may have handled it and exited 0), or None. Where a signal ends it
    while its main thread is blocked in C (signal_watch: the program never unwinds to here), the
    run's record still ends, `interrupted`. `run.directory` is absolute (the program may change its
    working directory); `shown` is the run directory as the messages name it."""
    from runtime import run_signals, signal_watch

    def last_words(signum: int, blocked: bool) -> None:
        _finish(run, record, 128 + signum, identity.rank, time.monotonic() - start, signum)
        if not cfg.quiet:
            where = " while blocked outside Python" if blocked else ""
            say(f"scaleprobe launch: {record.error}{where}; run data in {shown}")

    launcher = os.getpid()

    def replaced() -> None:
        """The program replaces this process with os.exec*: nothing of the launcher runs after, so
        the run's record ends here (it said `running` for ever: review 52 F6). The new program's
        exit status is this process's, which no code of the launcher's sees: the record has none
        (`exit_code` null, `error` says why) where a run on a rank process the launcher started has
        it, `failed` with it when it is not 0 (review 91 F4: it said ok, 0, for a program that then
        exited 3, and "run data in" where no run file was written)."""
        if os.getpid() != launcher:
            return None  # a child the program forked
        _finish(run, record, 0, identity.rank, time.monotonic() - start, replaced=True)
        if not cfg.quiet:
            where = (f"run data in {shown}" if wrote_run_file(run.directory)
                     else f"run record in {shown} (no run file was written before it)")
            say(f"scaleprobe launch: the program replaced itself with os.exec*: the launcher's run ends here, "
                f"recorded {record.status} without an exit status (the new program's, which the launcher cannot "
                f"see, is this process's; its own run file, if it records, joins the run); {where}")
        return None

    remove = signal_watch.at_default_action(last_words) if identity.rank == 0 else (lambda: None)
    from runtime import exec_hook

    unhook = exec_hook.install(replaced) if identity.rank == 0 else (lambda: None)
    try:
        run_signals.start()
        mark = run_signals.mark()
        code = _run(opts, identity, run.args)
        return code, run_signals.since(mark)
    finally:
        remove()
        unhook()


#: launch.json's `error` of a run whose program replaced the launcher's process with os.exec*
REPLACED = ("the program replaced itself with os.exec*: the new program's exit status, the launcher's own, "
            "is not known to the launcher (a run on a rank process the launcher starts records it)")


def _finish(run: Run, record: RunRecord, code: int, rank: int, wall_s: float, signum: int | None = None,
            replaced: bool = False) -> None:
    from runtime import launch_child

    record.exit_code = code
    if signum is not None:
        record.status, record.error = "interrupted", f"interrupted by {signal.Signals(signum).name}"
    elif launch_script.received_sigterm:
        record.status, record.error = "interrupted", "interrupted by SIGTERM"
    elif code:
        record.status, record.failed_rank = "failed", rank
        record.error = read_error(run.directory, rank) or f"exited with code {code}"
    elif launch_child.run_file_problem is not None:
        # The program succeeded (its status stands) but its data did not reach the disk.
        record.status, record.failed_rank, record.error = "failed", rank, launch_child.run_file_problem
    else:
        record.status = "ok"
    if replaced and record.status == "ok":
        record.exit_code, record.error = None, REPLACED
    record.wall_s = round(wall_s, 3)
    try:
        write_record(run.directory, record)
    except LaunchError as exc:
        # The program's exit status stands; the record still says `running`, so a resumed sweep
        # makes this run again.
        say(f"scaleprobe launch: error: {exc} (the run's record still says 'running')")


def run_scheduled(opts: Options, identity: ProcessIdentity, argv: list[str], cfg: Config) -> int:
    start = time.monotonic()
    export_torch_env(identity)
    run_id = opts.run_id or job_run_id(os.environ)
    if run_id is None:
        if identity.world_size > 1:
            raise LaunchError(f"the {identity.world_size} ranks of this {identity.launcher} job cannot agree on a "
                              "run id: no torchrun, PMIx, Flux, SLURM, PBS or LSF id in the environment; "
                              "pass --run-id ID")
        run_id = os.urandom(6).hex()
    fixed_ranks = opts.design.fixed.get("ranks")
    if fixed_ranks is not None and fixed_ranks != identity.world_size:
        raise LaunchError(f"--param ranks={fixed_ranks} but the {identity.launcher} job has "
                          f"{identity.world_size} ranks")
    (params,) = opts.design.points(identity.world_size)
    repetition = opts.repetition or 0
    name = f"{run_name(params)}_rep-{repetition}_{_UNSAFE.sub('_', run_id)}"
    run = opts.design.run(params, repetition, opts.out / opts.experiment / name, opts.args)
    from runtime.sweep_checks import check_name_lengths

    check_name_lengths(opts, [run])
    if opts.dry_run:
        print(f"rank {identity.rank} of {identity.world_size} would run {run.directory}  "
              f"[{' '.join(f'{k}={v}' for k, v in params.items())} rep={repetition}]")
        return 0
    prepare_root(opts.out, opts.experiment)
    # absolute before the program runs: it may change its working directory (review 58 F5)
    shown, run = run.directory, dataclasses.replace(run, directory=Path(os.path.abspath(run.directory)))
    # held while this rank runs (review 72 F4, F6): another launch into this run directory at once, or
    # another process of this rank, is refused rather than deleting this one's live files
    held = claim(run.directory, rank_lock(identity.rank))
    if isinstance(held, str):
        raise LaunchError(f"{shown}: rank {identity.rank} is being run by another process ({held}): two launches "
                          f"of this point share the run id {run_id} (give each its own --repetition or --run-id), "
                          "or two processes took the same rank")
    if not os.environ.get("SCALEPROBE_NSYS_ACTIVE"):  # re-executed under nsys: cleared before that
        # Each rank clears only its own files of an earlier attempt: the others may be writing theirs.
        clear_attempt(run.directory, identity.rank)
    _set_run_env(opts, run, run_id)
    maybe_exec_nsys(opts, identity.rank, run.directory, [f"--run-id={run_id}", *argv])
    record = _record(opts, run, run_id, argv)
    if identity.rank == 0:
        write_record(run.directory, record)
    launcher = os.getpid()
    code, signum = _run_in_process(opts, identity, run, record, start, cfg, shown)
    if os.getpid() != launcher:
        return code  # a child the program forked, unwinding through here: the run is not its to end
    lost = _run_file_lost(identity.rank, shown)
    if identity.rank == 0:
        _finish(run, record, code, identity.rank, time.monotonic() - start, signum)
        # The other ranks may still be writing: rank 0 knows only whether it ran instrumented code.
        report_single_run(opts, cfg, shown, recorder_started(), record.status == "ok")
    held.release()
    return code or (1 if lost else 0)


def _run_file_lost(rank: int, shown: Path) -> str | None:
    """Where this rank's run file was deleted while the program ran, why, said on stderr and given
    to its record: the launch exits 1 rather than 0 (review 72 F4)."""
    from runtime import launch_child

    recorder = sys.modules.get("runtime.recorder")
    rec = recorder.get() if recorder is not None else None
    if not getattr(rec, "file_removed", False):
        return None
    lost = (f"rank {rank}'s run file {rec.path} was deleted while the program ran: its measurements are lost "
            f"(another launch into {shown}?)")
    say(f"scaleprobe launch: error: {lost}")
    launch_child.run_file_problem = launch_child.run_file_problem or lost
    return lost


def run_plain(opts: Options, run: Run, argv: list[str], cfg: Config) -> int:
    from runtime.launch_ranks import free_port  # subprocess and socket: not for every rank

    start = time.monotonic()
    run_id = os.urandom(6).hex()
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                       "SCALEPROBE_LAUNCHER": "launch"})
    legacy = legacy_directories(run, opts.repetition is not None)  # never when a fresh repetition was taken
    shown = place(run.directory, run.params, legacy)
    # absolute before the program runs, which may change its working directory: the record, its
    # files and the messages after it are still this run's (review 58 F5: they went to its new cwd)
    run = dataclasses.replace(run, directory=Path(os.path.abspath(shown)))
    held = claim(run.directory)  # held while the program runs; released when this process ends
    if isinstance(held, str):
        raise LaunchError(f"{shown} is being run by another launcher ({held}); "
                          "give another --repetition or wait for it")
    _set_run_env(opts, run, run_id)
    clear_attempt(run.directory)  # `--repetition K` into a run directory of an earlier attempt
    record = _record(opts, run, run_id, argv)
    write_record(run.directory, record)
    launcher = os.getpid()
    code, signum = _run_in_process(opts, detect(), run, record, start, cfg, shown)
    if os.getpid() != launcher:
        # A child the program forked that leaves by sys.exit() or falls off its end unwinds through
        # here: the run's record and messages are the launcher's (review 38: it wrote `ok` mid-run)
        return code
    _finish(run, record, code, 0, time.monotonic() - start, signum)
    held.release()
    if record.status == "failed" and not cfg.quiet:
        # With the "run data in" line (SCALEPROBE_QUIET leaves both out, and stderr is python's own):
        # the run's end, its error and the status passed through.
        say(f"scaleprobe launch: run failed (exit status {code}): {record.error}")
    report_single_run(opts, cfg, shown, wrote_run_file(run.directory), record.status == "ok")
    return code
