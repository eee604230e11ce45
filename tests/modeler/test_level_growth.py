"""A growth the data do not settle is not ranked by (`modeler.level_growth`, review 104 M1): a
near-flat region at 10% noise fitted as n^2 * log2(n)^2 came first, above n^2 with 130x its time."""

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.growth import growth
from modeler.level_growth import LEVEL_WEIGHT, level_weight
from modeler.model import Alternative, Factor, FittedModel, Model, Term
from modeler.ranking import rank_models

REPO = Path(__file__).resolve().parents[2]

# the reviewer's file: attention ~ 1e-6 n^2, mlp ~ 2e-3 n, embed 0.5 + 1e-5 n (+16% over the
# sweep), 10% noise, 5 runs a point
SIZES = """PARAMETER n
POINTS 512 1024 2048 4096 8192
REGION attention
METRIC time
DATA 0.838641 0.860678 0.774206 0.676237 0.832236
DATA 2.15332 2.02387 2.0617 2.02586 2.13552
DATA 6.38979 5.69312 6.28343 5.83207 5.46806
DATA 20.708 22.775 21.6315 21.7178 23.8136
DATA 79.8947 76.3294 74.4359 86.3863 72.3779
REGION mlp
METRIC time
DATA 0.987511 1.10769 1.12859 0.928171 1.1005
DATA 2.0527 2.10081 2.0112 2.05871 2.33509
DATA 4.3746 3.88962 4.00375 3.7157 3.37634
DATA 7.77999 8.90317 8.74844 7.54336 10.0969
DATA 18.0444 15.5443 16.6235 16.7154 16.057
REGION embed
METRIC time
DATA 0.583726 0.594149 0.510121 0.533617 0.529882
DATA 0.500916 0.457771 0.451539 0.529583 0.521659
DATA 0.525162 0.529733 0.536278 0.504444 0.435311
DATA 0.440852 0.597646 0.543431 0.471413 0.49952
DATA 0.605624 0.664842 0.645948 0.60386 0.601596
"""


def _fit(tmp_path, *extra):
    f = tmp_path / "sizes.txt"
    f.write_text(SIZES)
    return subprocess.run([sys.executable, "-m", "modeler", "fit", str(f), "--at", "n=131072", "--min-share", "0",
                           *extra], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_near_flat_region_is_ranked_below_the_growing_ones(tmp_path):
    r = _fit(tmp_path, "--format", "json")
    assert r.returncode == 0, r.stderr
    models = {m["callpath"]: m for m in json.loads(r.stdout)["models"]}
    order = [m["callpath"] for m in json.loads(r.stdout)["models"]]
    embed = models["embed"]
    # its own model still grows steeply; the data do not settle it: a constant carries real weight
    assert embed["growth"]["exponent"] >= 1.5
    assert embed["growth_ranked_level"] is True and embed["growth_level_weight"] >= LEVEL_WEIGHT
    assert order == ["attention", "mlp", "embed"]
    for name in ("attention", "mlp"):
        assert models[name]["growth_ranked_level"] is False and models[name]["growth_level_weight"] is None
    assert "embed (time)" in r.stderr and "ranked with the constant models" in r.stderr


def test_table_marks_the_unsettled_growth(tmp_path):
    r = _fit(tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line[:1].isdigit()}
    assert "log^2?" in rows["embed"] and "?" not in rows["attention"] and rows["attention"].startswith("1 ")


def test_csv_gives_the_level_weight_of_the_unsettled_row(tmp_path):
    r = _fit(tmp_path, "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = {row["callpath"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    assert float(rows["embed"]["growth_level_weight"]) >= LEVEL_WEIGHT
    assert rows["attention"]["growth_level_weight"] == "" and rows["mlp"]["growth_level_weight"] == ""


def test_report_headline_names_the_growing_region(tmp_path):
    f = tmp_path / "sizes.txt"
    f.write_text(SIZES)
    out = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "modeler", "report", str(f), "--at", "n=131072", "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    head = html[html.index("worst growth"):][:200]
    assert "attention" in head and "embed" not in head
    assert "log^2?" in html


def _alt(weight, model):
    k = 1 + len(model.terms)
    return Alternative(weight, model, np.eye(k) * 1e-6)


FLAT = Model(("n",), 1.0, ())
UP = Model(("n",), 1.0, (Term(1e-3, (Factor("n", 2.0, 0),)),))
DOWN = Model(("n",), 5.0, (Term(-1e-3, (Factor("n", 1.0, 0),)),))


def _fitted(model, alternatives):
    return FittedModel("r", "time", model, 1.0, 0.0, 1.0, None, 5, alternatives=tuple(alternatives))


@pytest.mark.parametrize("flat_weight, expected", [(0.05, None), (0.099, None), (0.1, 0.1), (0.4, 0.4)])
def test_level_weight_counts_the_level_forms(flat_weight, expected):
    fm = _fitted(UP, [_alt(1 - flat_weight, UP), _alt(flat_weight, FLAT)])
    got = level_weight(fm, growth(UP), ("n",), {"n": 1e4}, {"n": 1e3})
    assert got == expected if expected is None else math.isclose(got, expected)


def test_level_weight_of_a_falling_model_counts_the_level_and_rising_forms():
    fm = _fitted(DOWN, [_alt(0.7, DOWN), _alt(0.2, FLAT), _alt(0.1, UP)])
    assert math.isclose(level_weight(fm, growth(DOWN), ("n",), {"n": 1e4}, {"n": 1e3}), 0.3)
    # a rising model: the falling form counts against it as the level one does
    fm = _fitted(UP, [_alt(0.85, UP), _alt(0.15, DOWN)])
    assert math.isclose(level_weight(fm, growth(UP), ("n",), {"n": 1e4}, {"n": 1e3}), 0.15)


def test_level_model_or_one_without_forms_in_play_is_left_alone():
    assert level_weight(_fitted(FLAT, [_alt(0.5, FLAT), _alt(0.5, UP)]), growth(FLAT), ("n",), {"n": 1e4}, None) is None
    assert level_weight(_fitted(UP, []), growth(UP), ("n",), {"n": 1e4}, None) is None


def test_rank_models_orders_the_unsettled_row_among_the_constants():
    unsettled = FittedModel("near_flat", "time", UP, 1.0, 0.0, 1.0, None, 5,
                            alternatives=(_alt(0.6, UP), _alt(0.4, FLAT)))
    settled = FittedModel("linear", "time", Model(("n",), 0.0, (Term(1e-6, (Factor("n", 1.0, 0),)),)), 1.0, 0.0, 1.0,
                          None, 5)
    constant = FittedModel("const", "time", Model(("n",), 1.0, ()), 1.0, 0.0, 1.0, None, 5)
    ranking = rank_models([unsettled, constant, settled], ["n"], {"n": 1e4})
    assert [r.fitted.callpath for r in ranking.rows] == ["linear", "near_flat", "const"]
    near = ranking.rows[1]
    assert near.ranked_level() and near.growth == (2.0, 0.0) and near.rank_growth() == (0.0, 0.0)
    assert any("near_flat (time) deg 2, 40%" in w for w in ranking.warnings)


def test_rising_series_at_ten_percent_noise_are_not_ranked_level():
    rng = np.random.default_rng(3)
    xs = (4, 8, 16, 32, 64)
    forms = [(0.5, 0), (1, 0), (2, 0), (0, 1), (1, 1)]
    series = []
    for k, (e, lg) in enumerate(forms * 4):
        c = rng.uniform(0.5, 5)
        a = 3 * c / (64 ** e * math.log2(64) ** lg)  # rises about 3x over the sweep
        series.append(Series(f"c{k}", "time", [[x] for x in xs],
                             [[(c + a * x ** e * math.log2(x) ** lg) * (1 + 0.1 * rng.standard_normal())
                               for _ in range(5)] for x in xs]))
    ranking = rank_models(PMNFModeler().fit(Dataset(("x",), series)).models_, ["x"], {"x": 256.0})
    assert all(r.growth > (0.0, 0.0) for r in ranking.rows)
    assert not [r.fitted.callpath for r in ranking.rows if r.ranked_level()]
