"""Review 68, the tree `instrument` writes: empty folders of SRC were not made in OUT (H6); a folder
of a package deleted from SRC stayed in OUT, empty, and imported as a namespace package (H7); a
relative symlink leading out of SRC dangled in OUT (H8), and symlinked folders were dropped (M1);
SRC inside OUT had its own file overwritten by a re-run (M2); `--diff` of a file without a final
newline was no valid patch (M5); `--all` took no notice of `--main` (M6); `--all` instrumented the
standard library of a conda environment inside the project (M7)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from instr_helpers import run, run_env
from instrumentor.cli import main

HEADER = "from runtime.probe import "


def written(out: Path) -> list[str]:
    return json.loads((out / ".scaleprobe" / "state.json").read_text())["written"]


def tree(root: Path) -> list[str]:
    """Everything under root but `.scaleprobe/`, folders with a trailing `/`, links as `name -> target`."""
    found = []
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        dirs[:] = sorted(d for d in dirs if d != ".scaleprobe")
        for d in list(dirs):
            if os.path.islink(Path(folder, d)):
                found.append(f"{(rel / d).as_posix()} -> {os.readlink(Path(folder, d))}")
                dirs.remove(d)
            else:
                found.append((rel / d).as_posix() + "/")
        for name in files:
            path = Path(folder, name)
            found.append(f"{(rel / name).as_posix()} -> {os.readlink(path)}" if path.is_symlink() else (rel / name).as_posix())
    return sorted(found)


# -- H6: empty folders ----------------------------------------------------------------------------


def test_empty_folders_of_src_are_made_in_out_and_the_program_writes_there(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "checkpoints").mkdir(parents=True)
    (src / "data" / "empty").mkdir(parents=True)
    (src / "logs" / "__pycache__").mkdir(parents=True)  # holds only what is never copied
    (src / "logs" / "__pycache__" / "x.pyc").write_bytes(b"")
    (src / ".git" / "objects").mkdir(parents=True)  # never copied, also when empty
    (src / "venv" / "lib").mkdir(parents=True)
    (src / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (src / "main.py").write_text(
        "from pathlib import Path\n\n\ndef save():\n    for i in range(2):\n"
        "        (Path(__file__).parent / 'checkpoints' / f'c{i}.txt').write_text('x')\n    print('saved')\n\n\nsave()\n"
    )
    assert main([str(src), "-o", str(out)]) == 0
    assert "files copied unchanged: 0" in capsys.readouterr().out  # a folder is no file copied
    assert tree(out) == ["checkpoints/", "data/", "data/empty/", "logs/", "main.py"]
    assert sorted(written(out)) == ["checkpoints/", "data/empty/", "logs/", "main.py"]
    done = run([sys.executable, "main.py"], cwd=out, env=run_env(tmp_path))
    assert (done.returncode, done.stdout) == (0, "saved\n"), done.stderr
    # a re-run builds into what the program wrote there; the folder stays while SRC has it
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert sorted(os.listdir(out / "checkpoints")) == ["c0.txt", "c1.txt"]


def test_an_empty_folder_is_built_into_where_out_has_one_and_a_file_of_yours_there_is_in_the_way(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "checkpoints").mkdir(parents=True)
    (src / "main.py").write_text("def f():\n    return 1\n")
    (out / "checkpoints").mkdir(parents=True)  # a folder of the user's: nothing of it is replaced
    (out / "checkpoints" / "mine.txt").write_text("mine\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "checkpoints" / "mine.txt").read_text() == "mine\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / "checkpoints").write_text("a file of the user's\n")
    assert main([str(src), "-o", str(other), "-q", "--all"]) == 2
    assert "the build would replace checkpoints/" in capsys.readouterr().err


def test_a_file_and_an_empty_folder_of_one_name_replace_each_other_on_re_runs(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "conf").mkdir(parents=True)
    (src / "main.py").write_text("def f():\n    return 1\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
    (src / "conf").rmdir()
    (src / "conf").write_text("now a file\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "conf").read_text() == "now a file\n"
    (src / "conf").unlink()
    (src / "conf").mkdir()
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "conf").is_dir() and sorted(written(out)) == ["conf/", "main.py"]


# -- H7: folders left empty --------------------------------------------------------------------------


def test_a_package_deleted_from_src_leaves_no_folder_that_imports_as_a_namespace_package(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "plugin" / "sub").mkdir(parents=True)
    (src / "plugin" / "__init__.py").write_text("X = 1\n")
    (src / "plugin" / "sub" / "data.txt").write_text("d\n")
    (src / "main.py").write_text(
        "try:\n    import plugin\n    print('plugin present')\nexcept ImportError:\n    print('no plugin')\n"
    )
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
    shutil.rmtree(src / "plugin")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert tree(out) == ["main.py"]
    for where in (src, out):
        done = run([sys.executable, "main.py"], cwd=where, env=run_env(tmp_path))
        assert done.stdout == "no plugin\n", done.stderr


def test_only_the_folders_builds_made_and_src_dropped_are_removed(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    for folder in ("gone/deep", "mine", "kept", "emptied", "was_empty"):
        (src / folder).mkdir(parents=True)
    for rel in ("gone/deep/a.txt", "mine/a.txt", "kept/a.txt", "emptied/a.txt"):
        (src / rel).write_text("a\n")
    (src / "main.py").write_text("def f():\n    return 1\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
    (out / "mine" / "notes.txt").write_text("the user's\n")  # a file of the user's keeps its folder
    (out / "yours").mkdir()  # an empty folder of the user's is left alone
    (out / "kept" / "yours").mkdir()
    shutil.rmtree(src / "gone")
    shutil.rmtree(src / "mine")
    shutil.rmtree(src / "kept")
    (src / "emptied" / "a.txt").unlink()  # the folder stays in SRC, empty: it stays in OUT
    (src / "was_empty").rmdir()
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert tree(out) == ["emptied/", "kept/", "kept/yours/", "main.py", "mine/", "mine/notes.txt", "yours/"]
    assert sorted(written(out)) == ["emptied/", "main.py"]


# -- H8 and M1: symlinks -------------------------------------------------------------------------


@pytest.fixture()
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """proj/src with links out of SRC (a file and a folder) and inside it; OUT elsewhere, deeper."""
    shared, src = tmp_path / "proj" / "shared", tmp_path / "proj" / "src"
    (shared / "ds").mkdir(parents=True)
    (shared / "data.csv").write_text("1,2\n")
    (shared / "ds" / "x.txt").write_text("img\n")
    (src / "sub").mkdir(parents=True)
    (src / "runs" / "5").mkdir(parents=True)
    (src / "runs" / "5" / "r.txt").write_text("run 5\n")
    (src / "cfg.yaml").write_text("k: v\n")
    os.symlink("../shared/data.csv", src / "data.csv")
    os.symlink("../shared/ds", src / "ds")
    os.symlink("runs/5", src / "latest")  # a folder inside SRC
    os.symlink("../cfg.yaml", src / "sub" / "cfg.yaml")  # up, but inside SRC
    os.symlink("../../src/cfg.yaml", src / "sub" / "round.yaml")  # out of SRC and back in by name
    (src / "main.py").write_text(
        "from pathlib import Path\n\nhere = Path(__file__).parent\n\n\ndef main():\n"
        "    for name in ('data.csv', 'ds/x.txt', 'latest/r.txt', 'sub/cfg.yaml', 'sub/round.yaml'):\n"
        "        print((here / name).read_text().strip())\n\n\nmain()\n"
    )
    return src, tmp_path / "elsewhere" / "deep" / "out"


def test_links_out_of_src_point_at_the_same_target_and_symlinked_folders_are_copied_as_links(linked, tmp_path, capsys):
    src, out = linked
    shared = src.parent / "shared"
    assert main([str(src), "-o", str(out), "-q"]) == 0, capsys.readouterr().err
    assert os.readlink(out / "data.csv") == str(shared / "data.csv")
    assert os.readlink(out / "ds") == str(shared / "ds")
    assert os.readlink(out / "latest") == "runs/5" and os.readlink(out / "sub" / "cfg.yaml") == "../cfg.yaml"
    assert os.readlink(out / "sub" / "round.yaml") == str(src.parent / "src" / "cfg.yaml")
    plain = run([sys.executable, "main.py"], cwd=src, env=run_env(tmp_path))
    built = run([sys.executable, "main.py"], cwd=out, env=run_env(tmp_path))
    assert plain.stdout == "1,2\nimg\nrun 5\nk: v\nk: v\n", plain.stderr
    assert (built.returncode, built.stdout) == (0, plain.stdout), built.stderr
    # an unchanged re-run keeps them; the record knows them (also one an earlier build left off it)
    state_file = out / ".scaleprobe" / "state.json"
    state = json.loads(state_file.read_text())
    state["written"] = [r for r in state["written"] if r not in ("data.csv", "ds")]
    state_file.write_text(json.dumps(state))
    assert main([str(src), "-o", str(out), "-q"]) == 0, capsys.readouterr().err
    assert {"data.csv", "ds", "latest"} <= set(written(out))


def test_a_symlinked_folder_is_never_looked_into_nor_removed_through(linked, capsys):
    src, out = linked
    shared = src.parent / "shared"
    (src / "ds").unlink()
    (src / "ds").mkdir()  # first a folder of SRC's own, with a file the build copies
    (src / "ds" / "x.txt").write_text("own\n")
    (src / "ds" / "y.py").write_text("def g():\n    return 1\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
    assert "__sp_define__" in (out / "ds" / "y.py").read_text()
    shutil.rmtree(src / "ds")
    os.symlink("../shared/ds", src / "ds")  # now a link to a folder holding x.txt too
    (shared / "ds" / "y.py").write_text("def g():\n    return 2\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert os.readlink(out / "ds") == str(shared / "ds")
    # the files builds wrote under ds/ are gone from the record, and the ones behind the link stay
    assert (shared / "ds" / "x.txt").read_text() == "img\n" and (shared / "ds" / "y.py").read_text() == "def g():\n    return 2\n"
    assert not {"ds/x.txt", "ds/y.py"} & set(written(out))
    os.unlink(src / "ds")  # and back to a folder: the link in OUT is replaced, never written through
    (src / "ds").mkdir()
    (src / "ds" / "x.txt").write_text("own again\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert not os.path.islink(out / "ds") and (out / "ds" / "x.txt").read_text() == "own again\n"
    assert (shared / "ds" / "x.txt").read_text() == "img\n"


# -- M2: SRC inside OUT ---------------------------------------------------------------------------


def test_src_inside_out_is_built_until_the_build_would_write_into_src(tmp_path, monkeypatch, capsys):
    """`instrument big/a -o big` builds as any OUT; once SRC has `a/helper.py`, which is
    `big/a/helper.py`, SRC's own `helper.py`, it is refused naming both, and SRC is left as it is."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "big" / "a"
    src.mkdir(parents=True)
    (src / "main.py").write_text("import helper\nhelper.h()\n")
    (src / "helper.py").write_text("def h():\n    for i in range(2):\n        pass\n")
    assert main(["big/a", "-o", "big", "-q"]) == 0
    assert HEADER in (tmp_path / "big" / "helper.py").read_text()
    (src / "a").mkdir()
    shutil.copy(src / "helper.py", src / "a" / "helper.py")
    (src / "main.py").write_text("import helper\nimport a.helper\nhelper.h()\n")
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    os.symlink("big", tmp_path / "link")
    for spelling in ("big", "big/", "big/a/..", "link", str(tmp_path / "big")):
        assert main(["big/a", "-o", spelling, "-q"]) == 2
        assert capsys.readouterr().err == (
            f"instrument: error: -o {Path(spelling)}: holds the source directory big/a, and the build would "
            f"write into it (a/helper.py of SRC is {src / 'helper.py'}); give an output directory outside SRC\n")
        assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before
    (src / "a" / "helper.py").unlink()  # an empty folder `a/` is SRC's `a/` all the same
    assert main(["big/a", "-o", "big", "-q"]) == 2
    assert "(a/ of SRC is " in capsys.readouterr().err


def test_src_inside_out_where_an_earlier_build_wrote_is_refused(tmp_path, capsys):
    """What an earlier build wrote into OUT/a is SRC's now (`instrument other -o big`, then files put
    into `big/a` and `instrument big/a -o big`): a re-run would remove it as no longer in SRC."""
    other, out = tmp_path / "other", tmp_path / "big"
    (other / "a").mkdir(parents=True)
    (other / "a" / "x.txt").write_text("x\n")
    (other / "main.py").write_text("def f():\n    return 1\n")
    assert main([str(other), "-o", str(out), "-q"]) == 0
    (out / "a" / "main.py").write_text("def g():\n    return 1\n")
    assert main([str(out / "a"), "-o", str(out), "-q"]) == 2
    assert f"where an earlier build into it wrote {out / 'a' / 'x.txt'}, which a re-run would remove" in capsys.readouterr().err
    assert sorted(os.listdir(out / "a")) == ["main.py", "x.txt"]


def test_src_inside_out_holding_the_users_files_is_still_refused_as_such(tmp_path, capsys):
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "config.yaml").write_text("mine\n")
    (proj / "src" / "config.yaml").write_text("src\n")
    assert main([str(proj / "src"), "-o", str(proj)]) == 2
    assert "holds files of its own and is no earlier build" in capsys.readouterr().err


# -- M5: --diff of a file without a final newline -------------------------------------------------


def test_diff_of_files_without_a_final_newline_applies_as_a_patch(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import b\n\n\ndef main():\n    return b.f()")
    (src / "b.py").write_text("def f():\n    x = 1\n    \x0c\n    return 2")  # a form feed splits no line
    (src / "c.py").write_text("def g():\n    return 3\n")
    assert main([str(src), "--diff", "--all"]) == 0
    patch_text = capsys.readouterr().out
    assert patch_text.count("\\ No newline at end of file\n") == 4
    if shutil.which("patch"):
        done = subprocess.run(["patch", "-p1", "--dry-run"], input=patch_text, cwd=src, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    if shutil.which("git"):
        (tmp_path / "p.diff").write_text(patch_text)
        done = subprocess.run(["git", "apply", "--check", str(tmp_path / "p.diff")], cwd=src, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out = tmp_path / "out"
        assert main([str(src), "-o", str(out), "-q", "--all"]) == 0
        done = subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=src, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        for name in ("main.py", "b.py"):  # the patched SRC is the built tree
            assert (src / name).read_bytes() == (out / name).read_bytes(), name


# -- M6: --main under --all ---------------------------------------------------------------------


def test_all_checks_main(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("def f():\n    return 1\n")
    assert main([str(src), "--all", "--main", "nope.py", "-o", str(out)]) == 2
    assert "--main nope.py: no such file under" in capsys.readouterr().err
    assert not out.exists()


def test_all_instruments_an_entry_without_py_named_with_main(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("def f():\n    return 1\n")
    (src / "train").write_text("#!/usr/bin/env python3\ndef main():\n    for i in range(2):\n        pass\n\n\nmain()\n")
    os.chmod(src / "train", 0o755)
    assert main([str(src), "--all", "--main", "train", "-o", str(out), "-q"]) == 0
    text = (out / "train").read_text()
    assert text.startswith("#!/usr/bin/env python3\n") and HEADER in text
    assert os.access(out / "train", os.X_OK) and "__sp_define__" in (out / "main.py").read_text()
    assert main([str(src), "--all", "--main", "train", "--diff"]) == 0
    assert "+++ b/train" in capsys.readouterr().out


# -- M7: environments inside the project -----------------------------------------------------------


def test_a_conda_environment_in_the_project_is_not_copied(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "env" / "conda-meta").mkdir(parents=True)
    (src / "env" / "conda-meta" / "history").write_text("")
    (src / "env" / "lib" / "python3.11").mkdir(parents=True)
    (src / "env" / "lib" / "python3.11" / "os.py").write_text("def f():\n    return 1\n")
    (src / "main.py").write_text("def main():\n    return 1\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert tree(out) == ["main.py"]


def test_the_stdlib_of_a_python_installation_in_the_project_is_copied_never_instrumented(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "tools" / "python" / "lib" / "python3.12").mkdir(parents=True)  # an installation, no env
    (src / "tools" / "python" / "lib" / "python3.12" / "os.py").write_text("def f():\n    return 1\n")
    (src / "lib" / "util").mkdir(parents=True)  # the project's own lib/ is its own
    (src / "lib" / "util" / "m.py").write_text("def f():\n    return 1\n")
    (src / "main.py").write_text("def main():\n    return 1\n")
    assert main([str(src), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    stdlib = out / "tools" / "python" / "lib" / "python3.12" / "os.py"
    assert stdlib.read_text() == "def f():\n    return 1\n"
    assert HEADER in (out / "lib" / "util" / "m.py").read_text() and HEADER in (out / "main.py").read_text()
