"""Review 93 (an adversarial review of session 29's changes), the modeler's side.

LOW-1: durations that round to 1000 of their unit were written `1e+03 µs`, `1e+03 h`; 7199 s `120 min`.
LOW-2: `fit_dataset(metrics="time")` read the string as its letters.
LOW-3: the some-ranks warning hid the runs in which every rank ran the call path.
LOW-4: under `--ranks sum|min` nothing named the call paths whose cost is over the ranks that ran them.
LOW-5: the report's rank lists named every rank of a run, however many.
(HIGH-1 and MED-1 are the timeline's: tests/modeler/test_timeline_review90.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modeler.aggregate import dataset_from_runs
from modeler.commands.fit import fit_dataset
from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs
from modeler.report import svg
from modeler.report.ranks import _rank_list
from modeler_synthetic_runs import write_rank_file

REGIONS = ((0, "function", "main", "m.py", 1), (1, "function", "save", "m.py", 5))


@pytest.mark.parametrize("seconds, text", [
    (999.7 * 3600, "1000 h"), (0.0009995, "0.999 ms"), (999.6e-9, "1 µs"), (7199, "2 h"), (1389 * 3600, "1389 h"),
    (0.0009999, "1 ms"), (350e-9, "350 ns"),
])
def test_durations_never_have_an_exponent(seconds, text):
    assert svg.format_seconds(seconds) == text


def _sweep(root: Path, every_rank_in_rep1: bool = True) -> Path:
    """ranks 1..8; `save` takes 0.4 s on rank 0 only in repetition 0, on every rank in repetition 1."""
    for world in (1, 2, 4, 6, 8):
        for rep in range(2):
            for rank in range(world):
                saves = rank == 0 or (rep == 1 and every_rank_in_rep1)
                save = 4 * 10**8 if saves else 0
                profile = {(0,): (1, 10**9 + save, 10**9)}
                if saves:
                    profile[(0, 1)] = (1, save, save)
                write_rank_file(root / f"r{world}-{rep}", run_id=f"r{world}-{rep}", rank=rank, world_size=world,
                                repetition=rep, params={"ranks": world}, regions=REGIONS, profile=profile)
    return root


def test_fit_dataset_takes_one_metric_named_alone(tmp_path):
    dataset = dataset_from_runs(load_runs([str(_sweep(tmp_path / "runs"))], ReadOptions()))
    ranking = fit_dataset(dataset, metrics="time", min_share=0)
    assert {r.fitted.metric for r in ranking.rows} == {"time"}


def test_the_warning_says_in_which_runs_only_some_ranks_ran_it(tmp_path):
    dataset = dataset_from_runs(load_runs([str(_sweep(tmp_path / "runs"))], ReadOptions()))
    [note] = [w for w in dataset.warnings if "run by only some of the ranks" in w]
    assert "main->save: run by 1 of 2-8 ranks in 4 of 8 runs (every rank in the others)" in note


def test_the_warning_says_nothing_of_other_runs_where_there_are_none(tmp_path):
    dataset = dataset_from_runs(load_runs([str(_sweep(tmp_path / "runs", every_rank_in_rep1=False))], ReadOptions()))
    [note] = [w for w in dataset.warnings if "run by only some of the ranks" in w]
    assert "main->save: run by 1 of 2-8 ranks;" in note and "every rank in the others" not in note


@pytest.mark.parametrize("ranks, its", [("sum", "summed"), ("min", "fastest rank's")])
def test_sum_and_min_name_the_call_paths_derived_over_the_ranks_that_ran_them(tmp_path, ranks, its):
    dataset = dataset_from_runs(load_runs([str(_sweep(tmp_path / "runs", False))], ReadOptions(ranks=ranks)),
                                ranks=ranks)
    [note] = [w for w in dataset.warnings if w.startswith(f"--ranks {ranks}: speedup")]
    assert (f"for a call path that only some ranks ran, the mean over the ranks that ran it, so its cost is not its "
            f"{its} time x ranks: main->save") in note


def test_rank_lists_are_ranges_and_bounded():
    assert _rank_list([0, 1, 2, 3, 5, 7, 8]) == "0-3, 5, 7, 8"
    text = _rank_list(list(range(0, 2048, 2)))
    assert text.endswith("and 1008 more") and text.count(",") == 15
