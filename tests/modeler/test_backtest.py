"""Review 62: the sweep checked against itself, its largest value of each parameter held out and
predicted one step ahead; a far miss is said, since predictions further out are rougher still."""

from __future__ import annotations

import itertools
import json

import numpy as np

from modeler import cli
from modeler.backtest import backtest_warning
from modeler.dataset import Series

B, W = (4, 8, 16, 32, 64), (4, 8, 12, 16, 24)


def _write(path, slow_at_largest: float, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for b, w in itertools.product(B, W):
            for name, share in (("main", 1.0), ("main->fit", 0.95), ("main->load", 0.05)):
                t = share * (0.5 + 0.002 * b * w)
                runs = t * (1 + rng.uniform(-0.02, 0.02, 3))
                if b == max(B):  # two of three runs slow there: a busy machine during those passes
                    runs[1:] *= slow_at_largest
                f.write(json.dumps({"params": {"batch": b, "width": w}, "callpath": name, "metric": "time",
                                    "value": list(runs)}) + "\n")
    return path


def test_largest_points_slow_in_two_of_three_runs_are_caught(tmp_path, capsys):
    busy = _write(tmp_path / "busy.jsonl", 1.8)
    assert cli.main(["fit", str(busy)]) == 0
    err = capsys.readouterr().err
    assert "a check of the sweep against itself: fitted without the largest value of batch (64)" in err
    assert "x low: the runs there lie above the trend of the others" in err
    # the fastest run of each point was not slowed: the minima follow the trend
    assert cli.main(["fit", str(busy), "--repetitions", "min"]) == 0
    assert "a check of the sweep" not in capsys.readouterr().err
    md = tmp_path / "r.md"
    assert cli.main(["report", str(busy), "--format", "markdown", "-o", str(md)]) == 0
    assert "a check of the sweep against itself" in md.read_text()


def test_runs_that_follow_one_trend_pass_the_check(tmp_path, capsys):
    assert cli.main(["fit", str(_write(tmp_path / "quiet.jsonl", 1.0))]) == 0
    assert "a check of the sweep" not in capsys.readouterr().err


def test_growth_that_levels_off_at_the_largest_value_is_said_to_be_high():
    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    y = [1, 2, 4, 8, 9]  # linear, then nearly flat at the largest value
    s = Series("main", "time", x, [np.full(3, float(v)) for v in y])
    said = backtest_warning(("p",), [s], compat=None, aggregate=None)
    assert said and "fitted without the largest value of p (16)" in said and "x high: the runs there lie below" in said
    # a parameter with 4 values is not held out (3 would be left to fit)
    assert backtest_warning(("p",), [Series("main", "time", x[:4], [np.full(3, float(v)) for v in y[:4]])],
                            compat=None, aggregate=None) is None
