"""Review 43: a model below zero at the target (a falling term run past the measurements) crashed the
report, summed into its caller's parts and zeroed the shares; Extra-P inputs got seconds and a cost."""

from __future__ import annotations

import json
import math

from modeler import cli
from modeler.parts import parts_sums


def _write(path, rows):
    with open(path, "w") as f:
        for p in (2, 4, 8, 16, 32):
            for callpath, fn in rows.items():
                v = fn(p)
                f.write(json.dumps({"params": {"ranks": p}, "callpath": callpath, "metric": "time",
                                    "value": [v * 0.99, v, v * 1.01]}) + "\n")
    return path


def falling_root(tmp_path):
    return _write(tmp_path / "m.jsonl", {"main": lambda p: 0.5 + 10 - 1.8 * math.log2(p), "main->a": lambda p: 0.5})


def test_a_part_below_zero_adds_nothing_to_its_callers_parts():
    sums = parts_sums({("r", "time"): 5.0, ("r->a", "time"): 2.0, ("r->b", "time"): -3.0})
    assert sums["r"].parts == 2.0  # not -1: a time is never below zero
    below = parts_sums({("r", "time"): -4.0, ("r->a", "time"): 2.0})["r"]
    # a whole below zero under parts above it contradicts them, and its parts stand for it
    assert below.contradicts() and below.time_figure() == 2.0
    assert "no time at all" in below.message("ranks=4096")


def test_fit_marks_a_root_below_zero_and_shows_its_parts(tmp_path, capsys):
    path = falling_root(tmp_path)
    assert cli.main(["fit", str(path), "--at", "ranks=4096", "--format", "json", "--min-share", "0"]) == 0
    out, err = capsys.readouterr()
    main = next(m for m in json.loads(out)["models"] if m["callpath"] == "main")
    assert main["prediction"] < 0 and main["doubtful"], main
    assert "main: its time model predicts" in err and "no time at all" in err


def test_report_of_a_root_below_zero_takes_its_parts_without_a_crash(tmp_path, capsys):
    path = falling_root(tmp_path)
    out = tmp_path / "r.md"
    assert cli.main(["report", str(path), "--at", "ranks=4096", "--format", "markdown", "-o", str(out)]) == 0
    text = out.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("Predicted run time"))
    assert "**0.5**" in line and "from its parts' models" in line, line
    assert "no time at all" in line
    # Extra-P's values carry no unit, and their time may be a sum over ranks: no seconds, no cost
    assert " s " not in line and " s," not in line and "cost" not in line, line


def test_report_and_fit_agree_that_a_model_levelling_off_is_constant(tmp_path, capsys):
    path = _write(tmp_path / "ring.jsonl", {"main": lambda p: 2.0 - 2.0 / p})
    assert cli.main(["fit", str(path), "--min-share", "0"]) == 0
    assert " const " in capsys.readouterr().out
    out = tmp_path / "r.md"
    assert cli.main(["report", str(path), "--format", "markdown", "-o", str(out)]) == 0
    row = next(ln for ln in out.read_text().splitlines() if "`main`" in ln and ln.startswith("|"))
    assert "| const |" in row, row  # the very word `modeler fit` uses (review 69 F1)


def test_a_series_zero_at_the_fewest_ranks_is_named_with_the_option_that_models_the_rest(tmp_path, capsys):
    """Review 43 F5: communication, 0 on one rank, bent the models of it and its callers; nothing
    said why."""
    path = tmp_path / "z.jsonl"
    with open(path, "w") as f:
        for p in (1, 2, 4, 8, 16):
            comm = 0.0 if p == 1 else 0.3 + 0.25 * math.log2(p)
            for cp, v in (("main", 1.0 + comm), ("main->allreduce", comm)):
                f.write(json.dumps({"params": {"ranks": p}, "callpath": cp, "metric": "time",
                                    "value": [v, v * 1.01, v * 0.99]}) + "\n")
    assert cli.main(["fit", str(path), "--min-share", "0"]) == 0
    err = capsys.readouterr().err
    assert ("1 series is 0 at the fewest ranks (ranks=1) and above 0 at every other point (communication, which "
            "one rank does not do): main->allreduce (time);") in err
    assert "--exclude ranks=1 models the others" in err
    assert cli.main(["fit", str(path), "--min-share", "0", "--exclude", "ranks=1"]) == 0
    assert "fewest ranks" not in capsys.readouterr().err
