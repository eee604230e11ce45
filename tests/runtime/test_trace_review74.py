"""Review 74: the SCALEPROBE_TRACE recorder (runtime/trace.py).

F1: a region throttled while the program runs must not pop the visits around it.
F3: a visit open while SCALEPROBE_SCHEDULE switched the probes off is never paired with a later
    exit (one slice over two calls); such visits are counted (`trace_unmatched`).
F4: SCALEPROBE_TRACE_MAX is decided at entry: the visits around every kept event are kept.
F6: the Python name of each thread is written once (`threads` in an events record).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from time import perf_counter_ns
from types import SimpleNamespace

import pytest

from runtime.runfile import RunWriter, find_run_files, read_run
from runtime.trace import Tracer
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def tracer(limit: int = 10**9, throttled: dict | None = None):
    """A tracer around no-op probes: (tracer, enter, exit)."""
    t = Tracer(SimpleNamespace(throttled={} if throttled is None else throttled), limit)
    g = {"__sp_enter__": lambda rid: None, "__sp_exit__": lambda rid: None}
    t.install(g)
    return t, g["__sp_enter__"], g["__sp_exit__"]


def rids(t: Tracer) -> list[int]:
    return [e[0] for e in t.events]


def assert_nested(events) -> None:
    """Every event lies inside or outside every other of its thread, never across."""
    for a in events:
        for b in events:
            if a is b or a[3] != b[3]:
                continue
            inside = b[1] <= a[1] and a[2] <= b[2]
            outside = a[2] <= b[1] or b[2] <= a[1]
            around = a[1] <= b[1] and b[2] <= a[2]
            assert inside or outside or around, (a, b)


# ----- F1: throttling -------------------------------------------------------------------------


def test_a_region_throttled_meanwhile_keeps_the_visits_around_it():
    throttled: dict = {}
    t, enter, exit = tracer(throttled=throttled)
    enter(1)  # main
    enter(2)  # outer
    enter(3), exit(3)  # tiny, timed
    throttled[3] = (100001, 500.0)  # throttled at a flush
    for _ in range(5):
        enter(3), exit(3)
    exit(2)
    exit(1)
    assert sorted(rids(t)) == [1, 2, 3]  # main and outer are there; tiny's visit before the throttling
    assert t.dropped == 0 and t.unmatched == 0
    assert_nested(t.events)


def test_a_visit_open_when_its_region_is_throttled_ends_at_its_own_exit():
    # recursion: the outer visit began before the throttling, the inner ones after it
    throttled: dict = {}
    t, enter, exit = tracer(throttled=throttled)
    enter(1)
    enter(3)
    throttled[3] = (100001, 500.0)
    enter(3), enter(3), exit(3), exit(3)
    before_last_exit = perf_counter_ns()
    exit(3)
    exit(1)
    (outer,) = [e for e in t.events if e[0] == 3]
    assert outer[2] >= before_last_exit  # not ended by an inner visit's exit
    assert sorted(rids(t)) == [1, 3]


# ----- F3: exits with no entry of their own, and probes switched off ------------------------------


def test_an_exit_without_its_entry_pops_nothing():
    t, enter, exit = tracer()
    enter(1)
    exit(5)  # entered while the probes were off
    enter(2), exit(2)
    exit(1)
    assert sorted(rids(t)) == [1, 2]
    assert_nested(t.events)


def test_visits_open_when_probes_come_back_on_are_counted_not_paired():
    t, enter, exit = tracer()
    enter(1)  # main
    enter(3)  # train_epoch, first call
    enter(4)  # its step loop
    # probes off: the first call ends and the second one begins unseen; probes on again
    t.note_on()
    enter(7), exit(7)  # a visit seen whole
    exit(4)  # the second call's step loop
    exit(3)  # the second call
    exit(1)
    assert rids(t) == [7]  # no slice from the first call's start to the second call's end
    assert t.unmatched == 3  # main, train_epoch and its loop: entered, never paired


def test_a_mismatched_exit_discards_the_entries_above_its_own_and_counts_them():
    t, enter, exit = tracer()
    enter(1)
    enter(2)
    enter(3)  # its exit is never seen
    exit(2)
    exit(1)
    assert sorted(rids(t)) == [1, 2] and t.unmatched == 1
    assert_nested(t.events)


# ----- F4: SCALEPROBE_TRACE_MAX decided at entry ------------------------------------------------


def test_the_limit_keeps_the_enclosing_visits():
    t, enter, exit = tracer(limit=3)
    enter(1)  # main: kept, whatever comes after it
    for _ in range(4):
        enter(2), exit(2)
    exit(1)
    assert rids(t) == [2, 2, 1]
    assert t.dropped == 2
    assert len(t.events) <= 3


def test_visits_inside_a_refused_one_are_refused_even_after_a_flush():
    t, enter, exit = tracer(limit=2)
    enter(1)
    enter(2), exit(2)
    enter(2)  # refused: the limit is reached
    t.take(1)  # a flush makes room
    enter(3), exit(3)  # inside the refused visit: refused too, not drawn without its caller
    exit(2)
    exit(1)
    assert rids(t) == [1]
    assert t.dropped == 2


def test_kept_events_always_have_their_callers():
    t, enter, exit = tracer(limit=7)

    def call(depth: int) -> None:
        enter(depth)
        if depth < 4:
            call(depth + 1)
            call(depth + 1)
        exit(depth)

    call(1)
    kept = list(t.events)
    assert 0 < len(kept) <= 7 and t.dropped > 0
    assert any(e[0] == 1 for e in kept)  # the outermost visit
    for e in kept:  # each kept event's caller is kept, around it
        if e[0] > 1:
            assert any(p[0] == e[0] - 1 and p[1] <= e[1] and e[2] <= p[2] for p in kept), e
    assert len(kept) + t.dropped == 15


# ----- F6: thread names ---------------------------------------------------------------------------


def test_thread_names_are_written_once_with_the_events():
    t, enter, exit = tracer()
    enter(1), exit(1)

    def body():
        enter(2), exit(2)
        enter(2), exit(2)

    th = threading.Thread(target=body, name="loader")
    th.start()
    th.join()
    recs = t.take(1)
    names = {int(k): v for k, v in recs[0]["threads"].items()}
    assert names[threading.get_native_id()] == threading.current_thread().name
    assert "loader" in names.values()
    enter(1), exit(1)
    assert all("threads" not in r for r in t.take(2))  # once per thread


def test_run_files_keep_thread_names_and_old_ones_still_read(tmp_path):
    path = tmp_path / "rank0.1.jsonl"
    with RunWriter(path) as w:
        w.write_header({"run_id": "r", "rank": 0, "world_size": 1, "pid": 1})
        w.write_records([{"type": "region", "id": 1, "kind": "function", "name": "f", "file": "f.py", "line": 1},
                         {"type": "events", "flush": 1, "events": [[1, 10, 20, 1]]},  # as written before
                         {"type": "events", "flush": 2, "events": [[1, 30, 40, 7]], "threads": {"7": "loader"}},
                         {"type": "end", "status": "ok", "exit_code": 0}])
    run = read_run(path)
    assert run.problems == []
    assert run.events == [(1, 10, 20, 1), (1, 30, 40, 7)]
    assert run.threads == {7: "loader"}


# ----- end to end: instrumented programs ----------------------------------------------------------

PROGRAMS = {
    "thr.py": """
        import time
        def tiny(x):
            return x + 1
        def phase(n):
            s = 0
            for i in range(n):
                s = tiny(s)
            return s
        def outer():
            for k in range(4):
                phase(400)
                time.sleep(0.15)
        def main():
            outer()
        main()
    """,
    "sched.py": """
        import time
        def busy(ms):
            t = time.perf_counter() + ms / 1000
            while time.perf_counter() < t:
                pass
        def train_epoch(n):
            for b in range(n):  # scaleprobe: step
                busy(1)
        def main():
            for epoch in range(4):  # scaleprobe: epoch
                train_epoch(3)
        main()
    """,
    "deep.py": """
        import threading
        def leaf():
            return 1
        def middle():
            for _ in range(5):
                leaf()
        def body():
            for _ in range(5):
                middle()
        def main():
            body()
            t = threading.Thread(target=body, name="worker-1")
            t.start()
            t.join()
        main()
    """,
}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace74")
    src = root / "src"
    src.mkdir()
    for name, text in PROGRAMS.items():
        (src / name).write_text(textwrap.dedent(text).lstrip())
    p = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(root / "build"), "--all", "-q"],
                       cwd=REPO, env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return root / "build"


def record(build: Path, tmp_path: Path, program: str, **env: str):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(build / program)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(out), SCALEPROBE_TRACE="1",
                                                  SCALEPROBE_QUIET="1", **env))
    assert p.returncode == 0, p.stderr
    (f,) = find_run_files(out)
    run = read_run(f)
    by_name: dict[str, list] = {}
    for rid, start, end, tid in run.events:
        by_name.setdefault(run.regions[rid].name, []).append((rid, start, end, tid))
    return run, by_name


@pytest.mark.parametrize("pure", ["0", "1"])
def test_throttling_while_running_keeps_main_and_the_loops(build, tmp_path, pure):
    run, ev = record(build, tmp_path, "thr.py", SCALEPROBE_THROTTLE_CALLS="100", SCALEPROBE_FLUSH_INTERVAL="0.05",
                     SCALEPROBE_PURE=pure)
    assert [run.regions[r].name for r in run.throttled] == ["tiny"]
    assert len(ev["main"]) == 1 and len(ev["outer"]) == 1
    assert len(ev["phase"]) == 4  # every visit, after the throttling too
    assert run.end["trace_dropped"] == 0 and run.end["trace_unmatched"] == 0
    assert_nested(run.events)


def test_a_schedule_never_draws_one_slice_over_two_calls(build, tmp_path):
    run, ev = record(build, tmp_path, "sched.py", SCALEPROBE_SCHEDULE="wait=1,warmup=0,active=1")
    epochs = [(e["start_ns"], e["start_ns"] + e["duration_ns"]) for e in run.epochs]
    assert len(epochs) == 4
    for name in ("train_epoch", "train_epoch:for@7"):
        for _rid, start, end, _tid in ev.get(name, []):  # each within one epoch: one call
            assert any(a <= start and end <= b for a, b in epochs), (name, start, end, epochs)
    assert len(ev["busy"]) > 0
    assert run.end["trace_unmatched"] > 0  # the visits open across the windows with probes off
    assert_nested(run.events)


def test_trace_max_keeps_main_and_every_kept_events_callers(build, tmp_path):
    run, ev = record(build, tmp_path, "deep.py", SCALEPROBE_TRACE_MAX="20", SCALEPROBE_FLUSH_INTERVAL="0")
    assert len(ev["main"]) == 1 and len(ev["body"]) >= 1
    assert run.end["trace_dropped"] > 0
    kept = run.events
    callers = {"leaf": "middle:for@5", "middle:for@5": "middle", "middle": "body:for@8", "body:for@8": "body",
               "body": "main"}
    for rid, start, end, tid in kept:
        name = run.regions[rid].name
        if name in callers and not (name == "body" and tid != run.header["pid"]):
            parent = callers[name]
            assert any(run.regions[r].name == parent and s <= start and end <= e and t == tid
                       for r, s, e, t in kept), (name, parent)
    # every visit is either an event or counted
    visits = sum(s.visits for s in run.profile.values())
    assert len(kept) + run.end["trace_dropped"] == visits


def test_thread_names_reach_the_run_file(build, tmp_path):
    run, ev = record(build, tmp_path, "deep.py")
    tids = {e[3] for e in run.events}
    assert len(tids) == 2
    assert run.threads[run.header["pid"]] == "MainThread"
    assert sorted(run.threads.values()) == ["MainThread", "worker-1"]
