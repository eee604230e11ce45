"""Review fixes, third round: the walk of compound statements in source order (a `try` whose body
and handlers both hold loops or functions failed, or got its loops' lines swapped), the "skipped"
summary, and `instrument`'s `--graph --diff`, `--main /abs/path` and `--version`.

Programs run three ways, as in test_review_fixes2.py: the original, the built tree and
`python -m runtime.launch --instrument main.py`."""

import ast
import json
import sys
import textwrap

import pytest

from instr_helpers import REPO, assert_same, instrument_cli, project_tree, rewrite, three_ways
from instrumentor.cli import main


def expected_regions(source: str) -> list[tuple[str, int, str]]:
    """(name, line, key) of every region, in source order: an oracle independent of facts.py."""
    found: list[tuple[str, int, str]] = []
    ordinals: dict[str, int] = {}

    def walk(node: ast.AST, owner: str, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):  # fields in source order: body, handlers, orelse, ...
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append((name, child.lineno, name))
                walk(child, name, name + ".<locals>.", False)
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name, prefix + child.name + ".", True)
            elif isinstance(child, (ast.For, ast.AsyncFor, ast.While)) and not in_class:
                word = "while" if isinstance(child, ast.While) else "for"
                ordinals[owner] = ordinals.get(owner, 0) + 1
                found.append((f"{owner}:{word}@{child.lineno}", child.lineno, f"{owner}:{word}#{ordinals[owner]}"))
                walk(child, owner, prefix, in_class)
            else:
                walk(child, owner, prefix, in_class)

    walk(ast.parse(source), "<module>", "", False)
    return found


def regions_of(source: str, backend: str = "runtime") -> list[tuple[str, int, str]]:
    result = rewrite(source, backend=backend)
    assert result.status == "instrumented", result.error
    return [(r.name, r.line, r.key) for r in sorted(result.regions, key=lambda r: r.id)]


# Loops and functions in every part of every compound statement; a `while` in one part and a `for`
# in the next, so a walk out of order either fails or names a loop by the other one's line.
TRY_PROGRAM = '''\
import sys

def body_and_handlers(n):
    out = []
    try:
        for i in range(n):
            out.append(i)
        def in_body():
            return "body"
        out.append(in_body())
        if n > 2:
            raise KeyError(n)
        if n > 1:
            raise ValueError(n)
    except KeyError:
        k = 2
        while k:
            k -= 1
            out.append(("key", k))
        def in_key():
            return "key"
        out.append(in_key())
    except ValueError as e:
        for j in range(2):
            out.append(("value", j))
        def in_value():
            return "value"
        out.append(in_value())
    else:
        def in_else():
            return "else"
        m = 2
        while m:
            out.append(("else", m, in_else()))
            m -= 1
    finally:
        for f in range(2):
            out.append(("finally", f))
        def in_finally():
            return "finally"
        out.append(in_finally())
    return out

def groups(n):
    out = []
    try:
        for i in range(n):
            out.append(i)
        raise ExceptionGroup("g", [ValueError(1), KeyError(2)])
    except* ValueError:
        w = 1
        while w:
            w -= 1
            out.append("value")
    except* KeyError:
        for j in range(2):
            out.append(("key", j))
    else:
        for e in range(1):
            out.append("never")
    finally:
        fin = 1
        while fin:
            fin -= 1
            out.append("finally")
    return out

for n in range(4):
    print(n, body_and_handlers(n))
print(groups(2))
try:
    for t in range(1):
        print("module try", t)
except Exception:
    while False:
        pass
finally:
    for u in range(1):
        print("module finally", u)
try:
    body_and_handlers(None)
except TypeError:
    for v in range(1):
        print("handled", v)
def failing():
    try:
        for i in range(1):
            pass
        raise RuntimeError("from the body")
    finally:
        for j in range(1):
            print("failing finally", j)
failing()
'''
# except* and the ExceptionGroup builtin are Python 3.11+: 3.10 runs the program without `groups`
TRY_STAR = TRY_PROGRAM[TRY_PROGRAM.index("def groups(n):"):TRY_PROGRAM.index("for n in range(4):")]
if sys.version_info < (3, 11):
    TRY_PROGRAM = TRY_PROGRAM.replace(TRY_STAR, "").replace("print(groups(2))\n", "")

OTHER_PROGRAM = '''\
import contextlib

def decorate(tag):
    def wrap(fn):
        def inner(*a):
            for _ in range(1):
                pass
            return (tag, fn(*a))
        return inner
    return wrap

@decorate("d")
def branches(n):
    out = []
    if n == 0:
        for i in range(2):
            out.append(i)
    elif n == 1:
        k = 2
        while k:
            k -= 1
            out.append(k)
    elif n == 2:
        def nested():
            for j in range(1):
                out.append("nested")
        nested()
    else:
        for z in range(1):
            out.append("else")
    for a in range(n):
        pass
    else:
        b = 1
        while b:
            b -= 1
            out.append("for-else")
    c = 1
    while c:
        c -= 1
    else:
        for d in range(1):
            out.append("while-else")
    match n:
        case 0:
            for e in range(1):
                out.append("case 0")
        case 1 if [x for x in range(1)]:
            g = 1
            while g:
                g -= 1
                out.append("case 1")
        case _:
            def case_def():
                return "case _"
            out.append(case_def())
    with contextlib.nullcontext():
        for h in range(1):
            out.append("with")
        def in_with():
            return "in with"
        out.append(in_with())
    return out

class Holder:
    for cls_loop in range(2):
        pass
    def method(self):
        for m in range(1):
            return "method"

for n in range(4):
    print(n, branches(n))
print(Holder().method())
def failing():
    with contextlib.nullcontext():
        for i in range(1):
            raise RuntimeError("from the body")
failing()
'''


@pytest.mark.parametrize("backend", ["runtime", "nvtx"])
@pytest.mark.parametrize("program", [TRY_PROGRAM, OTHER_PROGRAM], ids=["try", "other"])
def test_regions_of_every_part_of_a_compound_statement_are_named_in_source_order(program, backend):
    # the old walk rewrote handlers, else and finally before the try body: "libcst and ast walks
    # disagree", or (same kinds of loops) each loop named after the other's line
    assert regions_of(program, backend) == expected_regions(program)


@pytest.mark.parametrize("backend", ["runtime", "nvtx"])
@pytest.mark.parametrize("program", [TRY_PROGRAM, OTHER_PROGRAM], ids=["try", "other"])
def test_programs_with_loops_in_every_part_behave_as_the_original(tmp_path, program, backend):
    plain, built, hooked = three_ways(tmp_path, {"main.py": program}, "--backend", backend)
    assert plain.returncode == 1 and "from the body" in plain.stderr
    assert_same(plain, built, hooked)  # the traceback's lines too, mapped back from the built tree
    manifest = json.loads((tmp_path / "out" / ".scaleprobe" / "manifest.json").read_text())
    assert [(r["name"], r["line"], r["key"]) for r in manifest["regions"]] == expected_regions(program)


def test_loops_of_the_same_kind_in_body_and_handler_keep_their_own_lines():
    # both `for`: the old walk gave the handler's loop the body's fact (line, key), without failing
    source = textwrap.dedent('''\
        def f(xs):
            try:
                for x in xs:
                    pass
            except TypeError:
                for y in range(1):
                    pass
    ''')
    result = rewrite(source)
    assert [(r.name, r.line, r.key) for r in result.regions] == [("f", 1, "f"), ("f:for@3", 3, "f:for#1"), ("f:for@6", 6, "f:for#2")]
    lines = [line.strip() for line in result.code.splitlines()]
    entered = {}  # loop header -> the region entered just before it (`enter`, `try:`, the loop)
    for i, line in enumerate(lines):
        if line.startswith("for "):
            entered[line] = int(lines[i - 2].split("__sp_enter__(")[1].rstrip(")"))
    by_id = {r.id: r.line for r in result.regions}
    assert {header: by_id[rid] for header, rid in entered.items()} == {"for x in xs:": 3, "for y in range(1):": 6}


# -- the "skipped" summary lists what docs/instrument.md says it does --------------------------------

SKIPPING = '''\
class C:
    for k in range(2):
        pass
    def m(self):
        return [x for x in range(3)], {y: y for y in (x * 2 for x in range(2))}
f = lambda x: x
def main(): return C().m()
'''


def test_comprehensions_lambdas_and_class_body_loops_are_reported_as_skipped():
    result = rewrite(SKIPPING)
    assert [(s.name, s.line, s.reason) for s in result.skipped] == [
        ("C:for@2", 2, "loop in a class body"),
        ("<listcomp>", 5, "comprehension"), ("<dictcomp>", 5, "comprehension"), ("<genexpr>", 5, "comprehension"),
        ("<lambda>", 6, "lambda"),
    ]
    only_lambdas = rewrite("key = lambda x: -x\nprint(sorted([1, 2], key=key))\n")  # nothing to instrument
    assert only_lambdas.status == "unchanged" and [s.reason for s in only_lambdas.skipped] == ["lambda"]


def test_comprehensions_inside_a_region_left_out_are_counted_once_under_it():
    source = (
        "def f():  # scaleprobe: off\n"
        "    return [x for x in range(3)], (lambda y: y)\n"
        "\n"
        "def g():\n"
        "    return {k: 1 for k in 'ab'}\n"
    )
    result = rewrite(source)
    assert [(s.name, s.line, s.reason) for s in result.skipped] == [
        ("f", 1, "# scaleprobe: off"), ("<dictcomp>", 5, "comprehension"),
    ]


def test_the_skipped_summary_counts_them_in_a_build_a_re_run_and_a_diff(tmp_path, capsys):
    src = project_tree(tmp_path, {"main.py": SKIPPING})
    line = "skipped: comprehension 3, lambda 1, loop in a class body 1"
    for args in (["-o", str(tmp_path / "out")], ["-o", str(tmp_path / "out")], ["--diff"]):  # the re-run reuses the file
        assert main([str(src), *args]) == 0
        captured = capsys.readouterr()
        assert line in (captured.err if "--diff" in args else captured.out).splitlines()
    state = json.loads((tmp_path / "out" / ".scaleprobe" / "state.json").read_text())
    assert len(state["files"]["main.py"]["skipped"]) == 5


# -- instrument's options: --graph --diff, --main as an absolute path, --version ---------------------

def test_graph_and_diff_together_are_refused_naming_both(tmp_path, capsys):
    src = project_tree(tmp_path, {"main.py": "def f():\n    return 1\n"})
    with pytest.raises(SystemExit) as exc:
        main([str(src), "--graph", "--diff"])
    assert exc.value.code == 2
    assert "argument --diff: not allowed with argument --graph" in capsys.readouterr().err


def test_main_may_be_an_absolute_path_inside_src(tmp_path, capsys):
    src = project_tree(tmp_path, {"main.py": "print(0)\n", "tools/run.py": "import helper\n", "tools/helper.py": "x = 1\n"})
    # review 40: `../src/tools/run.py`, relative to SRC, names a file inside it as well
    for given in (str(src / "tools" / "run.py"), str(src / "tools" / ".." / "tools" / "run.py"), "./tools/run.py",
                  f"../{src.name}/tools/run.py"):
        assert main([str(src), "--graph", "--main", given]) == 0
        assert capsys.readouterr().out.startswith("own modules reached (2):\n  tools/helper.py\n  tools/run.py\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "-q", "--main", str(src / "tools" / "run.py")]) == 0


def test_main_outside_src_or_missing_gets_a_message_that_says_why(tmp_path, capsys):
    src = project_tree(tmp_path, {"main.py": "print(0)\n"})
    (tmp_path / "elsewhere.py").write_text("print(1)\n")
    for given in (str(tmp_path / "elsewhere.py"), "../elsewhere.py"):
        assert main([str(src), "--graph", "--main", given]) == 2
        assert f"--main {given}: not inside SRC {src}: the entry file must be one of the project's files" in capsys.readouterr().err
    assert main([str(src), "--graph", "--main", "src/main.py"]) == 2  # relative to the current folder, not SRC
    assert f"--main src/main.py: no such file under {src} (--main is relative to SRC)" in capsys.readouterr().err


def test_version_is_in_the_synopsis_and_works():
    synopsis = (REPO / "docs" / "instrument.md").read_text().split("```")[1]
    assert "instrument --version" in synopsis
    done = instrument_cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("instrument (scaleprobe) ")
