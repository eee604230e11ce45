"""Review 29: a re-run of `instrument` wrote over a file of the user's in OUT (one no build wrote)
when SRC gained a file of that name, module or data file alike, and said "files failed: 0"; and
`--graph` said nothing about the files and folders it could not read, and exited 0."""
import json
import shutil
from pathlib import Path

import pytest

from instrumentor.cli import main
from instrumentor.fileerrors import RUN_OUTPUT_HINT
from test_bad_input import failed_lines, src, unreadable  # noqa: F401  (fixtures)

IN_THE_WAY = "in the way, and not written by a build: move it"


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    source, out = tmp_path / "t3", tmp_path / "t3b"
    source.mkdir()
    (source / "main.py").write_text("def main():\n    return 1\nmain()\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    return source, out


def written(out: Path) -> list[str]:
    return json.loads((out / ".scaleprobe" / "state.json").read_text())["written"]


def test_a_rerun_never_writes_over_a_file_of_the_users_whose_name_src_took(built, capsys):
    source, out = built
    (out / "extra.py").write_text("user extra\n")  # copied unchanged by the build (nothing to time)
    (out / "cfg.yaml").write_text("user cfg\n")
    (out / "job.py").write_text("user job\n")
    (source / "extra.py").write_text("X=1\n")
    (source / "cfg.yaml").write_text("src cfg\n")
    (source / "job.py").write_text("def job():\n    return 2\n")  # instrumented
    (source / "new.yaml").write_text("new\n")  # nothing of the user's there: written
    (source / "main.py").write_text("def main():\n    return 3\nmain()\n")
    capsys.readouterr()
    assert main([str(source), "-o", str(out), "--all"]) == 1
    assert sorted(failed_lines(capsys.readouterr().out)) == [
        f"  {rel}: cannot write {out / rel}: {IN_THE_WAY}" + (RUN_OUTPUT_HINT if rel == "cfg.yaml" else "")
        for rel in ("cfg.yaml", "extra.py", "job.py")  # review 128 LOW-5: a data file may be a run's output
    ]
    assert (out / "extra.py").read_text() == "user extra\n" and (out / "cfg.yaml").read_text() == "user cfg\n"
    assert (out / "job.py").read_text() == "user job\n"
    assert (out / "new.yaml").read_text() == "new\n" and "return 3" in (out / "main.py").read_text()
    assert sorted(written(out)) == ["main.py", "new.yaml"]  # a file that failed is not taken on the record
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 1  # and so it stays
    assert "instrument: failed: extra.py: cannot write" in capsys.readouterr().err
    assert (out / "extra.py").read_text() == "user extra\n"
    for rel in ("extra.py", "cfg.yaml", "job.py"):  # moved away: built as any file
        (out / rel).unlink()
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert (out / "cfg.yaml").read_text() == "src cfg\n" and "__sp_define__" in (out / "job.py").read_text()


def test_a_link_of_the_users_is_in_the_way_too(built, capsys):
    source, out = built
    mine = out.parent / "mine.txt"
    mine.write_text("mine\n")
    (out / "data.txt").symlink_to(mine)
    (source / "data.txt").write_text("src\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 1
    assert f"data.txt: cannot write {out / 'data.txt'}: {IN_THE_WAY}" in capsys.readouterr().err
    assert (out / "data.txt").is_symlink() and mine.read_text() == "mine\n"


def test_a_rerun_replaces_what_a_build_wrote(built, capsys):
    source, out = built
    (source / "cfg.yaml").write_text("v1\n")
    (source / "extra.py").write_text("X=1\n")
    (source / "link.txt").symlink_to("cfg.yaml")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    (source / "cfg.yaml").write_text("v2, longer\n")
    (source / "extra.py").write_text("def g():\n    return 2\n")  # copied before, instrumented now
    (source / "link.txt").unlink()
    (source / "link.txt").write_text("a file now\n")
    (out / "main.py").write_text("# edited in OUT: still the build's file\n")
    (source / "main.py").write_text("def main():\n    return 4\nmain()\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "cfg.yaml").read_text() == "v2, longer\n" and "__sp_define__" in (out / "extra.py").read_text()
    assert not (out / "link.txt").is_symlink() and (out / "link.txt").read_text() == "a file now\n"
    assert "return 4" in (out / "main.py").read_text()


def test_a_rerun_stopped_halfway_is_continued(built, capsys):
    """A build puts the files it will create on OUT's record before it writes any: a re-run after
    one stopped halfway replaces them (they are no file of the user's)."""
    source, out = built
    (source / "a.yaml").write_text("a\n")
    (source / "b.py").write_text("def b():\n    return 1\n")
    (source / "c.yaml").write_text("c\n")

    def stop(source, dest):  # Ctrl-C after b.py was written (a.yaml is copied before it)
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shutil, "copymode", stop)
        with pytest.raises(KeyboardInterrupt):
            main([str(source), "-o", str(out), "-q", "--all"])
    # b.py is written to a temporary file renamed over it: stopped in between, nothing is left of it
    assert (out / "a.yaml").exists() and not (out / "b.py").exists() and not (out / "c.yaml").exists()
    assert not list(out.glob(".*.scaleprobe-tmp"))
    (source / "a.yaml").write_text("a, changed\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "a.yaml").read_text() == "a, changed\n" and (out / "c.yaml").read_text() == "c\n"
    assert "__sp_define__" in (out / "b.py").read_text()
    assert sorted(written(out)) == ["a.yaml", "b.py", "c.yaml", "main.py"]


def test_an_out_with_no_record_of_what_was_written_is_continued_as_before(built, capsys):
    """`.scaleprobe/` without its state (an earlier version's build stopped before it wrote any):
    the files at the build's names are replaced, as before."""
    source, out = built
    (source / "cfg.yaml").write_text("v1\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    (out / ".scaleprobe" / "state.json").unlink()
    (source / "cfg.yaml").write_text("v2, longer\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "cfg.yaml").read_text() == "v2, longer\n" and "__sp_define__" in (out / "main.py").read_text()
    assert sorted(written(out)) == ["cfg.yaml", "main.py"]  # and the record is back


@pytest.mark.parametrize("state", ['[1, 2]', '"text"', '{"version": 1, "written": "main.py"}',
                                   '{"version": 1, "written": [1, 2]}', '{"version": 1, "written": ["../x.py"]}'])
def test_a_state_edited_out_of_shape_is_no_record(built, capsys, state):
    """A `state.json` that is JSON but not the build's object (edited by hand) crashed the build; a
    record naming a file outside OUT is none either (nothing outside OUT is ever removed)."""
    source, out = built
    outside = out.parent / "x.py"
    outside.write_text("mine\n")
    (out / ".scaleprobe" / "state.json").write_text(state)
    (source / "cfg.yaml").write_text("v2\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "cfg.yaml").read_text() == "v2\n" and "__sp_define__" in (out / "main.py").read_text()
    assert sorted(written(out)) == ["cfg.yaml", "main.py"] and outside.read_text() == "mine\n"


# -- --graph and what it could not read ----------------------------------------------------------


def test_graph_names_unreadable_files_and_folders_as_the_build_does(src, tmp_path, capsys, unreadable):  # noqa: F811
    unreadable(src / "pkg" / "tabs.py", src / "private")
    assert main([str(src), "-o", str(tmp_path / "s1d"), "--graph"]) == 1
    printed = capsys.readouterr().out
    assert "own modules reached (4):" in printed and "  pkg/tabs.py" in printed  # the graph, as before
    assert sorted(failed_lines(printed)) == [
        "  pkg/tabs.py: cannot read: Permission denied",
        "  private/: cannot read: Permission denied",
    ]
    assert not (tmp_path / "s1d").exists()  # --graph writes nothing
    assert main([str(src), "--graph", "-q"]) == 1
    err = capsys.readouterr().err
    assert "instrument: failed: pkg/tabs.py: cannot read: Permission denied" in err
    assert "instrument: failed: private/: cannot read: Permission denied" in err
    assert main([str(src), "--graph", "--keep-going"]) == 0
    assert len(failed_lines(capsys.readouterr().out)) == 2
    assert main([str(src), "-o", str(tmp_path / "out")]) == 1  # the build says the same of them
    assert sorted(failed_lines(capsys.readouterr().out)) == [
        "  pkg/tabs.py: cannot read: Permission denied",
        "  private/: cannot read: Permission denied",
    ]


def test_graph_of_a_readable_project_prints_the_graph_alone(src, capsys):  # noqa: F811
    assert main([str(src), "--graph"]) == 0
    captured = capsys.readouterr()
    assert "files failed" not in captured.out and captured.err == ""
    assert captured.out.startswith("own modules reached (4):")


def test_a_file_partly_written_by_a_failed_build_stays_the_builds(built, capsys, monkeypatch):
    source, out = built
    (source / "big.bin").write_bytes(b"x" * 1000)
    copyfile = shutil.copyfile

    def disk_full(source, dest, *args, **kwargs):
        Path(dest).write_bytes(b"x" * 10)
        raise OSError(28, "No space left on device", str(dest))

    monkeypatch.setattr(shutil, "copyfile", disk_full)
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 1
    assert f"big.bin: cannot write {out / 'big.bin'}: No space left on device" in capsys.readouterr().err
    monkeypatch.setattr(shutil, "copyfile", copyfile)
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "big.bin").read_bytes() == b"x" * 1000
