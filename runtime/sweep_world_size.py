"""Whether the ranks a `--spawn` command starts are as many as the run's parameter `ranks`.

The run's directory, its headers and the modeler's points all say `ranks=N`; a `--spawn` command that
starts another number of ranks (`srun -n 2` at every point of `--sweep ranks=1,2,4`) made every run
with the same ranks under three labels, and the modeler fitted a model over `ranks` anyway (review
72 F2). Two checks: before anything runs, a sweep over `ranks` whose `--spawn` has no `{ranks}` is
an error; and each rank the launcher's runs start compares its world size with the run's `ranks`
and stops (exit 2, its error file naming both) where they differ.
"""

from __future__ import annotations

import json
import os

from runtime.environment import ProcessIdentity
from runtime.launch_args import Options
from runtime.launch_errors import LaunchError
from runtime.sweep_values import placeholders


def check_spawn_ranks(opts: Options) -> None:
    """A sweep over `ranks` (two values or more) whose `--spawn` command never says `{ranks}`."""
    values = opts.design.sweep.get("ranks", [])
    if opts.spawn is None or len(values) < 2 or "ranks" in placeholders(opts.spawn):
        return
    where = opts.sweep_origin.get("ranks", "--sweep ranks")
    raise LaunchError(f"{where} sweeps the number of ranks, but --spawn {opts.spawn!r} has no {{ranks}}: every run "
                      "would start the same ranks; write {ranks} where the command takes the number of ranks, "
                      "e.g. --spawn 'srun -n {ranks}'")


def check_world_size(identity: ProcessIdentity) -> None:
    """In a rank the launcher's run started: its world size is the run's `ranks`, else LaunchError
    (its first line also in the rank's error file, which the launcher's record and progress name)."""
    try:
        params = json.loads(os.environ.get("SCALEPROBE_PARAMS", "{}"))
    except ValueError:
        return
    wanted = params.get("ranks") if isinstance(params, dict) else None
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted == identity.world_size:
        return
    started = (f"the {identity.launcher} launch has {identity.world_size} rank(s)" if identity.distributed else
               "no launcher's variables name a rank here (a world of 1 rank)")
    message = (f"this run's parameter ranks={wanted}, but {started}: the --spawn command must start {{ranks}} "
               f"ranks (e.g. 'srun -n {{ranks}}'), or give the number it starts with --param ranks="
               f"{identity.world_size}")
    from runtime.launch_child import error_file, write_error

    write_error(error_file(identity.rank), message + "\n")
    raise LaunchError(message)
