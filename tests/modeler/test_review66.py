"""Review 66 (the modeler as a user sees it): a speedup against a baseline time of 0 (F1), a basis
named beside no figure from the per-rank time (F2), the CSV's growth from parts (F3), the growth of
a decaying term with a log (F4), a stray region's name renaming every call path (F5), and an RSS
that overflows (F6)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from modeler import cli
from modeler.derived import Baselines, baselines, derived_predictions
from modeler.model import Factor, FittedModel, Model, Term
from modeler.outputs import render
from modeler.growth import growth, growth_text
from modeler.ranking import rank_models
from modeler.readers import load
from modeler_synthetic_runs import REGIONS, write_rank_file

RANKS = (1, 2, 4, 8, 16)
COMM = (5, "function", "allreduce_wrap", "d.py", 2)


def _comm_s(ranks: int) -> float:
    """The communication's per-rank seconds: none on one rank, 0.2 * log2(ranks) from 2 on."""
    return 0.2 * math.log2(ranks)


@pytest.fixture(scope="module")
def zero_at_one_rank(tmp_path_factory) -> Path:
    """cases/zeros of the review: `main->allreduce_wrap` visited with 0 ns at 1 rank."""
    root = tmp_path_factory.mktemp("zeros")
    for ranks in RANKS:
        for rep, noise in enumerate((0.99, 1.0, 1.01)):
            run = f"z{ranks}-{rep}"
            t = int((1 + 0.1 * ranks) * 1e9 * noise)
            c = int(_comm_s(ranks) * 1e9 * noise)
            write_rank_file(root / run, run_id=run, params={"ranks": ranks}, rank=0, world_size=1, repetition=rep,
                            regions=(*REGIONS, COMM),
                            profile={(0,): (1, t + c + 10**6, 10**6), (0, 1): (1, t, t), (0, 5): (1, c, c)})
    return root


def _series(ds, callpath: str, metric: str):
    (s,) = [s for s in ds.series if s.callpath == callpath and s.metric == metric]
    return s


def test_f1_a_speedup_is_taken_against_the_fewest_ranks_where_the_time_is_above_zero(zero_at_one_rank):
    ds = load([zero_at_one_rank])
    for metric in ("speedup", "parallel_efficiency"):
        s = _series(ds, "main->allreduce_wrap", metric)
        # no speedup at 1 rank (a time of 0 is no baseline), and none is 0: relative to 2 ranks
        assert s.points[:, 0].tolist() == [2.0, 4.0, 8.0, 16.0]
        got = s.values()
        want = [_comm_s(2) / _comm_s(r) * (2 / r if metric == "parallel_efficiency" else 1) for r in (2, 4, 8, 16)]
        assert got == pytest.approx(want, rel=0.03)
    note = [w for w in ds.warnings if "were not measured at the fewest ranks" in w]
    assert len(note) == 1 and "or took no time there" in note[0] and "main->allreduce_wrap (from 2 ranks)" in note[0]
    assert "main->train" not in note[0]
    # the figure from the per-rank time takes the same baseline
    assert baselines(ds.series, ds.parameters).at("main->allreduce_wrap", {"ranks": 64.0}) == 2.0
    assert baselines(ds.series, ds.parameters).at("main->train", {"ranks": 64.0}) == 1.0


def test_f1_fit_gives_speedups_above_zero_and_the_zero_warning_says_against_what(zero_at_one_rank, capsys):
    argv = ["fit", str(zero_at_one_rank), "--at", "ranks=64", "--min-share", "0", "--callpath", "main->allreduce_wrap",
            "--metric", "time,speedup,parallel_efficiency", "--format", "json"]
    assert cli.main(argv) == cli.EXIT_OK
    out, err = capsys.readouterr()
    models = {m["metric"]: m for m in json.loads(out)["models"]}
    for metric in ("speedup", "parallel_efficiency"):
        assert models[metric]["prediction"] > 0
        assert models[metric]["points"] == 4
    true = _comm_s(2) / _comm_s(64)  # 1/6
    assert models["speedup"]["prediction_from_time"] == pytest.approx(true, rel=0.1)
    assert models["parallel_efficiency"]["prediction_from_time"] == pytest.approx(true * 2 / 64, rel=0.1)
    (zero,) = [w for w in err.splitlines() if "is 0 at the fewest ranks" in w]
    assert ("the speedup and parallel_efficiency of main->allreduce_wrap are relative to the fewest ranks where its "
            "time is above 0") in zero


def _linear(metric: str, constant: float, slope: float, cv: float) -> FittedModel:
    model = Model(("ranks",), constant, (Term(slope, (Factor("ranks", 1.0),)),))
    return FittedModel("main", metric, model, 1.0, 0.0, 1.0, cv, 5)


def test_f2_no_basis_is_named_where_neither_model_gives_a_figure():
    speedup = FittedModel("main", "speedup", Model(("ranks",), 1.0), 1.0, 0.0, 1.0, None, 5)
    time = _linear("time", 10.0, -1.0, 1.0)  # below zero at 16 ranks
    cost = _linear("cost", 10.0, -1.0, 2.0)  # so is the time per rank from it
    bases = Baselines(("ranks",), {"main": {(): 1.0}})
    assert derived_predictions([speedup], [time, cost], {"ranks": 16.0}, ("ranks",), bases) == [None]
    ranking = rank_models([speedup], ("ranks",), {"ranks": 16.0}, companions=[time, cost], baselines=bases)
    (row,) = ranking.rows
    doc = row.to_json()
    assert doc["prediction_from_time"] is None and doc["prediction_from_time_basis"] is None
    assert "(from " not in render(ranking, "table")
    (line,) = csv.DictReader(io.StringIO(render(ranking, "csv")))
    assert line["prediction_from_time"] == "" and line["prediction_from_time_basis"] == ""


def _fm(cp, metric, constant, *terms):
    model = Model(("b", "w"), constant, tuple(Term(c, tuple(Factor(p, e) for p, e in fs)) for c, fs in terms))
    return FittedModel(cp, metric, model, smape=5.0, rss=0.1, ar2=0.9, cv_smape=None, points=25)


def test_f3_csv_has_the_growth_from_parts_that_ranks_the_row():
    # test_parts_growth's tree: main->fit's model grows as deg 2.92, its parts as deg 2.5
    tree = [
        _fm("main", "time", 1.3, (3e-6, (("b", 2.0), ("w", 0.75)))),
        _fm("main", "exclusive_time", 0.01),
        _fm("main->fit", "time", 0.2, (1e-5, (("b", 5 / 3), ("w", 1.25)))),
        _fm("main->fit", "exclusive_time", 0.01),
        _fm("main->fit->step", "time", 0.1, (2e-4, (("b", 1.0), ("w", 1.5)))),
    ]
    ranking = rank_models(tree, ("b", "w"), {"b": 256.0, "w": 96.0})
    text = render(ranking, "csv")
    header = text.splitlines()[0].split(",")
    i = header.index("growth_log_exponent")
    assert header[i + 1:i + 3] == ["growth_from_parts_exponent", "growth_from_parts_log_exponent"]
    rows = {(r["callpath"], r["metric"]): r for r in csv.DictReader(io.StringIO(text))}
    fit = rows[("main->fit", "time")]
    assert float(fit["growth_exponent"]) == pytest.approx(5 / 3 + 1.25)
    assert float(fit["growth_from_parts_exponent"]) == 2.5 and float(fit["growth_from_parts_log_exponent"]) == 0.0
    step = rows[("main->fit->step", "time")]  # no parts modeled: empty, as JSON's null
    assert step["growth_from_parts_exponent"] == "" and step["growth_from_parts_log_exponent"] == ""
    by_json = {(r.fitted.callpath, r.fitted.metric): r.to_json()["growth_from_parts"] for r in ranking.rows}
    assert by_json[("main->fit", "time")] == {"exponent": 2.5, "log_exponent": 0.0}


def test_f4_a_decaying_term_with_a_log_keeps_its_signs():
    # the review's strong-scaling model: 65.9 * ranks^(-1) + 1.193 * ranks^(-1/3) * log2(ranks)
    model = Model(("ranks",), 0.0, (Term(65.9, (Factor("ranks", -1.0),)),
                                    Term(1.193, (Factor("ranks", -1 / 3, 1),))))
    assert growth(model) == pytest.approx((-1 / 3, 1.0))
    assert growth_text(growth(model)) == "falling (deg -0.333, log^1)"
    # rising ones, and falling ones whose parts are both at or below 0, read as before
    assert growth_text((1.5, 1.0)) == "deg 1.5, log^1"
    assert growth_text((0.0, 2.0)) == "log^2"
    assert growth_text((-0.0, -1.0)) == "falling (log^1)"
    assert growth_text((-2.0, -1.0)) == "falling (deg 2, log^1)"
    assert growth_text((-1.0, 0.0)) == "falling (deg 1)"
    assert growth_text((0.0, 0.0)) == "const"
    ranking = rank_models([FittedModel("main", "time", model, 1.0, 0.1, 0.9, None, 5)], ("ranks",), {"ranks": 64.0})
    assert "falling (deg -0.333, log^1)" in render(ranking, "table")


def _lin_sweep(root: Path) -> None:
    for p in (1, 2, 4, 8, 16):
        for rep, noise in enumerate((0.99, 1.0, 1.01)):
            run = f"r{p}-{rep}"
            t = int((1 + 0.5 * p) * 1e9 * noise)
            write_rank_file(root / run, run_id=run, params={"p": p}, repetition=rep,
                            profile={(0,): (1, t + 10**6, 10**6), (0, 1): (1, t, t)})


def test_f5_a_region_with_no_value_anywhere_does_not_rename_the_others(tmp_path, capsys):
    _lin_sweep(tmp_path)
    # a run whose only region is `main` in another file, with one bad profile record (left out)
    bad = {"type": "profile", "flush": 1, "path": [0], "visits": 1, "incl_ns": "abc", "excl_ns": 5}
    write_rank_file(tmp_path / "stray", run_id="stray", params={"p": 32}, regions=[(0, "function", "main", "m", 1)],
                    records=[bad])
    assert cli.main(["fit", str(tmp_path), "--no-pass-refits", "--format", "json", "--min-share", "0"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    callpaths = {m["callpath"] for m in json.loads(out)["models"]}
    assert callpaths == {"main", "main->train"}
    assert "main.py:main" not in out + err


def test_f5_regions_of_one_name_with_values_in_two_files_are_still_told_apart(tmp_path, capsys):
    _lin_sweep(tmp_path)
    # the same run also records a `main` of another file, with a value: two regions, two names
    for p in (1, 2, 4, 8, 16):
        for rep in range(3):
            write_rank_file(tmp_path / f"r{p}-{rep}", run_id=f"r{p}-{rep}", params={"p": p}, repetition=rep, pid=77,
                            regions=[(0, "function", "main", "m", 1)], header={"child_of": 1000},
                            profile={(0,): (1, 10**8 * p, 10**8 * p)})
    assert cli.main(["fit", str(tmp_path), "--no-pass-refits", "--format", "json", "--min-share", "0",
                     "--metric", "time"]) == cli.EXIT_OK
    callpaths = {m["callpath"] for m in json.loads(capsys.readouterr().out)["models"]}
    assert {"main.py:main", "main.py:main->train", "m:main"} <= callpaths


def test_f6_an_rss_that_overflows_is_a_dash_with_a_reason(tmp_path, capsys):
    f = tmp_path / "mag.jsonl"
    f.write_text("".join(json.dumps({"params": {"x": x}, "callpath": cp, "metric": "time", "value": [v * x, v * x * 1.01]})
                         + "\n" for x in (1, 2, 4, 8, 16) for cp, v in (("big", 1e300), ("small", 1.0))))
    assert cli.main(["fit", str(f), "--at", "x=64", "--min-share", "0"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    (big,) = [ln for ln in out.splitlines() if " big " in ln]
    assert "inf" not in big
    cells = big.split()
    assert cells[cells.index("5") - 1] == "-"  # the RSS, before the points
    assert "values too large in size for the RSS and the 80% range" in err and "(1 model)" in err
    assert cli.main(["fit", str(f), "--at", "x=64", "--min-share", "0", "--format", "json"]) == cli.EXIT_OK
    models = {m["callpath"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert models["big"]["rss"] is None
    assert any("too large in size" in w for w in models["big"]["warnings"])
    assert not any("too large in size" in w for w in models["small"]["warnings"])


def test_f5_the_region_without_values_keeps_its_file_so_its_left_out_record_blanks_no_other(tmp_path):
    _lin_sweep(tmp_path)
    # beside run r16-0's main process, a worker whose `main` (another file) has only a bad record:
    # what that record leaves unknown is `m:main`'s, not the main process's `main`
    bad = {"type": "profile", "flush": 1, "path": [0], "visits": 1, "incl_ns": "abc", "excl_ns": 5}
    write_rank_file(tmp_path / "r16-0", run_id="r16-0", params={"p": 16}, pid=77, header={"child_of": 1000},
                    regions=[(0, "function", "main", "m", 1)], records=[bad])
    ds = load([tmp_path])
    main = _series(ds, "main", "time")
    assert main.points[:, 0].tolist() == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert [r.size for r in main.repetitions] == [3, 3, 3, 3, 3]
    assert not [s for s in ds.series if s.callpath.startswith("main.py:")]
