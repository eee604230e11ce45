"""Review 86's leftovers: `--rank` of a rank that recorded no profile (LOW-2), and the rank and
call-tree views saying which ranks they leave out; axis labels drawn on top of each other and hour
ticks in e-notation (LOW-5)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from modeler.errors import InputError
from modeler.report import svg
from modeler.report.assemble import ReportOptions, build_report
from modeler.report.findings import value_formatter
from modeler.report.render import render_html, render_markdown
from .test_report_synth import hand_models, load_sweep, write_sweep

RUN = "p3-n16-r1"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = write_sweep(tmp_path_factory.mktemp("review86b") / "runs", failed=False)
    groups, dataset = load_sweep(root)
    return groups, dataset, hand_models(dataset)


def _without_profiles(groups, run_id: str, ranks: set[int]):
    """`groups` with the ranks `ranks` of run `run_id` profiled empty (they timed no region)."""
    out = []
    for g in groups:
        if g.run_id == run_id:
            g = dataclasses.replace(g, ranks=[dataclasses.replace(r, profile={}) if r.rank in ranks else r
                                              for r in g.ranks])
        out.append(g)
    return out


def test_rank_of_an_unprofiled_rank_is_refused_with_the_ranks_that_have_one(sweep):
    groups, dataset, models = sweep
    groups = _without_profiles(groups, RUN, {0})
    with pytest.raises(InputError, match=re.escape(
            f"--rank: rank 0 of run {RUN} recorded no profile (it timed no region); ranks with a profile: 1, 2")):
        build_report(groups, dataset, models, ReportOptions(run_id=RUN, rank=0))


def test_an_unknown_rank_lists_the_ranks_with_a_profile(sweep):
    groups, dataset, models = sweep
    groups = _without_profiles(groups, RUN, {0})
    with pytest.raises(InputError, match=re.escape(f"--rank: run {RUN} has no rank 7; it has 0-2 "
                                                   "(ranks with a profile: 1, 2)")):
        build_report(groups, dataset, models, ReportOptions(run_id=RUN, rank=7))


def test_the_rank_and_tree_views_say_which_ranks_they_leave_out(sweep):
    groups, dataset, models = sweep
    groups = _without_profiles(groups, RUN, {0})
    report = build_report(groups, dataset, models, ReportOptions(run_id=RUN))
    assert report.tree_rank == 1  # the first rank with a profile
    assert [r["times"].size for r in report.imbalance][:1] == [2]
    sentence = "Rank 0 of 3 recorded no profile (timed no region) and is not shown."
    assert render_html(report).count(sentence) == 2  # the rank view and the call tree
    md = render_markdown(report)
    assert md.count(sentence) == 2


def test_one_profiled_rank_is_not_called_a_single_rank(sweep):
    groups, dataset, models = sweep
    groups = _without_profiles(groups, RUN, {0, 2})
    report = build_report(groups, dataset, models, ReportOptions(run_id=RUN))
    assert not report.imbalance
    md = render_markdown(report)
    assert "has a single rank" not in md
    assert "has 1 rank with a profile; ranks 0, 2 of 3 recorded no profile" in md


def test_a_run_where_no_rank_recorded_a_profile_says_so(sweep):
    groups, dataset, models = sweep
    groups = _without_profiles(groups, RUN, {0, 1, 2})
    report = build_report(groups, dataset, models, ReportOptions(run_id=RUN))
    assert not report.tree
    assert f"Run <code>{RUN}</code>: no rank recorded a profile." in render_html(report)
    assert "No completed run to show" not in render_markdown(report)


# LOW-5: axis ticks

def _labels(svg_text: str, y: str | None = None) -> list[tuple[float, str]]:
    return [(float(x), t) for x, yy, t in re.findall(r'<text x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg_text)
            if y is None or yy == y]


def test_close_measured_values_do_not_draw_their_labels_on_top_of_each_other():
    xs = [1024, 1025, 2048, 6400.5, 16384]
    chart = str(svg.xy_chart([svg.PlotSeries("runs", xs, [1, 2, 3, 4, 5])], x_label="n", y_label="time",
                             x_log=True, x_ticks=xs))
    x_labels = _labels(chart, y="250")  # the x tick labels' row: height 280 - bottom margin 44 + 14
    texts = [t for _, t in x_labels]
    assert "16384" in texts or "16.4k" in texts  # the last is always drawn
    assert not ({"1024", "1025"} <= set(texts))
    pos = sorted(x for x, _ in x_labels)
    widths = {x: len(t) * 6.5 for x, t in x_labels}
    for a, b in zip(pos, pos[1:]):
        assert b - a >= (widths[a] + widths[b]) / 2, (a, b)
    assert chart.count('class="grid" x1=') >= len(xs)  # every measured value keeps its grid line


def test_labels_far_enough_apart_are_all_drawn():
    xs = [1, 2, 4, 8, 16]
    chart = str(svg.xy_chart([svg.PlotSeries("runs", xs, xs)], x_label="n", y_label="t", x_log=True, x_ticks=xs))
    assert [t for _, t in _labels(chart, y="250")] == ["1", "2", "4", "8", "16"]


def test_an_axis_in_hours_has_round_ticks_and_no_exponent():
    hours = svg.SecondsFormat()
    ticks, labels = hours.axis(0.0, 5.0e6)  # up to 1389 h
    assert labels == ["0", "500 h", "1000 h"]
    assert ticks == pytest.approx([0.0, 500 * 3600.0, 1000 * 3600.0])
    chart = str(svg.xy_chart([svg.PlotSeries("runs", [1, 2, 3], [1e6, 3e6, 5e6])], x_label="n", y_label="time",
                             y_format=hours))
    assert "e+" not in chart.replace("1e6", "")
    assert ">500 h<" in chart and ">1000 h<" in chart


def test_durations_of_a_thousand_hours_and_more_are_written_without_an_exponent():
    assert svg.format_seconds(1389 * 3600) == "1389 h"
    assert svg.format_seconds(-2.5e7) == "-6944 h"
    assert svg.format_seconds(7200) == "2 h" and svg.format_seconds(0.0009999) == "1 ms"


def test_a_nanosecond_metric_axis_is_labelled_in_one_unit():
    ns = value_formatter("time", "ns")
    ticks, labels = ns.axis(0.0, 2.5e9)
    assert labels == ["0", "0.5 s", "1 s", "1.5 s", "2 s", "2.5 s"] and ticks[2] == pytest.approx(1e9)
    assert ns(1.5e9) == "1.5 s"


# LOW-9: a failed run named once, --hold at an unmeasured value, -o - for the page, dict headers

@pytest.fixture(scope="module")
def sweep_with_a_failed_run(tmp_path_factory):
    root = write_sweep(tmp_path_factory.mktemp("review86c") / "runs", failed=True)
    groups, dataset = load_sweep(root)
    return groups, dataset, hand_models(dataset)


def test_a_run_left_out_is_listed_once_not_again_among_the_warnings(sweep_with_a_failed_run):
    groups, dataset, models = sweep_with_a_failed_run
    assert any(w.startswith("run p2-n8-broken left out (") for w in dataset.warnings)  # what the readers say
    report = build_report(groups, dataset, models)
    assert [run for run, _ in report.failed] == ["p2-n8-broken"]
    assert not [w for w in report.warnings if "p2-n8-broken" in w]
    md = render_markdown(report)
    assert len([line for line in md.splitlines() if "p2-n8-broken" in line]) == 1
    assert "**Runs left out (1):**" in md


def test_a_hold_value_no_run_measured_is_a_warning(sweep):
    groups, dataset, models = sweep
    report = build_report(groups, dataset, models, ReportOptions(hold={"batch": 99}))
    assert report.warnings[0] == ("--hold batch=99: batch was not measured there (measured: 8, 16, 32, 64, 128); "
                                  "each chart holds batch where it has the most points, as its title says")
    plain = build_report(groups, dataset, models, ReportOptions(hold={"batch": 64}))
    assert not [w for w in plain.warnings if w.startswith("--hold")]


def test_report_o_dash_writes_the_page_to_stdout(tmp_path, capsys, monkeypatch):
    from modeler import cli
    from .modeler_synthetic_runs import write_rank_file

    for n in (1, 2, 4, 8, 16):
        write_rank_file(tmp_path / "runs" / f"n{n}", run_id=f"run{n}", params={"n": n}, rank=0, world_size=1,
                        profile={(0,): (1, 10**6 * n + 1000, 1000)},
                        header={"throttle": {"calls": 100000, "ns": 10000}})
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "runs", "-o", "-", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and not (tmp_path / "-").exists()
    assert "calls=100000, ns=10000" in out and "{&#39;calls&#39;" not in out and "{'calls'" not in out


# LOW-7, the page's side: a line break in a region name

def test_a_line_break_in_a_name_shows_as_backslash_n_in_the_page_too():
    import numpy as np

    from modeler.dataset import Dataset, Series
    from modeler.model import Factor, FittedModel, Model, Term

    name = "main->line\nbreak"
    pts = [[1], [2], [4], [8], [16]]
    ds = Dataset(("n",), [Series(name, "time", np.array(pts, dtype=float),
                                 tuple(np.array([0.1 * p[0]]) for p in pts), "s")])
    fm = FittedModel(name, "time", Model(("n",), 0.0, (Term(0.1, (Factor("n", 1.0),)),)), 0.0, 0.0, 1.0, None, 5)
    html = render_html(build_report([], ds, [fm]))
    assert "line\\nbreak" in html
    assert "line\nbreak" not in html  # a raw line break collapses to a space in HTML
