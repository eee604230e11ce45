"""Review 78 (docs/modeler.md against `modeler fit` and `modeler export`).

MED-1: an output that is one of the inputs (`fit -o`, `export --extrap`, `report -o`, `timeline -o`) is
       an error naming the option and the file, and the input is left as it was.
MED-4: a parameter with one value throughout an Extra-P input is a constant, as for runs.
LOW-2: refused parameter names: five lines, then a count; the error gives the true reason.
LOW-3: the contention warning names the mean under --compat extrap.
LOW-5: an empty --at, or an empty item of it, is an error naming the option.
LOW-6: empty -o exits 1 as an empty INPUT does; export's gap warning; points as `x=2`;
       --ranks / --include-incomplete on Extra-P inputs alone are said to do nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from modeler import cli

from .modeler_synthetic_runs import write_rank_file

N = (10, 20, 40, 80, 160)


def _extrap(path: Path, *, ranks: int | None = 1, metrics=("time",), callpaths=("main", "main->x"),
            spread: float = 0.0) -> Path:
    lines = []
    for n in N:
        for cp in callpaths:
            for m in metrics:
                params = {"n": n} if ranks is None else {"ranks": ranks, "n": n}
                v = 0.001 * n * (2 if cp == "main" else 1) * (10 if m != "time" else 1)
                lines.append({"params": params, "callpath": cp, "metric": m,
                              "value": [v, v * (1 + spread)]})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _runs(root: Path, ranks: int = 1) -> Path:
    for n in N:
        t = 10**6 * n
        write_rank_file(root / f"n{n}", run_id=f"run{n}", params={"n": n, "ranks": ranks}, rank=0, world_size=1,
                        profile={(0,): (1, t + 1000, 1000), (0, 1): (n, t, t)},
                        steps=[{"region": 2, "start_ns": i * 10**6, "duration_ns": 10**6} for i in range(3)])
    return root


def _main(capsys, *args: str) -> tuple[int, str, str]:
    try:
        rc = cli.main(list(args))
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


# MED-1 -------------------------------------------------------------------------------------------

def test_fit_output_that_is_its_input_is_refused(tmp_path, capsys):
    f = _extrap(tmp_path / "s.jsonl", ranks=None)
    before = f.read_bytes()
    rc, out, err = _main(capsys, "fit", str(f), "-o", str(f), "--format", "json", "-q")
    assert rc == cli.EXIT_ERROR, err
    assert f"-o {f}: this file is one of the inputs" in err
    assert f.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]  # no temporary file either


def test_export_output_that_is_its_input_is_refused(tmp_path, capsys):
    f = _extrap(tmp_path / "s.jsonl", ranks=None, metrics=("time", "visits"))
    before = f.read_bytes()
    rc, out, err = _main(capsys, "export", "--extrap", str(f), str(f), "--metric", "time")
    assert rc == cli.EXIT_ERROR and f"--extrap {f}: this file is one of the inputs" in err, err
    assert f.read_bytes() == before


def test_output_through_a_link_or_inside_an_input_folder(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    f = _extrap(d / "s.jsonl", ranks=None)
    before = f.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(f)
    hard = tmp_path / "hard.jsonl"
    os.link(f, hard)
    for out_path, inputs in ((link, [str(f)]), (hard, [str(f)]), (f, [str(d)]), (tmp_path / "." / "d" / "s.jsonl", [str(f)])):
        rc, out, err = _main(capsys, "export", "--extrap", str(out_path), *inputs)
        assert rc == cli.EXIT_ERROR and "is one of the inputs" in err, (out_path, err)
        assert f.read_bytes() == before
    # a new file in the folder, and stdout, are fine
    rc, out, err = _main(capsys, "export", "--extrap", str(d / "new.jsonl"), str(f), "-q")
    assert rc == cli.EXIT_OK and (d / "new.jsonl").exists(), err


def test_export_beside_runs_again_is_allowed(tmp_path, capsys):
    # the workflow the docs suggest: `modeler export --extrap runs/x.jsonl runs/`, twice; the export
    # found beside the run files is not read, so replacing it loses nothing
    runs = _runs(tmp_path / "runs")
    out = runs / "x.jsonl"
    assert _main(capsys, "export", "--extrap", str(out), str(runs), "-q")[0] == cli.EXIT_OK
    rc, _, err = _main(capsys, "export", "--extrap", str(out), str(runs), "-q")
    assert rc == cli.EXIT_OK, err


def test_report_output_that_is_its_input_is_refused(tmp_path, capsys):
    f = _extrap(tmp_path / "s.jsonl", ranks=None)
    before = f.read_bytes()
    rc, out, err = _main(capsys, "report", str(f), "-o", str(f), "--format", "markdown")
    assert rc == cli.EXIT_ERROR and f"-o {f}: this file is one of the inputs" in err, err
    assert f.read_bytes() == before


def test_timeline_output_that_is_its_input_is_refused(tmp_path, capsys):
    runs = _runs(tmp_path / "runs")
    (rank_file,) = (runs / "n10").iterdir()
    before = rank_file.read_bytes()
    rc, out, err = _main(capsys, "timeline", str(runs / "n10"), "-o", str(rank_file))
    assert rc == cli.EXIT_ERROR and f"-o {rank_file}: this file is one of the inputs" in err, err
    assert rank_file.read_bytes() == before


# MED-4 -------------------------------------------------------------------------------------------

def test_a_constant_of_an_extrap_input_is_no_parameter(tmp_path, capsys):
    f = _extrap(tmp_path / "ex.jsonl", ranks=1)
    rc, out, err = _main(capsys, "fit", str(f), "--format", "json")
    assert rc == cli.EXIT_OK, err
    assert json.loads(out)["parameters"] == ["n"]
    rc, out, err = _main(capsys, "fit", str(f), "--at", "ranks=1024")
    assert rc == cli.EXIT_ERROR and "--at: ranks has one value (1) in the points used" in err, err
    rc, out, err = _main(capsys, "fit", str(f), "--where", "ranks=1", "--format", "json")
    assert rc == cli.EXIT_OK and json.loads(out)["parameters"] == ["n"], err
    rc, out, err = _main(capsys, "export", "--extrap", "-", str(f), "-q")
    assert rc == cli.EXIT_OK and all(set(json.loads(line)["params"]) == {"n"} for line in out.splitlines())


def test_an_extrap_input_merges_with_runs_whose_constant_it_has(tmp_path, capsys):
    runs = _runs(tmp_path / "runs", ranks=1)
    f = _extrap(tmp_path / "ex.jsonl", ranks=1, callpaths=("other",))
    rc, out, err = _main(capsys, "fit", str(runs), str(f), "--format", "json", "--metric", "time")
    assert rc == cli.EXIT_OK, err
    data = json.loads(out)
    assert data["parameters"] == ["n"]
    assert "other" in {m["callpath"] for m in data["models"]}


def test_an_extrap_input_of_another_value_makes_it_a_parameter(tmp_path, capsys):
    runs = _runs(tmp_path / "runs", ranks=1)
    f = _extrap(tmp_path / "ex.jsonl", ranks=2, callpaths=("main",))
    rc, out, err = _main(capsys, "fit", str(runs), str(f), "--format", "json", "--metric", "time")
    assert rc == cli.EXIT_OK, err
    assert sorted(json.loads(out)["parameters"]) == ["n", "ranks"]


def test_two_extrap_files_at_two_values_still_merge(tmp_path, capsys):
    a = _extrap(tmp_path / "a.jsonl", ranks=1)
    b = _extrap(tmp_path / "b.jsonl", ranks=4)
    c = _extrap(tmp_path / "c.jsonl", ranks=16)
    rc, out, err = _main(capsys, "fit", str(a), str(b), str(c), "--format", "json")
    assert rc == cli.EXIT_OK, err
    assert sorted(json.loads(out)["parameters"]) == ["n", "ranks"]


# LOW-2 -------------------------------------------------------------------------------------------

def test_refused_parameter_names_are_capped_and_the_error_says_why(tmp_path, capsys):
    f = tmp_path / "pn.jsonl"
    f.write_text("".join(json.dumps({"params": {"a=b": n}, "callpath": "c", "metric": "time", "value": [n]}) + "\n"
                         for n in range(1, 51)))
    rc, out, err = _main(capsys, "fit", str(f))
    assert rc == cli.EXIT_ERROR
    assert err.count("parameter name 'a=b' holds '='") <= 7, err
    assert "45 more line(s)" in err
    assert "no parameters found" not in err
    rc, out, err = _main(capsys, "fit", str(f), "-q")
    assert "no parameters found" not in err and "parameter name 'a=b' holds '='" in err and "50 lines" in err, err


# LOW-3 -------------------------------------------------------------------------------------------

def test_contention_warning_names_the_mean_under_compat_extrap(tmp_path, capsys):
    f = _extrap(tmp_path / "wide.jsonl", ranks=None, callpaths=("main", "main->x", "main->y"), spread=0.9)
    rc, out, err = _main(capsys, "fit", str(f), "--compat", "extrap")
    assert rc == cli.EXIT_OK, err
    assert "disagree widely" in err
    assert "robust" not in err and "the mean of the runs (--compat extrap" in err, err
    rc, out, err = _main(capsys, "fit", str(f))
    assert "the default aggregate (robust" in err


# LOW-5 -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("at", ["", " ", ",", "n=40,", ",n=40"])
def test_an_empty_at_is_an_error(tmp_path, capsys, at):
    f = _extrap(tmp_path / "s.jsonl", ranks=None)
    rc, out, err = _main(capsys, "fit", str(f), "--at", at)
    assert rc == cli.EXIT_ERROR and "--at" in err and out == "", err


# LOW-6 -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["fit", "IN", "-o", ""], ["export", "--extrap", "", "IN"],
                                  ["report", "IN", "-o", ""], ["timeline", "IN", "-o", ""]])
def test_an_empty_output_exits_as_an_empty_input_does(tmp_path, capsys, args):
    f = _extrap(tmp_path / "s.jsonl", ranks=None)
    rc, out, err = _main(capsys, *[str(f) if a == "IN" else a for a in args])
    assert rc == cli.EXIT_ERROR and "an empty path" in err, (rc, err)
    assert _main(capsys, "fit", "")[0] == cli.EXIT_ERROR


def test_export_gap_warning_says_left_out(tmp_path, capsys):
    f = _extrap(tmp_path / "gap.jsonl", ranks=None)
    lines = [x for x in f.read_text().splitlines() if not ('"main->x"' in x and '"n": 40' in x)]
    f.write_text("\n".join(lines) + "\n")
    rc, out, err = _main(capsys, "export", "--extrap", "-", str(f))
    assert rc == cli.EXIT_OK, err
    assert "modeled on the points it has" not in err
    assert "main->x/time has no value at 1 of 5 points" in err and "left out of the export" in err
    rc, out, err = _main(capsys, "fit", str(f))
    assert "modeled on the points it has" in err  # still true of fit


def test_text_warnings_name_points_as_the_options_do(tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER x\nPOINTS 1 2 4 8\nREGION r\nMETRIC time\nDATA 1 nan\nDATA 2 2.1\nDATA 4 x\nDATA 8 8.1\n")
    rc, out, err = _main(capsys, "fit", str(f), "--min-points", "2")
    assert "kept at point x=1 for r" in err and "point x=4 left out for r" in err, err
    assert "(1.0,)" not in err


@pytest.mark.parametrize("option", [["--ranks", "max"], ["--include-incomplete"]])
def test_run_options_on_extrap_inputs_alone_are_said(tmp_path, capsys, option):
    f = _extrap(tmp_path / "s.jsonl", ranks=None)
    rc, out, err = _main(capsys, "fit", str(f), *option)
    assert rc == cli.EXIT_OK
    assert f"{option[0]}" in err and "does nothing here" in err, err
    rc, out, err = _main(capsys, "fit", str(f))
    assert "does nothing" not in err
    runs = _runs(tmp_path / "runs")
    rc, out, err = _main(capsys, "fit", str(runs), *option)
    assert "does nothing" not in err, err


def test_parse_at_from_python_still_takes_none():
    from modeler.target_point import parse_at

    assert parse_at(None, ["n"], {"n": 8.0}) == {"n": 8.0}
    assert parse_at("n=16", ["n"], {"n": 8.0}) == {"n": 16.0}


def test_export_into_a_folder_of_extrap_inputs_it_was_read_from_is_warned(tmp_path, capsys):
    d = tmp_path / "ex"
    d.mkdir()
    _extrap(d / "a.jsonl", ranks=None)
    rc, out, err = _main(capsys, "export", "--extrap", str(d / "out.jsonl"), str(d))
    assert rc == cli.EXIT_OK and "lies in the input folder" in err, err
    rc, out, err = _main(capsys, "export", "--extrap", str(tmp_path / "out.jsonl"), str(d))
    assert rc == cli.EXIT_OK and "lies in the input folder" not in err, err
