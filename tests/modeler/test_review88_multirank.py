"""Review 88 (multi-rank real runs into the modeler).

MED-1: a call path that only some ranks run (a rank-0 checkpoint, the others waiting in a barrier)
was modeled under `--ranks mean` as perfectly parallel: its mean over ranks, 0 for the ranks that
did not run it, is T/ranks, so speedup = ranks, efficiency 1, a constant cost, and the ranking
called it "falling" and put it last. LOW-2: a speedup below zero or an imbalance above the rank
count was the row's headline figure. LOW-3: an incomplete run's reason ignored launch.json's error.
LOW-4: docs/modeler.md named a launch the launcher refuses.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from modeler import cli
from modeler.aggregate import RegionNames, dataset_from_runs, run_metrics
from modeler.dataset import MetricNote
from modeler.derived import Baselines
from modeler.model import Factor, FittedModel, Model, Term
from modeler.outputs.columns import cells
from modeler.ranking import rank_models
from modeler.readers.runs import load_runs
from modeler_synthetic_runs import MS, write_rank_file
from test_readers_runs import simple_run

DOCS = Path(__file__).resolve().parents[2] / "docs" / "modeler.md"

# (id, kind, name, file, line)
REGIONS = (
    (0, "function", "main", "main.py", 1),
    (1, "function", "train", "main.py", 10),
    (2, "function", "compute", "main.py", 20),
    (3, "function", "save_checkpoint", "main.py", 30),
    (4, "function", "barrier", "main.py", 40),
)
CKPT = "main->train->save_checkpoint"
COMPUTE = "main->train->compute"
RANKS = (1, 2, 3, 4, 6)
CKPT_S = 0.4


def _rank_profile(world: int, rank: int, noise: float) -> dict:
    """rank 0 saves a checkpoint of 0.4 s, the others wait for it in a barrier; the compute is split
    over the ranks (2 s / ranks)."""
    ns = lambda s: int(s * noise * 1e9)  # noqa: E731
    compute = ns(2.0 / world)
    ckpt = ns(CKPT_S) if rank == 0 else 0
    barrier = ns(0.001) if rank == 0 else ns(CKPT_S)
    train = compute + ckpt + barrier
    profile = {(0,): (1, train + ns(0.01), ns(0.01)), (0, 1): (1, train, 0), (0, 1, 2): (4, compute, compute),
               (0, 1, 4): (4, barrier, barrier)}
    if ckpt:
        profile[(0, 1, 3)] = (4, ckpt, ckpt)
    return profile


def _checkpoint_sweep(root: Path) -> Path:
    for world in RANKS:
        for rep, noise in enumerate((1.0, 1.01)):
            run = f"r{world}-{rep}"
            for rank in range(world):
                write_rank_file(root / run, run_id=run, rank=rank, world_size=world, repetition=rep,
                                params={"ranks": world}, regions=REGIONS, profile=_rank_profile(world, rank, noise))
    return root


@pytest.fixture(scope="module")
def ckpt_runs(tmp_path_factory) -> Path:
    return _checkpoint_sweep(tmp_path_factory.mktemp("ckpt"))


def _series(dataset, callpath: str, metric: str):
    (s,) = [s for s in dataset.series if s.callpath == callpath and s.metric == metric]
    return {float(p[0]): float(v) for p, v in zip(s.points, s.values("median"))}


# MED-1: run_metrics ------------------------------------------------------------------------------


def test_run_metrics_names_the_call_paths_some_ranks_ran_and_takes_their_mean_as_the_per_rank_time(tmp_path):
    for rank in range(2):
        write_rank_file(tmp_path / "r", run_id="r", rank=rank, world_size=3, params={"ranks": 3}, regions=REGIONS,
                        profile=_rank_profile(2, rank, 1.0))
    # a third rank whose profile is empty (rank selection): no rank here
    write_rank_file(tmp_path / "r", run_id="r", rank=2, world_size=3, params={"ranks": 3}, regions=REGIONS, profile={})
    (run,) = load_runs([tmp_path]).runs
    rm = run_metrics(run, RegionNames([run]))
    assert rm.partial == {CKPT: (1, 2)}  # of the 2 profiled ranks, not of the world size 3
    # its time stays the mean over the ranks, 0 for the other (the parts add up to their whole) ...
    assert rm.values[(CKPT, "time")] == pytest.approx(CKPT_S / 2)
    parts = sum(rm.values[(f"main->train->{c}", "time")] for c in ("compute", "save_checkpoint", "barrier"))
    assert rm.values[("main->train", "time")] == pytest.approx(parts)
    # ... and its per-rank time, which speedup, efficiency and cost derive from, that of the rank that ran it
    assert rm.rank_time[CKPT] == pytest.approx(CKPT_S)
    assert rm.rank_time[COMPUTE] == pytest.approx(1.0)  # every rank ran it: the mean, as before
    assert rm.rank_time["main->train->barrier"] == pytest.approx((0.001 + CKPT_S) / 2)
    rm_max = run_metrics(run, RegionNames([run]), "max")
    assert rm_max.rank_time[CKPT] == pytest.approx(CKPT_S)


def test_a_one_rank_run_has_no_partial_call_path(tmp_path):
    write_rank_file(tmp_path / "r", run_id="r", rank=0, world_size=1, params={"ranks": 1}, regions=REGIONS,
                    profile=_rank_profile(1, 0, 1.0))
    (run,) = load_runs([tmp_path]).runs
    assert run_metrics(run, RegionNames([run])).partial == {}


# MED-1: the dataset ------------------------------------------------------------------------------


def test_speedup_efficiency_and_cost_of_a_rank0_checkpoint_come_from_the_rank_that_ran_it(ckpt_runs):
    ds = dataset_from_runs(load_runs([ckpt_runs]))
    # the time is the documented mean over ranks, 0 where a rank did not run it
    assert _series(ds, CKPT, "time") == pytest.approx({r: CKPT_S * 1.005 / r for r in RANKS}, rel=1e-6)
    # a constant 0.4 s on rank 0: speedup 1, efficiency 1/ranks, cost 0.4 x ranks (before: speedup =
    # ranks, efficiency 1, a constant cost)
    assert _series(ds, CKPT, "speedup") == pytest.approx({r: 1.0 for r in RANKS}, rel=0.01)
    assert _series(ds, CKPT, "parallel_efficiency") == pytest.approx({r: 1.0 / r for r in RANKS}, rel=0.01)
    assert _series(ds, CKPT, "cost") == pytest.approx({r: CKPT_S * 1.005 * r for r in RANKS}, rel=1e-6)
    # a call path every rank runs is derived as before
    assert _series(ds, COMPUTE, "speedup") == pytest.approx({r: float(r) for r in RANKS}, rel=0.01)
    assert ds.run_shares.some_ranks == {CKPT: ((1, 2), (1, 3), (1, 4), (1, 6))}


def test_one_warning_names_the_call_paths_some_ranks_ran(ckpt_runs):
    ds = dataset_from_runs(load_runs([ckpt_runs]))
    (w,) = [w for w in ds.warnings if "run by only some of the ranks" in w]
    assert w.startswith("1 call path was run by only some of the ranks (--ranks mean): "
                        "main->train->save_checkpoint: run by 1 of 2-6 ranks; its time, a mean over all ranks with "
                        "0 for the others, falls as 1/ranks")
    assert "although the ranks that ran it took as long" in w and "--ranks max gives the time" in w
    assert isinstance(w, MetricNote) and {"time", "speedup", "cost"} <= w.metrics
    assert "run by only some" not in " ".join(ds.select(metrics=["step_time"]).warnings)


def test_the_warning_lists_the_outermost_first_and_counts_the_rest(tmp_path):
    from modeler.aggregate import some_ranks_note

    paths = {f"main->eval{'->x' * k}": {(1, 2)} for k in range(6)}
    w = some_ranks_note(paths, True)
    assert w.startswith("6 call paths were run by only some of the ranks (--ranks mean): main->eval: run by 1 of 2 "
                        "ranks, main->eval->x: run by 1 of 2 ranks")
    assert "and 2 more; the time of each" in w


def test_no_warning_and_no_mark_under_ranks_max(ckpt_runs):
    ds = dataset_from_runs(load_runs([ckpt_runs]), ranks="max")
    assert not [w for w in ds.warnings if "only some of the ranks" in w]
    assert ds.run_shares.some_ranks == {}
    assert _series(ds, CKPT, "time") == pytest.approx({r: CKPT_S * 1.005 for r in RANKS}, rel=1e-6)


def test_under_ranks_sum_the_derived_metrics_take_the_mean_over_the_ranks_that_ran_it(ckpt_runs):
    ds = dataset_from_runs(load_runs([ckpt_runs]), ranks="sum")
    assert _series(ds, CKPT, "speedup") == pytest.approx({r: 1.0 for r in RANKS}, rel=0.01)


# MED-1: the ranking ------------------------------------------------------------------------------


def _fit_json(capsys, *argv: str) -> dict:
    assert cli.main(["fit", *argv, "--format", "json", "-q"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)


def test_the_ranking_ranks_the_checkpoint_by_the_time_of_the_rank_that_ran_it(ckpt_runs, capsys):
    doc = _fit_json(capsys, str(ckpt_runs), "--at", "ranks=64", "--min-share", "0")
    rows = [(m["callpath"], m["metric"]) for m in doc["models"]]
    ckpt = next(m for m in doc["models"] if m["callpath"] == CKPT and m["metric"] == "time")
    # its own model (of the mean over ranks) falls as 1/ranks; the rank that ran it does not get faster
    assert ckpt["growth"]["exponent"] < 0
    assert ckpt["some_ranks"]["ranks"] == "1 of 2-6" and ckpt["some_ranks"]["ranked_by"] is True
    assert ckpt["some_ranks"]["growth"] == {"exponent": 0.0, "log_exponent": 0.0}
    assert ckpt["some_ranks"]["prediction"] == pytest.approx(CKPT_S * 1.005, rel=0.02)
    assert ckpt["prediction"] == pytest.approx(CKPT_S * 1.005 / 64, rel=0.05)  # its time: still the mean
    # a constant is ranked above the compute, which does fall as 1/ranks (before: the checkpoint came last)
    assert rows.index((CKPT, "time")) < rows.index((COMPUTE, "time"))
    assert rows[-1] != (CKPT, "time")
    compute = next(m for m in doc["models"] if m["callpath"] == COMPUTE and m["metric"] == "time")
    assert compute["some_ranks"] is None
    assert any("run by only some of the ranks" in w for w in doc["warnings"])


def test_the_table_says_the_row_is_ranked_by_the_ranks_that_ran_it(ckpt_runs, capsys):
    assert cli.main(["fit", str(ckpt_runs), "--at", "ranks=64", "--callpath", CKPT, "-q"]) == cli.EXIT_OK
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if CKPT in ln]
    assert "const (ranks that ran it)" in line and "falling" not in line
    assert "(ranks that ran it: 0.40" in line


def test_the_derived_metrics_of_the_checkpoint_at_the_target(ckpt_runs, capsys):
    doc = _fit_json(capsys, str(ckpt_runs), "--at", "ranks=64", "--callpath", CKPT,
                    "--metric", "time,speedup,parallel_efficiency,cost")
    by_metric = {m["metric"]: m for m in doc["models"]}
    assert by_metric["speedup"]["prediction"] == pytest.approx(1.0, rel=0.02)
    # from the cost model alone: the time model is of the mean over all ranks (0.4/64 would give 64)
    assert by_metric["speedup"]["prediction_from_time_basis"] == "cost"
    assert by_metric["speedup"]["prediction_from_time"] == pytest.approx(1.0, rel=0.02)
    assert by_metric["parallel_efficiency"]["prediction_from_time"] == pytest.approx(1 / 64, rel=0.02)
    assert by_metric["cost"]["prediction"] == pytest.approx(CKPT_S * 1.005 * 64, rel=0.02)
    assert by_metric["parallel_efficiency"]["growth"]["exponent"] < 0  # falls: ranked first among efficiencies


def test_the_csv_has_the_time_of_the_ranks_that_ran_it(ckpt_runs, capsys):
    import csv
    import io

    assert cli.main(["fit", str(ckpt_runs), "--at", "ranks=64", "--callpath", CKPT, "--format", "csv", "-q"]) == 0
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["some_ranks"] == "1 of 2-6"
    assert float(row["prediction_ranks_that_ran_it"]) == pytest.approx(CKPT_S * 1.005, rel=0.02)
    assert float(row["growth_ranks_that_ran_it_exponent"]) == 0.0


def test_the_report_labels_the_checkpoint_and_warns(ckpt_runs, tmp_path, capsys):
    out = tmp_path / "r.md"
    assert cli.main(["report", str(ckpt_runs), "--at", "ranks=64", "--min-share", "0", "--format", "markdown",
                     "-o", str(out), "-q"]) == cli.EXIT_OK
    text = out.read_text(encoding="utf-8")
    # its row in the scaling ranking (the first table naming it; the imbalance table names it too)
    line = next(ln for ln in text.splitlines() if ln.startswith("|") and f"`{CKPT}`" in ln)
    assert "(ranks that ran it, 1 of 2-6: const)" in line
    assert "run by only some of the ranks" in text


# LOW-2 -------------------------------------------------------------------------------------------


def _fm(callpath: str, metric: str, model: Model) -> FittedModel:
    return FittedModel(callpath, metric, model, 1.0, 0.0, 1.0, None, 5)


def test_a_speedup_below_zero_shows_the_figure_from_the_per_rank_time_first():
    # 2 - 0.5 * log2(ranks): -1 at 64 ranks; the time model, constant, gives a speedup of 1
    speedup = _fm("main", "speedup", Model(("ranks",), 2.0, (Term(-0.5, (Factor("ranks", 0.0, 1.0),)),)))
    time = _fm("main", "time", Model(("ranks",), 1.0))
    ranking = rank_models([speedup], ("ranks",), {"ranks": 64.0}, companions=[time],
                          nonnegative={("main", "speedup")}, baselines=Baselines(("ranks",), {"main": {(): 1.0}}))
    (row,) = ranking.rows
    assert row.prediction == pytest.approx(-1.0) and row.out_of_range == "below zero"
    assert row.headline() == (pytest.approx(1.0), "time")
    at = cells(1, row)[4]
    assert at.startswith("1 (from time; its model: -1)")
    assert row.to_json()["prediction_out_of_range"] == "below zero"
    (w,) = [w for w in ranking.warnings if "below zero" in w]
    assert "main (speedup) -1" in w and "shown with the figure from the call path's per-rank time first" in w


def test_a_speedup_below_zero_without_a_figure_from_time_stays_as_it_is():
    speedup = _fm("main", "speedup", Model(("ranks",), 2.0, (Term(-0.5, (Factor("ranks", 0.0, 1.0),)),)))
    (row,) = rank_models([speedup], ("ranks",), {"ranks": 64.0}).rows
    assert row.headline() == (pytest.approx(-1.0), None)
    assert cells(1, row)[4] == "-1"


def test_an_imbalance_above_the_rank_count_is_flagged():
    over = _fm("a", "imbalance", Model(("ranks",), 0.0, (Term(1.0, (Factor("ranks", 2.0),)),)))  # 64 at 8
    exact = _fm("b", "imbalance", Model(("ranks",), 1e-15, (Term(1.0, (Factor("ranks", 1.0),)),)))  # 8 at 8: one rank works
    ranking = rank_models([over, exact], ("ranks",), {"ranks": 8.0})
    rows = {r.fitted.callpath: r for r in ranking.rows}
    assert rows["a"].out_of_range == "above 8, the most max/mean over 8 ranks can be"
    assert rows["b"].out_of_range is None
    assert cells(1, rows["a"])[4] == "64 (above the rank count)"
    assert cells(2, rows["b"])[4] == "8"
    (w,) = [w for w in ranking.warnings if "rank count" in w]
    assert w.startswith("1 imbalance model predicts more at ranks=8 than the rank count, which max/mean over the "
                        "ranks cannot exceed: a 64")


# LOW-3 -------------------------------------------------------------------------------------------


def test_an_incomplete_run_names_the_launchers_failed_rank_first_with_its_error(tmp_path):
    for p in (2, 4, 8):
        simple_run(tmp_path, f"r{p}", p, t_ms=10 * p)
    d = tmp_path / "x"
    for rank in range(2):  # flushed, then SIGKILLed: neither has an end record
        write_rank_file(d, run_id="x", params={"p": 16}, rank=rank, world_size=2, profile={(0,): (1, MS, MS)}, end=None)
    (d / "launch.json").write_text(json.dumps({"version": 1, "run_id": "x", "status": "failed", "failed_rank": 1,
                                               "error": "killed by SIGKILL (out of memory?)", "exit_code": 137}))
    (run,) = [r for r in load_runs([tmp_path]).runs if r.run_id == "x"]
    assert run.status == "incomplete"
    assert run.reason.startswith(f"{d / 'rank1.1001.jsonl'}: rank 1 has no end record "
                                 "(launch.json: killed by SIGKILL (out of memory?))")
    assert "also " in run.reason and "rank 0 has no end record (killed, or still running)" in run.reason


# LOW-4 -------------------------------------------------------------------------------------------


def test_the_docs_do_not_name_a_ranks_parameter_the_launcher_refuses():
    docs = " ".join(DOCS.read_text(encoding="utf-8").split())
    assert "beside a fixed `torchrun --nproc`" not in docs
    assert "such files come from other writers or hand-edited headers" in docs
