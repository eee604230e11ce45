"""Recorder settings from SCALEPROBE_* environment variables (docs/internals.md section 2).

Bad values raise ConfigError naming the variable, so a typo in a sweep fails loudly at start-up
instead of silently profiling the wrong ranks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from .environment import LAUNCHERS
from .errors import ScaleprobeRuntimeError


class ConfigError(ScaleprobeRuntimeError):
    """A SCALEPROBE_* variable with a value the runtime cannot use."""


@dataclass(frozen=True)
class Schedule:
    """Like torch.profiler.schedule: skip `skip_first` steps, then cycles of wait/warmup/active."""

    skip_first: int = 0
    wait: int = 0
    warmup: int = 0
    active: int = 0
    repeat: int = 0

    def phase(self, step: int) -> str:
        """What step `step` (0-based) is: "skip", "wait", "warmup", "active" or "done" (after
        `repeat` cycles). active=0 means every step is active."""
        if self.active <= 0:
            return "active"
        if step < self.skip_first:
            return "skip"
        s = step - self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and s >= cycle * self.repeat:
            return "done"
        at = s % cycle
        return "wait" if at < self.wait else "warmup" if at < self.wait + self.warmup else "active"

    def probes_on(self, step: int) -> bool:
        """Whether probes are on during the step: warm-up steps run with them on (caches, lazy
        patches) but are not meant to be analysed; a step record says which steps were active."""
        return self.phase(step) in ("warmup", "active")

    def is_active(self, step: int) -> bool:
        """Whether the step is one of the schedule's active steps, the ones to analyse."""
        return self.phase(step) == "active"


#: SCALEPROBE_STEP_RECORDS by default: a step loop writes its first 10000 steps, then fewer and
#: fewer (runtime.step_thinning.StepThinning): 1e7 steps of a loop write 17 MB per process, where they
#: wrote 1.6 GB
DEFAULT_STEP_RECORDS = 10_000


@dataclass(frozen=True)
class Config:
    out_dir: str | None = None
    experiment: str = ""
    run_id: str | None = None
    params: dict = field(default_factory=dict)
    repetition: int | None = None
    launcher: str | None = None
    ranks: str | None = None
    schedule: Schedule | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    nvtx: bool = False
    disable: bool = False
    trace: bool = False
    flush_interval_s: float = 5.0
    throttle_calls: int = 100_000
    throttle_ns: int = 10_000
    gpu: str = "auto"
    gpu_budget: int = 4
    trace_max: int = 1_000_000
    ddp_hook: bool = True
    comm: bool = True
    quiet: bool = False
    pure: bool = False
    #: step records per step loop (region) per process before the steps are thinned; 0: no bound
    step_records: int = DEFAULT_STEP_RECORDS


#: a week: longer would overflow the flush thread's timed wait on some platforms, and means "never"
MAX_FLUSH_INTERVAL_S = 7 * 24 * 3600.0


def parse_ranks(spec: str, var: str = "SCALEPROBE_RANKS") -> "RankSet":
    return RankSet.parse(spec, var)


class RankSet:
    """`0,1`, `0-3`, `::8` (every 8th), `4::2`, `all`; a union of comma-separated parts."""

    def __init__(self, parts: list[tuple[int, int | None, int]]) -> None:
        self._parts = parts

    @classmethod
    def parse(cls, spec: str, var: str = "SCALEPROBE_RANKS") -> "RankSet":
        parts: list[tuple[int, int | None, int]] = []
        for raw in spec.split(","):
            p = raw.strip()
            if not p:
                continue
            try:
                if p == "all":
                    parts.append((0, None, 1))
                elif "::" in p:
                    start, step = p.split("::")
                    parts.append((int(start or 0), None, int(step)))
                elif "-" in p:
                    a, b = p.split("-")
                    if int(b) < int(a):
                        raise ConfigError(f"{var}={spec!r}: {p!r} is an empty range (write the lower rank first)")
                    parts.append((int(a), int(b) + 1, 1))
                else:
                    r = int(p)
                    parts.append((r, r + 1, 1))
            except ValueError:
                raise ConfigError(f"{var}={spec!r}: cannot read {p!r} (use e.g. 0,1 or 0-3 or ::8)") from None
            if parts[-1][2] <= 0 or parts[-1][0] < 0:
                raise ConfigError(f"{var}={spec!r}: {p!r} needs a non-negative start and a positive step")
        if not parts:
            raise ConfigError(f"{var}={spec!r}: no ranks given")
        return cls(parts)

    def __contains__(self, rank: int) -> bool:
        for start, stop, step in self._parts:
            if rank >= start and (stop is None or rank < stop) and (rank - start) % step == 0:
                return True
        return False


def parse_schedule(spec: str, var: str = "SCALEPROBE_SCHEDULE") -> Schedule:
    fields = {}
    for raw in spec.split(","):
        p = raw.strip()
        if not p:
            continue
        key, sep, val = p.partition("=")
        key = key.strip()
        if not sep or key not in Schedule.__dataclass_fields__:
            raise ConfigError(
                f"{var}={spec!r}: {p!r} is not one of skip_first=, wait=, warmup=, active=, repeat="
            )
        try:
            fields[key] = int(val)
        except ValueError:
            raise ConfigError(f"{var}={spec!r}: {key} needs an integer, got {val!r}") from None
        if fields[key] < 0:
            raise ConfigError(f"{var}={spec!r}: {key} must not be negative")
    sched = Schedule(**fields)
    if sched.active <= 0:
        raise ConfigError(f"{var}={spec!r}: active= must be at least 1")
    return sched


def _missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


def _flag(env: Mapping[str, str], var: str, default: bool = False) -> bool:
    v = env.get(var)
    if v is None or v == "":
        return default
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{var}={v!r}: use 1 or 0")


def _number(env: Mapping[str, str], var: str, default, kind=int, maximum: float | None = None):
    v = env.get(var)
    if v is None or v == "":
        return default
    try:
        x = kind(v)
    except ValueError:
        raise ConfigError(f"{var}={v!r}: not a number") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise ConfigError(f"{var}={v!r}: must be a finite number")
    if x < 0:
        raise ConfigError(f"{var}={v!r}: must not be negative")
    if maximum is not None and x > maximum:
        raise ConfigError(f"{var}={v!r}: at most {maximum:g}")
    return x


def _step_records(env: Mapping[str, str]) -> int:
    var = "SCALEPROBE_STEP_RECORDS"
    v = env.get(var)
    if v is None or v.strip() == "":
        return DEFAULT_STEP_RECORDS
    try:
        n = int(v.strip())
    except ValueError:
        n = -1
    if n < 0:
        raise ConfigError(f"{var}={v!r}: use a whole number of step records per step loop, e.g. "
                          f"{DEFAULT_STEP_RECORDS} (the default), or 0 to write every step")
    return n


def _patterns(env: Mapping[str, str], var: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in env.get(var, "").split(",") if p.strip())


def from_env(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    params: dict = {}
    if e.get("SCALEPROBE_PARAMS"):
        import json  # only at start-up, never on import

        try:
            params = json.loads(e["SCALEPROBE_PARAMS"])
        except ValueError as err:
            raise ConfigError(f"SCALEPROBE_PARAMS is not valid JSON: {err}") from None
        if not isinstance(params, dict):
            raise ConfigError("SCALEPROBE_PARAMS must be a JSON object like {\"ranks\": 4}")
    ranks = e.get("SCALEPROBE_RANKS") or None
    if ranks:
        RankSet.parse(ranks)
    sched = parse_schedule(e["SCALEPROBE_SCHEDULE"]) if e.get("SCALEPROBE_SCHEDULE") else None
    rep = e.get("SCALEPROBE_REPETITION")
    gpu = e.get("SCALEPROBE_GPU", "auto") or "auto"
    if gpu not in ("auto", "0", "1", "fake"):
        raise ConfigError(f"SCALEPROBE_GPU={gpu!r}: use auto, 0, 1 or fake")
    launcher = e.get("SCALEPROBE_LAUNCHER") or None
    if launcher is not None and launcher not in LAUNCHERS:  # what the header's `launcher` may say (review 89 L5)
        raise ConfigError(f"SCALEPROBE_LAUNCHER={launcher!r}: use one of {', '.join(LAUNCHERS)} "
                          "(the launchers set it; leave it unset)")
    nvtx = _flag(e, "SCALEPROBE_NVTX")
    if nvtx and _missing("nvtx"):
        # else a ModuleNotFoundError traceback at the first instrumented import (review 33)
        raise ConfigError("SCALEPROBE_NVTX=1 needs the nvtx package, which this Python cannot import: pip install nvtx")
    return Config(
        out_dir=os.path.expanduser(e.get("SCALEPROBE_OUT") or "") or None,  # `~/x` quoted in a job script (review 26)
        experiment=e.get("SCALEPROBE_EXPERIMENT", ""),
        run_id=e.get("SCALEPROBE_RUN_ID") or None,
        params=params,
        repetition=_number(e, "SCALEPROBE_REPETITION", None) if rep else None,
        launcher=launcher,
        ranks=ranks,
        schedule=sched,
        include=_patterns(e, "SCALEPROBE_INCLUDE"),
        exclude=_patterns(e, "SCALEPROBE_EXCLUDE"),
        nvtx=nvtx,
        disable=_flag(e, "SCALEPROBE_DISABLE"),
        trace=_flag(e, "SCALEPROBE_TRACE"),
        flush_interval_s=_number(e, "SCALEPROBE_FLUSH_INTERVAL", 5.0, float, maximum=MAX_FLUSH_INTERVAL_S),
        throttle_calls=_number(e, "SCALEPROBE_THROTTLE_CALLS", 100_000),
        throttle_ns=_number(e, "SCALEPROBE_THROTTLE_NS", 10_000),
        gpu=gpu,
        gpu_budget=_number(e, "SCALEPROBE_GPU_BUDGET", 4),
        trace_max=_number(e, "SCALEPROBE_TRACE_MAX", 1_000_000),
        ddp_hook=_flag(e, "SCALEPROBE_DDP_HOOK", True),
        comm=_flag(e, "SCALEPROBE_COMM", True),
        quiet=_flag(e, "SCALEPROBE_QUIET"),
        pure=_flag(e, "SCALEPROBE_PURE"),  # read by runtime._backend at import; checked here
        step_records=_step_records(e),
    )
