"""Re-runs that must never write outside OUT or keep a stale copy, and line counting that matches
Python's own where a file holds form feeds."""

import os
from pathlib import Path

from instr_helpers import rewrite
from instrumentor.cli import main


def test_a_rerun_never_writes_through_a_symlink_into_the_users_files(tmp_path):
    src, out, shared = tmp_path / "src", tmp_path / "out", tmp_path / "shared"
    src.mkdir(), shared.mkdir()
    (shared / "lib.py").write_text("def s():\n    return 1\n")
    (shared / "conf.py").write_text("SHARED = 'original'\n")
    (src / "lib.py").symlink_to(shared / "lib.py")
    (src / "conf.py").symlink_to(shared / "conf.py")
    (src / "main.py").write_text("print('hi')\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "lib.py").is_symlink()  # not reached: copied as the link it is
    # lib.py is reached now, and conf.py becomes a file of the project's own
    (src / "main.py").write_text("import lib\nprint(lib.s())\n")
    (src / "conf.py").unlink()
    (src / "conf.py").write_text("SHARED = 'local'\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (shared / "lib.py").read_text() == "def s():\n    return 1\n"
    assert (shared / "conf.py").read_text() == "SHARED = 'original'\n"
    assert not (out / "lib.py").is_symlink() and "__sp_enter__" in (out / "lib.py").read_text()
    assert not (out / "conf.py").is_symlink() and (out / "conf.py").read_text() == "SHARED = 'local'\n"


def test_a_file_rewritten_within_the_same_second_is_copied_again(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("print(open('cfg.json').read())\n")
    cfg = src / "cfg.json"
    base = 1_700_000_000 * 10**9 + 100
    cfg.write_text('{"lr": 1}')
    os.utime(cfg, ns=(base, base))
    assert main([str(src), "-o", str(out), "-q"]) == 0
    cfg.write_text('{"lr": 2}')  # same size, same whole second
    os.utime(cfg, ns=(base + 500, base + 500))
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "cfg.json").read_text() == '{"lr": 2}'


def test_form_feeds_do_not_shift_the_lines_the_rewriter_reads():
    source = "s = 1\n\x0c\n\x0c\n\x0c\ndef pad():\n    return 1\n\n\ndef gen():\n    yield 1\n"
    result = rewrite(source)
    assert [(r.kind, r.name, r.line) for r in result.regions] == [("function", "pad", 5), ("generator", "gen", 9)]
    loop = rewrite("\x0c\ndef f(it):\n    for b in it:  # scaleprobe: off\n        pass\n")
    assert [r.kind for r in loop.regions] == ["function"]  # the marker is read on the loop's own line


def test_code_that_would_not_compile_instrumented_is_left_as_it_is_and_reported(tmp_path, capsys):
    # eleven nested loops: fine for Python, but with a `try` per loop and one for the function the
    # instrumented function passes CPython's limit of 20 statically nested blocks (ten pass it
    # before Python 3.13 only: 3.13 compiles the instrumented ten-loop function)
    lines, indent = ["def deep():", "    n = 0"], "    "
    for k in range(11):
        lines.append(f"{indent}for i{k} in range(2):")
        indent += "    "
    source = "\n".join(lines + [indent + "n += 1", "    return n", "print(deep())"]) + "\n"
    result = rewrite(source)
    assert result.status == "failed"
    assert result.error == "mod.py:12: the instrumented code does not compile (too many statically nested blocks); left as it is"
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(source)
    assert main([str(src), "-o", str(out)]) == 1
    assert (out / "main.py").read_text() == source
    assert "files failed: 1" in capsys.readouterr().out


def test_out_that_is_a_file_dangling_links_and_pipes_are_handled_cleanly(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("print(1)\n")
    (tmp_path / "afile").write_text("")
    assert main([str(src), "-o", str(tmp_path / "afile")]) == 2
    assert f"-o {tmp_path / 'afile'}: exists and is not a directory" in capsys.readouterr().err
    (src / "broken.py").symlink_to(tmp_path / "nonexistent.py")
    os.mkfifo(src / "pipe")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--all", "-q"]) == 0
    assert os.readlink(out / "broken.py") == str(tmp_path / "nonexistent.py")  # copied as the link it is
    assert not (out / "pipe").exists()  # never opened: reading a pipe would block
