"""The import hook's pieces: id shifting, which modules it takes, compiling with original lines."""
import ast
from pathlib import Path

from instr_helpers import code_of
from instrumentor.importhook import Instrumenter, shift_ids

SOURCE = "def train(loader, opt):\n    for b in loader:\n        opt.step()\n    while False:\n        pass\n"


def probe_ids(tree: ast.AST) -> list[int]:
    ids = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("__sp_") and node.args:
            if isinstance(node.args[0], ast.Constant):
                ids.append(node.args[0].value)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "__sp_attr__":
            ids.append(node.slice.value)
    return ids


def test_shift_moves_every_region_id_of_the_runtime_backend():
    tree = ast.parse(code_of(SOURCE))
    before = probe_ids(tree)
    shift_ids(tree, 1000)
    assert probe_ids(tree) == [i + 1000 for i in before]
    define = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__sp_define__")
    assert [r[0] for r in ast.literal_eval(define.args[3])] == [1000, 1001, 1002]


def test_shift_moves_nvtx_attribute_keys_and_lookups():
    tree = ast.parse(code_of(SOURCE, backend="nvtx"))
    shift_ids(tree, 50)
    attrs = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__sp_attr__")
    keys = [k.value for k in attrs.value.keys]
    assert keys == [50, 51, 52]
    assert set(probe_ids(tree)) <= set(keys)


def test_hook_takes_only_the_projects_own_source_modules(tmp_path):
    inst = Instrumenter(tmp_path, None, "runtime")
    (tmp_path / "pkg").mkdir()
    assert inst.owns(tmp_path / "pkg" / "mod.py", "pkg.mod")
    assert not inst.owns(tmp_path / "runtime" / "probe.py", "runtime.probe")
    assert not inst.owns(tmp_path / ".venv" / "lib" / "site-packages" / "x.py", "x")
    assert not inst.owns(tmp_path / "build" / "lib" / "x.py", "x")
    assert not inst.owns(Path("/usr/lib/python3/os.py"), "os")


def test_compiled_code_keeps_the_original_file_and_lines(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("def f(x):\n    y = x\n    return 1 / y\n")
    inst = Instrumenter(tmp_path, None, "nvtx")  # nvtx: ids need no runtime recorder
    code = inst.compile(path, path.read_bytes())
    namespace: dict = {}
    exec(code, namespace)
    assert "__sp_on__" in namespace
    func = namespace["f"]
    assert (func.__code__.co_filename, func.__code__.co_firstlineno) == (str(path), 1)
    try:
        func(0)
    except ZeroDivisionError as exc:
        assert exc.__traceback__.tb_next.tb_lineno == 3
    else:
        raise AssertionError("expected ZeroDivisionError")
