"""Review 121 (what `modeler fit`, `export` and `report` show): a series whose every line is
refused is named, the per-line warnings are capped, metrics not modeled are mentioned, `--top`
says what it cut, `-o`'s suffix picks the format, the export says that passes are not kept and
the report's range says pass refits only where there were passes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from modeler import cli
from modeler.readers.extrap import read_extrap_jsonl

from .modeler_synthetic_runs import write_sweep

N = (1, 2, 4, 8, 16)


def _rows(callpath: str, metric: str = "time", params=lambda n: {"p": n, "q": 2 * n}, value=lambda n: [n, n * 1.01]):
    return [{"params": params(n), "callpath": callpath, "metric": metric, "value": value(n)} for n in N]


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _good_rows():
    return _rows("main") + _rows("main->a", value=lambda n: [2.0 * n + 1, 2.02 * n + 1])


def test_a_series_whose_every_line_is_refused_is_named_and_the_line_warnings_are_capped(tmp_path):
    bad = [dict(r, value="3.5") for r in _rows("main->strings") * 3]  # 15 lines, one reason
    nan = [json.dumps(r).replace("[1, 1.01]", "NaN") for r in _rows("main->nan")[:1]]
    one = _rows("main->onlyp", params=lambda n: {"p": n})  # over other parameters
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in _good_rows() + bad + one) + "\n".join(nan) + "\n")
    ds = read_extrap_jsonl(f)
    assert sorted(s.callpath for s in ds.series) == ["main", "main->a"]
    said = [w for w in ds.warnings if "must be a finite number" in w]
    assert len(said) == 6, ds.warnings  # five lines, then how many more (review 121: 32 uncapped lines)
    assert said[-1] == (f'{f}: 11 more line(s) skipped for the same reason ("value" must be a finite number or a '
                        f'list of them), up to line {len(_good_rows()) + len(bad) + len(one) + 1}')
    assert ds.warnings[-1] == (f"{f}: 3 series with every line skipped, not modeled: main->strings/time (15 lines "
                               f"from line 11), main->nan/time (line 31), main->onlyp/time (over other parameters)")


def test_a_series_some_of_whose_lines_are_kept_is_not_called_lost(tmp_path):
    rows = _good_rows()
    rows[3] = dict(rows[3], value=[])
    ds = read_extrap_jsonl(_write(tmp_path / "in.jsonl", rows))
    assert not any("every line skipped" in w for w in ds.warnings), ds.warnings
    assert any(w.startswith(f"{tmp_path / 'in.jsonl'}:4: ") for w in ds.warnings)


def _fit(capsys, *args: str) -> tuple[int, str, list[str]]:
    rc = cli.main(["fit", *args])
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def test_metrics_not_modeled_are_mentioned_only_where_no_metric_was_chosen(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _good_rows() + _rows("main->other", metric="Time"))
    rc, out, err = _fit(capsys, str(f), "--min-share", "0")
    assert rc == 0
    assert err[-1].endswith("; metric time (also measured: Time: --metric NAME, or --metric all)"), err
    assert "main->other" not in out
    rc, out, err = _fit(capsys, str(f), "--min-share", "0", "--metric", "Time")
    assert rc == 0 and "main->other" in out and "also measured" not in err[-1]
    rc, out, err = _fit(capsys, str(_write(tmp_path / "one.jsonl", _good_rows())), "--min-share", "0")
    assert "also measured" not in err[-1]


def test_top_says_how_many_models_it_cut(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _good_rows())
    rc, _, err = _fit(capsys, str(f), "--min-share", "0", "--top", "1")
    assert rc == 0 and "; 1 of 2 model(s) (--top 1)" in err[-1], err
    rc, _, err = _fit(capsys, str(f), "--min-share", "0", "--top", "5")
    assert "; 2 model(s)" in err[-1] and "--top" not in err[-1], err


def test_the_suffix_of_o_picks_the_format_unless_format_is_given(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _good_rows())
    as_json = tmp_path / "m.json"
    assert _fit(capsys, str(f), "--min-share", "0", "-o", str(as_json))[0] == 0
    assert {m["callpath"] for m in json.loads(as_json.read_text())["models"]} == {"main", "main->a"}
    as_csv = tmp_path / "m.CSV"
    assert _fit(capsys, str(f), "--min-share", "0", "-o", str(as_csv))[0] == 0
    assert {r["callpath"] for r in csv.DictReader(io.StringIO(as_csv.read_text()))} == {"main", "main->a"}
    as_md = tmp_path / "m.md"
    assert _fit(capsys, str(f), "--min-share", "0", "-o", str(as_md))[0] == 0
    assert as_md.read_text().startswith("**2 model(s)** over `p`, `q`") and "| `main->a` |" in as_md.read_text()
    table = tmp_path / "m.json.txt"
    assert _fit(capsys, str(f), "--min-share", "0", "-o", str(table), "--format", "json")[0] == 0
    assert json.loads(table.read_text())["models"]
    forced = tmp_path / "forced.json"
    assert _fit(capsys, str(f), "--min-share", "0", "-o", str(forced), "--format", "table")[0] == 0
    assert not forced.read_text().lstrip().startswith("{")


def _runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_sweep(root, {"n": N}, repetitions=2, time_s=lambda p, rank, rep: 0.01 * p["n"] * (1 + 0.02 * rep))
    return root


def test_the_export_says_that_the_passes_are_not_kept(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(out), str(_runs(tmp_path))]) == 0
    err = capsys.readouterr().err
    assert "repetition passes of " in err and "are not kept" in err and "narrower" in err, err
    assert cli.main(["export", "--extrap", str(tmp_path / "y.jsonl"), str(out)]) == 0
    assert "passes" not in capsys.readouterr().err  # an Extra-P input has none to lose


def test_the_reports_range_speaks_of_pass_refits_only_where_there_were_passes(tmp_path, capsys):
    runs, exported = _runs(tmp_path), tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(exported), str(runs)]) == 0
    pages = {}
    for name, src in (("runs", runs), ("extrap", exported)):
        page = tmp_path / f"{name}.html"
        assert cli.main(["report", str(src), "-o", str(page), "--at", "n=64", "--min-share", "0"]) in (0, 3)
        pages[name] = page.read_text()
    capsys.readouterr()
    assert "80% range of the forms that fit, holding the fits with each repetition pass left out" in pages["runs"]
    assert 'title="80% range of the forms that fit"' in pages["extrap"]
    assert "repetition pass left out" not in pages["extrap"]


def test_fit_and_report_word_an_unknown_metric_alike_and_say_where_speedup_comes_from(tmp_path, capsys):
    runs = _runs(tmp_path)
    said = []
    for command in (["fit", str(runs)], ["report", str(runs), "-o", str(tmp_path / "r.html")]):
        assert cli.main([*command, "--metric", "tim"]) == cli.EXIT_ERROR
        said.append(capsys.readouterr().err.splitlines()[-1])
    assert said[0] == said[1] and said[0].startswith("modeler: error: --metric: tim not measured; available: "), said
    assert "derived" not in said[0]
    assert cli.main(["fit", str(runs), "--metric", "speedup"]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "(speedup: derived from the time where the rank count is a parameter, named 'ranks' or given with "
        "--ranks-parameter)")


def test_where_no_parameter_varies_fit_stops_and_report_still_writes_the_page(tmp_path, capsys):
    f = _write(tmp_path / "flat.jsonl", [{"params": {"p": 4}, "callpath": cp, "metric": "time", "value": [1.0, 1.1]}
                                         for cp in ("main", "main->a")])
    assert cli.main(["fit", str(f)]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.splitlines()[-1] == ("modeler: error: no parameter varies over the measurements: "
                                                         "nothing to model (sweep at least one parameter)")
    page = tmp_path / "flat.html"
    assert cli.main(["report", str(f), "-o", str(page)]) == 0
    capsys.readouterr()
    assert "target n/a" in page.read_text()


def test_the_footer_says_which_exclusive_times_were_left_out_without_reading_as_call_paths_left_out():
    from modeler.share import left_out_note
    assert left_out_note(0, 0.01, 8) == ("the exclusive time of 8 of the call paths shown left out (its own time under "
                                         "1%); --min-share 0 shows all")
    assert left_out_note(57, 0.01, 8).startswith("57 call paths under 1% of the run's time (at every measured point "
                                                  "and at the target) left out; the exclusive time of 8 of the")
    assert left_out_note(1, 0.01) == ("1 call path under 1% of the run's time (at every measured point and at the "
                                      "target) left out; --min-share 0 shows all")


def test_the_reports_numbers_from_1000_up_have_no_exponent_where_the_table_has_none():
    from modeler.report.svg import short_number
    assert [short_number(v) for v in (4093.2, 1027, -4093, 999.7, 999_999, 16_400, 0.25, 1.5e6, 3e-5)] == \
        ["4093", "1027", "-4093", "1000", "1000k", "16.4k", "0.25", "1.5e+06", "3e-05"]


def test_the_csv_says_the_point_its_predictions_are_for(tmp_path, capsys):
    f = _write(tmp_path / "in.jsonl", _good_rows())
    assert cli.main(["fit", str(f), "--min-share", "0", "--format", "csv", "--at", "p=64"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2 and all((r["at_p"], r["at_q"]) == ("64.0", "32.0") for r in rows), rows  # q: its largest


def test_the_table_aligns_rows_whose_call_paths_hold_wide_characters(tmp_path, capsys):
    from modeler.outputs.table import display_width
    f = _write(tmp_path / "in.jsonl", _rows("main") + _rows("main->Ωmega→ü_計算", value=lambda n: [2.0 * n + 1, 2.02 * n + 1])
               + _rows("main->e\u0301t\u00e9", value=lambda n: [3.0 * n, 3.03 * n]))
    assert cli.main(["fit", str(f), "--min-share", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1]
    rows = lines[3:6]
    assert [r.split()[1] for r in rows] == ["main->e\u0301t\u00e9", "main->Ωmega→ü_計算", "main"], rows
    at = display_width(header[:header.index("metric")])
    for row in rows:  # each row's metric column starts where the header's does, in terminal columns
        assert display_width(row[:row.index(" time ") + 1]) == at, (header, row)
    assert display_width("計算") == 4 and display_width("e\u0301") == 1 and display_width("abc") == 3
