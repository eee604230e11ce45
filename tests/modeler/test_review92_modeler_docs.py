"""Review 92 (docs/modeler.md against `modeler fit` and `export`).

MED-1: the Python API's example lost the run data (a `Dataset` of the time series built by hand):
    a rank-0 checkpoint came back "falling"; `fit_dataset(dataset, metrics=[...])` ranks as the CLI.
LOW-1: an imbalance above the rank count was not flagged where `--where` holds `ranks`.
LOW-2: `export` repeated the ranking's words about call paths that only some ranks run.
LOW-3: export's gap at ranks=1 was always called communication.
LOW-5: an interrupted run was counted as failed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modeler import cli
from modeler.aggregate import dataset_from_runs
from modeler.commands.fit import fit_dataset
from modeler.errors import InputError
from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs
from modeler_synthetic_runs import write_rank_file
from test_review88_multirank import CKPT, _checkpoint_sweep

DOCS = Path(__file__).resolve().parents[2] / "docs" / "modeler.md"


@pytest.fixture(scope="module")
def ckpt_runs(tmp_path_factory) -> Path:
    return _checkpoint_sweep(tmp_path_factory.mktemp("ckpt92"))


def _cli_json(capsys, *argv: str) -> dict:
    assert cli.main(["fit", *argv, "--format", "json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_api_with_metrics_ranks_as_the_command_does(ckpt_runs, capsys):
    dataset = dataset_from_runs(load_runs([str(ckpt_runs)], ReadOptions()))
    ranking = fit_dataset(dataset, metrics=["time"], at="ranks=64", min_share=0)
    rows = {r.fitted.callpath: r for r in ranking.rows}
    assert rows[CKPT].by_ranks_that_ran_it() and rows[CKPT].ranks_growth == (0.0, 0.0)  # const, not falling
    assert {r.fitted.metric for r in ranking.rows} == {"time"}
    out = _cli_json(capsys, str(ckpt_runs), "--at", "ranks=64", "--min-share", "0")
    assert [m["callpath"] for m in out["models"]] == [r.fitted.callpath for r in ranking.rows]


def test_the_api_refuses_an_unknown_metric(ckpt_runs):
    dataset = dataset_from_runs(load_runs([str(ckpt_runs)], ReadOptions()))
    with pytest.raises(InputError, match="metrics: no metric 'tme' in the inputs"):
        fit_dataset(dataset, metrics=["tme"])


def test_the_docs_example_uses_metrics():
    text = DOCS.read_text()
    assert 'fit_dataset(dataset, metrics=["time"], at="ranks=1024")' in text
    assert "times = Dataset(" not in text


def _imbalance_sweep(root: Path) -> Path:
    """8 ranks, n = 10..160: rank 0's `skew` grows as n^2, the others' stays 1 ms."""
    for n in (10, 20, 40, 80, 160):
        for rep in range(2):
            run = f"n{n}-{rep}"
            for rank in range(8):
                t = int((1e-3 + (1e-5 * n * n if rank == 0 else 0)) * 1e9 * (1 + 0.01 * rep))
                write_rank_file(root / run, run_id=run, rank=rank, world_size=8, repetition=rep,
                                params={"ranks": 8, "n": n}, regions=((0, "function", "main", "m.py", 1),
                                                                      (1, "function", "skew", "m.py", 5)),
                                profile={(0,): (1, t + 10**6, 10**6), (0, 1): (1, t, t)})
    return root


def test_an_imbalance_above_a_held_rank_count_is_flagged(tmp_path, capsys):
    runs = _imbalance_sweep(tmp_path / "runs")
    assert cli.main(["fit", str(runs), "--metric", "imbalance", "--at", "n=100000", "--min-share", "0"]) == 0
    out, err = capsys.readouterr()
    assert "(above the rank count)" in out and "than the rank count" in err


def test_export_says_what_it_holds_for_call_paths_only_some_ranks_run(ckpt_runs, tmp_path, capsys):
    rc = cli.main(["export", "--extrap", str(tmp_path / "x.jsonl"), str(ckpt_runs)])
    err = capsys.readouterr().err
    assert rc == 0
    assert "in the export (and its visits, exclusive time and communication) is a mean over all ranks with 0 for the others" in err
    assert "speedup, parallel_efficiency and cost come from the time of the ranks that ran it" in err  # (review 98 LOW-3)
    assert "the ranking takes" not in err


def test_a_gap_at_one_rank_is_not_only_called_communication(tmp_path, capsys):
    # `helper` runs on ranks 1..N-1 only: not measured where ranks=1, and no communication
    for world in (1, 2, 3, 4, 6):
        for rank in range(world):
            profile = {(0,): (1, 10**8, 10**8 // 2)}
            if rank:
                profile[(0, 1)] = (1, 10**8 // 2, 10**8 // 2)
            write_rank_file(tmp_path / "runs" / f"r{world}", run_id=f"r{world}", rank=rank, world_size=world,
                            params={"ranks": world}, regions=((0, "function", "main", "m.py", 1),
                                                              (1, "function", "helper", "m.py", 5)), profile=profile)
    assert cli.main(["export", "--extrap", str(tmp_path / "x.jsonl"), str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "not measured where ranks=1 (communication, which a single rank does not do, or work that rank 0 " \
           "leaves to the other ranks)" in err


def _two_ranks_interrupted(root: Path) -> None:
    ctrl_c = {"type": "end", "status": "signal", "exit_code": 130, "signal": 2,
              "exception": "builtins.KeyboardInterrupt"}
    for rank in range(2):
        write_rank_file(root / "r", run_id="r", rank=rank, world_size=2, params={"n": 1},
                        profile={(0,): (1, 10**6, 10**6)}, end=ctrl_c)


def test_an_interrupted_run_is_counted_as_interrupted(tmp_path, capsys):
    _two_ranks_interrupted(tmp_path / "runs")
    runset = load_runs([str(tmp_path / "runs")], ReadOptions())
    assert [r.status for r in runset.runs] == ["interrupted"]
    cli.main(["fit", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert "run interrupted (2 files)" in err and "failed" not in err
    assert "1 interrupted" in err and "--include-incomplete also uses interrupted runs" in err
