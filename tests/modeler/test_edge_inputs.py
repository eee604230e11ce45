"""Inputs at the edges of what the modeler meets: negative parameter values, values near the ends of
the floating-point range, all zeros, names with markup or control characters, and failures that
must still say what was noticed on the way."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from modeler import cli, mdtext
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.errors import InputError, NotFittedError
from modeler.model import Alternative, Factor, Model, Term
from modeler.outputs.table import visible
from modeler.readers.extrap import read_extrap_text
from modeler.report.findings import value_formatter
from modeler.uncertainty import mixture_range

N = (1, 2, 4, 8, 16)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def series(fn, xs=N, reps=(0.99, 1.01), callpath="a") -> Series:
    pts = np.array([[x] for x in xs], dtype=float)
    return Series(callpath, "time", pts, tuple(np.array([fn(x) * r for r in reps]) for x in xs))


# -- failures say what was noticed on the way -------------------------------------------------

def test_a_failed_fit_prints_the_line_warnings_that_explain_it(tmp_path, capsys):
    # two lines declare a second parameter, one has none: the file's parameters are those of the
    # two, and every other line is rejected
    rows = [{"params": {"n": 1, "m": 2}, "callpath": "a", "metric": "time", "value": [1]},
            {"params": {"n": 2, "m": 2}, "callpath": "a", "metric": "time", "value": [1]},
            {"params": {"n": 1}, "callpath": "a", "metric": "time", "value": [1]}]
    f = write_jsonl(tmp_path / "first.jsonl", rows)
    assert cli.main(["fit", str(f)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"{f}:3: parameters ['n'] differ from the file's ['m', 'n'] (those of 2 of its lines); line skipped" in err
    assert "1 series left out: measured at fewer than 3 points" in err
    assert err.rstrip().splitlines()[-1] == "modeler: error: no series has 3 or more points (--min-points)"
    # -q keeps only the error
    assert cli.main(["fit", str(f), "-q"]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.strip().splitlines() == ["modeler: error: no series has 3 or more points (--min-points)"]


def test_a_file_whose_every_line_is_bad_names_the_lines_and_the_file_once(tmp_path, capsys):
    f = write_jsonl(tmp_path / "pstr.jsonl", [{"params": {"n": str(n)}, "value": [1]} for n in N])
    assert cli.main(["fit", str(f)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"{f}:1: parameter values must be finite numbers; line skipped" in err
    assert f"{f}:5: parameter values must be finite numbers" in err
    assert f"no usable measurements ({f}: every measurement line was skipped (5 lines over n))" in err


# -- negative parameter values ------------------------------------------------------------------

@pytest.mark.parametrize("compat", [None, "extrap"])
def test_points_with_a_negative_parameter_value_are_left_out_and_named(compat):
    s = series(lambda n: 1 + n * n, xs=(-2, -1, 1, 2, 4, 8))
    fm = PMNFModeler(compat=compat).fit(Dataset(("n",), [s])).models_[0]
    assert fm.points == 4
    assert fm.predict(np.array([[8.0]]))[0] == pytest.approx(65, rel=1e-6)
    assert any("2 of 6 points left out" in w and "n = -2, -1" in w for w in fm.warnings)


def test_a_constant_negative_parameter_is_no_reason_to_leave_points_out():
    pts = np.array([[x, -1.0] for x in N])
    s = Series("a", "time", pts, tuple(np.array([1.0 + x]) for x in N))
    fm = PMNFModeler().fit(Dataset(("n", "m"), [s])).models_[0]
    assert fm.points == 5 and not any("left out" in w for w in fm.warnings)


def test_every_point_negative_gives_the_mean_with_a_note():
    s = series(lambda n: abs(n), xs=(-1, -2, -4, -8))
    fm = PMNFModeler().fit(Dataset(("n",), [s])).models_[0]
    assert not fm.model.terms and fm.model.constant == pytest.approx(3.75)
    assert any("every point has one; constant model (mean)" in w for w in fm.warnings)


# -- the ends of the floating-point range -------------------------------------------------------

@pytest.mark.parametrize("compat", [None, "extrap"])
@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_tiny_and_huge_values_get_the_model_of_ordinary_ones(compat, scale):
    def fn(n):
        return 3 + 0.7 * n**1.5

    base = PMNFModeler(compat=compat).fit(Dataset(("n",), [series(fn)])).models_[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or underflow warnings either
        fm = PMNFModeler(compat=compat).fit(Dataset(("n",), [series(lambda n: scale * fn(n))])).models_[0]
    assert fm.model.shape() == base.model.shape()
    assert fm.model.constant == pytest.approx(scale * base.model.constant, rel=1e-9)
    assert fm.model.terms[0].coefficient == pytest.approx(scale * base.model.terms[0].coefficient, rel=1e-9)
    assert fm.smape == pytest.approx(base.smape, rel=1e-6, abs=1e-9)
    assert fm.interval == pytest.approx(base.interval)


def test_all_zeros_is_an_exact_zero_with_an_empty_range():
    fm = PMNFModeler().fit(Dataset(("n",), [series(lambda n: 0.0)])).models_[0]
    assert fm.model.constant == 0 and not fm.model.terms
    lo, hi = fm.prediction_range({"n": [64.0]})
    assert lo[0] == 0 and hi[0] == 0


@pytest.mark.parametrize("value", [3.0, 1e-6, 0.0])
def test_a_constant_series_has_adjusted_r2_zero_whatever_its_value(value):
    fm = PMNFModeler().fit(Dataset(("n",), [series(lambda n: value, reps=(1.0, 1.0))])).models_[0]
    assert not fm.model.terms and fm.ar2 == 0.0


def test_far_out_range_still_holds_the_prediction_when_a_light_form_diverges():
    flat = Model(("n",), 0.955, ())
    wild = Model(("n",), 0.9, (Term(-1e-9, (Factor("n", 2.0, 0),)),))
    alts = [Alternative(0.95, flat, np.array([[1e-4]])), Alternative(0.05, wild, np.eye(2) * 1e-22)]
    for x in (1e6, 1e15, 1e20):
        lo, hi = mixture_range(alts, {"n": [x]})
        assert lo[0] <= 0.955 <= hi[0], x
        assert hi[0] - lo[0] < 0.1


# -- the estimator's contract --------------------------------------------------------------------

def test_predict_checks_its_points():
    s = Series("a", "time", np.array([[x, y] for x in N for y in N], dtype=float),
               tuple(np.array([1.0 + x * y]) for x in N for y in N))
    est = PMNFModeler().fit(Dataset(("p", "q"), [s]))
    assert est.predict({"p": 4, "q": 2}).shape == (1, 1)
    assert est.predict([4, 2]).shape == (1, 1)
    assert est.predict({"p": [4, 8], "q": [2, 2]}) == pytest.approx(np.array([[9.0, 17.0]]), rel=1e-6)
    for bad, message in [
        ({"p": [16, 32], "q": [5]}, "as many values"),
        ({"p": 1, "q": 2, "r": 3}, "unknown parameter(s) r"),
        ({"p": 1}, "no values for parameter(s) q"),
        (np.ones((1, 1, 2)), "2-D array"),
        ([[1, 2, 3]], "3 coordinates"),
        ([[-1, 5]], "p=-1"),
        ([[4, np.nan]], "q=nan"),
    ]:
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            est.predict(bad)


def test_estimator_params_follow_scikit_learn():
    import inspect

    est = PMNFModeler(compat="extrap")
    defaults = {k: p.default for k, p in inspect.signature(PMNFModeler).parameters.items()}
    assert set(est.get_params()) == set(defaults)
    clone = type(est)(**est.get_params())
    assert clone.get_params() == est.get_params() and clone is not est
    assert est.set_params(noise_test=False) is est and est.noise_test is False
    assert repr(est) == "PMNFModeler(compat='extrap', noise_test=False)"
    assert repr(PMNFModeler()) == "PMNFModeler()"
    with pytest.raises(InputError, match="no option 'nosuch'"):
        est.set_params(nosuch=1)
    with pytest.raises(ValueError):
        PMNFModeler().predict([[1.0]])
    assert issubclass(NotFittedError, AttributeError)


# -- names from user code in the outputs -------------------------------------------------------

@pytest.mark.parametrize("name, span", [
    ("plain", "`plain`"),
    ("a`b", "``a`b``"),
    ("`x``", "``` `x`` ```"),
    ("a|b", "`a\\|b`"),
    ("new\nline\ttab", "`new line tab`"),
])
def test_code_spans_survive_backticks_pipes_and_newlines(name, span):
    assert mdtext.code(name) == span


def test_text_escapes_markup():
    assert mdtext.text("a*b_c <d> [e] `f` |g\n") == "a\\*b\\_c \\<d\\> \\[e\\] \\`f\\` \\|g "


def test_markdown_and_table_outputs_keep_odd_names_on_one_row(tmp_path, capsys):
    names = ["a`b*c_d_", "new\nline", "tab\there"]
    rows = [{"params": {"n": n}, "callpath": cp, "metric": "time", "value": [(i + 1) * n]}
            for i, cp in enumerate(names) for n in N]
    f = write_jsonl(tmp_path / "odd.jsonl", rows)
    assert cli.main(["fit", str(f), "--format", "markdown", "-q"]) == 0
    md = capsys.readouterr().out
    body = [ln for ln in md.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert len(body) == 3
    assert any("| ``a`b*c_d_`` |" in ln for ln in body)
    assert cli.main(["fit", str(f), "-q"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 + 3  # title, header, rule and one line per model
    assert any("new\\nline" in ln for ln in table) and any("tab\\there" in ln for ln in table)
    assert visible("ok") == "ok"


def test_report_markdown_lists_the_models_notes(tmp_path, capsys):
    rows = [{"params": {"n": n}, "callpath": "main", "metric": "time", "value": [n, n]} for n in (1, 2, 4)]
    f = write_jsonl(tmp_path / "three.jsonl", rows)
    assert cli.main(["report", str(f), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "- `main`: fewer than 5 values of parameter n (3)" in md


def test_a_metric_without_a_unit_is_a_plain_number_even_named_time():
    assert value_formatter("time", "")(561.0) == "561"
    assert value_formatter("time", "s")(561.0) == "9.35 min"


def test_text_data_line_keeps_its_finite_values(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER x\nPOINTS 1 2 4\nREGION r\nMETRIC time\nDATA 1 1.1\nDATA nan 2\nDATA inf nan\n")
    ds = read_extrap_text(f)
    (s,) = ds.series
    assert [r.tolist() for r in s.repetitions] == [[1.0, 1.1], [2.0]]
    assert f"{f}:6: 1 of 2 values are not finite (nan); the other 1 kept at point x=2 for r" in ds.warnings
    assert any(w.startswith(f"{f}:7: DATA line without finite values") for w in ds.warnings)
