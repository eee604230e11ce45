"""Review 57 (a fuzz of the modeler's inputs): a field of the wrong JSON type, a value too large
for the fit, a damaged rank file, a stray line of an Extra-P file, a bad point given to the API:
each is named and left out, never a traceback, and the rest of the batch is used."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.readers.extrap import read_extrap_jsonl, read_extrap_text
from runtime.runfile import RunFileError, read_run

from .modeler_synthetic_runs import write_rank_file

N = (1, 2, 4, 8, 16)


def _sweep(root: Path, world: int = 2) -> Path:
    for n in N:
        for rank in range(world):
            t = 10**6 * n
            write_rank_file(root / f"n{n}", run_id=f"run{n}", params={"n": n}, rank=rank, world_size=world,
                            profile={(0,): (1, t + 1000, 1000), (0, 1): (n, t, t)})
    return root


def _victim(root: Path) -> Path:
    (victim,) = (root / "n4").glob("rank1.*.jsonl")
    return victim


def _edit(file: Path, lineno: int, fields: dict) -> None:
    """Set `fields` in the record on line `lineno` (1-based) of `file`, written as JSON."""
    lines = file.read_text().splitlines()
    rec = json.loads(lines[lineno - 1])
    rec.update(fields)
    lines[lineno - 1] = json.dumps(rec)
    file.write_text("\n".join(lines) + "\n")


def _line_of(path: Path, rtype: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if json.loads(line)["type"] == rtype)


def _fit(capsys, *args: str) -> tuple[int, dict | None, str]:
    rc = cli.main(["fit", *args, "--format", "json", "--min-share", "0"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


# -- F1: fields of the wrong JSON type ----------------------------------------------------------

@pytest.mark.parametrize("rtype, fields, why", [
    ("profile", {"type": {"a": 1}}, "record type {'a': 1} is not a string"),
    ("region", {"name": {"a": 1}}, "name={'a': 1} is not a string"),
    ("region", {"name": 5}, "name=5 is not a string"),
    ("region", {"kind": []}, "kind=[] is not a string"),
    ("region", {"file": [1]}, "file=[1] is not a string"),
    ("region", {"id": True}, "id=True is not a whole number"),
])
def test_a_record_field_of_the_wrong_type_is_named_and_its_run_left_out(tmp_path, capsys, rtype, fields, why):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    line = _line_of(victim, rtype)
    _edit(victim, line, fields)
    run = read_run(victim)
    assert any(p.startswith(f"{victim}:{line}: ") and why in p for p in run.problems), run.problems
    rc, doc, err = _fit(capsys, str(root))
    assert "Traceback" not in err
    assert rc == 0 and doc is not None  # the other runs are modeled
    assert f"{victim}:{line}: " in err and "run4 left out" in err
    (main,) = [m for m in doc["models"] if m["callpath"] == "main" and m["metric"] == "time"]
    assert main["points"] == 4


@pytest.mark.parametrize("fields, why", [
    ({"rank": [1]}, "rank=[1] is not a whole number"),
    ({"pid": {"a": 1}}, "pid={'a': 1} is not a whole number"),
    ({"rank": -1}, "rank=-1 is below 0"),
    ({"rank": 1.5}, "rank=1.5 is not a whole number"),
    ({"rank": True}, "rank=True is not a whole number"),
    ({"world_size": 0}, "world_size=0 is below 1"),
])
def test_a_header_whose_rank_or_process_cannot_be_told_names_the_file(tmp_path, capsys, fields, why):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    _edit(victim, 1, fields)
    with pytest.raises(RunFileError, match="^" + re.escape(f"{victim}:1: bad header: {why}")):
        read_run(victim)
    rc, doc, err = _fit(capsys, str(root))
    assert "Traceback" not in err
    assert rc == 3 and doc is not None  # the file could not be read: exit 3, the rest modeled
    assert f"{victim}:1: bad header: {why}; file skipped" in err
    assert "run run4 left out (incomplete)" in err


def test_version_true_is_no_version_1(tmp_path):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    _edit(victim, 1, {"version": True})
    with pytest.raises(RunFileError, match="run file format version True"):
        read_run(victim)


@pytest.mark.parametrize("rtype, fields, why", [
    ("profile", {"path": "01"}, "path='01' is not a list of region ids"),
    ("profile", {"path": [0, 1.5]}, "path=1.5 is not a whole number"),
    ("profile", {"recursive": "7"}, "recursive='7' is not a whole number"),
    ("end", {"lost_flushes": -1}, "lost_flushes=-1 is not a count"),
    ("end", {"lost_flushes": "ok"}, "lost_flushes='ok' is not a count"),
    ("end", {"exit_code": "x"}, "exit_code='x' is not an exit status"),
    ("end", {"exit_code": 1.5}, "exit_code=1.5 is not an exit status"),
])
def test_values_that_cannot_be_right_are_named_not_used(tmp_path, rtype, fields, why):
    # (review 57 F8: the string "01" was read as ids 0 and 1, an exit code "x" as a clean exit)
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    line = max(i for i, text in enumerate(victim.read_text().splitlines(), 1) if json.loads(text)["type"] == rtype)
    _edit(victim, line, fields)
    run = read_run(victim)
    assert any(p == f"{victim}:{line}: bad {rtype!r} record: {why}" for p in run.problems), run.problems
    if rtype == "end":
        assert run.end is None  # how the process ended is not known: the run is incomplete
    else:
        assert not any(len(path) == 2 and path != (0, 1) for path in run.profile)


def test_a_region_id_defined_again_with_another_name_keeps_the_first(tmp_path):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    lines = victim.read_text().splitlines()
    first = json.loads(lines[_line_of(victim, "region") - 1])
    again = dict(first, name="other")
    lines.insert(len(lines) - 1, json.dumps(again))  # before the end record
    victim.write_text("\n".join(lines) + "\n")
    run = read_run(victim)
    assert run.regions[first["id"]].name == first["name"]
    assert any(f"region id {first['id']} defined again as function 'other'" in p for p in run.problems), run.problems


# -- F2: values too large for the fit -----------------------------------------------------------

def test_a_time_beyond_what_a_run_records_is_named_and_the_batch_goes_on(tmp_path, capsys):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    line = _line_of(victim, "profile")
    _edit(victim, line, {"incl_ns": 1e300})
    rc, doc, err = _fit(capsys, str(root))
    assert "Traceback" not in err and rc == 0 and doc is not None
    assert f"{victim}:{line}: bad 'profile' record: incl_ns=1e+300 is more than a run can record" in err


def test_one_value_far_beyond_the_others_gets_the_mean_and_a_note_not_a_crash():
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    values = [2.0, 3.0, 1e200, 9.0, 17.0]  # "SVD did not converge" before
    d = Dataset(("p",), [Series("main", "time", pts, tuple(np.array([v, v]) for v in values))], [], [])
    with np.errstate(all="raise"):
        fm = PMNFModeler().fit(d).models_[0]
    assert not fm.model.terms and fm.model.constant == pytest.approx(np.mean(values))
    assert any("its values span more than 1e+140" in w and "constant model (mean)" in w for w in fm.warnings)


def test_values_whose_sums_overflow_are_refused_by_the_api_and_skipped_by_the_reader(tmp_path, capsys):
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    d = Dataset(("p",), [Series("main", "time", pts, tuple(np.array([1e307 * p, 1.1e307 * p]) for p in
                                                                  (1, 2, 4, 8, 16)))], [], [])
    with pytest.raises(InputError, match=r"main/time: a value at \(p=1\) is 1e\+307: values above 1e\+305"):
        PMNFModeler().fit(d)
    f = tmp_path / "huge.jsonl"
    rows = [{"params": {"p": p}, "callpath": "main", "metric": "time", "value": [1e307 * p, 1.1e307 * p]} for p in N]
    rows += [{"params": {"p": p}, "callpath": "main", "metric": "time", "value": [1.0 + p]} for p in N]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = read_extrap_jsonl(f)
    assert [f"{f}:{i}: values above 1e+305 are too large to model (their sums overflow); line skipped" for i in
            range(1, 6)] == ds.warnings
    rc, doc, err = _fit(capsys, str(f))  # (a KeyError in the ranking before)
    assert rc == 0 and "Traceback" not in err
    assert doc["models"][0]["points"] == 5


# -- F3: a damaged rank file is a rank's file --------------------------------------------------

@pytest.mark.parametrize("damage", ["torn header", "cr line ends"])
def test_a_rank_file_whose_first_line_starts_like_a_header_is_still_a_rank(tmp_path, capsys, damage):
    root = _sweep(tmp_path / "runs")
    victim = _victim(root)
    data = victim.read_bytes()
    first, rest = data.split(b"\n", 1)
    victim.write_bytes(first[:60] + b"\n" + rest if damage == "torn header" else data.replace(b"\n", b"\r"))
    rc, doc, err = _fit(capsys, str(root))
    assert rc == 3  # named as unreadable, not "ignored: not measurements"
    assert f"{victim}" in err and "ignored" not in err.splitlines()[-1]
    assert "run run4 left out (incomplete)" in err
    if damage == "cr line ends":
        assert "its lines end with a carriage return alone" in err


# -- F4: an Extra-P file's parameters are those of most of its lines ---------------------------

def test_one_stray_first_line_does_not_decide_the_files_parameters(tmp_path):
    f = tmp_path / "stray.jsonl"
    rows = [{"params": {"z": 1}, "value": 1}]
    rows += [{"params": {"p": p, "n": n}, "callpath": "main", "metric": "time", "value": [p + n]}
             for p in N for n in N]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = read_extrap_jsonl(f)
    assert ds.parameters == ("p", "n")
    assert ds.series[0].n_points == 25
    assert ds.warnings == [f"{f}:1: parameters ['z'] differ from the file's ['n', 'p'] (those of 25 of its lines); "
                           f"line skipped",
                           # review 121 MED-1: the series of that line is not modeled, and named
                           f"{f}: 1 series with every line skipped, not modeled: <root>/<default> (over other "
                           f"parameters)"]


def test_empty_params_are_named_per_line(tmp_path):
    f = tmp_path / "empty.jsonl"
    rows = [{"params": {}, "value": 1}] + [{"params": {"p": p}, "value": [p]} for p in N]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = read_extrap_jsonl(f)
    assert ds.series[0].n_points == 5 and ds.warnings == [f'{f}:1: "params" is empty; line skipped']
    f.write_text(json.dumps({"params": {}, "value": 1}) + "\n")
    with pytest.raises(InputError, match="no parameters found") as e:
        read_extrap_jsonl(f)
    assert f'{f}:1: "params" is empty; line skipped' in e.value.warnings


def test_many_stray_lines_are_summed_up_after_five(tmp_path):
    f = tmp_path / "stray.jsonl"
    rows = [{"params": {"q": q}, "value": 1} for q in range(7)] + [{"params": {"p": p}, "value": [p]} for p in
                                                                   range(1, 9)]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = read_extrap_jsonl(f)
    assert ds.parameters == ("p",)
    assert [w.split(": ")[0] for w in ds.warnings[:5]] == [f"{f}:{i}" for i in range(1, 6)]
    assert ds.warnings[5].startswith(f"{f}: 2 more line(s) whose parameters ['q'] differ") and "up to line 7" in \
        ds.warnings[5]


# -- F5: the API ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_the_api_refuses_a_point_that_is_not_finite(bad):
    pts = np.array([[1.0], [bad], [4.0], [8.0], [16.0]])
    d = Dataset(("p",), [Series("main", "time", pts, tuple(np.array([v]) for v in [2.0, 3.0, 5.0, 9.0, 17.0]))],
                [], [])
    with pytest.raises(InputError, match=f"main/time: point 1 has p={bad}: parameter values must be finite"):
        PMNFModeler().fit(d)


def test_the_api_says_points_must_be_numbers():
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    m = PMNFModeler().fit(Dataset(("p",), [Series("main", "time", pts, tuple(np.array([v]) for v in N))], [], []))
    with pytest.raises(InputError, match="predict: points must be numbers"):
        m.predict([["a"]])
    with pytest.raises(InputError, match="predict: parameter values must be numbers"):
        m.predict({"p": ["a"]})
    with pytest.raises(InputError, match="main/time: points and values must be numbers"):
        Series("main", "time", [["a"]], (np.array([1.0]),))


# -- F6, F7: names the options cannot give, messages that named the wrong thing ----------------

@pytest.mark.parametrize("name", ["a=b", "a,b", "", " p"])
def test_a_parameter_name_the_options_cannot_give_is_named(tmp_path, name):
    f = tmp_path / "names.jsonl"
    f.write_text("".join(json.dumps({"params": {name: p, "q": p}, "value": [p]}) + "\n" for p in N))
    with pytest.raises(InputError) as e:
        read_extrap_jsonl(f)
    assert f"{f}:1: " in "\n".join(e.value.warnings)
    t = tmp_path / "names.txt"
    t.write_text(f"PARAMETER {name or '='}\nPOINTS 1 2 4\nREGION r\nMETRIC time\nDATA 1\nDATA 2\nDATA 3\n")
    if name.strip() == name:  # (the text format splits names at spaces)
        with pytest.raises(InputError, match=f"^{t}:1: parameter name"):
            read_extrap_text(t)


def test_points_that_mix_groups_and_bare_values_name_the_points_line(tmp_path):
    t = tmp_path / "mixed.txt"
    t.write_text("PARAMETER p\nPOINTS ( 1 ) 2 ( 4 ) 8 16\nREGION r\nMETRIC time\n" + "DATA 1\n" * 5)
    with pytest.raises(InputError, match=f"^{t}:2: POINTS mixes"):
        read_extrap_text(t)


@pytest.mark.parametrize("points", ["( 20 ) ( 30 ) ( 40", "( 20 ) 30 ) ( 40 )", "( ( 20 ) ) ( 30 ) ( 40 )"])
def test_an_unbalanced_parenthesis_is_named_as_such(tmp_path, points):
    """Review 110 LOW-3: an unclosed ( was reported as mixing groups and bare values."""
    t = tmp_path / "paren.txt"
    t.write_text(f"PARAMETER x\nPOINTS {points}\nREGION r\nMETRIC time\n" + "DATA 1\n" * 3)
    with pytest.raises(InputError, match=f"^{t}:2: POINTS has an unbalanced or nested parenthesis"):
        read_extrap_text(t)


def test_a_device_is_not_said_to_be_missing(capsys):
    rc = cli.main(["fit", "/dev/null"])
    assert rc == cli.EXIT_ERROR
    assert "/dev/null: not a regular file or directory" in capsys.readouterr().err


def test_a_parameter_value_too_large_names_its_line_and_the_batch_goes_on(tmp_path, capsys):
    f = tmp_path / "big.jsonl"
    rows = [{"params": {"p": p}, "callpath": "main", "metric": "time", "value": [p]} for p in N]
    rows.append({"params": {"p": 1e31}, "callpath": "main", "metric": "time", "value": [1.0]})
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, doc, err = _fit(capsys, str(f))
    assert rc == 0 and doc["models"][0]["points"] == 5
    assert f"{f}:6: parameter values above 1e+30 are too large to model" in err


def test_runs_that_recorded_nothing_are_said_to_hold_nothing_with_include_incomplete(tmp_path, capsys):
    # (review 58 F13: a rank killed before its first write leaves its header alone; with
    # --include-incomplete the error said the file was no scaleprobe run file)
    for n in N:
        write_rank_file(tmp_path / "runs" / f"n{n}", run_id=f"run{n}", params={"n": n}, regions=(), end=None)
    rc = cli.main(["fit", str(tmp_path / "runs"), "--include-incomplete"])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR
    assert "the files read hold no measurements (run files with their header alone" in err
    assert "no scaleprobe run file" not in err and "after selecting" not in err
    # one such file alone
    for f in sorted((tmp_path / "runs").rglob("*.jsonl"))[1:]:
        f.unlink()
    assert cli.main(["fit", str(tmp_path / "runs"), "--include-incomplete"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "the 1 file(s) read hold no measurements (a run file with its header alone" in err
