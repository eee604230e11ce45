"""`check_values` looks at a run file's records one by one only where one may hold a negative
number or an undefined id. Review 54 F4: a minus before a digit anywhere, also inside a region's
file name (`exp-1/train.py`, in every rank's file), made every file be parsed twice."""
from __future__ import annotations

import pytest

from modeler.readers import runvalues
from modeler.readers.runs import load_runs

from .modeler_synthetic_runs import REGIONS, write_rank_file

S = 10**9
DASHED = tuple((rid, kind, name, f"exp-1/v-2/{file}", line) for rid, kind, name, file, line in REGIONS)


@pytest.mark.parametrize("raw, negative", [
    (b'{"incl_ns":-5}', True),
    (b'{"path":[-1,2]}', True),
    (b'{"a":1, "b": -2}', True),
    (b'{"sumsq_ns":1e-9,"file":"exp-1/g0.py","name":"run-2"}', False),
    (b'{"file":"a-1"}\n{"x":0}', False),
])
def test_a_minus_counts_only_where_a_number_starts(raw, negative):
    assert runvalues._has_negative(raw, 0) is negative


def test_names_with_a_minus_before_a_digit_are_not_looked_at_twice(tmp_path, monkeypatch):
    for p in (2, 4):
        write_rank_file(tmp_path / f"p{p}", run_id=f"p{p}", params={"p": p}, regions=DASHED,
                        profile={(0,): (1, 10 * S, S), (0, 3): (2, 4 * S, 4 * S)})
    looked = []
    real = runvalues._records
    monkeypatch.setattr(runvalues, "_records", lambda *a: looked.append(a[0]) or real(*a))
    rs = load_runs([tmp_path])
    assert sorted(r.run_id for r in rs.runs) == ["p2", "p4"] and not looked
    # a negative value still is
    f = next((tmp_path / "p2").glob("*.jsonl"))
    f.write_bytes(f.read_bytes().replace(b'"incl_ns":10000000000', b'"incl_ns":-10000000000', 1))
    load_runs([tmp_path])
    assert looked == [f]
