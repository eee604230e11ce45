"""Review 62: repetitions that disagree widely (a busy or shared machine) are said to, since the
aggregate, the exponents and the prediction ranges all take them for noise around the truth."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from modeler import cli
from modeler.contention import WIDE, run_spread
from modeler.dataset import Series


def _write(path, runs_of):
    with open(path, "w") as f:
        for b, w in itertools.product((4, 8, 16, 32, 64), (4, 8, 12, 16, 24)):
            for name, scale in (("main", 1.0), ("main->step", 0.9), ("main->tiny", 1e-5)):
                f.write(json.dumps({"params": {"batch": b, "width": w}, "callpath": name, "metric": "time",
                                    "value": [scale * v for v in runs_of(0.01 * b * w)]}) + "\n")
    return path


def test_runs_slow_in_passes_are_warned_of_and_min_is_suggested(tmp_path, capsys):
    rng = np.random.default_rng(0)
    # the first pass ran beside other work: up to 2x slow, never fast (review 62's sweep: 69% apart)
    busy = _write(tmp_path / "busy.jsonl", lambda t: [t * rng.uniform(1.3, 2.0), t * rng.uniform(0.99, 1.01),
                                                      t * rng.uniform(0.99, 1.01), t * rng.uniform(0.99, 1.01)])
    assert cli.main(["fit", str(busy)]) == 0
    err = capsys.readouterr().err
    assert "repetitions of the times disagree widely" in err and "slow on one side" in err
    assert "compare --repetitions min" in err and "the default aggregate (robust" in err
    assert cli.main(["fit", str(busy), "--repetitions", "median"]) == 0
    assert "--repetitions median follows slow runs" in capsys.readouterr().err
    assert cli.main(["fit", str(busy), "--repetitions", "min"]) == 0  # asked for: nothing more to say
    assert "disagree widely" not in capsys.readouterr().err
    md = tmp_path / "r.md"
    assert cli.main(["report", str(busy), "--format", "markdown", "-o", str(md)]) == 0
    assert "disagree widely" in md.read_text()


def test_ordinary_noise_and_short_regions_say_nothing(tmp_path, capsys):
    rng = np.random.default_rng(1)
    quiet = _write(tmp_path / "quiet.jsonl", lambda t: list(t * (1 + rng.uniform(-0.1, 0.1, 5))))
    assert cli.main(["fit", str(quiet)]) == 0
    assert "disagree widely" not in capsys.readouterr().err
    # weighted by time: a microsecond region whose timer noise is wide does not speak for the run
    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]] * 2)
    big = Series("main", "time", x, [np.array([10.0, 10.1, 9.9]) * v for v in x[:, 0]])
    small = Series("tiny", "time", x, [np.array([1e-6, 5e-6, 1e-6]) for _ in x[:, 0]])
    up, down = run_spread([big, small])
    assert up + down < WIDE and up == pytest.approx(down, rel=0.01)
    assert run_spread([big]) is not None and run_spread([big][:0]) is None
