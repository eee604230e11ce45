"""Bad input (review 26): an OUT that holds the user's own files, files and folders that cannot be
read or written, files of another type or gone since the last build, modules named like the
standard library that the runtime imports, and where a file's bad bytes are. Each gets a clear
message naming the file or option; nothing is lost, and what can be built is built."""
import errno
import importlib.util
import os
import pathlib
import re
import shutil
import sys
from pathlib import Path

import pytest

from instr_helpers import REPO, rewrite, run, run_env
from instrumentor import project as project_module
from instrumentor.cli import main
from instrumentor.project import _instrument_file
from instrumentor.shadowing import stdlib_names

MAIN = "import helper\n\n\ndef main():\n    return helper.work(2)\n\n\nmain()\n"
HELPER = "def work(i):\n    return i * 2\n"


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "main.py").write_text(MAIN + "import pkg.tabs\n")
    (root / "helper.py").write_text(HELPER)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "tabs.py").write_text("def f():\n    return 1\n")
    (root / "data.yaml").write_text("a: 1\n")
    (root / "private").mkdir()
    (root / "private" / "notes.txt").write_text("mine\n")
    return root


def denied(path) -> PermissionError:
    return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))


@pytest.fixture()
def unreadable(monkeypatch):
    """unreadable(path, ...): reading (or listing) those paths raises PermissionError, as `chmod 000`
    does for a user other than root. The worker processes are forked: they inherit the patches."""
    paths: set[str] = set()
    read_bytes, copyfile, scandir = pathlib.Path.read_bytes, shutil.copyfile, os.scandir

    def patched_read_bytes(self):
        if str(self) in paths:
            raise denied(self)
        return read_bytes(self)

    def patched_copyfile(source, dest, *args, **kwargs):
        if str(source) in paths:
            raise denied(source)
        return copyfile(source, dest, *args, **kwargs)

    def patched_scandir(path="."):
        if os.fspath(path) in paths:
            raise denied(path)
        return scandir(path)

    monkeypatch.setattr(pathlib.Path, "read_bytes", patched_read_bytes)
    monkeypatch.setattr(shutil, "copyfile", patched_copyfile)
    monkeypatch.setattr(os, "scandir", patched_scandir)
    return lambda *given: paths.update(str(p) for p in given)


def failed_lines(printed: str) -> list[str]:
    return printed.split("files failed:", 1)[1].splitlines()[1:]


# -- #4: an OUT that holds files of its own ---------------------------------------------------------


def test_out_holding_the_users_own_files_is_refused_and_left_alone(tmp_path, capsys):
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "main.py").write_text("# MY ORIGINAL\n")
    (proj / "config.yaml").write_text("v1\n")
    (proj / "src" / "main.py").write_text("def main():\n    return 1\nmain()\n")
    (proj / "src" / "config.yaml").write_text("src\n")
    assert main([str(proj / "src"), "-o", str(proj)]) == 2
    err = capsys.readouterr().err
    assert f"-o {proj}:" in err and "config.yaml, main.py" in err and "no .scaleprobe/" in err
    assert "new or empty directory" in err
    assert (proj / "main.py").read_text() == "# MY ORIGINAL\n" and (proj / "config.yaml").read_text() == "v1\n"
    assert sorted(p.name for p in proj.iterdir()) == ["config.yaml", "main.py", "src"]


def test_out_with_other_files_the_build_does_not_write_is_built_into(src, tmp_path, capsys):
    """Review 28: `instrument src/ -o build/` (the README's line) beside setuptools' `build/lib`, or
    a folder holding a `.gitignore`, was refused."""
    out = tmp_path / "out"
    (out / "lib").mkdir(parents=True)
    (out / "lib" / "mod.py").write_text("x = 1\n")
    (out / ".gitignore").write_text("*\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "lib" / "mod.py").read_text() == "x = 1\n" and (out / ".gitignore").read_text() == "*\n"
    assert (out / "main.py").is_file()


def test_a_rerun_never_removes_what_no_build_wrote(tmp_path, capsys):
    """Review 28: a path of SRC that changed between file and folder removed the user's own folder
    (and file) of that name in OUT."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("def main():\n    return 1\nmain()\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    (out / "logs").mkdir()
    (out / "logs" / "run.log").write_text("mine\n")
    (out / "notes").write_text("mine too\n")
    (src / "logs").write_text("now SRC has a file here\n")
    (src / "notes").mkdir()
    (src / "notes" / "a.txt").write_text("and a folder here\n")
    assert main([str(src), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert "in the way, and not written by a build" in err and "logs" in err and "notes" in err
    assert (out / "logs" / "run.log").read_text() == "mine\n" and (out / "notes").read_text() == "mine too\n"


def test_empty_out_an_earlier_build_and_one_stopped_halfway_are_built_into(src, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert main([str(src), "-o", str(out)]) == 0  # empty
    (out / "scaleprobe-runs").mkdir()  # the user's runs next to the build
    capsys.readouterr()
    assert main([str(src), "-o", str(out)]) == 0  # an earlier build: incremental as before
    assert "(3 unchanged since the last run)" in capsys.readouterr().out
    assert (out / "scaleprobe-runs").is_dir()
    # a build stopped before it wrote its state: `.scaleprobe/` was made before any file
    halfway = tmp_path / "halfway"

    def stop(source, dest):  # Ctrl-C after the first module was written
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shutil, "copymode", stop)
        with pytest.raises(KeyboardInterrupt):
            main([str(src), "-o", str(halfway)])
    assert (halfway / ".scaleprobe").is_dir() and any(halfway.rglob("*.yaml"))
    assert main([str(src), "-o", str(halfway)]) == 0
    assert "__sp_define__" in (halfway / "main.py").read_text()


# -- #5: files and folders that cannot be read, OUT that cannot be written ------------------------------


def test_unreadable_module_data_file_and_folder_are_named_and_the_rest_is_built(src, tmp_path, capsys, unreadable):
    out = tmp_path / "out"
    unreadable(src / "pkg" / "tabs.py", src / "data.yaml", src / "private")
    assert main([str(src), "-o", str(out)]) == 1
    printed = capsys.readouterr().out
    assert sorted(failed_lines(printed)) == [
        "  data.yaml: cannot read: Permission denied",
        "  pkg/tabs.py: cannot read: Permission denied",
        "  private/: cannot read: Permission denied",
    ]
    assert "__sp_define__" in (out / "helper.py").read_text() and "__sp_define__" in (out / "main.py").read_text()
    assert (out / "pkg" / "__init__.py").exists()
    assert not (out / "pkg" / "tabs.py").exists() and not (out / "data.yaml").exists()


def test_a_file_that_becomes_unreadable_keeps_its_earlier_build(src, tmp_path, capsys, unreadable):
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    before = {rel: (out / rel).read_bytes() for rel in ("pkg/tabs.py", "data.yaml", "private/notes.txt")}
    unreadable(src / "pkg" / "tabs.py", src / "data.yaml", src / "private")
    assert main([str(src), "-o", str(out), "-q"]) == 1
    assert "instrument: failed: private/: cannot read: Permission denied" in capsys.readouterr().err
    assert {rel: (out / rel).read_bytes() for rel in before} == before  # nothing removed or lost


# root reads files whatever their mode: as root, a command runs with the capabilities that override
# file modes dropped (as modeler/test_review26_inputs.py does)
SETPRIV = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search",
           "--"]


def without_read_rights(cmd: list[str], unreadable_file: Path) -> list[str]:
    """`cmd` as a user whom chmod 000 keeps from reading; skips where setpriv is missing, or does not
    keep root from reading `unreadable_file` (mode 0)."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: chmod 000 would not keep a file from being read")
    probe = run([*SETPRIV, sys.executable, "-c", "import sys; open(sys.argv[1], 'rb')", str(unreadable_file)])
    if probe.returncode == 0 or "PermissionError" not in probe.stderr:
        pytest.skip(f"setpriv does not drop root's file rights here: {probe.stderr.strip()[-200:]}")
    return [*SETPRIV, *cmd]


def test_unreadable_by_mode(src, tmp_path):
    paths = (src / "pkg" / "tabs.py", src / "data.yaml", src / "private")
    for path in paths:
        path.chmod(0)
    try:
        done = run(without_read_rights([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "out")],
                                       src / "data.yaml"))
    finally:
        for path in paths:
            path.chmod(0o755)
    assert done.returncode == 1, done.stdout + done.stderr
    assert sorted(failed_lines(done.stdout)) == [
        "  data.yaml: cannot read: Permission denied",
        "  pkg/tabs.py: cannot read: Permission denied",
        "  private/: cannot read: Permission denied",
    ]


def test_out_or_its_parent_not_writable_is_a_usage_error(src, tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    mkdir = pathlib.Path.mkdir

    def patched_mkdir(self, *args, **kwargs):
        if self.parent == locked:
            raise denied(self)
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", patched_mkdir)  # nothing can be made in `locked`
    assert main([str(src), "-o", str(locked / "sub")]) == 2
    assert f"instrument: error: -o {locked / 'sub'}: cannot write {locked / 'sub'}: Permission denied" in capsys.readouterr().err
    assert main([str(src), "-o", str(locked)]) == 2
    assert f"instrument: error: -o {locked}: cannot write {locked / '.scaleprobe'}: Permission denied" in capsys.readouterr().err
    assert list(locked.iterdir()) == []


def test_a_file_of_out_that_cannot_be_written_fails_alone(src, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    copyfile = shutil.copyfile

    def patched(source, dest, *args, **kwargs):
        if str(dest) == str(out / "data.yaml") or Path(dest).name.startswith(".data.yaml."):  # or its temporary
            raise denied(dest)
        return copyfile(source, dest, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", patched)
    assert main([str(src), "-o", str(out)]) == 1
    assert failed_lines(capsys.readouterr().out) == [f"  data.yaml: cannot write {out / 'data.yaml'}: Permission denied"]
    assert (out / "private" / "notes.txt").exists()


def test_files_deleted_while_the_build_runs_are_named(src, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    (src / "gone.txt").write_text("x")
    real_run_jobs, real_list = project_module.run_jobs, project_module.list_files

    def listed_then_gone(root, *args):  # listed, deleted before it is read
        files, own = real_list(root, *args)
        (root / "helper.py").unlink()
        return files, own

    def deleting(jobs, workers, *args):  # read and rewritten, deleted before it is copied or written
        results = real_run_jobs(jobs, workers, *args)
        (src / "gone.txt").unlink()
        (src / "pkg" / "tabs.py").unlink()
        return results

    monkeypatch.setattr(project_module, "list_files", listed_then_gone)
    monkeypatch.setattr(project_module, "run_jobs", deleting)
    assert main([str(src), "-o", str(out)]) == 1
    assert sorted(failed_lines(capsys.readouterr().out)) == [
        "  gone.txt: cannot read: No such file or directory",
        "  helper.py: cannot read: No such file or directory",
        "  pkg/tabs.py: cannot read: No such file or directory",
    ]
    assert "__sp_define__" in (out / "main.py").read_text() and (out / "data.yaml").exists()


def test_rerun_replaces_a_file_that_became_a_folder_and_a_folder_that_became_a_file(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "conf").mkdir(parents=True)
    (src / "main.py").write_text("def main():\n    return 1\nmain()\n")
    (src / "conf" / "x.cfg").write_text("a\n")
    (src / "data").write_text("a\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    shutil.rmtree(src / "conf")
    (src / "conf").write_text("now a file\n")
    (src / "data").unlink()
    (src / "data").mkdir()
    (src / "data" / "x.txt").write_text("b\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "conf").is_file() and (out / "conf").read_text() == "now a file\n"
    assert (out / "data").is_dir() and (out / "data" / "x.txt").read_text() == "b\n"
    assert main([str(src), "-o", str(out), "-q"]) == 0  # and so it stays


# -- #6: modules named like the standard-library modules the runtime imports -------------------------------


def test_a_top_level_module_named_like_a_stdlib_module_of_the_runtime_is_warned_about(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "json").mkdir(parents=True)
    (src / "pkg").mkdir()
    (src / "main.py").write_text("import signal\n\n\ndef main():\n    return signal\n\n\nmain()\n")
    (src / "signal.py").write_text("def g():\n    return 1\n")
    (src / "json" / "__init__.py").write_text("")
    (src / "pkg" / "copy.py").write_text("")  # not on sys.path itself: no warning
    (src / "pkg" / "__init__.py").write_text("")
    assert main([str(src), "-o", str(out), "-q"]) == 0  # built all the same
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("instrument: warning:")]
    assert len(warnings) == 2, err
    assert "json/__init__.py: named like the standard-library module 'json'" in warnings[0]
    assert "signal.py: named like the standard-library module 'signal'" in warnings[1]
    assert "scaleprobe's runtime imports" in warnings[1]
    assert "__sp_define__" in (out / "main.py").read_text()


@pytest.mark.parametrize("backend", ["runtime", "nvtx"])
def test_the_stdlib_modules_the_runtime_imports_are_all_known(tmp_path, backend):
    """RUNTIME_STDLIB covers what an instrumented program imports for the runtime on this Python,
    beyond what Python and `site` load at start-up (a module added to the runtime shows up here);
    NVTX_STDLIB the same under the nvtx backend (review 41: numpy, which nvtx imports, was not).
    Checked against the names `shadow_warnings` uses (review 50: under nvtx, the union of both)."""
    if backend == "nvtx" and importlib.util.find_spec("nvtx") is None:
        pytest.skip("the nvtx package is not installed")
    known = stdlib_names(backend)
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("def work(n):\n    for i in range(n):\n        pass\n\n\nwork(3)\n")
    assert main([str(src), "-o", str(out), "-q", "--backend", backend]) == 0
    site_dirs = [p for p in sys.path if p.endswith("site-packages")]  # orjson, where it is installed
    env = {**run_env(tmp_path), "PYTHONPATH": os.pathsep.join([str(REPO), *site_dirs])}
    start = run([sys.executable, "-S", "-X", "importtime", "-c", "pass"], env=env)
    built = run([sys.executable, "-S", "-X", "importtime", "main.py"], cwd=out, env=env)
    assert built.returncode == 0, built.stderr

    def imported(stderr: str) -> set[str]:
        return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*([\w.]+)\s*$", stderr, re.M)}

    by_site = {"os", "stat", "posixpath", "genericpath", "_collections_abc", "_sitebuiltins", "site", "nt", "_winapi"}
    needed = {name for name in imported(built.stderr) - imported(start.stderr) - by_site
              if name in sys.stdlib_module_names and name not in sys.builtin_module_names}
    assert needed, built.stderr  # the measurement saw the runtime's imports at all
    assert needed <= known, sorted(needed - known)


def test_a_module_named_like_what_nvtx_imports_is_warned_about_under_that_backend(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import numbers\n\n\ndef work():\n    return numbers.X\n\n\nwork()\n")
    (src / "numbers.py").write_text("X = 1\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "--backend", "nvtx"]) == 0
    assert "numbers.py: named like the standard-library module 'numbers', which the nvtx package" in capsys.readouterr().err
    assert main([str(src), "-o", str(tmp_path / "out2")]) == 0  # the runtime does not import numbers
    assert "numbers.py: named like" not in capsys.readouterr().err


# -- #23: where the bad bytes are ------------------------------------------------------------------------


def test_a_nul_byte_is_reported_at_its_line():
    result = rewrite("x = 1\ny = 2\nz = '\0'\n", "b.py")
    assert result.status == "failed"
    assert result.error.startswith("b.py:3: "), result.error
    assert "null bytes" in result.error


def test_a_byte_not_in_the_encoding_is_reported_at_its_line(tmp_path):
    for name, data, line in [
        ("tabs.py", b'def f():\n    return "caf\xe9"\n', 2),
        ("bom.py", b'\xef\xbb\xbfx = 1\n\ny = "\xe9"\n', 3),
        ("ascii.py", b"# -*- coding: ascii -*-\nx = 1\ny = '\xff'\n", 3),
        ("comment.py", b"# first\n# caf\xe9\nx = 1\n", 2),  # no coding: tokenize's own error
        ("cookie.py", b"# -*- coding: nosuch -*-\nx = 1\n", 1),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        result = _instrument_file(name, str(path), (0, 10), {}, "runtime")
        assert result.status == "failed", (name, result)
        assert result.error.startswith(f"{name}:{line}: cannot read: "), result.error


def test_the_summary_names_the_line_of_a_bad_byte(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import b\n")
    (src / "b.py").write_bytes(b"x = 1\ny = '\0'\n")
    assert main([str(src), "-o", str(tmp_path / "out")]) == 1
    (line,) = failed_lines(capsys.readouterr().out)
    # 3.11+ raise a SyntaxError for it, 3.10 a ValueError: the line is what matters
    assert line.startswith("  b.py:2: ") and line.endswith("source code string cannot contain null bytes"), line
