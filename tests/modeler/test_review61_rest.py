"""Review 61's rest: a straggler run among 2 repetitions (F3) and a target far beyond a narrow
measured range (F6)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.points import extrap_lines, line_values
from modeler.reach import FAR_REACH, far_target_warning, reach

P, N = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)


def _truth(p, n):
    return 1 + 0.8 * np.log2(p) + 0.05 * n


def _straggler_series(where, seed=0, slow=10.0, name="main"):
    rng = np.random.default_rng(seed)
    pts, values = [], []
    for p, n in itertools.product(P, N):
        v = _truth(p, n) * (1 + rng.uniform(-0.02, 0.02, 2))
        if (p, n) == where:
            v[1] *= slow
        pts.append((p, n))
        values.append(v)
    return Series(name, "time", np.array(pts, dtype=float), values)


@pytest.mark.parametrize("where", [(32, 50), (32, 10), (2, 10), (16, 40)])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_slow_run_among_two_repetitions_does_not_bend_the_model(where, seed):
    # the lines that rank each parameter's terms averaged the straggler's point in: 5.8x to 8.6x
    # off at 4x (n^(11/4) for a linear n); without the straggler the same data give 0.91x to 0.97x
    m = PMNFModeler().fit(Dataset(("p", "n"), [_straggler_series(where, seed)]))
    assert m.predict(np.array([[128.0, 200.0]]))[0, 0] / _truth(128, 200) == pytest.approx(1.0, abs=0.12)
    note = [w for w in m.models_[0].warnings if "straggler" in w]
    assert note and f"(p={where[0]}, n={where[1]})" in note[0]


def test_ordinary_noise_gets_no_straggler_note():
    rng = np.random.default_rng(5)
    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    series = [Series(f"f{i}", "time", x, [v * (1 + rng.uniform(-0.1, 0.1, 2)) for v in 1 + 0.3 * x[:, 0]])
              for i in range(300)]
    models = PMNFModeler().fit(Dataset(("p",), series)).models_
    assert not [fm for fm in models if any("straggler" in w for w in fm.warnings)]


def test_lines_are_averaged_over_the_same_parallel_lines():
    pts = np.array(list(itertools.product(P, N)), dtype=float)
    Y = np.array([[_truth(p, n) for p, n in pts]])
    odd = np.ones_like(Y)
    k = [tuple(r) for r in pts.tolist()].index((32.0, 50.0))
    Y_bad = Y.copy()
    Y_bad[0, k] *= 5.5
    odd[0, k] = 1e-6
    for p, line in enumerate(extrap_lines(pts)):
        got = line_values(line, pts, p, Y_bad, odd)[0]
        # the parallel line through the odd point is left out at every value, not just at its own
        other = pts[:, 1 - p] != pts[k, 1 - p]
        keep = np.array([(pts[other, p] == x) for x in line.x])
        expect = (keep * Y[0, other]).sum(1) / keep.sum(1)
        assert got == pytest.approx(expect, rel=1e-3)
    # one line (a cross's arm): only the odd point itself could go, and it is that value's only point
    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    line = extrap_lines(x)[0]
    y = np.array([[1.0, 2.0, 3.0, 40.0, 5.0]])
    assert line_values(line, x, 0, y, np.array([[1, 1, 1, 1e-3, 1]]))[0] == pytest.approx(y[0])


def test_reach_is_measured_in_spans_of_the_measured_values_on_a_log_scale():
    assert reach(100, 140, 560) == pytest.approx(np.log(4) / np.log(1.4))
    assert reach(1, 16, 1024) == pytest.approx(1.5)
    assert reach(1, 16, 8) == 0.0 and reach(0, 16, 1024) == 0.0
    assert reach(100, 140, 25) == pytest.approx(np.log(4) / np.log(1.4))  # below the range, too
    pts = [np.array([[p, n] for p, n in itertools.product((1, 2, 4, 8, 16), (100, 120, 140))], dtype=float)]
    assert far_target_warning(("ranks", "n"), pts, {"ranks": 1024, "n": 140}) is None
    said = far_target_warning(("ranks", "n"), pts, {"ranks": 16, "n": 560})
    assert said and "n=560 lies 4.1 times the span of its measured values (100 to 140)" in said
    assert "ranks" not in said
    assert far_target_warning(("ranks", "n"), pts, {"ranks": 16 * 2 ** (4 * FAR_REACH + 0.1), "n": 140})


def _narrow_file(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "narrow.jsonl"
    with open(path, "w") as f:
        for p, n in itertools.product((2, 4, 8, 16, 32), (100, 110, 120, 130, 140)):
            v = 1 + 0.3 * p + 0.001 * n**1.5
            f.write(json.dumps({"params": {"p": p, "n": n}, "callpath": "main", "metric": "time",
                                "value": [v * (1 + rng.uniform(-0.02, 0.02)) for _ in range(5)]}) + "\n")
    return path


def test_fit_and_report_warn_of_a_target_far_beyond_a_narrow_range(tmp_path, capsys):
    path = _narrow_file(tmp_path)
    assert cli.main(["fit", str(path), "--at", "n=560"]) == 0
    assert "n=560 lies 4.1 times the span" in capsys.readouterr().err
    assert cli.main(["fit", str(path), "--at", "p=128"]) == 0  # 4x a range of 16x: what sweeps are for
    assert "far beyond" not in capsys.readouterr().err
    out = tmp_path / "r.md"
    assert cli.main(["report", str(path), "--at", "n=560", "--format", "markdown", "-o", str(out)]) == 0
    assert "n=560 lies 4.1 times the span" in out.read_text()


def test_a_straggler_is_said_once_for_every_call_path_it_slowed(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    with open(path, "w") as f:
        for name, scale in (("main", 1.0), ("main->step", 0.5), ("main->load", 0.2)):
            s = _straggler_series((32, 50), seed=3)
            for pt, v in zip(s.points, s.repetitions):
                f.write(json.dumps({"params": {"p": int(pt[0]), "n": int(pt[1])}, "callpath": name,
                                    "metric": "time", "value": [float(x) * scale for x in v]}) + "\n")
    assert cli.main(["fit", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("disagree far more") == 1 and "(p=32, n=50)" in err and "(3 models)" in err


X7 = np.array([[1.0], [2.0], [4.0], [8.0], [16.0], [32.0], [64.0]])


def _one(values, reps=3):
    s = Series("main", "time", X7, [np.full(reps, v) if np.ndim(v) == 0 else np.asarray(v) for v in values])
    return PMNFModeler().fit(Dataset(("p",), [s])).models_[0]


def test_an_exact_step_is_said_not_to_follow_its_measurements():
    # review 61 F4: runs that agree exactly have no noise, and the lack-of-fit test stopped there
    step = np.where(X7[:, 0] <= 8, 1.0, 2.5) * X7[:, 0]
    fm = _one(step)
    assert fm.miss and fm.miss.startswith("does not follow its measurements") and "agree exactly" in fm.miss
    assert _one(2 + 0.5 * X7[:, 0]).miss is None  # exact data that a form follows
    assert _one(step, reps=1).miss is None  # one run a point: never tested


def test_a_coarse_clock_takes_the_noise_of_the_points_whose_runs_differ():
    # most points' runs agree to the tick; the few that do not set the noise, and a model within a
    # tick or so is not marked, while a step far beyond the ticks still is. (Review 85 F1: at these
    # points the values were whole numbers, so no run differed; the test passed on the rounding of
    # equal runs' spread, "2.9e+15x the noise of their repetitions". Half a tick up, they differ.)
    ticks = lambda v: [np.floor(v + 0.5), np.floor(v + 0.5), np.ceil(v + 0.5)]  # noqa: E731
    smooth = 40 + 0.5 * X7[:, 0]
    smooth_runs = [ticks(v) if i in (2, 5) else np.full(3, round(v)) for i, v in enumerate(smooth)]
    assert _one(smooth_runs).miss is None
    step = np.where(X7[:, 0] <= 8, 40.0, 100.0) + 0.5 * X7[:, 0]
    step_runs = [ticks(v) if i in (2, 5) else np.full(3, round(v)) for i, v in enumerate(step)]
    fm = _one(step_runs)
    assert fm.miss and fm.miss.startswith("does not follow") and "noise of their repetitions" in fm.miss
    assert "e+" not in fm.miss  # a ratio to the ticks' noise (85x), not to rounding


def _cross_file(tmp_path, grid=False):
    rng = np.random.default_rng(1)
    P5, N5 = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    pts = list(itertools.product(P5, N5)) if grid else [(p, 10) for p in P5] + [(2, n) for n in N5[1:]]
    path = tmp_path / ("grid.jsonl" if grid else "cross.jsonl")
    with open(path, "w") as f:
        for p, n in pts:
            for name, v in (("sum", 1 + 0.5 * p + 0.1 * n), ("prod", 1 + 0.01 * p * n), ("flat", 3.0 + 0 * p)):
                f.write(json.dumps({"params": {"p": p, "n": n}, "callpath": name, "metric": "time",
                                    "value": list(v * (1 + rng.uniform(-0.05, 0.05, 5)))}) + "\n")
    return path


def test_a_product_on_a_cross_is_said_to_be_unmeasured(tmp_path, capsys):
    # review 61 F5: on lines through one point a sum whose two terms are alike at the centre fits as
    # a product as well, with fewer coefficients: 1 + 0.5 p + 0.1 n came back as 2 + 0.05 p*n, 3.8x
    # high where both grow, and nothing said that the design cannot tell them apart
    assert cli.main(["fit", str(_cross_file(tmp_path)), "--format", "json"]) == 0
    out = capsys.readouterr()
    said = [w for w in json.loads(out.out)["warnings"] if "no point measured varies together" in w]
    assert len(said) == 1 and "prod (time): p·n" in said[0] and "flat" not in said[0]
    models = {m["callpath"]: m for m in json.loads(out.out)["models"]}
    multiplied = [c for c, m in models.items() if any(len(t["factors"]) > 1 for t in m["terms"])]
    assert multiplied and all(f"{c} (time): p·n" in said[0] for c in multiplied)
    md = tmp_path / "r.md"
    assert cli.main(["report", str(_cross_file(tmp_path)), "--format", "markdown", "-o", str(md)]) == 0
    assert "no point measured varies together" in md.read_text()
    # the grid measures the product: nothing said
    assert cli.main(["fit", str(_cross_file(tmp_path, grid=True))]) == 0
    assert "no point measured varies together" not in capsys.readouterr().err


BATCH, HIDDEN = (32, 64, 128, 256, 512), (64, 128, 256, 512, 1024)


def _epoch_dataset(params=("batch", "hidden"), reps=3):
    # a time per epoch with the batch swept: the steps per epoch fall as 1/batch, their number exactly
    rng = np.random.default_rng(4)
    pts = np.array(list(itertools.product(BATCH, HIDDEN)), dtype=float)
    epoch = lambda b, h: 0.5 + 200 / b + 0.002 * h  # noqa: E731
    return Dataset(params, [
        Series("epoch", "time", pts, [epoch(b, h) * (1 + rng.uniform(-0.02, 0.02, reps)) for b, h in pts]),
        Series("train_step", "visits", pts, [np.full(reps, np.ceil(50000 / b)) for b, h in pts]),
    ]), epoch


@pytest.mark.parametrize("reps", [1, 3])
def test_values_that_fall_along_a_parameter_not_named_ranks_get_a_falling_term(reps):
    # review 61 F7: 8.1 - 0.82 * log2(batch), SMAPE 23% and below zero at 4x the batch; the same data
    # under the name ranks got c + W/ranks
    data, epoch = _epoch_dataset(reps=reps)
    m = PMNFModeler().fit(data)
    at = np.array([[2048.0, 1024.0]])
    assert m.predict(at)[0, 0] == pytest.approx(epoch(2048, 1024), rel=0.03)
    assert m.predict(at)[1, 0] == pytest.approx(50000 / 2048, rel=0.03)
    assert all(fm.smape < 2 and fm.miss is None for fm in m.models_)
    assert any(f.parameter == "batch" and f.exponent == -1 for t in m.models_[0].model.terms for f in t.factors)


def test_noisy_flat_and_growing_series_are_not_split_along_other_parameters():
    rng = np.random.default_rng(9)
    pts = np.array(list(itertools.product(BATCH, HIDDEN)), dtype=float)
    series = [Series(f"flat{i}", "time", pts, [2.0 * (1 + rng.uniform(-0.1, 0.1, 3)) for _ in pts]) for i in range(150)]
    series += [Series(f"grow{i}", "time", pts, [(1 + 0.01 * b + 0.002 * h) * (1 + rng.uniform(-0.1, 0.1, 3))
                                                 for b, h in pts]) for i in range(50)]
    for fm in PMNFModeler().fit(Dataset(("batch", "hidden"), series)).models_:
        assert all(f.exponent >= 0 for t in fm.model.terms for f in t.factors), fm.model.formula()


@pytest.mark.parametrize("name", ["batch", "x"])
def test_exact_steps_per_epoch_over_one_parameter_are_not_a_constant(name):
    # a count falling as ceil(1000 / batch), exact in every run, with one parameter: the constant 23.9
    # in session 22 (cost_linear refused c < 0 beyond a noise that exact data do not have)
    xs = np.array([4.0, 8.0, 16.0, 32.0, 64.0])
    s = Series("main->step", "visits", xs[:, None], [np.full(3, np.ceil(1000 / x)) for x in xs])
    fm = PMNFModeler().fit(Dataset((name,), [s])).models_[0]
    assert fm.smape < 1 and fm.model.terms
    assert fm.predict({name: [256.0]})[0] == pytest.approx(1000 / 256, rel=0.1)
