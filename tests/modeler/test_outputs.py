"""The four renderers of a ranking: table, JSON, Markdown, CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest

from modeler.errors import InputError
from modeler.model import Factor, FittedModel, Model, Term
from modeler.outputs import FORMATS, render
from modeler.outputs.table import shorten_callpath
from modeler.ranking import rank_models

PARAMS = ("ranks", "batch")


def ranking(warnings=()):
    quad = Model(PARAMS, 0.5, (Term(0.25, (Factor("ranks", 1.5, 1), Factor("batch", 1.0))),))
    lin = Model(PARAMS, 2.0, (Term(3.0, (Factor("batch", 1.0),)),))
    models = [
        FittedModel("main->train|odd", "time", lin, smape=1.25, rss=0.5, ar2=0.97, cv_smape=None, points=25),
        FittedModel("main->train->step", "time", quad, smape=0.5, rss=0.01, ar2=0.999, cv_smape=0.75, points=25,
                    interval=(0.9, 1.1), warnings=("fewer than 5 values of parameter batch",)),
        FittedModel("main->nan", "visits", Model(PARAMS, float("nan")), smape=0.0, rss=0.0, ar2=1.0, cv_smape=0.0, points=3),
    ]
    units = {("main->train->step", "time"): "s", ("main->nan", "visits"): ""}
    return rank_models(models, PARAMS, {"ranks": 4.0, "batch": 8.0}, warnings=warnings, units=units)


def test_json_is_one_object_with_the_documented_fields():
    doc = json.loads(render(ranking(["a warning"]), "json"))
    assert doc["parameters"] == ["ranks", "batch"]
    assert doc["at"] == {"ranks": 4.0, "batch": 8.0}
    assert doc["warnings"] == ["a warning"]
    first = doc["models"][0]
    assert first["callpath"] == "main->train->step" and first["metric"] == "time"
    for key in ("model", "constant", "terms", "smape", "rss", "ar2", "points", "cv_smape", "prediction"):
        assert key in first
    assert first["terms"] == [{"coefficient": 0.25, "factors": [
        {"parameter": "ranks", "exponent": 1.5, "log_exponent": 1},
        {"parameter": "batch", "exponent": 1.0, "log_exponent": 0}]}]
    assert first["prediction"] == pytest.approx(0.5 + 0.25 * 4**1.5 * 2 * 8)
    assert first["prediction_interval"] == pytest.approx([0.9 * first["prediction"], 1.1 * first["prediction"]])
    assert first["warnings"] == ["fewer than 5 values of parameter batch"]
    assert first["unit"] == "s" and doc["models"][1]["unit"] == ""
    # NaN is not JSON: it comes out as null
    nan = [m for m in doc["models"] if m["callpath"] == "main->nan"][0]
    assert nan["constant"] is None and nan["prediction"] is None


def test_csv_round_trips_numbers():
    rows = list(csv.DictReader(io.StringIO(render(ranking(), "csv"))))
    assert [r["callpath"] for r in rows] == ["main->train->step", "main->train|odd", "main->nan"]
    assert float(rows[0]["prediction"]) == pytest.approx(0.5 + 0.25 * 8 * 2 * 8)
    assert float(rows[0]["growth_exponent"]) == 2.5
    assert rows[1]["cv_smape"] == "" and rows[2]["prediction"] == ""
    assert float(rows[1]["constant"]) == 2.0
    assert [r["unit"] for r in rows] == ["s", "", ""]


def test_markdown_table_escapes_pipes():
    text = render(ranking(["w|1"]), "markdown")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 3
    assert "main->train\\|odd" in text
    header_cells = table[0].count(" | ")
    assert all(line.replace("\\|", "").count(" | ") == header_cells for line in table[2:])
    assert "- w\\|1" in text


def test_table_rows_in_ranking_order_and_aligned():
    text = render(ranking(), "table")
    lines = text.splitlines()
    assert "ranks=4, batch=8" in lines[0]
    body = lines[3:]
    assert [l.split()[1] for l in body] == ["main->train->step", "main->train|odd", "main->nan"]
    # the model column starts at the same offset on every line
    offsets = {l.index("0.5 + 0.25") for l in body[:1]} | {lines[1].index("model")}
    assert len(offsets) == 1
    assert "[" in body[0] and "deg 2.5, log^1" in body[0] and "32.5 s" in body[0]


def test_long_callpaths_keep_their_innermost_regions():
    cp = "->".join(f"region{i}" for i in range(20))
    short = shorten_callpath(cp, 30)
    assert len(short) == 30 and short.startswith("...") and short.endswith("region19")
    assert shorten_callpath("a->b", 30) == "a->b"


def test_empty_ranking_renders():
    empty = rank_models([], PARAMS, {"ranks": 1.0, "batch": 1.0})
    for fmt in FORMATS:
        assert render(empty, fmt)
    assert json.loads(render(empty, "json"))["models"] == []


def test_unknown_format_names_option():
    with pytest.raises(InputError, match="--format"):
        render(ranking(), "yaml")


@pytest.mark.parametrize("g, text", [((0.0, 0.0), "const"), ((2.0, 0.0), "deg 2"), ((1.5, 1.0), "deg 1.5, log^1"),
                                     ((0.0, 2.0), "log^2"), ((-0.0, -1.0), "falling (log^1)")])
def test_growth_text(g, text):
    from modeler.outputs.columns import growth_text

    assert growth_text(g) == text


def test_callpaths_that_would_shorten_alike_are_shown_whole():
    tail = "->".join(f"r{i}" for i in range(30))
    a, b = f"main->evaluate->{tail}", f"main->train->{tail}"
    models = [FittedModel(cp, "time", Model(PARAMS, 1.0), 1, 1, 1, None, 5) for cp in (a, b, "main->short")]
    text = render(rank_models(models, PARAMS, {"ranks": 1.0, "batch": 1.0}), "table")
    assert a in text and b in text and "main->short" in text


def test_the_run_spread_column_is_not_called_an_interval():
    # review 62 F5: a column "interval" beside "80% range" read as a prediction interval; it is where
    # one run at the target falls (the repetition spread carried to the prediction)
    for fmt in ("table", "markdown"):
        header = next(l for l in render(ranking(), fmt).splitlines() if "callpath" in l)
        assert "run spread" in header and "interval" not in header and "80% range" in header
    # the machine-readable names stay as they were
    assert "prediction_interval" in json.loads(render(ranking(), "json"))["models"][0]
