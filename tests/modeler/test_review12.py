"""Review 12 (a new user's own program), the modeler's findings: rank selection in the report (F1),
communication and data wait per step under gradient accumulation (F3), loops renamed by an edit
(F4), the "no usable measurements" error (F7), the export's note on series missing at 1 rank (F12),
`report --run` and the folding of model notes (F13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modeler.readers import ReadOptions, read_inputs
from modeler.readers.runs import load_runs
from modeler.report.runs import groups_from_runset
from modeler_synthetic_runs import MS, write_rank_file

S = 10**9


def _report_md(args: list[str], tmp_path: Path, code: int = 0) -> str:
    from modeler.cli import main

    out = tmp_path / "report.md"
    assert main(["report", *args, "--format", "markdown", "-q", "-o", str(out)]) == code
    return out.read_text(encoding="utf-8")


# F1 --------------------------------------------------------------------------------------------


def _selected_sweep(root: Path) -> None:
    """ranks 2, 4 x batch 8, 16, 32 under SCALEPROBE_RANKS=0: only rank 0 writes a file."""
    for ranks in (2, 4):
        for batch in (8, 16, 32):
            run_id = f"r{ranks}b{batch}"
            t = int((1 + batch / ranks) * S)
            write_rank_file(root / run_id, run_id=run_id, params={"ranks": ranks, "batch": batch}, world_size=ranks,
                            profile={(0,): (1, t + MS, MS), (0, 1): (1, t, t // 5), (0, 1, 2): (4, t * 4 // 5, t // 2)},
                            steps=[{"region": 2, "duration_ns": t // 5, "data_wait_ns": MS, "comm_ns": 2 * MS,
                                    "gpu_ns": None, "memory": None} for _ in range(4)],
                            epochs=[{"region": 1, "duration_ns": t}])


def test_report_counts_runs_under_rank_selection_as_completed(tmp_path):
    _selected_sweep(tmp_path / "runs")
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    assert all(g.ok for g in groups)
    assert {tuple(g.left_out_ranks) for g in groups} == {(1,), (1, 2, 3)}
    md = _report_md([str(tmp_path / "runs")], tmp_path)
    assert "| runs completed | 6 of 6 |" in md
    assert "| configurations | 6 |" in md
    assert "ranks recorded (rank selection) | 1 of 2, 1 of 4" in md
    assert "Runs left out" not in md
    # the same warning as `modeler fit`
    assert "6 run(s) have files of fewer ranks than their world size" in md
    training = md[md.index("## Training"):md.index("## Rank imbalance")]
    assert "No step or epoch records" not in training
    assert "| 4 | 32 | `train_epoch` |" in training
    assert "### Scaling with ranks" in training


def test_report_still_fails_a_run_whose_rank_died_at_start_up(tmp_path):
    _selected_sweep(tmp_path / "runs")
    # rank 1 of this run left an empty file: it died before its header, it was not left out
    (tmp_path / "runs" / "r2b8" / "rank1.4242.jsonl").write_bytes(b"")
    groups = {g.run_id: g for g in groups_from_runset(load_runs([tmp_path / "runs"]))}
    assert not groups["r2b8"].ok and groups["r2b8"].left_out_ranks == []
    assert all(g.ok for rid, g in groups.items() if rid != "r2b8")
    md = _report_md([str(tmp_path / "runs")], tmp_path, code=3)  # 3: the empty file was skipped
    assert "| runs completed | 5 of 6 |" in md
    assert "**Runs left out (1):**" in md and "`r2b8`: incomplete:" in md
    assert "rank 1's file could not be read (empty)" in md


# F3 --------------------------------------------------------------------------------------------


def _accumulating(root: Path) -> None:
    """Gradient accumulation over 2 micro-steps, as in the review's program: the `no_sync` one takes
    40 ms and communicates nothing, the synchronizing one 100 ms of which `10 * ranks` ms
    all-reduce; a data wait of 4 ms on the first step of each pair; and a last iteration that
    only fetched a batch before the loop's `break` (1 ms, all of it data wait). 5 of the 9 steps
    communicate nothing: their median communication is 0."""
    for ranks in (2, 4, 8):
        run_id = f"acc{ranks}"
        steps = []
        for i in range(8):
            sync = i % 2 == 1
            steps.append({"region": 2, "duration_ns": (100 if sync else 40) * MS, "data_wait_ns": 0 if sync else 4 * MS,
                          "comm_ns": 10 * ranks * MS if sync else 0, "gpu_ns": None, "memory": None})
        steps.append({"region": 2, "duration_ns": MS, "data_wait_ns": MS, "comm_ns": 0, "gpu_ns": None, "memory": None})
        for rank in range(ranks):
            write_rank_file(root / run_id, run_id=run_id, params={"ranks": ranks}, rank=rank, world_size=ranks,
                            profile={(0,): (1, 600 * MS, MS), (0, 1): (1, 570 * MS, MS), (0, 1, 2): (9, 560 * MS, MS)},
                            steps=steps)


def test_communication_of_every_other_micro_step_is_not_a_median_of_zero(tmp_path):
    _accumulating(tmp_path / "runs")
    ds = read_inputs([tmp_path / "runs"]).dataset
    step = "main->train->train_epoch"

    def fitted(metric: str) -> dict[float, float]:
        s = next(s for s in ds.series if s.callpath == step and s.metric == metric)
        return {float(pt[0]): float(reps[0]) for pt, reps in zip(s.points, s.repetitions)}

    # the mean per step: 4 synchronizing steps of 10 x ranks ms over 9 steps; the wait 4 x 4 + 1 ms over 9
    comm = {r: 0.040 * r / 9 for r in (2, 4, 8)}
    wait, mean_step, median_step = 0.017 / 9, 0.561 / 9, 0.040
    assert fitted("step_comm_time") == pytest.approx(comm)
    assert fitted("data_wait") == pytest.approx({r: wait for r in (2, 4, 8)})
    assert fitted("step_time") == pytest.approx({r: median_step for r in (2, 4, 8)})  # still the median step
    md = _report_md([str(tmp_path / "runs")], tmp_path)
    rows = {cells[1]: cells[3:9] for cells in ([c.strip() for c in ln.split("|")]
                                               for ln in md[md.index("## Training"):].splitlines()
                                               if ln.startswith("| ") and "`train_epoch`" in ln)}
    from modeler.report.svg import format_seconds

    for r in (2, 4, 8):
        # time per step (median), mean step, compute (the rest of the mean step), communication, data wait
        assert rows[str(r)][:5] == [format_seconds(median_step), format_seconds(mean_step),
                                    format_seconds(mean_step - comm[r] - wait), format_seconds(comm[r]),
                                    format_seconds(wait)]
    # the report and `modeler fit --metric step_comm_time` agree
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    for g in groups:
        st = g.loop_stats("steps")[step]
        assert st["comm"] / S == pytest.approx(fitted("step_comm_time")[g.params["ranks"]])
        assert st["data_wait"] / S == pytest.approx(fitted("data_wait")[g.params["ranks"]])
        assert st["duration"] / S == pytest.approx(fitted("step_time")[g.params["ranks"]])


# F4 --------------------------------------------------------------------------------------------


def _loop_runs(root: Path, line: int, batches, *, second_loop: int | None = None) -> None:
    """Runs whose epoch loop is `main:for@<line>` (and, with `second_loop`, another loop of `main`
    at that line, measured at the same points)."""
    regions = [(0, "function", "main", "main.py", 1), (1, "loop", f"main:for@{line}", "main.py", line),
               (2, "function", "train_epoch", "train.py", 20)]
    if second_loop is not None:
        regions.append((3, "loop", f"main:for@{second_loop}", "main.py", second_loop))
    for batch in batches:
        run_id = f"l{line}b{batch}"
        t = batch * 10 * MS
        profile = {(0,): (1, 2 * t + MS, MS), (0, 1): (1, t, MS), (0, 1, 2): (2, t - MS, t - MS)}
        if second_loop is not None:
            profile[(0, 3)] = (1, t, t)
        write_rank_file(root / run_id, run_id=run_id, params={"batch": batch}, regions=regions, profile=profile)


def test_a_loop_renamed_by_an_edit_between_runs_is_named_in_a_warning(tmp_path):
    _loop_runs(tmp_path / "runs", 65, (8, 16, 32, 64))
    _loop_runs(tmp_path / "runs_ext", 76, (128, 256, 512))  # an edit above the loop moved it to line 76
    warnings = read_inputs([tmp_path / "runs", tmp_path / "runs_ext"]).dataset.warnings
    (w,) = [w for w in warnings if "differ only in the loop's line" in w]
    assert "main:for@65 and main:for@76" in w
    assert "2 call path(s) under both" in w  # the loop and train_epoch under it
    assert "main->main:for@65 at 4 point(s), main->main:for@76 at 3" in w
    assert "changed between runs" in w


def test_two_loops_of_one_function_measured_together_are_no_rename(tmp_path):
    _loop_runs(tmp_path / "runs", 65, (8, 16, 32, 64), second_loop=90)
    warnings = read_inputs([tmp_path / "runs"]).dataset.warnings
    assert {"main->main:for@65", "main->main:for@90"} <= {s.callpath for s in read_inputs([tmp_path / "runs"]).dataset.series}
    assert not [w for w in warnings if "differ only in the loop's line" in w]


# F7 --------------------------------------------------------------------------------------------


def _failed_runs(root: Path, n_runs: int = 12) -> None:
    """Runs of 2 ranks whose rank 1 raised, each with the launcher's rank<R>.error.txt beside its
    files, and one run killed (no end record)."""
    for i in range(n_runs):
        d = root / f"run{i}"
        for rank in range(2):
            write_rank_file(d, run_id=f"run{i}", params={"n": 2 ** i}, rank=rank, world_size=2,
                            profile={(0,): (1, S, S)},
                            end={"status": "exception", "exit_code": 1, "exception": "builtins.RuntimeError"})
            (d / f"rank{rank}.error.txt").write_text("Traceback ...\nRuntimeError: rank 1 fails on purpose\n")
    write_rank_file(root / "killed", run_id="killed", params={"n": 1}, rank=0, world_size=1,
                    profile={(0,): (1, S, S)}, end=None)


def test_nothing_usable_names_each_reason_once_and_ends_with_what_the_runs_came_to(tmp_path):
    from modeler.errors import InputError

    _failed_runs(tmp_path / "runs")
    with pytest.raises(InputError) as exc:
        read_inputs([tmp_path / "runs"])
    msg = str(exc.value)
    assert "error.txt" not in msg  # the launcher's own files are not measurements, never named
    assert "run failed (2 files): " in msg  # the run's two rank files share its reason: said once
    assert msg.startswith("no usable measurements ([1] run incomplete: ")  # the killed run's one file
    assert msg.count("[") == 6 and msg.count("run failed") == 5
    assert "and 7 more reasons" in msg and " ..." not in msg  # 13 runs: 6 named, the rest counted
    assert msg.endswith("13 run(s) left out: 12 failed, 1 incomplete; --include-incomplete also uses incomplete "
                        "runs (a rank without an end record counts up to its last flush)")
    # no incomplete run: no option to suggest
    _failed_runs(tmp_path / "failed_only", n_runs=1)
    (tmp_path / "failed_only" / "killed" / "rank0.1000.jsonl").unlink()
    with pytest.raises(InputError) as exc:
        read_inputs([tmp_path / "failed_only"])
    assert str(exc.value).endswith("; 1 run(s) left out: 1 failed")


def test_the_launchers_error_files_are_ignored_even_when_named(tmp_path, capsys):
    from modeler.cli import main

    _selected_sweep(tmp_path / "runs")
    err_file = tmp_path / "runs" / "r2b8" / "rank0.error.txt"
    err_file.write_text("Traceback ...\n")
    loaded = read_inputs([*sorted((tmp_path / "runs").glob("*/*"))])  # as a glob names every file
    assert {f.status for f in loaded.files if f.path == str(err_file)} == {"ignored"}
    assert not loaded.skipped
    assert main(["fit", *map(str, sorted((tmp_path / "runs").glob("*/*"))), "-q"]) == 0
    assert "error.txt" not in capsys.readouterr().err


# F12 -------------------------------------------------------------------------------------------


def test_export_says_why_communication_is_left_out_of_a_sweep_from_one_rank(tmp_path):
    from modeler.export import write_extrap_jsonl

    for ranks in (1, 2, 4):
        for batch in (8, 16):
            run_id = f"r{ranks}b{batch}"
            comms = [] if ranks == 1 else [{"op": "all_reduce", "bytes": 4096, "group_size": ranks, "calls": 2,
                                            "time_ns": ranks * MS, "gpu_ns": None, "callpath": [0, 1, 2]}]
            for rank in range(ranks):
                write_rank_file(tmp_path / "runs" / run_id, run_id=run_id, params={"ranks": ranks, "batch": batch},
                                rank=rank, world_size=ranks, comms=comms,
                                profile={(0,): (1, batch * 10 * MS, MS), (0, 1): (1, batch * 9 * MS, MS)})
    summary = write_extrap_jsonl(read_inputs([tmp_path / "runs"]).dataset, tmp_path / "x.jsonl")
    (note,) = [n for n in summary.notes() if "left out" in n]
    # comm_time, comm_bytes, comm_calls, and the time the operation gets from its comm_time (time,
    # exclusive_time, visits) with its speedup, parallel_efficiency and cost
    # (review 92 LOW-3: worded as the guess it is, since work that rank 0 leaves to others lacks ranks=1 too)
    assert note.startswith("10 series left out of the export: not measured where ranks=1 (communication, which a "
                           "single rank does not do, or work that rank 0 leaves to the other ranks), and Extra-P refuses gaps. To hand them to Extra-P, export the other points "
                           "on their own (--exclude ranks=1)")
    assert "main->train->train_epoch->all_reduce [comm_time] (4 of 6 points)" in note
    # and the advice works: without ranks=1 the communication goes out
    from modeler.pointfilter import parse_point_filter
    from modeler.readers import ReadOptions

    rest = read_inputs([tmp_path / "runs"], ReadOptions(points=parse_point_filter(exclude=["ranks=1"]))).dataset
    summary = write_extrap_jsonl(rest, tmp_path / "y.jsonl")
    assert not summary.missing_where and not summary.left_out
    assert '"metric": "comm_time"' in (tmp_path / "y.jsonl").read_text()


# F13 -------------------------------------------------------------------------------------------


def _many_runs(root: Path) -> None:
    for n in range(1, 13):
        run_id = f"{n:012x}"  # an opaque id, as the launcher's hashes are
        write_rank_file(root / f"n-{n}_rep-0", run_id=run_id, params={"n": n},
                        profile={(0,): (1, n * 10 * MS, MS), (0, 1): (1, n * 9 * MS, n * 9 * MS)})


def test_report_run_that_is_not_there_counts_the_runs_and_shows_their_parameters(tmp_path):
    from modeler.errors import InputError
    from modeler.report.assemble import ReportOptions, check_options

    _many_runs(tmp_path / "runs")
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    with pytest.raises(InputError) as exc:
        check_options(groups, ("n",), ReportOptions(run_id="nope"))
    msg = str(exc.value)
    assert msg.startswith("--run: no run 'nope' (a run id, the run's directory or its name); the 12 runs are: "
                          "000000000001 (n=1, rep 0), 000000000002 (n=2, rep 0), ")
    assert msg.endswith("00000000000a (n=10, rep 0) and 2 more")


def test_report_run_takes_the_runs_directory_or_its_name(tmp_path):
    _many_runs(tmp_path / "runs")
    by_id = _report_md([str(tmp_path / "runs"), "--run", "000000000003"], tmp_path)
    assert "Run `000000000003`" in by_id
    assert _report_md([str(tmp_path / "runs"), "--run", str(tmp_path / "runs" / "n-3_rep-0")], tmp_path) == by_id
    assert _report_md([str(tmp_path / "runs"), "--run", "n-3_rep-0"], tmp_path) == by_id


def test_a_warning_most_models_share_is_said_once_with_their_count(tmp_path):
    from dataclasses import replace

    from modeler.report.regions import fold_warnings
    from modeler.report.findings import RankingRow

    few, two = "fewer than 5 values of parameter ranks (3)", "only 2 value(s) of parameter ranks"
    base = RankingRow(callpath="a", formula="1", growth="constant", growth_key=(0.0, 0.0), smape=1.0, cv_smape=None,
                      ar2=1.0, points=9, measured_max=1.0, predicted=1.0, low=1.0, high=1.0, factor=1.0,
                      warnings=(), anchor="region-0", forms=None, from_time=None)
    rows = [replace(base, callpath=f"r{i}", warnings=(two,) if i < 2 else (few, "cut off") if i == 2 else (few,))
            for i in range(20)]
    assert fold_warnings(rows) == [f"18 of 20 models: {few}"]
    assert [r.warnings for r in rows[:3]] == [(two,), (two,), ("cut off",)]
    assert all(r.warnings == () for r in rows[3:])


def test_the_markdown_notes_do_not_repeat_a_warning_most_models_share(tmp_path):
    from dataclasses import replace

    from modeler.report.assemble import build_report
    from modeler.report.render import render_markdown
    from test_report_synth import hand_models, load_sweep, write_sweep

    groups, dataset = load_sweep(write_sweep(tmp_path / "runs"))
    models = hand_models(dataset)
    few, two = "fewer than 5 values of parameter ranks (3)", "only 2 value(s) of parameter ranks"
    models = [replace(m, warnings=(two,) if i < 2 else (few,)) for i, m in enumerate(models)]
    r = build_report(groups, dataset, models)
    n = len(r.ranking)
    assert n > 4
    assert f"{n - 2} of {n} models: {few}" in r.warnings
    md = render_markdown(r, top=n)
    assert md.count(few) == 1
    assert md.count(two) == 2  # the two models without it keep their own note


def test_timeline_run_choice_is_the_same_as_the_reports(tmp_path):
    from modeler.errors import InputError
    from modeler.timeline import select_run
    from runtime.runfile import read_run

    _many_runs(tmp_path / "runs")
    runs = [read_run(f) for f in sorted((tmp_path / "runs").rglob("rank*.jsonl"))]
    assert [r.header["run_id"] for r in select_run(runs, "n-3_rep-0")] == ["000000000003"]
    with pytest.raises(InputError, match=r"the inputs hold 12 runs \(000000000001 \(n=1, rep 0\), .* and 2 more\); "
                                         r"choose one with --run"):
        select_run(runs, None)
