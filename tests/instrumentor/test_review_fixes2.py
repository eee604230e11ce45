"""Instrumented programs behave as the originals where the review found they did not: docstrings
followed by `;`, traceback lines and carets after one-line defs and in-place rewrites, NVTX trees'
tracebacks and manifests, and syntax errors of imported modules under `--instrument`.

Each program runs three ways, as the user would: the original, the built tree (`instrument SRC -o
OUT`, then `python main.py` in OUT) and `python -m runtime.launch --instrument main.py`."""

import importlib.machinery
import importlib.util
import json
import sys

from instr_helpers import assert_same, code_of, project_tree as _project, rewrite, run, three_ways
from instrumentor.cli import main
from instrumentor.linemap import split_lines

CARETS = sys.version_info >= (3, 11)  # column positions in tracebacks


# -- bug 3: a docstring followed by `;` ---------------------------------------------------------------

def test_a_docstring_followed_by_a_semicolon_stays_the_docstring(tmp_path):
    program = '''\
        """Module doc."""; import sys
        def docsemi(x):
            "semi doc"; y = x + 1
            return y
        def fails(d):
            "fails doc"; y = d["k"]; return y
        print(__doc__, docsemi.__doc__, fails.__doc__, docsemi(1))
        fails({})
        '''
    plain, built, hooked = three_ways(tmp_path, {"main.py": program})
    assert plain.stdout == "Module doc. semi doc fails doc 2\n"
    assert_same(plain, built, hooked)  # the traceback too: the split line maps back to line 6
    code = code_of('"doc"; y = 1\ndef f(x):\n    "semi doc"; y = x + 1\n    return y\n')
    lines = code.splitlines()
    assert lines[0] == '"doc"' and lines[3] == "y = 1"  # the header goes between
    assert "    \"semi doc\"\n    if __sp_on__: __sp_enter__(0)\n    try:\n        y = x + 1\n" in code


# -- bug 6: the line after a one-line def -------------------------------------------------------------

def test_a_one_line_def_whose_tail_repeats_the_next_line_maps_to_its_own_line(tmp_path):
    program = '''\
        def g():
            return 1 // 0

        def outer():
            global f
            def f(): return g()
            return g()

        try:
            outer()
        except ZeroDivisionError:
            pass
        f()
        '''
    plain, built, hooked = three_ways(tmp_path, {"main.py": program})
    assert 'line 6, in f\n    def f(): return g()' in plain.stderr
    assert_same(plain, built, hooked)
    result = rewrite(program)
    out = split_lines(result.code)
    body = [i for i, line in enumerate(out) if line.strip() == "return g()"]
    assert [result.linemap[i] for i in body] == [6, 7]


# -- bug 7: carets (column positions) ------------------------------------------------------------------

CARET_PROGRAM = '''\
    import asyncio
    from runtime.linemap import format_exception

    def show(fn, *args):
        try:
            fn(*args)
        except Exception as exc:
            print(format_exception(exc))

    def inline_loop(d):
        for k in range(2): d[k]["x"]
    def oneline(d): return d["z"]
    class K:
        def m(self, d): x = "é"; return d["ü"] + x
    def gen(d):
        x = (yield 1) + d["h"]
    def run_gen(d):
        g = gen(d); next(g); g.send(1)
    async def co(d):
        return (await asyncio.sleep(0, d))["c"] + 1
    class Opt:
        def step(self): pass
    def train(loader, opt):
        for epoch in range(1):
            for batch in loader(
                    ): opt.step(); batch["b"]

    show(inline_loop, {0: {}})
    show(oneline, {})
    show(K().m, {})
    show(run_gen, {})
    show(lambda d: asyncio.run(co(d)), {})
    show(train, lambda: [{}], Opt())
    oneline({})
    '''


def test_carets_of_lines_rewritten_in_place_point_where_the_originals_do(tmp_path):
    for backend in ("runtime", "nvtx"):
        plain, built, hooked = three_ways(tmp_path / backend, {"main.py": CARET_PROGRAM}, "--backend", backend)
        if CARETS:
            assert '    def oneline(d): return d["z"]\n                           ~^^^^^\n' in plain.stderr
            assert '    for k in range(2): d[k]["x"]\n                       ~~~~^^^^^\n' in plain.stdout
        assert_same(plain, built, hooked)
    columns = json.loads((tmp_path / "runtime" / "out" / ".scaleprobe" / "columns.json").read_text())
    assert set(columns) == {"main.py"} and columns["main.py"]


# -- bug 11: NVTX trees --------------------------------------------------------------------------------

def test_nvtx_trees_map_tracebacks_to_the_original_lines(tmp_path):
    program = '''\
        import helper

        def run(n):
            for i in range(n):
                helper.check(i)

        run(3)
        '''
    helper = '''\
        def check(i):
            if i == 2:
                raise ValueError(f"bad {i}")
        '''
    plain, built, _ = three_ways(tmp_path, {"main.py": program, "helper.py": helper}, "--backend", "nvtx")
    assert "line 3, in check" in plain.stderr
    assert_same(plain, built)


def test_nvtx_modules_never_import_a_runtime_package_that_is_not_scaleprobes(tmp_path, monkeypatch):
    foreign = tmp_path / "foreign" / "runtime"
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text("raise RuntimeError('a foreign runtime package was imported')\n")
    spec = importlib.machinery.PathFinder.find_spec("runtime", [str(tmp_path / "foreign")])
    code = code_of("def f():\n    return 1\n", backend="nvtx")
    for found in (None, spec):  # no runtime at all; one without a linemap module
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None, found=found: found)
        namespace = {"__name__": "mod", "__file__": str(tmp_path / "mod.py")}
        exec(compile(code, "mod.py", "exec"), namespace)
        assert namespace["f"]() == 1
    # a project with a `runtime` module of its own: the NVTX code does not look for one at all
    src = _project(tmp_path, {"main.py": "def f():\n    return 1\nprint(f())\n", "runtime.py": "print('imported')\n"})
    assert main([str(src), "-o", str(tmp_path / "out"), "-q", "--backend", "nvtx"]) == 0
    assert "runtime" not in (tmp_path / "out" / "main.py").read_text()
    assert run([sys.executable, "main.py"], cwd=tmp_path / "out").stdout == "1\n"


def test_an_instrumented_tree_of_another_backend_is_refused_file_by_file(tmp_path, capsys):
    src = _project(tmp_path, {"main.py": "def f():\n    return 1\nprint(f())\n"})
    nvtx_out, again, runtime_out = tmp_path / "nvtx", tmp_path / "again", tmp_path / "rt"
    assert main([str(src), "-o", str(nvtx_out), "-q", "--backend", "nvtx"]) == 0
    capsys.readouterr()
    assert main([str(nvtx_out), "-o", str(runtime_out)]) == 1
    assert "main.py:1: already instrumented with --backend nvtx, not runtime" in capsys.readouterr().out
    assert main([str(nvtx_out), "-o", str(again), "-q", "--backend", "nvtx"]) == 0
    manifest = json.loads((again / ".scaleprobe" / "manifest.json").read_text())
    assert manifest["backend"] == "nvtx" and [r["name"] for r in manifest["regions"]] == ["f"]
    assert (again / "main.py").read_bytes() == (nvtx_out / "main.py").read_bytes()


# -- bug 14: a syntax error in an imported module under --instrument ----------------------------------

def test_a_syntax_error_at_import_shows_as_without_instrumenting(tmp_path):
    files = {"main.py": "import helper\nhelper.f()\n", "helper.py": "def f():\n    x = (1,\n    return x\n"}
    plain, _, hooked = three_ways(tmp_path / "imported", files)
    assert "SyntaxError" in plain.stderr and "importlib" not in plain.stderr
    assert_same(plain, hooked)
    plain, _, hooked = three_ways(tmp_path / "entry", {"main.py": "x = 1\ndef f(:\n    pass\n"})
    assert_same(plain, hooked)  # no note of ours on top of Python's own message
