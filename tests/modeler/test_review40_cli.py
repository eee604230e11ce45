"""Review 40 (the modeler's command line): an empty path is never the current directory."""

from __future__ import annotations

import os

import pytest

from modeler import cli

from .test_review26_inputs import _sweep


@pytest.mark.parametrize("args, option", [
    (["fit", ""], "an input is an empty path"),
    (["export", "--extrap", "out.jsonl", ""], "an input is an empty path"),
    (["timeline", ""], "an input is an empty path"),
    (["fit", "RUNS", "-o", ""], "argument -o/--output: an empty path"),
    (["report", "RUNS", "-o", ""], "argument -o/--output: an empty path"),
    (["report", "RUNS", "--format", "markdown", "-o", ""], "argument -o/--output: an empty path"),
    (["timeline", "RUNS", "-o", ""], "argument -o/--output: an empty path"),
    (["export", "--extrap", "", "RUNS"], "argument --extrap: an empty path"),
])
def test_an_empty_path_is_an_error_that_names_it(tmp_path, capsys, monkeypatch, args, option):
    # `modeler fit ""` read every run file under the working directory, and `report --format markdown
    # -o ""` wrote to stdout: RUNS unset in `modeler fit "$RUNS"` must not act on the cwd
    runs = _sweep(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    args = [str(runs) if a == "RUNS" else a for a in args]
    try:
        rc = cli.main(args)
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc != 0 and option in err and out == "", (rc, out, err)
    assert sorted(os.listdir(tmp_path)) == ["runs"]


@pytest.mark.parametrize("args, said", [
    (["--metric", ""], "--metric '': no metric named; available:"),
    (["--metric", ","], "--metric ',': no metric named"),
    (["--callpath", ""], "--callpath '': an empty pattern"),
])
def test_an_empty_selection_says_so(tmp_path, capsys, args, said):
    runs = _sweep(tmp_path / "runs")
    assert cli.main(["fit", str(runs), *args]) == cli.EXIT_ERROR
    assert said in capsys.readouterr().err
