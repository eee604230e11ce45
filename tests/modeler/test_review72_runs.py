"""Review 72 F5: a run missing whole ranks' files, whose headers name no rank selection
(`recorded_ranks`), is incomplete naming the missing ranks (it was taken for rank selection and
modeled); --include-incomplete keeps it. Rank selection itself, and files of a runtime that did not
name its selection yet, read as before."""

from __future__ import annotations

from pathlib import Path

from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs
from modeler_synthetic_runs import MS, write_rank_file

# what the runtime writes in every header since it names rank selection (`recorded_ranks`)
NOW = {"rank_source": "variable", "launcher": "slurm"}


def _run(root: Path, run_id: str, ranks: list[int], world: int, header: dict | None = None,
         repetition: int = 0, n: int = 1000) -> None:
    for rank in ranks:
        write_rank_file(root / run_id, run_id=run_id, params={"ranks": world, "n": n}, rank=rank,
                        world_size=world, repetition=repetition, header={**NOW, **(header or {})},
                        profile={(0,): (1, 3 * MS, MS), (0, 1): (1, 2 * MS, MS)})


def _sweep(root: Path) -> None:
    for n in (1000, 2000, 4000, 8000):
        _run(root, f"n{n}", [0, 1], 2, n=n)


def test_a_run_missing_a_ranks_file_is_incomplete_naming_it(tmp_path):
    _sweep(tmp_path)
    _run(tmp_path, "lost", [0], 2, n=16000)  # rank 1's file was on the other node's disk
    rs = load_runs([tmp_path])
    by_id = {r.run_id: r for r in rs.runs}
    lost = by_id["lost"]
    assert lost.status == "incomplete"
    assert "no file for rank(s) 1 of its 2" in lost.reason and "recorded_ranks" in lost.reason
    assert all(r.status == "ok" for rid, r in by_id.items() if rid != "lost")
    assert any("run lost left out (incomplete): no file for rank(s) 1" in w for w in rs.warnings)
    assert not any("rank selection?" in w for w in rs.warnings)
    # --include-incomplete models it, and says so
    kept = load_runs([tmp_path], ReadOptions(include_incomplete=True))
    lost = {r.run_id: r for r in kept.runs}["lost"]
    assert lost.status == "ok" and "no file for rank(s) 1" in lost.kept_incomplete
    assert any("--include-incomplete kept 1 incomplete run(s)" in w for w in kept.warnings)


def test_ranks_that_disagreed_on_the_repetition_make_two_incomplete_runs(tmp_path):
    # srun -n 2 sh -c '... --repetition $SLURM_PROCID ...': each rank a "run" of 1 of 2 ranks
    for rank in (0, 1):
        write_rank_file(tmp_path / f"rep{rank}", run_id="slurm-1.0", params={"ranks": 2}, rank=rank, world_size=2,
                        repetition=rank, header=NOW, profile={(0,): (1, 3 * MS, MS)})
    runs = load_runs([tmp_path]).runs
    assert sorted(r.status for r in runs) == ["incomplete", "incomplete"]
    assert sorted(r.reason.split(" of its")[0] for r in runs) == ["no file for rank(s) 0", "no file for rank(s) 1"]


def test_rank_selection_still_reads_as_complete(tmp_path):
    _sweep(tmp_path)
    _run(tmp_path, "selected", [0], 2, header={"recorded_ranks": [0]}, n=16000)
    rs = load_runs([tmp_path])
    assert {r.run_id: r.status for r in rs.runs}["selected"] == "ok"
    assert any("1 run(s) have files of fewer ranks than their world size" in w and "rank selection)" in w
               for w in rs.warnings)


def test_files_of_an_older_runtime_keep_their_reading(tmp_path):
    # no rank_source: written before the runtime named its rank selection, which it may have had
    for rank in (0,):
        write_rank_file(tmp_path / "old", run_id="old", params={"ranks": 2}, rank=rank, world_size=2,
                        profile={(0,): (1, 3 * MS, MS)})
    rs = load_runs([tmp_path])
    assert rs.runs[0].status == "ok"
    assert any("rank selection?" in w for w in rs.warnings)
