"""Review 2 of the modeler on real sweeps: copies and restarted ranks, undefined region ids,
impossible values, mixed experiments, derived metrics under --ranks sum/min and without a
baseline, which rank failed, kept incomplete runs, unreadable rank files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from modeler.readers import ReadOptions, read_inputs
from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import MS, REGIONS, write_rank_file
from test_readers_runs import series, simple_run

SIGTERM_END = {"status": "signal", "exit_code": 143, "signal": 15}


def _sweep(root: Path, points=(2, 4, 8), t_ms=10) -> None:
    for p in points:
        simple_run(root, f"r{p}", p, t_ms=t_ms * p)


def _run_of(rs, run_id):
    (run,) = [r for r in rs.runs if r.run_id == run_id]
    return run


# 1 ---------------------------------------------------------------------------------------------


def test_copied_run_folder_inside_the_input_is_read_once_with_a_warning(tmp_path):
    _sweep(tmp_path / "runs")
    shutil.copytree(tmp_path / "runs", tmp_path / "runs" / "backup")
    loaded = read_inputs([tmp_path / "runs"])
    assert series(loaded.dataset, "main", "time").values().tolist() == pytest.approx([0.02, 0.04, 0.08])
    assert series(loaded.dataset, "main->Model.forward", "visits").values().tolist() == [5.0, 5.0, 5.0]
    (warning,) = [w for w in loaded.dataset.warnings if "read once" in w]
    original, copy = tmp_path / "runs" / "r2" / "rank0.1000.jsonl", tmp_path / "runs" / "backup" / "r2" / "rank0.1000.jsonl"
    assert "3 file(s)" in warning and str(original) in warning and str(copy) in warning
    assert sorted(f.status for f in loaded.files) == ["duplicate"] * 3 + ["read"] * 3
    # the summary line (all that -q leaves) says why half of the files were not read
    from modeler.commands.inputs import describe_files

    assert describe_files(loaded) == "read 3 of 6 input files (3 duplicate: copies of files read)"


def test_copies_that_differ_keep_the_one_that_ended(tmp_path):
    _sweep(tmp_path / "runs")
    cut = simple_run(tmp_path / "old", "r4", 4, t_ms=5, end=None)  # an rsync taken while the run went on
    rs = load_runs([tmp_path / "old", tmp_path / "runs"])
    assert all(r.status == "ok" for r in rs.runs)
    (warning,) = [w for w in rs.warnings if "differ" in w]
    assert str(cut) in warning and "complete" in warning
    assert series(read_runs([tmp_path / "old", tmp_path / "runs"]), "main", "time").values()[1] == pytest.approx(0.04)


def test_two_main_files_for_one_rank_leave_the_run_out(tmp_path):
    # torchrun --max-restarts: the restarted rank 0 writes a second main file with a new pid
    _sweep(tmp_path)
    for pid in (1000, 2000):
        write_rank_file(tmp_path / "r16", run_id="r16", params={"p": 16}, pid=pid, profile={(0,): (1, 160 * MS, MS)})
    rs = load_runs([tmp_path])
    run = _run_of(rs, "r16")
    assert run.status == "ambiguous"
    assert "rank0.1000.jsonl" in run.reason and "rank0.2000.jsonl" in run.reason
    assert any(w.startswith("run r16 left out (ambiguous)") for w in rs.warnings)
    assert series(read_runs([tmp_path]), "main", "time").points[:, 0].tolist() == [2.0, 4.0, 8.0]


def test_worker_files_of_a_rank_are_still_summed(tmp_path):
    _sweep(tmp_path)
    d = tmp_path / "w"
    write_rank_file(d, run_id="w", params={"p": 16}, pid=10, profile={(0,): (1, 10 * MS, 10 * MS)})
    for pid in (11, 12):
        write_rank_file(d, run_id="w", params={"p": 16}, pid=pid, header={"child_of": 10},
                        profile={(4,): (8, 3 * MS, 3 * MS)}, end=None)
    assert _run_of(load_runs([tmp_path]), "w").status == "ok"
    assert series(read_runs([tmp_path]), "load_batch", "time").values()[-1] == pytest.approx(0.006)


# 2 and 10 --------------------------------------------------------------------------------------


def test_records_of_an_undefined_region_id_leave_their_run_out(tmp_path):
    _sweep(tmp_path)
    # the region record of id 3 was damaged: every record that uses id 3 cannot be named
    regions = [r for r in REGIONS if r[0] != 3]
    bad = write_rank_file(tmp_path / "r16", run_id="r16", params={"p": 16}, regions=regions,
                          records=[{"type": "region", "id": 3, "kind": "method"}],
                          profile={(0,): (1, 160 * MS, MS), (0, 3): (5, 159 * MS, 159 * MS)})
    rs = load_runs([tmp_path])
    run = _run_of(rs, "r16")
    assert run.status == "damaged" and str(bad) in run.reason and "3" in run.reason
    assert any(w.startswith(f"{bad}:") and "region id 3 is not defined" in w for w in rs.warnings)
    ds = read_runs([tmp_path])
    assert not [s for s in ds.series if "#" in s.callpath]
    assert series(ds, "main->Model.forward", "time").points[:, 0].tolist() == [2.0, 4.0, 8.0]


def test_profile_path_with_an_undefined_id_is_named_with_its_line(tmp_path):
    _sweep(tmp_path)
    bad = simple_run(tmp_path, "r16", 16, records=[{"type": "profile", "path": [9999], "visits": 1, "incl_ns": 10,
                                                     "excl_ns": 10, "min_ns": 10, "max_ns": 10, "sumsq_ns": 0}])
    line = bad.read_text().splitlines().index(next(x for x in bad.read_text().splitlines() if "9999" in x)) + 1
    rs = load_runs([tmp_path])
    assert any(w.startswith(f"{bad}:{line}: region id 9999") for w in rs.warnings)
    assert _run_of(rs, "r16").status == "damaged"
    assert "#9999" not in {s.callpath for s in read_runs([tmp_path]).series}


def test_impossible_values_are_reported_with_file_and_line_and_skipped(tmp_path):
    steps = [{"region": 2, "duration_ns": 10 * MS, "data_wait_ns": MS, "comm_ns": 0, "gpu_ns": None, "memory": None}]
    comms = [{"op": "all_reduce", "bytes": 4096, "group_size": 2, "calls": 3, "time_ns": 6 * MS, "gpu_ns": None,
              "callpath": [0, 1, 2]}]
    bad_records = [
        {"type": "step", "region": 2, "index": 9, "duration_ns": -5, "data_wait_ns": 1, "comm_ns": 0, "gpu_ns": None, "memory": None},
        {"type": "comm", "op": "all_reduce", "bytes": -100, "group_size": 2, "calls": 1, "time_ns": 10, "gpu_ns": None, "callpath": [0, 1, 2]},
        {"type": "profile", "path": [0, 1], "visits": 1, "incl_ns": -MS, "excl_ns": 0, "min_ns": 1, "max_ns": 1, "sumsq_ns": 0},
    ]
    prof = {(0,): (1, 80 * MS, MS), (0, 1): (1, 70 * MS, MS), (0, 1, 2): (4, 60 * MS, MS)}
    for name, extra in (("clean", []), ("damaged", bad_records)):
        for p in (2, 4):
            write_rank_file(tmp_path / name / f"r{p}", run_id=f"{name}{p}", params={"p": p}, steps=steps, comms=comms,
                            profile=prof, records=extra)
    rs = load_runs([tmp_path / "damaged"])
    f = tmp_path / "damaged" / "r2" / "rank0.1000.jsonl"
    lines = f.read_text().splitlines()
    for needle, why in (('"duration_ns":-5', "duration_ns=-5"), ('"bytes":-100', "bytes=-100"), ('"incl_ns":-', "incl_ns=-1000000")):
        n = next(i for i, x in enumerate(lines, 1) if needle in x)
        assert any(w.startswith(f"{f}:{n}: ") and why in w and "skipped" in w for w in rs.warnings), why
    clean, damaged = read_runs([tmp_path / "clean"]), read_runs([tmp_path / "damaged"])
    # A record with an impossible value stood for a real one whose value is lost: the totals it adds
    # to (the profile record's call path, the comm record's operation) have no value in those runs,
    # neither the rest nor 0 (review 9, F4); everything else is as in the clean runs.
    lost = {("main->train", m) for m in ("time", "exclusive_time", "visits")}
    # (an operation with no region of its own has its comm_time as its time: review 15)
    lost |= {("main->train->train_epoch->all_reduce", m)
             for m in ("comm_time", "comm_bytes", "comm_calls", "time", "exclusive_time", "visits")}
    assert {(s.callpath, s.metric) for s in clean.series} - {(s.callpath, s.metric) for s in damaged.series} == lost
    for s in clean.series:
        if (s.callpath, s.metric) not in lost:
            assert series(damaged, s.callpath, s.metric).values().tolist() == pytest.approx(s.values().tolist()), s
    assert sum("left-out record(s) held part of a total" in w for w in damaged.warnings) == 2


# 3 ---------------------------------------------------------------------------------------------


def test_runs_of_another_experiment_are_not_zeros_for_call_paths_they_lack(tmp_path):
    for p in (2, 4, 8):
        for rep in range(2):
            simple_run(tmp_path / "ddp", f"d{p}-{rep}", p, rep=rep, t_ms=10 * p, header={"experiment": "ddp"})
    for p in (2, 4):  # another program at the same points: only `main`, no Model.forward
        write_rank_file(tmp_path / "other" / f"o{p}", run_id=f"o{p}", params={"p": p}, header={"experiment": "other"},
                        profile={(0,): (1, MS, MS)})
    rs = load_runs([tmp_path])
    ds = read_runs([tmp_path])
    fwd = series(ds, "main->Model.forward", "time")
    assert [r.tolist() for r in fwd.repetitions] == [[0.019, 0.019], [0.039, 0.039], [0.079, 0.079]]
    assert sorted(series(ds, "main", "time").repetitions[0].tolist()) == pytest.approx([0.001, 0.02, 0.02])
    (warning,) = [w for w in rs.warnings if "experiments" in w]
    assert "ddp, other" in warning and "2 point(s)" in warning and "not counted as 0" in warning


def test_a_repetition_of_the_same_experiment_that_skipped_a_call_path_still_counts_zero(tmp_path):
    for p in (2, 4, 8):
        simple_run(tmp_path, f"a{p}", p, t_ms=10 * p)
        write_rank_file(tmp_path / f"b{p}", run_id=f"b{p}", params={"p": p}, repetition=1, profile={(0,): (1, MS, MS)})
    fwd = series(read_runs([tmp_path]), "main->Model.forward", "time")
    assert sorted(fwd.repetitions[0].tolist()) == pytest.approx([0.0, 0.019])


# 4 and 7 ---------------------------------------------------------------------------------------


def _ranks_sweep(root: Path) -> None:
    """ranks 1, 2, 4 at batch 8 and 16; the two ranks differ by 2x; load_batch exists from 2 ranks on."""
    for ranks in (1, 2, 4):
        for batch in (8, 16):
            for rank in range(ranks):
                t = batch * MS // ranks * (2 if rank == 1 else 1)
                prof = {(0,): (1, t, t)}
                if ranks > 1:
                    prof[(0, 4)] = (2, t // 4, t // 4)
                write_rank_file(root / f"r{ranks}-{batch}", run_id=f"r{ranks}-{batch}", rank=rank, world_size=ranks,
                                params={"ranks": ranks, "batch": batch}, profile=prof)


@pytest.mark.parametrize("how", ["sum", "min"])
def test_rank_sum_and_min_derive_speedup_and_cost_from_the_mean_per_rank_time(tmp_path, how):
    _ranks_sweep(tmp_path)
    mean = read_runs([tmp_path], ReadOptions(ranks="mean"))
    other = read_runs([tmp_path], ReadOptions(ranks=how))
    for metric in ("cost", "speedup", "parallel_efficiency"):
        assert series(other, "main", metric).values().tolist() == pytest.approx(series(mean, "main", metric).values().tolist())
    # at ranks=2, batch=8: times 4 and 8 ms; cost = mean x ranks = 12 ms, speedup = 8 / 6
    cost = series(other, "main", "cost")
    i = cost.points.tolist().index([2.0, 8.0])
    assert cost.values()[i] == pytest.approx(0.012)
    assert series(other, "main", "speedup").values()[i] == pytest.approx(8 / 6)
    assert any(f"--ranks {how}" in w and "mean time over ranks" in w for w in other.warnings)
    assert not any("--ranks" in w for w in mean.warnings)


@pytest.mark.parametrize("metric, said", [("time", False), ("speedup", True), ("cost", True), ("all", True)])
def test_how_derived_metrics_come_about_is_said_only_where_they_are_used(tmp_path, capsys, metric, said):
    # review 59 F7: `--ranks sum --metric time` warned how speedup and cost were derived
    from modeler import cli

    _ranks_sweep(tmp_path)
    assert cli.main(["fit", str(tmp_path), "--ranks", "sum", "--metric", metric, "--min-share", "0",
                     "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert ("--ranks sum: speedup, parallel_efficiency and cost are derived" in err) is said, err


def test_a_note_about_some_metrics_is_dropped_with_them_and_survives_a_copy(tmp_path):
    import pickle

    from modeler.dataset import MetricNote, SeriesNote

    def metric_notes(warnings):  # (not the notes of some series: test_review98_notes.py)
        return [w for w in warnings if isinstance(w, MetricNote) and not isinstance(w, SeriesNote)]

    _ranks_sweep(tmp_path)
    ds = read_runs([tmp_path], ReadOptions(ranks="sum"))
    notes = metric_notes(ds.warnings)
    assert notes and all("speedup" in n.metrics for n in notes)
    assert not metric_notes(ds.select(metrics=["time"]).warnings)
    assert set(notes) <= set(ds.select(metrics=["time", "speedup"]).warnings)
    again = pickle.loads(pickle.dumps(notes[0]))
    assert again == notes[0] and again.metrics == notes[0].metrics


def test_speedup_of_a_call_path_missing_at_the_fewest_ranks_is_relative_to_its_own_fewest(tmp_path):
    _ranks_sweep(tmp_path)
    ds = read_runs([tmp_path])
    sp = series(ds, "main->load_batch", "speedup")
    eff = series(ds, "main->load_batch", "parallel_efficiency")
    assert sp.points[:, 0].tolist() == [2.0, 2.0, 4.0, 4.0]
    # ranks=2 is the baseline: speedup 1 there; mean times 0.75 b/4 (2 ranks) and 1.25 b/16 (4 ranks):
    # speedup 2.4, efficiency 2.4 x 2/4
    assert sp.values().tolist() == pytest.approx([1.0, 1.0, 2.4, 2.4])
    assert eff.values().tolist() == pytest.approx([1.0, 1.0, 1.2, 1.2])
    assert any("main->load_batch (from 2 ranks)" in w and "fewest ranks" in w for w in ds.warnings)
    assert series(ds, "main", "speedup").n_points == 6


# 6 ---------------------------------------------------------------------------------------------


def _failed_two_rank_run(d: Path, ends: dict[int, dict | None], launch: dict | None) -> None:
    for rank, end in ends.items():
        write_rank_file(d, run_id="x", params={"p": 16}, rank=rank, world_size=2, profile={(0,): (1, MS, MS)}, end=end)
    if launch is not None:
        (d / "launch.json").write_text(json.dumps({"version": 1, "run_id": "x", "status": "failed", **launch}))


@pytest.mark.parametrize("launch", [None, {"failed_rank": 1, "error": "killed by SIGKILL", "exit_code": 137}])
def test_the_rank_killed_without_an_end_record_is_named_not_the_one_the_launcher_stopped(tmp_path, launch):
    _sweep(tmp_path)
    _failed_two_rank_run(tmp_path / "x", {0: SIGTERM_END, 1: None}, launch)
    reason = _run_of(load_runs([tmp_path]), "x").reason
    assert reason.startswith(f"{tmp_path / 'x' / 'rank1.1001.jsonl'}: rank 1 has no end record")
    assert "also rank 0" in reason and "SIGTERM" in reason
    assert ("killed by SIGKILL" in reason) == (launch is not None)


def test_launch_json_failed_rank_comes_first_among_ranks_that_raised(tmp_path):
    _sweep(tmp_path)
    exc = {"status": "exception", "exit_code": 1, "exception": "builtins.RuntimeError"}
    _failed_two_rank_run(tmp_path / "x", {0: exc, 1: exc}, {"failed_rank": 1, "error": "RuntimeError: died on purpose"})
    reason = _run_of(load_runs([tmp_path]), "x").reason
    assert reason.startswith(f"{tmp_path / 'x' / 'rank1.1001.jsonl'}: rank 1 ended with status=exception")
    assert "died on purpose" in reason and "also rank 0 ended with status=exception" in reason


def test_a_run_the_launcher_timed_out_says_so_first(tmp_path):
    """Review 49 F4: a hang stopped at --timeout was told only as every rank's SIGTERM: launch.json's
    error names no rank (failed_rank null) and was not quoted."""
    _sweep(tmp_path)
    _failed_two_rank_run(tmp_path / "x", {0: SIGTERM_END, 1: SIGTERM_END},
                         {"status": "timeout", "failed_rank": None, "error": "timed out after 20 s"})
    reason = _run_of(load_runs([tmp_path]), "x").reason
    assert reason.startswith(f"{tmp_path / 'x' / 'launch.json'}: timed out after 20 s; ")
    assert "rank 0 ended with status=signal" in reason


def test_launch_json_of_another_run_is_not_used(tmp_path):
    _sweep(tmp_path)
    _failed_two_rank_run(tmp_path / "x", {0: SIGTERM_END, 1: SIGTERM_END}, None)
    (tmp_path / "x" / "launch.json").write_text(json.dumps({"run_id": "older", "failed_rank": 1, "error": "old"}))
    reason = _run_of(load_runs([tmp_path]), "x").reason
    assert "rank 0 ended" in reason.split(";")[0] and "old" not in reason


# 11 and 12 -------------------------------------------------------------------------------------


def _four_rank_run(d: Path, ends: dict[int, dict | None] | None = None) -> list[Path]:
    ends = ends or {}
    return [write_rank_file(d, run_id="four", params={"p": 16}, rank=r, world_size=4,
                            profile={(0,): (1, 16 * MS, MS)}, end=ends.get(r, {"status": "ok", "exit_code": 0}))
            for r in range(4)]


def test_include_incomplete_names_the_runs_it_kept_and_why(tmp_path):
    _sweep(tmp_path)
    files = _four_rank_run(tmp_path / "four", {2: None})
    rs = load_runs([tmp_path], ReadOptions(include_incomplete=True))
    assert _run_of(rs, "four").status == "ok"
    (warning,) = [w for w in rs.warnings if "--include-incomplete kept" in w]
    assert "run four" in warning and str(files[2]) in warning and "rank 2 has no end record" in warning
    assert not [w for w in load_runs([tmp_path]).warnings if "--include-incomplete kept" in w]


@pytest.mark.parametrize("cut", [0, 40])
def test_a_rank_file_empty_or_cut_in_its_header_makes_its_run_incomplete(tmp_path, cut):
    _sweep(tmp_path)
    files = _four_rank_run(tmp_path / "four")
    files[3].write_bytes(files[3].read_bytes()[:cut])
    loaded = read_inputs([tmp_path])
    status = {f.path: f.status for f in loaded.files}
    assert status[str(files[3])] == "skipped"
    assert {status[str(f)] for f in files[:3]} == {"left out"}
    assert any(w.startswith("run four left out (incomplete)") and str(files[3]) in w for w in loaded.dataset.warnings)
    assert not any("rank selection" in w for w in loaded.dataset.warnings)
    assert series(loaded.dataset, "main", "time").points[:, 0].tolist() == [2.0, 4.0, 8.0]
    kept = read_inputs([tmp_path], ReadOptions(include_incomplete=True)).dataset
    assert series(kept, "main", "time").points[:, 0].tolist() == [2.0, 4.0, 8.0, 16.0]
    assert any("--include-incomplete kept" in w and "rank 3's file could not be read" in w for w in kept.warnings)


def test_an_unreadable_file_of_a_rank_that_has_its_main_file_does_not_fail_the_run(tmp_path):
    # a worker that died before its header: the rank's own file is there, the run is whole
    _sweep(tmp_path)
    _four_rank_run(tmp_path / "four")
    (tmp_path / "four" / "rank1.5555.jsonl").write_bytes(b"")
    loaded = read_inputs([tmp_path])
    assert series(loaded.dataset, "main", "time").n_points == 4


# review 3 --------------------------------------------------------------------------------------


def test_a_script_the_rank_started_with_subprocess_is_its_helper_not_a_second_attempt(tmp_path):
    # an instrumented script started with subprocess inherits the rank's run id and rank but none of
    # the multiprocessing markers; its parent is the rank (ppid), so it is no restart
    _sweep(tmp_path)
    d = tmp_path / "r16"
    write_rank_file(d, run_id="r16", params={"p": 16}, pid=1000, header={"ppid": 1},
                    profile={(0,): (1, 160 * MS, MS)})
    write_rank_file(d, run_id="r16", params={"p": 16}, pid=1001, header={"ppid": 1000},
                    profile={(0,): (1, 5 * MS, MS)})
    rs = load_runs([tmp_path])
    assert _run_of(rs, "r16").status == "ok"
    assert series(read_runs([tmp_path]), "main", "time").points[:, 0].tolist() == [2.0, 4.0, 8.0, 16.0]
    # a restarted rank's parent is the launcher: still two attempts
    write_rank_file(d, run_id="r16", params={"p": 16}, pid=1002, header={"ppid": 1}, profile={(0,): (1, 9 * MS, MS)})
    assert _run_of(load_runs([tmp_path]), "r16").status == "ambiguous"


def test_launches_of_one_job_with_the_same_run_id_are_separate_runs(tmp_path):
    # every launch in one PBS job gets run id pbs-<job>; --repetition 0,1,2 in a loop, pids reused
    for rep in range(3):
        for p in (2, 4, 8):
            write_rank_file(tmp_path / f"p{p}_rep{rep}", run_id="pbs-77", params={"p": p}, repetition=rep, pid=4242,
                            profile={(0,): (1, 10 * p * MS * (1 + rep / 100), MS)})
    rs = load_runs([tmp_path])
    assert len(rs.runs) == 9 and all(r.status == "ok" for r in rs.runs)
    assert any(r.run_id == "pbs-77 (repetition 1, p=4)" for r in rs.runs)
    s = series(read_runs([tmp_path]), "main", "time")
    assert s.points[:, 0].tolist() == [2.0, 4.0, 8.0] and [len(r) for r in s.repetitions] == [3, 3, 3]
    # a copy of one of them is still read once
    shutil.copytree(tmp_path / "p4_rep1", tmp_path / "backup")
    loaded = read_inputs([tmp_path])
    assert sorted(f.status for f in loaded.files).count("duplicate") == 1


def test_a_script_the_rank_started_with_subprocess_keeps_its_own_call_paths(tmp_path):
    # review 58 F2: the rank waits in subprocess.run inside its `main` while the script's `main`
    # runs: summed under one name, the script's 0.4 s counted twice (0.97 s for a 0.57 s tree)
    for p in (1, 2, 4, 8, 16):
        d = tmp_path / f"r{p}"
        write_rank_file(d, run_id=f"r{p}", params={"p": p}, pid=1000, header={"ppid": 1},
                        profile={(0,): (1, (100 + 470) * MS, 470 * MS)})
        write_rank_file(d, run_id=f"r{p}", params={"p": p}, pid=1001, header={"ppid": 1000},
                        profile={(0,): (1, 400 * MS, 400 * MS)})
    ds = read_runs([tmp_path])
    main = series(ds, "main", "time")
    assert [float(np.median(r)) for r in main.repetitions] == pytest.approx([0.57] * 5)
    script = series(ds, "[subprocess] main", "time")
    assert [float(np.median(r)) for r in script.repetitions] == pytest.approx([0.4] * 5)


def test_the_launchers_output_copies_are_not_counted_as_inputs(tmp_path):
    # review 128 LOW-8: each rank's run folder holds `rank<R>.output.txt`, the copy of what it printed;
    # the summary said "read 3 of 6 input files (3 ignored: not measurements)" for a clean sweep
    from modeler.commands.inputs import describe_files

    _sweep(tmp_path / "runs")
    for folder in sorted({p.parent for p in (tmp_path / "runs").rglob("rank0.*.jsonl")}):
        (folder / "rank0.output.txt").write_text("epoch 0 loss 2.3\n")
    (tmp_path / "runs" / "notes.txt").write_text("my notes\n")
    loaded = read_inputs([tmp_path / "runs"])
    assert describe_files(loaded) == "read 3 of 4 input files (1 ignored: not measurements)"


def test_a_rank_without_an_end_record_gives_no_run_time_to_the_shares(tmp_path):
    # review 133 MED-1: a killed rank whose top-level region was never written had as run time its
    # longest flushed top-level region (a 2 us helper), and the shares of its call paths went to
    # 570,324: --min-share let regions of well under 1% through
    for p in (2, 4, 8):
        for rank in (0, 1):
            killed = p == 8 and rank == 1
            profile = {(0, 3): (5, 5 * MS, 5 * MS), (4,): (1, 2000, 2000)}
            if not killed:
                profile[(0,)] = (1, 100 * MS, 10 * MS)  # the killed rank's was never written
            write_rank_file(tmp_path / f"p{p}", run_id=f"p{p}", params={"p": p}, rank=rank, world_size=2,
                            profile=profile, end=None if killed else {"status": "ok", "exit_code": 0})
    ds = read_inputs([tmp_path], ReadOptions(include_incomplete=True)).dataset
    measured = ds.run_shares.of("time")
    assert max(measured.values()) <= 1.0
    assert measured["main"] == pytest.approx(1.0)
    assert measured["load_batch"] == pytest.approx(2e-5)  # from the complete ranks: 2 us of 100 ms


def test_a_call_path_measured_only_on_ranks_without_a_run_time_has_no_measured_share(tmp_path):
    # review 136 finding 3: runs killed before main's record: a step seen only there fell back to
    # its value over the longest top-level series at its points (a 2 us helper): share 350
    from modeler.share import Share, measured_shares

    for n in range(1, 8):
        killed = n >= 5
        profile = {(0, 3): (5, 50 * MS * n, 50 * MS * n), (4,): (1, 2000, 2000)}
        if killed:
            profile[(0, 1)] = (1, int(0.1 * MS * n), int(0.1 * MS * n))
        else:
            profile[(0,)] = (1, 400 * MS * n, 10 * MS)
        write_rank_file(tmp_path / f"n{n}", run_id=f"n{n}", params={"n": n}, profile=profile,
                        end=None if killed else {"status": "ok", "exit_code": 0})
    ds = read_inputs([tmp_path], ReadOptions(include_incomplete=True)).dataset
    shares = measured_shares(ds.series, ds.run_shares)
    assert "main->train" not in shares and max(shares.values()) <= 1.0
    # with no measured share, --min-share judges it by its share at the target where there is one
    assert not Share(None, 0.00025, 0.00025, trusted=False).kept(0.01)
    assert Share(None, 0.5, 0.4, trusted=False).kept(0.01) and Share(None).kept(0.01)
