"""Review 71 F4: the report printed parameter values with 3 significant digits.

1024 and 1025 both read `1.02e+03`, 1600 read `1.6e+03`, 16384 and 16400 both `16.4k`: in the
experiment table, the Training table's row labels, tooltips, heat-map labels and held values, in
the HTML and the markdown. Parameter values (measured coordinates, held values, `--at` targets)
now print exactly as measured (`svg.param_text`); axis ticks stay short (`svg.tick_labels`), but
two different values on one axis never share a label.
"""

from __future__ import annotations

import html as _html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from modeler import cli
from modeler.report import svg

from .modeler_synthetic_runs import write_sweep

CLOSE = (1000, 1024, 1025, 1600, 2048, 4096)


def _extrap(path: Path, points: list[dict], fn) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for params in points:
            v = fn(**params)
            f.write(json.dumps({"params": params, "callpath": "main", "metric": "time",
                                "value": [v * 0.99, v, v * 1.01]}) + "\n")
    return path


def _report(inputs: Path, out: Path, *extra: str) -> str:
    fmt = ["--format", "markdown"] if out.suffix == ".md" else []
    assert cli.main(["report", str(inputs), "-o", str(out), "-q", *fmt, *extra]) == 0
    return out.read_text(encoding="utf-8")


def _x_tick_labels(page: str) -> list[list[str]]:
    """The x-axis tick labels of each x/y chart of the page (a vertical grid line, then its label)."""
    out = []
    for chart in re.findall(r"<svg class=\"chart\".*?</svg>", page, re.S):
        labels = re.findall(r'<line class="grid" x1="([\d.]+)" x2="\1" [^>]*/><text [^>]*>([^<]*)</text>', chart)
        if labels:
            out.append([_html.unescape(t) for _, t in labels])
    return out


def _tips(page: str) -> list[str]:
    return [_html.unescape(t) for t in re.findall(r"<title>([^<]*)</title>", page)]


# --- the formatting itself ----------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    (1024, "1024"), (1025, "1025"), (1024.0, "1024"), (1600.0, "1600"), (16384, "16384"), (16400.0, "16400"),
    (1000, "1000"), (np.int64(4096), "4096"), (np.float64(2048.0), "2048"), (0.1, "0.1"), (2.5e-05, "2.5e-05"),
    (6400.5, "6400.5"), (1234567.1234567, "1234567.1234567"), (-3.0, "-3"), (0, "0"), (1e20, "1e+20"),
])
def test_a_parameter_value_prints_exactly(value, text):
    assert svg.param_text(value) == text


@pytest.mark.parametrize("value", [1 / 3, 0.30000000000000004, 1e-300, 123456789.123, 2.0**60 + 2.0**8, 1e16 + 2])
def test_a_parameter_value_reads_back_as_the_same_float(value):
    assert float(svg.param_text(value)) == value


@pytest.mark.parametrize("values", [
    [1000, 1024, 1025, 2048, 4096],
    [16384, 16400, 32768],
    [1_048_576, 1_048_577, 2_097_152],
    [0.001, 0.0011, 0.00111],
    [999.5, 1000, 1000.25],
    [1, 1.0001, 2],
])
def test_tick_labels_of_different_values_differ(values):
    labels = svg.tick_labels(values)
    assert len(set(labels)) == len(values), labels


def test_tick_labels_stay_short_where_that_is_unambiguous():
    assert svg.tick_labels([1, 2, 4, 8]) == ["1", "2", "4", "8"]
    assert svg.tick_labels([1024, 2048, 4096]) == ["1024", "2048", "4096"]
    assert svg.tick_labels([1600, 3200]) == ["1600", "3200"]
    assert svg.tick_labels([16384, 32768]) == ["16.4k", "32.8k"]
    assert svg.tick_labels([16384, 16400]) == ["16.38k", "16.4k"]


def test_a_chart_axis_never_gives_two_values_one_label():
    chart = svg.xy_chart([svg.PlotSeries("m", [16384, 16400, 16416], [1.0, 2.0, 3.0])],
                         x_label="n", y_label="t", x_ticks=[16384, 16400, 16416])
    (labels,) = _x_tick_labels(str(chart))
    assert len(set(labels)) == 3, labels
    # the default tooltip of a point names its x exactly
    assert "m: x=16400, y=2" in _tips(str(chart))


def test_a_bar_chart_labels_its_bars_exactly_and_stays_readable():
    bars = [svg.BarStack(svg.param_text(v), [("a", 1.0)], value=v) for v in (1024, 1025)]
    page = str(svg.stacked_bars(bars, x_label="n", y_label="t", colors={"a": "#000"}))
    assert ">1024</text>" in page and ">1025</text>" in page
    many = [svg.BarStack(svg.param_text(v), [("a", 1.0)], value=v) for v in np.arange(20) + 1000.123456789]
    page = str(svg.stacked_bars(many, x_label="n", y_label="t", colors={"a": "#000"}))
    # too narrow for the full text: short axis labels, all different; the tooltips keep the value
    axis = re.findall(r'<text x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]*)</text>', page)
    assert axis == [str(1000 + i) for i in range(20)]
    assert "1007.123456789: a 1" in _tips(page)


# --- the review's reproduction: Extra-P points n = 1000, 1024, 1025, 1600, 2048, 4096 ----------------

@pytest.fixture(scope="module")
def close(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("close")
    return _extrap(root / "close.jsonl", [{"n": n} for n in CLOSE], lambda n: 1e-6 * n * n)


def test_markdown_lists_close_parameter_values_apart(close, tmp_path):
    md = _report(close, tmp_path / "r.md", "--at", "n=1234567.1234567")
    assert "| parameter n | 1000, 1024, 1025, 1600, 2048, 4096 |" in md
    assert "n=1234567.1234567" in md  # the target, exactly
    for old in ("1.02e+03", "1.6e+03", "1e+03", "2.05e+03", "4.1e+03"):
        assert old not in md


def test_html_lists_close_parameter_values_apart(close, tmp_path):
    page = _report(close, tmp_path / "r.html", "--at", "n=1234567.1234567")
    for old in ("1.02e+03", "1.6e+03", "2.05e+03", "4.1e+03"):
        assert old not in page
    tips = _tips(page)
    for n in CLOSE:
        assert any(t.startswith(f"n={n}: median ") for t in tips), n
    assert "target n=1234567.1234567" in page
    charts = _x_tick_labels(page)
    assert charts
    for labels in charts:
        assert len(set(labels)) == len(labels), labels


# --- runs: the Training table, its charts and the scaling view ----------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    write_sweep(root, {"n": [1000, 1024, 1025, 1600, 2048], "ranks": [1, 2]}, repetitions=2,
                time_s=lambda p, rank, rep: 1e-6 * p["n"] * (1 + 0.3 / p["ranks"]) * (1 + 0.01 * rep))
    return root


def test_markdown_training_and_scaling_tables_name_each_configuration_exactly(runs, tmp_path):
    md = _report(runs, tmp_path / "r.md", "--hold", "n=1025")
    rows = [ln for ln in md.splitlines() if "`train_epoch`" in ln and ln.startswith("| ")]
    firsts = {tuple(c.strip() for c in ln.split("|")[1:3]) for ln in rows}
    assert {f for f in firsts} >= {(str(n), str(r)) for n in (1000, 1024, 1025, 1600, 2048) for r in (1, 2)}, firsts
    assert "### Scaling with ranks (n=1025)" in md
    assert "| parameter n | 1000, 1024, 1025, 1600, 2048 |" in md
    assert "1.02e+03" not in md and "1.6e+03" not in md


def test_html_training_view_names_each_configuration_exactly(runs, tmp_path):
    page = _report(runs, tmp_path / "r.html", "--hold", "n=1025")
    for old in ("1.02e+03", "1.6e+03", "2.05e+03"):
        assert old not in page
    for n in (1000, 1024, 1025, 1600, 2048):
        assert f">{n}</td>" in page, n  # the Training table's row label
    assert "(n=1025)" in page  # held values in the chart titles and the scaling view
    assert "with n=1025." in re.sub(r"\s+", " ", page)
    # the split bars along n: one label per configuration, all different
    split = next(c for c in re.findall(r"<svg class=\"chart\".*?</svg>", page, re.S) if "split of a mean step" in c
                 and "against n" in c)
    for n in (1024, 1025, 1600):
        assert f">{n}</text>" in split
    for labels in _x_tick_labels(page):
        assert len(set(labels)) == len(labels), labels


# --- two parameters: the heat map and the held values of the line charts ------------------------

def test_heat_map_and_held_values_name_close_values_apart(tmp_path):
    xs, ys = (16384, 16400, 16416, 32768, 65536), (1, 2, 4, 8, 16)
    data = _extrap(tmp_path / "two.jsonl", [{"x": x, "y": y} for x in xs for y in ys], lambda x, y: 1e-6 * x * y)
    page = _report(data, tmp_path / "r.html", "--hold", "x=16400", "--at", "x=131072.5,y=16")
    heat = next(c for c in re.findall(r"<svg.*?</svg>", page, re.S) if "model over x x y" in c)
    assert "16.4k" not in heat
    for x in xs + (131072.5,):
        assert f">{x}</text>" in heat, x  # column labels
    tips = _tips(heat)
    assert any(t.startswith("x=16384, y=1: measured") for t in tips)
    assert any(t.startswith("x=16400, y=1: measured") for t in tips)
    assert "against y (x=16400)" in page
    assert "held at x=16400" in re.sub(r"\s+", " ", page)
    assert "target x=131072.5, y=16" in page
    for labels in _x_tick_labels(page):
        assert len(set(labels)) == len(labels), labels
    # a long exact value widens the map's cells rather than dropping column labels
    page = _report(data, tmp_path / "r2.html", "--at", "x=65536.123456789,y=16")
    heat = next(c for c in re.findall(r"<svg.*?</svg>", page, re.S) if "model over x x y" in c)
    for x in xs + (65536.123456789,):
        assert f">{x}</text>" in heat, x
    md = _report(data, tmp_path / "r.md", "--hold", "x=16400")
    assert "| parameter x | 16384, 16400, 16416, 32768, 65536 |" in md
