"""A model that turns up beyond the measured ranks where the values do not (review 113): the floor
`max(9.3 / ranks, 0.61)` over ranks 1..16 with 5 runs at 1% noise is fitted as
`9.269 / ranks + 2.9e-05 * ranks^2 * log2(ranks)`, 20-25x the truth at 16x the ranks. Nothing in the
values tells it from a U shape whose turn lies just beyond them, so it is said
(`end_slope.unseen_rise_note`); and the end-slope note, which said such predictions were likely
low, reads the direction from the model's own growth beyond the sweep."""

from __future__ import annotations

import numpy as np
import pytest

from modeler.end_slope import end_slope_note, unseen_rise_note
from modeler.model import Factor, Model, Term
from tests.modeler.test_u_shape import _fit, _predict

FLOOR_RANKS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_floor_given_a_rise_beyond_the_ranks_is_warned_of(seed):
    fm = _fit(lambda r: np.maximum(9.3 / r, 0.61), ranks=FLOOR_RANKS, runs=5, noise=0.01, seed=seed)
    assert _predict(fm, 256.0) > 5 * 0.61  # the rise the values do not show (if it goes, so may this test)
    said = [w for w in fm.warnings if "turns up beyond ranks=16" in w]
    assert len(said) == 1, fm.warnings
    assert "main->f [time]" in said[0] and "the measured values do not rise" in said[0]
    assert not any("likely low" in w for w in fm.warnings), fm.warnings


def test_a_u_shape_whose_turn_the_values_show_is_not_warned_of():
    fm = _fit(lambda r: 100.0 / r + 0.5 * r)  # ranks 1..64: the values turn up from 16 on
    assert _predict(fm, 1024.0) == pytest.approx(100.0 / 1024 + 512, rel=0.05)
    assert not any("turns up beyond" in w for w in fm.warnings), fm.warnings


def test_unseen_rise_note_needs_a_rise_and_flat_values():
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    flat_end = np.array([16.0, 8.0, 4.0, 2.0, 2.0])
    turning = Model(("ranks",), 0.0, (Term(16.0, (Factor("ranks", -1.0, 0),)), Term(0.001, (Factor("ranks", 2.0, 0),))))
    falling = Model(("ranks",), 1.0, (Term(16.0, (Factor("ranks", -1.0, 0),)),))
    spread, counts = np.full(5, 0.01), np.full(5, 5)
    note = unseen_rise_note(("ranks",), pts, flat_end, spread, counts, turning, "ranks", "r [time]")
    assert note is not None and note.startswith("r [time]: the model turns up beyond ranks=16: ")
    assert "at ranks=64" in note
    assert unseen_rise_note(("ranks",), pts, flat_end, spread, counts, falling, "ranks") is None
    risen = np.array([16.0, 8.0, 4.0, 2.0, 2.6])  # the values turn up: the rise is measured
    assert unseen_rise_note(("ranks",), pts, risen, spread, counts, turning, "ranks") is None
    assert unseen_rise_note(("ranks",), pts, flat_end, spread, counts, turning, "batch") is None


def test_end_slope_direction_follows_the_model_beyond_the_sweep():
    """Values flat between ranks 8 and 16; a model still falling there (as ranks^-0.72) but turning
    up beyond: the values part from it as `fall more slowly`, and its predictions are high, not low
    as the slope at the end alone said."""
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    values = np.array([16.0, 8.0, 4.0, 2.0, 2.0])
    turning = Model(("ranks",), 0.0, (Term(16.0, (Factor("ranks", -1.0, 0),)), Term(0.001, (Factor("ranks", 2.0, 0),))))
    note = end_slope_note(("ranks",), pts, values, np.full(5, 0.01), np.full(5, 5), turning)
    assert note is not None and "fall more slowly than the model" in note and note.endswith("likely high")
    # the same values against a model that keeps falling beyond: low, as before
    falling = Model(("ranks",), 0.0, (Term(16.0, (Factor("ranks", -1.0, 0),)),))
    note = end_slope_note(("ranks",), pts, values, np.full(5, 0.01), np.full(5, 5), falling)
    assert note is not None and note.endswith("likely low")
