"""Research 134: an all-gather's time, (p - 1) M * size, beside the size (review 112 LOW-1).

PMNF follows (p - 1) * size only as c + b * size + a * ranks * size: one coefficient more than a
single product term, and ranks^(2/3) * log2(ranks) * size, 3-4% from (p - 1) over ranks 1..32, won
by that coefficient's penalty at 5-10% noise (about 33% low at 16x the ranks). The collective step
(`modeler.latency`) now also tries c + a * (ranks - 1) * u(size), 2 coefficients, where the values
look like a collective's (about 0 on one rank), taking it on the evidence and leave-one-out tests
the collective's forms pass.
"""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.fit import GroupFit
from modeler.pmnf.hypotheses import EXPONENTS

RANKS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
SIZES = (16.0, 32.0, 64.0, 128.0, 256.0)


def _allgather(n_paths, noise, runs, seed, ranks=RANKS):
    """`benchmarks/comm_shapes.py`'s all-gather beside the size: (r - 1) * M * size / 16."""
    rng = np.random.default_rng(seed)
    pts = np.array([(r, s) for r in ranks for s in SIZES])
    series, truths = [], []
    for i in range(n_paths):
        M = 10 ** rng.uniform(0.5, 2.0)
        t = ((pts[:, 0] - 1.0) * M * pts[:, 1] / 16)[:, None] * (1.0 + noise * rng.standard_normal((len(pts), runs)))
        series.append(Series(f"main->f{i}", "time", pts, tuple(t)))
        truths.append(511.0 * M * SIZES[-1] / 16)
    return Dataset(("ranks", "size"), series), np.array(truths)


def _errors_at_16x(dataset, truths):
    models = PMNFModeler().fit(dataset).models_
    pred = np.array([fm.predict(np.array([[512.0, SIZES[-1]]]))[0] for fm in models])
    return models, np.abs(pred - truths) / truths


def _is_gather(model) -> bool:
    """c + a * ranks * u - a * u: a ranks^1 * u term and a u term with opposite coefficients."""
    prod = [t for t in model.terms if any(f.parameter == "ranks" and f.exponent == 1 and not f.log_exponent
                                         for f in t.factors) and len(t.factors) == 2]
    alone = [t for t in model.terms if len(t.factors) == 1 and t.factors[0].parameter == "size"]
    return (len(prod) == 1 and len(alone) == 1 and prod[0].coefficient > 0
            and alone[0].coefficient == pytest.approx(-prod[0].coefficient, rel=1e-12))


@pytest.mark.parametrize("noise, runs, seed, ranks", [(0.10, 5, 1, RANKS), (0.10, 5, 5, RANKS[1:]), (0.05, 1, 3, RANKS)])
@pytest.mark.filterwarnings("ignore")
def test_allgather_beside_size(noise, runs, seed, ranks):
    # 20 draws; before: median error at 16x the ranks 32-32.4%, 4-6 of 20 within 5% (the rest
    # ranks^(2/3) * log2(ranks) * size); now median 1.3-2.9%, 12-13 within 5%. Over ranks 2..32 the
    # form's value on one rank (its c) stands for the measured 0
    models, err = _errors_at_16x(*_allgather(20, noise, runs, seed, ranks))
    assert np.median(err) < 0.05, (err, [str(fm.model) for fm in models])
    assert (err < 0.05).sum() >= 10, err
    assert sum(_is_gather(fm.model) for fm in models) >= 8, [str(fm.model) for fm in models]


@pytest.mark.filterwarnings("ignore")
def test_taken_model_reads_as_a_model_of_the_values():
    models, _ = _errors_at_16x(*_allgather(20, 0.10, 5, seed=1))
    taken = [fm for fm in models if _is_gather(fm.model)]
    assert taken
    for fm in taken:
        # no ranks^(-1) term with a coefficient of 0 (the cost form has no constant)
        assert "ranks^(-1)" not in str(fm.model), str(fm.model)
        assert all(t.coefficient != 0 for t in fm.model.terms)
        # its quality is that of the 2-coefficient fit: the adjusted R^2 counts one predictor
        assert np.isfinite(fm.cv_smape) and 0.99 < fm.ar2 < 1.0
        lo, hi = fm.prediction_range(np.array([[512.0, SIZES[-1]]]))
        p = fm.predict(np.array([[512.0, SIZES[-1]]]))[0]
        assert lo[0] <= p <= hi[0]
        assert all(a.cov.shape == (1 + len(a.model.terms),) * 2 for a in fm.alternatives)


def test_cost_gather_exact_values():
    from modeler.latency import cost_gather

    # noise-free (r - 1) * 3 * size: c = 0, a = 3; the cost form's design reproduces the fitted values
    pts = np.array([(r, s) for r in RANKS for s in SIZES])
    ranks = pts[:, 0]
    y = ((ranks - 1.0) * 3.0 * pts[:, 1])[None, :]
    w = 1.0 / np.maximum(np.abs(y), 0.1 * np.median(np.abs(y))) ** 2
    plain = GroupFit([0], pts, y, np.zeros((1, len(pts), 1)), np.zeros((1, 1)), w, [[]])
    u = EXPONENTS.index((1, 0))
    fitted, cost = cost_gather(plain, ranks, 0, 1, np.array([u]))
    assert fitted.coef[0] == pytest.approx([0.0, 3.0], abs=1e-9)
    assert np.einsum("snk,sk->sn", cost.X, cost.coef) == pytest.approx(y, rel=1e-9, abs=1e-9)
    assert cost.coef[0, 0] == 0.0 and cost.coef[0, 2] == -cost.coef[0, 3]
    assert len(fitted.terms[0]) == 1 and cost.predictors[0] == 1


@pytest.mark.filterwarnings("ignore")
def test_concave_rise_beside_size_is_not_taken_as_gather():
    # 0 on one rank but concave: a * ranks^(1/2) * log2(ranks) * size, 5 runs at 1% noise, keeps its form
    rng = np.random.default_rng(7)
    pts = np.array([(r, s) for r in RANKS for s in SIZES])
    series = []
    for i in range(10):
        a = 10 ** rng.uniform(-1, 1)
        t = (a * np.sqrt(pts[:, 0]) * np.log2(pts[:, 0]) * pts[:, 1])[:, None] * (1 + 0.01 * rng.standard_normal((len(pts), 5)))
        series.append(Series(f"main->c{i}", "time", pts, tuple(t)))
    models = PMNFModeler().fit(Dataset(("ranks", "size"), series)).models_
    assert not any(_is_gather(fm.model) for fm in models), [str(fm.model) for fm in models]


@pytest.mark.filterwarnings("ignore")
def test_ring_beside_size_keeps_its_latency_form():
    # a ring all-reduce beside the message size is no all-gather: its bandwidth part saturates
    rng = np.random.default_rng(11)
    pts = np.array([(r, s) for r in RANKS for s in SIZES])
    series = []
    for i in range(10):
        M = 10 ** rng.uniform(0.5, 2)
        a = M * 10 ** rng.uniform(-3, -1.5)
        t = (2 * (pts[:, 0] - 1) / pts[:, 0] * M * pts[:, 1] / 16 + 2 * (pts[:, 0] - 1) * a)
        t = t[:, None] * (1 + 0.01 * rng.standard_normal((len(pts), 5)))
        series.append(Series(f"main->r{i}", "time", pts, tuple(t)))
    models = PMNFModeler().fit(Dataset(("ranks", "size"), series)).models_
    assert not any(_is_gather(fm.model) for fm in models), [str(fm.model) for fm in models]


@pytest.mark.filterwarnings("ignore")
def test_rise_that_falls_again_is_not_taken_as_gather():
    # a * log2(ranks) / ranks * size is 0 on one rank too, but falls beyond 2 ranks: the form, a better
    # fit than the constant kept, was 150-190x the truth at 16x the ranks before it had to follow the
    # values within their noise
    rng = np.random.default_rng(13)
    pts = np.array([(r, s) for r in RANKS for s in SIZES])
    series = []
    for i in range(10):
        a = 10 ** rng.uniform(-1, 1)
        t = (a * np.log2(pts[:, 0]) / pts[:, 0] * pts[:, 1] / 16)[:, None]
        t = t * (1 + 0.05 * rng.standard_normal((len(pts), 5)))
        series.append(Series(f"main->h{i}", "time", pts, tuple(t)))
    models = PMNFModeler().fit(Dataset(("ranks", "size"), series)).models_
    assert not any(_is_gather(fm.model) for fm in models), [str(fm.model) for fm in models]
