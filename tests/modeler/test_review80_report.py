"""Review 80 LOW-2 to LOW-5: what the report says of its run time's caveats, of the run its rank and
call-tree views show, of the largest measured value, and of the target in the per-parameter charts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.model import Factor, FittedModel, Model, Term
from modeler.report import assemble, svg
from modeler.report.assemble import ReportOptions, build_report
from modeler.report.render import render_html, render_markdown
from .test_report_synth import hand_models, load_sweep, write_sweep

DOCS = Path(__file__).resolve().parents[2] / "docs" / "report.md"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = write_sweep(tmp_path_factory.mktemp("review80") / "runs", failed=False)
    groups, dataset = load_sweep(root)
    return groups, dataset, hand_models(dataset)


def test_the_docs_say_of_the_run_times_caveats_what_they_say():
    """LOW-2: docs/report.md said each caveat "says that the figure is not to be acted on"; none did."""
    docs = " ".join(DOCS.read_text().split())
    caveats = re.sub(r'"\s*\n\s*f?"', "", inspect.getsource(assemble._caveats))  # strings split over lines joined
    assert ("not to be acted on" in docs) == ("acted on" in caveats)
    # the examples the docs quote are what the caveats say
    for said in ("one of them extrapolates badly", "a region inside it, is predicted at",
                 "the run's model misses a growth of its parts", "was measured at this very point",
                 "less than its parts' models add up to, which an inclusive time cannot be"):
        assert said in docs and said in caveats


def test_the_rank_and_call_tree_views_name_the_runs_point(sweep):
    """LOW-3: `Run d0354876dc66, rank 0` said nothing of which point and repetition it was."""
    groups, dataset, models = sweep
    report = build_report(groups, dataset, models, ReportOptions(run_id="p3-n16-r1"))
    assert report.run_point == "ranks=3, batch=16, repetition 1"
    md = render_markdown(report)
    assert "Run `p3-n16-r1` (ranks=3, batch=16, repetition 1)." in md  # the rank view
    assert "Run `p3-n16-r1` (ranks=3, batch=16, repetition 1), rank 0:" in md  # the call tree
    html = render_html(report)
    assert "Run <code>p3-n16-r1</code> (ranks=3, batch=16, repetition 1) (choose another" in html
    assert "Run <code>p3-n16-r1</code> (ranks=3, batch=16, repetition 1), rank 0" in html


def test_a_single_rank_run_is_named_by_its_point_too(sweep):
    groups, dataset, models = sweep
    report = build_report(groups, dataset, models, ReportOptions(run_id="p1-n8-r0"))
    assert "Run `p1-n8-r0` (ranks=1, batch=8, repetition 0) has a single rank." in render_markdown(report)


def _series(cp: str, points, runs) -> Series:
    return Series(cp, "time", np.array(points, dtype=float), tuple(np.array(r, dtype=float) for r in runs), "s")


def _fitted(cp: str, model: Model) -> FittedModel:
    return FittedModel(cp, "time", model, smape=5.0, rss=0.1, ar2=0.9, cv_smape=None, points=5)


def test_the_largest_measured_value_is_the_largest_median_not_the_slowest_run():
    """LOW-4: one run of 2.33 s at another point, under contention, was shown as the largest
    measured where the charts showed the medians (1.29 s at the largest point)."""
    runs = [[0.1, 0.1, 0.1], [0.2, 0.2, 0.2], [0.4, 0.4, 0.4], [1.22, 1.2, 2.33], [1.29, 1.15, 1.51]]
    ds = Dataset(("n",), [_series("main", [[1], [2], [4], [8], [16]], runs)])
    report = build_report([], ds, [_fitted("main", Model(("n",), 0.0, (Term(0.08, (Factor("n", 1.0),)),)))])
    assert report.ranking[0].measured_max == pytest.approx(1.29)
    html = render_html(report)
    assert 'data-sort="1.29"' in html and 'data-sort="2.33"' not in html  # (2.33 s is in a chart's tooltip)
    assert "largest median of a measured point" in html


def _grid() -> tuple[Dataset, FittedModel]:
    points = [[n, m] for n in (2, 4, 8, 16) for m in (2, 4, 8, 16)]
    model = Model(("n", "m"), 0.01, (Term(0.001, (Factor("n", 1.0), Factor("m", 2.0))),))
    runs = [[float(model.evaluate(np.array([pt]))[0])] * 2 for pt in points]
    return Dataset(("n", "m"), [_series("main", points, runs)]), _fitted("main", model)


def _charts(monkeypatch, target) -> dict[str, list[svg.PlotSeries]]:
    drawn: dict[str, list[svg.PlotSeries]] = {}
    real = svg.xy_chart

    def capture(series, **kw):
        drawn[kw["title"]] = list(series)
        return real(series, **kw)

    monkeypatch.setattr(svg, "xy_chart", capture)
    ds, fm = _grid()
    build_report([], ds, [fm], ReportOptions(target=target))
    return drawn


def test_the_chart_against_a_parameter_draws_the_model_at_the_targets_other_values(monkeypatch):
    """LOW-5: the chart `against n (m=16)` marked the target n=64 on a curve held at m=16, a quarter
    of the prediction at the target (m=32); a dashed curve at m=32 passes through it."""
    drawn = _charts(monkeypatch, {"n": 64.0, "m": 32.0})
    ds, fm = _grid()
    at_target = float(fm.predict({"n": [64.0], "m": [32.0]})[0])
    curve = next(s for s in drawn["against n (m=16)"] if s.name == "model at m=32")
    assert curve.style == "dashed"
    xs, ys = np.asarray(curve.xs, dtype=float), np.asarray(curve.ys, dtype=float)
    assert ys[np.flatnonzero(xs == 64.0)[0]] == pytest.approx(at_target)
    other = next(s for s in drawn["against m (n=16)"] if s.name == "model at n=64")
    assert float(np.asarray(other.ys)[np.flatnonzero(np.asarray(other.xs) == 32.0)[0]]) == pytest.approx(at_target)


def test_no_second_curve_where_the_target_holds_the_other_parameters_at_the_charts_values(monkeypatch):
    drawn = _charts(monkeypatch, {"n": 64.0, "m": 16.0})
    assert not [s for s in drawn["against n (m=16)"] if s.name.startswith("model at")]
    assert [s.name for s in drawn["against m (n=16)"] if s.name.startswith("model at")] == ["model at n=64"]


def test_the_docs_name_the_second_curve():
    docs = " ".join(DOCS.read_text().split())
    assert "`model at width=32`" in docs
