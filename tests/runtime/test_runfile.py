"""runtime.runfile: the one owner of the run-file format."""
import json
import re

import pytest

from runtime.runfile import FORMAT_VERSION, ProfileStats, RunFileError, RunWriter, read_run


def _write(path, records, header=None):
    with RunWriter(path) as w:
        w.write_header(header or {"run_id": "r1", "rank": 0, "world_size": 1})
        w.write_records(records)


def _prof(path, visits, incl, mn, mx, flush=1):
    return {"type": "profile", "flush": flush, "path": path, "visits": visits, "incl_ns": incl, "excl_ns": incl // 2,
            "min_ns": mn, "max_ns": mx, "sumsq_ns": incl * incl, "recursive": 0}


def test_round_trip_sums_profile_deltas(tmp_path):
    f = tmp_path / "rank0.1.jsonl"
    _write(f, [
        {"type": "region", "id": 3, "kind": "function", "name": "train", "file": "a.py", "line": 4},
        _prof([3], 2, 100, 40, 60),
        _prof([3], 1, 30, 30, 30, flush=2),
        {"type": "step", "region": 3, "index": 0, "duration_ns": 10, "data_wait_ns": 1, "comm_ns": 0},
        {"type": "comm", "op": "all_reduce", "bytes": 8, "group_size": 2, "calls": 1, "time_ns": 5, "gpu_ns": None, "callpath": [3]},
        {"type": "iterations", "region": 3, "count": 4}, {"type": "iterations", "region": 3, "count": 6},
        {"type": "end", "status": "ok", "exit_code": 0, "throttled": 0, "dropped": 0},
    ])
    run = read_run(f)
    assert run.problems == []
    assert run.header["run_id"] == "r1"
    assert run.regions[3].name == "train" and run.regions[3].line == 4
    st = run.profile[(3,)]
    assert (st.visits, st.incl_ns, st.excl_ns, st.min_ns, st.max_ns) == (3, 130, 65, 30, 60)
    assert run.iterations == {3: 10}
    assert run.steps[0]["gpu_ns"] is None and run.steps[0]["duration_ns"] == 10
    assert run.comms[0]["op"] == "all_reduce"
    assert run.end["status"] == "ok"
    assert run.callpath_name((3, 9)) == "train->#9"


def test_cut_off_last_line_is_a_problem_not_an_error(tmp_path):
    f = tmp_path / "rank0.1.jsonl"
    _write(f, [_prof([1], 1, 10, 10, 10)])
    with open(f, "ab") as fh:
        fh.write(b'{"type":"profile","path":[1],"vis')
    run = read_run(f)
    assert run.profile[(1,)].visits == 1
    assert run.end is None
    assert any("incomplete last line" in p for p in run.problems)
    assert any(":3:" in p for p in run.problems)


def test_malformed_middle_line_is_listed_with_its_line_number(tmp_path):
    f = tmp_path / "rank0.1.jsonl"
    _write(f, [])
    with open(f, "ab") as fh:
        fh.write(b"not json\n")
        fh.write(json.dumps(_prof([2], 1, 5, 5, 5)).encode() + b"\n")
        fh.write(b'{"type":"profile","path":[2]}\n')
    run = read_run(f)
    assert run.profile[(2,)].incl_ns == 5
    assert any(p.startswith(f"{f}:2:") for p in run.problems)
    assert any(p.startswith(f"{f}:4:") and "bad 'profile' record: missing field 'visits'" in p for p in run.problems)


def test_header_cut_off_is_named_with_its_line(tmp_path):
    f = tmp_path / "rank0.1.jsonl"
    f.write_bytes(b'{"type":"header","format":"scal')
    with pytest.raises(RunFileError, match=rf"{re.escape(str(f))}:1: incomplete last line.*no complete header"):
        read_run(f)


def test_other_format_version_names_file_and_both_versions(tmp_path):
    f = tmp_path / "rank0.1.jsonl"
    f.write_text(json.dumps({"type": "header", "format": "scaleprobe-run", "version": 99}) + "\n")
    with pytest.raises(RunFileError) as e:
        read_run(f)
    assert str(f) in str(e.value) and "99" in str(e.value) and str(FORMAT_VERSION) in str(e.value)


def test_not_a_run_file(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"type": "profile"}\n')
    with pytest.raises(RunFileError, match="not a scaleprobe run file"):
        read_run(f)
    with pytest.raises(RunFileError, match="cannot read"):
        read_run(tmp_path / "missing.jsonl")


def test_profile_stats_variance():
    st = ProfileStats(visits=2, incl_ns=30, excl_ns=30, min_ns=10, max_ns=20, sumsq_ns=10 * 10 + 20 * 20)
    assert st.mean_ns == 15
    assert st.variance_ns2 == pytest.approx(25.0)


@pytest.mark.parametrize("with_orjson", [True, False])
def test_both_encoders_write_a_name_not_valid_utf8_as_orjson_reads_it(monkeypatch, with_orjson):
    """Without orjson (optional) the standard library's json wrote a lone surrogate (`run_\\xff.py`,
    held as `run_\\udcff.py`) as a `\\udcff` escape, which orjson refuses: a run file written so was
    unreadable wherever orjson is installed. Both write UTF-8, the name shown as its escape."""
    import sys

    import runtime.runfile as runfile

    try:
        import orjson
    except ImportError:
        orjson = None
    if with_orjson and orjson is None:
        pytest.skip("orjson is not installed")
    if not with_orjson:
        monkeypatch.setitem(sys.modules, "orjson", None)  # `import orjson` raises ImportError
    encode = runfile._dumps()
    data = encode([{"type": "region", "file": "run_\udcff.py", "name": "é"}, {"type": "end"}])
    lines = data.decode("utf-8").splitlines()  # strict: valid UTF-8
    assert json.loads(lines[0]) == {"type": "region", "file": "run_\\xff.py", "name": "é"}
    assert lines[1] == '{"type":"end"}'
    if orjson is not None:  # what the readers use where it is installed
        assert orjson.loads(lines[0]) == json.loads(lines[0])


@pytest.mark.parametrize("with_orjson", [True, False])
def test_nan_and_infinity_are_not_json_with_either_reader(tmp_path, monkeypatch, with_orjson):
    """The standard library's json.loads (the reader without orjson) took NaN and Infinity, which
    orjson refuses: the same damaged line was then dropped for another reason, or kept."""
    import sys

    if with_orjson:
        pytest.importorskip("orjson")
    else:
        monkeypatch.setitem(sys.modules, "orjson", None)  # `import orjson` raises ImportError
    f = tmp_path / "rank0.1.jsonl"
    _write(f, [_prof([3], 1, 30, 30, 30), _prof([3], 1, 30, 30, 30, flush=2),
               {"type": "step", "region": 3, "index": 0, "duration_ns": 10}, {"type": "end", "status": "ok"}])
    lines = f.read_text().splitlines()
    lines[2] = lines[2].replace('"incl_ns":30', '"incl_ns":NaN')
    lines[3] = lines[3].replace('"duration_ns":10', '"duration_ns":-Infinity')
    f.write_text("\n".join(lines) + "\n")
    run = read_run(f)
    assert run.dropped_lines == [3, 4]
    assert all(": not valid JSON: " in p for p in run.problems)
    assert run.profile[(3,)].visits == 1 and run.steps == []
