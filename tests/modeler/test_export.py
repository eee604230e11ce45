"""`modeler export --extrap`: Extra-P JSON Lines with nothing filled in that was not measured."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.export import write_extrap_jsonl
from modeler.readers.runs import read_runs
from modeler_synthetic_runs import MS, write_rank_file, write_sweep


def test_every_complete_series_written_and_partial_ones_named(tmp_path):
    for p in (2, 4, 8):
        for rep in range(2):
            prof = {(0,): (1, (10 + rep) * MS * p, MS)}
            if p != 4:
                prof[(0, 4)] = (1, MS, MS)  # load_batch is missing at p=4
            write_rank_file(tmp_path / f"r{p}-{rep}", run_id=f"r{p}-{rep}", params={"p": p}, repetition=rep, profile=prof)
    ds = read_runs([tmp_path])
    out = tmp_path / "x.jsonl"
    summary = write_extrap_jsonl(ds, out)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["callpath"], r["metric"]) for r in recs} == {("main", m) for m in ("time", "exclusive_time", "visits")}
    assert summary.series == 3 and summary.points == 3 and summary.lines == len(recs) == 9
    time = [r for r in recs if r["metric"] == "time"]
    assert [r["params"] for r in time] == [{"p": 2}, {"p": 4}, {"p": 8}]
    assert isinstance(time[0]["params"]["p"], int)
    assert sorted(time[1]["value"]) == pytest.approx([0.040, 0.044])
    assert any("main->load_batch [time] (2 of 3 points)" in n for n in summary.notes())
    assert "Extra-P refuses gaps" in summary.notes()[0]


def test_non_integral_parameters_and_stream_output():
    s = Series("a->b", "bytes", np.array([[0.5], [1.5]]), (np.array([1.0, 2.0]), np.array([3.0])))
    buf = io.StringIO()
    summary = write_extrap_jsonl(Dataset(("x",), [s]), buf)
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    assert lines == [
        {"params": {"x": 0.5}, "callpath": "a->b", "metric": "bytes", "value": [1.0, 2.0]},
        {"params": {"x": 1.5}, "callpath": "a->b", "metric": "bytes", "value": [3.0]},
    ]
    assert summary.left_out == []


def test_nothing_complete_writes_nothing(tmp_path):
    a = Series("a", "time", np.array([[1.0]]), (np.array([1.0]),))
    b = Series("b", "time", np.array([[2.0]]), (np.array([1.0]),))
    out = tmp_path / "none.jsonl"
    with pytest.raises(InputError, match="refuses gaps"):
        write_extrap_jsonl(Dataset(("p",), [a, b]), out)
    assert not out.exists()


def test_no_parameters_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no parameter"):
        write_extrap_jsonl(Dataset((), [Series("a", "t", np.zeros((1, 0)), (np.array([1.0]),))]), tmp_path / "o")


def test_unwritable_target_names_option(tmp_path):
    s = Series("a", "time", np.array([[1.0]]), (np.array([1.0]),))
    (tmp_path / "a_file").write_text("")
    with pytest.raises(InputError, match="--extrap"):  # a missing directory is made; a file is in the way
        write_extrap_jsonl(Dataset(("p",), [s]), tmp_path / "a_file" / "x.jsonl")


def test_export_reads_back_identically(tmp_path):
    extrap = pytest.importorskip("modeler.readers.extrap")
    write_sweep(tmp_path / "runs", {"ranks": [1, 2, 4], "batch": [8, 16]}, repetitions=2,
                time_s=lambda p, r, rep: 0.01 * p["batch"] / p["ranks"] * (1 + 0.01 * rep))
    ds = read_runs([tmp_path / "runs"])
    out = tmp_path / "e.jsonl"
    write_extrap_jsonl(ds, out)
    back = extrap.read_extrap_jsonl(out)
    assert back.parameters == ds.parameters
    orig = {(s.callpath, s.metric): s for s in ds.series}
    assert len(back.series) == len(orig)
    for s in back.series:
        o = orig[(s.callpath, s.metric)]
        assert np.array_equal(s.points, o.points)
        for a, b in zip(s.repetitions, o.repetitions):
            assert sorted(a.tolist()) == pytest.approx(sorted(b.tolist()))


EXTRAP = Path(__file__).resolve().parents[2] / ".venv-extrap" / "bin" / "extrap"


@pytest.mark.slow
@pytest.mark.skipif(not EXTRAP.exists(), reason="Extra-P is not installed (make extrap-venv creates .venv-extrap)")
def test_extrap_accepts_the_export(tmp_path):
    write_sweep(tmp_path / "runs", {"ranks": [1, 2, 3, 4, 5], "batch": [8, 16, 32, 64, 128]}, ranks_of=lambda p: 1,
                time_s=lambda p, r, rep: 0.002 * p["ranks"] ** 2 + 0.01 * p["batch"])
    out = tmp_path / "e.jsonl"
    write_extrap_jsonl(read_runs([tmp_path / "runs"]).select(metrics=["time", "visits"]), out)
    done = subprocess.run([str(EXTRAP), "--json", str(out), "--print", "callpaths"], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    assert "main->train->train_epoch->Model.forward" in done.stdout
