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


def test_install_carries_the_hook_into_spawned_children_and_uninstall_stops(tmp_path):
    import multiprocessing.spawn as mp_spawn

    from instrumentor import importhook

    plain = mp_spawn.get_command_line
    importhook.install(tmp_path, cache_dir=tmp_path / "cache", backend="nvtx")
    try:
        cmd = mp_spawn.get_command_line(tracker_fd=3, pipe_handle=4)
        prog = cmd[cmd.index("-c") + 1]
        # the hook first, with this project and backend, then multiprocessing's own program
        assert prog.index("from instrumentor.spawnhook import child") < prog.index("spawn_main(tracker_fd=3, pipe_handle=4)")
        assert f"child({str(tmp_path.resolve())!r}, {str(tmp_path / 'cache')!r}, 'nvtx')" in prog
        compile(prog, "<child>", "exec")
        assert importhook.owned(tmp_path / "main.py") and not importhook.owned(Path("/usr/lib/python3/os.py"))
    finally:
        importhook.uninstall()
    assert mp_spawn.get_command_line is plain and not importhook.owned(tmp_path / "main.py")
