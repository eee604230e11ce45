"""Review 83: the manual API.

MED-3: `region(name, kind="comm")` only labelled its region: no `comm` record, and the steps it ran
in said `comm_ns: 0`. Each of its visits is now a communication call, as a torch.distributed
collective is (runtime/comm.py's `begin_manual`/`end_manual`).
LOW-7: `with step():` / `with epoch():` wrote a `data_wait_ns` of a few hundred ns (our own
bookkeeping, timed as the `next()` of a one-item tuple): there is no loader, so it is null.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, program: str, **env: str):
    (tmp_path / "prog.py").write_text(textwrap.dedent(program))
    p = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_OUT=str(tmp_path / "out"),
                                     **env))
    assert p.returncode == 0, p.stderr
    files = find_run_files(tmp_path / "out")
    runs = [read_run(f) for f in files]
    for run in runs:
        assert run.problems == [], run.problems
    return runs


def _only(runs):
    [run] = [r for r in runs if r.header.get("forked_from") is None]
    return run


def _comms(run, op: str) -> list[dict]:
    return [c for c in run.comms if c["op"] == op]


def _rid(run, name: str) -> int:
    [rid] = [i for i, r in run.regions.items() if r.name == name]
    return rid


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_comm_region_is_communication_in_comm_records_and_the_steps(tmp_path, pure):
    runs = _run(tmp_path, """
        import time
        from runtime.manual import region, step

        for b in step(range(4)):
            with region("compute"):
                time.sleep(0.001)
            with region("exchange", kind="comm"):
                time.sleep(0.002)
    """, SCALEPROBE_PURE=pure)
    run = _only(runs)
    rid = _rid(run, "exchange")
    assert run.regions[rid].kind == "comm"
    [c] = _comms(run, "exchange")  # before: no comm record at all
    assert (c["calls"], c["bytes"], c["group_size"], c["gpu_ns"]) == (4, 0, None, None), c
    assert c["callpath"] == [rid] and "failed" not in c and "unfinished" not in c, c
    # the call lies inside its region's visit: never more than the profile's time of that path
    [stats] = [s for path, s in run.profile.items() if path == (rid,)]
    assert 0 < c["time_ns"] <= stats.incl_ns, (c, stats)
    assert not _comms(run, "compute")  # an ordinary manual region stays a region only
    assert len(run.steps) == 4
    for s in run.steps:  # before: 0 in every step
        assert 0 < s["comm_ns"] <= s["duration_ns"], s


def test_a_comm_region_as_a_decorator_counts_each_call_and_each_resumption(tmp_path):
    runs = _run(tmp_path, """
        import asyncio
        from runtime.manual import region

        @region("allgather", kind="comm")
        def allgather(x):
            return [x, x]

        @region("stream", kind="comm")
        def stream(n):
            for i in range(n):
                yield i

        @region("exchange_async", kind="comm")
        async def exchange_async():
            await asyncio.sleep(0.001)
            return 7

        assert [allgather(i) for i in range(3)] == [[0, 0], [1, 1], [2, 2]]
        assert list(stream(2)) == [0, 1]
        assert asyncio.run(exchange_async()) == 7
    """)
    run = _only(runs)
    assert [c["calls"] for c in _comms(run, "allgather")] == [3]
    # as its region's visits: one per resumption (2 items, then the end), and the await that suspends
    assert [c["calls"] for c in _comms(run, "stream")] == [3]
    assert [c["calls"] for c in _comms(run, "exchange_async")] == [2]


def test_a_comm_region_that_raises_is_a_failed_call(tmp_path):
    runs = _run(tmp_path, """
        from runtime.manual import region

        @region("send_grads", kind="comm")
        def send_grads():
            raise ConnectionError("peer gone")

        for _ in range(2):
            try:
                with region("exchange", kind="comm"):
                    raise ConnectionError("peer gone")
            except ConnectionError:
                pass
        with region("exchange", kind="comm"):
            pass
        try:
            send_grads()
        except ConnectionError:
            pass
    """)
    run = _only(runs)
    [c] = _comms(run, "exchange")
    assert (c["calls"], c.get("failed")) == (3, 2), c
    [c] = _comms(run, "send_grads")
    assert (c["calls"], c.get("failed")) == (1, 1), c


def test_a_comm_region_open_at_the_end_counts_as_unfinished(tmp_path):
    # a daemon thread blocked in its exchange when the program ends (a peer that never answers)
    runs = _run(tmp_path, """
        import threading, time
        from runtime.manual import region

        started = threading.Event()

        def exchange_forever():
            with region("exchange", kind="comm"):
                started.set()
                time.sleep(1000)

        threading.Thread(target=exchange_forever, daemon=True).start()
        started.wait()
    """)
    run = _only(runs)
    [c] = _comms(run, "exchange")
    assert (c["calls"], c.get("unfinished")) == (1, 1), c
    assert run.end["closed_at_end"] == 1, run.end


def test_a_comm_region_with_probes_off_records_nothing(tmp_path):
    runs = _run(tmp_path, """
        import runtime.probe
        from runtime.manual import region

        with region("exchange", kind="comm"):
            pass
        runtime.probe.set_enabled(False)
        with region("exchange", kind="comm"):
            pass
        runtime.probe.set_enabled(True)
    """)
    [c] = _comms(_only(runs), "exchange")
    assert c["calls"] == 1, c


def test_a_forked_child_does_not_count_its_parents_open_call(tmp_path):
    runs = _run(tmp_path, """
        import os, sys
        from runtime.manual import region

        with region("exchange", kind="comm"):
            pid = os.fork()
            if pid == 0:
                sys.exit(0)  # inside the block: the call is its parent's
            os.waitpid(pid, 0)
    """)
    [child] = [r for r in runs if r.header.get("forked_from") is not None]
    assert _comms(child, "exchange") == [], child.comms
    assert [c["calls"] for c in _comms(_only(runs), "exchange")] == [1]


# ----- LOW-7 ------------------------------------------------------------------------------------


def test_a_step_or_epoch_as_a_block_has_no_data_wait(tmp_path):
    runs = _run(tmp_path, """
        import time
        from runtime.manual import epoch, step

        with epoch(name="solo_epoch"):
            with step(name="warmup_step"):
                time.sleep(0.001)
        for b in step(range(2), name="loop_step"):
            pass
    """)
    run = _only(runs)
    names = {rid: r.name for rid, r in run.regions.items()}
    [warm] = [s for s in run.steps if names[s["region"]] == "warmup_step"]
    [solo] = run.epochs
    assert warm["data_wait_ns"] is None, warm  # before: a few hundred ns of our own bookkeeping
    assert solo["data_wait_ns"] is None, solo
    assert warm["duration_ns"] > 0 and solo["duration_ns"] >= warm["duration_ns"]
    assert solo["index"] == 0 and warm["index"] == 0 and warm["step"] == 0
    # an iterated step still has its loader's wait (here the range's next())
    loop = [s for s in run.steps if names[s["region"]] == "loop_step"]
    assert [s["index"] for s in loop] == [0, 1] and all(isinstance(s["data_wait_ns"], int) for s in loop), loop


def test_a_comm_region_handed_over_to_another_thread_is_one_call(tmp_path):
    runs = _run(tmp_path, """
        import threading
        from runtime.manual import region

        r = region("exchange", kind="comm")
        r.__enter__()
        t = threading.Thread(target=r.__exit__, args=(None, None, None))
        t.start()
        t.join()
        r.__exit__(None, None, None)  # left again: said on stderr, nothing recorded
    """)
    run = _only(runs)
    [c] = _comms(run, "exchange")
    assert c["calls"] == 1, c
    assert sum(s.visits for path, s in run.profile.items() if path[-1] == _rid(run, "exchange")) == 1
