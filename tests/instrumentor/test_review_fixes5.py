"""Review fixes, fifth round: where the time of generators and coroutines goes (the operand of a
yield/await, an exception raised at the suspension, a suspended generator closed while another
activation of it runs, step loops that yield), names outside the BMP, project modules named like
scaleprobe's packages, awaits in a generator expression's iterable, deep expressions and the
messages of the import hook, NFKC identifiers.

Profiles are read from real runs (the built tree and `python -m runtime.launch --instrument`) as
call paths of region names; region stacks are also replayed in-process against probes that log."""

import sys
import textwrap

import pytest

from instr_helpers import REPO, code_of, project_tree, rewrite, run, run_env, strict_replay
from instrumentor import importhook
from instrumentor.cli import main as cli_main
from instrumentor.results import FileResult
from runtime.runfile import find_run_files, read_run


def _profile(tmp_path, files: dict[str, str], *, hook: bool, entry: str = "main.py", expect: str | None = None):
    """{"a > b > c": (visits, inclusive seconds)} of one run of `entry`, and the run's stdout."""
    src = project_tree(tmp_path, files)
    env, runs = run_env(tmp_path), tmp_path / "runs"
    if hook:
        done = run([sys.executable, "-m", "runtime.launch", "--out", str(runs), "--instrument", entry], cwd=src, env=env)
    else:
        out = tmp_path / "out"
        cli_main([str(src), "-o", str(out), "-q", "--main", entry])
        done = run([sys.executable, entry], cwd=out, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    if expect is not None:
        assert done.stdout == expect
    (path,) = find_run_files(runs)
    recorded = read_run(path)
    assert not recorded.problems, recorded.problems
    return {recorded.callpath_name(p, " > "): (s.visits, s.incl_ns / 1e9) for p, s in recorded.profile.items()}


def _visits_of(profile, name: str, under: str | None = None) -> int:
    return sum(v for path, (v, _) in profile.items()
               if path.split(" > ")[-1] == name and (under is None or under in path.split(" > ")[:-1]))


# -- findings 1 to 3: yield/await operands, exceptions at suspensions, closing generators -----------

OPERANDS = '''\
import asyncio, time

def work(ms):
    time.sleep(ms / 1000)
    return ms

def batches(n):
    for i in range(n):
        yield work(20)

def train():
    total = 0
    for b in batches(3):
        total += b
    return total

async def send(x):
    await asyncio.sleep(0)
    return x

def encode(ms):
    return work(ms)

async def client():
    n = 0
    for i in range(3):
        n += await send(encode(20))
    return n

print(train(), asyncio.run(client()))
'''


@pytest.mark.parametrize("hook", [False, True], ids=["built", "instrument"])
def test_the_operand_of_a_yield_or_await_is_timed_in_the_generator_or_coroutine(tmp_path, hook):
    profile = _profile(tmp_path, {"main.py": OPERANDS}, hook=hook, expect="60 60\n")
    # `yield work(20)` is the generator's own work, `await send(encode(20))` the coroutine's
    assert _visits_of(profile, "work", under="batches:for@8") == 3
    assert _visits_of(profile, "encode", under="client:for@26") == 3
    assert _visits_of(profile, "work") == 6
    assert profile["train > train:for@13 > batches"][1] > 0.045
    assert profile["client"][1] > 0.045


RAISED_AT_SUSPENSION = '''\
import asyncio, time

def work(ms):
    time.sleep(ms / 1000)

async def fetch(i):
    await asyncio.sleep(0)
    if i % 2 == 0:
        raise ConnectionError(i)
    return i

async def worker():
    got = []
    for i in range(4):
        try:
            got.append(await fetch(i))
        except ConnectionError:
            pass
        work(5)
    return got

def consumer():
    while True:
        try:
            job = yield
        except ValueError:
            work(5)
            continue
        work(5)

def driver():
    c = consumer()
    next(c)
    for j in range(3):
        c.throw(ValueError)
    c.close()

print(asyncio.run(worker()))
driver()
'''


def test_the_code_that_handles_an_exception_raised_at_a_suspension_runs_in_its_regions(tmp_path):
    profile = _profile(tmp_path, {"main.py": RAISED_AT_SUSPENSION}, hook=False, expect="[1, 3]\n")
    # a failed await and gen.throw(): the handlers and what follows them are the function's own work
    assert _visits_of(profile, "work", under="worker:for@14") == 4
    assert _visits_of(profile, "work", under="consumer:while@23") == 3
    assert _visits_of(profile, "work") == 7


RECURSIVE = '''\
import time

def work(ms):
    time.sleep(ms / 1000)

def solutions(depth):
    for i in range(2):
        if depth == 0:
            yield (i,)
        else:
            first = next(solutions(depth - 1))  # the sub-generator is dropped (closed) here
            work(20)
            yield (i,) + first

print(next(solutions(2)))
'''


@pytest.mark.parametrize("hook", [False, True], ids=["built", "instrument"])
def test_closing_a_suspended_generator_leaves_another_activation_of_it_open(tmp_path, hook):
    profile = _profile(tmp_path, {"main.py": RECURSIVE}, hook=hook, expect="(0, 0, 0)\n")
    works = {path: visits for path, (visits, _) in profile.items() if path.endswith("> work") or path == "work"}
    assert sum(works.values()) == 2
    # depth 2's work after its sub-generator was closed is still its own, not its caller's (the root):
    # both works are under the loop (the nested activations fold into the outer one's call path,
    # docs/format.md), none where a closed activation's exits had closed the running one's visits
    assert works == {"solutions > solutions:for@7 > work": 2}


# In-process: the rewritten code against probes that log, each exit checked against the region
# stack (an exit that is not the innermost visit closes visits that are not its own).

def _logged(source: str) -> tuple[dict, list]:
    from runtime import probe

    log: list = []
    namespace = {
        "__name__": "case", "__sp_on__": True, "log": log,
        "__sp_enter__": lambda rid: log.append(("enter", rid)),
        "__sp_exit__": lambda rid: log.append(("exit", rid)),
        "__sp_mark__": lambda rid: None, "__sp_left__": probe.left, "__sp_back__": probe.back,
    }
    result = rewrite(source)
    assert result.status == "instrumented", result.error
    body = "".join(line for line in result.code.splitlines(keepends=True)
                   if not line.startswith(("from runtime.probe import", "__sp_on__ = __sp_define__(")))
    exec(compile(body, "case.py", "exec"), namespace)
    return namespace, log


STACK_CASES = '''
import asyncio

def bad(x):
    raise KeyError(x)

def operand_raises():
    got = []
    for i in range(3):
        try:
            got.append((yield bad(i)))   # raised before the suspension: the regions are still open
        except KeyError:
            log.append("handled")
    yield "done"

def thrown():
    while True:
        try:
            x = yield
        except ValueError:
            log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])

def search(depth):
    for i in range(2):
        if depth:
            first = next(search(depth - 1))
            log.append("after close")
        yield i

def delegating():
    r = yield from thrown_once()
    return r

def thrown_once():
    try:
        yield 1
    except ValueError:
        return "caught"

async def failing(i):
    await asyncio.sleep(0)
    raise ConnectionError(i)

async def gather_failures():
    n = 0
    for i in range(2):
        try:
            n += await failing(i)
        except ConnectionError:
            n += 1
        try:
            [await failing(j) for j in range(2)]
        except ConnectionError:
            n += 1
        if await ok():
            n += 1
    return n

async def ok():
    return True

async def cancelled():
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        log.append("cancel handled")
        raise

async def cancel_it():
    task = asyncio.ensure_future(cancelled())
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
'''


def test_every_exit_closes_the_innermost_visit_whatever_happens_at_a_suspension():
    ns, log = _logged(STACK_CASES)
    g = ns["operand_raises"]()
    assert list(g) == ["done"] and log.count("handled") == 3
    t = ns["thrown"]()
    next(t)
    t.throw(ValueError)
    t.close()
    assert next(ns["search"](2)) == 0 and log.count("after close") == 2
    d = ns["delegating"]()
    next(d)
    with pytest.raises(StopIteration) as stop:
        d.throw(ValueError)
    assert stop.value.value == "caught"
    assert asyncio_run(ns["gather_failures"]()) == 6
    assert asyncio_run(ns["cancel_it"]()) == "cancelled" and "cancel handled" in log
    assert strict_replay(log) == []
    # the handler of the thrown ValueError ran inside the generator's loop region (its last enter)
    (inside,) = [e for e in log if isinstance(e, list)]
    assert inside[1][0] == "enter"


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


# -- finding 4: step loops in generators ------------------------------------------------------------

STEP_LOOPS = '''
def train_steps(loader, opt):
    for batch in loader:
        opt.step()
        yield batch

def train(loader, opt):
    for batch in loader:
        opt.step()

async def train_async(loader, opt, q):
    for batch in loader:
        opt.step()
        await q.put(batch)
'''


def test_a_step_loop_whose_body_suspends_gets_marks_not_step_records():
    result = rewrite(STEP_LOOPS)
    kinds = [(r.id, r.kind, r.name) for r in result.regions]
    assert kinds == [(0, "generator", "train_steps"), (1, "step", "train_steps:for@3"), (2, "function", "train"),
                     (3, "step", "train:for@8"), (4, "coroutine", "train_async"), (5, "step", "train_async:for@12")]
    # a step record would run from one next() to the next, through the time suspended at yield/await
    assert "for batch in loader:\n                if __sp_on__: __sp_mark__(1)" in result.code
    assert "for batch in loader:\n                if __sp_on__: __sp_mark__(5)" in result.code
    assert "for batch in __sp_iterate__(3, loader):" in result.code


# -- finding 5: characters outside the BMP -----------------------------------------------------------

def test_header_strings_are_ascii_python_literals_of_any_character():
    import ast

    from instrumentor.emit import py_str

    for text in ["run_\U0001f525.py", "\U00020000", "a\\ud83d\\udd25", 'é"\\x', "\x00\n", "plain/mod.py"]:
        literal = py_str(text)
        assert literal.isascii() and literal.startswith('"') and ast.literal_eval(literal) == text
    assert py_str("pkg/mod.py") == '"pkg/mod.py"'


NON_BMP = '''\
def \U00020000(n):
    total = 0
    for i in range(n):
        total += i
    return total

print(\U00020000(3))
'''


@pytest.mark.parametrize("hook", [False, True], ids=["built", "instrument"])
def test_a_name_or_file_name_outside_the_bmp_is_recorded(tmp_path, hook):
    entry = "run_\U0001f525.py"
    profile = _profile(tmp_path, {entry: NON_BMP}, hook=hook, entry=entry, expect="3\n")
    assert profile["\U00020000 > \U00020000:for@3"][0] == 1


def test_nvtx_headers_escape_characters_outside_the_bmp():
    code = code_of(NON_BMP, relpath="run_\U0001f525.py", backend="nvtx")
    assert code.split("def ", 1)[0].isascii()
    assert 'message="\\U00020000"' in code and '"run_\\U0001f525.py")' in code


# -- finding 8: project modules named like scaleprobe's packages -------------------------------------

def test_project_modules_named_modeler_or_nvtx_are_the_projects_own(tmp_path):
    files = {
        "main.py": "import modeler, nvtx\nprint(modeler.fit([1, 2]), nvtx.push(2))\n",
        "modeler.py": "def fit(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n",
        "nvtx.py": "def push(n):\n    out = []\n    for i in range(n):\n        out.append(i)\n    return out\n",
    }
    profile = _profile(tmp_path, files, hook=True, expect="3 [0, 1]\n")
    assert profile["fit > fit:for@3"][0] == 1 and profile["push > push:for@3"][0] == 1


def test_scaleprobes_own_packages_are_never_instrumented_by_the_hook(tmp_path):
    inst = importhook.Instrumenter(REPO, None, "runtime")
    assert not inst.owns(REPO / "instrumentor" / "cli.py", "instrumentor.cli")
    assert not inst.owns(REPO / "modeler" / "model.py", "modeler.model")
    assert not inst.owns(REPO / "runtime" / "series.py", "runtime.series")
    assert inst.owns(REPO / "testdata" / "sample_code" / "train.py", "train")
    project = importhook.Instrumenter(tmp_path, None, "runtime")
    assert project.owns(tmp_path / "modeler.py", "modeler") and project.owns(tmp_path / "instrumentor.py", "instrumentor")
    assert project.owns(tmp_path / "nvtx.py", "nvtx")
    # the NVTX backend's modules import `nvtx`: a project's own `nvtx` must not import itself
    assert not importhook.Instrumenter(tmp_path, None, "nvtx").owns(tmp_path / "nvtx.py", "nvtx")


# -- finding 9: await in the outermost iterable of a generator expression ----------------------------

def test_an_await_in_a_generator_expressions_outermost_iterable_leaves_the_regions():
    source = '''
        import asyncio

        async def fetch():
            log.append("fetching")
            await asyncio.sleep(0)
            return [1, 2, 3]

        async def total():
            return sum(x * 2 for x in await fetch())
    '''
    ns, log = _logged(textwrap.dedent(source))
    assert asyncio_run(ns["total"]()) == 12
    assert strict_replay(log) == []
    # fetch (region 0) was entered after total (region 1) was left: it is not nested under it
    at = log.index("fetching")
    assert log[at - 2 : at] == [("exit", 1), ("enter", 0)]


# -- findings 10 and 12: the import hook ---------------------------------------------------------------

def _deep_module(terms: int) -> str:
    return "import os\n\ndef f():\n    for i in range(2):\n        pass\n    return " + " + ".join(["1"] * terms) + "\nprint(f())\n"


def test_the_import_hook_instruments_expressions_as_deep_as_instrument_does(tmp_path):
    path = tmp_path / "main.py"
    path.write_text(_deep_module(600))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # the interpreter's default, as under the launcher
    try:
        entry = importhook.Instrumenter(tmp_path, None, "runtime")._rewrite(path, path.read_bytes())
    finally:
        sys.setrecursionlimit(limit)
    assert entry["error"] is None and entry["code"] is not None


def test_too_deep_for_libcst_names_the_line_and_is_not_for_good():
    from instrumentor.regions import IdAllocator
    from instrumentor.transform import instrument_source

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(250)
    try:
        result = instrument_source(_deep_module(300), "main.py", ids=IdAllocator(range(10)))
    finally:
        sys.setrecursionlimit(limit)
    assert result.error == "main.py:6: expression too deeply nested for libcst"
    assert result.transient


RESERVED = "def f():\n    for i in range(2):\n        __sp_x__ = i\n    return 1\nprint(f())\n"


def test_why_a_module_is_not_instrumented_is_said_on_every_run_also_from_the_cache(tmp_path, capsys):
    path = tmp_path / "main.py"
    path.write_text(RESERVED)
    for _ in range(2):  # two processes sharing the cache, each with its own memory
        inst = importhook.Instrumenter(tmp_path, tmp_path / "cache", "runtime")
        inst._rewrite(path, path.read_bytes())
        inst._rewrite(path, path.read_bytes())  # said once per process
    assert capsys.readouterr().err.count("scaleprobe: not instrumented: main.py:3: defines '__sp_x__'") == 2
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_a_failure_for_want_of_resources_is_not_cached(tmp_path, monkeypatch, capsys):
    calls = []

    def failing(source, relpath, **kwargs):
        calls.append(relpath)
        return FileResult(relpath, "failed", error=f"{relpath}:6: expression too deeply nested for libcst", transient=True)

    monkeypatch.setattr(importhook, "instrument_source", failing)
    path = tmp_path / "main.py"
    path.write_text(_deep_module(3))
    for _ in range(2):
        importhook.Instrumenter(tmp_path, tmp_path / "cache", "runtime")._rewrite(path, path.read_bytes())
    assert len(calls) == 2 and not (tmp_path / "cache").exists()
    assert capsys.readouterr().err.count("main.py:6: expression too deeply nested") == 2


# -- finding 11: NFKC identifiers ------------------------------------------------------------------------

def test_identifiers_are_compared_and_named_as_python_reads_them():
    result = rewrite('''
        class \ufb01le:
            def \ufb01nd(self, n):
                for i in range(n):
                    pass
                return n
    ''')
    assert result.status == "instrumented", result.error
    assert [r.name for r in result.regions] == ["file.find", "file.find:for@4"]
