"""Review 58's notes: a parameter's `{name}` in --out or --experiment, a package directory given as
the script, a Ctrl-C while the entry script compiles."""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.launch_script import run_script
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prog(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "prog.py").write_text("print('ran')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args, said", [
    (["--out", "runs/{n}", "--sweep", "n=1,2"], "--out 'runs/{n}': {n} is filled in the program's arguments only"),
    (["--out", "r{ranks}", "--nproc", "2"], "--out 'r{ranks}': {ranks} is filled"),
    (["--experiment", "e{repetition}", "--repeat", "2"], "--experiment 'e{repetition}': {repetition} is filled"),
    (["--experiment", "b{b}", "--param", "b=3"], "{b} is filled"),
])
def test_a_parameter_named_in_out_or_the_experiment_is_an_error(prog, args, said):
    # it stayed as it was: every point's runs went under one folder literally named `{n}`
    with pytest.raises(LaunchError) as caught:
        parse([*args, "prog.py", "{n}" if "n=1,2" in args else "x"])
    assert said in str(caught.value)
    assert "a folder of their own" in str(caught.value)


def test_braces_around_other_text_in_out_are_a_folder_name(prog):
    opts = parse(["--out", "runs/{x}", "--sweep", "n=1,2", "prog.py", "{n}"])
    assert str(opts.out) == "runs/{x}"


def test_a_package_directory_as_the_script_points_to_its_main(prog):
    (prog / "pkg").mkdir()
    (prog / "pkg" / "__main__.py").write_text("print('ran')\n")
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "pkg"], cwd=prog, capture_output=True,
                          text=True, timeout=120, env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1"))
    assert done.returncode == 2
    assert "it is a directory: give its pkg/__main__.py" in done.stderr, done.stderr


def test_a_packages_main_is_named_for_its_directory(prog):
    (prog / "pkg").mkdir()
    (prog / "pkg" / "__main__.py").write_text("print('ran')\n")
    assert parse(["pkg/__main__.py"]).experiment == "pkg"
    assert parse(["prog.py"]).experiment == "prog"


@pytest.fixture
def in_process(prog, monkeypatch):
    # run_script sets what `python script.py` would: put pytest's own back afterwards
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    return prog


def test_a_ctrl_c_while_the_entry_script_compiles_shows_no_traceback(in_process):
    prog = in_process
    def interrupted(path):
        raise KeyboardInterrupt

    err = io.StringIO()
    with redirect_stderr(err):
        status = run_script(prog / "prog.py", [], code_for=interrupted)
    assert status == 130
    assert err.getvalue() == "KeyboardInterrupt\n"


def test_a_ctrl_c_in_the_program_keeps_its_traceback(in_process):
    prog = in_process
    (prog / "loop.py").write_text("def f():\n    raise KeyboardInterrupt\n\nf()\n")
    err = io.StringIO()
    with redirect_stderr(err):
        status = run_script(prog / "loop.py", [])
    assert status == 130
    assert "line 2, in f" in err.getvalue() and err.getvalue().endswith("KeyboardInterrupt\n")
