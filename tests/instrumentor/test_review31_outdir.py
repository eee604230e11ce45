"""Review 31, OUT's record of what builds wrote: files that an earlier scaleprobe's stopped re-run
left off the record are a build's all the same when they are copies of SRC's or instrumented
modules; a copied link that SRC dropped is removed even when dangling; a state.json edited out of
shape anywhere is no state, not a traceback."""
import json
import os
import shutil
from pathlib import Path

import pytest

from instrumentor.cli import main
from test_bad_input import unreadable  # noqa: F401  (fixture)
from test_review29_outdir import IN_THE_WAY, built, written  # noqa: F401  (fixture)


def test_files_an_earlier_version_wrote_without_recording_them_are_replaced(built, capsys):  # noqa: F811
    """The old code recorded what it wrote at the end: a re-run stopped halfway left the files it
    had created off the record, and the new code refused them for good."""
    source, out = built
    (source / "lib").mkdir()
    (source / "lib" / "data.yaml").write_text("k: v\n")
    (source / "lib" / "mod.py").write_text("def g():\n    return 2\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    state_file = out / ".scaleprobe" / "state.json"
    state = json.loads(state_file.read_text())
    state["written"] = ["main.py"]  # as the old code's record before the stopped re-run
    state_file.write_text(json.dumps(state))
    (source / "lib" / "mod.py").write_text("def g():\n    return 3\n")  # and SRC moved on since
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert "return 3" in (out / "lib" / "mod.py").read_text()
    assert sorted(written(out)) == ["lib/data.yaml", "lib/mod.py", "main.py"]
    # a file of the user's there is still refused
    (out / "lib" / "notes.py").write_text("mine\n")
    (source / "lib" / "notes.py").write_text("X = 1\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 1
    assert IN_THE_WAY in capsys.readouterr().err and (out / "lib" / "notes.py").read_text() == "mine\n"


def test_a_dangling_link_src_dropped_is_removed(built, capsys):  # noqa: F811
    source, out = built
    os.symlink("nowhere.txt", source / "link.txt")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert os.path.islink(out / "link.txt")
    (source / "link.txt").unlink()
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0
    assert not os.path.lexists(out / "link.txt")
    (source / "link.txt").write_text("real\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (out / "link.txt").read_text() == "real\n"


@pytest.mark.parametrize("edit", [
    {"files": "x"}, {"files": {"main.py": "bad"}}, {"imports": []}, {"next_id": "x"},
    {"files": {"main.py": {"hash": 1}}}, {"epoch_bodies": 3}, {"imports": {"main.py": ["h", [1], []]}},
    # review 32: values of the wrong type inside the entries
    "region id", {"imports": {"main.py": ["h", [["a", "b", 5]], []]}}, {"epoch_bodies": {"main.py": ["h", 5, "f"]}},
])
def test_a_state_edited_out_of_shape_anywhere_starts_over(built, capsys, edit):  # noqa: F811
    source, out = built
    state_file = out / ".scaleprobe" / "state.json"
    state = json.loads(state_file.read_text())
    if edit == "region id":
        state["files"]["main.py"]["regions"][0]["id"] = "x"
        edit = {}
    state_file.write_text(json.dumps({**state, **edit}))
    (source / "b.py").write_text("def b():\n    return 1\n")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert "__sp_define__" in (out / "main.py").read_text() and "__sp_define__" in (out / "b.py").read_text()
    assert sorted(written(out)) == ["b.py", "main.py"]
    # and the next re-run reuses the state it wrote
    assert main([str(source), "-o", str(out), "--all"]) == 0
    assert "(2 unchanged since the last run)" in capsys.readouterr().out


def test_graph_does_not_call_an_unlistable_own_folder_third_party(tmp_path, capsys, unreadable):  # noqa: F811
    src = tmp_path / "src"
    (src / "private").mkdir(parents=True)
    (src / "private" / "__init__.py").write_text("")
    (src / "main.py").write_text("import private\nimport numpy\n")
    unreadable(src / "private")
    assert main([str(src), "--graph"]) == 1
    printed = capsys.readouterr().out
    assert "third-party modules (1):\n  numpy" in printed and "private/: cannot read" in printed


def test_a_reader_that_goes_away_is_no_error(built):  # noqa: F811
    """`instrument src -o out | head -1` ended in a BrokenPipeError traceback."""
    import subprocess
    import sys

    source, out = built
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "instrumentor.cli", str(source), "-o", str(out), "--all"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    with proc:
        proc.stdout.close()  # before the summary is printed
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err


def test_a_hard_link_in_out_to_src_is_replaced_never_written_through(built, capsys):  # noqa: F811
    """Review 32: OUT/helper.py, a hard link to SRC/helper.py (same bytes, so taken as a build's
    copy), had the instrumented code written into it, and so into the user's source."""
    source, out = built
    (source / "helper.py").write_text("def h():\n    return 1\n")
    (source / "data.txt").write_text("v1\n")
    os.link(source / "helper.py", out / "helper.py")
    os.link(source / "data.txt", out / "data.txt")
    assert main([str(source), "-o", str(out), "-q", "--all"]) == 0, capsys.readouterr().err
    assert (source / "helper.py").read_text() == "def h():\n    return 1\n"
    assert "__sp_define__" in (out / "helper.py").read_text()
    # a copy through a link shares its size and time with SRC's file: it is left as it is
    assert (source / "data.txt").read_text() == "v1\n" == (out / "data.txt").read_text()


def test_graph_keeps_a_third_party_module_named_like_a_nested_unlistable_folder(tmp_path, capsys, unreadable):  # noqa: F811
    src = tmp_path / "src"
    (src / "vendor" / "json5").mkdir(parents=True)
    (src / "main.py").write_text("import json5\n")
    unreadable(src / "vendor" / "json5")
    assert main([str(src), "--graph"]) == 1
    assert "third-party modules (1):\n  json5" in capsys.readouterr().out
