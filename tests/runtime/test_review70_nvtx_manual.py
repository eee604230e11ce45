"""Review 70: SCALEPROBE_NVTX ranges (F1, F2), the manual API (F3, F4, F7, F8, F11) and the
launcher's --nsys and NVTX-build messages (F5, F9)."""
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from runtime.errors import ScaleprobeRuntimeError
from runtime.manual import Timer
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# Records nvtx's domain push/pop per thread (no tool is attached, so nvtx itself keeps nothing).
RECORD_NVTX = """
import atexit, json, os, threading
import nvtx
EVENTS = []
class _Domain:
    def __init__(self, name): self.name = name
    def get_event_attributes(self, message=None, **kw): return ("attrs", message)
    def push_range(self, attrs=None): EVENTS.append((threading.get_ident(), "push", attrs[1]))
    def pop_range(self): EVENTS.append((threading.get_ident(), "pop", None))
nvtx.get_domain = lambda name=None: _Domain(name)
atexit.register(lambda: json.dump(EVENTS, open(os.environ["REC_OUT"], "w")))
"""


def run_py(code, tmp_path, env=None, args=(), timeout=120):
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_QUIET="1",
             REC_OUT=str(tmp_path / "nvtx.json"))
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *args], env=e, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


def nvtx_stacks(tmp_path):
    """Replays the recorded events on NVTX's per-thread stacks: the pushes and pops in order (a pop
    named by the range it closes), the ranges left open per thread, and the pops below zero."""
    events = json.loads((tmp_path / "nvtx.json").read_text())
    stacks, seq, underflow = {}, [], 0
    for tid, op, name in events:
        st = stacks.setdefault(tid, [])
        if op == "push":
            st.append(name)
            seq.append("+" + name)
        elif st:
            seq.append("-" + st.pop())
        else:
            underflow += 1
    return seq, {t: s for t, s in stacks.items() if s}, underflow


def profile_by_name(tmp_path):
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    out = {}
    for path, st in run.profile.items():
        out[run.regions[path[-1]].name] = st
    return run, out


# ----- F1: a pop only ends a range its region pushed ---------------------------------------------------

F1_CODE = RECORD_NVTX + """
import sys
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__, set_enabled
__sp_on__ = __sp_define__(__name__, globals(), "m.py",
                          ((0, "function", "main", 1), (1, "function", "outer", 2), (2, "function", "inner", 3),
                           (3, "function", "stops", 4)))
def inner():
    if __sp_on__: __sp_enter__(2)
    try:
        return 1
    finally:
        if __sp_on__: __sp_exit__(2)
def outer():
    if __sp_on__: __sp_enter__(1)
    try:
        set_enabled(True)  # entered with probes off, left with them on: never pushed
        return inner()
    finally:
        if __sp_on__: __sp_exit__(1)
def stops():
    if __sp_on__: __sp_enter__(3)
    try:
        set_enabled(False)  # pushed, left with probes off: its range is not popped then
        return 0
    finally:
        if __sp_on__: __sp_exit__(3)
def main(case):
    if __sp_on__: __sp_enter__(0)
    try:
        if case == "entered-off":
            set_enabled(False)
            return outer() + inner()
        stops()
        set_enabled(True)
        return inner()
    finally:
        if __sp_on__: __sp_exit__(0)
print(main(sys.argv[1]))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_f1_exit_of_a_region_entered_with_probes_off_pops_nothing(tmp_path, pure):
    pytest.importorskip("nvtx")
    p = run_py(F1_CODE, tmp_path, {"SCALEPROBE_NVTX": "1", "SCALEPROBE_PURE": pure}, ["entered-off"])
    assert p.returncode == 0, p.stderr
    seq, left, underflow = nvtx_stacks(tmp_path)
    # before: outer's exit popped main's range, and main's exit popped below zero
    assert seq == ["+main", "+inner", "-inner", "+inner", "-inner", "-main"]
    assert (left, underflow) == ({}, 0)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_f1_a_range_left_while_probes_were_off_ends_with_its_enclosing_one(tmp_path, pure):
    pytest.importorskip("nvtx")
    p = run_py(F1_CODE, tmp_path, {"SCALEPROBE_NVTX": "1", "SCALEPROBE_PURE": pure}, ["left-off"])
    assert p.returncode == 0, p.stderr
    seq, left, underflow = nvtx_stacks(tmp_path)
    # before: main's exit popped `stops`' range, and main's own stayed open to the thread's end
    assert seq == ["+main", "+stops", "+inner", "-inner", "-stops", "-main"]
    assert (left, underflow) == ({}, 0)


# ----- F2: manual regions are NVTX ranges too -----------------------------------------------------------

F2_CODE = RECORD_NVTX + """
import asyncio, threading
from runtime.manual import region

@region("deco")
def f():
    with region("inner_with"):
        pass

@region("gen")
def gen(n):
    for i in range(n):
        yield i

@region("co")
async def co(i):
    await asyncio.sleep(0.01 * i)
    await asyncio.sleep(0)
    return i

async def both():
    return await asyncio.gather(co(1), co(2), co(3))

with region("outer_with", kind="comm"):
    f()
    assert list(gen(3)) == [0, 1, 2]
assert asyncio.run(both()) == [1, 2, 3]
a, b = region("A"), region("B")
a.__enter__(); b.__enter__(); a.__exit__(None, None, None); b.__exit__(None, None, None)  # misnested
t = threading.Thread(target=f); t.start(); t.join()
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_f2_manual_regions_push_and_pop_nvtx_ranges(tmp_path, pure):
    pytest.importorskip("nvtx")
    p = run_py(F2_CODE, tmp_path, {"SCALEPROBE_NVTX": "1", "SCALEPROBE_PURE": pure})
    assert p.returncode == 0, p.stderr
    seq, left, underflow = nvtx_stacks(tmp_path)
    assert (left, underflow) == ({}, 0)
    # before: no range at all (a program that only uses the manual API had none)
    assert seq[:6] == ["+outer_with", "+deco", "+inner_with", "-inner_with", "-deco", "+gen"]
    assert seq.count("+gen") == seq.count("-gen") == 4  # one per resumption
    assert seq.count("+co") == seq.count("-co") == 9
    assert all(seq[i + 1] == "-co" for i, s in enumerate(seq) if s == "+co")  # never across a suspension
    assert seq[-8:] == ["+A", "+B", "-B", "-A", "+deco", "+inner_with", "-inner_with", "-deco"]


HANDOVER_CODE = RECORD_NVTX + """
import queue, threading
from runtime.manual import region
work, done = queue.Queue(), queue.Queue()
def consumer():
    while True:
        r = work.get()
        if r is None:
            return
        r.__exit__(None, None, None)  # ends the visit the producer's thread opened
        done.put(True)
t = threading.Thread(target=consumer)
t.start()
r = region("item")
for i in range(50):
    r.__enter__()
    work.put(r)
    done.get(timeout=30)
work.put(None)
t.join()
with region("last"):
    pass
print(threading.get_ident())
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_f2_a_handed_over_region_range_is_popped_by_the_thread_that_pushed_it(tmp_path, pure):
    pytest.importorskip("nvtx")
    p = run_py(HANDOVER_CODE, tmp_path, {"SCALEPROBE_NVTX": "1", "SCALEPROBE_PURE": pure})
    assert p.returncode == 0, p.stderr
    main = int(p.stdout.split()[-1])
    events = json.loads((tmp_path / "nvtx.json").read_text())
    assert all(tid == main for tid, _, _ in events)  # NVTX pops only on the thread that pushed
    seq, left, underflow = nvtx_stacks(tmp_path)
    # each range ends at the producer's next push: the stack does not grow with the items handed over
    assert seq == ["+item", "-item"] * 49 + ["+item", "-item", "+last", "-last"]
    assert (left, underflow) == ({}, 0)
    _, prof = profile_by_name(tmp_path)
    assert prof["item"].visits == 50


# ----- F3: @region on generator, coroutine and async generator functions --------------------------------

F3_CODE = """
import asyncio, inspect, json, time, types
from runtime.manual import region
log = []

@region("gen")
def gen(n):
    got = []
    for i in range(n):
        time.sleep(0.01)
        got.append((yield i))
    return got

@region("catcher")
def catcher():
    try:
        yield 1
    except KeyError:
        yield "caught"
    finally:
        log.append("closed")

@region("co")
async def co():
    await asyncio.sleep(0.1)
    return 5

@region("slow")
async def slow():
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        log.append("cancel seen")
        raise

@region("agen")
async def agen(n):
    for i in range(n):
        await asyncio.sleep(0.01)
        yield i

@region("acatch")
async def acatch():
    try:
        yield 1
    except KeyError:
        yield "caught"
    finally:
        log.append("aclosed")

@region("tc")
@types.coroutine
def tc():
    yield
    return 7

out = {"kinds": [inspect.isgeneratorfunction(gen), inspect.iscoroutinefunction(co), asyncio.iscoroutinefunction(co),
                 inspect.isasyncgenfunction(agen), gen.__name__, co.__name__, agen.__name__]}
g = gen(2)
first = next(g)
time.sleep(0.05)  # the consumer's time: not the generator's
second = g.send("a")
time.sleep(0.05)
try:
    g.send("b")
except StopIteration as stop:
    out["gen"] = [first, second, stop.value]
c = catcher()
out["catcher"] = [next(c), c.throw(KeyError("k"))]
c.close()

async def main():
    out["co"] = await co()
    t = asyncio.create_task(slow())
    await asyncio.sleep(0.01)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        log.append("cancelled")
    out["agen"] = [x async for x in agen(3)]
    a = acatch()
    out["acatch"] = [await a.__anext__(), await a.athrow(KeyError("k"))]
    await a.aclose()
    out["tc"] = await tc()

asyncio.run(main())
out["log"] = log
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_f3_region_decorator_keeps_generators_and_coroutines_and_times_their_resumptions(tmp_path, pure):
    p = run_py(F3_CODE, tmp_path, {"SCALEPROBE_PURE": pure})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["kinds"] == [True, True, True, True, "gen", "co", "agen"]  # before: False, False, False, False
    assert out["gen"] == [0, 1, ["a", "b"]]
    assert out["catcher"] == [1, "caught"]
    assert out["co"] == 5 and out["agen"] == [0, 1, 2] and out["acatch"] == [1, "caught"] and out["tc"] == 7
    assert out["log"] == ["closed", "cancel seen", "cancelled", "aclosed"]
    assert "never awaited" not in p.stderr, p.stderr
    _, prof = profile_by_name(tmp_path)
    # each resumption is a visit, and the time suspended (the consumer's, the sleep awaited) is not counted
    assert prof["gen"].visits == 3
    assert 0.015e9 <= prof["gen"].incl_ns < 0.08e9  # its own 2 x 10 ms, not the consumer's 2 x 50 ms
    assert prof["co"].visits == 2 and prof["co"].incl_ns < 0.05e9  # before: 1 visit, the creation only
    assert prof["slow"].visits == 2
    assert prof["agen"].visits == 7  # 3 items x (start or resumption, after the sleep) + the end
    assert prof["catcher"].visits == 3 and prof["acatch"].visits == 3  # close/aclose run its `finally:`


# ----- F4: region names must be strings ------------------------------------------------------------------

F4_CODE = """
import json
from runtime.manual import region, mark, epoch, step
errors = []
for make in (lambda: region(7), lambda: region(None), lambda: region(["a", 1]), lambda: mark(7),
             lambda: epoch(name=3), lambda: step(range(2), name=None), lambda: region(("a", 1), kind="comm")):
    try:
        make()
    except TypeError as exc:
        errors.append(str(exc))
with region("good"):
    pass
print(json.dumps(errors))
"""


def test_f4_non_string_region_names_are_refused(tmp_path):
    p = run_py(F4_CODE, tmp_path)
    assert p.returncode == 0, p.stderr
    errors = json.loads(p.stdout.splitlines()[-1])
    assert errors == [
        "region: a region name must be a str, not int: 7",
        "region: a region name must be a str, not NoneType: None",
        "region: a region name must be a str, not list: ['a', 1]",
        "mark: a region name must be a str, not int: 7",
        "epoch: a region name must be a str, not int: 3",
        "step: a region name must be a str, not NoneType: None",
        "region: a region name must be a str, not tuple: ('a', 1)",
    ]
    run, prof = profile_by_name(tmp_path)
    assert run.problems == []
    assert all(isinstance(r.name, str) for r in run.regions.values())
    assert prof["good"].visits == 1


# ----- F7: misnested manual regions are said ------------------------------------------------------------

F7_CODE = """
import os, sys
from runtime.manual import region
ok1, ok2 = region("ok1"), region("ok2")
with ok1:
    with ok2:
        pass
a, b = region("A"), region("B")
for _ in range(2):
    a.__enter__(); b.__enter__()
    a.__exit__(None, None, None)
    b.__exit__(None, None, None)
print("done")
"""


def test_f7_misnested_manual_regions_are_said_once(tmp_path):
    p = run_py(F7_CODE, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "must nest" in ln]
    assert len(lines) == 1, p.stderr  # before: nothing
    assert "region 'B' left" in lines[0] and "not recorded" in lines[0]
    _, prof = profile_by_name(tmp_path)
    assert "B" not in prof and prof["A"].visits == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_f7_a_region_left_in_a_forked_child_is_no_nesting_mistake(tmp_path):
    code = """
import os
from runtime.manual import region
with region("around_fork"):
    pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
"""
    p = run_py(code, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "must nest" not in p.stderr


# ----- F8: `with epoch(iterable)` is refused ------------------------------------------------------------

def test_f8_boundary_with_an_iterable_is_not_a_context_manager(tmp_path):
    code = """
from runtime.errors import ScaleprobeRuntimeError
from runtime.manual import epoch, step
for make in (lambda: epoch(range(3)), lambda: step([1, 2], name="s")):
    try:
        with make():
            print("entered")
    except ScaleprobeRuntimeError as exc:
        print("refused:", exc)
print([e for e in epoch(range(2))])
"""
    p = run_py(code, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "entered" not in lines  # before: accepted, the iterable ignored
    assert lines[0] == ("refused: epoch(iterable) is an iterator: use `for x in epoch(...)`, or `with epoch():` "
                        "without an iterable for one epoch")
    assert lines[1].startswith("refused: step(iterable) is an iterator")
    assert lines[2] == "[0, 1]"


# ----- F11: Timer from several threads ------------------------------------------------------------------

def test_f11_timer_keys_are_open_per_thread():
    t = Timer()
    both_open = threading.Barrier(2)
    errors = []

    def work():
        try:
            for _ in range(5):
                with t("IO"):
                    both_open.wait(timeout=10)  # the other thread has "IO" open now too
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}")
            both_open.abort()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []  # before: "Timer: 'IO' started twice without stop()"
    assert t.summary()["IO"]["count"] == 10
    # an interval ends on the thread that started it
    t.start("BATCH")
    other = []
    th = threading.Thread(target=lambda: other.append(pytest.raises(ScaleprobeRuntimeError, t.stop, "BATCH")))
    th.start()
    th.join()
    assert "without start() on this thread" in str(other[0].value)
    assert t.stop("BATCH") >= 0


# ----- F5, F9: the launcher -----------------------------------------------------------------------------

FAKE_NSYS = """#!/bin/sh
out=""
while [ $# -gt 0 ]; do case "$1" in *python*) break;; -o) out=$2; shift 2;; *) shift;; esac; done
"$@"; rc=$?
[ -n "$out" ] && echo fake > "$out.nsys-rep"
exit $rc
"""
# The launcher in a Python that cannot import nvtx (the ranks nsys starts are fresh processes).
LAUNCH_WITHOUT_NVTX = "import sys; sys.modules['nvtx'] = None; from runtime.launch import main; sys.exit(main(sys.argv[1:]))"
LAUNCH = "import sys; from runtime.launch import main; sys.exit(main(sys.argv[1:]))"


def fake_nsys_env(tmp_path, **extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    nsys = bin_dir / "nsys"
    nsys.write_text(FAKE_NSYS)
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def launch(tmp_path, code, args, env):
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-c", code, *args], env=e, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)


@pytest.mark.parametrize("extra", [[], ["--dry-run"], ["--nproc", "2"]])
def test_f5_nsys_without_nvtx_is_refused_before_anything_runs(tmp_path, extra):
    (tmp_path / "main.py").write_text("print('ran')\n")
    p = launch(tmp_path, LAUNCH_WITHOUT_NVTX, ["--out", "runs", "--nsys", *extra, "main.py"], fake_nsys_env(tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "scaleprobe launch: error: --nsys shows scaleprobe's regions as NVTX ranges, which needs the nvtx package" \
        in p.stderr
    assert "SCALEPROBE_NVTX=0" in p.stderr
    assert "ran" not in p.stdout and not (tmp_path / "runs").exists()


def test_f5_nsys_without_nvtx_runs_with_nvtx_ranges_turned_off(tmp_path):
    (tmp_path / "main.py").write_text("print('ran')\n")
    p = launch(tmp_path, LAUNCH_WITHOUT_NVTX, ["--out", "runs", "--nsys", "main.py"],
               fake_nsys_env(tmp_path, SCALEPROBE_NVTX="0"))
    assert p.returncode == 0, p.stderr
    assert "ran" in p.stdout and list((tmp_path / "runs").rglob("rank0.nsys-rep"))


def build_nvtx(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("def f():\n    return 1\n\nif __name__ == '__main__':\n    print(f())\n")
    p = subprocess.run([sys.executable, "-m", "instrumentor.cli", str(src), "-o", str(tmp_path / "build"),
                        "--backend", "nvtx", "-q"], env=clean_env(PYTHONPATH=str(REPO)), capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return tmp_path / "build"


def test_f9_an_nvtx_build_is_not_called_uninstrumented(tmp_path):
    pytest.importorskip("nvtx")
    build = build_nvtx(tmp_path)
    p = launch(build, LAUNCH, ["--out", str(tmp_path / "runs"), "main.py"], {})
    assert p.returncode == 0, p.stderr
    assert "is main.py instrumented?" not in p.stderr  # before: it was said of this build
    assert ("scaleprobe launch: warning: the run completed without a run file: main.py is an NVTX-only build "
            "(instrument --backend nvtx)") in p.stderr
    assert "add --nsys" in p.stderr
    p = launch(build, LAUNCH, ["--out", str(tmp_path / "runs2"), "--nsys", "main.py"], fake_nsys_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr  # its data is the nsys report
    assert list((tmp_path / "runs2").rglob("rank0.nsys-rep"))
