"""Review 109 F3, F4, F6 and review 110 LOW-2.

- F3: a part whose growth the data do not settle (ranked level on its own row, `?`) lifted its
  parent through the parts' rule, and its extrapolation alone marked the parent `!`.
- F4: the level rule's benchmark counted only the rows ranked a degree or more too high.
- F6: the error for a 0 that a form cannot take counted the model itself among its "N more".
- LOW-2: under `--metric all`, rows of one growth were ordered by values in different units.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modeler.errors import InputError
from modeler.model import Alternative, Factor, FittedModel, Model, Term
from modeler.parts import parts_sums
from modeler.parts_growth import parts_growths
from modeler.ranking import rank_models
from tests.modeler.test_level_growth import SIZES

REPO = Path(__file__).resolve().parents[2]

# the reviewer's parent2.txt: review 104's near-flat `embed` (0.5 + 1e-5 n, 10% noise) under a
# constant `main` (0.56, 10% noise, no exclusive time), beside `attention` (~1e-6 n^2)
def _region_data(text: str, name: str) -> str:
    """The DATA lines of region `name` in an Extra-P text input."""
    return text.split(f"REGION {name}\nMETRIC time\n")[1].split("REGION")[0]


PARENT2 = ("PARAMETER n\nPOINTS 512 1024 2048 4096 8192\nREGION main\nMETRIC time\n"
           + "".join(f"DATA {row}\n" for row in ("0.674291 0.416883 0.583414 0.528205 0.534652",
                                                 "0.547927 0.446881 0.547012 0.511548 0.746088",
                                                 "0.572644 0.540253 0.544248 0.522589 0.500912",
                                                 "0.538115 0.586989 0.546641 0.613634 0.548811",
                                                 "0.561359 0.646566 0.590526 0.531707 0.549761"))
           + "REGION main->embed\nMETRIC time\n" + _region_data(SIZES, "embed")
           + "REGION attention\nMETRIC time\n" + _region_data(SIZES, "attention"))

N = ("n",)
AT = {"n": 1e4}


def _alt(weight, model):
    return Alternative(weight, model, np.eye(1 + len(model.terms)) * 1e-6)


def _model(constant, *terms):
    return Model(N, constant, tuple(Term(c, (Factor("n", e, l),)) for c, e, l in terms))


def _fm(cp, model, alternatives=(), metric="time", smape=1.0):
    return FittedModel(cp, metric, model, smape, 0.0, 0.9, None, 5, alternatives=tuple(alternatives))


def _tree(flat_value=1.0):
    """A constant `main` of 1.0 over a child whose steep growth its level form (at `flat_value`)
    explains about as well (weight 0.4: not settled), beside a settled linear region."""
    steep = _model(flat_value, (1e-3, 2.0, 0))
    child = _fm("main->child", steep, [_alt(0.6, steep), _alt(0.4, _model(flat_value))])
    main = _fm("main", _model(1.0))
    other = _fm("other", _model(0.0, (1e-6, 1.0, 0)))
    return [main, child, other]


# --- F3 ---------------------------------------------------------------------------------------


def test_an_unsettled_child_does_not_rank_its_parent():
    ranking = rank_models(_tree(), N, AT)
    rows = {r.fitted.callpath: r for r in ranking.rows}
    assert rows["main->child"].ranked_level()
    # main keeps its own (level) growth: the child's unsettled n^2 does not lift it above `other`
    assert rows["main"].parts_growth is None and rows["main"].rank_growth() == (0.0, 0.0)
    assert [r.fitted.callpath for r in ranking.rows] == ["other", "main->child", "main"]
    assert not any("slower than parts" in w for w in ranking.warnings)


def test_a_contradiction_made_by_the_unsettled_extrapolation_alone_marks_nothing():
    ranking = rank_models(_tree(), N, AT)
    main = next(r for r in ranking.rows if r.fitted.callpath == "main")
    # the sum of the models' own predictions is still given
    assert main.from_parts == pytest.approx(1.0 + 1e-3 * 1e8)
    assert main.doubtful() is None and main.parts_unsettled
    assert not any("add up to" in w for w in ranking.warnings)


def test_a_contradiction_that_holds_with_the_part_level_still_counts():
    # the child's level form is at 10, ten times main's 1.0: main is below its parts either way
    ranking = rank_models(_tree(flat_value=10.0), N, AT)
    main = next(r for r in ranking.rows if r.fitted.callpath == "main")
    assert not main.parts_unsettled
    assert main.doubtful() is not None and "more at the target" in main.doubtful()
    assert any(w.startswith("main: its time model predicts") for w in ranking.warnings)
    # but its growth is still its own: the child's growth is not settled
    assert main.parts_growth is None


def test_a_settled_child_still_ranks_its_parent():
    steep = _model(1.0, (1e-3, 2.0, 0))
    child = _fm("main->child", steep, [_alt(0.95, steep), _alt(0.05, _model(1.0))])
    ranking = rank_models([_fm("main", _model(1.0)), child], N, AT)
    main = next(r for r in ranking.rows if r.fitted.callpath == "main")
    assert main.parts_growth == (2.0, 0.0) and not main.parts_unsettled


def test_parts_growths_takes_an_unsettled_part_as_level():
    main, child, _ = _tree()
    preds = {("main", "time"): 1.0, ("main->child", "time"): 1.0 + 1e-3 * 1e8}
    sums = parts_sums(preds)
    assert parts_growths([main, child], sums, preds) == {"main": (2.0, 0.0)}
    assert parts_growths([main, child], sums, preds, {("main->child", "time")}) == {}


def test_an_unsettled_exclusive_time_does_not_rank_its_call_path():
    steep = _model(1.0, (1e-3, 2.0, 0))
    own = _fm("main", steep, [_alt(0.6, steep), _alt(0.4, _model(1.0))], metric="exclusive_time")
    kid = _fm("main->child", _model(0.1))
    ranking = rank_models([_fm("main", _model(1.1)), kid], N, AT, companions=[own])
    main = next(r for r in ranking.rows if r.fitted.callpath == "main")
    assert main.parts_growth is None and main.doubtful() is None


def test_reviewer_input_ranks_attention_first_and_leaves_main_unmarked(tmp_path):
    f = tmp_path / "parent2.txt"
    f.write_text(PARENT2)
    r = subprocess.run([sys.executable, "-m", "modeler", "fit", str(f), "--at", "n=131072", "--min-share", "0",
                        "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    models = json.loads(r.stdout)["models"]
    assert [m["callpath"] for m in models][0] == "attention"
    by = {m["callpath"]: m for m in models}
    assert by["main->embed"]["growth_ranked_level"] is True
    assert by["main"]["growth_from_parts"] is None and by["main"]["doubtful"] is None
    assert by["main"]["prediction_from_parts"] == pytest.approx(by["main->embed"]["prediction"])
    assert "slower than parts" not in r.stderr and "add up to" not in r.stderr
    assert "main->embed (time)" in r.stderr  # the unsettled growth is still named


def test_report_run_time_is_not_doubted_through_an_unsettled_part(tmp_path):
    """The report's run-time caveats took the unsettled `embed` as a growth the run's model misses:
    "its parts' models add up to 49.1 (0.011x)" and "main->embed, a region inside it, is predicted
    at 49.1 (88x the run)"."""
    f = tmp_path / "parent.txt"
    f.write_text(PARENT2.split("REGION attention")[0])
    r = subprocess.run([sys.executable, "-m", "modeler", "report", str(f), "--at", "n=131072", "--format",
                        "markdown"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    run_time = next(line for line in r.stdout.splitlines() if line.startswith("Predicted run time"))
    assert "`main`" in run_time
    assert "add up to" not in r.stdout and "a region inside it" not in r.stdout


# --- F4 ---------------------------------------------------------------------------------------


def test_the_level_benchmark_counts_understated_growth_too():
    import level_growth_rates

    line = level_growth_rates.rates("flat", 0.1, 12, 1)
    assert "overstated own" in line and "understated own" in line
    under = line.split("understated own")[1].split(",")
    own, ranked = int(under[0]), int(under[1].split()[1])
    level = int(line.split("ranked level")[1].split(",")[0])
    # every flat function grows: a row ranked level is below its truth, the count can only rise
    assert own <= ranked <= own + level


# --- F6 ---------------------------------------------------------------------------------------

LOGGED = _model(1.0, (0.1, 0.25, 2))
OTHER_LOG = _model(2.0, (0.5, 0.0, 1))


def test_zero_error_does_not_count_the_model_among_its_forms():
    fm = _fm("a", LOGGED, [_alt(0.5, LOGGED), _alt(0.3, OTHER_LOG), _alt(0.2, _model(1.0))])
    with pytest.raises(InputError) as e:
        fm.prediction_range({"n": [0]})
    assert "the model of a [time] and 1 more has that factor" in str(e.value)


def test_zero_error_of_a_model_whose_only_logged_form_is_itself_names_it_alone():
    fm = _fm("a", LOGGED, [_alt(0.6, LOGGED), _alt(0.4, _model(1.0))])
    with pytest.raises(InputError) as e:
        fm.prediction_range({"n": [0]})
    assert "the model of a [time] has that factor" in str(e.value)


def test_zero_error_does_not_count_a_pass_model_equal_to_the_model():
    fm = FittedModel("a", "time", LOGGED, 1.0, 0.0, 0.9, None, 5,
                     pass_models=(((0,), Model(N, LOGGED.constant, LOGGED.terms)), ((1,), OTHER_LOG)))
    with pytest.raises(InputError) as e:
        fm.pass_predictions({"n": [0]})
    assert "the model of a [time] and 1 more has that factor" in str(e.value)


# --- review 110 LOW-2 ---------------------------------------------------------------------------


def _linear(cp, metric, value):
    return _fm(cp, _model(0.0, (value / 1e4, 1.0, 0)), metric=metric)


def test_rows_of_one_growth_compare_values_within_one_metric_group():
    models = [_linear("train", "peak_memory", 2.56e5), _linear("load", "cost", 51.18), _linear("main", "time", 0.74),
              _linear("fwd", "exclusive_time", 0.5), _linear("main", "visits", 40.0), _linear("x", "metr", 1e9)]
    ranking = rank_models(models, N, AT)
    order = [(r.fitted.callpath, r.fitted.metric) for r in ranking.rows]
    assert order == [("main", "time"), ("fwd", "exclusive_time"), ("load", "cost"), ("train", "peak_memory"),
                     ("main", "visits"), ("x", "metr")]


def test_one_metric_alone_sorts_by_value_as_before():
    ranking = rank_models([_linear("a", "time", 1.0), _linear("b", "time", 3.0), _fm("c", _model(9.0))], N, AT)
    assert [r.fitted.callpath for r in ranking.rows] == ["b", "a", "c"]


def test_metric_order_puts_times_first_and_unknown_metrics_after_by_name():
    from modeler.ranking import metric_order

    assert metric_order("time") == metric_order("gpu_time") < metric_order("cost") < metric_order("peak_memory")
    assert metric_order("parallel_efficiency") < metric_order("aaa") < metric_order("zzz")
    assert metric_order("speedup") != metric_order("parallel_efficiency")
