"""Where the probe header goes and what it contains."""
import ast

from instr_helpers import code_of, rewrite
from instrumentor.emit import NvtxBackend
from instrumentor.revision import BUILD, PROBE_ABI


def test_shebang_cookie_docstring_and_future_imports_stay_first():
    code = code_of(
        "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\"\"\"Doc.\"\"\"\n"
        "from __future__ import annotations\nfrom __future__ import division\n\nimport os\n\n"
        "def f():\n    return os.sep\n"
    )
    lines = code.splitlines()
    assert lines[:5] == [
        "#!/usr/bin/env python3", "# -*- coding: utf-8 -*-", '"""Doc."""',
        "from __future__ import annotations", "from __future__ import division",
    ]
    assert lines[5].startswith("from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__")
    assert lines[6] == ('__sp_on__ = __sp_define__(__name__, globals(), "mod.py", ((0, "function", "f", 9),), '
                        f'abi={PROBE_ABI}, build="{BUILD}")')  # review 89 M1: the probe ABI and the build
    assert ast.get_docstring(ast.parse(code)) == "Doc."


def test_header_imports_only_the_probes_used():
    plain = code_of("def f():\n    return 1\n")
    assert "mark as" not in plain and "iterate as" not in plain
    looping = code_of("def f():\n    for i in range(2):\n        pass\n")
    assert "mark as __sp_mark__" in looping and "iterate as" not in looping


def test_region_table_names_every_region_with_kind_name_and_line():
    result = rewrite("class A:\n    def m(self):\n        while True:\n            break\n", relpath="pkg/a.py")
    header = [l for l in result.code.splitlines() if l.startswith("__sp_on__")][0]
    call = ast.parse(header).body[0].value
    assert ast.literal_eval(call.args[2]) == "pkg/a.py"
    assert ast.literal_eval(call.args[3]) == ((0, "method", "A.m", 2), (1, "loop", "A.m:while@3", 3))


def test_module_without_regions_is_unchanged():
    result = rewrite('"""Only data."""\nX = [i for i in range(3)]\n')
    assert result.status == "unchanged" and result.code is None


def test_nvtx_backend_needs_only_nvtx():
    code = code_of("def f():\n    for i in range(2):\n        pass\n", backend="nvtx")
    tree = ast.parse(code)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert imported == {"nvtx"}
    # scaleprobe's runtime.linemap only where it is found, for tracebacks (test_review_fixes2.py)
    assert all(line.startswith("__sp_spec__") for line in code.splitlines() if "runtime" in line)
    assert "runtime" not in code_of("def f():\n    pass\n    return 1\n", backend=NvtxBackend(map_lines=False))
    assert "if __sp_on__: __sp_push__(__sp_attr__[0])" in code
    assert 'get_event_attributes(message="f:for@2")' in code
