"""Review 31 #7: on a file system that ignores case (macOS and Windows by default), SRC renaming
`Model.py` to `model.py` made the next re-run fail ("in the way, and not written by a build"),
or, where the file passed as a build's, lose it: the new file went into the old name, which the
build then removed as stale. The earlier build's file is now known as the build's under its new
case, and OUT ends up with SRC's names.

This machine's file system minds case: `case_blind` makes every look-up under OUT ignore case
(and keep the case a name was made with), as those file systems do; the build runs unchanged."""
import builtins
import io
import json
import os
import sys
from pathlib import Path

import pytest

from instrumentor.cli import main

IN_THE_WAY = "in the way, and not written by a build: move it"


@pytest.fixture()
def case_blind(monkeypatch):
    """case_blind(root): from then on, paths under `root` are looked up ignoring case."""
    if sys.version_info < (3, 11):
        # pathlib on 3.10 calls the os functions it bound at import, which the simulation cannot patch
        pytest.skip("the case-insensitive file system is simulated by patching os, which pathlib on 3.10 bypasses")
    roots: list[str] = []
    real = {name: getattr(os, name) for name in (
        "stat", "lstat", "open", "unlink", "remove", "rename", "replace", "mkdir", "rmdir", "listdir",
        "scandir", "readlink", "symlink", "utime", "chmod", "access")}
    real_open, real_io_open = builtins.open, io.open

    def on_disk(path):
        """`path` with each name under a root that is there under another case as it is there."""
        if isinstance(path, int):
            return path
        text = os.fspath(path)
        if not isinstance(text, str):
            return path
        text = os.path.abspath(text)
        root = next((r for r in roots if text.startswith(r + os.sep)), None)
        if root is None:
            return path
        now = root
        rest = text[len(root) + 1:].split(os.sep)
        for i, part in enumerate(rest):
            exact = os.path.join(now, part)
            try:
                real["lstat"](exact)
                now = exact
                continue
            except OSError:
                pass
            try:
                names = real["listdir"](now)
            except OSError:
                names = []
            match = [n for n in names if n.casefold() == part.casefold()]
            if not match:
                return os.path.join(now, *rest[i:])
            now = os.path.join(now, match[0])
        return now

    def one(name):
        def patched(path, *args, **kwargs):
            return real[name](on_disk(path), *args, **kwargs)
        return patched

    def two(name):
        def patched(src, dst, *args, **kwargs):
            src2, dst2 = on_disk(src), on_disk(dst)
            if src2 == dst2 and os.fspath(src) != os.fspath(dst):
                return real[name](src2, dst, *args, **kwargs)  # a change of case only: the name changes
            return real[name](src2, dst2, *args, **kwargs)  # onto a name there under another case: it stays
        return patched

    def start(root: Path) -> None:
        roots.append(str(root.resolve()))
        for name in real:
            if name in ("rename", "replace"):
                monkeypatch.setattr(os, name, two(name))
            elif name == "symlink":
                monkeypatch.setattr(os, name, lambda target, link, *a, **k: real["symlink"](target, on_disk(link), *a, **k))
            else:
                monkeypatch.setattr(os, name, one(name))
        monkeypatch.setattr(builtins, "open", lambda file, *a, **k: real_open(on_disk(file), *a, **k))
        monkeypatch.setattr(io, "open", lambda file, *a, **k: real_io_open(on_disk(file), *a, **k))

    return start


def names(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n != ".scaleprobe")


def written(out: Path) -> list[str]:
    return json.loads((out / ".scaleprobe" / "state.json").read_text())["written"]


def build(source: Path, out: Path) -> int:
    return main([str(source), "-o", str(out), "-q", "--all"])


@pytest.fixture()
def project(tmp_path: Path, case_blind) -> tuple[Path, Path]:
    source, out = tmp_path / "src", tmp_path / "out"
    (source / "Pkg").mkdir(parents=True)
    (source / "main.py").write_text("import Model\nimport Pkg.Inner\n\n\ndef main():\n    return Model.f()\n\n\nmain()\n")
    (source / "Model.py").write_text("def f():\n    return 1\n")
    (source / "Pkg" / "__init__.py").write_text("")
    (source / "Pkg" / "Inner.py").write_text("def g():\n    return 2\n")
    (source / "Notes.txt").write_text("notes\n")
    (source / "Table.yaml").write_text("a: 1\n")
    out.mkdir()
    case_blind(out)
    assert build(source, out) == 0
    assert (out / "model.py").exists() and (out / "MODEL.PY").exists()  # the simulation at work
    assert names(out) == ["Model.py", "Notes.txt", "Pkg", "Table.yaml", "main.py"]
    return source, out


def test_a_module_renamed_only_in_case_is_rebuilt_under_its_new_name(project, capsys):
    source, out = project
    (source / "Model.py").rename(source / "model.py")
    (source / "main.py").write_text((source / "main.py").read_text().replace("Model", "model"))
    capsys.readouterr()
    assert build(source, out) == 0, capsys.readouterr().err
    assert "model.py" in names(out) and "Model.py" not in names(out)
    assert "__sp_enter__" in (out / "model.py").read_text() and "return 1" in (out / "model.py").read_text()
    assert "model.py" in written(out) and "Model.py" not in written(out)
    assert build(source, out) == 0 and "model.py" in names(out)


def test_a_copied_file_renamed_only_in_case_stays_in_out(project, capsys):
    """The same bytes and time: the old code took OUT's file for the copy, then removed it as stale."""
    source, out = project
    (source / "Notes.txt").rename(source / "notes.txt")
    assert build(source, out) == 0, capsys.readouterr().err
    assert "notes.txt" in names(out) and "Notes.txt" not in names(out)
    assert (out / "notes.txt").read_text() == "notes\n"
    assert build(source, out) == 0 and (out / "notes.txt").read_text() == "notes\n"


def test_a_file_renamed_only_in_case_and_changed_is_no_longer_in_the_way(project, capsys):
    """Not a copy of SRC's file any more and no module: the old code refused it, once. A file or
    folder of the user's under another case is not the build's all the same."""
    source, out = project
    (source / "Table.yaml").rename(source / "table.yaml")
    (source / "table.yaml").write_text("a: 2\n")
    capsys.readouterr()
    assert build(source, out) == 0, capsys.readouterr().err
    assert "table.yaml" in names(out) and "Table.yaml" not in names(out)
    assert (out / "table.yaml").read_text() == "a: 2\n"
    assert sorted(written(out)) == ["Model.py", "Notes.txt", "Pkg/Inner.py", "Pkg/__init__.py", "main.py", "table.yaml"]
    # a file of the user's under another case is still in the way
    (out / "Data.txt").write_text("mine\n")
    (source / "data.txt").write_text("theirs\n")
    capsys.readouterr()
    assert build(source, out) == 1
    assert IN_THE_WAY in capsys.readouterr().err
    assert (out / "Data.txt").read_text() == "mine\n" and "Data.txt" in names(out)
    # nor is a folder of the user's renamed
    (source / "data.txt").unlink()
    (out / "Mine").mkdir()
    (out / "Mine" / "own.txt").write_text("mine\n")
    (source / "mine").mkdir()
    (source / "mine" / "new.txt").write_text("new\n")
    assert build(source, out) == 0, capsys.readouterr().err
    assert "Mine" in names(out) and (out / "Mine" / "own.txt").read_text() == "mine\n"
    assert (out / "mine" / "new.txt").read_text() == "new\n"


def test_a_package_renamed_only_in_case_is_rebuilt_under_its_new_name(project, capsys):
    """Python imports by the exact name on such a file system: OUT's folder takes SRC's case."""
    source, out = project
    (source / "Pkg").rename(source / "pkg")
    (source / "pkg" / "Inner.py").rename(source / "pkg" / "inner.py")
    (source / "main.py").write_text((source / "main.py").read_text().replace("Pkg.Inner", "pkg.inner"))
    assert build(source, out) == 0, capsys.readouterr().err
    assert "pkg" in names(out) and "Pkg" not in names(out)
    assert names(out / "pkg") == ["__init__.py", "inner.py"]
    assert "return 2" in (out / "pkg" / "inner.py").read_text()
    assert build(source, out) == 0 and names(out / "pkg") == ["__init__.py", "inner.py"]
