"""The report's inline SVG charts: what is drawn, where, and that user text is escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from modeler.report import svg

NS = "{http://www.w3.org/2000/svg}"


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))  # also proves the SVG is well-formed XML


def test_xy_chart_draws_every_point_with_its_error_bar():
    chart = svg.xy_chart(
        [svg.PlotSeries("measured", [1, 2, 4, 8], [1.0, 2.0, 4.0, 8.0], lo=[0.9, 2.0, 3.5, 7.0], hi=[1.1, 2.0, 4.5, 9.0]),
         svg.PlotSeries("model", [1, 8], [1.0, 8.0], "line", svg.PALETTE[3])],
        x_label="ranks", y_label="time", x_log=True,
    )
    root = parse(chart)
    circles = [c for c in root.iter(NS + "circle") if c.get("class") == "marker"]
    assert len(circles) == 4
    assert len([l for l in root.iter(NS + "line") if l.get("class") == "errbar"]) == 3  # no bar where lo == hi
    xs = [float(c.get("cx")) for c in circles]
    # a log axis spaces 1, 2, 4, 8 evenly
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert max(gaps) - min(gaps) < 0.5
    ys = [float(c.get("cy")) for c in circles]
    assert ys == sorted(ys, reverse=True)  # larger values are drawn higher
    assert root.find(NS + "path") is not None
    labels = [t.text for t in root.iter(NS + "text")]
    assert {"1", "2", "4", "8"} <= set(labels) and "ranks" in labels


def test_linear_axis_of_durations_starts_at_zero():
    root = parse(svg.xy_chart([svg.PlotSeries("t", [1, 2, 3], [130.0, 140.0, 150.0])], x_label="x", y_label="y"))
    labels = [t.text for t in root.iter(NS + "text")]
    assert "0" in labels


def test_text_from_user_code_is_escaped():
    evil = '<script>alert("x")</script>'
    chart = svg.xy_chart([svg.PlotSeries(evil, [1, 2], [1, 2]), svg.PlotSeries("b", [1, 2], [2, 3])],
                         x_label=evil, y_label="y", title=evil)
    assert "<script>" not in chart
    root = parse(chart)
    assert any(t.text == evil for t in root.iter(NS + "text"))
    heat = svg.heat_map([evil], ["a"], [[svg.HeatCell(1.0, evil, evil)]], row_label=evil, col_label="c")
    assert "<script>" not in heat
    parse(heat)


def test_heat_map_has_one_cell_per_value_and_outlines_measured_ones():
    cells = [[svg.HeatCell(float(r * 3 + c + 1), outline=(c == 0)) for c in range(3)] for r in range(2)]
    root = parse(svg.heat_map(["r0", "r1"], ["c0", "c1", "c2"], cells, row_label="rows", col_label="cols"))
    rects = list(root.iter(NS + "rect"))
    assert len(rects) == 6
    assert sum(1 for r in rects if r.get("stroke") == "#000") == 2
    fills = [r.get("fill") for r in rects]
    assert len(set(fills)) == 6  # six different values, six colours


def test_stacked_bars_stack_segments_and_mark_gpu_time():
    bars = [svg.BarStack("1", [("compute", 3.0), ("communication", 1.0), ("data wait", 0.0)], 2.0),
            svg.BarStack("2", [("compute", 2.0), ("communication", 2.0), ("data wait", 1.0)], None)]
    root = parse(svg.stacked_bars(bars, x_label="ranks", y_label="s", colors={"compute": "#00f", "communication": "#f00",
                                                                               "data wait": "#fa0"}, marker_name="GPU"))
    segs = [r for r in root.iter(NS + "rect") if r.get("class") == "bar"]
    assert len(segs) == 5  # 2 + 3: the zero-height segment is not drawn
    h = {r.find(NS + "title").text: float(r.get("height")) for r in segs}
    assert h["1: compute 3"] == pytest.approx(3 * h["1: communication 1"], rel=1e-2)
    assert len([l for l in root.iter(NS + "line") if l.get("class") == "bar-marker"]) == 2  # bar 1 and legend


@pytest.mark.parametrize(
    "seconds, text",
    [(0.0, "0"), (8.5e-7, "850 ns"), (1.23e-5, "12.3 µs"), (0.00456, "4.56 ms"), (0.00099999, "1 ms"), (0.9999, "1 s"), (1.234, "1.23 s"),
     (150.0, "2.5 min"), (36000.0, "10 h"), (float("nan"), "n/a")],
)
def test_format_seconds(seconds, text):
    assert svg.format_seconds(seconds) == text


def test_ticks_are_round_numbers_inside_the_range():
    ticks = svg._linear_ticks(0.0, 9.3)
    assert ticks[0] == 0 and ticks[-1] <= 9.3 and all(re.fullmatch(r"\d+(\.0)?", str(t)) for t in ticks)
    # base 2 for ranks and sizes: every power of two while there are at most 8, every other one past that
    assert svg._log_ticks(1, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert svg._log_ticks(1, 1024) == [1, 4, 16, 64, 256, 1024]


def test_narrow_heat_map_labels_every_kth_column():
    cols = [str(i) for i in range(64)]
    cells = [[svg.HeatCell(float(i + 1)) for i in range(64)]]
    root = parse(svg.heat_map(["r"], cols, cells, row_label="", col_label="rank", cell_w=10))
    labels = [t.text for t in root.iter(NS + "text") if t.text and t.text.isdigit()]
    assert labels[:3] == ["0", "3", "6"] and len(labels) == 22
    assert len(list(root.iter(NS + "rect"))) == 64
