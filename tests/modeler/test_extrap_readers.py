"""Readers for Extra-P's JSON Lines and text formats."""

import json

import numpy as np
import pytest

from modeler.errors import InputError
from modeler.readers.extrap import read_extrap_jsonl, read_extrap_text, sniff_extrap


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_jsonl_repetitions_callpaths_and_metrics(tmp_path):
    rows = []
    for p in (1, 2, 4):
        rows.append(json.dumps({"params": {"p": p, "n": 10}, "callpath": "main->a", "metric": "time", "value": [p, p + 0.5]}))
        rows.append(json.dumps({"params": {"n": 10, "p": p}, "callpath": "main->a", "metric": "time", "value": p + 1}))
        rows.append(json.dumps({"params": {"p": p, "n": 10}, "value": 7}))
    ds = read_extrap_jsonl(_write(tmp_path / "a.jsonl", rows))
    assert ds.parameters == ("p", "n")
    a, root = ds.series
    assert (a.callpath, a.metric) == ("main->a", "time")
    assert (root.callpath, root.metric) == ("<root>", "<default>")
    np.testing.assert_array_equal(a.points, [[1, 10], [2, 10], [4, 10]])
    np.testing.assert_array_equal(a.repetitions[2], [4, 4.5, 5])  # list + later line = 3 repetitions
    assert ds.warnings == []


def test_jsonl_bad_lines_are_reported_with_file_and_line_and_skipped(tmp_path):
    rows = [
        json.dumps({"params": {"p": 1}, "value": 1.0}),
        '{"params": {"p": 2}, "value": 2.0',  # cut off
        json.dumps({"params": {"q": 3}, "value": 3.0}),
        json.dumps({"params": {"p": 4}, "value": "fast"}),
        json.dumps({"params": {"p": 5}}),
        json.dumps({"params": {"p": 6}, "value": 6.0}),
    ]
    path = _write(tmp_path / "bad.jsonl", rows)
    ds = read_extrap_jsonl(path)
    assert ds.series[0].n_points == 2
    lines = sorted(int(w.split(":")[1]) for w in ds.warnings)
    assert lines == [2, 3, 4, 5]
    assert all(w.startswith(f"{path}:") for w in ds.warnings)


def test_jsonl_gaps_are_kept_with_a_warning(tmp_path):
    rows = [json.dumps({"params": {"p": p}, "callpath": "a", "value": p}) for p in (1, 2, 3, 4)]
    rows.append(json.dumps({"params": {"p": 1}, "callpath": "b", "value": 1}))
    ds = read_extrap_jsonl(_write(tmp_path / "g.jsonl", rows))
    assert [s.n_points for s in ds.series] == [4, 1]
    assert any("b/<default>" in w and "3 of 4 points" in w for w in ds.warnings)


def test_jsonl_without_any_valid_line_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no parameters"):
        read_extrap_jsonl(_write(tmp_path / "e.jsonl", ["{not json"]))
    with pytest.raises(InputError, match="cannot read"):
        read_extrap_jsonl(tmp_path / "missing.jsonl")


TEXT = """\
# a comment
PARAMETER x
PARAMETER y

POINTS ( 1 10 ) ( 2 10 )
POINTS ( 3 10 )

REGION compute
METRIC time
DATA 1 1.1 0.9
DATA 2 2.2
DATA 3

METRIC visits
DATA 5
DATA 6
DATA 7
"""


def test_text_format(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    ds = read_extrap_text(path)
    assert ds.parameters == ("x", "y")
    time, visits = ds.series
    assert (time.callpath, time.metric, visits.metric) == ("compute", "time", "visits")
    np.testing.assert_array_equal(time.points, [[1, 10], [2, 10], [3, 10]])
    assert [r.size for r in time.repetitions] == [3, 2, 1]
    np.testing.assert_array_equal(visits.values("mean"), [5, 6, 7])


def test_text_one_parameter_points_without_parentheses(tmp_path):
    path = tmp_path / "one.txt"
    path.write_text("PARAMETER p\nPOINTS 1 2 4\nREGION r\nDATA 1\nDATA 2\nDATA x\n")
    ds = read_extrap_text(path)
    assert ds.series[0].n_points == 2
    assert ds.warnings and ds.warnings[0].startswith(f"{path}:6:")


def test_text_cut_off_names_the_points_without_data(tmp_path):
    # every region of a file that ends early lacks the last POINTS: no value there, not fewer points
    path = tmp_path / "cut.txt"
    path.write_text("PARAMETER x\nPOINTS 1 2 3 4 5\nREGION r\nDATA 1\nDATA 2\nDATA 3\n")
    ds = read_extrap_text(path)
    assert ds.series[0].n_points == 3
    assert ds.warnings == [f"{path}: r/<default> has no value at 2 of 5 points ((4), (5)); modeled on the points it has"]


@pytest.mark.parametrize(
    "body, message",
    [
        ("PARAMETER x\nPOINTS ( 1 ) ( 2 )\nREGION r\nDATA 1\nDATA 2\nDATA 3\n", r"t\.txt:6: more DATA lines"),
        ("PARAMETER x\nREGION r\nDATA 1\n", r"t\.txt:3: DATA before any POINTS"),
        ("PARAMETER x y\nPOINTS ( 1 ) \n", r"t\.txt:2: point"),
        ("PARAMETER x\nBOGUS 3\nPOINTS 1\n", r"t\.txt:2: unknown field 'BOGUS'"),  # (after POINTS: skipped)
    ],
)
def test_text_structural_errors_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "t.txt"
    path.write_text(body)
    with pytest.raises(InputError, match=message):
        read_extrap_text(path)


def test_sniff(tmp_path):
    j = _write(tmp_path / "a.jsonl", [json.dumps({"params": {"p": 1}, "value": 1})])
    t = tmp_path / "b.txt"
    t.write_text(TEXT)
    other = _write(tmp_path / "c.jsonl", [json.dumps({"type": "header", "format": 1})])
    garbage = tmp_path / "d.bin"
    garbage.write_bytes(b"\x00\xff\xfe")
    assert sniff_extrap(j) == "extrap-jsonl"
    assert sniff_extrap(t) == "extrap-text"
    assert sniff_extrap(other) is None
    assert sniff_extrap(garbage) is None
    assert sniff_extrap(tmp_path / "missing") is None
