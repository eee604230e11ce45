"""Our run files into runs and series: grouping, parameters, failures, damage, ranks, workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modeler.errors import InputError
from modeler.readers import ReadOptions, read_inputs
from modeler.readers.runs import load_runs, read_runs, sniff_runs
from modeler_synthetic_runs import REGIONS, write_rank_file, write_sweep
from runtime.runfile import RunWriter

MS = 10**6


def series(ds, callpath, metric):
    for s in ds.series:
        if s.callpath == callpath and s.metric == metric:
            return s
    raise AssertionError(f"no series {callpath}/{metric}; have {[(s.callpath, s.metric) for s in ds.series][:20]}")


def simple_run(d: Path, run_id: str, p: int, rep: int = 0, t_ms: int = 10, **kw) -> Path:
    return write_rank_file(d / run_id, run_id=run_id, params={"p": p}, repetition=rep,
                           profile={(0,): (1, t_ms * MS, MS), (0, 3): (5, (t_ms - 1) * MS, (t_ms - 1) * MS)}, **kw)


def test_parameters_come_from_headers_not_file_names(tmp_path):
    # directory names lie on purpose: the header is the only source of parameters
    for i, p in enumerate([2, 4, 8]):
        simple_run(tmp_path, f"p{100 - p}-bogus{i}", p, t_ms=10 * p)
    ds = read_runs([tmp_path])
    assert ds.parameters == ("p",)
    s = series(ds, "main", "time")
    assert s.points[:, 0].tolist() == [2.0, 4.0, 8.0]
    assert s.values().tolist() == pytest.approx([0.02, 0.04, 0.08])
    fwd = series(ds, "main->Model.forward", "visits")
    assert fwd.values().tolist() == [5.0, 5.0, 5.0]
    assert series(ds, "main->Model.forward", "exclusive_time").values().tolist() == pytest.approx([0.019, 0.039, 0.079])


def test_repetitions_stay_separate(tmp_path):
    for rep, t in enumerate([10, 12, 20]):
        simple_run(tmp_path, f"a{rep}", 2, rep=rep, t_ms=t)
        simple_run(tmp_path, f"b{rep}", 4, rep=rep, t_ms=2 * t)
    s = series(read_runs([tmp_path]), "main", "time")
    assert sorted(s.repetitions[0].tolist()) == pytest.approx([0.010, 0.012, 0.020])
    assert s.values("median").tolist() == pytest.approx([0.012, 0.024])
    assert s.spread()[0] > 0


def _two_rank_run(d: Path, run_id: str, p: int, times_ms: list[int]) -> None:
    for rank, t in enumerate(times_ms):
        write_rank_file(d / run_id, run_id=run_id, params={"p": p}, rank=rank, world_size=len(times_ms),
                        profile={(0,): (1, t * MS, t * MS)})


@pytest.mark.parametrize("how, expected", [("mean", 0.015), ("max", 0.020), ("min", 0.010), ("sum", 0.030)])
def test_rank_aggregates_and_imbalance(tmp_path, how, expected):
    _two_rank_run(tmp_path, "r1", 2, [10, 20])
    _two_rank_run(tmp_path, "r2", 4, [10, 10])
    ds = read_runs([tmp_path], ReadOptions(ranks=how))
    assert series(ds, "main", "time").values()[0] == pytest.approx(expected)
    assert series(ds, "main", "imbalance").values().tolist() == pytest.approx([20 / 15, 1.0])


def test_unknown_rank_aggregate_names_option(tmp_path):
    simple_run(tmp_path, "a", 2)
    with pytest.raises(InputError, match="--ranks"):
        read_runs([tmp_path], ReadOptions(ranks="median"))


def test_region_missing_on_one_rank_counts_zero_there(tmp_path):
    # rank 0 alone logs: its mean over 2 ranks is half, and its imbalance is 2
    for rank in range(2):
        prof = {(0,): (1, 10 * MS, 5 * MS)}
        if rank == 0:
            prof[(0, 4)] = (1, 4 * MS, 4 * MS)
        write_rank_file(tmp_path / "r", run_id="r", params={"p": 2}, rank=rank, world_size=2, profile=prof)
    simple_run(tmp_path, "other", 4)
    ds = read_runs([tmp_path])
    s = series(ds, "main->load_batch", "time")
    assert s.values()[0] == pytest.approx(0.002)
    assert series(ds, "main->load_batch", "imbalance").values()[0] == pytest.approx(2.0)


def test_failed_and_incomplete_runs_left_out_with_warning(tmp_path):
    simple_run(tmp_path, "good2", 2)
    simple_run(tmp_path, "good4", 4)
    simple_run(tmp_path, "crashed", 8, end={"status": "exception", "exit_code": 1})
    simple_run(tmp_path, "killed", 16, end=None)
    rs = load_runs([tmp_path])
    status = {r.run_id: r.status for r in rs.runs}
    assert status == {"good2": "ok", "good4": "ok", "crashed": "failed", "killed": "incomplete"}
    assert any("crashed" in w and "exception" in w for w in rs.warnings)
    assert any("killed" in w and "no end record" in w for w in rs.warnings)
    ds = read_runs([tmp_path])
    assert series(ds, "main", "time").points[:, 0].tolist() == [2.0, 4.0]
    kept = read_runs([tmp_path], ReadOptions(include_incomplete=True))
    assert series(kept, "main", "time").points[:, 0].tolist() == [2.0, 4.0, 16.0]


def test_one_failed_rank_fails_the_whole_run(tmp_path):
    for rank in range(2):
        end = {"status": "signal", "exit_code": 143, "signal": 15} if rank == 1 else {"status": "ok", "exit_code": 0}
        write_rank_file(tmp_path / "x", run_id="x", params={"p": 2}, rank=rank, world_size=2,
                        profile={(0,): (1, MS, MS)}, end=end)
    simple_run(tmp_path, "y", 4)
    simple_run(tmp_path, "z", 8)
    rs = load_runs([tmp_path])
    (bad,) = rs.failed()
    assert bad.run_id == "x" and "rank 1" in bad.reason and "signal" in bad.reason
    assert [f.status for f in rs.files if "x" in Path(f.path).parent.name] == ["left out", "left out"]


def _run_with_a_line_inside(tmp_path: Path, run_id: str, line: bytes) -> None:
    """A run at p=8 whose file has `line` before its end record."""
    with open(simple_run(tmp_path, run_id, 8, end=None), "ab") as f:
        f.write(line + b"\n")
    with RunWriter(tmp_path / run_id / "rank0.1000.jsonl") as w:
        w.write_records([{"type": "end", "status": "ok", "exit_code": 0}])


def test_malformed_and_cut_off_lines_reported_with_file_and_line(tmp_path):
    path = simple_run(tmp_path, "a", 2, tail=b'{"type": "profile", "path": [0], "vis')
    simple_run(tmp_path, "b", 4)
    # a broken step record in the middle of another file: reported, and the lines after it still count
    _run_with_a_line_inside(tmp_path, "c", b'{"type": "step", "region": 0, "duration_ns": 12,,}')
    rs = load_runs([tmp_path])
    assert {r.run_id: r.status for r in rs.runs} == {"a": "ok", "b": "ok", "c": "ok"}
    # c's end record comes after the broken line: read, else c would be incomplete
    (c,) = [r for r in rs.runs if r.run_id == "c"]
    c_path = tmp_path / "c" / "rank0.1000.jsonl"
    assert [(f.path, f.run.end) for f in c.files] == [(c_path, {"status": "ok", "exit_code": 0})]
    assert any(w.startswith(f"{path}:") and "incomplete last line" in w for w in rs.warnings)
    assert any(w.startswith(f"{c_path}:") and "not valid JSON" in w for w in rs.warnings)


def test_a_garbage_line_that_may_have_held_totals_leaves_its_run_out(tmp_path):
    # what "this is not json" held is unknown: it may have been a profile or comm record, whose loss
    # would make the rank's totals short without a word (review 9, F4)
    simple_run(tmp_path, "a", 2)
    _run_with_a_line_inside(tmp_path, "c", b"this is not json")
    rs = load_runs([tmp_path])
    (bad,) = [r for r in rs.runs if r.status != "ok"]
    assert bad.run_id == "c" and bad.status == "damaged"
    assert "rank0.1000.jsonl:9: a line that is not a record could not be used" in bad.reason


def test_unreadable_file_skipped_and_batch_goes_on(tmp_path):
    simple_run(tmp_path, "a", 2)
    simple_run(tmp_path, "b", 4)
    bad = tmp_path / "c" / "rank0.5.jsonl"
    with RunWriter(bad) as w:
        w.write_records([{"type": "header", "format": "scaleprobe-run", "version": 999, "run_id": "c"}])
    loaded = read_inputs([tmp_path])
    (skipped,) = loaded.skipped
    assert skipped.path == str(bad) and "999" in skipped.reason
    assert any(str(bad) in w for w in loaded.dataset.warnings)
    assert series(loaded.dataset, "main", "time").n_points == 2


def test_region_missing_at_some_points_is_kept_with_warning(tmp_path):
    for p in (2, 4, 8):
        prof = {(0,): (1, 10 * MS, MS)}
        if p != 4:
            prof[(0, 4)] = (2, MS * p, MS * p)
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, profile=prof)
    ds = read_runs([tmp_path])
    s = series(ds, "main->load_batch", "time")
    assert s.points[:, 0].tolist() == [2.0, 8.0]
    assert any("main->load_batch (2 of 3)" in w for w in ds.warnings)


def test_missing_region_warning_counts_its_measured_points_not_its_derived_ones(tmp_path):
    # missing at (ranks=1, batch=8): measured at 5 of 6 points, and that is what the warning says;
    # its speedup at batch=8 is relative to 2 ranks, the fewest where it was measured (said too)
    for ranks in (1, 2, 4):
        for batch in (8, 16):
            prof = {(0,): (1, 10 * MS, MS)}
            if (ranks, batch) != (1, 8):
                prof[(0, 4)] = (2, MS * batch // ranks, MS)
            write_rank_file(tmp_path / f"r{ranks}-{batch}", run_id=f"r{ranks}-{batch}",
                            params={"ranks": ranks, "batch": batch}, profile=prof)
    ds = read_runs([tmp_path])
    assert series(ds, "main->load_batch", "time").n_points == 5
    assert series(ds, "main->load_batch", "speedup").n_points == 5
    (warning,) = [w for w in ds.warnings if "not measured at every point" in w]
    assert "main->load_batch (5 of 6)" in warning
    assert any("main->load_batch (from 2 ranks)" in w for w in ds.warnings)


def test_varying_non_numeric_parameter_is_an_error(tmp_path):
    write_rank_file(tmp_path / "a", run_id="a", params={"p": 2, "model": "resnet18"}, profile={(0,): (1, MS, MS)})
    write_rank_file(tmp_path / "b", run_id="b", params={"p": 4, "model": "resnet50"}, profile={(0,): (1, MS, MS)})
    with pytest.raises(InputError, match="'model'"):
        load_runs([tmp_path])


def test_constant_parameters_are_not_modeling_parameters(tmp_path):
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p, "epochs": 3, "model": "x"},
                        profile={(0,): (1, MS, MS)})
    rs = load_runs([tmp_path])
    assert rs.parameters == ("p",)
    assert rs.constants == {"epochs": 3, "model": "x"}
    assert rs.values() == {"p": [2.0, 4.0]}


def test_run_with_other_parameter_names_left_out(tmp_path):
    for p in (2, 4, 8):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, profile={(0,): (1, MS, MS)})
    write_rank_file(tmp_path / "odd", run_id="odd", params={"q": 3}, profile={(0,): (1, MS, MS)})
    rs = load_runs([tmp_path])
    (odd,) = rs.failed()
    assert odd.run_id == "odd" and "differ" in odd.reason


# Forked workers carry forked_from and child_of; spawned ones (multiprocessing "spawn") only child_of.
@pytest.mark.parametrize("worker_header", [{"forked_from": 10, "child_of": 10}, {"child_of": 10}])
def test_worker_processes_are_summed_into_their_rank(tmp_path, worker_header):
    d = tmp_path / "w"
    write_rank_file(d, run_id="w", params={"p": 2}, pid=10, profile={(0,): (1, 10 * MS, 10 * MS)})
    # a DataLoader worker started by it, terminated by its parent at shutdown: no end record
    write_rank_file(d, run_id="w", params={"p": 2}, pid=11, header=worker_header,
                    profile={(4,): (8, 6 * MS, 6 * MS)}, end=None)
    write_rank_file(tmp_path / "v", run_id="v", params={"p": 4}, profile={(0,): (1, MS, MS), (4,): (8, MS, MS)})
    ds = read_runs([tmp_path])
    assert series(ds, "load_batch", "time").values().tolist() == pytest.approx([0.006, 0.001])
    assert series(ds, "main", "time").values().tolist() == pytest.approx([0.010, 0.001])


def test_ranks_that_were_not_profiled_do_not_count(tmp_path):
    # rank selection: rank 1 ran with probes off and recorded nothing
    write_rank_file(tmp_path / "r", run_id="r", params={"p": 2}, rank=0, world_size=2, profile={(0,): (1, 8 * MS, MS)})
    write_rank_file(tmp_path / "r", run_id="r", params={"p": 2}, rank=1, world_size=2, profile={})
    simple_run(tmp_path, "s", 4)
    assert series(read_runs([tmp_path]), "main", "time").values()[0] == pytest.approx(0.008)


def test_step_epoch_and_comm_metrics(tmp_path):
    steps = [
        {"region": 2, "duration_ns": 100 * MS, "data_wait_ns": 50 * MS, "comm_ns": 0, "gpu_ns": None, "memory": None,
         "active": False},  # warm-up step outside the schedule: not counted
        {"region": 2, "duration_ns": 10 * MS, "data_wait_ns": 1 * MS, "comm_ns": 2 * MS, "gpu_ns": 7 * MS, "memory": 1000},
        {"region": 2, "duration_ns": 12 * MS, "data_wait_ns": 3 * MS, "comm_ns": 2 * MS, "gpu_ns": 9 * MS, "memory": 3000},
        {"region": 2, "duration_ns": 30 * MS, "data_wait_ns": 2 * MS, "comm_ns": 4 * MS, "gpu_ns": 8 * MS, "memory": 2000},
    ]
    comms = [
        {"op": "all_reduce", "bytes": 4096, "group_size": 2, "calls": 3, "time_ns": 6 * MS, "gpu_ns": None, "callpath": [0, 1, 2]},
        {"op": "all_reduce", "bytes": 1024, "group_size": 2, "calls": 1, "time_ns": 2 * MS, "gpu_ns": None, "callpath": [0, 1, 2]},
    ]
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, steps=steps, comms=comms,
                        epochs=[{"region": 1, "duration_ns": 60 * MS, "memory": {"rss_peak_bytes": 5 * 2**20}}],
                        profile={(0,): (1, 80 * MS, MS), (0, 1): (1, 70 * MS, MS), (0, 1, 2): (4, 60 * MS, MS)})
    ds = read_runs([tmp_path])
    step = "main->train->train_epoch"
    assert series(ds, step, "step_time").values()[0] == pytest.approx(0.012)  # the median step
    # the parts of a step: the mean per active step (review 12 F3)
    assert series(ds, step, "data_wait").values()[0] == pytest.approx(0.002)
    assert series(ds, step, "step_comm_time").values()[0] == pytest.approx(0.008 / 3)
    assert series(ds, step, "step_gpu_time").values()[0] == pytest.approx(0.008)
    assert series(ds, step, "peak_memory").values()[0] == 3000
    assert series(ds, "main->train", "epoch_time").values()[0] == pytest.approx(0.060)
    assert series(ds, "main->train", "peak_rss").values()[0] == 5 * 2**20
    comm = f"{step}->all_reduce"
    assert series(ds, comm, "comm_bytes").values()[0] == 5120
    assert series(ds, comm, "comm_calls").values()[0] == 4
    assert series(ds, comm, "comm_time").values()[0] == pytest.approx(0.008)
    assert not [s for s in ds.series if s.metric == "comm_gpu_time"], "no GPU time was measured"


def test_same_name_in_two_files_is_told_apart(tmp_path):
    regions = REGIONS + ((7, "function", "main", "tools/other.py", 3),)
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, regions=regions,
                        profile={(0,): (1, MS, MS), (7,): (1, 2 * MS, 2 * MS)})
    cps = {s.callpath for s in read_runs([tmp_path]).series}
    assert {"main.py:main", "tools/other.py:main"} <= cps


def test_ranks_parameter_from_world_size_when_not_recorded(tmp_path):
    for world in (1, 2, 4):
        for rank in range(world):
            write_rank_file(tmp_path / f"w{world}", run_id=f"w{world}", params={}, rank=rank, world_size=world,
                            profile={(0,): (1, MS * world, MS)})
    rs = load_runs([tmp_path])
    assert rs.parameters == ("ranks",)
    assert any("world_size" in w for w in rs.warnings)


def test_sniff_runs(tmp_path):
    (f,) = write_sweep(tmp_path, {"p": [2]}, time_s=lambda p, r, rep: 0.1)
    assert sniff_runs(f) == "runs"
    other = tmp_path / "x.jsonl"
    other.write_text('{"params": {"p": 2}, "callpath": "a", "metric": "time", "value": 1}\n')
    assert sniff_runs(other) is None
    assert sniff_runs(tmp_path / "missing.jsonl") is None


def test_write_sweep_fixture_reads_back_as_written(tmp_path):
    write_sweep(tmp_path, {"ranks": [1, 2, 4], "batch": [8, 16]}, repetitions=2,
                time_s=lambda p, r, rep: 0.001 * p["batch"] / p["ranks"])
    rs = load_runs([tmp_path])
    assert len(rs.completed()) == 12
    assert rs.values() == {"ranks": [1.0, 2.0, 4.0], "batch": [8.0, 16.0]}
    t = series(read_runs([tmp_path]), "main->train", "time")
    assert np.allclose(t.values(), 0.001 * t.points[:, 1] / t.points[:, 0])


def test_non_zero_exit_code_fails_the_run_even_with_status_ok(tmp_path):
    # seen in real runs: sys.exit(2) from the program's argument check ends with status "ok"
    simple_run(tmp_path, "a", 2)
    simple_run(tmp_path, "b", 4)
    simple_run(tmp_path, "exit2", 8, end={"status": "ok", "exit_code": 2})
    rs = load_runs([tmp_path])
    (bad,) = rs.failed()
    assert bad.run_id == "exit2" and "exit_code=2" in bad.reason
    assert series(read_runs([tmp_path]), "main", "time").n_points == 2


def test_rank_selection_recorded_one_rank_of_four(tmp_path):
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, rank=0, world_size=4,
                        profile={(0,): (1, p * MS, MS)})
    rs = load_runs([tmp_path])
    assert any("1 of 4" in w and "rank selection" in w for w in rs.warnings)
    ds = read_runs([tmp_path])
    assert series(ds, "main", "time").values().tolist() == pytest.approx([0.002, 0.004])
    assert "imbalance" not in ds.metrics()


def test_int_and_float_spellings_are_one_value(tmp_path):
    write_rank_file(tmp_path / "a", run_id="a", params={"p": 2, "batch": 64}, profile={(0,): (1, MS, MS)})
    write_rank_file(tmp_path / "b", run_id="b", params={"p": 4, "batch": 64.0}, profile={(0,): (1, MS, MS)})
    rs = load_runs([tmp_path])
    assert rs.parameters == ("p",) and rs.constants == {"batch": 64}


def test_mixed_experiments_warned(tmp_path):
    for p, exp in ((2, "resnet"), (4, "resnet"), (8, "vit")):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, header={"experiment": exp},
                        profile={(0,): (1, MS, MS)})
    assert any("2 experiments" in w and "resnet, vit" in w for w in load_runs([tmp_path]).warnings)


def test_throttled_region_time_left_out_where_throttled(tmp_path):
    # load_batch throttled at p=4 (its recorded time is a part of unknown size), timed fully elsewhere
    for p in (2, 4, 8):
        for rep in range(2):
            throttled = p == 4 and rep == 0
            write_rank_file(tmp_path / f"r{p}-{rep}", run_id=f"r{p}-{rep}", params={"p": p}, repetition=rep,
                            profile={(0,): (1, 50 * MS, MS), (0, 4): (100001 if throttled else 40, p * MS, p * MS)},
                            records=[{"type": "throttled", "region": 4, "visits": 100001, "mean_ns": 900.0}] if throttled else [])
    ds = read_runs([tmp_path])
    s = series(ds, "main->load_batch", "time")
    # p=4 keeps only its unthrottled repetition, never a 0 for the throttled one
    assert [r.tolist() for r in s.repetitions] == [[0.002, 0.002], [0.004], [0.008, 0.008]]
    assert [r.tolist() for r in series(ds, "main->load_batch", "visits").repetitions][1] == [40.0]
    assert series(ds, "main", "time").repetitions[1].tolist() == [0.05, 0.05]
    assert any("throttled" in w and "main->load_batch (1 run)" in w for w in ds.warnings)


def test_sampled_gpu_time_scaled_to_all_visits(tmp_path):
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p},
                        profile={(0,): (1, 50 * MS, MS), (0, 3): (10 * p, 40 * MS, 40 * MS)},
                        records=[{"type": "gpu", "region": 3, "samples": 2, "gpu_ns": 4 * MS},
                                 {"type": "gpu", "region": 3, "samples": 2, "gpu_ns": 4 * MS}])
    g = series(read_runs([tmp_path]), "main->Model.forward", "gpu_time")
    assert g.values().tolist() == pytest.approx([0.002 * 20, 0.002 * 40])


def test_comm_callpath_ending_in_its_comm_region_is_kept(tmp_path):
    regions = REGIONS + ((65536, "comm", "torch.distributed.all_reduce", "", 0),)
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"p": p}, regions=regions,
                        profile={(0,): (1, 9 * MS, MS), (0, 65536): (3, 2 * MS, 2 * MS)},
                        comms=[{"op": "all_reduce", "bytes": 512 * p, "group_size": 1, "calls": 3, "time_ns": 2 * MS,
                                "gpu_ns": None, "callpath": [0, 65536]}])
    ds = read_runs([tmp_path])
    cp = "main->torch.distributed.all_reduce"
    assert series(ds, cp, "comm_bytes").values().tolist() == [1024, 2048]
    assert series(ds, cp, "time").values().tolist() == pytest.approx([0.002, 0.002])


def test_an_operation_without_a_region_has_its_communication_time_as_its_time(tmp_path):
    """Review 15: DDP's gradient all-reduce (run from autograd's thread: a comm record, no profile
    record) had comm metrics only, and was in no ranking of `time`."""
    regions = REGIONS + ((65536, "comm", "torch.distributed.all_reduce", "", 0),
                         (65537, "comm", "DistributedDataParallel.allreduce", "", 0))
    for p in (2, 4):
        write_rank_file(tmp_path / f"r{p}", run_id=f"r{p}", params={"ranks": p}, regions=regions, world_size=1,
                        profile={(0,): (1, 90 * MS, MS), (0, 3): (5, 40 * MS, 30 * MS), (0, 3, 65536): (5, 10 * MS, 10 * MS)},
                        comms=[{"op": "ddp_allreduce", "bytes": 512, "group_size": p, "calls": 5, "time_ns": p * 3 * MS,
                                "gpu_ns": None, "callpath": [65537]},
                               {"op": "all_reduce", "bytes": 8, "group_size": p, "calls": 5, "time_ns": MS,
                                "gpu_ns": None, "callpath": [0, 3, 65536]}])
    ds = read_runs([tmp_path])
    ddp = "DistributedDataParallel.allreduce"
    assert series(ds, ddp, "time").values().tolist() == pytest.approx([0.006, 0.012])
    assert series(ds, ddp, "exclusive_time").values().tolist() == pytest.approx([0.006, 0.012])
    assert series(ds, ddp, "visits").values().tolist() == [5, 5]
    # a region of the profile keeps its own time: its comm_time does not replace it
    op = "main->Model.forward->torch.distributed.all_reduce"
    assert series(ds, op, "time").values().tolist() == pytest.approx([0.01, 0.01])
    assert series(ds, op, "comm_time").values().tolist() == pytest.approx([0.001, 0.001])
