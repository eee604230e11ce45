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
    assert re.search(r'worst growth: <a class="region-link" href="#region-\d+">shrinks', html)


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
