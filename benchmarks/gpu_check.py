"""The real-GPU checks of the runtime in one run (needs an NVIDIA GPU and torch with CUDA).

    .venv/bin/python benchmarks/gpu_check.py                  # on a GPU machine (about 1-2 minutes estimated on one H100)
    .venv/bin/python benchmarks/gpu_check.py --json gpu.json  # also write every measured number as JSON
    .venv/bin/python benchmarks/gpu_check.py --fake           # anywhere: the script's plumbing on CPU

It instruments the workloads in benchmarks/gpu_check_programs/workload/ into a temporary directory,
runs each scenario in a process of its own (benchmarks/gpu_check_programs/runner.py) and checks
the run files against what the programs measured themselves:

  accuracy   a region running torch.cuda._sleep, its steps and epochs, against the same sleep between
             a bare CUDA event pair calibrated in the same process: within +-10%
  sync       a GPU-bound loop with no synchronisation: the runtime synchronises nothing during it and
             its steps' CPU durations stay below a quarter of their GPU spans
  spans      steps tile their epoch on the GPU; the epochs' GPU spans fit in the time of the function
             around the loop, which ends with torch.cuda.synchronize() (review 33 M8)
  cpu_bound  a CPU-bound step's gpu_ns is the stream's span, about its CPU duration (M5)
  memory     a step's cuda_peak_bytes covers a known allocation, and the program's own
             torch.cuda.max_memory_allocated() still does after the loop (M3)
  overhead   whole-loop time with and without probes, >= 5 interleaved alternations in one process:
             a GPU-bound matmul step (limit 1.05x) and a CPU-bound step of ~500 small regions around
             100 small kernels (limit 2x and 1 us added per region visit) (M2)
  nccl       sync and async all_reduce, all_gather_into_tensor and DDP at world size 1 (and 2 with two
             GPUs): the recorded time per call against the GPU duration of the same call (H1)
  robust     an instrumented function captured in a CUDA graph, one compiled with torch.compile
             (fullgraph=True), regions on a side stream and across a stream switch, a region on a
             second GPU: same output as uninstrumented, end record ok (H4, H6, H7)
  nvtx       SCALEPROBE_NVTX=1 on CUDA runs and ends ok

With --fake the scenarios run on CPU with the runtime's fake events (SCALEPROBE_GPU=fake) and gloo
in place of NCCL: what needs no GPU is checked (records present, counts, bytes, synchronisations,
same output), every comparison with GPU time is printed as [skip] with its (meaningless) numbers.

Exit status 0: every check passed or was skipped; 1: a check failed; 2: a usage or set-up error
(no CUDA without --fake, torch missing, the instrumentor failed). A check that raises is a failed
check with its traceback's tail; the other checks still run, and the summary and --json (with the
options, the scenarios' parameters and the source revision; on exit 2 the reason) are always
written. When a check failed, the temporary directory (logs, run files, build) is kept and named.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "benchmarks" / "gpu_check_programs"
WORKLOAD = PROGRAMS / "workload"
sys.path.insert(0, str(REPO))

CHECKS = ("accuracy", "sync", "spans", "cpu_bound", "memory", "overhead", "nccl", "robust", "nvtx")

# The limits the docs state (docs/runtime.md, "Checking on a GPU").
ACCURACY = 0.10          # GPU samples, steps and epochs against the calibrated sleep: +-10%
STEPS_WITHIN = 0.90      # ... for at least 90% of the steps
CPU_SHARE = 0.25         # GPU-bound step: CPU duration below a quarter of its GPU span
CPU_BOUND = (0.85, 1.10)  # CPU-bound step: gpu_ns / duration_ns
MATMUL_RATIO = 1.05      # overhead, GPU-bound matmul step
MANY_RATIO = 2.0         # overhead, many small regions per step (~5 region visits per kernel: a stress case)
PER_VISIT_NS = 1000      # overhead, added per region visit with CUDA active
COMM_SHARE = 0.5         # recorded comm time per call at least half the call's GPU duration ...
COMM_HIGH = 3.0          # ... and at most 3x it (+0.5 ms)
COMM_GPU = 0.25          # recorded comm gpu_ns per call within +-25% of the call's GPU duration ...
LAUNCH_NS = 150_000      # ... + this per DDP bucket against NCCL's own durations, which begin with the
                         # kernel: a bucket's interval begins at its collective's call, and on a GPU that
                         # waits for the CPU the way to the kernel shows (H100: 75-115 us in DDP's hook)
MIN_COMM_US = 100        # below this GPU duration, enqueue and transfer cannot be told apart
SCENARIO_TIMEOUT = 300


# ----- recording what was checked and measured ------------------------------------------------------


@dataclass
class Outcome:
    """One scenario's processes: their measurements (one dict per rank) and run files (by rank)."""

    name: str
    rc: list[int | None]
    seconds: float
    stderr: str
    results: list[dict]
    runs: list[Any]
    error: str | None = None
    reported: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Ctx:
    args: argparse.Namespace
    fake: bool
    tmp: Path
    build: Path
    ngpu: int
    env_info: dict
    checks: list[dict] = field(default_factory=list)
    numbers: dict[str, dict] = field(default_factory=dict)
    cache: dict[str, Outcome] = field(default_factory=dict)
    params: dict[str, dict] = field(default_factory=dict)

    def line(self, status: str, check: str, text: str) -> None:
        print(f"  [{status}] {check}: {text}")
        self.checks.append({"check": check, "status": status, "text": text})

    def verdict(self, check: str, ok: bool, text: str, gpu: bool = True) -> None:
        """[ok]/[FAILED]; in fake mode a check that compares with GPU time is a [skip] with its numbers."""
        if self.fake and gpu:
            self.line("skip", check, f"fake events, no verdict: {text}")
        else:
            self.line("ok" if ok else "FAILED", check, text)

    def skip(self, check: str, why: str) -> None:
        self.line("skip", check, why)

    def num(self, key: str, value: Any, unit: str = "", limit: str = "") -> Any:
        if isinstance(value, float):
            value = round(value, 4)
        self.numbers[key] = {"value": value, "unit": unit, **({"limit": limit} if limit else {})}
        return value

    def info(self, text: str) -> None:
        print(f"         {text}")


def section(title: str, what: str) -> None:
    print(f"\n{title}: {what}")


def us(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:.1f} us"


def pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.1f}%" if b else "n/a"


# ----- running a scenario ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_scenario(ctx: Ctx, scenario: str, params: dict, env: dict | None = None, world: int = 1,
                 tag: str | None = None) -> Outcome:
    """Run runner.py SCENARIO in `world` processes (ranks) and read their results and run files."""
    from runtime.runfile import find_run_files, read_run

    tag = tag or scenario
    out = ctx.tmp / tag
    shutil.rmtree(out, ignore_errors=True)  # a --keep directory used before
    out.mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SCALEPROBE_", "GPU_CHECK_"))}
    base.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        SCALEPROBE_OUT=str(out / "runs"), SCALEPROBE_QUIET="1",
        GPU_CHECK_BUILD=str(ctx.build), GPU_CHECK_SRC=str(WORKLOAD),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
    )
    if ctx.fake:
        base.update(GPU_CHECK_FAKE="1", SCALEPROBE_GPU="fake", CUDA_VISIBLE_DEVICES="")
    base.update(env or {})
    procs, files = [], []
    t0 = time.monotonic()
    for rank in range(world):
        penv = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        res, err = out / f"result.rank{rank}.json", open(out / f"stderr.rank{rank}.txt", "w")
        so = open(out / f"stdout.rank{rank}.txt", "w")
        files += [err, so]
        procs.append((subprocess.Popen([sys.executable, str(PROGRAMS / "runner.py"), scenario, str(res), json.dumps(params)],
                                       env=penv, cwd=str(out), stdout=so, stderr=err), res))
    error = None
    deadline = t0 + SCENARIO_TIMEOUT
    failed_at = None
    while any(p.poll() is None for p, _ in procs):
        now = time.monotonic()
        if failed_at is None and any(p.poll() not in (None, 0) for p, _ in procs):
            failed_at = now  # a rank died: its peers wait in a collective that never completes
        if now > deadline or (failed_at is not None and now > failed_at + 15):
            error = (f"timed out after {SCENARIO_TIMEOUT} s (a hang?)" if failed_at is None else
                     "a rank failed and the others did not end within 15 s")
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()  # only the processes this script started, by their Popen handle
                    p.wait()
            break
        time.sleep(0.05)
    rcs: list[int | None] = [p.returncode for p, _ in procs]
    for f in files:
        f.close()
    seconds = time.monotonic() - t0
    stderr = "".join((out / f"stderr.rank{r}.txt").read_text(errors="replace") for r in range(world))
    results = []
    for _, res in procs:
        try:
            results.append(json.loads(res.read_text()))
        except (OSError, ValueError):
            results.append({})
    if error is None and any(rc != 0 for rc in rcs):
        error = f"exit status {rcs}"
    if error is None and not all(r.get("completed") for r in results):
        error = "did not complete"
    runs = []
    for f in find_run_files(out / "runs") if (out / "runs").exists() else []:
        try:
            runs.append(read_run(f))
        except Exception as e:  # noqa: BLE001 - a run file we cannot read is a finding, not a crash
            error = error or f"run file {f.name} unreadable: {e}"
    runs.sort(key=lambda r: (r.header.get("rank") or 0, r.header.get("pid") or 0))
    if error is None and len(runs) != world:
        error = f"{len(runs)} run file(s) for {world} rank(s)"
    o = Outcome(scenario, rcs, seconds, stderr, results, runs, error)
    runtime_notes(ctx, o)
    ctx.num(f"seconds.{tag}", seconds, "s")
    return o


def usable(ctx: Ctx, o: Outcome, check: str) -> bool:
    """False (and a [FAILED] line with the program's stderr, once per scenario) if it failed."""
    if o.ok:
        return True
    ctx.line("FAILED", check, f"the {o.name} program failed: {o.error}")
    if not o.reported:
        o.reported = True
        for ln in o.stderr.strip().splitlines()[-25:]:
            print(f"           | {ln}")
    return False


def stderr_problem(o: Outcome) -> str | None:
    for marker in ("Traceback (most recent call last)", "Exception ignored"):
        if marker in o.stderr:
            return f"stderr has {marker!r}"
    return None


def runtime_notes(ctx: Ctx, o: Outcome) -> None:
    """What the runtime said on stderr (a timer it turned off, a hook it could not register)."""
    for ln in [ln for ln in o.stderr.splitlines() if ln.startswith("scaleprobe:")][:5]:
        ctx.info(f"stderr: {ln}")


# ----- reading the run files ------------------------------------------------------------------------


def rids(run: Any, name: str, kinds: tuple[str, ...]) -> set[int]:
    """Regions of `kinds` that are `name` or one of its loops (`name:for@12`)."""
    return {rid for rid, r in run.regions.items()
            if r.kind in kinds and (r.name == name or r.name.startswith(name + ":"))}


def series_of(records: list[dict], run: Any, func: str, kind: str) -> list[dict]:
    ids = rids(run, func, (kind,))
    return [dict(s) for s in records if s["region"] in ids]


def incl_ns(run: Any, func: str) -> int:
    ids = rids(run, func, ("function",))
    return sum(st.incl_ns for path, st in run.profile.items() if path and path[-1] in ids)


def visits_per_call(run: Any, func: str) -> float | None:
    ids = rids(run, func, ("function",))
    calls = sum(st.visits for path, st in run.profile.items() if path and path[-1] in ids)
    under = sum(st.visits for path, st in run.profile.items() if ids & set(path))
    return under / calls if calls else None


def gpu_samples(run: Any, ids: set[int]) -> tuple[int, int]:
    n = sum(run.gpu_regions.get(r, {}).get("samples", 0) for r in ids)
    g = sum(run.gpu_regions.get(r, {}).get("gpu_ns", 0) for r in ids)
    return n, g


def comm_of(run: Any, op: str, func: str | None) -> dict:
    ids = rids(run, func, ("function",)) if func else None
    recs = [c for c in run.comms if c.get("op") == op and (ids is None or ids & set(c.get("callpath", ())))]
    gpu = [c for c in recs if c.get("gpu_ns") is not None]
    return {
        "records": len(recs),
        "calls": sum(int(c.get("calls", 0)) for c in recs),
        "bytes": sum(int(c.get("bytes", 0)) for c in recs),
        "time_ns": sum(int(c.get("time_ns", 0)) for c in recs),
        "gpu_ns": sum(int(c["gpu_ns"]) for c in gpu) if gpu else None,
        # runtimes that count the GPU-timed calls say so; else every call of a record with a GPU time
        "gpu_calls": sum(int(c.get("gpu_calls", c.get("calls", 0))) for c in gpu) if gpu else 0,
    }


def is_ns(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# ----- the timing program: accuracy, sync, spans, cpu_bound, memory ------------------------------------


def timing_outcome(ctx: Ctx) -> Outcome:
    if "timing" not in ctx.cache:
        a = ctx.args
        p = dict(epochs=a.epochs, steps=a.steps, per_step=4, sleep_ms=a.sleep_ms, cpu_steps=20, cpu_sleep_ms=2.0,
                 mem_steps=5, big_bytes=256 << 20, small_bytes=1 << 20)
        if ctx.fake:
            p.update(sleep_ms=0.05, cpu_steps=5, cpu_sleep_ms=1.0, mem_steps=3, big_bytes=4 << 20, small_bytes=64 << 10)
        ctx.params["timing"] = p
        ctx.cache["timing"] = run_scenario(ctx, "timing", p)
        o = ctx.cache["timing"]
        if o.ok:
            r = o.results[0]
            ctx.num("timing.event_pair_cpu", r.get("event_pair_us"), "us")
    return ctx.cache["timing"]


def calibrated_ns(ctx: Ctx, r: dict) -> float:
    before, after = r["calibrated_ms_before"], r["calibrated_ms_after"]
    ctx.num("accuracy.calibrated_sleep", before * 1e3, "us")
    ctx.num("accuracy.calibration_drift", 100 * (after / before - 1), "%")
    return (before + after) / 2 * 1e6


def check_accuracy(ctx: Ctx) -> None:
    section("accuracy", "GPU times of a region, its steps and epochs against torch.cuda._sleep between a bare event pair")
    o = timing_outcome(ctx)
    if not usable(ctx, o, "accuracy"):
        return
    r, run, p = o.results[0], o.runs[0], ctx.params["timing"]
    cal = calibrated_ns(ctx, r)
    ctx.info(f"calibrated sleep {us(cal)} ({r['cycles']} cycles; before {r['calibrated_ms_before'] * 1e3:.1f} us,"
             f" after {r['calibrated_ms_after'] * 1e3:.1f} us)")
    if abs(r["calibrated_ms_after"] / r["calibrated_ms_before"] - 1) > 0.05:
        ctx.info("the sleep's length changed by more than 5% during the run (GPU clocks): read the accuracy lines with care")
    n, g = gpu_samples(run, rids(run, "sleeper", ("function",)))
    ctx.num("accuracy.sleeper_samples", n)
    if n == 0:
        ctx.verdict("accuracy", False, "the region `sleeper` got no GPU samples (rotation never timed it)", gpu=False)
    else:
        mean = ctx.num("accuracy.sleeper_sample", g / n / 1e3, "us", "+-10% of calibrated") * 1e3
        ctx.verdict("accuracy", abs(mean / cal - 1) <= ACCURACY,
                    f"region `sleeper`: {n} GPU samples of {us(mean)} vs {us(cal)} calibrated ({pct(mean, cal)}; limit +-10%)")
    per = p["per_step"]
    loops = {rid for rid, reg in run.regions.items() if reg.kind == "loop" and reg.name.startswith("gpu_bound:")}
    n, g = gpu_samples(run, loops)
    if n:
        mean = ctx.num("accuracy.loop_sample", g / n / 1e3, "us", "+-10%") * 1e3
        ctx.verdict("accuracy", abs(mean / (per * cal) - 1) <= ACCURACY,
                    f"loop region of {per} sleeps: {n} GPU samples of {us(mean)} vs {us(per * cal)} ({pct(mean, per * cal)};"
                    " limit +-10%)")
    else:
        ctx.skip("accuracy", "the inner loop region got no GPU sample (not its turn in the rotation): nothing to compare")
    steps = series_of(run.steps, run, "gpu_bound", "step")
    want = p["epochs"] * p["steps"]
    timed = [s["gpu_ns"] for s in steps if is_ns(s.get("gpu_ns"))]
    ctx.verdict("accuracy", len(steps) == want and len(timed) == want,
                f"{len(steps)} step records (want {want}), {len(timed)} with a GPU time", gpu=False)
    if timed:
        exp = per * cal
        med = statistics.median(timed)
        within = sum(abs(v / exp - 1) <= ACCURACY for v in timed) / len(timed)
        ctx.num("accuracy.step_gpu_median", med / 1e3, "us", "+-10% of the sum of sleeps")
        ctx.num("accuracy.steps_within_10pct", 100 * within, "%", ">= 90%")
        ctx.verdict("accuracy", abs(med / exp - 1) <= ACCURACY and within >= STEPS_WITHIN,
                    f"step gpu_ns median {us(med)} vs {per} sleeps {us(exp)} ({pct(med, exp)}); {100 * within:.0f}% of steps"
                    f" within +-10% (min {us(min(timed))}, max {us(max(timed))}; limit 90%)")
    epochs = series_of(run.epochs, run, "gpu_bound", "epoch")
    etimed = [e["gpu_ns"] for e in epochs if is_ns(e.get("gpu_ns"))]
    ctx.verdict("accuracy", len(epochs) == p["epochs"] and len(etimed) == len(epochs),
                f"{len(epochs)} epoch records (want {p['epochs']}), {len(etimed)} with a GPU time", gpu=False)
    if etimed:
        exp = p["steps"] * per * cal
        worst = max(etimed, key=lambda v: abs(v / exp - 1))
        ctx.num("accuracy.epoch_gpu_worst", worst / 1e3, "us")
        ctx.verdict("accuracy", all(abs(v / exp - 1) <= ACCURACY for v in etimed),
                    f"epoch gpu_ns {', '.join(us(v) for v in etimed)} vs {p['steps'] * per} sleeps {us(exp)} (worst {pct(worst, exp)})")


def check_sync(ctx: Ctx) -> None:
    section("sync", "no hidden synchronisation in a GPU-bound loop that never waits for the GPU")
    o = timing_outcome(ctx)
    if not usable(ctx, o, "sync"):
        return
    r, run = o.results[0], o.runs[0]
    n, total = r["runtime_syncs_in_loop"], r["syncs_in_loop"]
    ctx.num("sync.runtime_syncs_in_loop", n, "calls", "0")
    where = "; ".join(r.get("runtime_sync_sites") or [])
    what = "FakeEvent.synchronize" if ctx.fake else "torch.cuda.synchronize, Event.synchronize, Stream.synchronize"
    ctx.verdict("sync", n == 0 and total == 0,
                f"{n} host synchronisation(s) by the runtime during the loop, {total} in all ({what} counted)"
                + (f": {where}" if where else ""), gpu=False)
    steps = [s for s in series_of(run.steps, run, "gpu_bound", "step") if is_ns(s.get("gpu_ns"))]
    if not steps:
        ctx.verdict("sync", False, "no step with a GPU time to compare", gpu=False)
        return
    cpu = statistics.median(s["duration_ns"] for s in steps)
    gpu = statistics.median(s["gpu_ns"] for s in steps)
    ctx.num("sync.step_cpu_median", cpu / 1e3, "us")
    ctx.num("sync.step_cpu_share_of_gpu", cpu / gpu, "", f"<= {CPU_SHARE}")
    ctx.verdict("sync", cpu <= CPU_SHARE * gpu,
                f"step CPU duration median {us(cpu)} vs its gpu_ns median {us(gpu)} ({cpu / gpu:.3f}; limit {CPU_SHARE}):"
                " the CPU runs ahead of the GPU")


def check_spans(ctx: Ctx) -> None:
    section("spans", "steps tile their epoch on the GPU; epochs fit in the function that synchronises after them")
    o = timing_outcome(ctx)
    if not usable(ctx, o, "spans"):
        return
    run = o.runs[0]
    steps = series_of(run.steps, run, "gpu_bound", "step")
    epochs = series_of(run.epochs, run, "gpu_bound", "epoch")
    if not epochs or not all(is_ns(e.get("gpu_ns")) for e in epochs):
        ctx.verdict("spans", False, "epochs without a GPU time", gpu=False)
        return
    for e in epochs:
        inside = [s["gpu_ns"] for s in steps if e["start_ns"] <= s["start_ns"] < e["start_ns"] + e["duration_ns"]
                  and is_ns(s.get("gpu_ns"))]
        tot = sum(inside)
        ctx.verdict("spans", 0.9 * e["gpu_ns"] <= tot <= e["gpu_ns"] * 1.01 + 50_000,
                    f"epoch {e['index']}: its {len(inside)} steps' gpu_ns sum to {us(tot)}, its own gpu_ns is {us(e['gpu_ns'])}"
                    " (want between 90% and 101%)")
    eg = sum(e["gpu_ns"] for e in epochs)
    fn = incl_ns(run, "gpu_bound")
    ctx.num("spans.epochs_gpu_over_function_time", eg / fn if fn else None, "", "<= 1")
    ctx.verdict("spans", 0 < eg <= fn * 1.001 + 100_000,
                f"epochs' gpu_ns {us(eg)} <= {us(fn)}, the time of `gpu_bound`, which ends with torch.cuda.synchronize()")


def check_cpu_bound(ctx: Ctx) -> None:
    section("cpu_bound", "gpu_ns of a CPU-bound step is the stream's span (about the CPU duration), not busy time")
    o = timing_outcome(ctx)
    if not usable(ctx, o, "cpu_bound"):
        return
    run, p = o.runs[0], ctx.params["timing"]
    steps = series_of(run.steps, run, "cpu_bound", "step")
    timed = [s for s in steps if is_ns(s.get("gpu_ns"))]
    ctx.verdict("cpu_bound", len(steps) == p["cpu_steps"] and len(timed) == len(steps),
                f"{len(steps)} step records (want {p['cpu_steps']}), {len(timed)} with a GPU time", gpu=False)
    if timed:
        ratio = statistics.median(s["gpu_ns"] / s["duration_ns"] for s in timed)
        ctx.num("cpu_bound.gpu_over_duration", ratio, "", f"{CPU_BOUND[0]}..{CPU_BOUND[1]}")
        ctx.verdict("cpu_bound", CPU_BOUND[0] <= ratio <= CPU_BOUND[1],
                    f"median gpu_ns / duration_ns {ratio:.3f} for steps of {p['cpu_sleep_ms']} ms CPU sleep and one tiny kernel"
                    f" (want {CPU_BOUND[0]} to {CPU_BOUND[1]})")


def check_memory(ctx: Ctx) -> None:
    section("memory", "CUDA peak bytes against a known allocation; the program's own peak statistics untouched")
    o = timing_outcome(ctx)
    if not usable(ctx, o, "memory"):
        return
    r, run, p = o.results[0], o.runs[0], ctx.params["timing"]
    big = p["big_bytes"]
    steps = series_of(run.steps, run, "memory", "step")
    peaks = [(s.get("memory") or {}).get("cuda_peak_bytes") for s in steps]
    ctx.verdict("memory", len(steps) == p["mem_steps"] and all(isinstance(v, int) for v in peaks),
                f"{len(steps)} step records (want {p['mem_steps']}), {sum(isinstance(v, int) for v in peaks)} with cuda_peak_bytes",
                gpu=False)
    ints = [v for v in peaks if isinstance(v, int)]
    if ints:
        ctx.num("memory.step0_peak", peaks[0] if isinstance(peaks[0], int) else None, "bytes", f">= {big}")
        ctx.num("memory.run_peak", max(ints), "bytes", f">= {big}")
        ctx.verdict("memory", isinstance(peaks[0], int) and peaks[0] >= big and max(ints) >= big,
                    f"the step that allocates {big >> 20} MiB has cuda_peak_bytes {peaks[0]}, the run's peak is {max(ints)}")
    own = r.get("program_max_memory_allocated")
    ctx.num("memory.program_max_memory_allocated", own, "bytes", f">= {big}")
    ctx.verdict("memory", isinstance(own, int) and own >= big,
                "the program's own torch.cuda.max_memory_allocated() after the loop is "
                + ("not measured (no CUDA)" if own is None else
                   f"{own}, it allocated {big} in the loop" + ("" if own >= big else
                   ": the runtime reset the device's peak statistics (review 33 M3)")))


# ----- overhead ---------------------------------------------------------------------------------------


def check_overhead(ctx: Ctx) -> None:
    section("overhead", "whole-loop time instrumented / uninstrumented, interleaved in one process (probes, GPU timing)")
    a = ctx.args
    p = dict(size=a.size, steps=30, small=128, layers=50, leaves=8, reps=a.reps)
    if ctx.fake:
        p.update(size=64, steps=5, small=16, layers=10, leaves=4)
    # Throttling off: a region visited 100000 times would stop being timed mid-run and hide the probe cost.
    env = {"SCALEPROBE_THROTTLE_CALLS": "0"}
    o = run_scenario(ctx, "overhead", p, env=env)
    if not usable(ctx, o, "overhead"):
        return
    r, run = o.results[0], o.runs[0]
    limits = {"matmul": (MATMUL_RATIO, "matmul_loop", f"{p['size']}x{p['size']} matmul forward/backward/SGD, GPU-bound"),
              "many_regions": (MANY_RATIO, "many_regions_loop",
                               f"{p['layers']} layers of 2 small kernels, each with {p['leaves']} tiny Python regions, CPU-bound")}
    ratios = {}
    for prog, (limit, func, what) in limits.items():
        t = r[prog]
        pmin, imin = min(t["plain"]), min(t["instrumented"])
        ratio = imin / pmin
        paired = statistics.median(i / q for i, q in zip(t["instrumented"], t["plain"]))
        ratios[prog] = ratio
        vpc = visits_per_call(run, func)
        ctx.num(f"overhead.{prog}.plain", pmin / 1e6, "ms")
        ctx.num(f"overhead.{prog}.instrumented", imin / 1e6, "ms")
        ctx.num(f"overhead.{prog}.ratio", ratio, "", f"<= {limit}")
        ctx.num(f"overhead.{prog}.paired_median_ratio", paired)
        ctx.num(f"overhead.{prog}.visits_per_loop", vpc)
        ctx.verdict("overhead", ratio <= limit,
                    f"{prog} ({what}): {ratio:.3f}x (best of {p['reps']}: {pmin / 1e6:.2f} ms -> {imin / 1e6:.2f} ms;"
                    f" median of pairs {paired:.3f}x; limit {limit}x)")
        if prog == "many_regions":
            if not vpc:
                ctx.verdict("overhead", False, "no region visits of `many_regions_loop` in the run file", gpu=False)
            else:
                per = ctx.num("overhead.many_regions.added_per_visit", (imin - pmin) / vpc, "ns", f"<= {PER_VISIT_NS}")
                ctx.verdict("overhead", per <= PER_VISIT_NS,
                            f"many_regions: {per:.0f} ns added per region visit ({vpc:.0f} visits a loop, step bookkeeping"
                            f" included; limit {PER_VISIT_NS} ns)")
    if ctx.fake:
        ctx.skip("overhead", "the same loops with SCALEPROBE_GPU=0 (GPU timing's own share): not in fake mode")
        return
    o0 = run_scenario(ctx, "overhead", p, env=dict(env, SCALEPROBE_GPU="0"), tag="overhead_gpu0")
    if not usable(ctx, o0, "overhead"):
        return
    for prog in limits:
        t = o0.results[0][prog]
        ratio0 = min(t["instrumented"]) / min(t["plain"])
        ctx.num(f"overhead.{prog}.ratio_without_gpu_timing", ratio0)
        ctx.info(f"{prog} with SCALEPROBE_GPU=0: {ratio0:.3f}x, so GPU timing adds {ratios[prog] - ratio0:+.3f}x")


# ----- NCCL -------------------------------------------------------------------------------------------


def nccl_params(ctx: Ctx) -> dict:
    p = dict(mbytes=ctx.args.nccl_mb, calls=10, batch=4, ddp_width=4096, ddp_layers=4, ddp_steps=10, ddp_bucket_mb=100)
    if ctx.fake:
        p.update(mbytes=4, calls=3, batch=2, ddp_width=64, ddp_layers=2, ddp_steps=3, ddp_bucket_mb=1)
    return p


def compare_comm(ctx: Ctx, label: str, rec: dict, ref: list, per: str = "call", calls: float = 1.0) -> None:
    """The recorded GPU time (and CPU time) per call against the calls' own event pairs (and NCCL's
    durations). `per` "step": DDP's buckets of one step (`calls` of them), together, against NCCL's
    own durations of them (the reference row's event pair is those durations)."""
    check = "nccl"
    if any(x[1] is None for x in ref):
        ctx.skip(check, f"{label}: no reference GPU duration (NCCL's own durations need TORCH_NCCL_ENABLE_TIMING=1)")
        return
    # means, as the runtime's records hold sums: the same calls on both sides
    ref_ns = statistics.fmean(x[1] for x in ref) * 1e6
    cpu_ns = statistics.fmean(x[0] for x in ref)
    durs = [x[2] for x in ref if x[2] is not None]
    got = rec["time_ns"] / rec["calls"] if rec["calls"] else 0
    key = f"nccl.{label.replace(' ', '_')}"
    ctx.num(f"{key}.recorded_time_per_{per}", got / 1e3, "us")
    ctx.num(f"{key}.event_pair", ref_ns / 1e3, "us")
    ctx.num(f"{key}.call_cpu", cpu_ns / 1e3, "us")
    extra = ""
    if durs:
        d = statistics.fmean(durs) * 1e6
        ctx.num(f"{key}.work_get_duration", d / 1e3, "us")
        extra = f", Work._get_duration() {us(d)}"
        if abs(d - ref_ns) > 0.25 * ref_ns + 50_000:
            ctx.info(f"{label}: the event pair ({us(ref_ns)}) and NCCL's own Work._get_duration() ({us(d)}) disagree:"
                     " the reference itself is in doubt")
    if ref_ns < MIN_COMM_US * 1e3:
        ctx.skip(check, f"{label}: GPU duration only {us(ref_ns)} (recorded {us(got)}, call returned after {us(cpu_ns)}{extra}):"
                        " too short to tell the enqueue from the transfer")
    else:
        # time_ns is what the CPU saw: under NCCL only the queueing, documented (docs/runtime.md,
        # Communication; seen on an H100: 64 us of a 920 us all-reduce). Shown; only far too much fails.
        low = got < COMM_SHARE * ref_ns
        high = per == "call" and got > COMM_HIGH * ref_ns + 500_000
        text = (f"{label}: recorded time_ns {us(got)} per {per} vs GPU duration {us(ref_ns)} (event pair{extra});"
                f" the call returned after {us(cpu_ns)}")
        if high:
            ctx.verdict(check, False, f"{text}: the recorded time is {got / ref_ns:.1f}x the GPU duration")
        else:
            ctx.info(text + (f": time_ns is {100 * got / ref_ns:.0f}% of it, the queueing, as documented;"
                             " gpu_ns has the duration" if low else ""))
    if rec["gpu_ns"] is None:
        if ctx.fake:
            ctx.skip(check, f"{label}: no gpu_ns in the comm records (fake: gloo's CPU tensors are timed on no stream)")
        else:
            ctx.verdict(check, False, f"{label}: no gpu_ns in the comm records: the calls were not timed on the GPU")
    elif ref_ns >= MIN_COMM_US * 1e3:
        g = rec["gpu_ns"] / max(rec["gpu_calls"], 1)
        slack = LAUNCH_NS * calls if per == "step" else 0
        ctx.num(f"{key}.recorded_gpu_per_{per}", g / 1e3, "us")
        ctx.verdict(check, abs(g - ref_ns) <= COMM_GPU * ref_ns + slack,
                    f"{label}: recorded gpu_ns {us(g)} per {per} vs {us(ref_ns)} ({pct(g, ref_ns)}; limit +-25%"
                    + (f" + {us(slack)} for {calls:g} launches)" if slack else ")"))


def nccl_rank(ctx: Ctx, o: Outcome, i: int, label: str, p: dict) -> None:
    r, run = o.results[i], o.runs[i]
    for key, op, per_call in (("sync_allreduce", "all_reduce", 1), ("async_allreduce", "all_reduce", 1),
                              ("async_batch", "all_reduce", p["batch"]), ("sync_allgather", "all_gather_into_tensor", 1)):
        name = f"{label} {key}"
        rec = comm_of(run, op, key)
        want = p["calls"] * per_call
        # (a batch's calls each move a part: the same bytes in all)
        ctx.verdict("nccl", rec["calls"] == want and rec["bytes"] == p["calls"] * r["bytes"],
                    f"{name}: {rec['calls']} {op} calls recorded (want {want}), {rec['bytes']} bytes", gpu=False)
        if rec["calls"]:
            compare_comm(ctx, name, rec, r[key])
    rec = comm_of(run, "ddp_allreduce", None)
    steps, pb = r["ddp_steps"], r["ddp_param_bytes"]
    ctx.verdict("nccl", r.get("ddp_hooked") and rec["calls"] >= steps and abs(rec["bytes"] / steps / pb - 1) <= 0.01,
                f"{label} DDP: comm hook {'registered' if r.get('ddp_hooked') else 'NOT registered'}, {rec['calls']} bucket"
                f" all-reduces in {steps} steps, {rec['bytes'] / steps:.0f} bytes a step (parameters: {pb})", gpu=False)
    if rec["calls"]:
        # One step's buckets together against one all_reduce of all the gradient bytes.
        buckets = r.get("ddp_buckets", rec["calls"]) / steps
        compare_comm(ctx, f"{label} DDP buckets", dict(rec, calls=steps, gpu_calls=steps), r["ddp_reference"], per="step",
                     calls=buckets)


def check_nccl(ctx: Ctx) -> None:
    backend = "gloo on CPU: fake mode" if ctx.fake else "NCCL"
    section("nccl", f"recorded communication time against the GPU duration of the same calls ({backend})")
    p = nccl_params(ctx)
    ctx.params["nccl"] = p
    o = run_scenario(ctx, "nccl", p, env={"TORCH_NCCL_ENABLE_TIMING": "1"}, tag="nccl_ws1")
    if usable(ctx, o, "nccl"):
        ctx.info(f"world size 1, {p['mbytes']} MiB tensor, {p['calls']} calls each" + ("" if ctx.fake else
                 " (all_reduce with AVG: real GPU work at world size 1, where NCCL skips an in-place SUM)"))
        nccl_rank(ctx, o, 0, "ws1", p)
    if ctx.fake or ctx.ngpu < 2:
        ctx.skip("nccl", f"world size 2: needs 2 GPUs (this machine has {ctx.ngpu})")
        return
    o2 = run_scenario(ctx, "nccl", p, env={"TORCH_NCCL_ENABLE_TIMING": "1"}, world=2, tag="nccl_ws2")
    if usable(ctx, o2, "nccl"):
        for i in range(2):
            nccl_rank(ctx, o2, i, f"ws2 rank{i}", p)


# ----- robustness and NVTX ----------------------------------------------------------------------------


def robust_case(ctx: Ctx, case: str, what: str, params: dict) -> None:
    o = run_scenario(ctx, case, params)
    if not usable(ctx, o, "robust"):
        return
    r, run = o.results[0], o.runs[0]
    a, b = r.get("plain"), r.get("instrumented")
    same = isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-3)
    end = (run.end or {}).get("status")
    problem = stderr_problem(o)
    fake = " (fake: no CUDA, the case's plumbing only)" if ctx.fake else ""
    ctx.verdict("robust", same and end == "ok" and problem is None,
                f"{what}{fake}: output {b!r} instrumented vs {a!r} plain, end record {end!r}"
                + (f", {problem}" if problem else ""), gpu=False)
    if problem and not o.reported:
        o.reported = True
        for ln in o.stderr.strip().splitlines()[-15:]:
            print(f"           | {ln}")
    samples = {reg.name: run.gpu_regions[rid]["samples"] for rid, reg in run.regions.items() if rid in run.gpu_regions}
    ctx.num(f"robust.{case}.gpu_samples", samples)
    if (run.end or {}).get("gpu_error"):
        ctx.info(f"the runtime turned GPU timing off in this program: {run.end['gpu_error']}")


def check_robust(ctx: Ctx) -> None:
    section("robust", "programs that capture CUDA graphs, switch streams or use a second GPU run as without probes")
    small = ctx.fake
    p = dict(steps=12 if small else 20, size=16 if small else 256, sleep_ms=2.0)
    robust_case(ctx, "graph", "an instrumented function captured with torch.cuda.graph each step", p)
    if ctx.fake:  # (inductor on the CPU: a C++ build per run, and nothing of CUDA's checked)
        ctx.skip("robust", "torch.compile of an instrumented function: needs CUDA")
    else:
        robust_case(ctx, "compiled", "an instrumented function and its callee compiled with"
                    " torch.compile(fullgraph=True), Triton kernels", p)
    robust_case(ctx, "stream", "a region on a side stream and one that switches the current stream", p)
    if ctx.fake or ctx.ngpu < 2:
        ctx.skip("robust", f"a region under torch.cuda.device(1): needs 2 GPUs (this machine has {ctx.ngpu})")
    else:
        robust_case(ctx, "device2", "a region under torch.cuda.device(1) with its tensors there", p)


def check_nvtx(ctx: Ctx) -> None:
    section("nvtx", "SCALEPROBE_NVTX=1 (every region also an NVTX range)")
    if importlib.util.find_spec("nvtx") is None:
        ctx.skip("nvtx", "the nvtx package is not installed (pip install nvtx; it is a declared dependency)")
        return
    p = dict(size=64 if ctx.fake else 512, steps=10)
    o = run_scenario(ctx, "nvtx", p, env={"SCALEPROBE_NVTX": "1"})
    if not usable(ctx, o, "nvtx"):
        return
    run = o.runs[0]
    end = (run.end or {}).get("status")
    steps = series_of(run.steps, run, "matmul_loop", "step")
    problem = stderr_problem(o)
    ctx.verdict("nvtx", end == "ok" and len(steps) == p["steps"] and problem is None,
                f"a matmul loop with NVTX ranges on {'CPU (fake)' if ctx.fake else 'CUDA'}: {len(steps)} step records"
                f" (want {p['steps']}), end record {end!r}" + (f", {problem}" if problem else ""), gpu=False)


CHECK_FUNCS = {"accuracy": check_accuracy, "sync": check_sync, "spans": check_spans, "cpu_bound": check_cpu_bound,
               "memory": check_memory, "overhead": check_overhead, "nccl": check_nccl, "robust": check_robust,
               "nvtx": check_nvtx}


# ----- set-up, summary ------------------------------------------------------------------------------


def environment(fake: bool) -> tuple[dict, int] | str:
    """What runs the checks, and the number of GPUs; a string says why the checks cannot run."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (pip install -e '.[torch]')"
    info = {"torch": torch.__version__, "python": sys.version.split()[0], "fake": fake}
    if fake:
        return info, 0
    if not torch.cuda.is_available():
        return "no CUDA: torch.cuda.is_available() is False on this machine (use --fake for the CPU dry run)"
    n = torch.cuda.device_count()
    info.update(gpus=[torch.cuda.get_device_name(i) for i in range(n)], cuda=torch.version.cuda)
    try:
        v = torch.cuda.nccl.version()
        info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 - a build without NCCL: the nccl check says so
        info["nccl"] = None
    return info, n


def instrument(tmp: Path) -> Path | str:
    build = tmp / "build"
    p = subprocess.run([sys.executable, "-m", "instrumentor.cli", str(WORKLOAD), "-o", str(build), "--all", "-q"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return f"instrumenting {WORKLOAD} failed (exit {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}"
    return build


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 1e4 else f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {x}" for k, x in v.items()) or "-"
    return "-" if v is None else str(v)


def summary(ctx: Ctx) -> None:
    print("\nmeasured:")
    w = max((len(k) for k in ctx.numbers), default=10)
    for k, v in ctx.numbers.items():
        val = f"{fmt(v['value'])} {v['unit']}".strip()
        print(f"  {k:<{w}}  {val:<18} {('limit ' + v['limit']) if v.get('limit') else ''}".rstrip())
    print("\nchecks:")
    for name in dict.fromkeys(c["check"] for c in ctx.checks):
        st = [c["status"] for c in ctx.checks if c["check"] == name]
        print(f"  {name:<10} {st.count('ok'):3d} ok {st.count('FAILED'):3d} failed {st.count('skip'):3d} skipped")


def source_revision() -> str | None:
    """The git commit of the checkout the checks ran from (+ "-dirty" with local changes), or None."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def run_check(ctx: Ctx, name: str) -> bool:
    """Run one check; an exception in it is recorded as [FAILED] with its traceback's tail, so the
    other checks, the summary and the JSON still come. False when it crashed."""
    import traceback

    try:
        CHECK_FUNCS[name](ctx)
        return True
    except Exception as exc:  # noqa: BLE001 - any bug of one check must not lose the others' results
        tail = traceback.format_exc().strip().splitlines()[-6:]
        ctx.line("FAILED", name, f"crashed: {type(exc).__name__}: {exc}")
        ctx.checks[-1]["traceback"] = "\n".join(tail)
        for ln in tail:
            ctx.info(ln)
        return False


def write_json(path: str | None, doc: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(doc, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake", action="store_true", help="no GPU needed: CPU tensors, fake CUDA events, gloo")
    ap.add_argument("--json", metavar="PATH", help="write the environment, the parameters, every check and every "
                    "measured number here (also when the checks cannot run: exit status 2 and the reason)")
    ap.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated subset of: {','.join(CHECKS)}")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the GPU-bound timing loop (default 2)")
    ap.add_argument("--steps", type=int, default=20, help="steps per epoch of the GPU-bound timing loop (default 20)")
    ap.add_argument("--sleep-ms", type=float, default=1.0, help="length of one calibrated GPU sleep (default 1 ms)")
    ap.add_argument("--size", type=int, default=4096,
                    help="matrix size of the GPU-bound overhead loop (default 4096: GPU-bound even with TF32)")
    ap.add_argument("--reps", type=int, default=7, help="interleaved alternations of the overhead loops (>= 5, default 7)")
    ap.add_argument("--nccl-mb", type=int, default=1024, help="MiB of the all_reduce tensor (default 1024)")
    ap.add_argument("--keep", metavar="DIR", help="keep the instrumented build, run files and logs in DIR "
                    "(without it they are kept in a temporary directory only when a check failed)")
    a = ap.parse_args(argv)
    chosen = [c.strip() for c in a.checks.split(",") if c.strip()]
    bad = [c for c in chosen if c not in CHECKS]
    if bad:
        ap.error(f"--checks: unknown {', '.join(bad)} (choose from {', '.join(CHECKS)})")
    if a.reps < 5:
        ap.error("--reps: at least 5 alternations")
    if a.epochs < 1 or a.steps < 2:
        ap.error("--epochs >= 1 and --steps >= 2")
    doc: dict[str, Any] = {"environment": None, "parameters": {"options": vars(a), "checks": chosen},
                           "source_revision": source_revision(), "checks": [], "numbers": {}, "exit_status": 2}
    env = environment(a.fake)
    if isinstance(env, str):
        print(env)
        write_json(a.json, dict(doc, reason=env))
        return 2
    info, ngpu = env
    doc["environment"] = info
    print(("fake mode: CPU, fake CUDA events, gloo; " if a.fake else f"GPU: {', '.join(info['gpus'])}; CUDA {info['cuda']},"
           f" NCCL {info['nccl']}; ") + f"torch {info['torch']}, Python {info['python']}")
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="sp-gpu-check-"))
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    keep = bool(a.keep)
    ctx = None
    try:
        build = instrument(tmp)
        if isinstance(build, str):
            print(build)
            write_json(a.json, dict(doc, reason=build))
            return 2
        ctx = Ctx(a, a.fake, tmp, build, ngpu, info)
        for name in CHECKS:
            if name in chosen:
                run_check(ctx, name)
    finally:
        failed_any = ctx is None or any(c["status"] == "FAILED" for c in ctx.checks)
        if not keep and failed_any and ctx is not None:
            keep = True
            print(f"\nlogs, run files and the build kept in {tmp} (a check failed)")
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.monotonic() - t0
    ctx.num("total_time", seconds, "s")
    summary(ctx)
    failed = [c for c in ctx.checks if c["status"] == "FAILED"]
    skipped = sum(c["status"] == "skip" for c in ctx.checks)
    status = 1 if failed else 0
    doc["parameters"]["scenarios"] = ctx.params
    write_json(a.json, dict(doc, checks=ctx.checks, numbers=ctx.numbers, exit_status=status,
                            **({"kept": str(tmp)} if keep else {})))
    print(f"\n{len(failed)} check(s) FAILED" if failed else
          f"\nall GPU checks passed ({skipped} skipped) in {seconds:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
