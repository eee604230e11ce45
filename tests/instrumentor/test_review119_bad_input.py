"""Review 119: bad input to `instrument` and the import hook. A SRC or OUT that is a symlink loop
(M1), a module Python runs that is not UTF-8 under `--instrument` (M2), a module that does not parse
under `--graph` (M3), the message for a byte that is not UTF-8 on the first lines (L1), an entry that
is a symlink loop or a broken link (L2)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from instr_helpers import REPO
from instrumentor.cli import main
from instrumentor.importhook import Instrumenter
from instrumentor.project import _instrument_file
from tests.envclean import clean_env

MAIN = "import helper\n\n\ndef g():\n    return helper.f()\n\n\ng()\n"
# a byte that is not UTF-8 in a comment: CPython 3.11 compiles it, tokenize refuses it
HELPER = b"def f():\n    x = 1\n    # caf\xe9\n    return x\n"
NOT_UTF8 = ("cannot read: byte 0xe9 is not UTF-8; save the file as UTF-8, or declare its encoding on line 1 "
            "or 2 (`# -*- coding: latin-1 -*-`)")


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "main.py").write_text(MAIN)
    (root / "helper.py").write_text("def f():\n    return 1\n")
    return root


def err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


# -- M1: a symlink loop as SRC or OUT -------------------------------------------------------------------


def test_m1_a_src_that_is_a_symlink_loop_is_a_one_line_error(tmp_path, capsys):
    loop = tmp_path / "srcloop"
    loop.symlink_to("srcloop")
    assert main([str(loop), "-o", str(tmp_path / "out")]) == 2
    assert err_lines(capsys) == [f"instrument: error: {loop}: a symlink loop (Too many levels of symbolic links)"]
    assert main([str(loop), "--graph"]) == 2
    assert err_lines(capsys) == [f"instrument: error: {loop}: a symlink loop (Too many levels of symbolic links)"]


@pytest.mark.parametrize("under", ["", "sub"])
def test_m1_an_out_that_is_or_lies_under_a_symlink_loop_is_a_one_line_error(src, tmp_path, capsys, under):
    loop = tmp_path / "oloop"
    loop.symlink_to("oloop")
    out = loop / under if under else loop
    assert main([str(src), "-o", str(out)]) == 2
    assert err_lines(capsys) == [f"instrument: error: -o {out}: a symlink loop (Too many levels of symbolic links)"]


# -- M2: the hook and a module Python runs that is not UTF-8 ---------------------------------------------


def test_m2_a_module_python_runs_but_that_does_not_decode_runs_as_it_is_and_says_why(tmp_path, capsys):
    path = tmp_path / "helper.py"
    path.write_bytes(HELPER)
    cache = tmp_path / "cache"
    said = f"scaleprobe: not instrumented: helper.py:3: {NOT_UTF8}"
    for _ in range(2):  # computed, then from the cache
        inst = Instrumenter(tmp_path, cache, "runtime")
        assert not inst.invalid(path), "Python compiles it: the hook's loader runs it"
        namespace: dict = {}
        exec(inst.compile(path, path.read_bytes()), namespace)
        assert namespace["f"]() == 1 and "__sp_on__" not in namespace
        assert err_lines(capsys) == [said]  # once per process
    assert len(list(cache.glob("*.json"))) == 1


def test_m2_a_module_python_refuses_too_is_left_to_pythons_loader_without_a_word(tmp_path, capsys):
    path = tmp_path / "helper.py"
    path.write_bytes(b'def f():\n    return "caf\xe9"\n')  # in a string: Python refuses it as well
    inst = Instrumenter(tmp_path, tmp_path / "cache", "runtime")
    assert inst.invalid(path)
    assert capsys.readouterr().err == ""


def test_m2_a_run_under_the_launcher_says_which_module_went_uninstrumented(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.py").write_text(MAIN)
    (proj / "helper.py").write_bytes(HELPER)
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
                           "--cache-dir", str(tmp_path / "cache"), "--", "proj/main.py"], cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"scaleprobe: not instrumented: helper.py:3: {NOT_UTF8}" in done.stderr.splitlines(), done.stderr
    (run_file,) = (tmp_path / "runs").rglob("rank0*.jsonl")
    names = {rec.get("name") for rec in map(json.loads, run_file.read_text().splitlines())}
    assert "g" in names and "f" not in names


# -- M3: --graph and a module that does not parse --------------------------------------------------------


def test_m3_graph_names_a_reached_module_that_does_not_parse_and_exits_1(src, capsys):
    (src / "helper.py").write_text("import data\n\n\ndef f():\n    return (1,\n")
    (src / "data.py").write_text("X = 1\n")
    (src / "other.py").write_bytes(b'def h():\n    return "caf\xe9"\n')
    (src / "main.py").write_text(MAIN + "import other\n")
    assert main([str(src), "--graph"]) == 1
    out = capsys.readouterr().out
    failed = out[out.index("files failed:"):].splitlines()
    assert failed[0] == "files failed: 2", out
    assert sorted(failed[1:]) == ["  helper.py:5: syntax error: '(' was never closed", f"  other.py:2: {NOT_UTF8}"], out
    assert "own modules not reached (1):\n  data.py\n" in out  # only helper.py imports it
    assert main([str(src), "--graph", "--keep-going"]) == 0
    assert main([str(src), "--graph", "-q"]) == 1
    assert "instrument: failed: helper.py:5: syntax error: '(' was never closed" in err_lines(capsys)


# -- L1: a byte that is not UTF-8, named with the fix ----------------------------------------------------


@pytest.mark.parametrize("data, line", [
    (b"# caf\xe9\ndef f():\n    return 1\n", 1),  # tokenize's "invalid or missing encoding declaration"
    (b"# first\n# caf\xe9\nx = 1\n", 2),
    (HELPER, 3),  # the codec's own message
    (b'\xef\xbb\xbfx = 1\n\ny = "\xe9"\n', 3),  # after a BOM
])
def test_l1_a_byte_that_is_not_utf8_is_named_with_its_line_and_the_fix(tmp_path, data, line):
    path = tmp_path / "config2.py"
    path.write_bytes(data)
    result = _instrument_file("config2.py", str(path), (0, 10), {}, "runtime")
    assert (result.status, result.error) == ("failed", f"config2.py:{line}: {NOT_UTF8}")


def test_l1_a_byte_not_in_a_declared_encoding_keeps_the_codecs_message(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"# -*- coding: ascii -*-\nx = 1\ny = '\xff'\n")
    result = _instrument_file("a.py", str(path), (0, 10), {}, "runtime")
    assert result.error.startswith("a.py:3: cannot read: 'ascii' codec can't decode byte 0xff"), result.error


def test_l1_the_build_copies_the_file_and_names_it(src, tmp_path, capsys):
    (src / "helper.py").write_bytes(b"# caf\xe9\ndef f():\n    return 1\n")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out)]) == 1
    assert f"  helper.py:1: {NOT_UTF8}" in capsys.readouterr().out.splitlines()
    assert (out / "helper.py").read_bytes() == (src / "helper.py").read_bytes()


# -- L2: an entry that is a symlink loop or a broken link ------------------------------------------------


@pytest.mark.parametrize("target, what", [("main.py", "a symlink loop"),
                                          ("gone.py", "a broken symlink to gone.py")])
def test_l2_a_main_py_that_leads_to_no_file_is_named_as_what_it_is(src, tmp_path, capsys, target, what):
    (src / "main.py").unlink()
    (src / "main.py").symlink_to(target)
    for args in (["-o", str(tmp_path / "out")], ["--graph"]):
        assert main([str(src), *args]) == 2
        assert err_lines(capsys) == [f"instrument: error: {src}: no entry file (main.py is {what}; name one with "
                                     "--main or use --all)"]
    # named with --main: refused, where it built nothing with exit 0
    assert main([str(src), "-o", str(tmp_path / "out"), "--main", "main.py"]) == 2
    assert err_lines(capsys) == [f"instrument: error: --main main.py: is {what}; name the file Python runs"]


def test_l2_a_project_without_main_py_still_says_so(src, tmp_path, capsys):
    (src / "main.py").unlink()
    assert main([str(src), "-o", str(tmp_path / "out")]) == 2
    assert err_lines(capsys) == [f"instrument: error: {src}: no entry file (no main.py; name one with --main or use "
                                 "--all)"]


# -- left open in review 119, mended in session 37 -------------------------------------------------------


def test_graph_names_a_module_python_parses_but_the_build_cannot_read_and_still_follows_it(src, tmp_path, capsys):
    (src / "helper.py").write_bytes(b"import data\n" + HELPER)  # the byte is in a comment: ast.parse takes it
    (src / "data.py").write_text("X = 1\n")
    assert main([str(src), "--graph"]) == 1
    out = capsys.readouterr().out
    assert out[out.index("files failed:"):].splitlines() == ["files failed: 1", f"  helper.py:4: {NOT_UTF8}"], out
    assert "own modules reached (3):\n  data.py\n  helper.py\n  main.py\n" in out  # its imports followed
    # the build says the same of it
    assert main([str(src), "-o", str(tmp_path / "out")]) == 1
    assert f"  helper.py:4: {NOT_UTF8}" in capsys.readouterr().out.splitlines()


def test_the_launcher_says_the_entry_itself_ran_uninstrumented_and_why(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.py").write_bytes(b"# caf\xe9\ndef g():\n    return 1\n\n\ng()\n")
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
                           "--cache-dir", str(tmp_path / "cache"), "--", "proj/main.py"], cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    warning = done.stderr.splitlines()[-1]
    assert warning == ("scaleprobe launch: warning: the run completed but no run file was written: --instrument could "
                       f"not instrument proj/main.py, which ran as it is (main.py:1: {NOT_UTF8})"), done.stderr
    assert "found nothing to record" not in done.stderr
