"""Line maps: every original line maps back to itself; compiled code carries original lines."""
import ast
import sys
import textwrap

from instr_helpers import TESTDATA, rewrite, run
from instrumentor.linemap import split_lines
from runtime.original_lines import remap_tree

SOURCE = textwrap.dedent('''\
    """Doc."""
    import os

    def f(x):
        """Doc."""
        try:
            y = x + 1
        finally:
            z = yield y
        return z

    def g(): return 1

    class C:
        def m(self):
            for i in range(3):
                pass
            return os.sep
''')


def test_each_original_line_is_found_at_its_mapped_position():
    result = rewrite(SOURCE)
    original = split_lines(SOURCE)
    out = split_lines(result.code)
    assert len(result.linemap) == len(out)
    for out_line, orig_line in zip(out, result.linemap):
        if "__sp_" not in out_line and out_line.strip() not in ("try:", "finally:"):
            # every line that is not ours is an original line, only indented further
            assert original[orig_line - 1].strip() == out_line.strip() or "def g" in out_line or "return 1" in out_line
    # all original lines are reached, in order
    assert sorted(set(result.linemap)) == list(range(1, len(original) + 1))
    assert result.linemap == sorted(result.linemap)
    # the one-line def became a block: its body line still maps to the def's line
    assert result.linemap[out.index("        return 1")] == 12


def test_users_try_finally_next_to_probe_lines_is_kept_apart():
    result = rewrite(SOURCE)
    out = split_lines(result.code)
    user_finally = [i for i, line in enumerate(out) if line.strip() == "finally:" and out[i + 1].strip() == "try:"]
    assert len(user_finally) == 1
    assert result.linemap[user_finally[0]] == 8


def test_remapped_tree_compiles_with_original_lines():
    source = "def f(x):\n    y = 1\n    return x / 0\n"
    result = rewrite(source)
    tree = remap_tree(ast.parse(result.code), result.linemap)
    func = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    namespace = {"__sp_on__": False}
    exec(compile(ast.Module(body=func, type_ignores=[]), "orig.py", "exec"), namespace)
    try:
        namespace["f"](1)
    except ZeroDivisionError as exc:
        tb = exc.__traceback__.tb_next
    assert (tb.tb_frame.f_code.co_filename, tb.tb_lineno) == ("orig.py", 3)
    assert namespace["f"].__code__.co_firstlineno == 1


def test_import_hook_tracebacks_show_original_file_and_lines(tmp_path):
    project = TESTDATA / "hook"
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from instrumentor import importhook;"
        "importhook.install(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]));"
        "code = importhook.instrument_entry(Path(sys.argv[1]) / 'main.py');"
        "exec(code, {'__name__': '__main__', '__file__': sys.argv[1] + '/main.py'})"
    )
    plain = run([sys.executable, str(project / "main.py")], cwd=project)
    for _ in range(2):  # the second run comes from the cache
        hooked = run([sys.executable, "-c", script, str(project), str(tmp_path / "cache")], cwd=project,
                     env={"SCALEPROBE_OUT": str(tmp_path / "runs")})
        assert hooked.returncode == plain.returncode == 1
        trace = [l for l in hooked.stderr.splitlines() if l.startswith("  File") or l.strip().startswith("^")]
        expected = [l for l in plain.stderr.splitlines() if l.startswith("  File") or l.strip().startswith("^")]
        # the hooked run has one frame more, the `-c` script's, above the program's (whose frame
        # lines and, from 3.11 on, caret lines are compared)
        assert len(expected) >= 3 and trace[-len(expected):] == expected
        assert "instrumented: True" in hooked.stdout and "instrumented: False" in plain.stdout
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
