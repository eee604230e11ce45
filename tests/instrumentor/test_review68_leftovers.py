"""Review 68's remaining findings: a project package named `dist`/`build` at any depth was never
instrumented and vanished from `--graph` (M3); `--graph` with no entry file exited 0 with an empty
graph (L1); `--main` naming a folder said "no such file" (L5). The import hook shares the build's
rule for folders that are not the project's, and so now also leaves out a conda environment and a
standard library inside the project."""
from pathlib import Path

from instrumentor.cli import main
from instrumentor.importhook import Instrumenter

HEADER = "from runtime.probe import "
LOOP = "def f():\n    for i in range(3):\n        pass\n"


def _dist_project(src: Path) -> None:
    (src / "proj" / "dist").mkdir(parents=True)
    (src / "proj" / "__init__.py").write_text("")
    (src / "proj" / "dist" / "__init__.py").write_text("")
    (src / "proj" / "dist" / "comm.py").write_text(LOOP)
    (src / "build" / "lib" / "proj").mkdir(parents=True)  # setuptools' output: no package itself
    (src / "build" / "lib" / "proj" / "old.py").write_text(LOOP)
    (src / "main.py").write_text("from proj.dist import comm\ncomm.f()\n")


def test_a_regular_package_named_dist_is_the_projects_own(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    _dist_project(src)
    assert main([str(src), "--graph"]) == 0
    shown = capsys.readouterr().out
    assert "  proj/dist/comm.py" in shown.split("own modules not reached")[0]
    assert "build/lib/proj/old.py" not in shown
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
    assert HEADER in (out / "proj" / "dist" / "comm.py").read_text()
    assert (out / "build" / "lib" / "proj" / "old.py").read_text() == LOOP


def test_the_import_hook_takes_the_same_folders_as_the_build(tmp_path):
    _dist_project(tmp_path)
    (tmp_path / "env" / "conda-meta").mkdir(parents=True)
    (tmp_path / "env" / "lib" / "python3.11").mkdir(parents=True)
    (tmp_path / "tools" / "lib" / "python3.12").mkdir(parents=True)
    inst = Instrumenter(tmp_path, None, "runtime")
    assert inst.owns(tmp_path / "proj" / "dist" / "comm.py", "proj.dist.comm")
    assert not inst.owns(tmp_path / "build" / "lib" / "proj" / "old.py", "proj.old")
    assert not inst.owns(tmp_path / "env" / "lib" / "python3.11" / "os.py", "os")
    assert not inst.owns(tmp_path / "tools" / "lib" / "python3.12" / "os.py", "os")
    assert not inst.owns(tmp_path / "dist" / "x.py", "x")  # a `dist/` that is no package: build output


def test_graph_without_an_entry_file_is_the_builds_error(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(LOOP)
    assert main([str(src), "--graph"]) == 2
    assert "no entry file (no main.py; name one with --main or use --all)" in capsys.readouterr().err


def test_main_naming_a_folder_says_so(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__main__.py").write_text(LOOP)
    assert main([str(src), "--main", "pkg", "--graph"]) == 2
    err = capsys.readouterr().err
    assert "--main pkg: is a folder" in err and "pkg/__main__.py" in err
