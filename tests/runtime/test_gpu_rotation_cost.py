"""Review 33, M2: the GPU rotation costs the regions that are not its target nothing.

The probe backends (C and pure Python) test for the target themselves and call the rotation's
hooks for that one region only; instrumented modules keep the bare probes. What the rotation
records must stay exactly what the Python wrappers recorded before: the same `gpu` records,
budget, recursion pairing, throttled target, generator suspensions, NVTX and tracing wrappers,
forked children, SCALEPROBE_GPU_BUDGET=0. No timings are asserted here
(benchmarks/probe_overhead.py measures the cost).
"""
import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import _pyprobe
from runtime.gpu import FakeBackend, GpuTimer, Rotation
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

from .test_gpu_review33 import run_two_replicas, stop_depths

try:
    from runtime import _cprobe
except ImportError:  # not built: the C cases are skipped
    _cprobe = None

REPO = Path(__file__).resolve().parents[2]

BACKENDS = [pytest.param("c", marks=pytest.mark.skipif(_cprobe is None, reason="C probes not built")), "python"]


@pytest.fixture(params=BACKENDS)
def mod(request):
    m = _cprobe if request.param == "c" else _pyprobe
    m.reset_after_fork()
    m.ensure_capacity(64)
    for rid in range(64):
        m.set_off(rid, False)
    yield m
    if hasattr(m, "set_gpu_hooks"):
        m.set_gpu_hooks(None, None)
    for rid in range(64):
        m.set_off(rid, False)
    m.reset_after_fork()


def profile(m):
    """{call path: (visits, recursive)} of what the backend recorded so far."""
    return {d[0]: (d[1], d[7]) for d in m.take_deltas()}


# ----- the backends' target test ---------------------------------------------------------------------

def test_only_the_target_calls_the_hooks_enter_after_and_exit_before_its_visit(mod):
    log = []
    mod.set_gpu_hooks(lambda rid: log.append(("enter", rid, mod.current_path())),
                      lambda rid: log.append(("exit", rid, mod.current_path())))
    mod.set_gpu_target(5)
    assert mod.gpu_target() == 5
    enter, exit = mod.enter, mod.exit
    enter(3), enter(5), enter(6), exit(6), exit(5), exit(3)
    enter(5), enter(5), exit(5), exit(5)  # direct recursion: folded, and each visit seen by the hooks
    enter(7), exit(7)
    assert log == [("enter", 5, (3, 5)), ("exit", 5, (3, 5)),
                   ("enter", 5, (5,)), ("enter", 5, (5,)), ("exit", 5, (5,)), ("exit", 5, (5,))]
    assert profile(mod) == {(3,): (1, 0), (3, 5): (1, 0), (3, 5, 6): (1, 0), (5,): (2, 1), (7,): (1, 0)}


def test_a_throttled_target_still_calls_the_hooks_and_throttling_keeps_the_target(mod):
    log = []
    mod.set_gpu_hooks(lambda rid: log.append(("enter", rid)), lambda rid: log.append(("exit", rid)))
    mod.set_gpu_target(5)
    mod.set_off(5, True)  # throttled while it is the target: as the wrappers did, still seen
    mod.enter(3), mod.enter(5), mod.exit(5), mod.exit(3)
    assert log == [("enter", 5), ("exit", 5)]
    assert profile(mod) == {(3,): (1, 0)}  # no visit of a throttled region
    mod.set_off(5, False)
    assert mod.gpu_target() == 5
    mod.enter(5), mod.exit(5)
    assert log[2:] == [("enter", 5), ("exit", 5)] and profile(mod) == {(5,): (1, 0)}
    mod.set_gpu_target(6)  # the old target calls nothing any more, and stays throttled or not as it was
    mod.enter(5), mod.exit(5)
    assert len(log) == 4 and profile(mod) == {(5,): (1, 0)}


def test_no_target_without_hooks_and_none_after_fork(mod):
    called = []
    mod.set_gpu_target(5)
    assert mod.gpu_target() == -1  # nothing to call
    mod.set_gpu_hooks(called.append, called.append)
    mod.set_gpu_target(5)
    mod.reset_after_fork()  # a forked child: the parent's hooks hold its CUDA events
    assert mod.gpu_target() == -1
    mod.enter(5), mod.exit(5)
    mod.set_gpu_target(5)  # and the hooks are gone with it
    assert mod.gpu_target() == -1
    mod.enter(5), mod.exit(5)
    assert called == []
    mod.set_gpu_hooks(called.append, called.append)
    mod.set_gpu_target(5)
    mod.set_gpu_hooks(None, None)  # no hooks: no target
    assert mod.gpu_target() == -1
    mod.enter(5), mod.exit(5)
    assert called == []
    with pytest.raises(TypeError):
        mod.set_gpu_hooks(called.append, None)


def test_a_raising_exit_hook_still_ends_the_visit(mod):
    def boom(rid):
        raise KeyboardInterrupt

    mod.set_gpu_hooks(lambda rid: None, boom)
    mod.set_gpu_target(5)
    mod.enter(3), mod.enter(5)
    with pytest.raises(KeyboardInterrupt):
        mod.exit(5)
    assert mod.current_path() == (3,)
    mod.exit(3)
    assert profile(mod) == {(3,): (1, 0), (3, 5): (1, 0)}


CALLS = [("e", 3), ("e", 5), ("x", 5), ("x", 5), ("x", 3), ("x", 5), ("e", 5), ("e", 6), ("e", 5), ("x", 5),
         ("x", 5), ("x", 6), ("e", 5), ("e", 8), ("e", 9), ("x", 5), ("x", 99999), ("e", 99999), ("e", -1),
         ("x", -1), ("e", 5), ("off", 5), ("x", 5), ("e", 5), ("x", 5), ("on", 5), ("x", 8), ("e", 5), ("x", 5),
         ("x", 3)]


def _replay(m) -> list:
    out = []
    for op, rid in CALLS:
        if op == "off" or op == "on":
            m.set_off(rid, op == "off")
        else:
            out.append((m.enter if op == "e" else m.exit)(rid))
        out.append(m.current_path())
    return out


def test_the_target_gets_the_same_profile_results_and_drops_as_without_a_gpu(mod):
    """Odd sequences (unbalanced, unknown ids, throttled mid-visit, recursion): enter/exit return the
    same, leave the same stacks and record the same with the rotation's target on region 5."""
    plain = _replay(mod), sorted(profile(mod).items()), mod.dropped()
    mod.reset_after_fork()
    mod.set_off(5, False)
    seen = []
    mod.set_gpu_hooks(lambda rid: seen.append(rid), lambda rid: seen.append(-rid))
    mod.set_gpu_target(5)
    hooked = _replay(mod), sorted(profile(mod).items()), mod.dropped()
    assert hooked == plain
    assert seen and set(seen) == {5, -5}


# ----- the rotation on the backends ------------------------------------------------------------------

def make_rotation(mod, budget=2, regions=(5, 6, 7), backend=None):
    timer = GpuTimer(backend or FakeBackend())
    rec = SimpleNamespace(regions={r: ("function", f"f{r}", "m.py", r, "m") for r in regions},
                          region_totals={r: [1, 1] for r in regions}, throttled={})
    try:
        rot = Rotation(timer, rec, budget=budget, backend=mod)
    except TypeError:  # (before M2, when the rotation always wrapped the module's probes)
        rot = Rotation(timer, rec, budget=budget)
    g = {"__sp_enter__": mod.enter, "__sp_exit__": mod.exit}
    rot.install(g)
    return rot, timer, g


def visit(g, rid, times=1):
    for _ in range(times):
        g["__sp_enter__"](rid)
        g["__sp_exit__"](rid)


def samples(rot, timer):
    timer.resolve(wait=True)
    return {r["region"]: (r["samples"], r["gpu_ns"]) for r in rot.take()}


def test_modules_keep_the_bare_probes(mod):
    rot, timer, g = make_rotation(mod)
    assert g["__sp_enter__"] is mod.enter and g["__sp_exit__"] is mod.exit  # (before M2: Python wrappers)
    rot.next_step()
    assert mod.gpu_target() == rot.target[0] == 5


def test_the_target_is_timed_within_its_budget_and_no_other_region_at_all(mod):
    rot, timer, g = make_rotation(mod, budget=2)
    rot.next_step()  # target 5
    visit(g, 6, 10)
    visit(g, 7, 10)
    assert timer.backend.records == 0  # no event for a region that is not the target
    visit(g, 5, 10)
    assert timer.backend.records == 4  # start and end of 2 visits: the budget
    assert samples(rot, timer) == {5: (2, 2000)}
    rot.next_step()  # at the step boundary the target moves on
    assert mod.gpu_target() == 6
    visit(g, 5, 3)
    visit(g, 7, 3)
    visit(g, 6, 3)
    assert samples(rot, timer) == {6: (2, 2000)}
    assert profile(mod) == {(5,): (13, 0), (6,): (13, 0), (7,): (13, 0)}  # the CPU profile as ever


def test_the_visits_timed_start_at_a_random_offset_so_every_position_is_sampled(mod):
    """Review 33 L3: the rotation timed the first `budget` visits of its target in every step, always
    the same ones (the first 4 of 12 `Block.forward` calls), a bias where visits differ. Once the
    target's visits per step are known, the visits timed start at a random offset among them."""
    rot, timer, g = make_rotation(mod, budget=2, regions=(5,))
    position, timed = [0], set()
    start = timer.start

    def noted_start():
        timed.add(position[0])
        return start()

    timer.start = noted_start
    for _ in range(60):
        rot.next_step()
        for position[0] in range(6):
            visit(g, 5)
    assert timed == set(range(6))  # before: {0, 1}
    assert samples(rot, timer) == {5: (120, 120000)}  # still `budget` visits in every step


def test_the_offset_leaves_the_programs_random_state_alone(mod):
    import random

    rot, timer, g = make_rotation(mod, budget=1, regions=(5,))
    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    for _ in range(20):
        rot.next_step()
        visit(g, 5, 4)
    assert [random.random() for _ in range(3)] == expected


def test_a_visit_open_across_a_step_boundary_gives_its_event_back(mod):
    rot, timer, g = make_rotation(mod, regions=(5,))
    rot.next_step()
    g["__sp_enter__"](5)
    rot.next_step()  # the same target, a new step
    g["__sp_exit__"](5)
    assert samples(rot, timer) == {}
    assert timer.backend.records == 1 and len(timer.pools[0][0]) == 1  # no end event; the start is free again


def test_a_recursive_target_pairs_each_visit_with_its_own_end(mod):
    rot, timer, g = make_rotation(mod, budget=2, regions=(5,))
    rot.next_step()
    # depth 4: the budget times the outer two visits
    assert stop_depths(timer, g["__sp_enter__"], g["__sp_exit__"], 5, 4) == [2, 1]
    assert profile(mod) == {(5,): (4, 3)}


def test_each_thread_closes_its_own_timed_visit(mod):
    rot, timer, g = make_rotation(mod, budget=10, regions=(5,))
    rot.next_step()
    pairs = []
    stop = timer.stop

    def checked_stop(started, target):
        pairs.append(started[1].thread == threading.get_ident())
        return stop(started, target)

    timer.stop = checked_stop
    record = FakeBackend.record

    def noted_record(self, ev, device):
        record(self, ev, device)
        ev.thread = threading.get_ident()

    timer.backend.record = noted_record.__get__(timer.backend)
    enter, exit = g["__sp_enter__"], g["__sp_exit__"]
    run_two_replicas(enter, exit, 5)
    assert pairs == [True, True]


def test_setting_the_target_tells_the_backend_and_an_error_clears_it(mod):
    rot, timer, g = make_rotation(mod)
    rot.next_step()
    assert mod.gpu_target() == 5
    rot.target[0] = -1  # what the recorder does in a forked child
    assert mod.gpu_target() == -1
    visit(g, 5, 3)
    assert timer.backend.records == 0
    rot.next_step()
    assert mod.gpu_target() == 6
    timer.error = "RuntimeError: CUDA error"
    rot.next_step()
    assert rot.target[0] == -1 and mod.gpu_target() == -1


def test_probes_that_are_not_the_backends_still_get_wrappers(mod):
    """Stand-ins that never reach the backend are wrapped in Python as before."""
    calls = []
    rot, timer, _ = make_rotation(mod)
    g = {"__sp_enter__": lambda rid: calls.append(rid), "__sp_exit__": lambda rid: calls.append(-rid)}
    rot.install(g)
    rot.next_step()
    visit(g, 5, 3)
    visit(g, 6)
    assert calls == [5, -5] * 3 + [6, -6]
    assert samples(rot, timer) == {5: (2, 2000)}


def test_nvtx_and_trace_wrappers_reach_the_backend_and_stay_unwrapped(mod, monkeypatch):
    """The runtime's own wrappers call the backend's probes: the target test happens there."""
    from runtime import gpu

    def nvtx_like(enter, exit):
        def nvtx_enter(rid):
            enter(rid)

        def nvtx_exit(rid):
            exit(rid)

        nvtx_enter.__module__ = nvtx_exit.__module__ = "runtime.nvtx_ranges"
        return nvtx_enter, nvtx_exit

    e1, x1 = nvtx_like(mod.enter, mod.exit)
    e2, x2 = nvtx_like(e1, x1)  # tracing around NVTX
    assert gpu._reaches(e2, mod.enter, "enter") and gpu._reaches(x2, mod.exit, "exit")
    rot, timer, _ = make_rotation(mod)
    g = {"__sp_enter__": e2, "__sp_exit__": x2}
    rot.install(g)
    assert g["__sp_enter__"] is e2
    rot.next_step()
    visit(g, 5, 3)
    assert samples(rot, timer) == {5: (2, 2000)}


# ----- end to end, on the fake GPU --------------------------------------------------------------------

PROGRAM = '''\
import os
import sys


def leaf(x):
    return x + 1


def other(x):
    return x * 2


def gen(n):
    for i in range(n):
        yield leaf(i)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def body(step):
    s = fib(4)
    for v in gen(3):
        s += other(v)
    return s


def train(epochs, steps):
    for epoch in range(epochs):  # scaleprobe: epoch
        for step in range(steps):  # scaleprobe: step
            body(step)
            if os.environ.get("PROG_FORK") and fork_at_leaf():
                return


def fork_at_leaf():
    """In a step whose GPU target is leaf, fork: the child's calls of leaf record no event."""
    rec = sys.modules["runtime.recorder"].get()
    rot, timer = rec.gpu_rotation, rec.gpu
    if rec.regions[rot.target[0]][1] != "leaf":
        return False
    before = timer.backend.records
    leaf(0)  # the parent still times it (budget left)
    if timer.backend.records == before:
        print("parent: leaf was not timed")
        return True
    pid = os.fork()
    if pid == 0:
        before = timer.backend.records
        for i in range(10):
            leaf(i)
        impl = sys.modules["runtime._backend"].impl
        target = impl.gpu_target() if hasattr(impl, "gpu_target") else -1
        os._exit(0 if timer.backend.records == before and target == -1 else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    return True


if __name__ == "__main__":
    train(2, 16)
    print(getattr(globals().get("__sp_enter__"), "__module__", None))
'''

EPOCHS, STEPS, BUDGET = 2, 16, 2  # train(2, 16) above; run_built sets SCALEPROBE_GPU_BUDGET=2
# The program's visits of each region in one step: body and its loop once; fib(4) makes 9 calls; leaf and
# other once per item of gen(3); the generator and its loop are entered 4 times (at the start and at each of
# the 3 resumptions). (Checked against the run's profile in test_a_program_gets_the_gpu_records_it_got_before.)
PER_STEP = {"leaf": 3, "other": 3, "gen": 4, "gen:for@14": 4, "fib": 9, "body": 1, "body:for@24": 1}
# Throttled at the flush at the end of epoch 0 with SCALEPROBE_THROTTLE_CALLS=20: the regions past 20
# visits by then (16 steps x 3 or 4); fib's recursive calls do not count (16 outermost visits), nor do
# body's and its loop's (16), which are throttled only at the final flush.
THROTTLED_AFTER_EPOCH_0 = {"leaf", "other", "gen", "gen:for@14"}


def defined_regions(built: Path) -> dict[int, tuple[str, str]]:
    """rid -> (kind, name): the region table the instrumentor wrote into the built program."""
    call = next(n for n in ast.walk(ast.parse(built.read_text())) if isinstance(n, ast.Call)
                and getattr(n.func, "id", None) == "__sp_define__")
    return {rid: (kind, name) for rid, kind, name, _line in ast.literal_eval(call.args[3])}


def by_the_rotation_rule(defined: dict[int, tuple[str, str]], run_file: Path,
                         throttled_after_epoch_0=frozenset()) -> dict:
    """name -> (samples, gpu_ns) that the rotation (runtime.gpu.Rotation) gives this program, from its
    visit counts (PER_STEP) and the rule:

    - every step, one region is the target, in region-id order, over the regions that are no epoch
      or step loop. The order is taken anew once it is used up, and as soon as a flush knows of
      visited regions (or more of them), then less those timed already in the round: before the
      first flush it holds every region defined (fork_at_leaf and its loop too, never called);
      after the flush at epoch 0's end, the regions with a closed visit (not `train`: its one visit
      is still open), less the throttled ones, those visited inside a step loop (here all of them)
      first, the most inclusive time by then first. A throttled region is timed no more.
    - in a step where it is the target, min(BUDGET, its visits in the step) visits are timed.
    - on the fake GPU each event recorded advances the clock 1000 ns: a timed visit that times
      nothing inside it spans 1000 ns. Only fib's timed visits can nest: two nested ones span 3000 +
      1000 ns, what the first two visits of a step give (fib(4), then fib(3)), the most they can.
    """
    ordinary = {rid: name for rid, (kind, name) in defined.items() if kind not in ("epoch", "step")}
    first = sorted(ordinary)
    incl: dict[int, int] = {}  # by the flush at epoch 0's end, the first
    with open(run_file) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "profile" and r.get("flush") == 1:
                incl[r["path"][-1]] = incl.get(r["path"][-1], 0) + r["incl_ns"]
    later = sorted((rid for rid, name in ordinary.items() if name in PER_STEP and name not in throttled_after_epoch_0),
                   key=lambda rid: -incl[rid])
    order, pos, out, known = first, 0, {}, False
    for step in range(EPOCHS * STEPS):
        if pos == len(order) or (step >= STEPS and not known):
            done = set(order[:pos]) if pos < len(order) else set()
            known = step >= STEPS
            order, pos = [r for r in (later if known else first) if r not in done], 0
        name = ordinary[order[pos]]
        pos += 1
        if step >= STEPS and name in throttled_after_epoch_0:
            continue
        timed = min(BUDGET, PER_STEP.get(name, 0))
        if timed:
            s = out.setdefault(name, [0, 0])
            s[0] += timed
            s[1] += 4000 if name == "fib" else 1000 * timed
    return {name: tuple(s) for name, s in out.items()}


def assert_as_before(gpu, before):
    """The samples per region the rotation rule gives (what the Python wrappers recorded before M2),
    and the same GPU time where every visit of a region spans alike. The recursive `fib`'s visits
    do not (an outer one spans its inner ones' events): since review 33 L3 the visits timed start at
    a random offset, so which depths are timed varies, between the innermost's time and the
    outermost's (what the first visits gave)."""
    assert {k: v[0] for k, v in gpu.items()} == {k: v[0] for k, v in before.items()}
    assert {k: v for k, v in gpu.items() if k != "fib"} == {k: v for k, v in before.items() if k != "fib"}
    assert 1000 * before["fib"][0] <= gpu["fib"][1] <= before["fib"][1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from instrumentor.cli import main as instrument

    root = tmp_path_factory.mktemp("rotation")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text(PROGRAM)
    assert instrument([str(root / "src"), "-o", str(root / "out"), "-q"]) == 0
    return root / "out" / "main.py"


def run_built(built, tmp_path, env):
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_QUIET="1", SCALEPROBE_GPU="fake",
             SCALEPROBE_FLUSH_INTERVAL="0", SCALEPROBE_GPU_BUDGET="2")
    e.update(env)
    p = subprocess.run([sys.executable, str(built)], env=e, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = [read_run(f) for f in find_run_files(tmp_path / "runs")]
    run = next(r for r in runs if not r.header.get("forked_from"))
    gpu = {run.regions[r].name: (g["samples"], g["gpu_ns"]) for r, g in run.gpu_regions.items()}
    return p, run, gpu


@pytest.mark.parametrize("env, probes", [
    ({}, None),
    ({"SCALEPROBE_PURE": "1"}, "runtime._pyprobe"),
    ({"SCALEPROBE_NVTX": "1"}, "runtime.nvtx_ranges"),
    ({"SCALEPROBE_NVTX": "1", "SCALEPROBE_PURE": "1"}, "runtime.nvtx_ranges"),
    ({"SCALEPROBE_TRACE": "1"}, "runtime.trace"),
    ({"SCALEPROBE_TRACE": "1", "SCALEPROBE_NVTX": "1"}, "runtime.trace"),
], ids=["default", "pure", "nvtx", "nvtx-pure", "trace", "trace-nvtx"])
def test_a_program_gets_the_gpu_records_it_got_before(built, tmp_path, env, probes):
    if "SCALEPROBE_NVTX" in env:
        pytest.importorskip("nvtx")
    p, run, gpu = run_built(built, tmp_path, env)
    visits = {}
    for path, st in run.profile.items():
        visits[run.regions[path[-1]].name] = visits.get(run.regions[path[-1]].name, 0) + st.visits
    assert {k: visits[k] for k in PER_STEP} == {k: EPOCHS * STEPS * v for k, v in PER_STEP.items()}
    assert_as_before(gpu, by_the_rotation_rule(defined_regions(built), run.path))
    # the module's probes are the backend's, or the NVTX/tracing wrappers: no GPU wrapper around them
    expected = probes or ("runtime._cprobe" if _cprobe is not None else "runtime._pyprobe")  # (SCALEPROBE_PURE unset)
    assert p.stdout.strip().splitlines()[-1] == expected


def test_throttled_regions_leave_the_rotation_as_before(built, tmp_path):
    p, run, gpu = run_built(built, tmp_path, {"SCALEPROBE_THROTTLE_CALLS": "20", "SCALEPROBE_THROTTLE_NS": "100000000"})
    assert {run.regions[r].name for r in run.throttled} == set(PER_STEP)
    assert_as_before(gpu, by_the_rotation_rule(defined_regions(built), run.path, THROTTLED_AFTER_EPOCH_0))


def test_budget_0_times_epochs_and_steps_only(built, tmp_path):
    p, run, gpu = run_built(built, tmp_path, {"SCALEPROBE_GPU_BUDGET": "0"})
    assert gpu == {} and all(isinstance(s["gpu_ns"], int) for s in run.steps)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_forked_child_never_touches_the_parents_gpu_events(built, tmp_path, pure):
    p, run, gpu = run_built(built, tmp_path, {"PROG_FORK": "1", "SCALEPROBE_PURE": pure, "SCALEPROBE_GPU_BUDGET": "10"})
    assert "child 0" in p.stdout, p.stdout + p.stderr
    assert gpu == {"leaf": (4, 4000)}  # (the parent returns after the fork)


@pytest.mark.parametrize("error", [AttributeError, TypeError, IndexError, KeyboardInterrupt])
def test_what_the_enter_hook_raises_reaches_the_program_with_the_visit_undone(mod, error):
    def boom(rid):
        raise error("from the hook")

    mod.set_gpu_hooks(boom, lambda rid: None)
    mod.set_gpu_target(5)
    with pytest.raises(error, match="from the hook"):
        mod.enter(5)
    # review 76 MED-3: the visit is undone, counted as dropped (the program's `finally:` may never
    # run: left open, every later visit of the region was taken for recursion)
    assert mod.current_path() == ()
    mod.exit(5)  # an exit with no visit of its own open changes nothing
    mod.enter(6), mod.exit(6)  # this thread's state and the other regions are unharmed
    mod.set_gpu_hooks(lambda rid: None, lambda rid: None)
    mod.enter(5), mod.exit(5)
    assert profile(mod) == {(5,): (1, 0), (6,): (1, 0)} and mod.dropped() == 1


@pytest.mark.slow
def test_the_benchmark_prints_the_rotation_cost_against_the_plain_probes(tmp_path):
    env = clean_env()
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "probe_overhead.py"), "--no-app", "--calls", "500",
                        "--repeat", "2", "--gpu-app", "--gpu-app-reps", "1"], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for row in ("function region: probe python, GPU rotation ", "function region: probe python, GPU rotation, target",
                "GPU rotation on (SCALEPROBE_GPU=fake)", "leaf timed: probes +", "leaf throttled: probes +"):
        assert row in p.stdout, p.stdout
    assert not (tmp_path / "scaleprobe-runs").exists()


@pytest.mark.skipif(_cprobe is None, reason="C probes not built")
@pytest.mark.parametrize("call", ["set_gpu_target", "set_off", "ensure_capacity"])
def test_a_region_id_past_the_tables_limit_is_refused(call):
    """Review 37: set_gpu_target(sys.maxsize) (and set_off) overflowed `rid + 1` and wrote past the
    table: a crash. Region ids are int32 in the probes' frames; a larger one is a ValueError."""
    fn = getattr(_cprobe, call)
    args = (sys.maxsize, True) if call == "set_off" else (sys.maxsize,)
    with pytest.raises(ValueError, match="region id must be below 2147483647"):
        fn(*args)
    assert _cprobe.gpu_target() == -1


@pytest.mark.skipif(_cprobe is None, reason="C probes not built")
def test_exit_elsewhere_takes_no_region_id_past_int32():
    """Review 38: exit_elsewhere(2**32 + 3) closed region 3's visit on another thread (the id cut to
    32 bits); the pure-Python probes answer False, and so does C now."""
    import threading

    _cprobe.reset_after_fork()
    _cprobe.ensure_capacity(8)
    opened, done = threading.Event(), threading.Event()

    def other():
        _cprobe.enter(2)
        _cprobe.enter(3)
        opened.set()
        done.wait(5)

    th = threading.Thread(target=other)
    th.start()
    opened.wait(5)
    try:
        assert _cprobe.exit_elsewhere(2**32 + 3) is False
        assert _cprobe.exit_elsewhere(-1) is False
        assert _cprobe.exit_elsewhere(3) is True  # the visit was still open
    finally:
        done.set()
        th.join()
        _cprobe.reset_after_fork()
