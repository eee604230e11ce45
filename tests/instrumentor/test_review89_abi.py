"""Review 89: the emitted header names its probe ABI and build (M1); an already-instrumented module
carried over without its build's .scaleprobe/ keeps its ids, which no other module gets (L1); the
reserved-name check sees `except ... as`, match captures and type parameters (L2); the NVTX backend
reads SCALEPROBE_DISABLE as the runtime's flags do (L4)."""
import ast
import json
import shutil
import sys

import pytest

from instr_helpers import code_of, rewrite, run, run_env
from instrumentor.cli import main as cli_main
from instrumentor.importhook import shift_ids
from instrumentor.revision import BUILD, PROBE_ABI, REWRITE_REVISION


def define_call(code: str) -> ast.Call:
    return next(n for n in ast.walk(ast.parse(code))
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__sp_define__")


# ----- M1 ---------------------------------------------------------------------------------------------


def test_the_header_passes_the_probe_abi_and_the_build_to_define():
    call = define_call(code_of("def f():\n    return 1\n"))
    assert {k.arg: ast.literal_eval(k.value) for k in call.keywords} == {"abi": PROBE_ABI, "build": BUILD}
    assert BUILD.endswith(f".{REWRITE_REVISION}") and REWRITE_REVISION >= 15


def test_the_instrumentor_writes_for_the_runtimes_abi():
    from runtime import probe

    assert PROBE_ABI == probe.ABI


def test_the_import_hook_shifts_the_table_of_a_header_with_keywords():
    tree = ast.parse(code_of("def f():\n    for i in range(2):\n        pass\n"))
    shift_ids(tree, 500)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__sp_define__")
    assert [r[0] for r in ast.literal_eval(call.args[3])] == [500, 501]


def test_the_manifest_names_the_build_and_its_abi(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("def f():\n    return 1\n\n\nf()\n")
    assert cli_main([str(src), "-o", str(tmp_path / "out"), "-q"]) == 0
    head = json.loads((tmp_path / "out/.scaleprobe/manifest.json").read_text())
    assert (head["build"], head["abi"]) == (BUILD, PROBE_ABI)
    assert cli_main([str(src), "-o", str(tmp_path / "nv"), "-q", "--backend", "nvtx"]) == 0
    head = json.loads((tmp_path / "nv/.scaleprobe/manifest.json").read_text())
    assert head["build"] == BUILD and "abi" not in head  # NVTX code calls no runtime.probe


# ----- L1 ---------------------------------------------------------------------------------------------

MAIN = '''\
import helper


class Opt:
    def step(self):
        return 1


def train():
    for i in range(2):
        Opt().step()
    return helper.h()


print(train())
'''


# four regions: a block of ids wide enough to take those of main.py's three
HELPER4 = "def h():\n    return a() + b() + c()\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n\n\n" \
          "def c():\n    return 4\n"


def carried_tree(tmp_path):
    """SRC with main.py instrumented by another build (its .scaleprobe/ left behind) and a new helper.py."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "main.py").write_text(MAIN)
    (first / "helper.py").write_text("def h():\n    return 7\n")
    assert cli_main([str(first), "-o", str(tmp_path / "b1"), "-q"]) == 0
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(tmp_path / "b1/main.py", src / "main.py")  # ids from 0
    (src / "helper.py").write_text("def h():\n    return 7\n")  # not instrumented
    return src


def test_a_carried_module_keeps_its_ids_and_no_other_module_gets_them(tmp_path):
    src = carried_tree(tmp_path)
    carried = {r[0] for r in ast.literal_eval(define_call((src / "main.py").read_text()).args[3])}
    out = tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    assert (out / "main.py").read_bytes() == (src / "main.py").read_bytes()  # copied byte for byte
    helper = {r[0] for r in ast.literal_eval(define_call((out / "helper.py").read_text()).args[3])}
    assert helper and not helper & carried  # before: helper.py's h got id 0, as Opt.step has
    manifest = json.loads((out / ".scaleprobe/manifest.json").read_text())["regions"]
    assert {r["id"] for r in manifest} == carried | helper  # the carried table is in the manifest too
    done = run([sys.executable, "main.py"], cwd=out, env=run_env(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "7\n", "")


def test_a_module_carried_in_later_moves_the_ids_an_earlier_build_gave(tmp_path):
    src = carried_tree(tmp_path)
    built = (src / "main.py").read_text()
    (src / "main.py").write_text("import helper\nprint(helper.h())\n")
    (src / "helper.py").write_text(HELPER4)
    out = tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    first = {r[0] for r in ast.literal_eval(define_call((out / "helper.py").read_text()).args[3])}
    (src / "main.py").write_text(built)  # now carried over, with ids the helper's block holds
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    carried = {r[0] for r in ast.literal_eval(define_call(built).args[3])}
    helper = {r[0] for r in ast.literal_eval(define_call((out / "helper.py").read_text()).args[3])}
    assert first & carried and not helper & carried
    done = run([sys.executable, "main.py"], cwd=out, env=run_env(tmp_path))
    assert (done.returncode, done.stdout) == (0, "7\n"), done.stderr


def test_two_carried_modules_of_separate_builds_are_warned_of(tmp_path, capsys):
    src = carried_tree(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other/helper.py").write_text(HELPER4)
    assert cli_main([str(tmp_path / "other"), "-o", str(tmp_path / "b2"), "-q", "--all"]) == 0
    shutil.copy(tmp_path / "b2/helper.py", src / "helper.py")
    capsys.readouterr()
    assert cli_main([str(src), "-o", str(tmp_path / "out")]) == 0
    said = capsys.readouterr()
    assert "main.py: already instrumented by another build than helper.py: both use region id" in said.out + said.err


# ----- L2 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, name", [
    ("def f():\n    try:\n        pass\n    except ValueError as __sp_enter__:\n        pass\n", "__sp_enter__"),
    ("def g(x):\n    match x:\n        case [__sp_exit__]:\n            return 2\n", "__sp_exit__"),
    ("def g(x):\n    match x:\n        case {'a': 1} as __sp_mark__:\n            return 2\n", "__sp_mark__"),
    ("def g(x):\n    match x:\n        case [1, *__sp_left__]:\n            return 2\n", "__sp_left__"),
    ("def g(x):\n    match x:\n        case {'a': 1, **__sp_back__}:\n            return 2\n", "__sp_back__"),
])
def test_names_bound_by_except_and_match_are_reserved_too(source, name):
    result = rewrite(source)
    assert result.status == "failed" and f"defines {name!r}; names __sp_*__ are reserved" in result.error


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameters are Python 3.12+")
@pytest.mark.parametrize("source", ["def f[__sp_on__](x):\n    return x\n",
                                    "class C[**__sp_on__]:\n    def m(self):\n        return 1\n",
                                    "type A[*__sp_on__] = tuple\n\ndef f():\n    return 1\n"])
def test_type_parameters_are_reserved_too(source):
    result = rewrite(source)
    assert result.status == "failed" and "defines '__sp_on__'" in result.error


# ----- L4 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, on", [(None, True), ("", True), ("1", False), ("true", False), ("YES", False),
                                       ("On", False), ("0", True), ("no", True), ("2", True)])
def test_nvtx_code_reads_scaleprobe_disable_as_the_runtime_reads_its_flags(value, on, monkeypatch):
    code = code_of("def f():\n    return 1\n", backend="nvtx")
    line = next(l for l in code.splitlines() if l.startswith("__sp_on__ = "))
    if value is None:
        monkeypatch.delenv("SCALEPROBE_DISABLE", raising=False)
    else:
        monkeypatch.setenv("SCALEPROBE_DISABLE", value)
    space: dict = {}
    exec(line, space)
    assert space["__sp_on__"] is on
    if value:  # what the runtime backend makes of the same value: off where the runtime is off
        from runtime.config import ConfigError, from_env

        try:
            disabled = from_env({"SCALEPROBE_DISABLE": value}).disable
        except ConfigError:
            disabled = None  # refused there (exit 2); the NVTX code cannot refuse it: ranges on
        assert on is (disabled is not True)
