"""Review 84, the outgrown rule of review 80: one part with a very wide range decided a run's time
(MED-1: a flat 10 s run, range 6.2 to 13.8 s, became 3.4 min through a part of range 6 to 394 s,
whose low end carried half the run's prediction, not of its high end), and a child that its parts
outgrew stood at ten times its caller, which kept its model (MED-2)."""

from __future__ import annotations

import pytest

from modeler.ranking import rank_models

from tests.modeler.test_review80_parts_figure import N, Z, _fm


def _rows(models, companions=()):
    ranking = rank_models(models, ("n",), {"n": N}, companions=companions)
    return {r.fitted.callpath: r for r in ranking.rows if r.fitted.metric == "time"}


def test_a_part_whose_low_end_is_half_the_runs_prediction_but_not_of_its_high_end_does_not_decide_it():
    times = [_fm("main", "time", 10.0, sd=3.0),  # range 6.2 to 13.8
             _fm("main->setup", "time", 4.0, sd=2.0),
             _fm("main->work", "time", 0.0, 200.0 / N ** 3, 3.0, sd=194.0 / Z)]  # 200 s, range 6 to 394
    rows = _rows(times)
    main = rows["main"]
    assert main.range[1] == pytest.approx(13.84, abs=0.01) and rows["main->work"].range[0] == pytest.approx(6.0)
    assert main.from_parts == pytest.approx(204.0)
    assert main.time_figure is None  # was 204: its parts' sum, from one part reaching 394 s


def test_a_run_is_never_below_a_child_that_its_parts_outgrow():
    times = [_fm("main", "time", 10.0, sd=10.0),  # range -2.8 to 22.8: wide, not outgrown itself
             _fm("main->fit", "time", 8.0, sd=1.0 / Z),  # 7 to 9
             _fm("main->fit->step", "time", 0.0, 100.0 / N ** 3, 3.0, sd=95.0 / Z)]  # 100 s, 5 to 195
    excl = [_fm("main", "exclusive_time", 2.0, sd=0.5), _fm("main->fit", "exclusive_time", 0.5, sd=0.1)]
    rows = _rows(times, excl)
    fit, main = rows["main->fit"], rows["main"]
    assert fit.time_figure == pytest.approx(100.5)  # outgrown: its parts' sum
    assert main.time_figure is not None and main.time_figure >= fit.time_figure  # was None: 10 s


def _figure(row) -> float:
    return row.time_figure if row.time_figure is not None else row.prediction


def test_review84_nest_a_training_function_does_not_stand_ten_times_above_its_run():
    times = [_fm("main", "time", 10.0, sd=3.0),  # 6.2 to 13.8
             _fm("main->fit", "time", 8.0, sd=3.0),  # 4.2 to 11.8
             _fm("main->fit->step", "time", 0.0, 100.0 / N ** 3, 3.0, sd=95.0 / Z)]  # 100 s, 5 to 195
    excl = [_fm("main", "exclusive_time", 2.0, sd=0.5), _fm("main->fit", "exclusive_time", 0.5, sd=0.1)]
    rows = _rows(times, excl)
    assert _figure(rows["main"]) >= _figure(rows["main->fit"])  # was 10 s under 100.5 s
