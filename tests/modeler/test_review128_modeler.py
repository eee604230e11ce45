"""Review 128's modeler findings: MED-1 (a parameter with two values, whose levels a series differs
in, was modeled between them, its range and run spread excluding every run, unmarked) and LOW-4
(DataLoader workers shown as `[subprocess]`, their real headers carrying `ppid`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeler.cli import main as cli_main
from modeler.commands.fit import fit_dataset
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.readers.runs import read_runs
from modeler_synthetic_runs import MS, OK_END, write_rank_file, write_sweep

BATCH = (8.0, 16.0, 32.0, 64.0, 128.0)
WIDTH = (32.0, 48.0, 64.0, 96.0, 128.0)


def _dataset(seed: int = 0, noise: float = 0.01) -> Dataset:
    """ranks 1, 2 x batch x width, 3 repetitions: `sync` = 0.04 * ranks (review 128's sync_ranks),
    `flat` = 0.01 + 2.4e-5 * width^2 (no effect of ranks), `step` = 0.1 + 0.006 * batch (+0.2 at 2 ranks)."""
    rng = np.random.default_rng(seed)
    pts = np.array([(r, b, w) for r in (1.0, 2.0) for b in BATCH for w in WIDTH])
    truth = {
        "sync": lambda r, b, w: 0.04 * r,
        "flat": lambda r, b, w: 0.01 + 2.4e-5 * w ** 2,
        "step": lambda r, b, w: 0.1 + 0.006 * b + 0.2 * (r == 2),
    }
    series = [Series(name, "time", pts, [f(*p) * np.exp(rng.normal(0, noise, 3)) for p in pts])
              for name, f in truth.items()]
    return Dataset(("ranks", "batch", "width"), series)


def _by_name(models):
    return {fm.callpath: fm for fm in models}


TARGET = {"ranks": 2.0, "batch": 128.0, "width": 128.0}


def test_a_series_whose_levels_differ_is_modeled_on_the_targets_level():
    # review 128 MED-1: sync_ranks 0.040 s at ranks=1, 0.083 s at ranks=2, modeled as 0.0477 at ranks=2
    models = _by_name(PMNFModeler(target=TARGET).fit(_dataset()).models_)
    point = {k: [v] for k, v in TARGET.items()}
    for name, truth in (("sync", 0.08), ("step", 0.1 + 0.006 * 128 + 0.2)):
        fm = models[name]
        assert fm.predict(point)[0] == pytest.approx(truth, rel=0.02)
        lo, hi = fm.prediction_range(point)
        assert lo[0] <= truth * 1.02 and hi[0] >= truth * 0.98
        (e,) = fm.levels
        assert e.parameter == "ranks" and e.levels == (1.0, 2.0) and e.modeled_at == 2.0
        assert e.values[0] < e.values[1]
        assert fm.points == 25 and fm.miss is None
        assert any("modeled on the runs at ranks=2 only" in w for w in fm.warnings)
        assert not any("modeled as constant in ranks" in w for w in fm.warnings)
    # and at ranks=1, the ranks=1 runs'
    sync1 = _by_name(PMNFModeler(target={**TARGET, "ranks": 1.0}).fit(_dataset()).models_)["sync"]
    assert sync1.predict(point)[0] == pytest.approx(0.04, rel=0.02)


def test_a_series_that_does_not_depend_on_the_parameter_keeps_its_model_from_both_levels():
    # the model form over the other parameters must not get worse: the same model as before
    ds = _dataset()
    new = _by_name(PMNFModeler(target=TARGET).fit(ds).models_)["flat"]
    before = PMNFModeler(target=TARGET)
    before._level_refits = False  # the modeling before review 128
    old = _by_name(before.fit(ds).models_)["flat"]
    assert new.levels == () and new.points == 50
    assert new.model == old.model and new.model.formula(4) == old.model.formula(4)
    assert any("only 2 value(s) of parameter ranks: modeled as constant in ranks" in w for w in new.warnings)


def test_no_level_difference_is_found_where_there_is_none():
    # the false alarms on series that do not depend on the parameter, over many noisy draws
    flagged = 0
    for seed in range(20):
        ds = _dataset(seed, noise=0.1)
        only_flat = ds.like([s for s in ds.series if s.callpath == "flat"])
        flagged += bool(PMNFModeler(target=TARGET).fit(only_flat).models_[0].levels)
    assert flagged == 0


def test_without_a_measured_level_the_row_is_marked_and_its_range_holds_both_levels():
    for target in (None, {**TARGET, "ranks": 4.0}):
        sync = _by_name(PMNFModeler(target=target).fit(_dataset()).models_)["sync"]
        assert sync.miss and sync.miss.startswith("does not follow ranks")
        assert "0.04" in sync.miss and "0.08" in sync.miss
        (e,) = sync.levels
        assert e.modeled_at is None
        assert sorted(k for k, _ in sync.level_models) == [("ranks", 1.0), ("ranks", 2.0)]
        at4 = {"ranks": [4.0], "batch": [128.0], "width": [128.0]}
        lo, hi = sync.prediction_range(at4)
        assert lo[0] <= 0.0405 and hi[0] >= 0.0795
        assert any("the dependence on ranks is not modeled" in w for w in sync.warnings)


def test_the_warning_names_the_rows_with_each_levels_value():
    ranking = fit_dataset(_dataset(), min_share=0)
    said = [w for w in ranking.warnings if "differ between ranks=1 and ranks=2" in w]
    assert len(said) == 1
    w = said[0]
    assert "sync (time): 0.04" in w and "at ranks=1, 0.08" in w and "step (time)" in w and "flat (time)" not in w
    assert "modeled on the runs at ranks=2 alone" in w
    rows = {r.fitted.callpath: r for r in ranking.rows}
    sync = rows["sync"]
    assert sync.prediction == pytest.approx(0.08, rel=0.02) and sync.doubtful() is None
    # beyond the two levels: marked (doubtful) and said so
    far = fit_dataset(_dataset(), at="ranks=8", min_share=0)
    rows = {r.fitted.callpath: r for r in far.rows}
    assert rows["sync"].doubtful() and rows["sync"].range[1] >= 0.0795
    assert rows["flat"].doubtful() is None
    assert any("do not follow ranks (marked !" in w for w in far.warnings)


def test_compat_extrap_is_left_as_extrap_has_it():
    ds = _dataset()
    new = PMNFModeler(compat="extrap", target=TARGET).fit(ds).models_
    old = PMNFModeler(compat="extrap")
    old._level_refits = False
    for a, b in zip(new, old.fit(ds).models_):
        assert a.model == b.model and a.levels == () and a.miss == b.miss and a.warnings == b.warnings


def test_the_target_option_is_checked():
    from modeler.errors import InputError

    with pytest.raises(InputError, match="target must be"):
        PMNFModeler(target=[2.0]).fit(_dataset())
    assert PMNFModeler(target=TARGET).get_params()["target"] == TARGET


def test_the_reports_run_time_at_a_measured_level_is_that_levels_and_says_so(tmp_path):
    # review 128: "predicted run time ... at ranks=2" 5.1 s beside "69% weak scaling at 2 ranks"
    root = tmp_path / "runs"
    write_sweep(root, {"ranks": [1, 2], "batch": [8, 16, 32, 64, 128]}, repetitions=3,
                time_s=lambda p, rank, rep: (0.5 + 0.01 * p["batch"] + 0.4 * (p["ranks"] == 2)) * (1 + 0.003 * rep))
    out = tmp_path / "r.md"
    assert cli_main(["report", str(root), "--format", "markdown", "-o", str(out), "--quiet"]) == 0
    text = out.read_text()
    line = next(x for x in text.splitlines() if x.startswith("Predicted run time"))
    value = float(line.split("**")[1].split()[0])
    assert value == pytest.approx(0.5 + 1.28 + 0.4 + 0.001, rel=0.03)  # main at ranks=2, batch=128
    assert "modeled on the runs at ranks=2 alone" in line


# LOW-4: a real worker's header, as runtime.recorder writes it: `ppid` is the rank's pid too
WORKER = {"forked_from": 10, "child_of": 10, "ppid": 10, "rank_source": "variable"}
SPAWNED_WORKER = {"child_of": 10, "ppid": 10, "rank_source": "variable"}
SCRIPT = {"ppid": 10, "rank_source": "variable"}  # a script the rank ran with subprocess


def _rank_with_helpers(tmp_path, name: str, helpers) -> None:
    """Runs at p = 2, 4, 8 of a rank (pid 10, 10 ms in main) and its helper processes `helpers`:
    (pid, header, profile of p, end record)."""
    for p in (2, 4, 8):
        d = tmp_path / f"{name}{p}"
        write_rank_file(d, run_id=f"{name}{p}", params={"p": p}, pid=10, header={"ppid": 1, "rank_source": "variable"},
                        profile={(0,): (1, 10 * MS, 10 * MS)})
        for pid, header, profile, end in helpers:
            write_rank_file(d, run_id=f"{name}{p}", params={"p": p}, pid=pid, header=header, profile=profile(p),
                            end=end)


def _loader(p: int) -> dict:
    return {(4,): (8, p * MS, p * MS)}


@pytest.mark.parametrize("worker_header", [WORKER, SPAWNED_WORKER])
def test_dataloader_workers_with_ppid_are_summed_into_their_rank(tmp_path, worker_header):
    _rank_with_helpers(tmp_path, "w", [(11, worker_header, _loader, None),
                                       (12, dict(worker_header, pid=12), _loader, None)])
    ds = read_runs([tmp_path])
    names = {s.callpath for s in ds.series}
    assert "load_batch" in names and not any(n.startswith("[subprocess]") for n in names)
    s = next(s for s in ds.series if s.callpath == "load_batch" and s.metric == "time")
    assert [float(np.median(r)) for r in s.repetitions] == pytest.approx([0.004, 0.008, 0.016])


def test_a_script_started_with_subprocess_keeps_its_prefix_beside_real_workers(tmp_path):
    _rank_with_helpers(tmp_path, "s", [(11, WORKER, _loader, None),
                                       (13, SCRIPT, lambda p: {(0,): (1, 3 * MS, 3 * MS)}, OK_END)])
    ds = read_runs([tmp_path])
    names = {s.callpath for s in ds.series if s.metric == "time"}
    assert "[subprocess] main" in names and "load_batch" in names and "[subprocess] load_batch" not in names
    main = next(s for s in ds.series if s.callpath == "main" and s.metric == "time")
    assert [float(np.median(r)) for r in main.repetitions] == pytest.approx([0.01] * 3)
    assert math.isclose(float(np.median(next(s for s in ds.series if s.callpath == "[subprocess] main"
                                             and s.metric == "time").repetitions[0])), 0.003)


def test_one_row_is_named_in_the_singular():
    # re-read: "1 model' values differ"
    data = _dataset()
    one = Dataset(data.parameters, [s for s in data.series if s.callpath in ("sync", "flat")])
    (w,) = [w for w in fit_dataset(one, min_share=0).warnings if "differ between ranks=1 and ranks=2" in w]
    assert w.startswith("1 model's values differ between ranks=1 and ranks=2") and "it is modeled on the runs" in w
    assert fit_dataset(data, min_share=0).warnings  # and in the plural
    (w,) = [w for w in fit_dataset(data, min_share=0).warnings if "differ between ranks=1 and ranks=2" in w]
    assert w.startswith("2 models' values differ")
