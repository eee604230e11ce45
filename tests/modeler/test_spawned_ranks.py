"""Ranks that the program starts itself (`torch.multiprocessing.spawn`): each says its rank in a `rank`
record once torch.distributed gave it; the process that started them is no rank (review 20: the
ranks were summed into rank 0 as its helpers, and the starter counted as rank 0 besides)."""

from __future__ import annotations

import pytest

from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import write_rank_file

MS = 10**6


def _spawned_run(d, run_id: str, n: int, step_ms: int, fail_rank: int | None = None, starter_end="ok",
                 others_end=None) -> None:
    # the starter: the launcher's (or the user's) one process, waiting for its ranks the whole time
    params = {"ranks": 1, "nprocs": n}
    starter_end = {"status": "ok", "exit_code": 0} if starter_end == "ok" else starter_end
    write_rank_file(d, run_id=run_id, params=params, pid=100, profile={(0,): (1, 50 * step_ms * MS, MS)},
                    end=starter_end)
    for r in range(n):
        end = {"status": "exit", "exit_code": 1} if r == fail_rank else (others_end or {"status": "ok", "exit_code": 0})
        # each rank read no RANK at import: rank 0 of 1 in its header, a child of the starter
        write_rank_file(d, run_id=run_id, params=params, pid=200 + r, header={"child_of": 100, "ppid": 100},
                        records=[{"type": "rank", "rank": r, "world_size": n, "started_by": 100}],
                        profile={(0,): (1, 10 * step_ms * MS, MS)}, end=end)
        # and a DataLoader worker each, forked after the group was up: the rank's helper
        write_rank_file(d, run_id=run_id, params=params, pid=300 + r, rank=r, world_size=n,
                        header={"child_of": 200 + r, "forked_from": 200 + r}, profile={(4,): (2, 3 * MS, 3 * MS)})


def test_spawned_ranks_are_ranks_and_their_starter_counts_in_no_value(tmp_path):
    for n, ms in ((1, 10), (2, 20), (4, 40), (8, 80), (16, 160)):
        _spawned_run(tmp_path / f"n{n}", f"run{n}", n, ms)
    runset = load_runs([tmp_path], ReadOptions())
    assert [r.status for r in runset.runs] == ["ok"] * 5
    by = {r.run_id: r for r in runset.runs}
    assert {rank: [f.header["pid"] for f in fs] for rank, fs in by["run2"].ranks.items()} == {0: [200, 300], 1: [201, 301]}
    assert [f.header["pid"] for f in by["run2"].starters] == [100]
    assert by["run4"].world_size == 4 and by["run4"].params == {"ranks": 4}  # nprocs says it again: not modeled
    assert any("started their ranks themselves" in w and "nprocs" in w for w in runset.warnings), runset.warnings
    assert not any("rank selection" in w for w in runset.warnings)
    ds = read_runs([tmp_path])
    assert ds.parameters == ("ranks",)
    main = next(s for s in ds.series if s.callpath == "main" and s.metric == "time")
    # each rank's 10 steps, not the starter's wait summed in (5x) nor the ranks summed into rank 0
    assert main.values().tolist() == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6])
    visits = next(s for s in ds.series if s.callpath == "main" and s.metric == "visits")
    assert visits.values().tolist() == pytest.approx([1.0] * 5)
    assert len([f for f in runset.files if f.status == "read"]) == 5 + 2 * (1 + 2 + 4 + 8 + 16)


def test_a_spawned_rank_that_failed_fails_the_run_and_is_named(tmp_path):
    _spawned_run(tmp_path / "a", "a", 2, 10, fail_rank=1)
    (run,) = load_runs([tmp_path], ReadOptions()).runs
    assert run.status == "failed" and "rank 1 ended with status=exit, exit_code=1" in run.reason


def test_a_failed_spawned_rank_0_is_a_rank_and_named_not_an_interruption(tmp_path):
    """Review 22: the starter (rank 0 too, and the parent of spawned rank 0) made rank 0 a helper: its
    failure went unseen, rank 1's SIGTERM made the run "interrupted", and --include-incomplete used it."""
    sigterm = {"status": "signal", "exit_code": 143, "signal": 15}
    _spawned_run(tmp_path / "a", "a", 2, 10, fail_rank=0, others_end=sigterm)
    for include in (False, True):
        (run,) = load_runs([tmp_path], ReadOptions(include_incomplete=include)).runs
        assert not any(f.is_child for f in run.files if f.header.get("rank_from")), include
        assert run.status == "failed" and "rank 0 ended with status=exit, exit_code=1" in run.reason, run.reason
        assert "interrupted" not in run.reason


def test_a_starter_that_failed_after_its_ranks_fails_the_run(tmp_path):
    _spawned_run(tmp_path / "a", "a", 2, 10, starter_end={"status": "exception", "exit_code": 1,
                                                          "exception": "builtins.ValueError"})
    (run,) = load_runs([tmp_path], ReadOptions()).runs
    assert run.status == "failed" and "the process that started the ranks ended with status=exception" in run.reason


def _two_ranks(d, run_id: str, ends) -> None:
    for r, end in enumerate(ends):
        write_rank_file(d, run_id=run_id, params={"p": 2}, rank=r, world_size=2, profile={(0,): (1, 10 * MS, MS)},
                        end=end)


def test_an_interrupted_run_is_used_with_include_incomplete_and_said(tmp_path):
    """Review 20: a run ended by Ctrl-C (or one whose rank was killed and the others stopped by the
    launcher's SIGTERM) could not be modeled at all, and the error did not say what would."""
    ctrl_c = {"status": "signal", "exit_code": 130, "signal": 2, "exception": "builtins.KeyboardInterrupt"}
    sigterm = {"status": "signal", "exit_code": 143, "signal": 15}
    _two_ranks(tmp_path / "a", "a", [ctrl_c, ctrl_c])
    _two_ranks(tmp_path / "b", "b", [None, sigterm])  # rank 0 SIGKILLed: no end record
    _two_ranks(tmp_path / "c", "c", [{"status": "exception", "exit_code": 1, "exception": "builtins.ValueError"},
                                     sigterm])
    runs = {r.run_id: r for r in load_runs([tmp_path], ReadOptions()).runs}
    assert {k: r.status for k, r in runs.items()} == {"a": "interrupted", "b": "interrupted", "c": "failed"}  # review 92 LOW-5
    assert "(interrupted: --include-incomplete uses it, up to then)" in runs["a"].reason
    assert "(interrupted: --include-incomplete uses it" in runs["b"].reason
    assert "(interrupted:" not in runs["c"].reason  # a rank failed on its own
    kept = {r.run_id: r for r in load_runs([tmp_path], ReadOptions(include_incomplete=True)).runs}
    assert {k: r.status for k, r in kept.items()} == {"a": "ok", "b": "ok", "c": "failed"}
    assert kept["a"].kept_incomplete.startswith("interrupted: ")


def test_a_helper_started_before_its_parent_became_a_rank_is_that_ranks(tmp_path):
    """Review 23: a Pool or DataLoader worker made before init_process_group says rank 0 (its parent's
    rank then): its work was counted in rank 0's; and without the starter's file (rank selection)
    `ranks` stayed the launcher's 1."""
    params = {"ranks": 1}
    for r in range(2):
        write_rank_file(tmp_path, run_id="a", params=params, pid=200 + r, header={"child_of": 100, "ppid": 100},
                        records=[{"type": "rank", "rank": r, "world_size": 2, "started_by": 100}],
                        profile={(0,): (1, 10 * MS, MS)})
    write_rank_file(tmp_path, run_id="a", params=params, pid=301, rank=0, header={"child_of": 201, "ppid": 201},
                    profile={(4,): (2, 3 * MS, 3 * MS)})
    (run,) = load_runs([tmp_path], ReadOptions()).runs
    assert run.status == "ok" and {rank: [f.header["pid"] for f in fs] for rank, fs in run.ranks.items()} == \
        {0: [200], 1: [201, 301]}
    assert run.params == {"ranks": 2}
