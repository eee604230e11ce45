"""Review 93 MED-1: with SCALEPROBE_TRACE=1 the regions of the manual API (runtime/manual.py) had no
events: runtime/trace.py wrapped only the instrumented modules' `__sp_enter__`/`__sp_exit__`, while
the manual API calls the backend's probes, so a program that used only the manual API had a
timeline of steps only. Its visits now go through the same wrappers (`Tracer.enter`/`Tracer.exit`),
on the same per-thread stacks: nesting, threads, throttled regions, SCALEPROBE_TRACE_MAX, probes
switched off and on, hand-overs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''\
import asyncio, threading
from runtime.manual import region, epoch, step
from runtime.probe import set_enabled, flush


@region("decorated")
def decorated():
    with region("inner_of_decorated"):
        pass


@region("gen")
def gen():
    yield 1
    yield 2


@region("coro")
async def coro():
    await asyncio.sleep(0)


@region("comm_fn", kind="comm")
def comm_fn():
    pass


def worker():
    with region("in_thread"):
        decorated()


with region("outer"):
    with region("nested"):
        decorated()
    with region("exchange", kind="comm"):
        pass
    comm_fn()
    assert list(gen()) == [1, 2]
    asyncio.run(coro())
    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()

with epoch():
    with step():
        with region("in_step"):
            pass

# a region throttled at a flush (SCALEPROBE_THROTTLE_CALLS=100): no event after it, the visits
# around it keep theirs
tiny = region("tiny")
for i in range(300):
    with tiny:
        pass
flush()
with region("after_throttle"):
    for i in range(5):
        with tiny:
            pass

# left while the probes are off: no event, counted in trace_unmatched (as the profile drops it)
with region("spans_off"):
    set_enabled(False)
    with region("while_off"):
        pass
set_enabled(True)
with region("after_on"):
    pass


@region("switches_off")
def switches_off():
    set_enabled(False)


switches_off()  # (the decorator's visit: the same)
set_enabled(True)

# open while the probes were off, left once they are on again: no event, trace_unmatched
across = region("across")
across.__enter__()
set_enabled(False)
set_enabled(True)
across.__exit__(None, None, None)

# begun while the probes were off: no event, nothing counted
set_enabled(False)
begun_off = region("begun_off")
begun_off.__enter__()
set_enabled(True)
begun_off.__exit__(None, None, None)

# never entered: nothing
region("never").__exit__(None, None, None)

# entered here, left on another thread (a hand-over): the visit, and its event, are this thread's
handed = region("handed")
handed.__enter__()
taker = threading.Thread(target=lambda: handed.__exit__(None, None, None), name="taker")
taker.start()
taker.join()
'''


def _run(tmp_path: Path, program: str, **env: str):
    (tmp_path / "prog.py").write_text(program)
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_TRACE="1",
                                     SCALEPROBE_OUT=str(tmp_path / "out"), **env))
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    assert run.problems == [], run.problems
    names = {rid: r.name for rid, r in run.regions.items()}
    by_name: dict[str, list] = {}
    for rid, t0, t1, tid in run.events:
        by_name.setdefault(names[rid], []).append((t0, t1, tid))
    visits: dict[str, int] = {}
    for path, s in run.profile.items():
        visits[names[path[-1]]] = visits.get(names[path[-1]], 0) + s.visits
    return run, by_name, visits, p.stderr


def _inside(e, around) -> bool:
    return around[2] == e[2] and around[0] <= e[0] and e[1] <= around[1]


def _assert_nested(events) -> None:
    """Every event lies inside or outside every other of its thread, never across."""
    for a in events:
        for b in events:
            if a is b or a[3] != b[3]:
                continue
            assert (b[1] <= a[1] and a[2] <= b[2]) or a[2] <= b[1] or b[2] <= a[1] or (
                a[1] <= b[1] and b[2] <= a[2]), (a, b)


@pytest.mark.parametrize("pure,nvtx", [("0", "0"), ("1", "0"), ("0", "1")])
def test_the_manual_apis_regions_have_events(tmp_path, pure, nvtx):
    run, ev, visits, stderr = _run(tmp_path, PROGRAM, SCALEPROBE_PURE=pure, SCALEPROBE_NVTX=nvtx,
                                   SCALEPROBE_THROTTLE_CALLS="100")
    assert "outer" in ev, f"no event of the manual API's regions: {sorted(ev)}"  # (before: none at all)
    [main] = [tid for tid, name in run.threads.items() if name == "MainThread"]
    [worker] = [tid for tid, name in run.threads.items() if name == "worker"]
    [outer] = ev["outer"]
    assert outer[2] == main
    [nested] = ev["nested"]
    assert _inside(nested, outer)
    # the decorator: one on the main thread inside `nested`, one in the worker thread inside `in_thread`
    [in_thread] = ev["in_thread"]
    assert in_thread[2] == worker and _inside(in_thread, outer[:2] + (worker,))
    d_main, d_worker = sorted(ev["decorated"], key=lambda e: e[2] != main)
    assert _inside(d_main, nested) and _inside(d_worker, in_thread)
    inner = ev["inner_of_decorated"]
    assert len(inner) == 2 and all(any(_inside(i, d) for d in (d_main, d_worker)) for i in inner)
    # comm regions (context manager, decorator): events, and their calls
    [exchange] = ev["exchange"]
    [comm_fn] = ev["comm_fn"]
    assert _inside(exchange, outer) and _inside(comm_fn, outer)
    assert {c["op"] for c in run.comms} >= {"exchange", "comm_fn"}
    # a generator's and a coroutine's resumptions: one event each (3: to 1, to 2, to its end)
    assert len(ev["gen"]) == 3 and all(_inside(g, outer) for g in ev["gen"])
    assert len(ev["coro"]) == 2 and all(_inside(c, outer) for c in ev["coro"])
    # inside a `with step():` block
    [in_step] = ev["in_step"]
    [st] = run.steps
    assert st["start_ns"] <= in_step[0] and in_step[1] <= st["start_ns"] + st["duration_ns"]
    # throttled at the flush: its events are those before it, none inside `after_throttle`
    assert [run.regions[r].name for r in run.throttled] == ["tiny"]
    [after] = ev["after_throttle"]
    assert len(ev["tiny"]) == 300 and all(t[1] <= after[0] for t in ev["tiny"])
    # probes switched off and on
    for name in ("spans_off", "while_off", "switches_off", "across", "begun_off", "never"):
        assert name not in ev, (name, ev.get(name))
    [after_on] = ev["after_on"]
    assert after_on[2] == main
    # spans_off, switches_off, across
    assert (run.end["trace_dropped"], run.end["trace_unmatched"]) == (0, 3), run.end
    # handed over: the visit (and its event) of the thread that entered it
    [handed] = ev["handed"]
    assert handed[2] == main and handed[0] < handed[1]
    assert "never entered" in stderr
    # every visit the profile counts is an event
    for name in ("outer", "nested", "decorated", "inner_of_decorated", "exchange", "comm_fn", "gen", "coro",
                 "in_thread", "in_step", "after_throttle", "after_on", "handed"):
        assert visits[name] == len(ev[name]), (name, visits[name], len(ev[name]))
    assert visits["tiny"] == 300
    _assert_nested(run.events)


TRACE_MAX = '''\
from runtime.manual import region

with region("main"):
    for i in range(20):
        with region("leaf"):
            with region("leafier"):
                pass
'''


def test_trace_max_refuses_the_manual_apis_visits_as_the_instrumented_ones(tmp_path):
    run, ev, visits, _ = _run(tmp_path, TRACE_MAX, SCALEPROBE_TRACE_MAX="7")
    # the outermost is kept; then the first visits while the events and open visits stay below 7
    assert len(ev["main"]) == 1
    assert len(ev["leaf"]) == 3 and len(ev["leafier"]) == 3
    assert len(run.events) + run.end["trace_dropped"] == visits["main"] + visits["leaf"] + visits["leafier"] == 41
    assert run.end["trace_unmatched"] == 0
    _assert_nested(run.events)


def test_the_manual_tracer_probes_are_the_backends_traced():
    """Unit: `Tracer.enter`/`Tracer.exit` keep the same stacks as a module's wrappers; `drop` and
    `exit_elsewhere` take the entries off them."""
    import threading
    from types import SimpleNamespace

    from runtime.trace import Tracer

    t = Tracer(SimpleNamespace(throttled={}), 10**9)
    g = {"__sp_enter__": lambda rid: None, "__sp_exit__": lambda rid: None}
    t.install(g)
    assert g["__sp_enter__"] is not t.enter
    seen = []
    # (the backend's probes stand in for: the backend's own state is this test process's)
    t.enter, t.exit = t._probes(seen.append, lambda rid: seen.append(-rid) or (False if rid == 9 else None))
    t.enter(1)
    g["__sp_enter__"](2)
    g["__sp_exit__"](2)
    assert t.exit(1) is None and t.exit(9) is False  # (its result: the manual API's "not open here")
    assert seen == [1, -1, -9] and [e[0] for e in t.events] == [2, 1]
    # drop: the innermost entry of the region and those above it, counted unmatched
    t.enter(1), g["__sp_enter__"](2), g["__sp_enter__"](3)
    t.drop(2)
    assert (t.unmatched, t._tl.stack[-1][0]) == (2, 1)
    t.exit(1)
    assert len(t.events) == 3
    # exit_elsewhere: the owner's entry ends, as the owner's event
    th = threading.Thread(target=t.exit_elsewhere, args=(threading.get_ident(), 4, 10**18))
    t.enter(4)
    th.start()
    th.join()
    assert t.events[-1][0::2] == (4, 10**18) and t.events[-1][3] == threading.get_native_id()
    assert t._tl.stack == [] and len(t.events) == 4
