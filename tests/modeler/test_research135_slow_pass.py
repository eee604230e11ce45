"""Research 135 (review 133 HIGH-1): one repetition pass 4x slow at every point turned an exact 16x
linear rise into a constant, ranked last. Two causes, two fixes:
- the noise that judges the forms came from the repetitions' spread, which a pass slowing every point
  alike fills without bending the form; where runs name their pass, the spread with each pass's common
  factor taken out judges instead (`modeler.pass_noise`);
- a relative miss is bounded by 100% where a fit lies far below the values, so a constant's misses
  of a steep rise looked like noise of 50%; beyond a factor 2 below the value they are judged on the
  log scale (`modeler.pmnf.default_mode._judged_rss`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pass_noise import GATE, shape_spread

from .modeler_synthetic_runs import write_rank_file

XS = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
LINEAR = frozenset({(("x", 1.0, 0),)})


def _series(factors, labelled: bool, law=lambda x: 2.0 * x) -> Series:
    reps = tuple(np.array([law(x) * f for f in factors]) for x in XS)
    passes = tuple(np.arange(len(factors)) for _ in XS) if labelled else None
    return Series("work", "time", XS[:, None], reps, passes=passes)


def _model(s: Series, **kw):
    return PMNFModeler(**kw).fit(Dataset(("x",), (s,))).models_[0].model


@pytest.mark.parametrize("aggregate", ["robust", "median", "mean"])
@pytest.mark.parametrize("slow", [3.0, 4.0, 6.0, 8.0])
def test_a_pass_slow_at_every_point_keeps_the_law_when_passes_are_named(aggregate, slow):
    # before: a constant for 4x and 6x (robust, mean) and for 3x and more (median)
    m = _model(_series([1.0, 1.1, slow], labelled=True), aggregate=aggregate)
    assert m.shape() == LINEAR
    level = {"robust": (2.1 + slow) / 3, "mean": (2.1 + slow) / 3, "median": 1.1}[aggregate]
    assert m.terms[0].coefficient == pytest.approx(2.0 * level, rel=1e-6)


@pytest.mark.parametrize("aggregate", ["robust", "mean"])
@pytest.mark.parametrize("slow", [4.0, 5.0])
def test_without_pass_names_a_steep_rise_is_not_taken_for_noise(aggregate, slow):
    # Extra-P inputs name no passes: the log-scale judging of far misses alone brings the law back
    # (before: a constant predicting 1/20 of the truth at x = 64)
    m = _model(_series([1.0, 1.1, slow], labelled=False), aggregate=aggregate)
    assert m.shape() == LINEAR


@pytest.mark.parametrize("labelled", [False, True])
@pytest.mark.parametrize("aggregate", ["robust", "median", "mean"])
def test_a_constant_with_a_slow_pass_stays_constant(labelled, aggregate):
    rng = np.random.default_rng(3)
    for _ in range(5):
        f = np.array([1.0, 1.1, 4.0])
        reps = tuple(30.0 * f * rng.uniform(0.98, 1.02, 3) for _ in XS)
        passes = tuple(np.arange(3) for _ in XS) if labelled else None
        m = _model(Series("c", "time", XS[:, None], reps, passes=passes), aggregate=aggregate)
        assert not m.terms, m.formula()


def test_the_pass_corrected_spread_only_where_the_passes_make_the_spread():
    rng = np.random.default_rng(0)
    # independent noise: the passes explain nothing, the plain spread stays
    iid = Series("n", "time", XS[:, None], tuple(2 * x * rng.uniform(0.95, 1.05, 3) for x in XS),
                 passes=tuple(np.arange(3) for _ in XS))
    assert shape_spread(iid, "robust") is None
    # one pass 2x slow at every point, 1% noise: what is left is about the 1%
    slow = Series("s", "time", XS[:, None], tuple(2 * x * np.array([1, 1, 2.0]) * rng.uniform(0.99, 1.01, 3) for x in XS),
                  passes=tuple(np.arange(3) for _ in XS))
    sp = shape_spread(slow, "mean")
    assert sp is not None and np.median(sp) < 0.02 and GATE > 1
    # no labels, the extremes, a value at zero: not applicable
    assert shape_spread(_series([1, 1.1, 4], labelled=False), "robust") is None
    assert shape_spread(slow, "min") is None


def test_a_pass_slow_at_a_few_points_is_left_to_the_outlier_weights_and_refits():
    # review 62's case: the documented machinery (odd points, refits without each pass) is unchanged
    f = np.ones((5, 3))
    f[-2:, 0] = 1.6
    rng = np.random.default_rng(1)
    reps = tuple(2 * x * f[i] * rng.uniform(0.99, 1.01, 3) for i, x in enumerate(XS))
    s = Series("t", "time", XS[:, None], reps, passes=tuple(np.arange(3) for _ in XS))
    assert shape_spread(s, "robust") is None


def _write_runs(root):
    """Review 133's `gen_slow.py`: `main->work` is 2 n, `main->comm` 30, pass 1 1.1x and pass 2 4x slow."""
    regions = ((0, "function", "main", "main.py", 1), (1, "function", "work", "main.py", 5),
               (2, "function", "comm", "main.py", 9))
    for n in (1, 2, 4, 8, 16):
        for rep, f in enumerate((1.0, 1.1, 4.0)):
            w, c = 2.0 * n * f * 1e9, 30.0 * f * 1e9
            write_rank_file(root / f"s{n}-{rep}", run_id=f"s{n}-{rep}", params={"n": n}, repetition=rep,
                            regions=regions,
                            profile={(0,): (1, int(w + c), 0), (0, 1): (1, int(w), int(w)), (0, 2): (1, int(c), int(c))})


def test_run_files_with_a_slow_pass_rank_the_rise_first(tmp_path, capsys):
    _write_runs(tmp_path)
    assert cli.main(["fit", str(tmp_path), "--metric", "time", "--at", "n=64", "--format", "json"]) == 0
    out, _ = capsys.readouterr()
    models = json.loads(out)["models"]
    work = next(m for m in models if m["callpath"] == "main->work")
    comm = next(m for m in models if m["callpath"] == "main->comm")
    assert [[f["parameter"], f["exponent"]] for t in work["terms"] for f in t["factors"]] == [["n", 1.0]]
    assert comm["terms"] == []
    # the rise ranks above the flat region (before: a constant of 5.9 s, last)
    order = [m["callpath"] for m in models]
    assert order.index("main->work") < order.index("main->comm")
    assert work["prediction"] == pytest.approx(2 * 64 * (1 + 1.1 + 4) / 3, rel=1e-6)


def test_extrap_json_lines_with_a_slow_repetition(tmp_path, capsys):
    path = tmp_path / "slowpass.jsonl"
    with open(path, "w") as f:
        for x in (1, 2, 4, 8, 16):
            f.write(json.dumps({"params": {"x": x}, "callpath": "grows", "metric": "time",
                                "value": [2 * x, 2.2 * x, 8 * x]}) + "\n")
            f.write(json.dumps({"params": {"x": x}, "callpath": "flat", "metric": "time",
                                "value": [30, 33, 120]}) + "\n")
    assert cli.main(["fit", str(path), "--format", "json"]) == 0
    models = json.loads(capsys.readouterr()[0])["models"]
    grows = next(m for m in models if m["callpath"] == "grows")
    assert [[f["parameter"], f["exponent"]] for t in grows["terms"] for f in t["factors"]] == [["x", 1.0]]
    assert [m["callpath"] for m in models][0] == "grows"
