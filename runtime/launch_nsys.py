"""Profiling selected ranks under Nsight Systems: the rank filter and the `nsys profile` prefix."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from runtime.config import ConfigError, RankSet
from runtime.launch_errors import LaunchError

DEFAULT_NSYS_ARGS = "--trace=cuda,nvtx,osrt --force-overwrite=true"


def parse_rank_filter(text: str, option: str = "--nsys-ranks") -> RankSet:
    """`0,1`, `0-3`, `::8`: the same syntax as SCALEPROBE_RANKS, read by the same parser."""
    try:
        return RankSet.parse(text, option)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None


def nsys_executable() -> str:
    found = shutil.which("nsys")
    if found is None:
        raise LaunchError("--nsys: the Nsight Systems CLI `nsys` is not on PATH "
                          "(install Nsight Systems or load its module, e.g. `module load nsight-systems`)")
    return found


def check_nvtx() -> None:
    """--nsys sets SCALEPROBE_NVTX=1 in the ranks it profiles, unless the caller set it: without
    the nvtx package each of them would fail at start-up, after nsys started, with an error about
    a variable the user never set (review 70 F5). Said before anything runs."""
    if "SCALEPROBE_NVTX" in os.environ:
        return  # the caller's choice: `0` profiles without ranges; a `1` is checked with the others
    import importlib.util

    if importlib.util.find_spec("nvtx") is None:
        raise LaunchError("--nsys shows scaleprobe's regions as NVTX ranges, which needs the nvtx package, which "
                          "this Python cannot import: pip install nvtx, or set SCALEPROBE_NVTX=0 to profile "
                          "without the ranges")


def nsys_prefix(nsys: str, run_dir: Path, rank: int, extra: str | None) -> list[str]:
    """`nsys profile -o <run-dir>/rank<R> ...`: nsys adds `.nsys-rep` to the report name."""
    args = shlex.split(extra if extra is not None else DEFAULT_NSYS_ARGS)
    return [nsys, "profile", "-o", os.path.abspath(run_dir / f"rank{rank}"), *args]
