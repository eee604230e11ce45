"""A profile record's fields are taken only as the writer writes them: the reader's fast tests
(review 60: the full checks cost it 18%) accept exactly what the full checks accept, with the same
values, and refuse the rest naming the field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from runtime.runfile import Run, _apply, _NotANumber, read_run
from tests.modeler.modeler_synthetic_runs import write_rank_file

MOST = 2 ** 63


def _file(tmp_path: Path, **fields) -> tuple[Path, int]:
    """A run file whose profile record of path (0, 1) has `fields` set; that record's line."""
    write_rank_file(tmp_path, run_id="r", params={"n": 1}, profile={(0,): (1, 2000, 1000), (0, 1): (3, 1000, 1000)})
    (path,) = tmp_path.glob("rank0.*.jsonl")
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines) if json.loads(text)["type"] == "profile"
                and json.loads(text)["path"] == [0, 1])
    rec = json.loads(lines[line])
    rec.update(fields)
    lines[line] = json.dumps(rec, allow_nan=True)
    path.write_text("\n".join(lines) + "\n")
    return path, line + 1


@pytest.mark.parametrize("key", ["visits", "incl_ns", "excl_ns", "min_ns", "max_ns", "sumsq_ns"])
@pytest.mark.parametrize("value, why", [
    (True, "is not a number"), ("3", "is not a number"), (None, "is not a number"), ([1], "is not a number"),
    (2 ** 64 * 2 ** 64 * 4, "is more than a run can record"), (-(2 ** 64 * 2 ** 64 * 4), "is more than a run can record"),
])
def test_a_value_the_writer_never_writes_is_refused_naming_its_field(tmp_path, key, value, why):
    path, line = _file(tmp_path, **{key: value})
    run = read_run(path)
    assert any(p.startswith(f"{path}:{line}: bad 'profile' record: {key}=") and why in p for p in run.problems), \
        run.problems
    assert (0, 1) not in run.profile


@pytest.mark.parametrize("key", ["visits", "incl_ns", "excl_ns", "min_ns", "max_ns"])
def test_a_count_beyond_64_bits_is_refused_but_the_squares_may_be(tmp_path, key):
    path, _ = _file(tmp_path, **{key: 2 ** 64})
    assert (0, 1) not in read_run(path).profile
    ok, _ = _file(tmp_path / "sq", sumsq_ns=2 ** 64)
    assert read_run(ok).profile[(0, 1)].sumsq_ns == 2 ** 64


@pytest.mark.parametrize("fields, expected_path", [
    ({"path": [0, 1]}, (0, 1)),
    ({"path": [0, 1.0]}, (0, 1)),  # a whole float is the id (the full check's int())
])
def test_ids_and_counts_are_read_with_the_same_values_either_way(tmp_path, fields, expected_path):
    path, _ = _file(tmp_path, incl_ns=1500.0, recursive=2, **fields)
    st = read_run(path).profile[expected_path]
    assert (st.visits, st.incl_ns, st.recursive) == (3, 1500.0, 2)
    assert all(type(x) is int for x in expected_path)


@pytest.mark.parametrize("fields, why", [
    ({"path": [0, True]}, "path=True is not a whole number"),
    ({"path": [0, "1"]}, "path='1' is not a whole number"),
    ({"path": (0, 1.5)}, "path=1.5 is not a whole number"),
    ({"recursive": True}, "recursive=True is not a whole number"),
    ({"recursive": 1.5}, "recursive=1.5 is not a whole number"),
])
def test_ids_and_recursion_the_writer_never_writes_are_refused(tmp_path, fields, why):
    path, line = _file(tmp_path, **fields)
    assert f"{path}:{line}: bad 'profile' record: {why}" in read_run(path).problems


@pytest.mark.parametrize("key", ["visits", "incl_ns", "excl_ns", "min_ns", "max_ns", "sumsq_ns"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300 * 1e300])
def test_values_a_json_parser_may_pass_that_are_not_numbers_are_refused(tmp_path, key, value):
    # the reader's own parser refuses NaN and Infinity; a record reaching _apply otherwise must not count
    rec = {"type": "profile", "path": [0], "visits": 1, "incl_ns": 5, "excl_ns": 5, "min_ns": 5, "max_ns": 5,
           "sumsq_ns": 25, key: value}
    run = Run(tmp_path / "x.jsonl")
    with pytest.raises(_NotANumber, match=f"{key}=.* is not a number"):
        _apply(run, rec)
    assert run.profile == {}
