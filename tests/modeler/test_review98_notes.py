"""Review 98: a warning about some series is said only of the series kept (`--metric`,
`--callpath`: LOW-2), and `modeler export` does not say of a series it leaves out that it is
modeled on the points it has (LOW-1)."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from modeler import cli
from modeler.readers.runs import read_runs
from modeler_synthetic_runs import write_rank_file
from test_review88_multirank import REGIONS, _rank_profile

ODD = (5, "function", "odd_region", "main.py", 50)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The review 88 checkpoint sweep (rank 0 alone saves a checkpoint), and a region that runs at
    2 of the 5 rank counts only."""
    root = tmp_path_factory.mktemp("notes")
    for world in (1, 2, 3, 4, 6):
        for rep, noise in enumerate((1.0, 1.01)):
            run = f"r{world}-{rep}"
            for rank in range(world):
                profile = _rank_profile(world, rank, noise)
                if world in (2, 4):
                    profile[(0, 5)] = (1, int(0.2e9 * noise), int(0.2e9 * noise))
                write_rank_file(root / run, run_id=run, rank=rank, world_size=world, repetition=rep,
                                params={"ranks": world}, regions=REGIONS + (ODD,), profile=profile)
    return root


def warnings_of(capsys, *argv) -> str:
    cli.main(list(argv))
    return capsys.readouterr().err


def test_notes_of_call_paths_left_out_by_callpath_are_not_said(runs, capsys):
    err = warnings_of(capsys, "fit", str(runs), "--min-share", "0", "--metric", "time")
    assert "odd_region (2 of 5)" in err and "save_checkpoint: run by" in err
    err = warnings_of(capsys, "fit", str(runs), "--min-share", "0", "--metric", "time", "--callpath", "*compute")
    assert "odd_region" not in err and "save_checkpoint" not in err, err
    err = warnings_of(capsys, "fit", str(runs), "--min-share", "0", "--metric", "time", "--callpath", "*odd_region")
    assert "1 call path(s) were not measured at every point (1 series)" in err and "save_checkpoint" not in err, err


def test_a_note_of_some_series_is_made_again_for_those_kept_and_survives_a_copy(runs):
    from modeler.dataset import SeriesNote

    ds = read_runs([runs])
    [note] = [w for w in ds.warnings if isinstance(w, SeriesNote) and "not measured at every point" in w]
    n = len(note.keys)
    assert n > 2 and f"({n} series)" in note
    visits = ds.select(metrics=["visits"])
    [again] = [w for w in visits.warnings if "not measured at every point" in w]
    assert "(1 series)" in again and "odd_region (2 of 5)" in again
    assert not [w for w in ds.select(metrics=["compute_nothing"]).warnings if "not measured" in w]
    copy = pickle.loads(pickle.dumps(note))
    assert copy == note and copy.keys == note.keys and copy.export_text is None
    [some] = [w for w in ds.warnings if isinstance(w, SeriesNote) and "only some of the ranks" in w]
    copy = pickle.loads(pickle.dumps(some))
    assert copy == some and copy.export_text == some.export_text and "in the export" in copy.export_text


def test_export_does_not_say_a_series_it_leaves_out_is_modeled(runs, tmp_path, capsys):
    err = warnings_of(capsys, "export", "--extrap", str(tmp_path / "out.jsonl"), str(runs))
    assert "modeled on the points they have" not in err, err
    assert "left out of the export" in err and "odd_region" in err


def test_exports_some_ranks_note_says_what_else_the_mean_covers(runs, tmp_path, capsys):
    """LOW-3: it named the cost only, not the speedup and efficiency exported from the same time, nor
    the visits and exclusive time averaged with 0 for the other ranks."""
    err = warnings_of(capsys, "export", "--extrap", str(tmp_path / "out.jsonl"), str(runs))
    assert "(and its visits, exclusive time and communication) is a mean over all ranks" in err, err
    assert "speedup, parallel_efficiency and cost come from the time of the ranks that ran it" in err
