"""Review 121 LOW-4 and LOW-5: JSON's and CSV's `model` text is the model that `terms` and
`prediction` are of (it was rounded to 6 digits in JSON, 6.9e-6 apart); values so small that
their squares underflow get no RSS of 0 and no 80% range of no width, but a note, as values too
large for them do."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path

import numpy as np

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.estimator import UNDERFLOW_NOTE, PMNFModeler


def _evaluate(text: str, point: dict[str, float]) -> float:
    """A model's text evaluated at `point` with Python's floats."""
    expr = text.replace("^", "**")
    return eval(expr, {"log2": math.log2, "__builtins__": {}}, dict(point))  # noqa: S307 (our own model text)


def _write(path: Path) -> Path:
    rng = random.Random(3)
    rows = [{"params": {"p": p, "n": n}, "callpath": "main->step", "metric": "time",
             "value": [(3.0445631984465447 + 0.0099855284360692055 * p * n) * rng.uniform(0.97, 1.03) for _ in range(3)]}
            for p in (1, 2, 4, 8, 16) for n in (100, 200, 400, 800, 1600)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_json_and_csv_model_text_reads_back_as_the_model_that_is_predicted(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl")
    at = {"p": 1024.0, "n": 3200.0}
    assert cli.main(["fit", str(f), "--format", "json", "--at", "p=1024,n=3200"]) == 0
    m = json.loads(capsys.readouterr().out)["models"][0]
    assert _evaluate(m["model"], at) == m["prediction"]  # bit for bit; 6 digits were 6.9e-6 apart
    assert float(m["model"].split(" ")[0]) == m["constant"]
    assert all(_evaluate(a["model"], at) > 0 for a in m["alternatives"])
    assert cli.main(["fit", str(f), "--format", "csv", "--at", "p=1024,n=3200"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["model"] == m["model"]
    assert len(m["model"]) < len(f"{m['constant']:.17g}") + 60  # the shortest text that reads back, not 17 digits


def _series(name: str, scale: float, noise: float) -> Series:
    rng = np.random.default_rng(5)
    p = np.array([1.0, 2, 4, 8, 16])
    reps = tuple(scale * x * x * (1 + noise * rng.uniform(-1, 1, 3)) for x in p)
    return Series(name, "time", p[:, None], reps)


def test_values_whose_squares_underflow_get_a_note_instead_of_an_rss_of_0_and_a_range_of_no_width():
    data = Dataset(("p",), [_series("tiny", 1e-170, 0.01), _series("small", 1e-150, 0.01), _series("exact", 1e-170, 0.0)])
    tiny, small, exact = PMNFModeler().fit(data).models_
    assert UNDERFLOW_NOTE in tiny.warnings and math.isnan(tiny.rss)
    assert tiny.prediction_range({"p": [64.0]}) is None
    assert 0 < tiny.smape < 2  # the model itself is fitted as at any scale
    # at 1e-150 the squares hold: a real RSS and a range of some width
    assert UNDERFLOW_NOTE not in small.warnings and 0 < small.rss < 1e-290
    lo, hi = small.prediction_range({"p": [64.0]})
    assert hi[0] > lo[0]
    # an exact fit's RSS of 0 is its own
    assert UNDERFLOW_NOTE not in exact.warnings and exact.rss == 0
