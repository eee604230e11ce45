"""Review 82, the `instrument` command against docs/instrument.md: a `runtime` module beside an entry
in a subfolder was neither refused nor warned of (F1); a symlinked entry ran other modules from
OUT than from SRC (F2); numba's decorators imported by name (`from numba import vectorize`) got
probes (F3); a user's empty folder where SRC now has a file was removed (F4); an instrumented
module edited in OUT to the same size was kept (F5); `--diff`'s summary said `files copied
unchanged: 0` and left out the build's warnings (F6); a missing SRC was "not a directory" (F7)."""
import json
import os
import sys
from pathlib import Path

import pytest

from instr_helpers import REPO, rewrite, run, run_env
from instrumentor.cli import main

HEADER = "from runtime.probe import "


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def python(script: str, cwd: Path, tmp_path: Path):
    return run([sys.executable, script], cwd=cwd, env=run_env(tmp_path), timeout=60)


# -- F1: a `runtime` module beside an entry -------------------------------------------------------


@pytest.mark.parametrize("module", ["scripts/runtime.py", "scripts/runtime/__init__.py"])
def test_runtime_module_beside_an_entry_in_a_subfolder_is_refused(tmp_path, capsys, module):
    src = write(tmp_path / "src", {
        "scripts/main.py": "import runtime\n\n\ndef f():\n    return runtime.r()\n\n\nprint(f())\n",
        module: "def r():\n    return 1\n",
    })
    assert main([str(src), "-o", str(tmp_path / "out"), "--main", "scripts/main.py"]) == 2
    err = capsys.readouterr().err
    assert "its own top-level module 'runtime'" in err and module in err, err  # before: exit 0, no word
    assert not (tmp_path / "out").exists()


def test_runtime_module_beside_an_entry_under_nvtx_gets_no_runtime_lookup(tmp_path):
    """As for SRC's top-level `runtime`: built, but the modules never look `runtime` up (they would
    find, and import, the project's own)."""
    src = write(tmp_path / "src", {
        "scripts/main.py": "import runtime\n\n\ndef f():\n    return runtime.r()\n",
        "scripts/runtime.py": "def r():\n    return 1\n",
    })
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--main", "scripts/main.py", "--backend", "nvtx", "-q"]) == 0
    code = (out / "scripts" / "main.py").read_text()
    assert code.startswith("import nvtx as __sp_nvtx__")
    assert 'find_spec("runtime")' not in code


def test_runtime_module_that_is_no_entrys_neighbour_is_built(tmp_path):
    src = write(tmp_path / "src", {
        "main.py": "from lib import runtime\n\n\ndef f():\n    return runtime.r()\n",
        "lib/__init__.py": "", "lib/runtime.py": "def r():\n    return 1\n",
    })
    assert main([str(src), "-o", str(tmp_path / "out"), "-q"]) == 0


# -- F2: a symlinked entry ------------------------------------------------------------------------


LINKED = {
    "scripts/train.py": "import config\n\n\ndef show():\n    print(config.NAME)\n\n\nshow()\n",
    "scripts/config.py": "NAME = 'scripts/config.py'\n\n\ndef c():\n    return 1\n",
    "config.py": "NAME = 'top config.py'\n",
}


def test_symlinked_entry_runs_the_same_modules_from_out(tmp_path, capsys):
    src = write(tmp_path / "src", LINKED)
    (src / "main.py").symlink_to("scripts/train.py")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert os.path.islink(out / "main.py") and os.readlink(out / "main.py") == "scripts/train.py"
    assert (out / "scripts" / "train.py").read_text().startswith(HEADER)  # the target is the entry built
    assert (out / "scripts" / "config.py").read_text().startswith(HEADER)  # the module it imports
    assert not (out / "config.py").read_text().startswith(HEADER)
    plain, built = python("main.py", src, tmp_path), python("main.py", out, tmp_path)
    assert plain.stdout == "scripts/config.py\n"
    assert (built.returncode, built.stdout) == (0, plain.stdout), built.stderr  # before: "top config.py"


def test_symlinked_entry_graph_and_all(tmp_path, capsys):
    src = write(tmp_path / "src", LINKED)
    (src / "main.py").symlink_to("scripts/train.py")
    assert main([str(src), "--graph"]) == 0
    graph = capsys.readouterr().out
    reached = graph.split("own modules not reached")[0]
    assert "scripts/config.py" in reached and "scripts/train.py" in reached and "  config.py" not in reached
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--all", "-q"]) == 0  # --all: the link stays a link too
    assert os.readlink(out / "main.py") == "scripts/train.py"
    assert python("main.py", out, tmp_path).stdout == "scripts/config.py\n"


def test_symlinked_entry_with_an_absolute_target_in_src_links_to_the_built_target(tmp_path):
    src = write(tmp_path / "src", LINKED)
    (src / "main.py").symlink_to(src / "scripts" / "train.py")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert os.readlink(out / "main.py") == "scripts/train.py"  # not SRC's own file, uninstrumented
    assert python("main.py", out, tmp_path).stdout == "scripts/config.py\n"


def test_symlinked_entry_to_a_file_in_a_package_runs_as_the_script_it_is(tmp_path):
    """`python main.py` runs pkg/train.py as a script, with pkg/ first on sys.path (no `python -m`)."""
    src = write(tmp_path / "src", {
        "pkg/__init__.py": "",
        "pkg/train.py": "import util\n\n\ndef go():\n    print(util.NAME)\n\n\ngo()\n",
        "pkg/util.py": "NAME = 'pkg/util.py'\n\n\ndef u():\n    return 1\n",
    })
    (src / "main.py").symlink_to("pkg/train.py")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "pkg" / "util.py").read_text().startswith(HEADER)  # before: not reached
    plain, built = python("main.py", src, tmp_path), python("main.py", out, tmp_path)
    assert (built.returncode, built.stdout) == (plain.returncode, plain.stdout) == (0, "pkg/util.py\n"), built.stderr


def test_symlinked_entry_outside_src_is_refused(tmp_path, capsys):
    elsewhere = write(tmp_path / "elsewhere", {"train.py": "def f():\n    return 1\n"})
    src = write(tmp_path / "src", {"helper.py": "def h():\n    return 1\n"})
    (src / "main.py").symlink_to(elsewhere / "train.py")
    assert main([str(src), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "main.py" in err and str(elsewhere / "train.py") in err and "outside SRC" in err, err
    assert main([str(src), "-o", str(tmp_path / "out"), "--main", "main.py"]) == 2
    assert "--main main.py: is a symlink to" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# -- F3: numba's decorators imported by name ------------------------------------------------------


@pytest.mark.parametrize("imports, decorator", [
    ("from numba import vectorize", "@vectorize"),
    ("from numba import vectorize", "@vectorize(['f8(f8)'])"),
    ("from numba import stencil", "@stencil"),
    ("import numba", "@numba.stencil"),
    ("from numba import guvectorize", "@guvectorize([], '(n)->()')"),
    ("from numba import cfunc", "@cfunc('f8(f8)')"),
    ("from numba import jit", "@jit(nopython=True)"),
    ("from numba import njit", "@njit"),
    ("from numba import cuda", "@cuda.jit"),
    ("from numba import vectorize as vec", "@vec"),
    ("from numba import njit as fast", "@fast(cache=True)"),
    ("from numba import stencil as st", "@st"),
    ("import numba as nb", "@nb.vectorize"),
    ("import numba as nb", "@nb.cuda.jit"),
    ("import numba.cuda as cu", "@cu.jit"),
    ("from numba.cuda import jit as kernel", "@kernel"),
    ("from numba import *", "@vectorize"),
    ("from numba import *", "@stencil"),
])
def test_numba_decorators_are_skipped_under_every_name(imports, decorator):
    result = rewrite(f"{imports}\n\n\n{decorator}\ndef v(x):\n    return x\n\n\ndef plain(x):\n    return x\n")
    assert [r.name for r in result.regions] == ["plain"]  # before: `v` got probes too (`@vectorize`, `@st`, ...)
    assert [(s.name, s.reason) for s in result.skipped] == [("v", f"JIT-compiled ({decorator.split('(')[0]})")]


def test_a_vectorize_of_another_package_is_instrumented():
    result = rewrite("from numpy import vectorize\n\n\n@vectorize\ndef v(x):\n    return x\n")
    assert [r.name for r in result.regions] == ["v"] and not result.skipped


def test_numba_skips_are_in_the_build_summary(tmp_path, capsys):
    src = write(tmp_path / "src", {"main.py": "from numba import vectorize\nimport numba\n\n\n@numba.vectorize\n"
                                              "def v(x):\n    return x\n\n\n@vectorize\ndef v2(x):\n    return x\n"})
    assert main([str(src), "-o", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "JIT-compiled (@numba.vectorize) 1" in text and "JIT-compiled (@vectorize) 1" in text, text
    assert "regions: 0" in text  # before: `regions: 1 (function 1)`


# -- F4: a user's empty folder where SRC now has a file -------------------------------------------


def test_users_empty_folder_where_src_now_has_a_file_fails_that_file(tmp_path, capsys):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n"})
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    (out / "mine.txt").mkdir()
    (src / "mine.txt").write_text("x\n")
    assert main([str(src), "-o", str(out), "-q"]) == 1  # before: 0, and the folder was gone
    assert "mine.txt: cannot write" in capsys.readouterr().err
    assert (out / "mine.txt").is_dir()
    (out / "mine.txt").rmdir()  # moved away: the next re-run writes the file
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "mine.txt").read_text() == "x\n"


def test_users_empty_folder_inside_a_builds_folder_stays(tmp_path, capsys):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n", "data/a.txt": "a\n"})
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    (out / "data" / "mine").mkdir()
    (src / "data" / "a.txt").unlink()
    (src / "data").rmdir()
    (src / "data").write_text("now a file\n")
    assert main([str(src), "-o", str(out), "-q"]) == 1
    assert (out / "data" / "mine").is_dir()


def test_builds_folders_where_src_now_has_a_file_are_still_replaced(tmp_path):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n", "data/a.txt": "a\n"})
    (src / "empty").mkdir()
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "empty").is_dir()
    (src / "data" / "a.txt").unlink()
    (src / "data").rmdir()
    (src / "empty").rmdir()
    (src / "data").write_text("d\n")
    (src / "empty").write_text("e\n")
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "data").read_text() == "d\n" and (out / "empty").read_text() == "e\n"


# -- F5: a module edited in OUT to the same size -----------------------------------------------


def test_instrumented_module_edited_in_out_to_the_same_size_is_written_again(tmp_path, capsys):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n"})
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--all", "-q"]) == 0
    built = (out / "main.py").read_text()
    (out / "main.py").write_text(built.replace("return 1", "return 7"))
    assert main([str(src), "-o", str(out), "--all"]) == 0
    assert (out / "main.py").read_text() == built  # before: `return 7` stayed
    assert "(0 unchanged since the last run)" in capsys.readouterr().out
    sources = json.loads((out / ".scaleprobe" / "sources.json").read_text())
    assert main([str(src), "-o", str(out), "--all"]) == 0  # and left alone once it is the build's again
    assert "(1 unchanged since the last run)" in capsys.readouterr().out
    assert json.loads((out / ".scaleprobe" / "sources.json").read_text()) == sources


def test_module_with_nothing_to_instrument_edited_in_out_is_copied_again(tmp_path):
    src = write(tmp_path / "src", {"main.py": "import consts\n\n\ndef f():\n    return consts.A\n",
                                   "consts.py": "A = 1\n"})
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    (out / "consts.py").write_text("A = 7\n")
    os.utime(out / "consts.py", ns=(1, 1))
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "consts.py").read_text() == "A = 1\n"  # before: `A = 7` stayed


# -- F6: --diff's summary -------------------------------------------------------------------------


def test_diff_summary_counts_copies_and_has_the_builds_warnings(tmp_path, capsys):
    src = write(tmp_path / "src", {
        "main.py": "import signal\nimport mypkg\n\n\ndef train(model, opt, loader):\n"
                   "    for batch in loader:\n        model(batch).backward()\n        opt.step()\n",
        "signal.py": "X = 1\n", "README.md": "r\n",
        "src/mypkg/__init__.py": "def g():\n    return 1\n",
    })
    assert main([str(src), "-o", str(tmp_path / "out")]) == 0
    build = capsys.readouterr()
    assert main([str(src), "--diff"]) == 0
    diff = capsys.readouterr()
    copied = [line for line in build.out.splitlines() if line.startswith("files copied unchanged")]
    assert copied == ["files copied unchanged: 3"]
    assert copied[0] in diff.err.splitlines()  # before: `files copied unchanged: 0`
    assert "instrument: warning: signal.py: named like the standard-library module 'signal'" in diff.err
    assert "mypkg: not found from SRC, but SRC has the package src/mypkg/" in diff.err
    assert "no epoch loop found around the step loop(s) main.py:6" in diff.err
    assert sorted(w for w in diff.err.splitlines() if w.startswith("instrument: warning")) == \
        sorted(w for w in build.err.splitlines() if w.startswith("instrument: warning"))


def test_diff_under_nvtx_says_when_nvtx_is_missing(tmp_path):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n"})
    without = "import sys; sys.modules['nvtx'] = None; from instrumentor.cli import main; sys.exit(main(sys.argv[1:]))"
    p = run([sys.executable, "-c", without, str(src), "--diff", "--backend", "nvtx"], cwd=tmp_path)
    assert p.returncode == 0 and "warning: --backend nvtx: the built modules import the nvtx package" in p.stderr, p.stderr


# -- F7, F8: usage errors, and the doc ------------------------------------------------------------


def test_missing_src_does_not_exist(tmp_path, capsys):
    assert main([str(tmp_path / "nonexist"), "-o", str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'nonexist'}: does not exist" in capsys.readouterr().err  # before: "not a directory"
    (tmp_path / "afile").write_text("")
    assert main([str(tmp_path / "afile"), "-o", str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'afile'}: not a directory" in capsys.readouterr().err


def test_out_under_a_file_cannot_be_made(tmp_path, capsys):
    src = write(tmp_path / "src", {"main.py": "def f():\n    return 1\n"})
    (tmp_path / "afile").write_text("")
    assert main([str(src), "-o", str(tmp_path / "afile" / "sub")]) == 2
    err = capsys.readouterr().err
    assert f"cannot be made: {tmp_path / 'afile'} is a file, not a directory" in err, err  # before: "cannot read"


def test_doc_lists_every_usage_error_and_the_jobs_default():
    doc = (REPO / "docs" / "instrument.md").read_text(encoding="utf-8")
    exits = doc[doc.index("## Summary and exit codes"):]
    exits = " ".join(exits[exits.index("2 usage errors"):].split("\n\n")[0].split())
    for case in ("SRC missing", "-o OUT", "`--jobs` below 1", "`--file-timeout` below 0", "no entry file",
                 "is a file", "symlink", "beside an entry file"):
        assert case in exits, case
    assert "`--jobs N`, default 1" in " ".join(doc[doc.index("The worker processes"):].split())
