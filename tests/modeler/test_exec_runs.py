"""Run files of a process that replaced itself with os.exec* (runtime/exec_hook.py): each image
writes a file of its own (`rank<R>.<pid>.<n>.jsonl`, header `exec_of`), the ones replaced end
with status `exec`. Readers add them up into the rank; before, the same pid made them copies of
each other (one read, the rest dropped) and `exec` a failure."""
from __future__ import annotations

from pathlib import Path

from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import MS, write_rank_file
from test_readers_runs import series, simple_run

EXEC_END = {"status": "exec", "exit_code": None, "closed_at_end": 1}


def _restarted_run(d: Path, p: int, last_end: dict | None = None) -> list[Path]:
    """One run of rank 0 in three images: the first two replaced by the next."""
    files = []
    for image in range(3):
        header = {"exec_of": files[-1].name} if files else None
        end = EXEC_END if image < 2 else (last_end or {"status": "ok", "exit_code": 0})
        files.append(write_rank_file(d / "x", run_id="x", params={"p": p}, pid=4242, image=image, header=header,
                                     profile={(0,): (1, 10 * p * MS, MS), (0, 3): (2, 9 * p * MS, 9 * p * MS)},
                                     end=end))
    return files


def _sweep_with_restarts(root: Path) -> None:
    for p in (2, 4, 8, 16):
        simple_run(root, f"r{p}", p, t_ms=30 * p)
    _restarted_run(root, 32)


def test_the_images_of_a_restarted_process_add_up_into_its_rank(tmp_path):
    _sweep_with_restarts(tmp_path)
    rs = load_runs([tmp_path])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    assert run.status == "ok", run.reason
    assert len(run.files) == 3
    assert not any(f.status == "duplicate" for f in rs.files)
    ds = read_runs([tmp_path])
    s = series(ds, "main->Model.forward", "visits")
    assert dict(zip(s.points[:, 0].tolist(), s.values().tolist()))[32.0] == 6  # 2 visits in each image
    t = series(ds, "main", "time")
    assert dict(zip(t.points[:, 0].tolist(), t.values().tolist()))[32.0] == 3 * 0.32


def test_the_last_image_says_whether_the_run_failed(tmp_path):
    _sweep_with_restarts(tmp_path / "ok")
    _restarted_run(tmp_path / "bad", 64, {"status": "exception", "exit_code": 1, "exception": "builtins.ValueError"})
    rs = load_runs([tmp_path / "bad"])
    (run,) = rs.runs
    assert run.status == "failed" and "rank0.4242.2.jsonl" in run.reason and "ValueError" in run.reason


def test_a_copy_of_an_image_s_file_is_still_read_once(tmp_path):
    files = _restarted_run(tmp_path / "runs", 32)
    for p in (2, 4, 8, 16):
        simple_run(tmp_path / "runs", f"r{p}", p, t_ms=30 * p)
    backup = tmp_path / "runs" / "backup"
    backup.mkdir()
    (backup / files[1].name).write_bytes(files[1].read_bytes())
    rs = load_runs([tmp_path / "runs"])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    assert run.status == "ok" and len(run.files) == 3
    assert [Path(f.path).name for f in rs.files if f.status == "duplicate"] == [files[1].name]


def test_a_restarted_rank_s_run_time_is_its_images_added_up(tmp_path):
    """Each image ran after the other: the rank's run time, against which call paths' shares of
    the run are taken (`--min-share`), is their sum; the longest alone made `main` 3x the run."""
    from modeler.aggregate import RegionNames, run_metrics

    _sweep_with_restarts(tmp_path)
    rs = load_runs([tmp_path])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    rm = run_metrics(run, RegionNames(rs.runs))
    assert rm.shares["main"] == 1.0
