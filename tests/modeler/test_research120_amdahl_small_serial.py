"""Research 120: Amdahl's 1 + 100/ranks (a serial part of 1% of the work) over ranks 1..16 or 1..64
with non-power-of-two steps: the cost W + c * ranks rises a few percent over its noise, every form
of the engine's cost search follows it about as well, and the kept divided model took an arbitrary
one (`102.4/ranks + 0.127 * ranks^(-1/3) * log2(ranks)^2`), 31-48% off at 16x the ranks in the
median. A kept form that falls or levels off up to 16x the ranks and is not e^3 more likely than
c + W/ranks now gives way to it (`_unclear_form`)."""

from __future__ import annotations

import numpy as np

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler


def _amdahl(ranks, runs, noise, draws=40, seed=1):
    rng = np.random.default_rng(seed)
    r = np.array(ranks, dtype=float)
    true = 1 + 100 / r
    series = [Series(f"f{i}", "time", r[:, None], tuple(true[:, None] * (1 + noise * rng.standard_normal((len(r), runs)))))
              for i in range(draws)]
    fitted = PMNFModeler().fit(Dataset(("ranks",), series)).models_
    target = 16 * r.max()
    errors = np.array([abs(fm.predict(np.array([[target]]))[0] / (1 + 100 / target) - 1) for fm in fitted])
    amdahl = sum(len(fm.model.terms) == 1 and fm.model.constant > 0
                 and [(f.exponent, f.log_exponent) for f in fm.model.terms[0].factors] == [(-1.0, 0)] for fm in fitted)
    return amdahl, errors


def test_small_serial_part_over_ranks_1_to_16_keeps_its_serial_part():
    """5 runs at 5% noise: 4 of 40 draws were c + W/ranks, median error at 16x 47.9%; 38 now, 10.5%."""
    amdahl, errors = _amdahl([1, 2, 4, 8, 16], 5, 0.05)
    assert amdahl >= 30
    assert np.median(errors) < 0.2


def test_small_serial_part_over_uneven_ranks_1_to_64():
    """1,2,3,4,6,...,64, 5 runs at 10% noise: 6 of 40 were c + W/ranks, median error at 16x 38.2%;
    40 now, 5.6%."""
    amdahl, errors = _amdahl([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64], 5, 0.10)
    assert amdahl >= 30
    assert np.median(errors) < 0.12
