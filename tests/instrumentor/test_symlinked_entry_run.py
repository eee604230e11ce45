"""An entry script that is a symlink (`main.py -> scripts/train.py`), run as Python runs it: the
built tree's tracebacks name the original lines (review 82 F2 kept the link in OUT, whose frames
are named by the link and mapped by the target's path: they showed OUT's lines), and the launcher
puts the target's folder first on sys.path as `python main.py` does (it put the link's: the
script imported the top-level `config.py` instead of its neighbour)."""
import sys

from instr_helpers import run, run_env
from instrumentor.cli import main

TRAIN = '''import sys
import config


def show(n):
    for i in range(n):
        if i == 2:
            raise ValueError("boom " + config.NAME)


print(sys.path[0].endswith("scripts"))
show(3)
'''


def _project(tmp_path):
    src = tmp_path / "src"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts" / "train.py").write_text(TRAIN)
    (src / "scripts" / "config.py").write_text("NAME = 'scripts'\n")
    (src / "config.py").write_text("NAME = 'top'\n")
    (src / "main.py").symlink_to("scripts/train.py")
    return src


def _frames(stderr: str) -> list[str]:
    return [line.split(", in ")[0].rsplit(", ", 1)[1] for line in stderr.splitlines() if line.startswith("  File ")]


def test_a_built_linked_entry_shows_the_original_lines(tmp_path):
    src = _project(tmp_path)
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    plain = run([sys.executable, "main.py"], cwd=src, env=run_env(tmp_path))
    built = run([sys.executable, "main.py"], cwd=out, env=run_env(tmp_path))
    assert plain.stdout == built.stdout == "True\n"
    assert _frames(plain.stderr) == ["line 12", "line 8"], plain.stderr
    assert _frames(built.stderr) == _frames(plain.stderr), built.stderr  # before: lines 23 and 15 of OUT
    assert 'raise ValueError("boom " + config.NAME)' in built.stderr
    assert str(src / "scripts" / "train.py") in built.stderr


def test_the_launcher_puts_a_linked_scripts_folder_first_as_python_does(tmp_path):
    src = _project(tmp_path)
    plain = run([sys.executable, "main.py"], cwd=src, env=run_env(tmp_path))
    launched = run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "main.py"],
                   cwd=src, env=run_env(tmp_path))
    assert plain.stdout == "True\n" and "boom scripts" in plain.stderr
    assert launched.stdout == plain.stdout, launched.stderr  # before: False, and "boom top"
    assert "ValueError: boom scripts" in launched.stderr
