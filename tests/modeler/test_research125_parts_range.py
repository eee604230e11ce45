"""Research 125 (review 123 MED-1, LOW-4).

MED-1: a training step of c + a*batch + b*batch^2 (the batch^2 part in one child, the batch part in
another) was fitted with one term, batch^(3/2), in the loop's `time` and in its `step_time`, 15% low
at 2x the batch, the truth outside the 80% range. The loop's `time` row was ranked "deg 2 (parts)",
but its range did not hold its parts' sum (right, 1.355 s against 1.337 s measured) below the 1.2x
gap at which that sum replaces its figure, and the `step_time` row got no check at all. A time
row's range now holds its parts where they are credible (`parts.PartsCheck.range_span`), and a
loop's step and epoch rows take its verdict (`loop_parts.step_verdicts`).

LOW-4: a whole below its parts was warned of at one target because, with the growth the data do not
settle taken level, it was above them, and not at a larger target, where it was within bounds; a
contradiction now counts where it holds the same way round (`parts_growth.settled_checks`,
`unsettled_contradictions`).
"""

from __future__ import annotations

import numpy as np
import pytest

from modeler.commands.fit import fit_dataset
from modeler.dataset import Dataset, Series
from modeler.loop_parts import loop_ratio
from modeler.parts import PartsCheck
from modeler.parts_growth import settled_checks, unsettled_contradictions
from modeler.ranking import _holding

X = np.array([[16.0], [32.0], [64.0], [128.0], [256.0]])
LOOP = "main->fit:for@10"
STEPS = 4.0


def _series(steps=None, noise=0.01, runs=3, seed=0, quad=4e-6, lin=4e-4, own=0.01, setup=1.0):
    """A loop of `STEPS` steps (or `steps(x)`) whose children are `lin * x` and `quad * x^2`, and a
    constant own time, under `main` with a constant set-up; step_time its time over its steps."""
    rng = np.random.default_rng(seed)
    x = X[:, 0]
    n = STEPS if steps is None else steps(x)

    def noisy(v):
        return np.broadcast_to(v, x.shape)[:, None] * (1 + noise * rng.standard_normal((len(x), runs)))

    kids = {"load": noisy(n * lin * x), "loss": noisy(n * quad * x * x)}
    excl = noisy(np.full(len(x), own))
    loop = kids["load"] + kids["loss"] + excl
    main_excl = noisy(np.full(len(x), setup))
    out = [Series(f"{LOOP}->{k}", m, X, tuple(v)) for k, v in kids.items() for m in ("time", "exclusive_time")]
    out += [Series(LOOP, "time", X, tuple(loop)), Series(LOOP, "exclusive_time", X, tuple(excl)),
            Series(LOOP, "step_time", X, tuple(loop / np.broadcast_to(n, x.shape)[:, None])),
            Series(LOOP, "epoch_time", X, tuple(loop * 1.001)),
            Series("main", "time", X, tuple(loop + main_excl)), Series("main", "exclusive_time", X, tuple(main_excl))]
    return Dataset(("batch",), out)


def _truth(batch, n=STEPS, quad=4e-6, lin=4e-4, own=0.01):
    return n * (quad * batch * batch + lin * batch) + own


def _rows(dataset, at=512.0, metrics=None):
    ranking = fit_dataset(dataset, at={"batch": at}, min_share=0.0, metrics=metrics)
    return {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}, ranking


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_loops_time_range_holds_its_parts_where_they_outgrow_it(seed):
    rows, _ = _rows(_series(seed=seed))
    loop, true = rows[(LOOP, "time")], _truth(512.0)
    assert loop.parts_growth == (2.0, 0.0)  # ranked by its parts, as before
    # its model misses the batch^2 part: low, and its own 80% range with it
    assert loop.prediction < 0.95 * true
    assert loop.from_parts == pytest.approx(true, rel=0.02)
    lo, hi = loop.range
    assert lo <= loop.prediction and lo <= true <= hi and hi >= loop.from_parts  # was hi < true
    assert hi < 1.15 * true  # no further than the whole's own range from its model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_step_and_epoch_rows_take_the_loops_verdict(seed):
    rows, ranking = _rows(_series(seed=seed))
    loop = rows[(LOOP, "time")]
    for metric, share in (("step_time", 1 / STEPS), ("epoch_time", 1.001)):
        row, true = rows[(LOOP, metric)], _truth(512.0) * share
        assert row.prediction < 0.95 * true  # the same one-term model
        assert row.parts_growth == (2.0, 0.0)  # was None: "deg 1.x" beside a loop of "deg 2 (parts)"
        assert row.from_parts == pytest.approx(loop.from_parts * share, rel=0.02)
        assert row.range[0] <= true <= row.range[1]  # was below the range
        assert row.to_json()["growth_from_parts"] == {"exponent": 2.0, "log_exponent": 0.0}
    said = [w for w in ranking.warnings if "ranked by the growth of their loop's parts" in w]
    assert len(said) == 1 and f"{LOOP} [step_time]" in said[0] and f"{LOOP} [epoch_time]" in said[0]
    # the time rows' warning names the time rows only
    slower = [w for w in ranking.warnings if "grow slower than parts" in w]
    assert slower and "[step_time]" not in slower[0]


def test_a_step_time_fitted_alone_is_checked_against_its_loops_parts():
    """`--metric step_time`: the loop's time and the call paths below it are fitted beside it."""
    rows, _ = _rows(_series(), metrics=["step_time"])
    assert list(rows) == [(LOOP, "step_time")]
    row, true = rows[(LOOP, "step_time")], _truth(512.0) / STEPS
    assert row.parts_growth == (2.0, 0.0)
    assert row.range[0] <= true <= row.range[1]


def test_a_loop_whose_step_count_follows_a_parameter_gives_its_step_nothing():
    """Steps per loop of 1024 / batch: the step's share of the loop grows 16x over the sweep, and the
    loop's growth is not the step's."""
    data = _series(steps=lambda x: 1024.0 / x)
    assert loop_ratio(data.series, LOOP, "step_time", ("batch",), {"batch": 512.0}) is None
    assert loop_ratio(data.series, LOOP, "epoch_time", ("batch",), {"batch": 512.0}) is not None
    rows, _ = _rows(data)
    step = rows[(LOOP, "step_time")]
    assert step.parts_growth is None and step.from_parts is None and step.time_figure is None


def test_the_steps_share_is_taken_near_the_target():
    data = _series(noise=0.0)
    near, overall = loop_ratio(data.series, LOOP, "step_time", ("batch",), {"batch": 512.0})
    assert near == pytest.approx(0.25) and overall == pytest.approx(0.25)


def _check(whole, parts, **kw):
    return PartsCheck("main", whole, parts, 2, True, **kw)


def test_the_span_a_whole_holds():
    # clearly above (the parts' low ends above the whole's high end), by less than the 1.2x gap
    c = _check(1.278, 1.355, parts_low=1.311, parts_high=1.40, whole_high=1.303, whole_low=1.119)
    assert not c.below_parts() and c.range_span() == pytest.approx((1.311, 1.355 * 1.303 / 1.278))
    assert _holding((1.119, 1.303), 1.278, c.range_span()) == pytest.approx((1.278, 1.355 * 1.303 / 1.278))
    # not clearly: only where its heavy parts outgrow it
    c = _check(1.278, 1.355, parts_low=1.2, parts_high=1.40, whole_high=1.303, whole_low=1.119)
    assert c.range_span() is None
    c = _check(1.278, 1.355, parts_low=1.2, parts_high=1.40, whole_high=1.303, whole_low=1.119, outgrown=True)
    assert _holding((1.119, 1.303), 1.278, c.range_span()) == pytest.approx((1.2, 1.355 * 1.303 / 1.278))
    # one part with a wide range: the far end no further from the sum than the whole's own
    c = _check(10.0, 12.0, parts_low=11.0, parts_high=560.0, whole_high=10.5, whole_low=9.5)
    assert c.range_span()[1] == pytest.approx(12.0 * 1.05)
    # under --ranks max a whole below its parts is no contradiction; unsettled: none
    assert _check(1.278, 1.355, parts_low=1.311, whole_high=1.303, combine="max").range_span() is None
    assert _check(1.278, 1.355, parts_low=1.311, whole_high=1.303).range_span(unsettled=True) is None


def test_a_whole_growing_faster_than_every_part_holds_their_sum_below_it():
    c = _check(2.0, 1.5, parts_low=1.3, parts_high=1.7, whole_high=2.4, whole_low=1.9)
    assert c.range_span() is None  # no sign which is wrong
    low = max(1.3, 1.5 * 1.9 / 2.0)
    assert c.range_span(faster_than_parts=True) == pytest.approx((low, 1.7))
    # stretched down, never cut above: which of the two is wrong the numbers do not say (review 108)
    assert _holding((1.9, 2.4), 2.0, c.range_span(faster_than_parts=True)) == pytest.approx((low, 2.4))
    assert _check(2.0, 1.5, parts_low=1.3, whole_low=1.9, combine="min").range_span(True) is None
    no_exclusive = PartsCheck("main", 2.0, 1.5, 2, False, parts_low=1.3, whole_low=1.9)
    assert no_exclusive.range_span(True) is None  # the rest may be its own work


def test_a_contradiction_that_turns_round_with_the_level_values_is_none():
    """Review 123 LOW-4: `main` at 9.456 s under parts of 14.4 s (0.66x), its unsettled child taken
    level 5.61 s (1.69x above): between the two ends of the child's values the whole agrees with its
    parts, so neither is a sign against it (it was named at batch=256, and not at batch=512, where
    the gap was larger and the level values within bounds)."""
    for parts, level in ((14.4, 5.608), (15.3, 6.511)):
        check, level_check = _check(9.456, parts), _check(9.456, level)
        assert check.contradicts()
        assert settled_checks([check], {"main": level_check}) == []
    # the same way round it stands
    check = _check(9.456, 14.4)
    assert settled_checks([check], {"main": _check(9.456, 12.0)}) == [check]
    # and so for the marks: 79.9 s under 703 s (0.11x), 6x above its parts with the level values
    sums, level_sums = {"main": _check(79.9, 703.3)}, {"main": _check(79.9, 13.27)}
    assert unsettled_contradictions(sums, {("main", "time"): 79.9}, level_sums, {("main", "time"): 79.9}) == {"main"}
    level_sums = {"main": _check(79.9, 300.0)}
    assert unsettled_contradictions(sums, {("main", "time"): 79.9}, level_sums, {("main", "time"): 79.9}) == set()
