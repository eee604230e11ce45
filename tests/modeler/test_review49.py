"""Review 49: `--ranks sum` summed the values per step and epoch and the peaks over the ranks (F2).
F3 (a time falling as 1/ranks beside a parameter held constant for its 2 values was fitted as a
constant) is fixed in tests/modeler/test_strong_split.py; the gates tried for it first made series
that fall in part only much worse (review 53): those regressions are guarded here."""

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


# F3, review 53 -----------------------------------------------------------------------------------

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


def test_a_constant_is_not_split_where_its_values_fall_in_part_only():
    """Review 53: a gate that gave a constant whose values fall with ranks the strong-scaling form
    (tried for review 49 F3) made series that fall in part only much worse, unflagged: a serial part
    beside a 2-valued parameter was dropped (`1.85/p`, 11x too low at 16x the ranks), a flat region
    whose ranks=1 run was slow once rose as `W/p + c * p * log2(p)`. A constant is split only as
    c + W/ranks, its serial part kept (docs/modeling.md, "Strong scaling")."""
    # Amdahl: a serial part, and work split over the ranks beside a 2-valued parameter (the mean
    # over g: 0.3 + 1.44/ranks, c/W = 0.21)
    fitted = PMNFModeler().fit(_dataset(lambda r, g: 0.3 + 0.02 * g / r, (1, 2, 3, 4), (48, 96), 0.05, 3,
                                        seed=53)).models_
    assert len(fitted) == 40
    for fm in fitted:
        if _falls_as_one_over_ranks(fm.model) and len(fm.model.terms) == 1:  # the reverted gate: `W/ranks`, c = 0
            (term,) = fm.model.terms
            assert [(f.parameter, f.exponent, f.log_exponent) for f in term.factors] == [("ranks", -1.0, 0)]
            assert 0.1 < fm.model.constant / term.coefficient < 0.4
    # one slow first run beside g (review 53 R1, 40 series): a flat region stays flat
    rng = np.random.default_rng(1)
    pts = np.array([[r, g] for r in (1, 2, 3, 4) for g in (48, 96)], dtype=float)
    slow = [Series(f"s{i}", "time", pts, tuple(np.array([(rng.uniform(1.5, 3.0) if r == 1 else 1.0)
                                                         * (1 + rng.uniform(-0.03, 0.03))]) for r, _ in pts))
            for i in range(40)]
    near = [all(1 / 1.2 < fm.predict(np.array([[r, 96.0]]))[0] < 1.2 for r in (16.0, 64.0))
            for fm in PMNFModeler().fit(Dataset(("ranks", "g"), slow)).models_]
    assert sum(near) >= 36  # the reverted gate: 2 (it split 37 of 40, up to 100x at 64 ranks)


def _l2(x):
    return float(np.log2(x))


# review 53's reproductions (/tmp/rev53/repro; R7: the review-43 generator's U-shaped step), each
# at 4x and 16x its largest ranks: parameters, {point: repetitions}, truth, the factor of the truth
# the prediction must stay within (HEAD's constant was within it; the reverted gate went 1.6x to
# 845x off), and whether the constant's "misses its measurements" flag must stay
REVIEW53 = {
    "R1 flat, one slow first run, beside g": (
        ("ranks", "g"), {(1, 48): [1.662707], (1, 96): [2.410112], (2, 48): [0.93255], (2, 96): [1.050831],
                         (3, 48): [1.034368], (3, 96): [1.000703], (4, 48): [1.028747], (4, 96): [0.985715]},
        lambda p, g: 1.0, 1.5, False),
    "R2 Amdahl 0.05 + 0.95/p, 20% noise": (
        ("ranks",), {(1,): [1.566209], (2,): [0.55337], (4,): [0.323288], (8,): [0.1653], (16,): [0.168199]},
        lambda p, g: 0.05 + 0.95 / p, 5.0, False),
    "R3 fall then flat": (
        ("ranks",), {(1,): [1.0, 1.02, 0.98], (2,): [0.52, 0.5, 0.53], (4,): [0.28, 0.27, 0.29],
                     (8,): [0.16, 0.165, 0.155], (16,): [0.17, 0.175, 0.168]},
        lambda p, g: 0.16, 1.5, True),
    "R4 Amdahl 0.3 + 0.02 g/p": (
        ("ranks", "g"), {(1, 48): [1.248963, 1.25941, 1.251224], (1, 96): [2.184838, 2.200464, 2.235241],
                         (2, 48): [0.769945, 0.777763, 0.794228], (2, 96): [1.254479, 1.255852, 1.256185],
                         (3, 48): [0.61376, 0.624179, 0.628039], (3, 96): [0.933673, 0.950078, 0.951116],
                         (4, 48): [0.542128, 0.533731, 0.530299], (4, 96): [0.770759, 0.781451, 0.790883]},
        lambda p, g: 0.3 + 0.02 * g / p, 3.0, True),
    "R5 start-up cost at p=1 only, beside g": (
        ("ranks", "g"), {(1, 48): [1.456854], (1, 96): [1.465211], (2, 48): [0.984196], (2, 96): [1.020372],
                         (4, 48): [1.003957], (4, 96): [0.962769], (8, 48): [0.970611], (8, 96): [0.941757],
                         (16, 48): [0.967494], (16, 96): [0.955195]},
        lambda p, g: 1.0, 1.25, False),
    "R6 U 4/p + 0.3 log2 p, beside g": (
        ("ranks", "g"), {(1, 48): [4.946827], (1, 96): [4.914141], (2, 48): [2.136925], (2, 96): [1.450253],
                         (3, 48): [2.047257], (3, 96): [2.029884], (4, 48): [1.515701], (4, 96): [1.208087]},
        lambda p, g: 4 / p + 0.3 * _l2(p), 1.5, False),
    "R7 U-shaped step, 10% noise": (
        ("ranks", "batch"), {(1, 128): [8.606838, 19.128401, 8.309993], (1, 256): [15.210458, 14.259913, 17.000229],
                             (2, 128): [5.987859, 6.01747, 6.326171], (2, 256): [9.590046, 11.469032, 10.147776],
                             (4, 128): [5.014665, 4.476318, 5.234762], (4, 256): [6.735655, 6.47259, 8.444858],
                             (8, 128): [4.673306, 4.434441, 4.189598], (8, 256): [7.674356, 5.191882, 5.27146]},
        lambda p, b: 0.75 + 0.06 * b / p + 0.25 * _l2(p) + 2 * (p - 1) / p + 0.06 * p**0.5, 1.5, False),
    # the same step at 3% noise: c + W/ranks follows it within the noise, but a rising form is about
    # as likely; the version with the lack-of-fit test alone split it (-27% at 16x the ranks)
    "R7b U-shaped step, 3% noise": (
        ("ranks", "batch"), {(1, 128): [8.524816, 17.95721, 8.439123], (1, 256): [15.873643, 15.632988, 16.540367],
                             (2, 128): [6.044785, 5.950416, 6.039834], (2, 256): [9.798227, 11.6562, 9.875691],
                             (4, 128): [4.853267, 4.68943, 5.236796], (4, 256): [6.708927, 6.636802, 8.04911],
                             (8, 128): [4.463798, 4.394407, 4.31764], (8, 256): [7.582046, 5.291392, 5.316302]},
        lambda p, b: 0.75 + 0.06 * b / p + 0.25 * _l2(p) + 2 * (p - 1) / p + 0.06 * p**0.5, 1.3, True),
}


@pytest.mark.parametrize("case", sorted(REVIEW53))
def test_series_that_fall_in_part_only_are_not_made_worse(case):
    params, data, truth, factor, flagged = REVIEW53[case]
    pts = np.array(list(data), dtype=float)
    ds = Dataset(params, [Series(case, "time", pts, tuple(np.array(v) for v in data.values()))])
    (fm,) = PMNFModeler().fit(ds).models_
    top = pts[:, 0].max()
    other = pts[:, 1].max() if len(params) > 1 else None
    for p in (4 * top, 16 * top):
        at = np.array([[p, other]] if other is not None else [[p]], dtype=float)
        ratio = fm.predict(at)[0] / truth(p, other)
        assert 1 / factor < ratio < factor, (case, p, fm.model.formula(), ratio)
    if flagged:  # the constant misses its measurements, and says so
        assert fm.miss is not None
