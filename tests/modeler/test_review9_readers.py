"""Review 9 (the modeler as a user who buys a cluster on its numbers): readers and aggregation.

Each test fails on the code before the fix: F3 cost against time, F4 a left-out profile record,
F5 ranks that disagree on the parameters, F7 encodings of Extra-P files, F9 a point listed twice,
F10 a `ranks` parameter against the world size, and byte-for-byte copies of Extra-P files.
"""

from __future__ import annotations

import codecs
import json

import pytest

from modeler.errors import InputError
from modeler.readers import read_inputs
from modeler.readers.extrap import read_extrap_jsonl, read_extrap_text
from modeler.readers.runs import load_runs, read_runs

from .modeler_synthetic_runs import write_rank_file

S = 10**9


def series(ds, callpath, metric):
    return next(s for s in ds.series if s.callpath == callpath and s.metric == metric)


def values_at(ds, callpath, metric, point):
    s = series(ds, callpath, metric)
    i = [tuple(p) for p in s.points.tolist()].index(point)
    return sorted(s.repetitions[i].tolist())


def test_cost_counts_a_repetition_that_skipped_the_call_path_as_time_does(tmp_path):
    # F3: a checkpoint taken in repetition 0 only: time is [2, 0] per rank, so cost must be
    # [2 * ranks, 0], not [2 * ranks] alone (cost = time x ranks)
    for ranks in (1, 2, 4):
        for rep in range(2):
            prof = {(0,): (1, 3 * S, S)}
            if rep == 0:
                prof[(0, 4)] = (1, 2 * S, 2 * S)
            for rank in range(ranks):
                write_rank_file(tmp_path / f"r{ranks}-{rep}", run_id=f"r{ranks}-{rep}", params={"ranks": ranks},
                                rank=rank, world_size=ranks, repetition=rep, profile=prof)
    ds = read_runs([tmp_path])
    cp = "main->load_batch"
    for ranks in (1, 2, 4):
        time = values_at(ds, cp, "time", (float(ranks),))
        cost = values_at(ds, cp, "cost", (float(ranks),))
        assert time == pytest.approx([0.0, 2.0])
        assert cost == pytest.approx([t * ranks for t in time])


def _damaged_copy(tmp_path, edit):
    """Two runs of `main` (2 ranks each) at p=2 and p=4, where `edit` changes rank 0's lines of p=2."""
    for p in (2, 4):
        for rank in range(2):
            write_rank_file(tmp_path / f"p{p}", run_id=f"p{p}", params={"p": p}, rank=rank, world_size=2,
                            profile={(0,): (1, 10 * S, S), (0, 3): (2, 4 * S, 4 * S)})
    f = tmp_path / "p2" / "rank0.1000.jsonl"
    lines = f.read_bytes().split(b"\n")
    n = next(i for i, line in enumerate(lines) if b'"profile"' in line and b'"path":[0]' in line.replace(b" ", b""))
    lines[n] = edit(lines[n])
    f.write_bytes(b"\n".join(lines))
    return f, n + 1


@pytest.mark.parametrize("edit, why", [
    (lambda line: line.replace(b"10000000000", b"-10000000000", 1), "negative incl_ns"),
    (lambda line: line.replace(b"10000000000", b"NaN", 1), "not valid JSON"),
    (lambda line: line.replace(b"10000000000", b'"10000000000"', 1), "is not a number"),
])
def test_a_left_out_profile_record_leaves_its_call_path_without_a_value_not_at_zero(tmp_path, edit, why):
    # F4: before, the rank counted `main` as 0, and the run's mean time of `main` was halved
    f, lineno = _damaged_copy(tmp_path, edit)
    rs = load_runs([tmp_path])
    assert all(r.status == "ok" for r in rs.runs)
    assert any(w.startswith(f"{f}:{lineno}:") and why in w for w in rs.warnings)
    ds = read_runs([tmp_path])
    main = series(ds, "main", "time")
    assert main.points[:, 0].tolist() == [4.0]  # no value at p=2 (neither 10 s nor the 5 s of a 0)
    assert series(ds, "main->Model.forward", "time").points[:, 0].tolist() == [2.0, 4.0]


def test_a_record_after_the_end_record_is_named_and_left_out(tmp_path):
    f = write_rank_file(tmp_path / "a", run_id="a", params={"p": 2}, profile={(0,): (1, S, S)})
    write_rank_file(tmp_path / "b", run_id="b", params={"p": 4}, profile={(0,): (1, S, S)})
    extra = {"type": "profile", "flush": 9, "path": [0], "visits": 1, "incl_ns": 5 * S, "excl_ns": 5 * S,
             "min_ns": 1, "max_ns": 1, "sumsq_ns": 0, "recursive": 0}
    with open(f, "ab") as out:
        out.write(json.dumps(extra).encode() + b"\n")
    n = len(f.read_bytes().splitlines())
    rs = load_runs([tmp_path])
    assert any(w.startswith(f"{f}:{n}: 'profile' record after the end record") for w in rs.warnings)
    assert series(read_runs([tmp_path]), "main", "time").points[:, 0].tolist() == [4.0]


def test_ranks_that_disagree_on_the_parameters_fail_their_run(tmp_path):
    # F5: rank 1 of run n4 says n=5; before, it became a one-rank run of its own at n=5
    for n in (1, 2, 4, 8):
        for rank in range(2):
            p = {"n": n + 1 if (n == 4 and rank == 1) else n}
            write_rank_file(tmp_path / f"n{n}", run_id=f"n{n}", params=p, rank=rank, world_size=2,
                            profile={(0,): (1, (1 + n) * S, S)})
    rs = load_runs([tmp_path])
    (bad,) = rs.failed()
    assert bad.run_id == "n4" and "disagree on the parameters" in bad.reason
    assert "rank 0: n=4" in bad.reason and "rank 1: n=5" in bad.reason
    assert series(read_runs([tmp_path]), "main", "time").points[:, 0].tolist() == [1.0, 2.0, 8.0]


def test_launches_of_one_job_with_other_parameters_stay_runs_of_their_own(tmp_path):
    # the other side of F5: one run id (a PBS job) holding two full launches is not a disagreement
    for n in (1, 2):
        for rank in range(2):
            write_rank_file(tmp_path / f"n{n}", run_id="job7", params={"n": n}, rank=rank, world_size=2,
                            profile={(0,): (1, (1 + n) * S, S)})
    rs = load_runs([tmp_path])
    assert [r.status for r in rs.runs] == ["ok", "ok"]


def test_a_ranks_parameter_other_than_the_world_size_is_said(tmp_path):
    # F10: `--param ranks=...` beside a fixed `torchrun --nproc 2`
    for ranks in (1, 2, 4):
        for rank in range(2):
            write_rank_file(tmp_path / f"r{ranks}", run_id=f"r{ranks}", params={"ranks": ranks}, rank=rank,
                            world_size=2, profile={(0,): (1, S, S)})
    rs = load_runs([tmp_path])
    (w,) = [w for w in rs.warnings if "other than their world size" in w]
    assert "2 run(s)" in w and "ranks=1, world size 2" in w


def _extrap_lines(n_points=5):
    return [json.dumps({"params": {"n": n}, "callpath": "main", "metric": "time", "value": [n + 1.0, n + 1.01]})
            for n in (1, 2, 4, 8, 16)[:n_points]]


def test_a_line_that_is_not_utf8_is_skipped_not_the_file(tmp_path):
    # F7: one Latin-1 byte lost the whole file, with a byte offset for a place
    lines = [s.encode() for s in _extrap_lines()]
    lines.insert(3, '{"params": {"n": 3}, "callpath": "m\xe9in", "metric": "time", "value": 1}'.encode("latin-1"))
    f = tmp_path / "x.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    ds = read_extrap_jsonl(f)
    assert series(ds, "main", "time").points[:, 0].tolist() == [1, 2, 4, 8, 16]
    assert any(w.startswith(f"{f}:4: not valid UTF-8 (byte 0xe9") for w in ds.warnings)


def test_a_byte_order_mark_is_not_content(tmp_path):
    # F7: inside a directory a BOM'd Extra-P file was silently ignored
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "bom.jsonl").write_bytes(codecs.BOM_UTF8 + "\n".join(_extrap_lines()).encode() + b"\n")
    text = "PARAMETER n\nPOINTS ( 1 ) ( 2 ) ( 4 ) ( 8 ) ( 16 )\nREGION main\nMETRIC time\n" + \
        "".join(f"DATA {n + 1} {n + 1.01}\n" for n in (1, 2, 4, 8, 16))
    (tmp_path / "d" / "bom.txt").write_bytes(codecs.BOM_UTF8 + text.encode())
    loaded = read_inputs([tmp_path / "d"])
    assert sorted(f.status for f in loaded.files) == ["read", "read"]
    assert read_extrap_text(tmp_path / "d" / "bom.txt").series[0].points[:, 0].tolist() == [1, 2, 4, 8, 16]


def test_tab_separated_extrap_text_is_read(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER\tn\nPOINTS\t( 1 ) ( 2 ) ( 4 )\nREGION\tmain\nMETRIC\ttime\nDATA\t2 2.01\nDATA\t3\nDATA\t5\n")
    assert read_extrap_text(f).series[0].points[:, 0].tolist() == [1, 2, 4]


def test_a_point_listed_twice_in_points_is_an_error_naming_the_line(tmp_path):
    # F9: `( 8 ) ( 8 )`, a typo for 16, merged the data of two points without a word
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER n\nPOINTS ( 1 ) ( 2 ) ( 4 ) ( 8 ) ( 8 )\nREGION main\nMETRIC time\n"
                 + "DATA 1\n" * 5)
    with pytest.raises(InputError, match=r"t\.txt:2: point \(8\) is listed twice"):
        read_extrap_text(f)


def test_a_byte_for_byte_copy_of_an_extrap_file_is_read_once(tmp_path):
    (tmp_path / "backup").mkdir()
    body = ("\n".join(_extrap_lines()) + "\n").encode()
    (tmp_path / "a.jsonl").write_bytes(body)
    (tmp_path / "backup" / "a.jsonl").write_bytes(body)
    loaded = read_inputs([tmp_path])
    assert sorted(f.status for f in loaded.files) == ["duplicate", "read"]
    assert [r.tolist() for r in series(loaded.dataset, "main", "time").repetitions][0] == [2.0, 2.01]
    assert any("byte-for-byte copies" in w for w in loaded.dataset.warnings)
