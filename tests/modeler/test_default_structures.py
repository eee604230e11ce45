"""With two parameters the default mode also fits a + b + a*b, which none of Extra-P's four
structures is: the inclusive time of a training loop, a step growing with both parameters, an
evaluation with one and data loading with the other (review 25: the training function came back
additive, -88% at 4x its sweep)."""

from __future__ import annotations

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.structures import default_structures, extrap_structures

BATCH = (16.0, 32.0, 64.0, 128.0, 256.0)
WIDTH = (32.0, 64.0, 128.0, 256.0, 512.0)


def _loop(b, w):
    """data loading ~ batch, evaluation ~ width^2, the step ~ batch * width^2"""
    return 0.01 + 2e-4 * b + 1e-6 * w**2 + 2e-8 * b * w**2


def _fit(noise: float, compat: str | None = None, seed: int = 0):
    pts = np.array([(b, w) for b in BATCH for w in WIDTH])
    rng = np.random.default_rng(seed)
    exact = _loop(pts[:, 0], pts[:, 1])
    reps = tuple(v * (1 + noise * rng.standard_normal(5)) for v in exact)
    return PMNFModeler(compat=compat).fit(Dataset(("batch", "width"), [Series("loop", "time", pts, reps)])).models_[0]


def test_the_structure_is_the_default_modes_only():
    assert ((0,), (1,), (0, 1)) in default_structures(2)
    assert ((0,), (1,), (0, 1)) not in extrap_structures(2)
    assert default_structures(1) == extrap_structures(1) and default_structures(3) == extrap_structures(3)


def test_a_training_loop_comes_back_exactly_noise_free():
    fm = _fit(0.0)
    shape = sorted(tuple((f.parameter, f.exponent, f.log_exponent) for f in t.factors) for t in fm.model.terms)
    assert shape == [(("batch", 1.0, 0.0),), (("batch", 1.0, 0.0), ("width", 2.0, 0.0)), (("width", 2.0, 0.0),)]
    far = np.array([[1024.0, 2048.0]])
    assert fm.predict(far)[0] == pytest.approx(_loop(1024.0, 2048.0), rel=1e-6)
    # Extra-P's structures cannot hold it: its compatible mode misses the form
    assert len(_fit(0.0, "extrap").model.terms) < 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_noisy_training_loop_keeps_its_growth_with_both(seed):
    fm = _fit(0.05, seed=seed)
    far = np.array([[1024.0, 2048.0]])
    assert fm.predict(far)[0] == pytest.approx(_loop(1024.0, 2048.0), rel=0.25)
    assert any({f.parameter for f in t.factors} == {"batch", "width"} for t in fm.model.terms)


def test_only_richly_measured_pairs_get_it():
    """Review 31: on 3 x 3 grids and sparse designs its four coefficients followed the noise."""
    from modeler.pmnf.default_mode import rich_pairs

    grid5 = np.array([(b, w) for b in BATCH for w in WIDTH])
    assert rich_pairs(grid5) == {(0, 1)}
    assert rich_pairs(grid5[1:]) == {(0, 1)}  # a failed run or two: still a grid
    # review 32: a point measured inside the range, off the grid, does not make it sparse
    assert rich_pairs(np.vstack([grid5, [[96.0, 192.0]]])) == {(0, 1)}
    # review 34: three checks in an L, or a 2 x 2 block of them, share values: still no row or column
    ell = [[96.0, 192.0], [96.0, 384.0], [160.0, 192.0]]
    assert rich_pairs(np.vstack([grid5, ell])) == {(0, 1)}
    assert rich_pairs(np.vstack([grid5, ell, [[160.0, 384.0]]])) == {(0, 1)}
    assert rich_pairs(np.vstack([grid5[5:], ell])) == {(0, 1)}  # a row short as well
    # review 35: a 4 x 4 grid extended by a line of larger values (a scaling run) stays a grid
    grid4 = np.array([(b, w) for b in BATCH[:4] for w in WIDTH[:4]])
    line = np.array([(BATCH[0], 2.0**k) for k in range(10, 15)])
    assert rich_pairs(np.vstack([grid4, line])) == {(0, 1)}
    assert rich_pairs(np.vstack([grid4, line, line[:, ::-1] * [1, 0.001]])) == {(0, 1)}
    assert rich_pairs(np.array([(b, w) for b in BATCH[:4] for w in WIDTH[:4]])) == {(0, 1)}  # 4 x 4 helped
    assert rich_pairs(np.array([(b, w) for b in BATCH[:3] for w in WIDTH[:3]])) == set()
    cross = np.array([(b, WIDTH[2]) for b in BATCH] + [(BATCH[2], w) for w in WIDTH])
    assert rich_pairs(cross) == set()
    band = np.array([(BATCH[i], WIDTH[j]) for i in range(5) for j in range(5) if abs(i - j) <= 1])
    assert rich_pairs(band) == set()
    three = np.array([(b, w, r) for b in BATCH for w in WIDTH for r in (1.0, 2.0, 4.0)])
    assert rich_pairs(three) == {(0, 1)}


def _full_structure(fm) -> bool:
    return sorted(len(t.factors) for t in fm.model.terms) == [1, 1, 2]


def test_a_small_grid_is_fitted_with_extrap_structures_only():
    pts = np.array([(b, w) for b in BATCH[:3] for w in WIDTH[:3]])
    reps = tuple(np.full(2, v) for v in _loop(pts[:, 0], pts[:, 1]))
    fm = PMNFModeler().fit(Dataset(("batch", "width"), [Series("loop", "time", pts, reps)])).models_[0]
    assert not _full_structure(fm)
    assert _full_structure(_fit(0.0))
