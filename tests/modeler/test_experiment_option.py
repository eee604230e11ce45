"""`--experiment NAME`: model one experiment's runs when an input holds several."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modeler.errors import InputError
from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import MS, write_rank_file
from test_readers_runs import series, simple_run


def _two_experiments(root: Path) -> None:
    for p in (2, 4, 8):
        simple_run(root / "ddp", f"d{p}", p, t_ms=10 * p, header={"experiment": "ddp"})
    for p in (2, 4):  # another program at the same points: `main` takes 1 ms there
        write_rank_file(root / "other" / f"o{p}", run_id=f"o{p}", params={"p": p}, header={"experiment": "other"},
                        profile={(0,): (1, MS, MS)})


def test_only_the_selected_experiment_is_modeled_and_the_others_are_named(tmp_path):
    _two_experiments(tmp_path)
    pooled = series(read_runs([tmp_path]), "main", "time")
    assert len(pooled.repetitions[0]) == 2  # ddp's 20 ms and other's 1 ms pooled as repetitions
    rs = load_runs([tmp_path], ReadOptions(experiments=("ddp",)))
    assert {r.run_id for r in rs.runs} == {"d2", "d4", "d8"}
    assert not any("experiments" in w for w in rs.warnings)  # nothing pooled any more
    deselected = [f for f in rs.files if f.status == "deselected"]
    assert len(deselected) == 2 and all("'other' not selected (--experiment)" in f.reason for f in deselected)
    main = series(read_runs([tmp_path], ReadOptions(experiments=("ddp",))), "main", "time")
    assert [r.tolist() for r in main.repetitions] == [[0.02], [0.04], [0.08]]


def test_an_unknown_experiment_is_an_error_listing_the_experiments(tmp_path):
    _two_experiments(tmp_path)
    with pytest.raises(InputError, match=r"--experiment: no run of experiment 'dpp'; the runs have: 'ddp', 'other'"):
        load_runs([tmp_path], ReadOptions(experiments=("dpp",)))


def test_the_pooling_warning_names_the_option(tmp_path):
    _two_experiments(tmp_path)
    (warning,) = [w for w in load_runs([tmp_path]).warnings if "experiments" in w]
    assert warning.endswith("--experiment NAME models one of them")


def test_fit_and_report_take_the_option_and_count_the_files_left_aside(tmp_path):
    _two_experiments(tmp_path)
    p = subprocess.run([sys.executable, "-m", "modeler", "fit", str(tmp_path), "--experiment", "ddp", "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "read 3 of 5 input files (2 not selected: other experiments (--experiment))" in p.stderr
    out = tmp_path / "r.md"
    p = subprocess.run([sys.executable, "-m", "modeler", "report", str(tmp_path), "--experiment", "ddp",
                        "--format", "markdown", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    text = out.read_text(encoding="utf-8")
    assert "| runs completed | 3 of 3 |" in text, text  # 5 of 5 without --experiment


def _extrap_input(path: Path) -> Path:
    import json

    path.write_text("".join(json.dumps({"params": {"p": p}, "callpath": "main", "metric": "time", "value": [p, p]}) + "\n"
                            for p in (2, 4, 8)))
    return path


def test_the_option_over_extrap_inputs_alone_is_an_error_and_beside_runs_a_warning(tmp_path):
    """Review 46: it was ignored without a word where the inputs are Extra-P files."""
    from modeler.readers import load

    extrap = _extrap_input(tmp_path / "ex.jsonl")
    with pytest.raises(InputError, match=r"--experiment: no run of experiment 'ddp': the inputs are Extra-P files, "
                                         r"which name no experiment \(.*ex\.jsonl\)"):
        load([str(extrap)], ReadOptions(experiments=("ddp",)))
    _two_experiments(tmp_path / "runs")
    loaded = load([str(extrap), str(tmp_path / "runs")], ReadOptions(experiments=("ddp",)))
    assert f"--experiment chooses among runs only: the Extra-P inputs are read whole ({extrap})" in loaded.warnings
    assert "--experiment" not in " ".join(load([str(extrap)], ReadOptions()).warnings)
