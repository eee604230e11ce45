"""Runtime behaviour a user review found wrong: knob values that slipped through, a schedule's
warm-up steps marked active, and the runtime's own epoch bookkeeping counted as data wait."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtime import series
from runtime.config import ConfigError, Schedule, from_env, parse_schedule
from test_recorder import only_run, run_app


@pytest.mark.parametrize("var, value, message", [
    ("SCALEPROBE_FLUSH_INTERVAL", "nan", "finite"),
    ("SCALEPROBE_FLUSH_INTERVAL", "inf", "finite"),
    ("SCALEPROBE_FLUSH_INTERVAL", "1e400", "finite"),
    ("SCALEPROBE_FLUSH_INTERVAL", "1e300", "at most"),
    ("SCALEPROBE_THROTTLE_NS", "nan", "not a number"),
    ("SCALEPROBE_RANKS", "3-1", "empty range"),
    ("SCALEPROBE_PURE", "maybe", "use 1 or 0"),
    ("SCALEPROBE_QUIET", "perhaps", "use 1 or 0"),
])
def test_bad_knob_values_are_refused_naming_the_variable(var, value, message):
    with pytest.raises(ConfigError, match=message) as err:
        from_env({var: value})
    assert var in str(err.value)


def test_quiet_zero_means_not_quiet():
    assert from_env({"SCALEPROBE_QUIET": "0"}).quiet is False
    assert from_env({"SCALEPROBE_QUIET": "1"}).quiet is True
    assert from_env({"SCALEPROBE_FLUSH_INTERVAL": "0.5"}).flush_interval_s == 0.5


def test_quiet_zero_still_names_the_run_file(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_QUIET": "0", "APP_EPOCHS": "1"}, out=False)
    assert p.returncode == 0, p.stderr
    assert "scaleprobe: run data written to" in p.stderr


def test_schedule_phases_tell_warmup_from_active():
    s = parse_schedule("skip_first=1,wait=1,warmup=1,active=2,repeat=1")
    phases = [s.phase(i) for i in range(7)]
    assert phases == ["skip", "wait", "warmup", "active", "active", "done", "done"]
    assert [s.probes_on(i) for i in range(7)] == [False, False, True, True, True, False, False]
    assert [s.is_active(i) for i in range(7)] == [False, False, False, True, True, False, False]
    assert Schedule(active=0).is_active(5)


def test_warmup_steps_are_recorded_but_not_marked_active(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_SCHEDULE": "skip_first=1,wait=1,warmup=1,active=1,repeat=1",
                               "APP_EPOCHS": "2"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert [s.get("active") for s in run.steps] == [False, False, False, True, False, False]
    # main and the epoch loop were entered with probes on and left with them off: not in the
    # profile, and the end record says so instead of "dropped 0"
    assert run.end["dropped"] >= 2


def test_epoch_bookkeeping_is_not_the_next_epochs_data_wait(monkeypatch):
    clock = [0]

    def now():
        clock[0] += 10
        return clock[0]

    def slow_peak():  # our own work at an epoch's end: a second on the fake clock
        clock[0] += 1_000_000_000
        return {"rss_peak_bytes": 1, "rss_peak_since": "start"}

    monkeypatch.setattr(series, "perf_counter_ns", now)
    monkeypatch.setattr(series, "_rss_peak", slow_peak)
    records = []
    rec = SimpleNamespace(cfg=SimpleNamespace(schedule=None), comm_ns=[0], gpu=None, gpu_rotation=None,
                          finished=False, steps_seen=0, series=records, request_flush=lambda: None)
    for _ in series.wrap(1, iter(range(3)), "epoch", rec):
        pass
    assert len(records) == 3
    assert all(r["data_wait_ns"] < 1_000 for r in records), [r["data_wait_ns"] for r in records]
    assert all(r["duration_ns"] < 1_000 for r in records)
