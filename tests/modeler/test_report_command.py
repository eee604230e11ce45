"""`modeler report` end to end, in a subprocess, on a synthetic sweep fitted by the real estimator."""

from __future__ import annotations

import argparse
import os
import re
from html import unescape
import subprocess
import sys
from pathlib import Path

import pytest

from .test_report_synth import write_sweep

REPO = Path(__file__).resolve().parents[2]


def modeler(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "modeler", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("cmd") / "runs")


def test_report_writes_one_html_file_and_says_where(runs, tmp_path):
    out = tmp_path / "out" / "report.html"
    p = modeler("report", str(runs), "-o", str(out), "--at", "ranks=64,batch=128", "--hold", "batch=32",
                "--top", "3")
    assert p.returncode == 0, p.stderr
    assert str(out.resolve()) in p.stderr
    html = out.read_text(encoding="utf-8")
    table = html.split('id="ranking-table"')[1].split("</table>")[0]
    rows = [unescape(re.sub(r"<[^>]+>", "", cell)).split()[0]
            for cell in re.findall(r'<td class="callpath">(.*?)</td>', table, re.S)]
    # the p*n data wait is the worst-scaling region, and the estimator must find it
    assert rows[0].endswith("load_batch")
    assert html.count('<article class="region"') == 3
    assert "against ranks (batch=32)" in html
    assert "p2-n8-broken" in html  # the failed run is reported, not silently dropped


def test_markdown_goes_to_stdout(runs):
    p = modeler("report", str(runs), "--format", "markdown", "--top", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("# scaleprobe report")
    assert "## Scaling ranking" in p.stdout and "## Call tree" in p.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--at", "nodes=4"], "--at: unknown parameter 'nodes'"),
        (["--hold", "batch"], "--hold: 'batch' is not NAME=VALUE"),
        (["--metric", "watts"], "--metric: watts not measured; available: "),
        (["--run", "nope"], "--run: no run 'nope'"),
    ],
)
def test_bad_options_exit_1_with_a_message(runs, tmp_path, capsys, args, message):
    # in-process: only the error path runs, and it stops before fitting
    from modeler.cli import main

    assert main(["report", str(runs), "-o", str(tmp_path / "r.html"), *args]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_missing_input_is_named(tmp_path):
    p = modeler("report", str(tmp_path / "nothing"), "-o", str(tmp_path / "r.html"))
    assert p.returncode == 1 and "nothing" in p.stderr


def test_extrap_input_with_its_only_metric(tmp_path, capsys):
    """Extra-P JSON Lines have no runs: the report models their one metric and says the run views are empty."""
    from modeler.cli import main

    lines = [f'{{"params": {{"p": {p}}}, "callpath": "main->solve", "metric": "flops", "value": [{3.0 * p * p}, {3.1 * p * p}]}}'
             for p in (2, 4, 8, 16, 32)]
    src = tmp_path / "m.jsonl"
    src.write_text("\n".join(lines) + "\n")
    assert main(["report", str(src), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "Metric **flops**" in out and "| parameter p | 2, 4, 8, 16, 32 |" in out
    assert "p^(2)" in out and "No completed run" in out
    (tmp_path / "n.jsonl").write_text(lines[0].replace("flops", "bytes") + "\n" + "\n".join(lines) + "\n")
    assert main(["report", str(tmp_path / "n.jsonl"), "-o", str(tmp_path / "r.html")]) == 1
    assert "--metric: the inputs have no 'time'; choose one of bytes, flops" in capsys.readouterr().err


def test_report_combines_repetitions_like_fit():
    # The report once reduced repetitions by median while `modeler fit` used the engine's default,
    # so the table and the report showed different models for the same runs.
    import argparse

    from modeler.commands import fit as fit_command
    from modeler.report import command as report_command

    def repetitions_option(configure):
        parser = argparse.ArgumentParser()
        configure(parser)
        (action,) = [a for a in parser._actions if "--repetitions" in a.option_strings]
        return action.default, tuple(action.choices)

    assert repetitions_option(report_command.configure) == repetitions_option(fit_command.configure)


def _extrap_lines(name: str) -> str:
    return "\n".join(f'{{"params": {{"{name}": {v}}}, "callpath": "main", "metric": "time", '
                     f'"value": [{0.5 * v}, {0.51 * v}]}}' for v in (2, 4, 8, 16, 32)) + "\n"


def test_extrap_inputs_get_no_cost_as_in_fit(tmp_path, capsys):
    # The report once took `p` (and nproc, gpus, np, ...) for the rank count and printed a cost
    # (time x p) that `modeler fit` never derives: `p` may as well be a problem size. Nor does fit
    # derive one from an Extra-P input's `ranks`, whose time may be a sum over ranks (review 43).
    from modeler.cli import main

    for name in ("p", "ranks"):
        src = tmp_path / f"{name}.jsonl"
        src.write_text(_extrap_lines(name))
        assert main(["report", str(src), "--format", "markdown", "-q"]) == 0
        out = capsys.readouterr().out
        assert "Predicted run time" in out and "of rank time" not in out, out


def test_report_reads_with_the_input_options_of_fit(runs, tmp_path):
    from modeler.commands import fit as fit_command
    from modeler.report import command as report_command

    def options(configure):
        parser = argparse.ArgumentParser()
        configure(parser)
        return {s for a in parser._actions for s in a.option_strings}

    shared = {"--callpath", "--ranks", "--include-incomplete", "--input-format", "-q", "--metric"}
    assert shared <= options(report_command.configure) & options(fit_command.configure)
    # --include-incomplete keeps the run whose rank 1 never ended; --callpath narrows the ranking
    out = tmp_path / "r.md"
    p = modeler("report", str(runs), "--format", "markdown", "-o", str(out), "--callpath", "*all_reduce",
                "--include-incomplete", "--input-format", "runs")
    assert p.returncode == 0, p.stderr
    text = out.read_text(encoding="utf-8")
    ranked = re.findall(r"^\| \d+ \| `([^`]+)`", text, re.M)
    assert ranked and all(c.endswith("all_reduce") for c in ranked), text[:2000]
    p = modeler("report", str(runs), "--format", "markdown", "-o", str(out), "--callpath", "nothing*")
    assert p.returncode == 1 and "--callpath: no call path matches nothing*" in p.stderr


def test_quiet_report_still_names_the_files_it_skipped(runs, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    p = modeler("report", str(runs), str(bad), "-o", str(tmp_path / "r.html"), "-q")
    assert p.returncode == 3
    assert p.stderr.strip().splitlines() == [f"modeler report: {bad}: skipped: not a scaleprobe run file nor an Extra-P input"]
