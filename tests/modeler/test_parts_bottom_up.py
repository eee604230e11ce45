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
from modeler.parts import BELOW, check_parts, parts_sums, run_time_figure

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


def test_a_child_without_an_exclusive_time_counts_with_its_time():
    pred = {("main", "time"): 2.0, ("main", "exclusive_time"): 0.5, ("main->a", "time"): 1.5,
            ("main->a->b", "time"): 9.0}
    sums = parts_sums(pred)
    assert sums["main"].parts == pytest.approx(2.0) and not sums["main"].deep
    assert sums["main->a"].parts == pytest.approx(9.0) and not sums["main->a"].with_exclusive


def test_deep_call_paths_need_no_recursion():
    cps = ["main" + "->f" * i for i in range(3000)]  # indirect recursion writes such paths
    pred = {(cp, m): 1.0 for cp in cps for m in ("time", "exclusive_time")}
    pred[(cps[-1], "exclusive_time")] = 1.0
    assert parts_sums(pred)["main"].parts == pytest.approx(3000.0)


def test_run_time_figure():
    assert run_time_figure(1.2, 6.3) == 6.3
    assert run_time_figure(5.0, 5.0 * BELOW * 0.99) == 5.0  # within the bound: the model's own
    assert run_time_figure(9.0, 3.0) == 9.0  # above its parts: its own (parts may be missing)
    assert run_time_figure(1.0, None) == 1.0 and run_time_figure(1.0, float("nan")) == 1.0


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
