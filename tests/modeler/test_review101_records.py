"""Review 101 (the modeler on bad input), H1 and H2: step, epoch and comm records were stored without
a look at their fields. A step's `duration_ns` of "x" crashed `modeler timeline` with a ValueError;
in fit, report and export the step was left out of step_time but kept in data_wait, 2^70 ns was
taken as a time, a weight of 0 made a step count for nothing, a comm `op` of 5 or a `callpath` of
"1,2" became call paths, all without a word. Now such a record is left out whole, named by file and
line, for every metric alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import read_run
from tests.envclean import clean_env
from tests.modeler.modeler_synthetic_runs import MS, write_rank_file

REPO = Path(__file__).resolve().parents[2]
GOOD_STEP = {"region": 2, "start_ns": 0, "duration_ns": 10 * MS, "data_wait_ns": 1 * MS, "comm_ns": 0, "gpu_ns": None,
             "memory": None}
GOOD_COMM = {"flush": 1, "op": "all_reduce", "bytes": 4096, "group_size": 2, "calls": 4, "time_ns": 2 * MS,
             "gpu_ns": None, "gpu_calls": 0, "callpath": [0, 1]}


def _file(tmp_path: Path, steps=(), comms=(), epochs=()) -> Path:
    return write_rank_file(tmp_path / "run", run_id="r", params={"p": 1}, steps=steps, comms=comms, epochs=epochs,
                           profile={(0,): (1, 100 * MS, 10 * MS), (0, 1): (1, 90 * MS, 10 * MS)})


@pytest.mark.parametrize("change, why", [
    ({"duration_ns": "x"}, "duration_ns='x' is not a whole number"),
    ({"duration_ns": [1]}, "duration_ns=[1] is not a whole number"),
    ({"duration_ns": float(2**70)}, "is more than a run can record"),  # (orjson writes no int that large)
    ({"data_wait_ns": "x"}, "data_wait_ns='x' is not a whole number"),
    ({"region": "58"}, "region='58' is not a whole number"),
    ({"weight": 0}, "weight=0: a step record stands for at least its own step"),
    ({"weight": 1e30}, "weight=1e+30 is more than a run can record"),
    ({"active": "yes"}, "active='yes' is not true or false"),
    ({"memory": "big"}, "memory='big' is not an object"),
])
def test_a_step_with_a_field_of_the_wrong_type_is_named_and_left_out(tmp_path, change, why):
    f = _file(tmp_path, steps=[GOOD_STEP, {**GOOD_STEP, **change}, GOOD_STEP])
    run = read_run(f)
    assert len(run.steps) == 2
    [problem] = [p for p in run.problems if "bad 'step' record" in p]
    assert problem.startswith(f"{f}:") and why in problem, run.problems


def test_an_epoch_with_a_duration_that_is_no_number_is_named_and_left_out(tmp_path):
    f = _file(tmp_path, epochs=[{"region": 1, "start_ns": 0, "duration_ns": "NaN"}])
    run = read_run(f)
    assert run.epochs == [] and any("bad 'epoch' record: duration_ns='NaN'" in p for p in run.problems)


@pytest.mark.parametrize("change, why", [
    ({"op": 5}, "op=5 is not the name of an operation"),
    ({"callpath": "1,2"}, "callpath='1,2' is not a list of region ids"),
    ({"time_ns": "x"}, "time_ns='x' is not a whole number"),
    ({"calls": 2.5}, "calls=2.5 is not a whole number"),
    ({"group_size": "2"}, "group_size='2' is not a whole number"),
])
def test_a_comm_record_with_a_field_of_the_wrong_type_is_named_and_left_out(tmp_path, change, why):
    f = _file(tmp_path, comms=[GOOD_COMM, {**GOOD_COMM, **change}])
    run = read_run(f)
    assert len(run.comms) == 1
    assert any(p.startswith(f"{f}:") and "bad 'comm' record" in p and why in p for p in run.problems), run.problems


def test_the_writers_records_pass_as_they_are(tmp_path):
    step = {**GOOD_STEP, "step": 7, "tid": 4711, "active": True, "weight": 4, "memory": {"cuda_peak_bytes": 10}}
    f = _file(tmp_path, steps=[step], comms=[GOOD_COMM], epochs=[{"region": 1, "start_ns": 0, "duration_ns": 5 * MS,
                                                                    "memory": {"rss_peak_bytes": 2**20}}])
    run = read_run(f)
    assert run.problems == [] and len(run.steps) == len(run.comms) == len(run.epochs) == 1
    assert run.steps[0]["weight"] == 4 and run.comms[0]["callpath"] == [0, 1]


def _modeler(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modeler", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=clean_env(PYTHONPATH=str(REPO)))


def test_timeline_names_a_step_whose_duration_is_no_number_and_draws_the_rest(tmp_path):
    f = _file(tmp_path, steps=[GOOD_STEP, {**GOOD_STEP, "start_ns": 20 * MS, "duration_ns": "x"}])
    p = _modeler("timeline", str(f.parent), "-o", "tl.json", cwd=tmp_path)
    assert "Traceback" not in p.stderr and p.returncode in (0, 3), p.stderr
    assert "bad 'step' record: duration_ns='x'" in p.stderr
    trace = json.loads((tmp_path / "tl.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("ph") == "X" for e in events)


def test_every_per_step_metric_leaves_out_the_same_step(tmp_path):
    """The bad step (data_wait 9 ms) was left out of step_time only: data_wait kept it."""
    good = [{**GOOD_STEP, "duration_ns": d * MS} for d in (10, 12, 14)]
    for p in (1, 2, 4, 8, 16):
        steps = good + ([{**GOOD_STEP, "duration_ns": "x", "data_wait_ns": 9 * MS}] if p == 4 else [])
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, steps=steps,
                        profile={(0,): (1, 100 * MS, 10 * MS), (0, 1): (1, 90 * MS, 10 * MS)})
    p = _modeler("fit", ".", "--metric", "step_time,data_wait", "--format", "json", cwd=tmp_path)
    assert p.returncode in (0, 3), p.stderr
    assert "r4" in p.stderr and "bad 'step' record" in p.stderr
    models = {m["metric"]: m for m in json.loads(p.stdout)["models"]}
    assert models["data_wait"]["model"] in ("0.001", "1e-03") or models["data_wait"]["constant"] == pytest.approx(0.001)
    assert models["step_time"]["constant"] == pytest.approx(0.012)


def test_a_glob_that_matches_a_run_folder_holding_no_run_file_reads_the_others(tmp_path):
    """Review 101 M2: a run folder with only its launch.json among those `'runs/*'` matched stopped
    fit, report and export (`directory holds no .jsonl or .txt files`)."""
    for p in (1, 2, 4, 8, 16):
        write_rank_file(tmp_path / "runs" / f"r{p}", run_id=f"r{p}", params={"p": p},
                        profile={(0,): (1, p * 100 * MS, 10 * MS)})
    (tmp_path / "runs" / "r32").mkdir()
    (tmp_path / "runs" / "r32" / "launch.json").write_text("{}")
    p = _modeler("fit", "runs/*", cwd=tmp_path)
    assert p.returncode == 3 and "main" in p.stdout, p.stderr  # 3: something was skipped
    assert "runs/r32: skipped: a folder the pattern matches that holds no .jsonl or .txt files" in p.stderr
    only = _modeler("fit", "runs/r32*", cwd=tmp_path)
    assert only.returncode != 0 and "the folders this pattern matches hold no .jsonl or .txt files" in only.stderr


@pytest.mark.parametrize("damage", [b"", b'{"type": "header", "format": "scaleprobe-run", "ver', b"\x1f\x8b\x08garbage"])
def test_timeline_draws_the_ranks_beside_one_that_died_at_start_up(tmp_path, damage):
    """Review 101 M1: an empty rank file (or one cut inside its header, or compressed) refused the
    whole run: rank 0's complete data was not drawn. `fit` and `report` skip such a file."""
    run = tmp_path / "run"
    write_rank_file(run, run_id="r", params={"p": 1}, world_size=2, steps=[GOOD_STEP],
                    profile={(0,): (1, 100 * MS, 10 * MS)})
    (run / "rank1.2001.jsonl").write_bytes(damage)
    p = _modeler("timeline", "run", "-o", "tl.json", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "rank1.2001.jsonl" in p.stderr and "left out (a rank that died at start-up?)" in p.stderr
    names = [e["args"]["name"] for e in json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
             if e.get("name") == "process_name"]
    assert len(names) == 1 and names[0].startswith("rank 0"), names
    alone = _modeler("timeline", "run/rank1.2001.jsonl", "-o", "one.json", cwd=tmp_path)
    assert alone.returncode != 0 and "rank1.2001.jsonl" in alone.stderr and "Traceback" not in alone.stderr


@pytest.mark.parametrize("command", [["fit", "runs", "-o"], ["report", "runs", "-o"], ["export", "runs", "--extrap"],
                                     ["timeline", "runs/r1", "-o"]])
def test_an_output_through_a_file_is_said_once_by_every_command(tmp_path, command):
    """Review 101 L4: `fit` said "x is a file, not a folder is a file, not a folder"; report, export
    and timeline said "File exists"."""
    for p in (1, 2, 4, 8, 16):
        write_rank_file(tmp_path / "runs" / f"r{p}", run_id=f"r{p}", params={"p": p}, steps=[GOOD_STEP],
                        profile={(0,): (1, p * 100 * MS, 10 * MS)})
    (tmp_path / "exist.html").write_text("x")
    p = _modeler(*command, "exist.html/out.txt", cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert p.stderr.count("is a file, not a folder") == 1 and "File exists" not in p.stderr, p.stderr


def test_a_bad_event_is_left_out_alone(tmp_path):
    """Review 101 L3: one bad value in an `events` record dropped the whole record (up to 10,000
    events), and the message gave the layout wrongly ([region, thread, start, duration])."""
    events = [[0, i * 10, i * 10 + 5, 7] for i in range(10)]
    events[3] = [0, "x", 35, 7]
    events[5] = [0, 50, 55]
    f = write_rank_file(tmp_path / "run", run_id="r", params={"p": 1}, profile={(0,): (1, 100 * MS, 10 * MS)},
                        records=[{"type": "events", "flush": 1, "events": events, "threads": {"7": "MainThread"}}])
    run = read_run(f)
    assert len(run.events) == 8 and run.threads == {7: "MainThread"}
    [problem] = [p for p in run.problems if "events" in p]
    assert "2 of its 10 events are not [region, start_ns, end_ns, thread id]" in problem and problem.startswith(f"{f}:")


def test_a_profile_record_of_no_region_is_named(tmp_path):
    """Review 101 L1: `"path": []` was dropped without a word; it is named, and the run's other
    call paths are kept (it adds to none of them)."""
    f = write_rank_file(tmp_path / "run", run_id="r", params={"p": 1}, profile={(0,): (1, 100 * MS, 10 * MS)},
                        records=[{"type": "profile", "flush": 1, "path": [], "visits": 1, "incl_ns": 5, "excl_ns": 5,
                                  "min_ns": 5, "max_ns": 5, "sumsq_ns": 25.0}])
    run = read_run(f)
    assert list(run.profile) == [(0,)]
    assert any(p.startswith(f"{f}:") and "path=[] names no region" in p for p in run.problems), run.problems
    from modeler.readers.runvalues import check_values

    check = check_values(f, run)
    assert check.lost is None and not check.unknown_paths


@pytest.mark.parametrize("command", [["fit"], ["report", "-o", "r.html"], ["export", "--extrap", "x.jsonl"]])
def test_a_parameter_value_too_large_to_model_stops_every_command_naming_its_file(tmp_path, command):
    """Review 101 M4: `modeler report` took batch=1e40 and modeled every series as a constant,
    without a word; `fit` stopped naming no file."""
    for p in (1, 2, 4, 8, 1e40):
        write_rank_file(tmp_path / "runs" / f"r{p:g}", run_id=f"r{p:g}", params={"p": p},
                        profile={(0,): (1, 100 * MS, 10 * MS)})
    p = _modeler(*command[:1], "runs", *command[1:], cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "parameter 'p': 1e+40 (in runs/r1e+40/rank0.1000.jsonl) is too large to model" in p.stderr, p.stderr


def test_an_extrap_text_file_cut_in_its_last_data_line_is_said(tmp_path):
    """Review 101 M5: `head -c 500` of an Extra-P text file ended in `DATA 509.8 495.7 5`, the 5 cut
    from 501.0, read as a measurement without a word. Extra-P's own files end without a line end,
    so that alone is no sign."""
    from modeler.readers.extrap import read_extrap_text

    whole = ("PARAMETER x\nPOINTS 1 2 4 8 16\nREGION r\nMETRIC time\n"
             + "".join(f"DATA {10 * x} {10 * x + 1} {10 * x + 2}\n" for x in (1, 2, 4, 8, 16)))
    (tmp_path / "whole.txt").write_text(whole.rstrip("\n"))
    assert not [w for w in read_extrap_text(tmp_path / "whole.txt").warnings if "cut off" in w]
    (tmp_path / "cut.txt").write_text(whole.rstrip("\n")[:-4])  # "DATA 160 161 162" -> "DATA 160 16"
    [said] = [w for w in read_extrap_text(tmp_path / "cut.txt").warnings if "cut off" in w]
    assert said.startswith(f"{tmp_path / 'cut.txt'}:9: the last line may be cut off (no line end, 2 value(s) where")


def _sweep(root: Path) -> None:
    for p in (1, 2, 4, 8, 16):
        write_rank_file(root / f"r{p}", run_id=f"r{p}", params={"p": p}, profile={(0,): (1, p * 100 * MS, 10 * MS)})


def test_a_linked_run_folder_is_read_and_a_link_back_up_is_no_loop(tmp_path):
    """Review 101 M3: `runs/r8 -> ../elsewhere/r8` was not followed: run r8 left out without a word."""
    import os
    import shutil

    _sweep(tmp_path / "elsewhere")
    (tmp_path / "runs").mkdir()
    for p in (1, 2, 4, 16):
        shutil.copytree(tmp_path / "elsewhere" / f"r{p}", tmp_path / "runs" / f"r{p}")
    os.symlink(tmp_path / "elsewhere" / "r8", tmp_path / "runs" / "r8")
    os.symlink("..", tmp_path / "runs" / "up")
    p = _modeler("fit", "runs", cwd=tmp_path)
    assert p.returncode == 0 and "read 5 of 5 input files" in p.stderr, p.stderr


@pytest.mark.parametrize("named", ["runs", "runs/*/*.jsonl"])
def test_a_dangling_link_named_like_a_rank_file_is_named_as_unreadable(tmp_path, named):
    import os

    _sweep(tmp_path / "runs")
    [f] = (tmp_path / "runs" / "r8").glob("*.jsonl")
    f.unlink()
    os.symlink("/nonexistent/rank0.1000.jsonl", f)
    p = _modeler("fit", named, cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert ("r8/rank0.1000.jsonl: skipped: cannot read: No such file or directory (a symbolic link to "
            "/nonexistent/rank0.1000.jsonl, which is not there)") in p.stderr


def test_a_compressed_rank_file_in_a_folder_is_named(tmp_path):
    import gzip

    _sweep(tmp_path / "runs")
    [f] = (tmp_path / "runs" / "r8").glob("*.jsonl")
    f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
    f.unlink()
    p = _modeler("fit", "runs", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "r8/rank0.1000.jsonl.gz: skipped: compressed with gzip: decompress it first" in p.stderr


def test_a_reversed_rank_range_is_named():
    """Review 101 L7: `--ranks 1-0` read as "none of the selected ranks is in the run"."""
    from modeler.errors import InputError
    from modeler.timeline import _parse_ranks

    with pytest.raises(InputError, match=r"--ranks: '3-1' is a range from 3 down to 1: give it as 1-3"):
        _parse_ranks("0,3-1")
    assert _parse_ranks("0,1-3") == {0, 1, 2, 3}


def test_an_empty_extrap_callpath_is_the_default_one_as_in_the_text_format(tmp_path):
    """Review 101 L6: `"callpath": ""` made a series of no name beside the `<root>` of a line
    without a callpath."""
    from modeler.readers.extrap import read_extrap_jsonl

    lines = [{"params": {"x": x}, "callpath": cp, "metric": "time", "value": float(x)}
             for x in (1, 2, 4, 8, 16) for cp in (("",) if x < 4 else ())] + \
            [{"params": {"x": x}, "metric": "time", "value": float(x)} for x in (4, 8, 16)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ds = read_extrap_jsonl(tmp_path / "a.jsonl")
    assert [(s.callpath, s.n_points) for s in ds.series] == [("<root>", 5)]


def test_a_symbolic_link_loop_named_like_a_run_file_is_named_not_a_traceback(tmp_path):
    """Review 102 MED-1: `self.jsonl -> self.jsonl` in a run folder, or named, stopped fit with
    `RuntimeError: Symlink loop` (Path.resolve) once dangling links were kept."""
    import os

    _sweep(tmp_path / "runs")
    os.symlink("self.jsonl", tmp_path / "runs" / "r8" / "self.jsonl")
    for named in ("runs", "runs/r8/self.jsonl"):
        p = _modeler("fit", named, *(["runs"] if named != "runs" else []), cwd=tmp_path)
        assert "Traceback" not in p.stderr and p.returncode == 3, p.stderr
        assert "self.jsonl" in p.stderr and "symbolic links" in p.stderr.lower(), p.stderr


def test_a_link_to_the_root_folder_is_not_walked(tmp_path):
    """Review 102 LOW-1: the 'link back up' test was `startswith(real + "/")`, "//" for `/`: a link
    to `/` in a run folder made the reader walk the whole file system."""
    import os

    _sweep(tmp_path / "runs")
    os.symlink("/", tmp_path / "runs" / "r8" / "rootlink")
    p = _modeler("fit", "runs", cwd=tmp_path)
    assert p.returncode == 0 and "read 5 of 5 input files" in p.stderr, p.stderr


def test_timeline_names_a_compressed_rank_file(tmp_path):
    """Review 102 LOW-3: a folder of `rank*.jsonl.gz` said "no run files (*.jsonl)"."""
    import gzip

    f = _file(tmp_path, steps=[GOOD_STEP])
    f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
    f.unlink()
    p = _modeler("timeline", "run", "-o", "tl.json", cwd=tmp_path)
    assert p.returncode != 0 and "compressed with gzip" in p.stderr and "Traceback" not in p.stderr, p.stderr
