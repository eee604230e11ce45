"""Review 86: the report's run time against the scaling table (MED-1), a run time outside the runs at
its own point (MED-2), a strong-scaling model ranked as falling (MED-3), numeric sort keys (MED-4),
`-o` onto a run's launch.json (LOW-1), the run time without a top-level region (LOW-3), the
regions inside the run adding up to more than it (LOW-4), and the docs (LOW-6, LOW-8)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.model import Factor, FittedModel, Model, Term
from modeler.growth import growth
from modeler.ranking import rank_models
from modeler.report import assemble
from modeler.report.assemble import ReportOptions, build_report
from modeler.report.findings import scales_badly
from modeler.report.render import render_html, render_markdown
from .modeler_synthetic_runs import write_rank_file
from .test_report_synth import hand_models, load_sweep, write_sweep

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "report.md"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = write_sweep(tmp_path_factory.mktemp("review86") / "runs", failed=False)
    groups, dataset = load_sweep(root)
    return groups, dataset, hand_models(dataset)


def _series(cp: str, points, runs, metric: str = "time") -> Series:
    return Series(cp, metric, np.array(points, dtype=float), tuple(np.array(r, dtype=float) for r in runs), "s")


def _fitted(cp: str, model: Model, metric: str = "time") -> FittedModel:
    return FittedModel(cp, metric, model, smape=5.0, rss=0.1, ar2=0.9, cv_smape=None, points=5)


# MED-1 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ranks, label", [("mean", "mean over ranks"), ("max", "slowest rank")])
def test_the_run_time_says_which_ranks_time_it_is(sweep, ranks, label):
    groups, dataset, models = sweep
    report = build_report(groups, dataset, models, ReportOptions(ranks=ranks))
    assert report.predicted_over == label
    md = render_markdown(report)
    assert f"Predicted run time ({label}) at " in md
    html = render_html(report)
    assert f"predicted run time ({label}) at " in html


def test_the_scaling_table_says_it_is_the_slowest_ranks(sweep):
    groups, dataset, models = sweep
    report = build_report(groups, dataset, models)
    assert report.scaling_table
    md = render_markdown(report)
    assert "| time (slowest rank) |" in md and "cost (ranks x slowest rank's time)" in md
    html = render_html(report)
    assert "time (slowest rank)</th>" in html


def test_the_docs_no_longer_say_the_scaling_time_is_the_predicted_one():
    docs = " ".join(DOCS.read_text().split())
    assert "longest top-level region, as for the predicted run time)" not in docs
    assert "as for the predicted run time, but of the slowest rank" in docs
    assert "predicted run time (mean over ranks)" in docs


# MED-2 ---------------------------------------------------------------------------------------

def _below_runs(runs_at_target, predicted_at_target):
    pts = [[1], [2], [4], [8], [16]]
    runs = [[0.5, 0.5, 0.5], [0.8, 0.8, 0.8], [1.4, 1.4, 1.4], [2.0, 2.0, 2.0], runs_at_target]
    ds = Dataset(("n",), [_series("main", pts, runs)])
    # a linear model through (1, 0.5) that predicts `predicted_at_target` at n=16
    slope = (predicted_at_target - 0.5) / 15
    model = Model(("n",), 0.5 - slope, (Term(slope, (Factor("n", 1.0),)),))
    return build_report([], ds, [_fitted("main", model)])


def test_a_run_time_below_every_run_at_its_own_point_gets_a_caveat():
    """MED-2: 2.51 s where 3 runs measured 3.13 s to 3.35 s (1.25x: under the 1.5x caveat)."""
    report = _below_runs([3.13, 3.35, 3.2], 2.51)
    assert report.predicted_total == pytest.approx(2.51)
    said = [c for c in report.predicted_caveats if "every run measured at this very point" in c]
    assert said and said[0].startswith("below every run") and "3 runs" in said[0]
    assert "below every run measured at this very point" in render_markdown(report)


def test_a_run_time_above_every_run_gets_one_too():
    report = _below_runs([2.0, 2.1, 2.05], 2.6)
    assert any(c.startswith("above every run measured at this very point") for c in report.predicted_caveats)


def test_noise_just_outside_the_runs_gets_none():
    report = _below_runs([3.0, 3.1, 3.2], 2.95)  # 0.05 below the fastest run, whose spread is 0.2
    assert not any("very point" in c for c in report.predicted_caveats)


def test_the_docs_give_the_rule():
    docs = " ".join(DOCS.read_text().split())
    assert "below every run measured at this very point" in docs and "by more than their spread" in docs


# MED-3 ---------------------------------------------------------------------------------------

STRONG = Model(("n", "ranks"), 0.0, (Term(0.01, (Factor("n", 2.0),)),
                                     Term(-0.0035, (Factor("n", 2.0), Factor("ranks", 0.0, 1)))))
FLAT = Model(("n", "ranks"), 0.05)
FALLS = Model(("n", "ranks"), 1.2, (Term(-0.2, (Factor("n", 0.0, 1),)),))
AT = {"n": 32.0, "ranks": 4.0}


def test_a_strong_scaling_fit_that_rises_to_the_target_is_not_falling():
    """MED-3: `a*n^2 - b*n^2*log2(ranks)` grows with n at every measured point, yet was `falling`
    and ranked below 50 ms constants."""
    assert growth(STRONG) < (0, 0)  # its dominant term alone falls
    ranked = rank_models([_fitted("main->flat", FLAT), _fitted("main->work", STRONG), _fitted("main->falls", FALLS)],
                         ("n", "ranks"), AT, largest=AT)
    order = [r.fitted.callpath for r in ranked.rows]
    assert order == ["main->work", "main->flat", "main->falls"]
    work = ranked.rows[0]
    assert work.rank_growth() == (2.0, 0.0) and work.falls_beyond == growth(STRONG)
    assert ranked.rows[2].rank_growth() < (0, 0) and ranked.rows[2].falls_beyond is None


def test_beyond_the_largest_point_it_is_judged_by_the_prediction_there():
    # at ranks=16 the falling term wins: 0.01 - 0.0035*4 < 0, so it falls from ranks=4 to there
    ranked = rank_models([_fitted("main->work", STRONG)], ("n", "ranks"), {"n": 32.0, "ranks": 16.0}, largest=AT)
    assert ranked.rows[0].rank_growth() < (0, 0)
    ranked = rank_models([_fitted("main->work", STRONG)], ("n", "ranks"), {"n": 64.0, "ranks": 4.0}, largest=AT)
    assert ranked.rows[0].rank_growth() == (2.0, 0.0)


def test_a_speedup_that_rises_to_the_target_is_not_the_bad_kind():
    ranked = rank_models([_fitted("main", STRONG, "speedup"), _fitted("flat", FLAT, "speedup")],
                         ("n", "ranks"), AT, largest=AT)
    row = next(r for r in ranked.rows if r.fitted.callpath == "main")
    assert row.rank_growth() == (2.0, 0.0) and not scales_badly("speedup", row.rank_growth())
    assert [r.fitted.callpath for r in ranked.rows] == ["flat", "main"]  # the one that falls least last


def test_the_report_says_why_it_is_ranked_so():
    pts = [[n, r] for n in (2, 4, 8, 16, 32) for r in (1, 2, 4)]
    ds = Dataset(("n", "ranks"), [
        _series("main", pts, [[float(STRONG.evaluate(np.array([p]))[0])] for p in pts]),
        _series("main->flat", pts, [[0.05]] * len(pts)),
    ])
    report = build_report([], ds, [_fitted("main", STRONG), _fitted("main->flat", FLAT)])
    assert report.ranking[0].callpath == "main"
    assert report.ranking[0].growth == "deg 2 (up to the target; in the limit falling (deg 2, log^1))"
    docs = " ".join((ROOT / "docs" / "modeler.md").read_text().split())
    assert "rises up to the target is not taken as falling" in docs


# MED-4 ---------------------------------------------------------------------------------------

def test_every_numeric_cell_of_the_sortable_tables_has_a_sort_key(sweep):
    """MED-4: ranks, speedup, efficiencies, runs and the slowest rank sorted as text (1, 16, 2)."""
    groups, dataset, models = sweep
    html = render_html(build_report(groups, dataset, models))
    for table in re.findall(r'<table class="sortable".*?</table>', html, re.S):
        for cell in re.findall(r'<td class="num"[^>]*>', table):
            assert "data-sort=" in cell, cell
    assert "{numeric: true}" in (ROOT / "modeler" / "report" / "templates" / "report.js").read_text()


# LOW-1 ---------------------------------------------------------------------------------------

def test_report_o_onto_a_runs_launch_json_is_refused(tmp_path, capsys):
    for n in (1, 2, 4, 8, 16):
        write_rank_file(tmp_path / f"n{n}", run_id=f"run{n}", params={"n": n}, rank=0, world_size=1,
                        profile={(0,): (1, 10**6 * n + 1000, 1000)})
    launch = tmp_path / "n4" / "launch.json"
    launch.write_text('{"status": "ok"}')
    try:
        rc = cli.main(["report", str(tmp_path), "-o", str(launch), "-q"])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc != 0 and "one of the inputs" in err
    assert launch.read_text() == '{"status": "ok"}'


# LOW-3 ---------------------------------------------------------------------------------------

def test_without_a_top_level_region_the_page_says_why_there_is_no_run_time():
    pts = [[1], [2], [4], [8], [16]]
    ds = Dataset(("n",), [_series("main->block", pts, [[0.1 * p[0]] for p in pts])])
    report = build_report([], ds, [_fitted("main->block", Model(("n",), 0.0, (Term(0.1, (Factor("n", 1.0),)),)))])
    assert report.predicted_total is None and "--callpath" in report.predicted_note
    assert "No predicted run time: the regions selected (--callpath)" in render_markdown(report)


# LOW-4 ---------------------------------------------------------------------------------------

def test_children_that_add_up_above_the_run_time_get_a_caveat():
    """LOW-4: 6.79 s and 1.38 s inside a run time of 6.63 s, each under 1.2x it (the run time taken
    from its descendants' exclusive times, not from these children's models)."""
    pts = [[1], [2], [4], [8], [16]]
    ds = Dataset(("n",), [_series("main", pts, [[0.4 * p[0]] for p in pts])])
    report = build_report([], ds, [_fitted("main", Model(("n",), 0.0, (Term(0.4, (Factor("n", 1.0),)),)))])
    report.target = {"n": 32.0}  # beyond the measured points
    report.predicted_total = 6.63
    row = lambda cp, v, unsettled=False: SimpleNamespace(  # noqa: E731
        callpath=cp, predicted=v, time_figure=None, miss=None, from_parts=None, unsettled=unsettled,
        parts_unsettled=False)
    rows = [row("main", 6.63), row("main->fit", 6.79), row("main->seed", 1.38), row("main->fit->step", 6.0)]
    said = assemble._caveats(report, rows, ds.series)
    assert any(c.startswith("the regions directly inside it add up to 8.17 s (1.23x the run)") for c in said), said
    # one child alone under 1.2x and no sibling: none
    assert not any("directly inside" in c for c in assemble._caveats(report, rows[:2], ds.series))
    # a child whose growth the data do not settle is not counted (review 109 F3)
    rows[2] = row("main->seed", 1.38, unsettled=True)
    assert not any("directly inside" in c for c in assemble._caveats(report, rows, ds.series))


# LOW-6, LOW-8 --------------------------------------------------------------------------------

def test_the_docs_say_what_the_markdown_holds_and_the_tie_break():
    docs = " ".join(DOCS.read_text().split())
    assert "the same findings as text" not in docs and "The markdown form holds less than the page" in docs
    assert "a region's own growth before the same growth taken from its parts" in docs


# LOW-7 ---------------------------------------------------------------------------------------

def test_a_line_break_in_a_name_shows_as_in_the_call_tree():
    pts = [[1], [2], [4], [8], [16]]
    ds = Dataset(("n",), [_series("main->line\nbreak", pts, [[0.1 * p[0]] for p in pts])])
    report = build_report([], ds, [_fitted("main->line\nbreak", Model(("n",), 0.0, (Term(0.1, (Factor("n", 1.0),)),)))])
    md = render_markdown(report)
    assert "`main->line\\nbreak`" in md and "line break" not in md
