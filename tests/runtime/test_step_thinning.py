"""SCALEPROBE_STEP_RECORDS: the step records of a step loop are bounded per process, thinned with a
doubling stride past the bound, weighted, and counted in the end record (review 21 #6)."""
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.config import DEFAULT_STEP_RECORDS, ConfigError, Schedule, from_env
from runtime.recorder import StepThinning
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def run_program(tmp_path, code, env=None, name="prog"):
    """Run `code` (the manual API, as instrumented loops take the same path) with recording on; its
    run files, read, by pid."""
    prog = tmp_path / f"{name}.py"
    prog.write_text(textwrap.dedent(code))
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / f"out_{name}"))
    e.update(env or {})
    p = subprocess.run([sys.executable, str(prog)], env=e, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    runs = [read_run(f) for f in find_run_files(tmp_path / f"out_{name}")] if (tmp_path / f"out_{name}").exists() else []
    return p, runs


def loop_of(run, name):
    [rid] = [rid for rid, reg in run.regions.items() if reg.name == name]
    return rid, [s for s in run.steps if s["region"] == rid]


def check_blocks(recs, n, total, first=0):
    """The records of one loop (by step): its first `n` steps as they are, then one record from each
    block of steps, the blocks one after the other, `n` of stride 2, `n` of stride 4, ..., the first
    record at the first step of its block; each weighs its block, the last one up to the end."""
    recs = [dict(s, step=s["step"] - first) for s in sorted(recs, key=lambda s: s["step"])]
    assert [s["step"] for s in recs[:n]] == list(range(min(n, total)))
    assert all("weight" not in s for s in recs[:n])
    thin = recs[n:]
    if not thin:
        return
    assert thin[0]["step"] == n
    start, stride, at = n, 2, 0
    for i, s in enumerate(thin):
        last = i == len(thin) - 1
        assert start <= s["step"] < (total if last else start + stride), (i, s["step"], start, stride)
        assert s["weight"] == (total - start if last else stride)
        start += stride
        at += 1
        if at == n:
            stride, at = stride * 2, 0


def bound(n, steps):
    """At most about N * (1 + log2(steps / N)) records (docs/format.md)."""
    return n * (1 + math.log2(steps / n)) if steps > n else steps


LONG_LOOP = """
    from runtime.manual import epoch, step
    for e in epoch(range(4)):
        for b in step(range(1250), name="train"):
            pass
    for b in step(range(50), name="eval"):
        pass
"""


def test_many_steps_are_bounded_weighted_and_spread_over_the_run(tmp_path):
    p, [run] = run_program(tmp_path, LONG_LOOP, {"SCALEPROBE_STEP_RECORDS": "100"})
    assert p.returncode == 0, p.stderr
    assert run.problems == []
    assert run.header["step_records"] == 100
    rid, recs = loop_of(run, "train")
    assert 100 < len(recs) <= bound(100, 5000), len(recs)
    # every step is in a record's weight, exactly
    assert sum(s.get("weight", 1) for s in recs) == 5000
    assert all(isinstance(s["weight"], int) and s["weight"] >= 1 for s in recs if "weight" in s)
    # the first 100 as they are, then one record from each block of 2, 4, 8, ... steps, each
    # weighing its block: no step is in two weights, none in none
    check_blocks(recs, 100, 5000)
    # spread over the whole run: every epoch (every loop statement) has records, up to its end
    assert {s["step"] // 1250 for s in recs} == {0, 1, 2, 3}
    assert max(s["step"] for s in recs) >= 5000 - 2 * max(s.get("weight", 1) for s in recs)
    # the steps drawn are not all even: a loop with work on every 2nd step is sampled alike
    assert {s["step"] % 2 for s in recs if s.get("weight", 1) >= 4} == {0, 1}
    assert all(s["index"] == s["step"] % 1250 for s in recs)  # index counts the thinned steps too
    # the end record counts what was left out, per loop
    assert run.end["steps_thinned"] == {str(rid): 5000 - len(recs)}
    # a loop under the bound is written whole
    _, evals = loop_of(run, "eval")
    assert len(evals) == 50 and all("weight" not in s for s in evals)
    assert len(run.epochs) == 4


def test_zero_means_every_step_is_written(tmp_path):
    p, [run] = run_program(tmp_path, LONG_LOOP, {"SCALEPROBE_STEP_RECORDS": "0"})
    assert p.returncode == 0, p.stderr
    _, recs = loop_of(run, "train")
    assert len(recs) == 5000 and all("weight" not in s for s in recs)
    assert "steps_thinned" not in run.end
    assert run.header["step_records"] == 0


def test_default_bound_leaves_a_short_run_alone(tmp_path):
    p, [run] = run_program(tmp_path, LONG_LOOP)
    assert p.returncode == 0, p.stderr
    assert run.header["step_records"] == DEFAULT_STEP_RECORDS == 10000
    assert len(run.steps) == 5050 and "steps_thinned" not in run.end


@pytest.mark.parametrize("steps", [4, 5, 13, 30, 31, 1000])
def test_which_steps_are_written(tmp_path, steps):
    """N=4: steps 0-3 as they are; one from each of the blocks [4, 6), [6, 8), [8, 10), [10, 12), then
    [12, 16) ... [24, 28), then blocks of 8; the last record weighs the steps from its block on."""
    p, [run] = run_program(tmp_path, f"""
        from runtime.manual import step
        for b in step(range({steps})):
            pass
    """, {"SCALEPROBE_STEP_RECORDS": "4"})
    assert p.returncode == 0, p.stderr
    check_blocks(run.steps, 4, steps)
    assert sum(s.get("weight", 1) for s in run.steps) == steps
    if steps > len(run.steps):
        assert run.end["steps_thinned"] == {str(run.steps[0]["region"]): steps - len(run.steps)}
    else:
        assert "steps_thinned" not in run.end


def test_thinning_rule():
    t = StepThinning(3)
    taken = [t.take(7, None) for _ in range(45)]
    # 3 as they are; one of each block: 3 of stride 2 ([3, 5) from its start), 3 of stride 4, then 8
    kept = [i for i, w in enumerate(taken) if w]
    assert [w for w in taken if w] == [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8]
    assert kept[:4] == [0, 1, 2, 3]
    for i, lo, hi in zip(kept[4:], [5, 7, 9, 13, 17, 21, 29, 37], [7, 9, 13, 17, 21, 29, 37, 45]):
        assert lo <= i < hi
    assert t.thinned == {7: 45 - 12}
    # counted per region, and per side of a schedule's active window
    assert [t.take(8, True) for _ in range(4)] == [1, 1, 1, 2]
    assert [t.take(8, False) for _ in range(4)] == [1, 1, 1, 2]
    # the same steps every time
    again = StepThinning(3)
    assert [again.take(7, None) for _ in range(45)] == taken


def test_held_records_get_the_steps_seen_since(tmp_path):
    """The weighted records of a loop are not held in memory beyond the latest one, and thinned-out
    steps not at all."""
    p, [run] = run_program(tmp_path, """
        from runtime import recorder
        from runtime.manual import step
        for b in step(range(5000)):
            pass
        rec = recorder.get()
        print(len(rec.series) + len(rec.series_wait))
    """, {"SCALEPROBE_STEP_RECORDS": "100", "SCALEPROBE_FLUSH_INTERVAL": "3600"})
    assert p.returncode == 0, p.stderr
    held = int(p.stdout.split()[-1])
    assert held == len(run.steps) - 1  # all but the last weighted one, held by the thinning
    assert held < bound(100, 5000)
    assert sum(s.get("weight", 1) for s in run.steps) == 5000


def test_schedule_active_steps_are_bounded_apart(tmp_path):
    """The active window is what the modeler uses: a short one is written whole, however many steps
    around it are thinned; a long one is thinned on its own, its weights counting active steps."""
    code = """
        from runtime.manual import step
        for b in step(range(2000)):
            pass
    """
    p, [run] = run_program(tmp_path, code, {"SCALEPROBE_STEP_RECORDS": "20",
                                            "SCALEPROBE_SCHEDULE": "skip_first=1500,wait=2,warmup=1,active=3,repeat=2"})
    assert p.returncode == 0, p.stderr
    active = [s for s in run.steps if s.get("active")]
    assert [s["step"] for s in active] == [1503, 1504, 1505, 1509, 1510, 1511]
    assert all("weight" not in s for s in active)
    assert sum(s.get("weight", 1) for s in run.steps) == 2000
    assert len(run.steps) < 20 * (1 + math.log2(2000 / 20)) + 6

    sched = Schedule(wait=3, active=1)  # every 4th step active: 500 active, 1500 not
    p, [run] = run_program(tmp_path, code, {"SCALEPROBE_STEP_RECORDS": "20", "SCALEPROBE_SCHEDULE": "wait=3,active=1"},
                           name="long")
    assert p.returncode == 0, p.stderr
    for s in run.steps:
        assert s["active"] == sched.is_active(s["step"])
    active = [s for s in run.steps if s["active"]]
    assert sum(s.get("weight", 1) for s in active) == 500
    assert sum(s.get("weight", 1) for s in run.steps if not s["active"]) == 1500
    assert 20 < len(active) <= bound(20, 500)
    assert run.end["steps_thinned"] == {str(run.steps[0]["region"]): 2000 - len(run.steps)}


def test_manual_step_blocks_share_the_bound(tmp_path):
    p, [run] = run_program(tmp_path, """
        from runtime.manual import step
        for i in range(300):
            with step(name="block"):
                pass
    """, {"SCALEPROBE_STEP_RECORDS": "100"})
    assert p.returncode == 0, p.stderr
    _, recs = loop_of(run, "block")
    assert 100 < len(recs) < 300
    assert sum(s.get("weight", 1) for s in recs) == 300
    assert all(s["index"] == 0 for s in recs)


def test_fake_gpu_steps_keep_their_gpu_time(tmp_path):
    """Thinned-out steps still stop their GPU interval (the event pool stays bounded); the records
    written, held ones too, get their GPU time."""
    p, [run] = run_program(tmp_path, """
        from runtime.manual import step
        for b in step(range(1000)):
            pass
    """, {"SCALEPROBE_STEP_RECORDS": "50", "SCALEPROBE_GPU": "fake", "SCALEPROBE_GPU_BUDGET": "0"})
    assert p.returncode == 0, p.stderr
    assert run.problems == []
    assert sum(s.get("weight", 1) for s in run.steps) == 1000
    assert all(isinstance(s["gpu_ns"], int) for s in run.steps), [s["gpu_ns"] for s in run.steps][-5:]


def test_forked_child_counts_from_zero(tmp_path):
    p, runs = run_program(tmp_path, """
        import os
        from runtime import probe
        from runtime.manual import step
        for b in step(range(300)):
            pass
        pid = os.fork()
        if pid == 0:
            for b in step(range(80)):
                pass
            probe.finish()
            os._exit(0)
        os.waitpid(pid, 0)
    """, {"SCALEPROBE_STEP_RECORDS": "100"})
    assert p.returncode == 0, p.stderr
    child = next(r for r in runs if "forked_from" in r.header)
    parent = next(r for r in runs if "forked_from" not in r.header)
    assert len(child.steps) == 80 and all("weight" not in s for s in child.steps)
    assert "steps_thinned" not in child.end
    assert sum(s.get("weight", 1) for s in parent.steps) == 300


def test_loop_going_on_in_a_forked_child_counts_there_from_zero(tmp_path):
    p, runs = run_program(tmp_path, """
        import os
        from runtime import probe
        from runtime.manual import step
        child = False
        for b in step(range(400)):
            if b == 250:
                child = os.fork() == 0
        if child:
            probe.finish()
            os._exit(0)
        os.wait()
    """, {"SCALEPROBE_STEP_RECORDS": "100"})
    assert p.returncode == 0, p.stderr
    child = next(r for r in runs if "forked_from" in r.header)
    parent = next(r for r in runs if "forked_from" not in r.header)
    assert sum(s.get("weight", 1) for s in parent.steps) == 400
    # the step open at the fork (250) and the 149 after it, closed in the child: its own count
    assert sum(s.get("weight", 1) for s in child.steps) == 150
    check_blocks(child.steps, 100, 150, first=250)  # (`step` counts the process's steps from the parent's)
    assert child.end["steps_thinned"] == {str(child.steps[0]["region"]): 150 - len(child.steps)}


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "1e4"])
def test_bad_value_is_a_config_error_naming_the_variable(value):
    with pytest.raises(ConfigError, match=r"SCALEPROBE_STEP_RECORDS=.*0 to write every step"):
        from_env({"SCALEPROBE_STEP_RECORDS": value})


def test_bad_value_stops_the_program(tmp_path):
    p, runs = run_program(tmp_path, LONG_LOOP, {"SCALEPROBE_STEP_RECORDS": "ten"})
    assert p.returncode == 2
    assert "SCALEPROBE_STEP_RECORDS='ten'" in p.stderr
    assert runs == []


def test_values_read():
    assert from_env({}).step_records == 10000
    assert from_env({"SCALEPROBE_STEP_RECORDS": ""}).step_records == 10000
    assert from_env({"SCALEPROBE_STEP_RECORDS": "0"}).step_records == 0
    assert from_env({"SCALEPROBE_STEP_RECORDS": "250"}).step_records == 250
