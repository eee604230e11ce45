"""Review 34: each file goes into OUT through a temporary beside it (`.<name>.<8>.scaleprobe-tmp`)
renamed over it; a build killed outright (SIGKILL, the OOM killer) left that temporary in OUT for
good. A later build now removes it, when no other build is writing into OUT (those hold OUT's lock,
and their temporaries are live); only names of that exact shape, beside a file builds write, in a
folder of OUT reached without a link. `--graph` and `--diff` write nothing and remove nothing."""
import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from instr_helpers import REPO
from instrumentor import outdir
from instrumentor.cli import main

TMP = re.compile(r"\.(.+)\.[a-z0-9_]{8}\.scaleprobe-tmp")

# a build that stops at its first file, after the file's temporary is written: killed outright
# (kill), or waiting until the file `go` is there (wait), having made the file `ready`
_STOPPING_BUILD = """
import os, signal, sys, time
from pathlib import Path
import instrumentor.project as project
from instrumentor.cli import main
how, flag_dir = sys.argv[1], Path(sys.argv[2])
real = project.replace_file
def stopping(dest, write):
    def stopped(tmp):
        write(tmp)
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        (flag_dir / "ready").write_text(tmp.name)
        while not (flag_dir / "go").exists():
            time.sleep(0.02)
    real(dest, stopped)
project.replace_file = stopping
sys.exit(main(sys.argv[3:]))
"""


def stopping_build(how: str, flags: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", _STOPPING_BUILD, how, str(flags), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def temporaries(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if TMP.fullmatch(p.name))


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    source, out = tmp_path / "src", tmp_path / "out"
    (source / "pkg").mkdir(parents=True)
    (source / "main.py").write_text("import pkg.mod\n\n\ndef main():\n    return pkg.mod.g()\n\n\nmain()\n")
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pkg" / "mod.py").write_text("def g():\n    return 2\n")
    (source / "pkg" / "data.yaml").write_text("k: v\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    return source, out


def killed_rerun(source: Path, out: Path, tmp_path: Path) -> str:
    """A re-run after SRC's pkg/mod.py changed, killed with SIGKILL as it writes that file: the
    temporary it leaves in OUT."""
    (source / "pkg" / "mod.py").write_text("def g():\n    return 3\n")
    proc = stopping_build("kill", tmp_path, str(source), "-o", str(out), "-q", "--all")
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    left = temporaries(out)
    assert len(left) == 1 and left[0].startswith("pkg/.mod.py."), left
    return left[0]


def test_a_temporary_a_killed_build_left_is_removed_by_the_next_build(built, tmp_path):
    source, out = built
    left = killed_rerun(source, out, tmp_path)
    assert "return 2" in (out / "pkg" / "mod.py").read_text()  # the rename never happened
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert temporaries(out) == [] and not (out / left).exists()
    assert "return 3" in (out / "pkg" / "mod.py").read_text()


def test_only_names_of_the_temporaries_shape_beside_a_file_of_the_build_are_removed(built, tmp_path):
    source, out = built
    stray = [f"pkg/.mod.py.{'a' * 8}.scaleprobe-tmp", ".main.py.k3x9q0_z.scaleprobe-tmp",
             "pkg/.data.yaml.0123abcd.scaleprobe-tmp", "pkg/.x.y.py.abcdefgh.scaleprobe-tmp"]
    (source / "pkg" / "x.y.py").write_text("Y = 1\n")  # a dotted name: still its own temporaries
    kept = [
        ".main.py.scaleprobe-tmp",  # no random part
        f".main.py.{'A' * 8}.scaleprobe-tmp",  # not mkstemp's characters
        ".main.py.abcdefg.scaleprobe-tmp",  # 7 characters
        ".main.py.abcdefghi.scaleprobe-tmp",  # 9 characters
        "main.py.abcdefgh.scaleprobe-tmp",  # no leading dot
        ".notes.txt.abcdefgh.scaleprobe-tmp",  # beside no file a build writes
        f"pkg/.mod.py.{'b' * 8}.scaleprobe-tmp.bak",
        f"mine/.main.py.{'c' * 8}.scaleprobe-tmp",  # a folder of the user's
    ]
    for rel in stray + kept:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x\n")
    (out / f".main.py.{'d' * 8}.scaleprobe-tmp").mkdir()  # a folder of that name
    (out / f".main.py.{'d' * 8}.scaleprobe-tmp" / "inner").write_text("mine\n")
    os.symlink(out / "mine" / f".main.py.{'c' * 8}.scaleprobe-tmp", out / f".main.py.{'e' * 8}.scaleprobe-tmp")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    for rel in stray:
        assert not os.path.lexists(out / rel), rel
    for rel in kept:
        assert (out / rel).read_text() == "x\n", rel
    assert (out / f".main.py.{'d' * 8}.scaleprobe-tmp" / "inner").read_text() == "mine\n"
    assert os.path.islink(out / f".main.py.{'e' * 8}.scaleprobe-tmp")


def test_nothing_is_removed_through_a_folder_that_is_a_link(built, tmp_path):
    source, out = built
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    theirs = elsewhere / f".mod.py.{'a' * 8}.scaleprobe-tmp"
    theirs.write_text("not ours\n")
    for p in (out / "pkg").iterdir():
        p.unlink()
    (out / "pkg").rmdir()
    os.symlink(elsewhere, out / "pkg")
    (out / f".main.py.{'a' * 8}.scaleprobe-tmp").write_text("x\n")
    main([str(source), "-o", str(out), "-q", "--all"])  # pkg/ is in the way: those files fail
    assert theirs.read_text() == "not ours\n"
    assert not (out / f".main.py.{'a' * 8}.scaleprobe-tmp").exists()


@pytest.mark.parametrize("mode", ["--graph", "--diff"])
def test_graph_and_diff_remove_nothing(built, tmp_path, mode, capsys):
    source, out = built
    left = killed_rerun(source, out, tmp_path)
    assert main([str(source), "-o", str(out), mode, "--all"]) == 0
    assert temporaries(out) == [left]
    capsys.readouterr()
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0  # a build does
    assert temporaries(out) == []


def test_a_temporary_of_a_build_still_writing_stays(built, tmp_path):
    """Two builds into one OUT at once: the second cannot tell the other's live temporary from a
    dead one, so it removes none; the first build then finishes, and the next build alone in OUT
    removes what a killed build left."""
    source, out = built
    dead = out / "pkg" / f".mod.py.{'z' * 8}.scaleprobe-tmp"
    (source / "pkg" / "mod.py").write_text("def g():\n    return 4\n")
    flags = tmp_path / "flags"
    flags.mkdir()
    other = stopping_build("wait", flags, str(source), "-o", str(out), "-q", "--all")
    try:
        deadline = time.monotonic() + 60
        while not (flags / "ready").exists():
            assert other.poll() is None and time.monotonic() < deadline, other.communicate()
            time.sleep(0.02)
        live = out / "pkg" / (flags / "ready").read_text()
        assert live.exists() and live != dead
        dead.write_text("from a killed build\n")  # (the other build, alone at its start, removed those then)
        assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
        assert live.exists() and dead.exists()
    finally:
        (flags / "go").write_text("")
        _, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert not live.exists() and "return 4" in (out / "pkg" / "mod.py").read_text()
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert temporaries(out) == []


def test_where_out_cannot_be_locked_only_old_temporaries_are_removed(built, monkeypatch):
    fcntl = pytest.importorskip("fcntl")
    source, out = built

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    stray = out / "pkg" / f".mod.py.{'q' * 8}.scaleprobe-tmp"
    stray.write_text("x\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert stray.exists()  # just changed: it may be another build's, still writing
    monkeypatch.setattr(outdir, "_STALE_AFTER", -3600.0, raising=False)  # as if two hours later
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert not stray.exists()


def test_a_build_writes_holding_outs_lock_shared(built):
    """Review 35: while it writes, a build holds OUT's lock shared, so that another build can write
    beside it (shared too) but none takes it for an OUT no build is writing to (exclusive)."""
    import fcntl

    _, out = built
    lock = out / ".scaleprobe" / outdir.LOCK_NAME
    with outdir.writing(out, ["main.py"]):
        fd = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # would raise if the build kept it exclusive
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the build is done: free
    finally:
        os.close(fd)
