"""`modeler.readers.load`: path expansion, format detection, registry, merging, per-file failures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modeler import readers
from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.readers import ReaderImportError, expand, load, merge, read_inputs, sniff
from modeler_synthetic_runs import write_sweep

SHARED = Path(__file__).resolve().parents[2] / "../shared/extrap-reference"


def extrap_jsonl(path: Path, grid=(2, 4, 8, 16, 32), callpath="main->work", f=lambda p: 3.0 * p) -> Path:
    path.write_text("".join(
        json.dumps({"params": {"p": p}, "callpath": callpath, "metric": "time", "value": [f(p), f(p) * 1.01]}) + "\n"
        for p in grid))
    return path


def runs_sweep(root: Path) -> list[Path]:
    return write_sweep(root, {"p": [2, 4, 8]}, time_s=lambda p, r, rep: 0.01 * p["p"])


def test_expand_directories_globs_and_files(tmp_path):
    files = runs_sweep(tmp_path / "runs")
    (tmp_path / "runs" / "notes.md").write_text("not measured")
    (tmp_path / "runs" / ".hidden").mkdir()
    (tmp_path / "runs" / ".hidden" / "x.jsonl").write_text("{}\n")
    got = expand([tmp_path / "runs"])
    assert sorted(p for p, _ in got) == sorted(files)
    assert not any(explicit for _, explicit in got)
    globbed = expand([str(tmp_path / "runs" / "run1-*" / "*.jsonl"), files[1]])
    assert [p for p, _ in globbed] == [files[1]], "each file once"
    assert all(explicit for _, explicit in globbed)
    recursive = expand([str(tmp_path / "**" / "rank0.*.jsonl")])
    assert len(recursive) == 3


def test_expand_errors_name_the_path(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        expand([tmp_path / "missing"])
    with pytest.raises(InputError, match="no file matches"):
        expand([str(tmp_path / "*.jsonl")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: directory holds no"):
        expand([tmp_path / "empty"])


def test_sniff_each_format(tmp_path):
    (run_file, *_) = runs_sweep(tmp_path)
    assert sniff(run_file) == "runs"
    assert sniff(extrap_jsonl(tmp_path / "e.jsonl")) == "extrap-jsonl"
    text = tmp_path / "e.txt"
    text.write_text("PARAMETER p\nPOINTS ( 2 ) ( 4 ) ( 8 )\nREGION r\nMETRIC time\nDATA 1 1\nDATA 2 2\nDATA 4 4\n")
    assert sniff(text) == "extrap-text"
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    assert sniff(junk) is None


def test_unrecognized_files_skipped_when_named_ignored_in_directories(tmp_path):
    runs_sweep(tmp_path / "runs")
    (tmp_path / "runs" / "stdout.txt").write_text("epoch 1 done\n")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"a": 1}\n')
    loaded = read_inputs([tmp_path / "runs", junk])
    status = {Path(f.path).name: f.status for f in loaded.files}
    assert status["stdout.txt"] == "ignored"
    assert status["junk.jsonl"] == "skipped"
    assert [f.path for f in loaded.skipped] == [str(junk)]
    assert any(str(junk) in w for w in loaded.dataset.warnings)


@pytest.mark.parametrize("cut", [0, 10, 30, 100])
def test_run_file_empty_or_cut_in_its_header_is_named_not_ignored(tmp_path, cut):
    # a rank that died before its header was written leaves such a file; in a directory it must be
    # named (its run's other ranks are still read), not counted among unrelated files
    files = runs_sweep(tmp_path / "runs")
    header_end = files[0].read_bytes().index(b"\n")
    assert cut < header_end
    files[0].write_bytes(files[0].read_bytes()[:cut])
    loaded = read_inputs([tmp_path / "runs"])
    status = {f.path: (f.status, f.reason) for f in loaded.files}
    assert status[str(files[0])][0] == "skipped"
    assert ("empty file" if cut == 0 else "no complete header") in status[str(files[0])][1]
    warning = [w for w in loaded.dataset.warnings if str(files[0]) in w]
    assert len(warning) == 1 and warning[0].count(str(files[0])) == 1
    assert len(loaded.dataset.series) and all(st == "read" for p, (st, _) in status.items() if p != str(files[0]))


def test_bad_extrap_file_skipped_others_read(tmp_path):
    good = extrap_jsonl(tmp_path / "good.jsonl")
    bad = tmp_path / "bad.txt"
    bad.write_text("PARAMETER p\nREGION r\nMETRIC time\nDATA 1 2\n")  # DATA without POINTS
    loaded = read_inputs([good, bad], format=None)
    assert [f.status for f in loaded.files] == ["read", "skipped"]
    assert str(bad) in loaded.skipped[0].reason or "bad.txt" in loaded.skipped[0].reason
    assert loaded.dataset.series[0].n_points == 5


def test_nothing_usable_is_an_error_listing_why(tmp_path):
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"a": 1}\n')
    with pytest.raises(InputError, match="no usable measurements.*junk.jsonl"):
        load([junk])


def test_runs_and_extrap_inputs_merge(tmp_path):
    runs_sweep(tmp_path / "runs")
    e = extrap_jsonl(tmp_path / "more.jsonl", grid=(16, 32), callpath="main->train")
    ds = load([tmp_path / "runs", e])
    s = [s for s in ds.series if s.callpath == "main->train" and s.metric == "time"][0]
    assert s.points[:, 0].tolist() == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert str(e) in ds.sources and any("rank0" in src for src in ds.sources)


def test_merge_reorders_parameters_and_joins_repetitions():
    a = Dataset(("p", "n"), [Series("x", "time", np.array([[1, 10], [2, 10]]), (np.array([1.0]), np.array([2.0])))])
    b = Dataset(("n", "p"), [Series("x", "time", np.array([[10, 2], [20, 4]]), (np.array([2.5]), np.array([9.0])))])
    (s,) = merge([a, b]).series
    assert s.points.tolist() == [[1, 10], [2, 10], [4, 20]]
    assert [r.tolist() for r in s.repetitions] == [[1.0], [2.0, 2.5], [9.0]]


def test_merge_refuses_different_parameters():
    a = Dataset(("p",), [], sources=["a.jsonl"])
    b = Dataset(("q",), [], sources=["b.jsonl"])
    with pytest.raises(InputError, match="a.jsonl.*b.jsonl"):
        merge([a, b])
    many = Dataset(("q",), [], sources=[f"run{i}/rank0.jsonl" for i in range(500)])
    with pytest.raises(InputError, match=r"run0/rank0.jsonl, run1/rank0.jsonl, run2/rank0.jsonl and 497 more") as e:
        merge([a, many])
    assert len(str(e.value)) < 300, "a sweep of many files must not flood the error"


def test_forced_format_and_unknown_format(tmp_path):
    e = extrap_jsonl(tmp_path / "data.dat")
    assert load([e], format="extrap-jsonl").series[0].n_points == 5
    with pytest.raises(InputError, match="--input-format"):
        load([e], format="csv")


def test_broken_reader_module_is_an_error_not_a_skip(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "SNIFFERS", (("modeler.readers.no_such_reader", "sniff"),))
    with pytest.raises(ReaderImportError, match="no_such_reader"):
        load([extrap_jsonl(tmp_path / "e.jsonl")])


def test_every_registered_reader_imports():
    for module, attr in readers.SNIFFERS:
        assert callable(readers._import(module, attr))
    for spec in readers.READERS.values():
        assert callable(readers._import(spec.module, spec.function))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/extrap-reference is not available on this machine")
def test_extrap_reference_files_are_detected():
    for f in sorted(SHARED.iterdir()):
        if f.suffix == ".jsonl":
            assert sniff(f) == "extrap-jsonl", f
        elif f.suffix == ".txt":
            assert sniff(f) == "extrap-text", f
