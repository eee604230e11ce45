"""Review 128, the instrumentor's findings. LOW-6: `instrument src/mytrain -o build --main train.py`,
where SRC is itself a package whose entry uses relative imports, built silently a tree that cannot
run (`python build/train.py`: "attempted relative import with no known parent package"). LOW-5: a
file the program wrote both in SRC and in OUT failed every rebuild with no word of why."""

from __future__ import annotations

from pathlib import Path

from instrumentor.cli import main as instrument


def _package(root: Path, relative: bool = True) -> Path:
    src = root / "src" / "mytrain"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "utils.py").write_text("def helper():\n    return 1\n")
    imp = "from .utils import helper" if relative else "import os"
    (src / "train.py").write_text(f"{imp}\n\n\ndef main():\n    return 2\n\n\nmain()\n")
    return src


def test_src_that_is_a_package_with_relative_imports_gets_a_hint(tmp_path, capsys):
    src = _package(tmp_path)
    assert instrument([str(src), "-o", str(tmp_path / "build"), "--main", "train.py", "-q"]) == 0  # as before
    err = capsys.readouterr().err
    assert "instrument: warning: SRC" in err and "is the package mytrain" in err, err
    assert "python -m mytrain.train" in err and "--main mytrain/train.py" in err and "-o OUT/mytrain" in err


def test_no_hint_when_built_into_a_folder_of_the_packages_name_or_without_relative_imports(tmp_path, capsys):
    src = _package(tmp_path)
    assert instrument([str(src), "-o", str(tmp_path / "out" / "mytrain"), "--main", "train.py", "-q"]) == 0
    assert "is the package" not in capsys.readouterr().err
    assert instrument([str(src.parent), "-o", str(tmp_path / "b2"), "--main", "mytrain/train.py", "-q"]) == 0
    assert "is the package" not in capsys.readouterr().err  # the parent: run as -m mytrain.train in b2
    plain = _package(tmp_path / "p", relative=False)
    assert instrument([str(plain), "-o", str(tmp_path / "b3"), "--main", "train.py", "-q"]) == 0
    assert "is the package" not in capsys.readouterr().err


def test_a_data_file_in_the_way_says_it_may_be_a_run_output(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "build"
    (src / "ck").mkdir(parents=True)
    (src / "main.py").write_text("def f():\n    return 1\n\n\nf()\n")
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    (out / "ck").mkdir(exist_ok=True)  # the build made it (an empty folder of SRC)
    (out / "ck" / "epoch0.pt").write_text("written by a run from build/")
    (src / "ck" / "epoch0.pt").write_text("written by a run from src/")
    assert instrument([str(src), "-o", str(out), "-q"]) == 1  # as before: nothing of the user's is replaced
    err = capsys.readouterr().err
    assert "ck/epoch0.pt: cannot write" in err and "in the way" in err
    assert "if the program wrote it there when run from OUT" in err, err
