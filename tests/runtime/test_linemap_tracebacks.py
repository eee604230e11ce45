"""Tracebacks of a built tree (`instrument SRC -o OUT`) name the user's original files and lines."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from instrumentor.cli import main as instrument
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

MAIN = '''\
import importlib
import os
import sys

import helper

if os.environ.get("CHAIN_HOOK"):
    previous = sys.excepthook

    def hook(tp, value, tb):
        print("user hook saw", tp.__name__, file=sys.stderr)
        previous(tp, value, tb)

    sys.excepthook = hook


def run(n):
    total = 0
    for i in range(n):
        total += helper.compute(i)
    return total


if os.environ.get("USE_FORMAT"):
    from runtime.linemap import format_exception

    try:
        run(3)
    except KeyError as exc:
        print(format_exception(exc), end="")
elif os.environ.get("THREAD"):
    import threading

    worker = threading.Thread(target=run, args=(3,), name="worker")
    worker.start()
    worker.join()
elif os.environ.get("PLAIN"):
    plain = importlib.import_module("plain" + "_mod")  # a string the import graph cannot see
    plain.check(3)
else:
    print(run(3))
'''
HELPER = '''\
def compute(i):
    if i == 2:
        x = {"a": 1}
        return x["missing"] + i
    return i
'''
PLAIN = '''\
def check(n):
    for i in range(n):
        if i == 1:
            raise ValueError(f"plain module failed at {i}")
'''


def _run(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = clean_env()
    full["PYTHONPATH"] = str(REPO)
    full["SCALEPROBE_OUT"] = str(cwd / "runs")
    full.update(env or {})
    return subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=60)


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    return _build(tmp_path, HELPER)


def _build(tmp_path: Path, helper: str) -> tuple[Path, Path]:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(MAIN)
    (src / "helper.py").write_text(helper)
    (src / "plain_mod.py").write_text(PLAIN)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    assert "__sp_enter__" in (out / "helper.py").read_text()
    assert (out / "plain_mod.py").read_text() == PLAIN  # not reached: copied, not instrumented
    return src, out


def _traceback(stderr: str) -> str:
    """From the first `Traceback` line on (the launcher may print its summary before)."""
    start = stderr.find("Traceback (most recent call last):")
    assert start >= 0, stderr
    return stderr[start:]


def test_manifest_records_the_absolute_source_and_a_rebuild_keeps_it(built, tmp_path):
    src, out = built
    assert json.loads((out / ".scaleprobe/manifest.json").read_text())["source"] == str(src.resolve())
    again = tmp_path / "again"
    assert instrument([str(out), "-o", str(again), "-q"]) == 0
    # The carried-over line maps point into SRC, not into OUT.
    assert json.loads((again / ".scaleprobe/manifest.json").read_text())["source"] == str(src.resolve())


def test_plain_run_shows_exactly_the_traceback_of_the_original_program(built, tmp_path):
    src, out = built
    original = _run([sys.executable, str(src / "main.py")], tmp_path)
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path)
    assert original.returncode == mapped.returncode == 1
    assert 'helper.py", line 4, in compute' in original.stderr
    assert '    return x["missing"] + i\n' in original.stderr
    # Same files, lines, source lines and carets: only the instrumented lines are gone.
    assert _traceback(mapped.stderr) == _traceback(original.stderr)
    assert str(out) not in mapped.stderr


def test_frames_of_uninstrumented_files_are_left_as_they_are(built, tmp_path):
    src, out = built
    original = _run([sys.executable, str(src / "main.py")], tmp_path, {"PLAIN": "1"})
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path, {"PLAIN": "1"})
    text = _traceback(mapped.stderr)
    # main.py is mapped back to SRC; plain_mod.py was copied and runs from OUT, at its own line.
    assert f'File "{out / "plain_mod.py"}", line 4, in check' in text
    assert text == _traceback(original.stderr).replace(str(src / "plain_mod.py"), str(out / "plain_mod.py"))


def test_launcher_shows_and_records_the_mapped_traceback(built, tmp_path):
    src, out = built
    original = _traceback(_run([sys.executable, str(src / "main.py")], tmp_path).stderr)
    result = _run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), str(out / "main.py")],
                  tmp_path)
    assert result.returncode != 0
    assert _traceback(result.stderr).startswith(original), result.stderr
    errors = list((tmp_path / "runs").rglob("rank0.error.txt"))
    assert len(errors) == 1, result.stderr
    assert _traceback(errors[0].read_text()) == original


def test_without_the_source_tree_out_paths_keep_the_original_lines(built, tmp_path):
    src, out = built
    original = _traceback(_run([sys.executable, str(src / "main.py")], tmp_path).stderr)
    src.rename(tmp_path / "moved")
    result = _run([sys.executable, str(out / "main.py")], tmp_path)
    text = _traceback(result.stderr)
    assert f'File "{out / "helper.py"}", line 4, in compute\n    return x["missing"] + i\n' in text
    assert f'File "{out / "main.py"}", line 20, in run\n    total += helper.compute(i)\n' in text
    assert f"source tree {src.resolve()} no longer exists" in text
    assert text.split("KeyError: 'missing'\n")[0] == original.replace(str(src), str(out)).split("KeyError")[0]


def test_a_hook_installed_later_that_chains_still_gets_the_mapped_traceback(built, tmp_path):
    src, out = built
    original = _traceback(_run([sys.executable, str(src / "main.py")], tmp_path).stderr)
    result = _run([sys.executable, str(out / "main.py")], tmp_path, {"CHAIN_HOOK": "1"})
    assert result.stderr.startswith("user hook saw KeyError\n"), result.stderr
    assert _traceback(result.stderr) == original


def test_a_hook_installed_before_is_still_called(built, tmp_path):
    _, out = built
    script = ("import runpy, sys\n"
              "def hook(tp, value, tb):\n"
              "    print('earlier hook saw', tp.__name__, file=sys.stderr)\n"
              "sys.excepthook = hook\n"
              f"sys.path.insert(0, {str(out)!r})\n"
              f"runpy.run_path({str(out / 'main.py')!r}, run_name='__main__')\n")
    result = _run([sys.executable, "-c", script], tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("earlier hook saw KeyError"), result.stderr


def test_format_exception_maps_a_caught_exception(built, tmp_path):
    src, out = built
    result = _run([sys.executable, str(out / "main.py")], tmp_path, {"USE_FORMAT": "1"})
    assert result.returncode == 0, result.stderr
    assert f'File "{src / "helper.py"}", line 4, in compute\n    return x["missing"] + i\n' in result.stdout
    assert f'File "{src / "main.py"}", line 20, in run\n' in result.stdout


def test_a_map_that_no_longer_matches_its_file_is_not_applied(built, tmp_path):
    _, out = built
    helper = out / "helper.py"
    helper.write_text("# edited after the build\n" + helper.read_text())
    text = _traceback(_run([sys.executable, str(out / "main.py")], tmp_path).stderr)
    # helper.py is shown as Python sees it; main.py, still matching its map, is mapped.
    assert f'File "{helper}", line ' in text
    assert 'helper.py", line 4, in compute' not in text
    assert 'main.py", line 20, in run' in text


def test_an_exception_in_a_thread_is_mapped_too(built, tmp_path):
    src, out = built
    original = _run([sys.executable, str(src / "main.py")], tmp_path, {"THREAD": "1"})
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path, {"THREAD": "1"})
    assert original.stderr.startswith("Exception in thread worker:\n"), original.stderr
    assert mapped.stderr == original.stderr


CHAINED = '''\
def compute(i):
    if i == 2:
        try:
            return {}["missing"]
        except KeyError as exc:
            raise ExceptionGroup("many", [ValueError(i), RuntimeError("inner")]) from exc
    return i
'''


@pytest.mark.parametrize("group", [
    pytest.param(True, marks=pytest.mark.skipif(sys.version_info < (3, 11), reason="ExceptionGroup is a builtin since Python 3.11")),
    False,
], ids=["group", "chained"])
def test_chained_exceptions_and_groups_are_mapped(tmp_path, group):
    program = CHAINED if group else CHAINED.replace('ExceptionGroup("many", [ValueError(i), RuntimeError("inner")])',
                                                      'ValueError(i)')
    src, out = _build(tmp_path, program)
    original = _run([sys.executable, str(src / "main.py")], tmp_path)
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path)
    assert 'helper.py", line 4, in compute' in original.stderr
    assert 'helper.py", line 6, in compute' in original.stderr
    assert "The above exception was the direct cause of the following exception" in original.stderr
    if group:
        assert "Exception Group Traceback" in original.stderr
    assert mapped.stderr == original.stderr


def test_a_build_without_a_recorded_source_maps_lines_in_out(built, tmp_path):
    _, out = built
    manifest = out / ".scaleprobe/manifest.json"
    doc = json.loads(manifest.read_text())
    del doc["source"]  # written by an older instrumentor
    manifest.write_text(json.dumps(doc))
    text = _traceback(_run([sys.executable, str(out / "main.py")], tmp_path).stderr)
    assert f'File "{out / "helper.py"}", line 4, in compute\n    return x["missing"] + i\n' in text
    assert "scaleprobe: no source tree was recorded" in text


# a statement over several lines, in a body the copy moves into `try:` (re-indented) and in a loop
# the copy gives a mark line of its own: Python 3.13 shows every line of it, with the carets of
# its first and last line
SPANNING = '''\
def compute(i):
    for k in range(2):
        if i == 2:
            return divide(
                i,
                k)
    return i


def divide(a, b):
    return (a
            / b)
'''


def test_a_statement_over_several_lines_is_shown_as_the_original_shows_it(tmp_path):
    src, out = _build(tmp_path, SPANNING)
    original = _run([sys.executable, str(src / "main.py")], tmp_path)
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path)
    assert "ZeroDivisionError" in original.stderr and 'helper.py", line 4, in compute' in original.stderr
    if sys.version_info >= (3, 13):
        assert "    return divide(\n        i,\n        k)\n" in original.stderr
        assert "    return (a\n            ~\n            / b)\n" in original.stderr
    assert _traceback(mapped.stderr) == _traceback(original.stderr)
    # without the source tree the copy's lines are shown, at the original line numbers
    manifest = out / ".scaleprobe/manifest.json"
    doc = json.loads(manifest.read_text())
    del doc["source"]
    manifest.write_text(json.dumps(doc))
    text = _traceback(_run([sys.executable, str(out / "main.py")], tmp_path).stderr)
    assert f'File "{out / "helper.py"}", line 11, in divide\n' in text and "ZeroDivisionError" in text


WARNS = '''\
import warnings


def helper(x):
    # a comment moves nothing in the original, but the copy has probe lines above
    warnings.warn(f"careful with {x}")
    return x


def main():
    for i in range(2):
        helper(i)


main()
'''


def test_warnings_name_the_original_file_and_line(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(WARNS)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    original = _run([sys.executable, str(src / "main.py")], tmp_path)
    mapped = _run([sys.executable, str(out / "main.py")], tmp_path, {"SCALEPROBE_QUIET": "1"})
    assert f'{src / "main.py"}:6: UserWarning: careful with 0\n  warnings.warn(f"careful with {{x}}")' in original.stderr
    assert mapped.stderr == original.stderr


LEAKS = '''\
import gc


def leak():
    f = open(__file__)
    return 1


leak()
gc.collect()
print("done")
'''


@pytest.mark.parametrize("tracing", [True, False])
def test_a_resource_warning_keeps_what_tracemalloc_says_of_its_object(tmp_path, tracing):
    """Review 44: the mapped `showwarning` was called without the warning's source, so the
    "Object allocated at" traceback of `-X tracemalloc` (and without it, the hint to enable it)
    was gone."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(LEAKS)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    flags = ["-X", "tracemalloc=5"] if tracing else []
    original = _run([sys.executable, *flags, "-W", "always::ResourceWarning", str(src / "main.py")], tmp_path)
    mapped = _run([sys.executable, *flags, "-W", "always::ResourceWarning", str(out / "main.py")], tmp_path,
                  {"SCALEPROBE_QUIET": "1"})
    said = "Object allocated at (most recent call last):" if tracing else "Enable tracemalloc to get the object"
    assert said in original.stderr
    assert said in mapped.stderr
    assert f"{src / 'main.py'}:9: ResourceWarning: unclosed file" in mapped.stderr
    # (the entry script's own frames there keep OUT's lines: docs/runtime.md)
