"""Review 16 of `--min-share` and `--where`: every command's --help works (F2); the run's time that
shares are taken against is the main processes' longest top-level region, not a root summed over
DataLoader workers (F3); a child's share at the target cannot outgrow its parent's and a child is
never kept when its parent is left out, nor by a doubtful fit (F4); a region that runs on some ranks
only has its share on the rank where it runs (F5); a call path named with --callpath is not hidden
by the default (F6); messages (F9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modeler import cli
from modeler.errors import InputError
from modeler.pointfilter import parse_condition
from modeler.share import Share, kept_callpaths, parse_min_share, shares
from modeler_synthetic_runs import REGIONS, write_rank_file
from test_min_share import callpaths, fit_json, write_inputs

S = 10**9
WORKER_REGIONS = REGIONS + ((6, "function", "Dataset.__getitem__", "data.py", 30),)


# F2 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_help_of_every_command(command, capsys):
    try:
        code = cli.main([command, "--help"] if command else ["--help"])
    except SystemExit as exc:
        code = exc.code
    assert code == 0
    assert "usage:" in capsys.readouterr().out


# F3 --------------------------------------------------------------------------------------------


def _runs_with_workers(root: Path, workers: int = 4) -> None:
    """`main` lasts 1 + n s, `main->load_batch` (logging) 3% of it; `workers` DataLoader workers are
    busy 0.9 (1 + n) s each in `Dataset.__getitem__`, in parallel with `main`."""
    for n in (1, 2, 4, 8, 16):
        run_id, t = f"n{n}", 1 + n
        write_rank_file(root / run_id, run_id=run_id, params={"n": n}, pid=500, regions=WORKER_REGIONS,
                        profile={(0,): (1, int(t * S), int(0.97 * t * S)),
                                 (0, 4): (1, int(0.03 * t * S), int(0.03 * t * S))})
        for w in range(workers):
            write_rank_file(root / run_id, run_id=run_id, params={"n": n}, pid=600 + w, regions=WORKER_REGIONS,
                            header={"child_of": 500, "forked_from": 500},
                            profile={(6,): (100, int(0.9 * t * S), int(0.9 * t * S))})


def test_the_run_time_is_the_main_process_not_a_root_summed_over_workers(tmp_path, capsys):
    _runs_with_workers(tmp_path / "runs")
    out = fit_json(capsys, str(tmp_path / "runs"), "--metric", "time", "--at", "n=32")
    by_cp = {m["callpath"]: m["share"] for m in out["models"]}
    assert "main->load_batch" in by_cp, out["left_out"]
    assert by_cp["main->load_batch"]["measured"] == pytest.approx(0.03, rel=0.01)
    assert by_cp["main->load_batch"]["at_target"] == pytest.approx(0.03, rel=0.05)
    assert by_cp["main"]["measured"] == pytest.approx(1.0) and by_cp["main"]["at_target"] == pytest.approx(1.0)
    # the workers' root, summed over 4 workers, is 3.6x the run: its share says so
    assert by_cp["Dataset.__getitem__"]["measured"] == pytest.approx(3.6, rel=0.01)


def test_the_report_takes_shares_against_the_main_process_too(tmp_path):
    _runs_with_workers(tmp_path / "runs")
    out = tmp_path / "r.md"
    assert cli.main(["report", str(tmp_path / "runs"), "--at", "n=32", "--format", "markdown", "-q",
                     "-o", str(out)]) == 0
    md = out.read_text(encoding="utf-8")
    assert "main->load_batch" in md and "left out" not in md


# F4 --------------------------------------------------------------------------------------------


def test_a_child_is_never_kept_when_its_parent_is_left_out():
    of = {"main": Share(1.0, 1.0, 0.9), "main->parse": Share(0.0001, 0.0001, 0.0001),
          "main->parse->build": Share(0.0009, 0.6, 0.45), "main->grows": Share(0.004, 0.2, 0.15)}
    assert kept_callpaths(of, 0.01) == {"main", "main->grows"}
    assert kept_callpaths(of, 0.0) == set(of)


def test_a_child_share_at_the_target_is_capped_by_its_parents_and_a_doubtful_fit_keeps_nothing():
    preds = {"main": 100.0, "main->parse": 0.001, "main->parse->build": 74.0, "main->grows": 20.0}
    lows = {"main": 90.0, "main->parse": 0.0009, "main->parse->build": 50.0, "main->grows": 15.0}
    measured = {"main": 1.0, "main->parse": 1e-5, "main->parse->build": 9e-6, "main->grows": 0.004}
    got = shares(measured, preds, lows)
    assert got["main->parse->build"].at_target == pytest.approx(1e-5)
    assert got["main->parse->build"].at_target_low == pytest.approx(0.9e-5)
    assert got["main->grows"].at_target == pytest.approx(0.2) and got["main->grows"].kept(0.01)
    doubted = shares(measured, preds, lows, doubtful={"main->grows"})
    assert not doubted["main->grows"].kept(0.01) and not doubted["main->grows"].trusted
    assert Share(0.02, None, None, trusted=False).kept(0.01)  # measured large: kept whatever the fit


def test_a_child_extrapolated_past_its_tiny_parent_is_left_out(tmp_path, capsys):
    src = write_inputs(tmp_path / "m.jsonl")
    lines = []
    for n in (2, 4, 8, 16, 32):
        for cp, v in (("main->parse", 0.001), ("main->parse->build", 1e-6 * n ** 3)):
            lines.append({"params": {"n": n}, "callpath": cp, "metric": "time", "value": [v, v * 1.001]})
    with src.open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines))
    out = fit_json(capsys, str(src), "--at", "n=1024")
    assert not {"main->parse", "main->parse->build"} & callpaths(out)
    assert {"main->parse", "main->parse->build"} <= {e["callpath"] for e in out["left_out"]}
    assert "main->grows" in callpaths(out)  # what the at-target share is for still works


# F5 --------------------------------------------------------------------------------------------


def test_a_region_of_rank_0_only_has_its_share_on_rank_0(tmp_path, capsys):
    """Every rank runs `main` 1 s; rank 0 also writes a checkpoint, 0.25 s of it."""
    for p in (40, 60, 80):
        run_id = f"p{p}"
        for r in range(p):
            prof = {(0,): (1, S, S)}
            if r == 0:
                prof = {(0,): (1, S, int(0.75 * S)), (0, 4): (1, int(0.25 * S), int(0.25 * S))}
            write_rank_file(tmp_path / "runs" / run_id, run_id=run_id, params={"ranks": p}, rank=r,
                            world_size=p, profile=prof)
    out = fit_json(capsys, str(tmp_path / "runs"), "--metric", "time")
    ckpt = next(m for m in out["models"] if m["callpath"] == "main->load_batch")
    assert ckpt["share"]["measured"] == pytest.approx(0.25)
    max_out = fit_json(capsys, str(tmp_path / "runs"), "--metric", "time", "--ranks", "max")
    assert "main->load_batch" in callpaths(max_out)


# F6 --------------------------------------------------------------------------------------------


def test_a_call_path_named_with_callpath_is_not_hidden_by_the_default(tmp_path, capsys):
    src = write_inputs(tmp_path / "m.jsonl")
    out = fit_json(capsys, str(src), "--callpath", "main->init", "--at", "n=1024")
    assert callpaths(out) == {"main->init"} and out["left_out"] == [] and out["min_share"] == 0
    explicit = fit_json(capsys, str(src), "--callpath", "main->init", "--at", "n=1024", "--min-share", "1%")
    assert callpaths(explicit) == set() and explicit["left_out"][0]["callpath"] == "main->init"
    md = tmp_path / "r.md"
    assert cli.main(["report", str(src), "--callpath", "main->init", "--format", "markdown", "-q",
                     "-o", str(md)]) == 0
    assert "main->init" in md.read_text(encoding="utf-8").split("left out")[0]


# F9 --------------------------------------------------------------------------------------------


def test_an_operator_typo_points_at_the_operator():
    with pytest.raises(InputError, match=r"'>16' after '=' is not a value .*did you mean batch>=16\?"):
        parse_condition("batch=>16", "--where")
    with pytest.raises(InputError, match=r"did you mean ranks<=8\?"):
        parse_condition("ranks=<8", "--exclude")
    assert parse_condition("batch>=16", "--where").op == ">="


def test_a_percentage_over_100_gets_no_wrong_hint():
    with pytest.raises(InputError) as exc:
        parse_min_share("150%")
    assert "write" not in str(exc.value)
    with pytest.raises(InputError, match="for 5%, write 0.05 or 5%"):
        parse_min_share("5")
