"""`--where` / `--exclude`: one point filter for `modeler fit`, `export` and `report`, over runs
(selected before they are combined) and Extra-P inputs (points dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modeler import cli
from modeler.errors import InputError
from modeler.pointfilter import parse_point_filter
from modeler_synthetic_runs import write_sweep

GRID = {"ranks": [1, 2, 4, 8], "batch": [8, 16, 32, 64]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pf") / "runs"
    write_sweep(root, GRID, ranks_of=lambda p: 1,
                time_s=lambda p, r, rep: 0.01 * p["batch"] / p["ranks"] + 0.001 * p["ranks"])
    return root


def exported(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def points(lines: list[dict]) -> set[tuple]:
    return {tuple(sorted(l["params"].items())) for l in lines}


def test_export_exclude_leaves_out_runs_and_says_how_many(runs, tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(out), str(runs), "--metric", "time", "--exclude", "ranks=1"]) == 0
    lines = exported(out)
    assert {l["params"]["ranks"] for l in lines} == {2, 4, 8}
    assert len(points(lines)) == 12
    assert "4 not selected: other points (--where, --exclude)" in capsys.readouterr().err


def test_export_where_is_a_slice_and_a_single_valued_parameter_becomes_a_constant(runs, tmp_path):
    out = tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(out), str(runs), "--metric", "time", "--where", "batch>=16",
                     "--where", "ranks=2,8", "-q"]) == 0
    assert points(exported(out)) == {(("batch", b), ("ranks", r)) for b in (16, 32, 64) for r in (2, 8)}
    assert cli.main(["export", "--extrap", str(out), str(runs), "--metric", "time", "--where", "batch=32", "-q"]) == 0
    assert {tuple(l["params"]) for l in exported(out)} == {("ranks",)}


def test_fit_takes_the_same_filter(runs, capsys):
    assert cli.main(["fit", str(runs), "--format", "json", "-q", "--where", "ranks>1", "--exclude", "batch=64",
                     "--min-share", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {m["points"] for m in out["models"] if m["metric"] == "time"} == {9}
    assert out["at"] == {"ranks": 8.0, "batch": 32.0}


def test_extrap_input_points_are_filtered_too(runs, tmp_path, capsys):
    full = tmp_path / "full.jsonl"
    assert cli.main(["export", "--extrap", str(full), str(runs), "--metric", "time", "-q"]) == 0
    out = tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(out), str(full), "--exclude", "batch<16", "--exclude", "ranks=8",
                     "-q"]) == 0
    assert points(exported(out)) == {(("batch", b), ("ranks", r)) for b in (16, 32, 64) for r in (1, 2, 4)}
    assert cli.main(["fit", str(full), "--where", "ranks=4", "--format", "json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"] == ["batch"]


@pytest.mark.parametrize("args, message", [
    (["--where", "nodes=4"], "--where nodes=4: unknown parameter 'nodes'; the runs have: batch, ranks"),
    (["--exclude", "batch"], "--exclude: 'batch' is not NAME OP VALUE"),
    (["--where", "batch>big"], "--where: 'batch>big': > needs a number"),
    (["--where", "batch=8,"], "--where: 'batch=8,' has an empty value"),
    (["--where", "batch>=1000"], "--where 'batch>=1000': no completed run is left; batch = 8, 16, 32, 64"),
    (["--exclude", "ranks=1,2,4,8"], "--exclude ranks=1,2,4,8: no completed run is left; ranks = 1, 2, 4, 8"),
])
@pytest.mark.parametrize("command", ["fit", "export", "report"])
def test_bad_filters_are_errors_naming_the_option(runs, tmp_path, capsys, command, args, message):
    extra = {"export": ["--extrap", str(tmp_path / "x.jsonl")], "report": ["-o", str(tmp_path / "r.html")]}
    assert cli.main([command, str(runs), *extra.get(command, []), *args]) == cli.EXIT_ERROR
    assert message in capsys.readouterr().err


def test_unknown_parameter_of_an_extrap_input_is_named(runs, tmp_path, capsys):
    full = tmp_path / "full.jsonl"
    assert cli.main(["export", "--extrap", str(full), str(runs), "--metric", "time", "-q"]) == 0
    assert cli.main(["fit", str(full), "--where", "p=4"]) == cli.EXIT_ERROR
    assert f"--where p=4: unknown parameter 'p'; the parameters of {full} have: batch, ranks" in capsys.readouterr().err


def test_report_uses_only_the_selected_runs(runs, tmp_path):
    out = tmp_path / "r.md"
    assert cli.main(["report", str(runs), "--format", "markdown", "-o", str(out), "--exclude", "ranks=1", "-q"]) == 0
    text = out.read_text()
    assert "| parameter ranks | 2, 4, 8 |" in text


def test_conditions():
    pf = parse_point_filter(["batch>=16", "model=cnn,mlp"], ["ranks=1"])
    assert pf.keeps({"batch": 16, "model": "cnn", "ranks": 2})
    assert not pf.keeps({"batch": 8, "model": "cnn", "ranks": 2})
    assert not pf.keeps({"batch": 16, "model": "vit", "ranks": 2})
    assert not pf.keeps({"batch": 16.0, "model": "mlp", "ranks": 1.0})  # 1 and 1.0 are one value
    assert not pf.keeps({"model": "cnn", "ranks": 2})  # no batch: --where cannot hold
    assert parse_point_filter(["p!=4"]).keeps({"p": 5}) and not parse_point_filter(["p!=4"]).keeps({"p": 4.0})
    assert not parse_point_filter() and str(pf) == "--where 'batch>=16' --where model=cnn,mlp --exclude ranks=1"
    with pytest.raises(InputError, match="--where 'model>2': model is 'cnn' somewhere, not a number"):
        parse_point_filter(["model>2"]).keeps({"model": "cnn"})


@pytest.mark.parametrize("command", ["fit", "report"])
def test_at_naming_a_parameter_the_filter_held_says_so(runs, tmp_path, capsys, command):
    """Review 40 L4: `--where batch=16 --at batch=32` said `unknown parameter 'batch'`, as if the
    runs had none."""
    extra = {"report": ["-o", str(tmp_path / "r.html")]}.get(command, [])
    assert cli.main([command, str(runs), *extra, "--where", "batch=16", "--at", "batch=32"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "--at: batch has one value (16) in the points used (the runs' constant, or what --where/--exclude left" in err
    assert "which have: ranks" in err and "unknown parameter" not in err
    assert cli.main([command, str(runs), *extra, "--where", "batch=16", "--at", "nodes=2"]) == cli.EXIT_ERROR
    assert "--at: unknown parameter 'nodes'; the measurements have: ranks" in capsys.readouterr().err
