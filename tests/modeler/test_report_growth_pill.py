"""Review 69 (left open): the report's red growth pill and its "worst growth" card followed the
rule for times under every metric: a falling speedup or efficiency, the bad kind, had the plain
pill, a speedup rising linearly the red one, and the card named a rising speedup as the worst."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from modeler import cli
from modeler.report.findings import scales_badly


def _inputs(path: Path, metric: str, series: dict) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for n in [2, 4, 8, 16, 32]:
            for callpath, fn in series.items():
                v = fn(n)
                f.write(json.dumps({"params": {"n": n}, "callpath": callpath, "metric": metric,
                                    "value": [v * 0.99, v, v * 1.01]}) + "\n")
    return path


def _pills(html: str) -> dict[str, bool]:
    """Growth label -> whether its pill is red, over the whole page (labels agree everywhere)."""
    out: dict[str, bool] = {}
    for cls, label in re.findall(r'<span class="growth( bad)?">([^<]*)</span>', html):
        assert out.setdefault(label, bool(cls)) == bool(cls), label  # one label, one colour
    return out


def _report(tmp_path: Path, source: Path, metric: str) -> str:
    out = tmp_path / f"{metric}.html"
    assert cli.main(["report", str(source), "--metric", metric, "--min-share", "0", "-o", str(out), "-q"]) == 0
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("metric", ["speedup", "parallel_efficiency"])
def test_a_falling_speedup_is_the_red_pill_and_the_worst(tmp_path, metric):
    source = _inputs(tmp_path / "in.jsonl", metric, {
        "main": lambda n: 1.1 * n, "main->shrinks": lambda n: 3.0 - 0.5 * math.log2(n), "main->flat": lambda n: 2.0})
    html = _report(tmp_path, source, metric)
    pills = _pills(html)
    assert pills["falling (log^1)"] is True
    assert pills["deg 1"] is False  # a speedup growing linearly is the good kind
    assert pills["const"] is False
    assert re.search(r'worst growth: <a class="region-link" href="#region-\d+" title="main-&gt;shrinks">shrinks<', html)


def test_under_time_a_linear_growth_is_red_and_a_fall_is_not(tmp_path):
    source = _inputs(tmp_path / "in.jsonl", "time", {
        "main": lambda n: 1.0 + 0.1 * n + 3.0 - 0.5 * math.log2(n), "main->grows": lambda n: 1.0 + 0.1 * n,
        "main->shrinks": lambda n: 3.0 - 0.5 * math.log2(n)})
    pills = _pills(_report(tmp_path, source, "time"))
    assert pills["deg 1"] is True and pills["falling (log^1)"] is False


def test_where_no_speedup_falls_the_card_says_so(tmp_path):
    source = _inputs(tmp_path / "in.jsonl", "speedup", {"main": lambda n: 1.1 * n, "main->a": lambda n: 0.9 * n})
    html = _report(tmp_path, source, "speedup")
    assert "worst growth" not in html
    assert "no region's model falls with the parameters" in html


def test_scales_badly_follows_the_metric():
    assert scales_badly("speedup", (-0.0, -1.0)) and not scales_badly("speedup", (1.0, 0.0))
    assert scales_badly("time", (1.0, 0.0)) and not scales_badly("time", (0.5, 1.0))
    assert not scales_badly("time", (-1.0, 0.0))


def _card(html: str) -> str:
    return html.split("worst growth:", 1)[1].split("</div></div>", 1)[0]


def test_the_card_says_which_doubtful_rows_scale_worse_and_names_regions_apart():
    """Review 73: the card named `BasicBlock.forward` (deg 2.25, the evaluation's) while 7 doubtful
    rows above it grew as deg 3, the training's `BasicBlock.forward` among them, and said nothing."""
    from modeler.report.findings import RankingRow, Report
    from modeler.report.render import render_html

    def row(cp: str, growth: float, doubtful: str | None, i: int) -> RankingRow:
        return RankingRow(cp, "", f"deg {growth:g}", (growth, 0.0), 1.0, None, 0.9, 12, 1.0, 1.0, None, None, 1.0,
                          (), f"region-{i}", doubtful=doubtful)

    train = "main->fit->train_step->ResNet.forward->BasicBlock.forward"
    ev = "main->fit->evaluate->ResNet.forward->BasicBlock.forward"
    rows = [row("main->fit->train_step", 3.0, "misses its own measurements", 0),
            row(train, 3.0, "misses its own measurements", 1), row(ev, 2.25, None, 2), row("main", 1.0, None, 3)]
    report = Report(title="t", parameters=("width",), metric="time", unit_format=str, target={"width": 64.0},
                    hold={}, ranking=rows, regions=[])
    assert report.headline().callpath == ev
    assert [r.callpath for r in report.passed_over()] == ["main->fit->train_step", train]
    assert report.short_name(ev) == "evaluate->ResNet.forward->BasicBlock.forward"
    assert report.short_name("main") == "main"
    card = _card(render_html(report))
    assert ">evaluate-&gt;ResNet.forward-&gt;BasicBlock.forward</a>" in card
    assert "2 doubtful rows scale worse, first" in card and ">train_step</a> (deg 3)" in card
    # nothing passed over: no such line
    report.ranking = [row(ev, 2.25, None, 0), row(train, 1.0, "a doubt", 1)]
    assert report.passed_over() == [] and "doubtful row" not in _card(render_html(report))
