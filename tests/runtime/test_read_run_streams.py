"""`read_run` reads a run file a line at a time. Review 54 F2: it held the file whole and then its
lines (2.25x the file: 684 MB for an hour's 304 MB file of a run with 2,000 active call paths)."""
from __future__ import annotations

import json
import tracemalloc

from runtime.runfile import FORMAT_NAME, FORMAT_VERSION, read_run


def _long_run(path, flushes: int = 60, paths: int = 40) -> None:
    """A run file as a long run writes it: every call path's delta again at every flush."""
    with path.open("w") as f:
        f.write(json.dumps({"type": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION, "run_id": "x",
                            "params": {}, "rank": 0, "world_size": 1}) + "\n")
        for i in range(paths + 1):
            f.write(json.dumps({"type": "region", "id": i, "kind": "function", "name": f"f{i}", "file": "m.py",
                                "line": i + 1}) + "\n")
        for flush in range(1, flushes + 1):
            for i in range(1, paths + 1):
                f.write(json.dumps({"type": "profile", "flush": flush, "path": [0, i], "visits": 10, "incl_ns": 1000,
                                    "excl_ns": 900, "min_ns": 50, "max_ns": 200, "sumsq_ns": 1.5e6,
                                    "recursive": 0}) + "\n")
        f.write(json.dumps({"type": "end", "status": "ok", "exit_code": 0}) + "\n")


def test_a_long_run_s_file_is_read_in_less_memory_than_its_size(tmp_path):
    path = tmp_path / "rank0.1.jsonl"
    _long_run(path)
    size = path.stat().st_size
    read_run(path)  # once before: what the first read imports is no part of reading
    tracemalloc.start()
    try:
        run = read_run(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.profile[(0, 7)].visits == 600 and not run.problems  # every flush's delta added up
    assert peak < size / 2, (peak, size)


def test_a_cut_last_line_and_a_byte_order_mark_are_read_as_before(tmp_path):
    path = tmp_path / "rank0.1.jsonl"
    _long_run(path, flushes=2, paths=3)
    raw = path.read_bytes()
    path.write_bytes(b"\xef\xbb\xbf" + raw[: raw.rindex(b"\n", 0, len(raw) - 1) + 20])  # the end record cut
    run = read_run(path)
    assert run.profile[(0, 1)].visits == 20 and run.end is None
    assert any("incomplete last line" in p for p in run.problems), run.problems
