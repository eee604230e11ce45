"""Added cost per suspension of an instrumented generator or coroutine (each yield/await leaves
the regions open around it and re-enters them after), against the original code in the same run.

    .venv/bin/python benchmarks/suspend_overhead.py [--calls N] [--repeat R] [--backend c|python|both]

The cases are rewritten by the instrumentor itself and run against the real probe backend (the C
extension, or the pure-Python one with SCALEPROBE_PURE=1, each in a process of its own); only the
module's `define` is left out (probes on, no recorder). A case's figure is the best time per
suspension over interleaved rounds, original and instrumented alternating: on a shared machine
other processes only ever add time. Look at the ratios and the added nanoseconds, not at the
absolute figures.

- `yield, unrolled`: a generator of 50 `yield` statements, consumed by a `for` loop.
- `yield in a loop`: `for i in range(n): yield i` (also pays the loop's mark per iteration).
- `one yield per generator`: a generator that yields once, made and run to its end each time (its
  function region's probes, and the frame object the runtime keys it by, are part of the figure).
- `x = yield i in a loop`: the same with `send`.
- `await, unrolled`: a coroutine of 50 `await ready` statements; `ready.__await__` finishes at once.
- `await in a loop`: `for i in range(n): await ready`.
- `await in an expression`: `total += (await ready) or 1` (re-entered in place, statement guarded).
- `async for, async generator`: `async for i in agen(n)` over `async def agen(n): for i in
  range(n): yield i` (the loop's wrapper leaves and re-enters the regions around each step, and the
  generator's own yield suspends). With the C extension `runtime._asyncwrap`, a last line compares
  its wrapper (a frameless C awaitable) with the pure-Python one (a coroutine, which the runtime
  uses without the extension), in the same rounds: a ratio below 1.00 is the C one's gain.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (benchmarks/_args.py)

from _args import positive_int  # noqa: E402

UNROLLED = 50

CASES = f'''
class Ready:
    def __await__(self):
        return iter(())

ready = Ready()

def unrolled():
{"".join(f"    yield {i}{chr(10)}" for i in range(UNROLLED))}
def looped(n):
    for i in range(n):
        yield i

def once():
    yield 1

def sent(n):
    total = 0
    for i in range(n):
        x = yield i
        total += x
    return total

async def awaits():
{"".join(f"    await ready{chr(10)}" for i in range(UNROLLED))}
async def awaited(n):
    for i in range(n):
        await ready

async def in_expression(n):
    total = 0
    for i in range(n):
        total += (await ready) or 1
    return total

async def agen(n):
    for i in range(n):
        yield i

async def async_for(n):
    total = 0
    async for i in agen(n):
        total += i
    return total
'''

DRIVERS = '''
from time import perf_counter_ns

def run_unrolled(n):
    rounds = n // {u}
    t0 = perf_counter_ns()
    for _ in range(rounds):
        for _ in unrolled():
            pass
    return perf_counter_ns() - t0, rounds * {u}

def run_looped(n):
    t0 = perf_counter_ns()
    for _ in looped(n):
        pass
    return perf_counter_ns() - t0, n

def run_once(n):
    t0 = perf_counter_ns()
    for _ in range(n):
        for _ in once():
            pass
    return perf_counter_ns() - t0, n

def run_sent(n):
    g = sent(n)
    t0 = perf_counter_ns()
    next(g)
    try:
        while True:
            g.send(1)
    except StopIteration:
        pass
    return perf_counter_ns() - t0, n

def drive(coro):
    try:
        coro.send(None)
    except StopIteration:
        pass

def run_awaits(n):
    rounds = n // {u}
    t0 = perf_counter_ns()
    for _ in range(rounds):
        drive(awaits())
    return perf_counter_ns() - t0, rounds * {u}

def run_awaited(n):
    t0 = perf_counter_ns()
    drive(awaited(n))
    return perf_counter_ns() - t0, n

def run_in_expression(n):
    t0 = perf_counter_ns()
    drive(in_expression(n))
    return perf_counter_ns() - t0, n

def run_async_for(n):
    t0 = perf_counter_ns()
    drive(async_for(n))
    return perf_counter_ns() - t0, n
'''.format(u=UNROLLED)

LABELS = {
    "run_unrolled": "yield, unrolled",
    "run_looped": "yield in a loop",
    "run_once": "one yield per generator",
    "run_sent": "x = yield i in a loop",
    "run_awaits": "await, unrolled",
    "run_awaited": "await in a loop",
    "run_in_expression": "await in an expression",
    "run_async_for": "async for, async generator",
}


def namespaces() -> tuple[dict, dict]:
    from instrumentor.regions import IdAllocator
    from instrumentor.transform import instrument_source

    result = instrument_source(textwrap.dedent(CASES), "cases.py", ids=IdAllocator(range(100)))
    assert result.status == "instrumented", result.error
    # the module as written, less `define` (no recorder): probes on
    code = "".join(
        "__sp_on__ = True\n" if line.startswith("__sp_on__ = __sp_define__(") else line
        for line in result.code.splitlines(keepends=True)
    )
    plain: dict = {"__name__": "cases"}
    exec(compile(CASES, "cases.py", "exec"), plain)
    exec(DRIVERS, plain)
    probed: dict = {"__name__": "cases"}
    exec(compile(code, "cases.py", "exec"), probed)
    exec(DRIVERS, probed)
    return plain, probed


def measure(calls: int, repeat: int) -> None:
    from runtime import _backend, probe

    plain, probed = namespaces()
    best: dict[tuple[str, str], float] = {}
    wrappers = {"frameless": probe._AsyncIter}
    if probe._around is not None:
        wrappers["coroutine"] = probe._AsyncIterCoro
    try:
        for _ in range(repeat):
            for name in LABELS:
                for label, ns in (("original", plain), ("instrumented", probed)):
                    took, n = ns[name](calls)
                    key = (name, label)
                    best[key] = min(best.get(key, float("inf")), took / n)
            for label, cls in wrappers.items():  # (looked up at each `async for`)
                probe._AsyncIter = cls
                took, n = probed["run_async_for"](calls)
                best[("wrapper", label)] = min(best.get(("wrapper", label), float("inf")), took / n)
            probe._AsyncIter = wrappers["frameless"]
    finally:
        probe._AsyncIter = wrappers["frameless"]
    _backend.impl.reset_after_fork()  # the measured visits are not a profile anyone wants
    print(f"backend {_backend.NAME} (Python {sys.version.split()[0]}): ns per suspension, best of {repeat} rounds")
    print(f"  {'case':<26}{'original':>10}{'instrumented':>14}{'added':>9}{'ratio':>8}")
    for name, label in LABELS.items():
        o, i = best[(name, "original")], best[(name, "instrumented")]
        print(f"  {label:<26}{o:10.1f}{i:14.1f}{i - o:9.1f}{i / o:8.2f}")
    if "coroutine" in wrappers:
        c, f = best[("wrapper", "coroutine")], best[("wrapper", "frameless")]
        print(f"  async for wrapper: frameless C {f:.1f} ns per step, coroutine {c:.1f}: ratio {f / c:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=positive_int, default=2000, help="suspensions per sample (default 2000)")
    ap.add_argument("--repeat", type=positive_int, default=100, help="interleaved samples per case (default 100)")
    ap.add_argument("--backend", choices=("c", "python", "both"), default="both")
    a = ap.parse_args(argv)
    if a.backend != "both" and os.environ.get(_CHILD) == a.backend:
        from runtime import _backend

        if _backend.NAME != a.backend:  # SCALEPROBE_PURE=0 and the C extension not built
            print(f"--backend {a.backend}: the {_backend.NAME} backend is what this process has"
                  " (python setup.py build_ext --inplace builds the C one)", file=sys.stderr)
            return 1
        measure(a.calls, a.repeat)
        return 0
    # The backend is chosen once per process, from SCALEPROBE_PURE: each is measured in a process
    # started with it set (review 75 F7: `--backend python` by hand measured the C one).
    for backend in ("c", "python") if a.backend == "both" else (a.backend,):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
        env.update(PYTHONPATH=str(REPO), SCALEPROBE_PURE="1" if backend == "python" else "0", SCALEPROBE_QUIET="1")
        env[_CHILD] = backend
        args = [sys.executable, __file__, "--calls", str(a.calls), "--repeat", str(a.repeat), "--backend", backend]
        done = subprocess.run(args, env=env)
        if done.returncode:
            return done.returncode
    return 0


_CHILD = "SUSPEND_OVERHEAD_BACKEND"  # set in the process that measures one backend


if __name__ == "__main__":
    sys.exit(main())
