"""End-to-end: a hand-instrumented program run in a subprocess writes a readable run file."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "app.py"


def run_app(tmp_path, *args, env=None, out=True, timeout=60, cwd=None):
    e = clean_env()
    e["PYTHONPATH"] = str(REPO)
    if out:
        e["SCALEPROBE_OUT"] = str(tmp_path / "out")
    e.update(env or {})
    return subprocess.run([sys.executable, str(APP), *args], env=e, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or tmp_path)


def only_run(tmp_path):
    files = find_run_files(tmp_path / "out")
    assert len(files) == 1, files
    return read_run(files[0])


def names(run, path):
    return run.callpath_name(path)


@pytest.mark.parametrize("pure", ["1", "0"])
def test_plain_run_records_profile_series_and_end(tmp_path, pure):
    p = run_app(tmp_path, env={"SCALEPROBE_PURE": pure, "SCALEPROBE_EXPERIMENT": "exp",
                               "SCALEPROBE_PARAMS": '{"ranks": 1}', "SCALEPROBE_RUN_ID": "r7"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert run.problems == []
    h = run.header
    assert (h["run_id"], h["experiment"], h["params"], h["rank"], h["world_size"], h["pid"] > 0) == ("r7", "exp", {"ranks": 1}, 0, 1, True)
    try:
        import runtime._cprobe  # noqa: F401

        built = "c"
    except ImportError:
        built = "python"
    assert h["backend"] == ("python" if pure == "1" else built)
    by_name = {names(run, p): s for p, s in run.profile.items()}
    assert by_name["main"].visits == 1
    step_fib = by_name["main->main.epoch->main.step->fib"]
    assert step_fib.visits == 6 * 67 and step_fib.recursive == 6 * 66  # fib(8): 67 calls per step
    assert by_name["main->main.epoch->main.step->main.inner->tiny"].visits == 30
    assert run.iterations[4] == 30
    assert [s["index"] for s in run.steps] == [0, 1, 2, 0, 1, 2]
    assert [e["index"] for e in run.epochs] == [0, 1]
    assert all(s["duration_ns"] >= s["data_wait_ns"] >= 0 for s in run.steps)
    assert sum(s["duration_ns"] for s in run.steps) <= sum(e["duration_ns"] for e in run.epochs)
    assert run.epochs[0]["memory"]["rss_peak_bytes"] > 0
    assert run.end["status"] == "ok" and run.end["exit_code"] == 0


def test_default_directory_is_named_at_exit(tmp_path):
    p = run_app(tmp_path, out=False)
    assert p.returncode == 0, p.stderr
    assert "scaleprobe: run data written to scaleprobe-runs/" in p.stderr
    files = list((tmp_path / "scaleprobe-runs").rglob("rank0.*.jsonl"))
    assert len(files) == 1 and read_run(files[0]).end["status"] == "ok"


def test_uncaught_exception_is_recorded(tmp_path):
    p = run_app(tmp_path, "raise")
    assert p.returncode == 1 and "ValueError: boom" in p.stderr
    end = only_run(tmp_path).end
    assert (end["status"], end["exit_code"], end["exception"]) == ("exception", 1, "builtins.ValueError")


def test_sys_exit_code_is_recorded(tmp_path):
    p = run_app(tmp_path, "exit3")
    assert p.returncode == 3, p.stderr
    end = only_run(tmp_path).end
    assert (end["status"], end["exit_code"]) == ("exit", 3)


def test_sigterm_flushes_then_dies_by_the_signal(tmp_path):
    p = run_app(tmp_path, "sigterm")
    assert p.returncode == -signal.SIGTERM
    run = only_run(tmp_path)
    assert run.end["status"] == "signal" and run.end["signal"] == signal.SIGTERM
    assert len(run.steps) == 6


def test_sigkill_leaves_a_readable_file_with_the_last_flush(tmp_path):
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_FLUSH_INTERVAL="0.1")
    proc = subprocess.Popen([sys.executable, str(APP), "hang"], env=e, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "ready"
        # The flushes while the program runs (epoch ends, then every 0.1 s) must bring all six steps to
        # the file while it still hangs: wait for that rather than for a fixed time.
        deadline = time.monotonic() + 60  # a bound on waiting, not a claim about speed
        while True:
            if (tmp_path / "out").is_dir() and find_run_files(tmp_path / "out"):
                run = only_run(tmp_path)
                if len(run.steps) == 6 and run.profile:
                    break
            assert proc.poll() is None, "the program ended before it was killed"
            assert time.monotonic() < deadline, "the six steps never reached the file before the kill"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(30)
    run = only_run(tmp_path)
    assert run.end is None
    assert len(run.steps) == 6 and run.profile
    assert any("no end record" in p for p in run.problems)


def test_unselected_rank_writes_nothing(tmp_path):
    p = run_app(tmp_path, env={"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "3", "SCALEPROBE_RANKS": "0,1"})
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "out").exists() or not find_run_files(tmp_path / "out")
    p = run_app(tmp_path, env={"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "SCALEPROBE_RANKS": "0,1"})
    assert only_run(tmp_path).header["rank"] == 1


def test_disable_writes_nothing(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_DISABLE": "1"})
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "out").exists()


def test_bad_variable_is_a_clear_error(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_SCHEDULE": "wait=1,actve=2"})
    assert p.returncode != 0
    assert "SCALEPROBE_SCHEDULE" in p.stderr and "actve=2" in p.stderr


def test_throttling_stops_timing_hot_tiny_region(tmp_path):
    p = run_app(tmp_path, "threads", env={"SCALEPROBE_THROTTLE_CALLS": "10", "SCALEPROBE_THROTTLE_NS": "1000000",
                                          "APP_EPOCHS": "1"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert 5 in run.throttled and run.throttled[5]["visits"] > 10
    assert run.end["throttled"] >= 1
    # The threads ran after the throttle decision at the epoch-end flush: tiny is no longer timed.
    assert not any(path[-1] == 5 and path[0] == 6 for path in run.profile)
    assert "throttled tiny" in p.stderr


def test_include_exclude_filters(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_EXCLUDE": "fib,main.in*"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    leaves = {run.regions[p[-1]].name for p in run.profile}
    assert "fib" not in leaves and "main.inner" not in leaves and "tiny" in leaves


def test_schedule_profiles_only_active_steps(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_SCHEDULE": "skip_first=1,wait=1,active=1,repeat=1", "APP_EPOCHS": "2"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert [s.get("active") for s in run.steps] == [False, False, True, False, False, False]
    fib = [s for p, s in run.profile.items() if run.regions[p[-1]].name == "fib"]
    assert sum(s.visits for s in fib) == 67  # only step 2 of epoch 0 was profiled


def test_fork_child_writes_its_own_file_without_parent_data(tmp_path):
    p = run_app(tmp_path, "fork")
    assert p.returncode == 0, p.stderr
    runs = [read_run(f) for f in find_run_files(tmp_path / "out")]
    assert len(runs) == 2
    parent = next(r for r in runs if "forked_from" not in r.header)
    child = next(r for r in runs if "forked_from" in r.header)
    assert child.header["forked_from"] == parent.header["pid"]
    assert {child.callpath_name(p) for p in child.profile} == {"worker", "worker->tiny"}
    assert child.steps == [] and child.end["status"] == "ok"
    assert len(parent.steps) == 6


@pytest.mark.slow
def test_multiprocessing_fork_workers_flush_through_finalizers(tmp_path):
    p = run_app(tmp_path, "mp", "fork", env={"APP_EPOCHS": "1"})
    assert p.returncode == 0, p.stderr
    runs = [read_run(f) for f in find_run_files(tmp_path / "out")]
    workers = [r for r in runs if "forked_from" in r.header]
    assert len(workers) == 2
    assert all(r.end is not None and r.end["status"] == "ok" for r in workers)
    total = sum(s.visits for r in workers for p, s in r.profile.items() if r.callpath_name(p) == "worker")
    assert total == 4


def test_import_is_cheap():
    code = ("import sys, runtime, runtime.probe\n"
            "bad = [m for m in ('torch', 'numpy', 'json', 'nvtx', 'orjson') if m in sys.modules]\n"
            "print(bad)")
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)),
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "[]", p.stderr


def test_trace_keeps_every_visit_as_an_event(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_TRACE": "1", "APP_EPOCHS": "1"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    by_rid = {}
    for rid, start, end, tid in run.events:
        assert end >= start and tid > 0
        by_rid[rid] = by_rid.get(rid, 0) + 1
    assert by_rid[0] == 3 * 67  # every fib call, recursive ones included
    assert by_rid[5] == 15 and by_rid[1] == 1
    assert run.end["trace_dropped"] == 0


def test_trace_limit_drops_and_counts(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_TRACE": "1", "SCALEPROBE_TRACE_MAX": "10", "APP_EPOCHS": "1",
                               "SCALEPROBE_FLUSH_INTERVAL": "0"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert len(run.events) <= 10 * run.end["flushes"]
    assert run.end["trace_dropped"] > 0


def test_unwritable_output_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = run_app(tmp_path, out=False, env={"SCALEPROBE_OUT": str(blocker / "sub")})
    assert p.returncode != 0
    assert "cannot write the run file" in p.stderr and "SCALEPROBE_OUT" in p.stderr


@pytest.mark.slow
def test_multiprocessing_spawn_workers_record_as_children(tmp_path):
    p = run_app(tmp_path, "mp", "spawn", env={"APP_EPOCHS": "1"})
    assert p.returncode == 0, p.stderr
    runs = [read_run(f) for f in find_run_files(tmp_path / "out")]
    parent = [r for r in runs if "child_of" not in r.header]
    workers = [r for r in runs if "child_of" in r.header]
    assert len(parent) == 1 and len(workers) == 2
    assert all(r.header["child_of"] == parent[0].header["pid"] and "forked_from" not in r.header for r in workers)
    assert all(r.end is not None and r.end["status"] == "ok" for r in workers)
    total = sum(s.visits for r in workers for p, s in r.profile.items() if r.callpath_name(p) == "worker")
    assert total == 4


def test_without_flush_thread_epoch_ends_still_flush(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_FLUSH_INTERVAL": "0", "APP_EPOCHS": "3"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert run.end["flushes"] == 4  # one per epoch, then the final one


def test_sigint_keyboard_interrupt_is_recorded_as_signal(tmp_path):
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"))
    # SIGINT as in a terminal: a shell without job control starts background jobs with it ignored,
    # and the child would inherit that (the test then timed out when pytest ran as `... &`)
    proc = subprocess.Popen([sys.executable, str(APP), "hang"], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err  # the program died exactly as it would have without us
    end = only_run(tmp_path).end
    assert (end["status"], end["signal"], end["exception"]) == ("signal", signal.SIGINT, "builtins.KeyboardInterrupt")
