"""Added cost of our probes per function region and per loop iteration, against an uninstrumented
baseline measured in the same run, with nvtx and torch.profiler.record_function side by side;
then the training-step overhead on the instrumented sample application.

    .venv/bin/python benchmarks/probe_overhead.py [--calls N] [--repeat R] [--no-app] [--gpu-app]

Micro numbers: per round, every variant and the uninstrumented baseline are timed in turn (the
order reversed every other round); printed are the median over rounds of the time added to the
baseline of the same round, the best-case difference (best variant time minus best baseline time:
other load only ever adds time), and the median ratio to the baseline. On a noisy machine look at
the ratios, not the absolute nanoseconds. Samples are short (2000 calls, a fraction of a scheduler
time slice) and many (200 rounds): on a shared, loaded machine a long sample is nearly always
preempted and measures the load, not the probe. `torch record_function` (slow) runs in rounds of
its own with fewer calls, against the baseline timed in those same rounds.
A function region is measured nested in an open region (the common case) and as the outermost
region of the thread (where the probes also check for a SystemExit leaving the program).
Targets (issue 4): <= +120 ns per function region, <= +40 ns per loop iteration, <= +10 ns with
probes off, < 3% per training step.

GPU rotation (a program that uses CUDA; review 33, M2): the same function region with the rotation
of runtime/gpu.py installed on a fake GPU (what SCALEPROBE_GPU=fake runs), with another region as
the target, against the plain probe with no rotation installed (the backend's GPU hooks cleared):
the rotation's hooks are a backend's global state, so they are installed or cleared before each
sample, outside its timed window, in the same interleaved rounds (review 75 F1). Printed as the
ratio of the two (target: 1.0x: only the target region may cost more). `--gpu-app` also runs an
instrumented program with SCALEPROBE_GPU=0 and =fake against the original, alternating.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (benchmarks/_args.py)

from _args import positive_int  # noqa: E402

FUNC_BASE = """
def f():
    return None
"""
# Exactly the shape the instrumentor emits (docs/internals.md section 1).
FUNC_PROBED = """
def f():
    if __sp_on__: __sp_enter__(1)
    try:
        return None
    finally:
        if __sp_on__: __sp_exit__(1)
"""
FUNC_NVTX = """
def f():
    __push__(__attr__)
    try:
        return None
    finally:
        __pop__()
"""
FUNC_RECORD = """
def f():
    with __record__("f"):
        return None
"""
LOOP_BASE = """
def loop(n):
    for i in range(n):
        pass
"""
LOOP_PROBED = """
def loop(n):
    for i in range(n):
        if __sp_on__: __sp_mark__(2)
"""
DRIVER = """
def run(n):
    t0 = perf_counter_ns()
    for _ in range(n):
        f()
    return perf_counter_ns() - t0
"""
# The same, inside an open region: every visit of f is nested (depth 2), as most regions are.
DRIVER_NESTED = """
def run(n):
    if __sp_on__: __sp_enter__(3)
    try:
        t0 = perf_counter_ns()
        for _ in range(n):
            f()
        return perf_counter_ns() - t0
    finally:
        if __sp_on__: __sp_exit__(3)
"""


def compile_fn(src: str, env: dict, name: str, nested: bool = False):
    g = dict(env)
    from time import perf_counter_ns

    g["perf_counter_ns"] = perf_counter_ns
    exec(src, g)
    if name == "f":
        exec(DRIVER_NESTED if nested else DRIVER, g)
        return g["run"]
    fn = g[name]

    def run(n):
        t0 = perf_counter_ns()
        fn(n)
        return perf_counter_ns() - t0

    return run


def measure(runners: dict, calls: int, repeat: int) -> dict[str, list[float]]:
    """ns per call of each runner in each of `repeat` interleaved rounds (the order reversed every
    other round, so that no runner always follows the same one)."""
    samples: dict[str, list[float]] = {k: [] for k in runners}
    order = list(runners.items())
    for i in range(repeat):
        for k, run in order if i % 2 == 0 else order[::-1]:
            samples[k].append(run(calls) / calls)
    return samples


class Added(NamedTuple):
    """A variant against the baseline of the same rounds."""

    median: float  # median over rounds of (variant - baseline of that round), ns per call
    best: float  # best variant time - best baseline time, ns per call
    ratio: float  # median over rounds of variant / baseline of that round


def added(samples: list[float], base: list[float]) -> Added:
    return Added(statistics.median(v - b for v, b in zip(samples, base)), min(samples) - min(base),
                 statistics.median(v / b for v, b in zip(samples, base)))


def with_state(setup, run):
    """`run`, with `setup()` called before each sample, outside its timed window."""
    def wrapped(n):
        setup()
        return run(n)

    return wrapped


def backend_env(mod, on: bool) -> dict:
    mod.ensure_capacity(8)
    for rid in (1, 2, 3):
        mod.set_off(rid, False)
    return {"__sp_on__": on, "__sp_enter__": mod.enter, "__sp_exit__": mod.exit, "__sp_mark__": mod.mark}


class _Rotations:
    """GPU rotations on a fake GPU, installed on probe environments as runtime.series does under
    SCALEPROBE_GPU=fake. Works with the code before review 33 M2 too (no backend argument: then
    the rotation wraps the environment's probes in Python)."""

    TARGET = 4  # a region no runner visits: every measured region is not the target

    def __init__(self) -> None:
        self.rots: list = []

    def env(self, mod, budget: int = 4) -> tuple[dict, object]:
        from types import SimpleNamespace

        from runtime.gpu import FakeBackend, GpuTimer, Rotation

        g = backend_env(mod, True)
        rec = SimpleNamespace(regions={r: ("function", f"r{r}", "bench.py", r, "bench") for r in (1, 3, self.TARGET)},
                              region_totals={}, throttled={})
        try:
            rot = Rotation(GpuTimer(FakeBackend()), rec, budget=budget, backend=mod)
        except TypeError:  # before M2: the rotation always wraps
            rot = Rotation(GpuTimer(FakeBackend()), rec, budget=budget)
        rot.install(g)
        rot.target[0] = self.TARGET
        self.rots.append(rot)
        return g, rot

    @staticmethod
    def clear(mod) -> None:
        """No rotation: the backend calls no GPU hooks (what a program without CUDA runs)."""
        if hasattr(mod, "set_gpu_hooks"):
            mod.set_gpu_hooks(None, None)

    @staticmethod
    def activate(mod, rot, target: int) -> None:
        """`rot`'s hooks installed on the backend, `target` its target region (before review 33 M2
        the rotation wraps the environment's probes instead: nothing global to set)."""
        rot.target[0] = target
        if getattr(rot, "_hooked", False):
            mod.set_gpu_hooks(rot.on_enter, rot.on_exit)
            mod.set_gpu_target(target)

    def runner(self, mod, nested: bool):
        """f, not the target, with the rotation installed."""
        g, rot = self.env(mod)
        return with_state(lambda: self.activate(mod, rot, self.TARGET), compile_fn(FUNC_PROBED, g, "f", nested=nested))

    def target_runner(self, mod, nested: bool):
        """f is the target itself, its budget spent: what each further visit of the target costs."""
        g, rot = self.env(mod)
        inner = compile_fn(FUNC_PROBED, g, "f", nested=nested)

        def run(n):
            self.activate(mod, rot, 1)
            rot.left[0] = 0
            try:
                return inner(n)
            finally:
                self.activate(mod, rot, self.TARGET)

        return run

    def close(self, backends) -> None:
        for rot in self.rots:
            rot.target[0] = -1
        for mod in backends.values():
            if hasattr(mod, "set_gpu_hooks"):
                mod.set_gpu_hooks(None, None)


def micro(calls: int, repeat: int) -> list[tuple[str, Added, float | None]]:
    from runtime import _pyprobe

    backends = {"python": _pyprobe}
    try:
        from runtime import _cprobe

        backends = {"C": _cprobe, **backends}
    except ImportError:
        print("note: C backend not built (python setup.py build_ext --inplace); pure Python only")
    rotations = _Rotations()

    def plain(mod, src, on, nested=False):
        """Measured with no rotation installed (the rotations below are the backend's global state)."""
        return with_state(lambda: rotations.clear(mod), compile_fn(src, backend_env(mod, on), "f", nested=nested))

    runners = {"base": compile_fn(FUNC_BASE, {}, "f")}
    for name, mod in backends.items():
        runners[f"probe {name}"] = plain(mod, FUNC_PROBED, True, nested=True)
        runners[f"probe {name}, outermost"] = plain(mod, FUNC_PROBED, True)
        runners[f"probe {name} off"] = plain(mod, FUNC_PROBED, False)
    for name, mod in backends.items():
        runners[f"probe {name}, GPU rotation"] = rotations.runner(mod, nested=True)
        runners[f"probe {name}, GPU rotation, target"] = rotations.target_runner(mod, nested=True)
    try:
        import nvtx

        dom = nvtx.get_domain("bench")
        attr = dom.get_event_attributes(message="f")
        runners["nvtx push/pop"] = compile_fn(FUNC_NVTX, {"__push__": dom.push_range, "__pop__": dom.pop_range, "__attr__": attr}, "f")
    except ImportError:
        print("note: nvtx not installed")
    try:
        import torch

        runners["torch record_function"] = compile_fn(FUNC_RECORD, {"__record__": torch.profiler.record_function}, "f")
    except ImportError:
        print("note: torch not installed")
    loops = {"loop base": compile_fn(LOOP_BASE, {}, "loop")}
    for name, mod in backends.items():
        loops[f"loop {name}"] = with_state(lambda mod=mod: rotations.clear(mod),
                                           compile_fn(LOOP_PROBED, backend_env(mod, True), "loop"))
        loops[f"loop {name} off"] = with_state(lambda mod=mod: rotations.clear(mod),
                                               compile_fn(LOOP_PROBED, backend_env(mod, False), "loop"))
    slow = {k for k in runners if "record_function" in k}
    fast = {k: v for k, v in runners.items() if k not in slow}
    try:
        res = measure(fast, calls, repeat)
        # the slow runner's own rounds, with fewer calls, and the baseline of those same rounds
        slow_res = measure({"base": runners["base"], **{k: runners[k] for k in slow}}, max(calls // 20, 1000), repeat) \
            if slow else {}
        lres = measure(loops, calls, repeat)
    finally:
        rotations.close(backends)
        for mod in backends.values():  # the measured visits are not a profile anyone wants
            mod.reset_after_fork()
    rows = []
    targets = {"probe C": 120, "probe python": 120, "probe C, outermost": 120, "probe python, outermost": 120,
               "probe C off": 10, "probe python off": 10, "probe C, GPU rotation": 120}
    for k, v in res.items():
        if k != "base":
            rows.append((f"function region: {k}", added(v, res["base"]), targets.get(k)))
    for k, v in slow_res.items():
        if k != "base":
            rows.append((f"function region: {k}", added(v, slow_res["base"]), targets.get(k)))
    ltargets = {"loop C": 40, "loop python": 40, "loop C off": 10, "loop python off": 10}
    for k, v in lres.items():
        if k != "loop base":
            rows.append((f"loop iteration: {k}", added(v, lres["loop base"]), ltargets.get(k)))
    med = statistics.median
    print(f"baseline: empty call {med(res['base']):.1f} ns, empty loop iteration {med(lres['loop base']):.1f} ns"
          f" (medians of {repeat} rounds)" + (f"; in the record_function rounds {med(slow_res['base']):.1f} ns" if slow else ""))
    print("GPU rotation on (SCALEPROBE_GPU=fake), a region that is not the target, against the same probe with no"
          " rotation installed\n(same interleaved rounds, medians; 1.00x: the rotation costs it nothing):")
    for name in backends:
        plain, rot = res[f"probe {name}"], res[f"probe {name}, GPU rotation"]
        a_plain, a_rot = added(plain, res["base"]), added(rot, res["base"])
        per_round = med(r / p for r, p in zip(rot, plain))
        print(f"  {name:<7} added +{a_rot.median:.1f} ns vs +{a_plain.median:.1f} ns:"
              f" {a_rot.median / a_plain.median if a_plain.median > 0 else float('nan'):.2f}x;"
              f" time per call {per_round:.2f}x the probe's without the rotation")
    return rows


def app_overhead(steps: int, reps: int) -> None:
    sample = REPO / "testdata" / "sample_code"
    if not (sample / "main.py").exists() or not (REPO / "instrumentor" / "cli.py").exists():
        print("\nsample application or instrumentor missing: step overhead skipped")
        return
    tmp = Path(tempfile.mkdtemp(prefix="sp-bench-"))
    build = tmp / "build"
    p = subprocess.run([sys.executable, "-m", "instrumentor.cli", str(sample), "-o", str(build)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or not (build / "main.py").exists():
        print(f"\ninstrumenting the sample failed (exit {p.returncode}): step overhead skipped\n{p.stderr[-2000:]}")
        return
    driver = tmp / "driver.py"
    driver.write_text(STEP_DRIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp / "runs"), SCALEPROBE_QUIET="1", OMP_NUM_THREADS="1")
    args = ["--epochs", "2", "--steps-per-epoch", str(steps), "--model", "mlp", "--batch-size", "8", "--threads", "1",
            "--num-samples", str(8 * steps), "--eval-samples", "8"]
    med: dict[str, list[float]] = {"original": [], "instrumented": []}
    cpu: dict[str, list[float]] = {"original": [], "instrumented": []}
    for _ in range(reps):
        for label, src in (("original", sample), ("instrumented", build)):
            p = subprocess.run([sys.executable, str(driver), str(src), *args], env=env, capture_output=True,
                               text=True, timeout=600, cwd=tmp)
            if p.returncode != 0:
                print(f"\n{label} sample run failed: step overhead skipped\n{p.stderr[-2000:]}")
                return
            res = json.loads(p.stdout.strip().splitlines()[-1])
            med[label].append(res["median_step_ns"])
            cpu[label].append(res["median_step_cpu_ns"])
    print(f"\ntraining step (sample app, mlp, batch 8, {steps} steps x 2 epochs, {reps} alternating runs each,")
    print("one torch thread, in-process data loading; a step is one whole loop iteration;")
    print(" median over runs of each run's median step):")
    for what, d in (("wall time", med), ("CPU time of the training thread", cpu)):
        o, i = statistics.median(d["original"]), statistics.median(d["instrumented"])
        print(f"  {what:<32} original {o / 1e3:9.1f} us, instrumented {i / 1e3:9.1f} us: {100 * (i - o) / o:+6.2f}%  (target < 3%)")
    print("  (on a shared, loaded machine wall time swings by 2x between runs; the CPU time is the steadier figure)")


GPU_APP = r'''
import sys, time

flush = None
if "runtime.probe" in sys.modules:  # instrumented: a flush after the first steps applies throttling
    from runtime.probe import flush


def leaf(x):
    return x + 1


def work(n):
    s = 0
    for i in range(n):
        s = leaf(s)
    return s


def train(steps, n):
    best = None
    for step in range(steps):  # scaleprobe: step
        if step == 2 and flush is not None:
            flush()
        t0 = time.perf_counter_ns()
        work(n)
        dt = (time.perf_counter_ns() - t0) / n
        if step >= 3:
            best = dt if best is None else min(best, dt)
    print(best)


if __name__ == "__main__":
    train(int(sys.argv[1]), int(sys.argv[2]))
'''


def gpu_app(reps: int, steps: int = 40, calls: int = 20000) -> None:
    """The review's measurement (review 33, M2): ns per call of a leaf function, best step of a
    run, in the original program and instrumented with SCALEPROBE_GPU=0 and =fake, with the leaf
    timed and with it throttled; `reps` alternating runs each, best run. A step's target is one
    of 3 regions (train, work, leaf): the best step is one where the leaf is not the target."""
    tmp = Path(tempfile.mkdtemp(prefix="sp-gpu-bench-"))
    src, build = tmp / "src", tmp / "build"
    src.mkdir()
    (src / "main.py").write_text(GPU_APP)
    p = subprocess.run([sys.executable, "-m", "instrumentor.cli", str(src), "-o", str(build)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or not (build / "main.py").exists():
        print(f"\ninstrumenting the GPU program failed (exit {p.returncode}): skipped\n{p.stderr[-2000:]}")
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp / "runs"), SCALEPROBE_QUIET="1",
               SCALEPROBE_FLUSH_INTERVAL="0")
    timed = {"SCALEPROBE_THROTTLE_CALLS": "0"}
    throttled = {"SCALEPROBE_THROTTLE_CALLS": "1000", "SCALEPROBE_THROTTLE_NS": "1000000"}
    variants = {
        "original": (src, {}),
        "GPU=0": (build, {"SCALEPROBE_GPU": "0", **timed}),
        "GPU=fake": (build, {"SCALEPROBE_GPU": "fake", **timed}),
        "GPU=0, leaf throttled": (build, {"SCALEPROBE_GPU": "0", **throttled}),
        "GPU=fake, leaf throttled": (build, {"SCALEPROBE_GPU": "fake", **throttled}),
    }
    best: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for label, (where, extra) in variants.items():
            p = subprocess.run([sys.executable, str(where / "main.py"), str(steps), str(calls)], env={**env, **extra},
                               capture_output=True, text=True, timeout=600, cwd=tmp)
            if p.returncode != 0:
                print(f"\n{label} run failed: skipped\n{p.stderr[-2000:]}")
                return
            best[label].append(float(p.stdout.strip().splitlines()[-1]))
    b = {k: min(v) for k, v in best.items()}
    print(f"\nGPU rotation in a program (leaf function, {steps} steps of {calls} calls, best step of a run, best of {reps}"
          " alternating runs):")
    print(f"  original {b['original']:.1f} ns per call")
    for kind in ("", ", leaf throttled"):
        plain, fake = b[f"GPU=0{kind}"] - b["original"], b[f"GPU=fake{kind}"] - b["original"]
        print(f"  {kind[2:] or 'leaf timed'}: probes +{plain:.1f} ns, with the GPU rotation (SCALEPROBE_GPU=fake) +{fake:.1f} ns:"
              f" {fake / plain if plain > 0 else float('nan'):.2f}x")


# Times whole training iterations (data loading, step, bookkeeping) the same way in both builds:
# from one Trainer.train_step call to the next within an epoch.
STEP_DRIVER = r'''
import json, runpy, statistics, sys, time
src = sys.argv[1]
steps = int(sys.argv[sys.argv.index("--steps-per-epoch") + 1])
sys.path.insert(0, src)
sys.argv = [src + "/main.py"] + sys.argv[2:]
import train
orig = train.Trainer.train_step
marks = []
def timed(self, *a, **k):
    marks.append((time.perf_counter_ns(), time.thread_time_ns()))
    return orig(self, *a, **k)
train.Trainer.train_step = timed
try:
    runpy.run_path(src + "/main.py", run_name="__main__")
except SystemExit as e:
    if e.code not in (0, None):
        raise
wall, cpu = [], []
for i in range(len(marks) - 1):
    if (i + 1) % steps == 0 or i % steps < steps // 4:
        continue  # crosses an epoch end, or an early step paying for lazy initialisation
    wall.append(marks[i + 1][0] - marks[i][0])
    cpu.append(marks[i + 1][1] - marks[i][1])
print(json.dumps({"median_step_ns": statistics.median(wall), "median_step_cpu_ns": statistics.median(cpu),
                  "steps": len(marks)}))
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=positive_int, default=2000, help="calls per sample (default 2000)")
    ap.add_argument("--repeat", type=positive_int, default=200, help="interleaved samples per variant (default 200)")
    ap.add_argument("--no-app", action="store_true", help="skip the sample-application step overhead")
    ap.add_argument("--app-steps", type=positive_int, default=30)
    ap.add_argument("--app-reps", type=positive_int, default=5)
    ap.add_argument("--gpu-app", action="store_true",
                    help="also time an instrumented program with SCALEPROBE_GPU=0 and =fake against the original")
    ap.add_argument("--gpu-app-reps", type=positive_int, default=5)
    ap.add_argument("--no-micro", action="store_true", help="skip the per-visit figures")
    a = ap.parse_args(argv)
    if not a.no_micro:
        rows = micro(a.calls, a.repeat)
        print(f"{'added per visit':<52}{'ns median':>10}{'ns best':>9}{'x base':>8}  target (on the median)")
        for name, add, target in rows:
            verdict = "" if target is None else (f"<= {target}  " + ("ok" if add.median <= target else "MISSED"))
            print(f"{name:<52}{add.median:>10.1f}{add.best:>9.1f}{add.ratio:>7.2f}x  {verdict}")
    if a.gpu_app:
        gpu_app(a.gpu_app_reps)
    if not a.no_app:
        app_overhead(a.app_steps, a.app_reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
