"""An uncaught SyntaxError whose line starts with a tab shows as Python shows it (review 44 F4).

Before Python 3.13 the interpreter shows an uncaught exception with C code that strips every
leading space, tab and form feed of a SyntaxError's line; the traceback module, which the
excepthooks of a built tree (`runtime.linemap`) format with, strips spaces only, and so showed the
tab, a shifted caret, and a caret line for a TabError where Python shows none. Every expectation
here is what the same interpreter prints itself, never a string written down.
"""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from instrumentor.cli import main as instrument
from runtime import linemap
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

MAIN = '''\
import os
import threading

import t


def main():
    if os.environ.get("THREAD"):
        worker = threading.Thread(target=t.run, args=(os.environ["CASE"],), name="worker")
        worker.start()
        worker.join()
    else:
        t.run(os.environ["CASE"])


main()
'''
# compiled by the program: the SyntaxError's text is one of these lines
T = '''\
CODES = {
    "tab": "if 1:\\n\\tx = (",
    "tab_error": "if 1:\\n        x = 1\\n\\ty = 2\\n",
    "space_then_tab": "if 1:\\n \\t x = 1 +\\n",
    "tab_inside": "if 1:\\n\\tx = 1 +\\t$\\n",
    "range": "if 1:\\n\\tx = 1 if 2\\n",
    "spaces": "if 1:\\n    x = (",
}


def run(case):
    if case == "module":
        import bad  # noqa: F401 - a TabError: instrument copies it as it is
    else:
        compile(CODES[case], "<user>", "exec")
'''
BAD = "if 1:\n        x = 1\n\ty = 2\n"
CASES = ["tab", "tab_error", "space_then_tab", "tab_inside", "range", "spaces", "module"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tabs")
    src, out = root / "src", root / "out"
    src.mkdir()
    (src / "main.py").write_text(MAIN)
    (src / "t.py").write_text(T)
    (src / "bad.py").write_text(BAD)
    instrument([str(src), "-o", str(out), "-q"])  # fails on bad.py, which it copies, and builds the rest
    assert "__sp_enter__" in (out / "t.py").read_text()
    assert (out / "bad.py").read_text() == BAD
    return src, out


def _run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    full = clean_env()
    full.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(cwd.parent / "runs"), SCALEPROBE_QUIET="1", **env)
    return subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


def _shown(stderr: str, out: Path, src: Path) -> str:
    """All of stderr but the launcher's own lines, OUT's paths read as SRC's."""
    text = stderr.replace(str(out), str(src))
    assert "Traceback (most recent call last):" in text, stderr
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("scaleprobe"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_built_tree_shows_the_syntax_error_as_python_does(tree, case, thread):
    src, out = tree
    env = {"CASE": case, **({"THREAD": "1"} if thread else {})}
    original = _run([sys.executable, "main.py"], src, env)
    built = _run([sys.executable, "main.py"], out, env)
    assert original.returncode == built.returncode == (0 if thread else 1)
    assert "Error" in original.stderr
    assert _shown(built.stderr, out, src) == _shown(original.stderr, out, src)


@pytest.mark.parametrize("case", ["tab", "tab_error", "module"])
def test_launcher_shows_the_syntax_error_as_python_does(tree, case):
    src, out = tree
    original = _run([sys.executable, "main.py"], src, {"CASE": case})
    launched = _run([sys.executable, "-m", "runtime.launch", "main.py"], out, {"CASE": case})
    assert launched.returncode == original.returncode == 1
    assert _shown(launched.stderr, out, src) == _shown(original.stderr, out, src)


@pytest.mark.parametrize("text", [BAD, "if 1:\n\tx = (\n", "x = 1 +\n"], ids=["tab_error", "tab", "spaces"])
def test_launcher_shows_the_entry_script_s_own_syntax_error_as_python_does(tmp_path, text):
    (tmp_path / "e.py").write_text(text)
    original = _run([sys.executable, "e.py"], tmp_path, {})
    launched = _run([sys.executable, "-m", "runtime.launch", "e.py"], tmp_path, {})
    assert launched.returncode == original.returncode == 1
    assert "Error" in original.stderr
    shown = "".join(line for line in launched.stderr.splitlines(keepends=True) if not line.startswith("scaleprobe"))
    assert shown == original.stderr


class _Subclass(SyntaxError):
    pass


# fields the compiler never gives but a program can: several lines, an end before the start, no
# offset, offsets past the line, a vertical tab (not stripped), characters of several bytes
ODD = [
    (SyntaxError, ("m", ("f.py", 2, 3, "\t\tab cd\n", 2, 5))),
    (SyntaxError, ("m", ("f.py", 2, 9, "\tab\n\tcd ef\n", 2, 11))),
    (SyntaxError, ("m", ("f.py", 2, 40, "\tab cd\n", 2, 46))),
    (SyntaxError, ("m", ("f.py", 2, 5, "\tab cd ef\n", 2, 3))),
    (SyntaxError, ("m", ("f.py", 2, 3, "\tab cd ef\n", 4, 3))),
    (SyntaxError, ("m", ("f.py", 2, None, "\t\tab cd\n", None, None))),
    (SyntaxError, ("m", ("f.py", 2, 0, "\f\tab cd\n", 0, 0))),
    (SyntaxError, ("m", ("f.py", 2, 2, "\t \n", 2, 3))),
    (SyntaxError, ("m", ("f.py", 2, 3, "\x0bab cd\n", 2, 4))),
    (SyntaxError, ("m", ("f.py", 2, 7, '\tx = "\u00e9\u20ac" $\n', 2, 8))),
    (SyntaxError, ("", ("", 1, 1, "", 1, 1))),
    (SyntaxError, (None, (None, 3, 2, "\tab", None, None))),
    (SyntaxError, ()),
    (IndentationError, ("m", ("f.py", 2, 2, "\t\tab cd\n", 2, 7))),
    (_Subclass, ("m", ("f.py", 2, 2, "\tab cd\n", 2, 5))),
]


def interpreter_display(exc: BaseException) -> str:
    """What the interpreter's own hook shows of an uncaught `exc` (without a traceback)."""
    stderr, sys.stderr = sys.stderr, io.StringIO()
    try:
        sys.__excepthook__(type(exc), exc, None)
        return sys.stderr.getvalue()
    finally:
        sys.stderr = stderr


@pytest.mark.parametrize("kind, args", ODD, ids=[str(i) for i in range(len(ODD))])
def test_every_field_is_shown_as_the_interpreters_own_hook_shows_it(kind, args):
    exc = kind(*args)
    assert linemap.format_exception(exc, None, _uncaught=True) == interpreter_display(exc)


def test_format_exception_itself_stays_what_the_traceback_module_gives():
    import traceback

    exc = SyntaxError("m", ("f.py", 2, 3, "\tab cd\n", 2, 5))
    assert linemap.format_exception(exc, None) == "".join(traceback.format_exception(exc))
