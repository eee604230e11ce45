"""The terminal table fits the terminal (review 121 LOW-1: rows of some 230 columns on an
80-column terminal): columns of least use are left out first and said below the table, then call
paths are shortened further; a table piped or written with `-o` keeps every column."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from modeler import cli
from modeler.commands.fit import table_width
from modeler.outputs.columns import HEADERS
from modeler.outputs.table import LAST_NARROWING, MIN_CALLPATH, NARROWING, display_width

N = (1, 2, 4, 8, 16)
LONG = "main->train->Trainer.step->DistributedDataParallel.forward->Model.forward"


def _write(path: Path, series: dict[str, callable], metric: str = "time") -> Path:
    rows = [{"params": {"ranks": n, "batch": 16 * m}, "callpath": cp, "metric": metric,
             "value": [f(n, 16 * m), f(n, 16 * m) * 1.01]}
            for cp, f in series.items() for n in N for m in N]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _series():
    return {LONG: lambda r, b: 3 + 0.02 * b * r ** 0.5, "main->train->Trainer.step->loss": lambda r, b: 1 + 0.001 * b * b,
            "main->evaluate": lambda r, b: 50 / r + 1}


def _table(capsys, *args: str) -> list[str]:
    assert cli.main(["fit", *args, "--min-share", "0"]) == 0
    return capsys.readouterr().out.splitlines()


def _columns(header: str) -> list[str]:
    return re.split(r"\s{2,}", header.strip())  # headers hold single spaces only


def test_a_narrow_width_leaves_out_the_columns_of_least_use_first_and_says_so(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _series())
    lines = _table(capsys, str(f), "--width", "100")
    header, rule, rows = lines[1], lines[2], lines[3:6]
    kept = _columns(header)
    assert kept == ["#", "callpath", "growth", "at target", "80% range", "model"], header
    # the rows stop within the width but for the model, the last column, which may wrap
    model_at = display_width(header[:header.index("model")])
    assert model_at + len("model") <= 100 and len(rule) <= 100
    assert all(len(r[:model_at]) <= 100 for r in rows)
    assert lines[6] == ("columns left out to fit 100 terminal columns: RSS, adj.R2, points, CV SMAPE%, metric "
                        "(every row's: time), SMAPE%, run spread; --width 0 shows every column (or --format csv, json)")
    # shortened from the left, never below MIN_CALLPATH, the innermost regions kept
    shown = [r.split()[1] for r in rows]
    assert any(s.startswith("...") and LONG.endswith(s[3:]) for s in shown), shown
    assert all(len(s) >= MIN_CALLPATH for s in shown if s.startswith("..."))


def test_call_paths_are_shortened_before_the_last_columns_go(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _series())
    lines = _table(capsys, str(f), "--width", "125")
    assert _columns(lines[1]) == ["#", "callpath", "growth", "at target", "run spread", "80% range", "SMAPE%", "model"]
    assert min(len(r.split()[1]) for r in lines[3:6] if r.split()[1].startswith("...")) > MIN_CALLPATH
    assert not set(LAST_NARROWING) & set(lines[6].split(": ")[1].split("; ")[0].split(", ")), lines[6]
    lines = _table(capsys, str(f), "--width", "120")  # SMAPE% goes only once the call paths are down to the least
    assert "SMAPE%" not in _columns(lines[1]) and "run spread" in _columns(lines[1])
    assert min(len(r.split()[1]) for r in lines[3:6] if r.split()[1].startswith("...")) == MIN_CALLPATH


def test_columns_go_in_their_order_and_only_as_many_as_the_width_needs(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _series())
    full = _table(capsys, str(f), "--width", "0")[1]
    assert _columns(full) == list(HEADERS)
    total = display_width(full[:full.index("model")]) + 30  # the model counted as 30 columns at most
    lines = _table(capsys, str(f), "--width", str(total - 1))  # one column short: RSS (7 with its gap) goes
    assert _columns(lines[1]) == [h for h in HEADERS if h != "RSS"]
    assert lines[6].startswith("columns left out to fit ") and ": RSS; --width 0" in lines[6]
    assert NARROWING[0] == "RSS"
    assert "columns left out" not in "\n".join(_table(capsys, str(f), "--width", str(total)))


def test_the_metric_column_stays_where_the_rows_have_different_metrics(tmp_path, capsys):
    f = _write(tmp_path / "a.jsonl", _series())
    g = _write(tmp_path / "b.jsonl", {"main->evaluate": lambda r, b: 3 * b}, metric="bytes")
    lines = _table(capsys, str(f), str(g), "--metric", "all", "--width", "60")
    assert "metric" in _columns(lines[1]), lines[1]
    note = next(x for x in lines if x.startswith("columns left out"))
    assert "metric" not in note and note.endswith("CV SMAPE%, SMAPE%, run spread; --width 0 shows every column "
                                                  "(or --format csv, json)"), note


def test_call_paths_that_would_read_the_same_shortened_stay_whole(tmp_path, capsys):
    a, b = "main->alpha->" + "x" * 40 + "->step", "main->beta->" + "x" * 40 + "->step"
    f = _write(tmp_path / "in.jsonl", {a: lambda r, b: 2.0 * b, b: lambda r, b: 3.0 * b + r})
    shown = [r.split()[1] for r in _table(capsys, str(f), "--width", "60")[3:5]]
    assert sorted(shown) == sorted([a, b])


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"width": None, "output": None, **kw})


def test_the_default_width_is_the_terminals_only_where_stdout_is_one(monkeypatch):
    class Tty:
        def __init__(self, tty: bool):
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setenv("COLUMNS", "77")
    monkeypatch.setattr("sys.stdout", Tty(True))
    assert table_width(_args()) == 77
    assert table_width(_args(output="-")) == 77
    assert table_width(_args(output="models.txt")) is None  # a file keeps every column
    assert table_width(_args(width=0)) is None
    assert table_width(_args(width=120)) == 120
    monkeypatch.setattr("sys.stdout", Tty(False))
    assert table_width(_args()) is None  # piped: every column, whatever COLUMNS says
    assert table_width(_args(width=90)) == 90


def test_a_negative_width_is_refused_naming_the_option(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _series())
    assert cli.main(["fit", str(f), "--width", "-3"]) == cli.EXIT_ERROR
    assert "--width: must be 0 (every column) or more, got -3" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown"])
def test_other_formats_ignore_the_width(tmp_path, capsys, fmt):
    f = _write(tmp_path / "in.jsonl", _series())
    narrow = _table(capsys, str(f), "--format", fmt, "--width", "40")
    assert narrow == _table(capsys, str(f), "--format", fmt)
