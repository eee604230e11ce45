"""Review 25: the parts of a call path are summed from the bottom, and the run time is its parts' sum
where its own model predicts below it.

A sweep whose run spends 1.2 s of its own at every point hid the training step's batch x width
growth in the run's model (a constant, 1.21 s at every target) and in the training function's (an
additive form): each agreed with its children's models, so nothing was marked, and the run took
8.6 s where 1.21 s was predicted. Its parts, each fitted on its own, added up to 6.3 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modeler import cli
from modeler.parts import BELOW, PartsCheck, check_parts, parts_sums

WIDTH = (32, 64, 128, 256, 512)
JITTER = (0.3, -0.2, 0.1, -0.3, 0.2)


def test_parts_are_summed_from_the_bottom():
    pred = {
        ("main", "time"): 1.2, ("main", "exclusive_time"): 1.1,
        ("main->fit", "time"): 0.9, ("main->fit", "exclusive_time"): 0.01,
        ("main->fit->epoch", "time"): 4.2, ("main->fit->eval", "time"): 0.3,
        ("main->setup", "time"): 0.05,  # a leaf: its time counts
    }
    sums = parts_sums(pred)
    assert sums["main->fit"].parts == pytest.approx(0.01 + 4.2 + 0.3) and not sums["main->fit"].deep
    assert sums["main"].parts == pytest.approx(1.1 + 0.01 + 4.2 + 0.3 + 0.05) and sums["main"].deep
    assert "its descendants' exclusive times" in sums["main"].message("w=1")
    assert {c.callpath for c in check_parts(pred)} == {"main", "main->fit"}


def test_a_child_counts_with_its_parts_where_they_agree_with_its_model_or_replace_it():
    """Else with its time (review 29: a child's parts far above its model, but not clearly, added
    19.9 s to a run's 3.6 min where the child's model said 0.065 s)."""
    pred = {("main", "time"): 2.0, ("main", "exclusive_time"): 0.5, ("main->a", "time"): 1.5,
            ("main->a->b", "time"): 1.0}
    sums = parts_sums(pred)
    assert sums["main"].parts == pytest.approx(2.0) and not sums["main"].deep
    assert sums["main->a"].parts == pytest.approx(1.0) and not sums["main->a"].with_exclusive
    pred[("main->a->b", "time")] = 9.0  # its child clearly above it: an inclusive time is never below
    sums = parts_sums(pred)
    assert sums["main"].parts == pytest.approx(9.5) and sums["main"].deep
    ranges = {("main->a->b", "time"): (0.5, 20.0), ("main->a", "time"): (1.4, 1.6)}
    sums = parts_sums(pred, ranges)  # not clearly: b's range reaches down to 0.5, below a's 1.6
    assert not sums["main->a"].below_parts() and sums["main"].parts == pytest.approx(2.0)
    pred.update({("main->a", "exclusive_time"): 0.1, ("main->a->b", "time"): 1.3})  # agreeing parts: the deeper sum
    assert parts_sums(pred, ranges)["main"].parts == pytest.approx(0.5 + 0.1 + 1.3)
    assert sums["main->a"].time_figure() == pytest.approx(1.5)  # nor is b's own figure clearly above a


def test_a_region_is_never_clearly_below_one_of_its_children():
    """Review 29: the run kept its model's 7.22 s while its training function's parts, 8.29 s, replaced
    that function's model: a child's figure clearly above the whole (the low end of its range above
    the high end of the whole's) lifts it; one within the whole's range does not."""
    pred = {("main", "time"): 7.22, ("main", "exclusive_time"): 1.2, ("main->fit", "time"): 1.84,
            ("main->fit", "exclusive_time"): 0.01, ("main->fit->epoch", "time"): 8.28}
    ranges = {("main", "time"): (7.0, 9.19), ("main", "exclusive_time"): (0.0, 1.3),
              ("main->fit", "time"): (1.7, 2.0), ("main->fit", "exclusive_time"): (0.0, 0.02),
              ("main->fit->epoch", "time"): (7.0, 9.0)}
    sums = parts_sums(pred, ranges)
    assert sums["main->fit"].time_figure() == pytest.approx(8.29) and sums["main->fit"].parts_low == pytest.approx(7.0)
    assert not sums["main"].below_parts() and sums["main"].time_figure() == pytest.approx(7.22)  # 7.0 < 9.19
    pred[("main->fit->epoch", "time")], ranges[("main->fit->epoch", "time")] = 9.6, (9.5, 10.0)
    sums = parts_sums(pred, ranges)  # clearly above the run's range: the run holds it
    assert sums["main"].time_figure() >= sums["main->fit"].time_figure() > 9.5
    no_exclusive = {k: v for k, v in pred.items() if k != ("main", "exclusive_time")}
    sums = parts_sums(no_exclusive, ranges)
    assert sums["main"].floor == pytest.approx(9.61) and sums["main"].time_figure() == pytest.approx(9.61)


def test_deep_call_paths_need_no_recursion():
    cps = ["main" + "->f" * i for i in range(3000)]  # indirect recursion writes such paths
    pred = {(cp, m): 1.0 for cp in cps for m in ("time", "exclusive_time")}
    pred[(cps[-1], "exclusive_time")] = 1.0
    assert parts_sums(pred)["main"].parts == pytest.approx(3000.0)


def _check(whole, parts, **kw) -> PartsCheck:
    return PartsCheck("main", whole, parts, 2, True, True, **kw)


def test_time_figure():
    assert _check(1.2, 6.3).time_figure() == 6.3
    assert _check(5.0, 5.0 * BELOW * 0.99).time_figure() == 5.0  # within the bound: the model's own
    assert _check(9.0, 3.0).time_figure() == 9.0  # above its parts: its own (parts may be missing)
    assert _check(1.0, float("nan")).time_figure() == 1.0


def test_time_figure_needs_the_parts_clearly_above():
    """Review 27: `main`'s own 2% of the run, fitted with a steep term (80% range 0.25 to 560 s),
    made a 79 s run 4.9 min: the parts' sum counts only where the low ends of the parts' ranges add
    up to more than the high end of the whole's."""
    assert _check(1.2, 6.3, parts_low=4.0, whole_high=1.5).time_figure() == 6.3
    assert _check(79.0, 295.0, parts_low=60.0, whole_high=95.0).time_figure() == 79.0


def test_combination_of_ranks_and_repetitions():
    from modeler.parts import combination

    assert combination("mean", None) == combination("sum", "median") == "mean"
    assert combination("max", "robust") == combination("mean", "max") == combination("max", "max") == "max"
    assert combination("min", None) == "min" and combination("max", "min") == "none"
    assert not _check(35.4, 64.3, combine="none").contradicts() and not _check(100.0, 30.0, combine="none").contradicts()


def test_under_ranks_max_a_whole_below_its_parts_is_no_contradiction():
    """Review 27: the largest rank of each part may be another rank (a straggler's compute, the
    others' wait for it): summed, they are above any rank's time."""
    below = _check(35.4, 64.3, combine="max")
    assert not below.contradicts() and below.time_figure() == 35.4
    assert _check(100.0, 30.0, combine="max").contradicts()  # above its parts is one still
    assert not _check(100.0, 30.0, combine="min").contradicts() and _check(10.0, 30.0, combine="min").contradicts()


def test_the_low_ends_of_the_parts_are_summed_from_the_bottom():
    pred = {("main", "time"): 1.2, ("main", "exclusive_time"): 1.1, ("main->fit", "time"): 0.9,
            ("main->fit", "exclusive_time"): 0.01, ("main->fit->epoch", "time"): 4.2}
    ranges = {("main", "time"): (1.0, 1.5), ("main", "exclusive_time"): (1.0, 1.2),
              ("main->fit", "exclusive_time"): (0.005, 0.02), ("main->fit->epoch", "time"): (3.0, 5.0)}
    sums = parts_sums(pred, ranges)
    assert sums["main"].parts_low == pytest.approx(1.0 + 0.005 + 3.0) and sums["main"].whole_high == 1.5
    assert sums["main->fit"].whole_high is None  # its own range is not known
    del ranges[("main->fit->epoch", "time")]
    assert parts_sums(pred, ranges)["main"].parts_low is None


def _write(path: Path) -> Path:
    """The run and the training function hold a constant; the step below them grows with width^2.
    Every call path has its time and exclusive time, so the parts can be summed to the bottom."""
    lines = []
    for i, w in enumerate(WIDTH):
        step = 1e-5 * w * w
        values = {
            ("main", "time"): 10 + JITTER[i], ("main", "exclusive_time"): 9.5 + JITTER[i],
            ("main->fit", "time"): 0.5 + JITTER[i] / 10, ("main->fit", "exclusive_time"): 0.01,
            ("main->fit->step", "time"): step, ("main->fit->step", "exclusive_time"): step,
        }
        for (cp, metric), v in values.items():
            lines.append({"params": {"width": w}, "callpath": cp, "metric": metric, "value": [v, v * 1.01, v * 0.99]})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_caller_that_agrees_with_its_child_is_marked_when_a_grandchild_contradicts_both(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl")
    assert cli.main(["fit", str(src), "--at", "width=4096", "--metric", "time", "--format", "json", "-q"]) == 0
    rows = {m["callpath"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    main = rows["main"]
    # main's child main->fit holds a constant, as main does: one level down they agree
    assert main["doubtful"] and "more at the target" in main["doubtful"]
    assert main["prediction_from_parts"] > 100  # 9.5 + 0.01 + the step's 1e-5 * 4096^2 = 168 s


def test_the_reports_run_time_is_its_parts_sum(tmp_path):
    src = _write(tmp_path / "in.jsonl")
    out = tmp_path / "r.md"
    assert cli.main(["report", str(src), "--at", "width=4096", "--format", "markdown", "-o", str(out), "-q"]) == 0
    line = next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))
    assert "from its parts' models" in line and "Caveat: its own time model predicts 10" in line
    total = float(line.split("**")[1].split()[0])
    assert 150 < total < 200  # 9.5 + 0.01 + 168


def test_shares_at_the_target_take_the_parts_sum_where_a_model_is_below_it(tmp_path, capsys):
    """Review 25: the training function's model (0.91 s at 4x, a form without the step's growth)
    capped the share of the training step under it at 14% of the run, where it took 77%."""
    src = _write(tmp_path / "in.jsonl")
    assert cli.main(["fit", str(src), "--at", "width=4096", "--min-share", "0", "--format", "json", "-q"]) == 0
    share = {m["callpath"]: m["share"] for m in json.loads(capsys.readouterr().out)["models"]}
    step = 1e-5 * 4096 ** 2
    total = 9.5 + 0.01 + step  # the run's time: its parts' sum
    assert share["main->fit"]["at_target"] == pytest.approx((0.01 + step) / total, rel=0.1)
    assert share["main->fit->step"]["at_target"] == pytest.approx(step / total, rel=0.1)
    assert share["main"]["at_target"] == pytest.approx(1.0)


def test_the_table_gives_the_parts_sum_beside_a_model_below_it(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl")
    assert cli.main(["fit", str(src), "--at", "width=4096", "--min-share", "0", "-q"]) == 0
    rows = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines() if ln[:4].strip().rstrip("!").isdigit()}
    assert "(parts: 1" in rows["main"] and "!" in rows["main"].split()[0]
    assert "(parts:" not in rows["main->fit->step"]


def test_an_extrap_input_of_exclusive_times_only_shows_its_models(tmp_path, capsys):
    """Review 27: with no `time` series there is no share, and every model was left out."""
    lines = [{"params": {"width": w}, "callpath": cp, "metric": "exclusive_time", "value": [v, v * 1.01]}
             for w in WIDTH for cp, v in (("main", 1.0 + w / 1000), ("main->step", 1e-5 * w * w))]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert cli.main(["fit", str(src), "--format", "json", "-q"]) == 0
    assert {m["callpath"] for m in json.loads(capsys.readouterr().out)["models"]} == {"main", "main->step"}


def _slow_in_turn(root, over: str) -> None:
    """Runs of `main` = A + B where one rank (or repetition) is slow in A and the other in B: each
    took 11n, the largest A and the largest B add up to 20n."""
    from .modeler_synthetic_runs import write_rank_file

    regions = ((0, "function", "main", "m.py", 1), (1, "function", "A", "m.py", 2), (2, "function", "B", "m.py", 3))
    for n in (2, 4, 8, 16, 32):
        u = 10**8 * n
        for k in range(2):
            a, b = (10 * u, u) if k == 0 else (u, 10 * u)
            where = dict(rank=k, world_size=2, run_id=f"r{n}") if over == "rank" else dict(repetition=k, run_id=f"r{n}-{k}")
            write_rank_file(root / f"n{n}-{k if over != 'rank' else 0}", params={"n": n}, regions=regions,
                            profile={(0,): (1, a + b + 10**6, 10**6), (0, 1): (1, a, a), (0, 2): (1, b, b)}, **where)


def _headline(tmp_path, *options: str) -> str:
    """The report's predicted run time line for the runs under tmp_path/runs at n=32."""
    out = tmp_path / "r.md"
    assert cli.main(["report", str(tmp_path / "runs"), *options, "--at", "n=32", "--format", "markdown",
                     "-o", str(out), "-q"]) == 0
    return next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))


def test_under_ranks_max_the_run_time_is_its_own_model(tmp_path):
    """Review 27: two ranks that each took 11n, rank 0 in A and rank 1 in B: the largest ranks of A
    and B added up to 20n, and the headline said 64 s where every rank had taken 35 s."""
    _slow_in_turn(tmp_path / "runs", over="rank")
    line = _headline(tmp_path, "--ranks", "max")
    assert "**35.2 s**" in line and "from its parts" not in line
    assert "extrapolates badly" not in line  # review 29: nothing extrapolates there; the maxima are other ranks'


def test_under_repetitions_max_the_run_time_is_its_own_model(tmp_path):
    """Review 29: the largest repetitions of the parts are different repetitions, as the ranks under
    `--ranks max` are."""
    _slow_in_turn(tmp_path / "runs", over="repetition")
    line = _headline(tmp_path, "--repetitions", "max")
    assert "**35.2 s**" in line and "from its parts" not in line


def test_a_region_inside_the_run_above_it_is_said_where_the_parts_do_not_replace_it(tmp_path):
    """Review 20's caveat, where the parts' sum is no figure (`--ranks max`): a region inside the
    run predicted above it."""
    from .modeler_synthetic_runs import write_rank_file

    regions = ((0, "function", "main", "m.py", 1), (1, "function", "run", "m.py", 2), (2, "loop", "run:for@3", "m.py", 3))
    for i, w in enumerate(WIDTH):
        loop = int(2e4 * w * w)
        for rank in range(2):
            flat = int(20e9 + 5e7 * ((i + rank) % 2))
            write_rank_file(tmp_path / "runs" / f"w{w}", run_id=f"r{w}", params={"width": w}, rank=rank, world_size=2,
                            regions=regions, profile={(0,): (1, flat, 10**6), (0, 1): (1, flat - 10**6, flat - loop),
                                                      (0, 1, 2): (w, loop, loop)})
    out = tmp_path / "r.md"
    assert cli.main(["report", str(tmp_path / "runs"), "--ranks", "max", "--at", "width=4096", "--format", "markdown",
                     "-o", str(out), "-q"]) == 0
    line = next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))
    assert "a region inside it, is predicted at" in line and "the run's model misses a growth of its parts" in line
    assert "from its parts" not in line
