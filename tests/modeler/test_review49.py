"""Review 49: `--ranks sum` summed the values per step and epoch and the peaks over the ranks (F2);
a time falling as 1/ranks beside a parameter held constant (2 values) was fitted as a constant (F3)."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from modeler import cli
from modeler.aggregate import dataset_from_runs
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.readers.runs import load_runs
from modeler.report.runs import groups_from_runset
from modeler_synthetic_runs import write_rank_file

MS = 10**6
STEP_LOOP = "main->train->train_epoch"
EPOCH_LOOP = "main->train"


def _series(ds: Dataset, callpath: str, metric: str) -> Series:
    (s,) = [s for s in ds.series if s.callpath == callpath and s.metric == metric]
    return s


# F2 ----------------------------------------------------------------------------------------------

def _step_ms(ranks: int, batch: int, rank: int) -> int:
    return batch + 2 * rank  # ranks differ a little, as they do (imbalance)


def _rss(rank: int) -> int:
    return (100 + 10 * rank) * 2**20


def _sweep(root) -> None:
    """ranks 1, 2, 4 x batch 8, 16, 32: 5 steps of `_step_ms` ms per rank, their data wait and
    communication, one epoch of 5 steps, and each rank's peak resident memory."""
    for ranks in (1, 2, 4):
        for batch in (8, 16, 32):
            run = f"r{ranks}-b{batch}"
            for rank in range(ranks):
                step = _step_ms(ranks, batch, rank) * MS
                write_rank_file(
                    root / run, run_id=run, params={"ranks": ranks, "batch": batch}, rank=rank, world_size=ranks,
                    profile={(0,): (1, 6 * step, MS), (0, 1): (1, 5 * step, 0), (0, 1, 2): (5, 5 * step, 5 * step)},
                    steps=[{"region": 2, "duration_ns": step, "data_wait_ns": MS, "comm_ns": 2 * MS}
                           for _ in range(5)],
                    epochs=[{"region": 1, "duration_ns": 5 * step, "memory": {"rss_peak_bytes": _rss(rank)}}],
                )


def test_ranks_sum_keeps_a_step_a_step_and_a_peak_a_peak(tmp_path):
    _sweep(tmp_path)
    rs = load_runs([tmp_path])
    total, mean = dataset_from_runs(rs, ranks="sum"), dataset_from_runs(rs, ranks="mean")
    st = _series(total, STEP_LOOP, "step_time")
    for pt, reps in zip(st.points, st.repetitions):
        ranks, batch = int(pt[0]), int(pt[1])
        # the mean over ranks of each rank's step, in seconds: not ranks times it
        assert reps.tolist() == pytest.approx([np.mean([_step_ms(ranks, batch, r) for r in range(ranks)]) / 1e3])
    for cp, metric in ((STEP_LOOP, "step_time"), (STEP_LOOP, "data_wait"), (STEP_LOOP, "step_comm_time"),
                       (EPOCH_LOOP, "epoch_time")):
        assert _series(total, cp, metric).values().tolist() == pytest.approx(_series(mean, cp, metric).values().tolist())
    assert _series(total, STEP_LOOP, "data_wait").values().tolist() == pytest.approx([0.001] * 9)
    # a peak is the largest rank's, not the sum of the ranks' peaks
    rss = _series(total, EPOCH_LOOP, "peak_rss")
    assert rss.values().tolist() == pytest.approx([_rss(int(r) - 1) for r in rss.points[:, 0]])
    # what is a total over the run is still summed
    t = _series(total, STEP_LOOP, "time")
    r4 = t.points[:, 0] == 4
    assert t.values()[r4].tolist() == pytest.approx(
        [sum(5 * _step_ms(4, int(b), r) for r in range(4)) / 1e3 for b in t.points[r4, 1]])
    said = [w for w in total.warnings if w.startswith("--ranks sum: not summed")]
    assert len(said) == 1
    assert "step_time, epoch_time, data_wait, step_comm_time are the mean over ranks" in said[0]
    assert "peak_rss is the largest rank's peak" in said[0]
    assert not any("not summed" in w for w in mean.warnings)
    # runs of one rank each: nothing is reduced otherwise, and nothing is said
    for batch in (8, 16, 32):
        write_rank_file(tmp_path / "one" / f"b{batch}", run_id=f"b{batch}", params={"batch": batch},
                        profile={(0,): (1, batch * MS, MS), (0, 1): (1, batch * MS, 0)},
                        epochs=[{"region": 1, "duration_ns": batch * MS}])
    one = dataset_from_runs(load_runs([tmp_path / "one"]), ranks="sum")
    assert _series(one, EPOCH_LOOP, "epoch_time").values().tolist() == pytest.approx([0.008, 0.016, 0.032])
    assert not any("not summed" in w for w in one.warnings)


def test_fit_export_and_report_agree_on_the_step_under_ranks_sum(tmp_path, capsys):
    _sweep(tmp_path / "runs")
    out = tmp_path / "sum.jsonl"
    assert cli.main(["export", "--extrap", str(out), "--ranks", "sum", "-q", str(tmp_path / "runs")]) == 0
    exported = {(line["params"]["ranks"], line["params"]["batch"]): line["value"]
                for line in map(json.loads, out.read_text().splitlines())
                if line["metric"] == "step_time" and line["callpath"] == STEP_LOOP}
    # the report's Training table: the mean over ranks of each rank's median step (`loop_stats`)
    groups = groups_from_runset(load_runs([tmp_path / "runs"]))
    for g in groups:
        shown = g.loop_stats("steps")[STEP_LOOP]["duration"] / 1e9
        assert exported[(g.params["ranks"], g.params["batch"])] == pytest.approx([shown])
    # `fit` models those values: step = batch ms + (ranks - 1) ms, exactly
    capsys.readouterr()
    assert cli.main(["fit", str(tmp_path / "runs"), "--ranks", "sum", "--metric", "step_time", "--at",
                     "ranks=8,batch=64", "--format", "json", "-q"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["models"]
    assert row["prediction"] == pytest.approx(0.064 + 0.007, rel=0.02)


# F3 ----------------------------------------------------------------------------------------------

def _dataset(f, ranks, others, noise, reps, n=40, seed=0, scale=1.0) -> Dataset:
    """`n` series c x f(ranks, g) for c in [0.5, 2] x `scale`, uniform multiplicative noise, `reps`
    repetitions."""
    rng = np.random.default_rng(seed)
    pts = np.array([[r, g] for r in ranks for g in others], dtype=float)
    out = []
    for i in range(n):
        c = rng.uniform(0.5, 2.0) * scale
        out.append(Series(f"s{i}", "time", pts,
                          tuple(c * f(r, g) * (1 + rng.uniform(-noise, noise, reps)) for r, g in pts)))
    return Dataset(("ranks", "g"), out)


def _falls_as_one_over_ranks(model) -> bool:
    return any(f.parameter == "ranks" and f.exponent < 0 for t in model.terms for f in t.factors)


def test_a_time_falling_as_one_over_ranks_beside_a_two_valued_parameter_is_split():
    """The review's case (0.02 g / ranks, g 48 and 96, ranks 1 to 4, 1% noise, 2 repetitions): the
    plain fit is a constant, since PMNF has no falling term and g is held constant, and the split
    form was never taken for a constant."""
    rng = np.random.default_rng(1)
    pts = np.array([[r, g] for r in (1, 2, 3, 4) for g in (48, 96)], dtype=float)
    reps = tuple(0.02 * g / r * (1 + rng.uniform(-0.01, 0.01, 2)) for r, g in pts)
    (fm,) = PMNFModeler().fit(Dataset(("ranks", "gbatch"), [Series("compute", "time", pts, reps)])).models_
    assert _falls_as_one_over_ranks(fm.model), fm.model.formula()
    assert not any(f.parameter == "gbatch" for t in fm.model.terms for f in t.factors)  # held constant
    # held constant in gbatch, the model is c / ranks: it falls 8x from 1 to 8 ranks, as the values do
    at1, at8 = fm.predict({"ranks": [1.0, 8.0], "gbatch": [96.0, 96.0]})
    assert at1 / at8 == pytest.approx(8.0, rel=0.01)
    # ranks alone, 2 to 64, 1% noise: the plain fit is a constant there too
    r = np.array([[2.0], [4.0], [8.0], [16.0], [32.0], [64.0]])
    reps = tuple(1.5 / x * (1 + rng.uniform(-0.01, 0.01, 2)) for x in r[:, 0])
    (fm,) = PMNFModeler().fit(Dataset(("ranks",), [Series("compute", "time", r, reps)])).models_
    assert _falls_as_one_over_ranks(fm.model), fm.model.formula()
    assert fm.predict({"ranks": [256.0]})[0] == pytest.approx(1.5 / 256, rel=0.05)


def test_falling_series_are_split_and_flat_or_noisy_ones_are_not():
    """Over ranks 1-4, 1-16 and 2-64 with 1, 2 or 5 repetitions: values falling as 1/ranks (5%
    noise, beside a 2-valued parameter; near 1 or near 1e-4) are split; flat ones (a constant, or
    a 2-valued parameter's effect alone; noise-free, 5% or 10%) get no 1/ranks term beyond the
    rare false alarm of a 1% test."""
    falling = flat = split_falling = split_flat = 0
    for ranks in ((1, 2, 3, 4), (1, 2, 4, 8, 16), (2, 4, 8, 16, 32, 64)):
        for reps in (1, 2, 5):
            seed = zlib.crc32(repr((ranks, reps)).encode())
            for scale in (1.0, 1e-4):  # seconds or a tenth of a millisecond: the same decision
                fitted = PMNFModeler().fit(_dataset(lambda r, g: 0.02 * g / r, ranks, (48, 96), 0.05, reps, seed=seed,
                                                    scale=scale)).models_
                falling += len(fitted)
                split_falling += sum(_falls_as_one_over_ranks(fm.model) for fm in fitted)
            for noise in (0.0, 0.05, 0.1):
                for f in (lambda r, g: 1.0, lambda r, g: 0.5 + 0.01 * g):
                    fitted = PMNFModeler().fit(_dataset(f, ranks, (48, 96), noise, reps, seed=seed + 1)).models_
                    flat += len(fitted)
                    split_flat += sum(_falls_as_one_over_ranks(fm.model) for fm in fitted)
    assert split_falling >= 0.95 * falling, (split_falling, falling)
    assert split_flat <= 0.01 * flat, (split_flat, flat)


def test_the_t_quantiles_of_the_fall_test_are_student_s():
    """`strong_scaling` keeps its own table (scipy.stats costs the command line half a second to
    import): it must be scipy's to the table's 3 decimals."""
    import scipy.stats as st  # a dependency of the project (pyproject.toml)

    from modeler.strong_scaling import _T99, _Z99

    assert [round(float(st.t.ppf(0.99, d)), 3) for d in range(1, len(_T99) + 1)] == list(_T99)
    assert _Z99 == pytest.approx(float(st.norm.ppf(0.99)), abs=1e-12)
