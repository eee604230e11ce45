"""Review 45, the output side: the markdown report's skipped inputs and escaping, a stdout that
cannot encode every character, a stdout whose reader went away, and CSV cells a spreadsheet reads
as formulas."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modeler import cli, mdtext
from modeler.report.findings import Report, TreeNode
from modeler.report.render import render_markdown

ROOT = Path(__file__).resolve().parents[2]
VALUES = (2, 4, 8, 16, 32)


def _extrap(path: Path, series, *, metric: str = "time", param: str = "n") -> Path:
    """An Extra-P JSON Lines file: `series` maps call paths to a function of the parameter."""
    lines = [{"params": {param: v}, "callpath": cp, "metric": metric, "value": [f(v), f(v) * 1.01]}
             for v in VALUES for cp, f in series.items()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A readable Extra-P file with a non-ASCII call path, and a file that is neither format."""
    good = _extrap(tmp_path / "good.jsonl", {"main": lambda n: 10.0 + n * n, "main->café→ü": lambda n: 1.0 + 0.5 * n * n})
    bad = tmp_path / "notés.jsonl"
    bad.write_text("garbage\n", encoding="utf-8")
    return good, bad


def _modeler(*args: str, env: dict[str, str] | None = None, script: str | None = None) -> subprocess.CompletedProcess:
    code = script if script is not None else "import sys; from modeler.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})})


# Finding 2: `report --format markdown` to stdout returned 0 before naming the files it skipped


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_markdown_report_on_stdout_names_skipped_files_and_exits_3(inputs, capsys, quiet):
    good, bad = inputs
    assert cli.main(["report", "--format", "markdown", str(good), str(bad), *quiet]) == cli.EXIT_PARTIAL
    out, err = capsys.readouterr()
    assert out.startswith("# scaleprobe report\n") and "## Call tree" in out
    assert f"modeler report: {bad}: skipped" in err
    assert "report written to" not in err  # nothing was written to a file


# Finding 3: names from the inputs in the markdown report


def _fenced_blocks(md: str) -> list[list[str]]:
    """The contents of the backtick-fenced code blocks, by CommonMark's rules for unindented
    fences: a block ends at a line of at least as many backticks as its opening fence, and nothing
    else."""
    blocks, current, fence = [], None, ""
    for line in md.split("\n"):
        if current is None:
            m = re.fullmatch(r"(`{3,})[^`]*", line)
            if m:
                current, fence = [], m.group(1)
        elif re.fullmatch(f"`{{{len(fence)},}}\\s*", line):
            blocks.append(current)
            current = None
        else:
            current.append(line)
    assert current is None, "a code fence is never closed"
    return blocks


def _report(**fields) -> Report:
    base = dict(title="scaleprobe report", parameters=("n",), metric="time", unit_format=str, target={"n": 64.0},
                hold={}, ranking=[], regions=[])
    return Report(**{**base, **fields})


def test_call_tree_fence_holds_names_with_backticks_and_newlines():
    evil = "tick```tock\n````\n# heading"
    tree = [TreeNode("main", 1.0, 0.1, 1, 1.0, [TreeNode(evil, 0.5, 0.5, 1, 0.5), TreeNode("<script>x</script>", 0.4, 0.4, 1, 0.4)])]
    md = render_markdown(_report(tree=tree, tree_run="r1", tree_rank=0))
    tree_part = md[md.index("## Call tree"):]
    (block,) = _fenced_blocks(tree_part)
    # the fence is longer than any run of backticks inside (CommonMark closes it at one as long)
    assert "\n`````\nmain  " in tree_part and tree_part.rstrip("\n").endswith("\n`````")
    # every region on a line of its own, at its depth, the newline shown as \n
    assert [ln.split("  ")[0] for ln in block] == ["main", "", ""]
    assert block[1].startswith("  tick```tock\\n````\\n# heading  ")
    assert block[2].startswith("  <script>x</script>  ")
    assert not any(ln.startswith(("#", "<")) for ln in tree_part.split("\n")[1:])


def test_title_metric_target_and_run_ids_are_escaped():
    report = _report(title="<b>T</b> `x`", metric="<img src=x onerror=alert(4)>|**bytes**",
                     parameters=("my*size*",), target={"my*size*": 256.0},
                     failed=[("run`1|x", "a rank ended with an exception")], imbalance_run="run`2",
                     tree=[TreeNode("main", 1.0, 1.0, 1, 1.0)], tree_run="run`3", tree_rank=0)
    md = render_markdown(report)
    lines = md.split("\n")
    assert lines[0] == r"# \<b\>T\</b\> \`x\`"
    assert lines[2].startswith(r"Metric **\<img src=x onerror=alert(4)\>\|\*\*bytes\*\***, parameters my\*size\*, "
                               r"target my\*size\*=256.")
    assert r"prediction at my\*size\*=256)" in md
    assert "- ``run`1|x``: a rank ended with an exception" in lines  # a list item: `|` needs no escape there
    assert "Run ``run`2`` has a single rank." in lines
    assert "Run ``run`3``, rank 0: inclusive / exclusive time, visits." in lines
    assert not re.search(r"(?<!\\)<(img|b)", md)  # no raw HTML


def test_metric_and_parameter_from_an_extrap_file_end_to_end(tmp_path):
    src = _extrap(tmp_path / "m.jsonl", {"main": lambda v: 2.0 * v, "main->a": lambda v: 1.0 * v},
                  metric="<img src=x>|**bytes**", param="my*size*")
    out = tmp_path / "r.md"
    assert cli.main(["report", "--format", "markdown", str(src), "-o", str(out), "-q", "--at", "my*size*=256"]) == 0
    line = out.read_text(encoding="utf-8").split("\n")[2]
    assert line == r"Metric **\<img src=x\>\|\*\*bytes\*\***, parameters my\*size\*, target my\*size\*=256."


def test_code_span_escapes_pipes_in_table_cells_only():
    assert mdtext.code("a|b") == "`a\\|b`"
    assert mdtext.code("a|b", cell=False) == "`a|b`"
    assert mdtext.code("a`b", cell=False) == "``a`b``"


# Finding 4: a stdout (or stderr) that cannot encode every character


def _ascii_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", write_through=True)


@pytest.mark.parametrize("argv", [["report", "--format", "markdown"], ["fit", "--min-share", "0"],
                                  ["fit", "--min-share", "0", "--format", "markdown"],
                                  ["export", "--extrap", "-"]])
def test_output_to_an_ascii_stdout_is_escaped_not_a_traceback(inputs, monkeypatch, argv):
    good, bad = inputs
    stdout, stderr = _ascii_stream(), _ascii_stream()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert cli.main([*argv, str(good), str(bad)]) == cli.EXIT_PARTIAL
    out = stdout.buffer.getvalue().decode("ascii")
    err = stderr.buffer.getvalue().decode("ascii")
    assert "caf\\xe9\\u2192\\xfc" in out or "caf\\u00e9\\u2192\\u00fc" in out  # JSON Lines escape by themselves
    assert "not\\xe9s.jsonl: skipped" in err  # the warnings too
    assert stdout.errors == stderr.errors == "strict"  # the streams as they were once main returns


def test_a_file_written_under_an_ascii_stdout_stays_utf8(inputs, tmp_path, monkeypatch):
    good, _ = inputs
    monkeypatch.setattr(sys, "stdout", _ascii_stream())
    out = tmp_path / "r.md"
    assert cli.main(["report", "--format", "markdown", str(good), "-o", str(out), "-q"]) == 0
    text = out.read_bytes().decode("utf-8")
    assert "café→ü" in text and " – " in text


@pytest.mark.parametrize("env", [{"PYTHONUTF8": "0", "LC_ALL": "C", "PYTHONIOENCODING": ""},
                                 {"PYTHONIOENCODING": "latin-1"}])
def test_a_non_utf8_locale_end_to_end(inputs, env):
    good, _ = inputs
    for args in (["report", "--format", "markdown", str(good)], ["fit", str(good), "--min-share", "0"]):
        p = _modeler(*args, env=env)
        assert p.returncode == 0, p.stderr
        assert b"Traceback" not in p.stderr
        assert b"caf" in p.stdout and b"\\u2192" in p.stdout


# Finding 5: stdout's reader went away (`| head`): the warnings, skipped files and exit code stay

READER_GONE = textwrap.dedent("""
    import os, sys
    r, w = os.pipe()
    os.close(r)
    os.dup2(w, 1)
    os.close(w)
    from modeler.cli import main
    rc = main(sys.argv[1:])
    print("exit", rc, file=sys.stderr)
    sys.exit(rc)
""")


@pytest.mark.parametrize("argv", [["fit", "--min-share", "0", "--format", "json"], ["report", "--format", "markdown"],
                                  ["export", "--extrap", "-"]])
def test_a_reader_gone_keeps_the_warnings_and_exit_code_3(inputs, argv):
    good, bad = inputs
    p = _modeler(*argv, str(good), str(bad), script=READER_GONE)
    err = p.stderr.decode("utf-8", "backslashreplace")
    assert p.returncode == cli.EXIT_PARTIAL, err
    assert "exit 3" in err and f"{bad}: skipped" in err
    assert "Traceback" not in err and "Exception ignored" not in err  # nor at the interpreter's exit


# Finding 8: CSV cells a spreadsheet reads as formulas


def test_csv_text_cells_never_start_a_formula_and_numbers_stay_numbers(tmp_path, capsys):
    src = _extrap(tmp_path / "c.jsonl", {
        "main": lambda n: 3.0 * n - 2.0,  # a negative constant: the model starts with "-"
        '=HYPERLINK("http://e.vil","x")': lambda n: 10.0 * n,
        "+plus": lambda n: 4.0 * n, "@at": lambda n: 5.0, "main->-minus": lambda n: n * n,
        "main->'quoted": lambda n: 2.0 * n, "main->\tx": lambda n: 1.5 * n,
    })
    assert cli.main(["fit", str(src), "--min-share", "0", "--format", "csv", "-q"]) == 0
    rows = {r["callpath"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert set(rows) == {"main", "'=HYPERLINK(\"http://e.vil\",\"x\")", "'+plus", "'@at", "main->-minus",
                         "main->'quoted", "main->\tx"}
    main = rows["main"]
    assert float(main["constant"]) == pytest.approx(-2.0, rel=0.05)  # a number, as it was
    assert main["model"].startswith("'-")
    for row in rows.values():
        for column in ("callpath", "metric", "model", "unit", "prediction_from_time_basis", "doubtful"):
            assert not row[column].startswith(("=", "+", "-", "@", "\t", "\r")), (column, row[column])
        for column in ("constant", "prediction", "smape", "growth_exponent"):
            float(row[column])  # numeric columns are plain numbers
