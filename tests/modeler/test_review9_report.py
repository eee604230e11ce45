"""Review 9 of the modeler, `modeler report`: the headline run time is the main process's longest
top-level region (F1), never rank-seconds under `--ranks sum` or the fastest rank under `min` (F2);
the training view keeps step loops apart and leaves inactive steps out (F6); speedup, efficiency
and cost show the figure from the per-rank time and its warning (F8)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from modeler.cli import main
from modeler.readers import read_inputs
from modeler.readers.runs import load_runs
from modeler.report.runs import groups_from_runset
from modeler.report.svg import format_seconds
from modeler_synthetic_runs import REGIONS, write_rank_file

S = 10**9
WORKER_REGIONS = REGIONS + ((6, "function", "Dataset.__getitem__", "data.py", 30),
                            (7, "method", "Thread.run", "threading.py", 900))


def _report(args: list[str], tmp_path: Path, fmt: str = "markdown") -> str:
    out = tmp_path / f"report.{'md' if fmt == 'markdown' else 'html'}"
    assert main(["report", *args, "--format", fmt, "-q", "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _headline(md: str) -> str:
    (line,) = [ln for ln in md.splitlines() if "run time" in ln and not ln.startswith("|")]
    return line


def _bold(line: str) -> list[str]:
    return re.findall(r"\*\*(.+?)\*\*", line)


# F1 --------------------------------------------------------------------------------------------


def _workers_and_threads(root: Path) -> None:
    """`main` lasts 1 + n s; a helper thread of the main process is busy 0.9 (1 + n) s, two
    DataLoader workers 0.7 (1 + n) s each, all in parallel with `main`."""
    for n in (1, 2, 4, 8, 16):
        run_id, t = f"n{n}", 1 + n
        write_rank_file(root / run_id, run_id=run_id, params={"n": n}, pid=500, regions=WORKER_REGIONS,
                        profile={(0,): (1, int(t * S), int(0.2 * t * S)), (0, 1): (1, int(0.8 * t * S), int(0.8 * t * S)),
                                 (7,): (1, int(0.9 * t * S), int(0.9 * t * S))})
        for w in range(2):
            write_rank_file(root / run_id, run_id=run_id, params={"n": n}, pid=600 + w, regions=WORKER_REGIONS,
                            header={"child_of": 500, "forked_from": 500},
                            profile={(6,): (100, int(0.7 * t * S), int(0.7 * t * S))})


def test_run_time_is_the_longest_root_of_the_main_process_not_a_sum_with_workers_and_threads(tmp_path):
    _workers_and_threads(tmp_path / "runs")
    md = _report([str(tmp_path / "runs"), "--at", "n=32"], tmp_path)
    line = _headline(md)
    # the run lasts 33 s; the sum of the roots (main, the thread's and the workers') is 33 x 3.3
    assert _bold(line) == [format_seconds(33.0)], line
    assert "`main`" in line and "longest top-level region of the main process" in line
    html = _report([str(tmp_path / "runs"), "--at", "n=32"], tmp_path, "html")
    card = html[html.index("predicted run time (mean over ranks) at"):][:400]
    assert format_seconds(33.0) in html[html.index("predicted run time (mean over ranks) at") - 200:html.index("predicted run time (mean over ranks) at")]
    assert "main: the longest top-level region of the main process" in card


def test_scaling_time_of_a_run_is_its_longest_root_not_the_sum_with_threads(tmp_path):
    _workers_and_threads(tmp_path / "runs")
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    g = next(g for g in groups if g.run_id == "n4")
    assert g.time_ns() == 5 * S  # not 5 + 4.5 s with the helper thread's root
    assert g.ranks[0].roots() == {"main", "Thread.run"}  # the workers' roots are not the main process's


# F2 --------------------------------------------------------------------------------------------


def _ranks_sweep(root: Path, ranks=(1, 2, 4, 8)) -> None:
    """Rank r of p ranks takes n (1 + 0.2 (-1)^r) s (p > 1): the mean over ranks is n, the fastest
    rank 0.8 n, the sum p n."""
    for p in ranks:
        for n in (10, 20, 40, 80, 160):
            run_id = f"p{p}-n{n}"
            for r in range(p):
                t = n * (1 + (0.2 * (-1) ** r if p > 1 else 0.0))
                write_rank_file(root / run_id, run_id=run_id, params={"ranks": p, "n": n}, rank=r, world_size=p,
                                profile={(0,): (1, int(t * S), int(t * S))})


@pytest.mark.parametrize("how", ["sum", "min"])
def test_run_time_under_ranks_sum_and_min_is_the_mean_per_rank_time(tmp_path, how):
    _ranks_sweep(tmp_path / "runs")
    at = ["--at", "ranks=16,n=80"]
    mean = _bold(_headline(_report([str(tmp_path / "runs"), *at], tmp_path)))
    assert mean == [format_seconds(80.0), format_seconds(80.0 * 16)]
    line = _headline(_report([str(tmp_path / "runs"), "--ranks", how, *at], tmp_path))
    # not 16 x 80 s of rank-seconds (sum) or the fastest rank's 64 s (min), and its cost not x16 again
    assert _bold(line) == mean, line
    assert f"under --ranks {how}" in line and "cost model" in line


@pytest.mark.parametrize("how", ["sum", "min"])
def test_run_time_under_ranks_sum_and_min_without_a_ranks_parameter_is_left_out_with_a_note(tmp_path, how):
    for n in (10, 20, 40, 80, 160):
        for r in range(2):
            write_rank_file(tmp_path / "runs" / f"n{n}", run_id=f"n{n}", params={"n": n}, rank=r, world_size=2,
                            profile={(0,): (1, int(n * (1 + 0.2 * r) * S), int(n * S))})
    md = _report([str(tmp_path / "runs"), "--ranks", how], tmp_path)
    assert "Predicted run time" not in md
    assert f"No predicted run time: under --ranks {how}" in md
    html = _report([str(tmp_path / "runs"), "--ranks", how], tmp_path, "html")
    assert f"no predicted run time: under --ranks {how}" in html


# F6 --------------------------------------------------------------------------------------------


def _two_loops(root: Path) -> None:
    """Per run: a 5 s warm-up step outside the schedule, then 10 train steps of 0.1 n s (half of it
    data wait), and an eval loop of 100 steps of 1 ms."""
    regions = REGIONS + ((5, "step", "evaluate:for@50", "train.py", 50),)
    for n in (1, 2, 4, 8, 16):
        t = 0.1 * n
        step = {"region": 2, "duration_ns": int(t * S), "data_wait_ns": int(t * S) // 2, "comm_ns": 0,
                "gpu_ns": None, "memory": None}
        steps = [{**step, "duration_ns": 5 * S, "active": False}] + [{**step, "active": True}] * 10
        steps += [{"region": 5, "duration_ns": S // 1000, "data_wait_ns": 0, "comm_ns": 0, "gpu_ns": None,
                   "memory": None}] * 100
        prof = {(0,): (1, int((10 * t + 6.2) * S), S), (0, 1): (1, int((10 * t + 5) * S), 0),
                (0, 1, 2): (11, int((10 * t + 5) * S), int((10 * t + 5) * S)), (0, 5): (100, S // 10, S // 10)}
        write_rank_file(root / f"n{n}", run_id=f"n{n}", params={"n": n}, regions=regions, profile=prof, steps=steps)


def test_training_view_keeps_step_loops_apart_and_leaves_inactive_steps_out(tmp_path):
    _two_loops(tmp_path / "runs")
    md = _report([str(tmp_path / "runs")], tmp_path)
    section = md[md.index("## Training"):md.index("## Rank")]
    rows = {(cells[1], cells[2]): cells[3:] for cells in
            ([c.strip() for c in ln.split("|")] for ln in section.splitlines() if re.match(r"\| \d+ \| `", ln))}
    assert "- `train_epoch`: `main->train->train_epoch`" in section
    train, evaluate = "`train_epoch`", "`evaluate:for@50`"
    for n in (1, 2, 4, 8, 16):
        # time per step, mean step (the inactive 5 s step left out of both), compute, communication, data wait
        assert rows[(str(n), train)][:5] == [format_seconds(0.1 * n), format_seconds(0.1 * n), format_seconds(0.05 * n),
                                             "0", format_seconds(0.05 * n)]
        assert rows[(str(n), evaluate)][0] == format_seconds(0.001)
    # what `modeler fit --metric step_time` gives, at every point
    step_time = {s.callpath: s for s in read_inputs([tmp_path / "runs"]).dataset.series if s.metric == "step_time"}
    assert set(step_time) == {"main->train->train_epoch", "main->evaluate:for@50"}
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    for g in groups:
        stats = g.loop_stats("steps")
        for cp, s in step_time.items():
            i = [list(pt) for pt in s.points].index([g.params["n"]])
            assert stats[cp]["duration"] / S == pytest.approx(float(s.repetitions[i][0]))
        assert stats["main->train->train_epoch"]["count"] == 10
    html = _report([str(tmp_path / "runs")], tmp_path, "html")
    assert "time per step of train_epoch against n" in html and "time per step of evaluate:for@50 against n" in html
    assert "split of a mean step of train_epoch against n" in html


# F8 --------------------------------------------------------------------------------------------


def _slowing_sweep(root: Path) -> None:
    """A per-rank time n (1 + log2 ranks): the speedup 1 / (1 + log2 ranks) falls with more ranks,
    which no PMNF model of the efficiency follows, and the time model does exactly."""
    for p in (1, 2, 4, 8, 16):
        for n in (1, 2, 4, 8, 16):
            run_id = f"p{p}-n{n}"
            t = n * (1 + math.log2(p))
            for r in range(p):
                write_rank_file(root / run_id, run_id=run_id, params={"ranks": p, "n": n}, rank=r, world_size=p,
                                profile={(0,): (1, int(t * S), int(t * S))})


def test_efficiency_shows_the_figure_from_the_per_rank_time_and_the_warning(tmp_path):
    _slowing_sweep(tmp_path / "runs")
    args = [str(tmp_path / "runs"), "--metric", "parallel_efficiency", "--at", "ranks=64,n=16"]
    truth = 1 / (64 * (1 + 6))  # speedup 1 / (1 + log2 64) over 1 rank, divided by 64
    shown = f"{truth:.3g}"
    md = _report(args, tmp_path)
    assert "| from the per-rank time |" in md
    (row,) = [ln for ln in md.splitlines() if ln.startswith("| 1 | `main`")]
    assert f"| {shown} (from time) |" in row, row
    assert "far from what the call path's per-rank time gives: main (parallel\\_efficiency)" in md
    html = _report(args, tmp_path, "html")
    assert f"from time: <b>{shown}</b>" in html
    assert "far from what the call path&#39;s per-rank time gives: main (parallel_efficiency)" in html


def test_no_figure_from_time_under_ranks_sum_as_in_fit(tmp_path):
    _slowing_sweep(tmp_path / "runs")
    md = _report([str(tmp_path / "runs"), "--metric", "speedup", "--ranks", "sum", "--at", "ranks=64"], tmp_path)
    assert "from the per-rank time" not in md and "far from what" not in md
