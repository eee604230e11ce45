"""A built module compiled with its original lines gets the same positions from the fast
`remap_tree` as from the plain walk it replaced (review 44 F5: a 25,000-line module spent seconds
there at its first import). No timings here: `benchmarks/original_lines_compile.py` measures."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from instrumentor.cli import main as instrument
from instrumentor.regions import IdAllocator
from instrumentor.transform import instrument_source
from runtime import original_lines
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# what moves columns in every way: re-indented bodies, one-line defs and inline loop bodies (lines
# changed in place: columns.json), suspensions, compound statements whose ends come from SRC
BLOCK = '''\
def one{i}(a): b = a + 1; return b * {i}


def loops{i}(r, loader):
    d = {{}}
    for k in r: d[k] = k
    for batch in loader:
        d[batch] = (
            batch
            + {i}
        )
    while d:
        d.popitem()
    return d


class C{i}:
    """Class {i}."""

    @staticmethod
    def method(x, *args, key=None, **kw):
        with open(__file__) as handle:
            try:
                data = handle.read(x)
            except OSError as exc:
                raise ValueError(f"{{x!r:>{i}}} {{exc}}") from exc
            finally:
                pass
        return [c for c in data if c], {{k: v for k, v in kw.items()}}, lambda y=x: y


def gen{i}(n):
    total = yield n
    for v in range(n):
        total = yield (v, total)
    yield from range(n)


async def agen{i}(items):
    async for item in items:
        await item
    async with items as ctx:
        return ctx


def match{i}(value):
    match value:
        case [first, *rest] if first:
            return rest
        case {{"key": k, **others}}:
            return k, others
        case _:
            return None
'''


def make_module(blocks: int) -> str:
    return "".join(BLOCK.format(i=i) for i in range(blocks))


def reference_remap_tree(tree, linemap, shifts=None, columns=None, ends=None):
    """`remap_tree` as it was before review 44 F5, kept as its specification: one node at a time,
    in the plainest form."""
    last = len(linemap)
    if not last:
        return tree
    points = {int(line): dict(map(tuple, pairs)) for line, pairs in (columns or {}).items()}

    def column(line, col):
        found = points.get(line)
        if found is None:
            return max(0, col + shifts[line - 1])
        if col in found:
            return found[col]
        before = [c for c in found if c <= col]
        return found[max(before)] if before else 0

    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        end = getattr(node, "end_lineno", None) or lineno
        if shifts is not None:
            node.col_offset = column(min(lineno, last), node.col_offset)
            if getattr(node, "end_col_offset", None) is not None:
                node.end_col_offset = column(min(end, last), node.end_col_offset)
        node.lineno = linemap[min(lineno, last) - 1]
        node.end_lineno = max(node.lineno, linemap[min(end, last) - 1])
        if ends:
            found = ends.get((node.lineno, node.col_offset, type(node).__name__))
            if found is not None:
                node.end_lineno, node.end_col_offset = found
        if node.end_lineno == node.lineno and node.end_col_offset is not None and node.end_col_offset < node.col_offset:
            node.end_col_offset = node.col_offset
    return tree


def positions(code) -> list:
    """Every code object's lines and positions, nested ones included, in a stable order."""
    found = []
    todo = [code]
    while todo:
        c = todo.pop(0)
        found.append((getattr(c, "co_qualname", c.co_name), c.co_firstlineno, list(c.co_lines()),
                      list(c.co_positions()) if hasattr(c, "co_positions") else None))
        todo.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    return found


@pytest.fixture(scope="module")
def built():
    source = make_module(30)
    result = instrument_source(source, "big.py", ids=IdAllocator(range(10 ** 6)))
    assert result.status == "instrumented", result.error
    assert result.columns, "the module must have lines changed in place"
    return source, result


def _inputs(source, result):
    shifts = original_lines.indent_shifts(source, result.code, result.linemap)
    ends = original_lines.statement_ends(ast.parse(source))
    assert min(shifts) < 0 and ends  # re-indented bodies, compound statements
    return shifts, ends


@pytest.mark.parametrize("with_shifts", [True, False], ids=["shifts", "lines-only"])
def test_every_node_gets_the_positions_the_plain_walk_gives(built, with_shifts):
    source, result = built
    shifts, ends = _inputs(source, result)
    args = (result.linemap, shifts, result.columns, ends) if with_shifts else (result.linemap,)
    fast = original_lines.remap_tree(ast.parse(result.code), *args)
    plain = reference_remap_tree(ast.parse(result.code), *args)
    assert ast.dump(fast, include_attributes=True) == ast.dump(plain, include_attributes=True)


def test_odd_maps_give_the_same_positions_as_the_plain_walk():
    # what the instrumentor never writes but a damaged or foreign map may hold: lines mapped
    # backwards (an end before the start), a map shorter than the file, shifts that would make a
    # column negative, changed lines without a pair for a column, ends found for every kind
    import random

    code = make_module(1)
    count = len(code.splitlines())
    rng = random.Random(44)
    for _ in range(150):
        linemap = [rng.randint(1, count) for _ in range(rng.randint(count // 2, count))]
        shifts = [rng.randint(-12, 6) for _ in range(len(linemap))]
        columns = {str(line): [[c, rng.randint(0, 40)] for c in rng.sample(range(40), rng.randint(1, 4))]
                   for line in rng.sample(range(1, len(linemap) + 1), 5)}
        probe = reference_remap_tree(ast.parse(code), linemap, shifts, columns)
        ends = {(n.lineno, n.col_offset, type(n).__name__): (n.lineno + rng.randint(0, 3), rng.randint(0, 30))
                for n in ast.walk(probe) if isinstance(n, (ast.stmt, ast.excepthandler)) and rng.random() < 0.5}
        for args in ((linemap,), (linemap, shifts), (linemap, shifts, columns), (linemap, shifts, columns, ends)):
            fast = original_lines.remap_tree(ast.parse(code), *args)
            plain = reference_remap_tree(ast.parse(code), *args)
            assert ast.dump(fast, include_attributes=True) == ast.dump(plain, include_attributes=True)


def test_the_compiled_module_has_the_same_line_table(built):
    source, result = built
    shifts, ends = _inputs(source, result)
    expected = compile(reference_remap_tree(ast.parse(result.code), result.linemap, shifts, result.columns, ends),
                       "/out/big.py", "exec", dont_inherit=True)
    code = original_lines._compile(result.code.encode(), source.encode(), "/out/big.py", result.linemap,
                                   result.columns, "/src/big.py")
    assert code is not None
    assert positions(code) == positions(expected)
    assert len(positions(code)) > 30 * 8  # every function, method, comprehension and lambda


MAIN = '''\
import json
import sys

import big


def main():
    code = big.__loader__.get_code("big")  # what the import compiled: no cache is written
    todo, found = [code], []
    while todo:
        c = todo.pop(0)
        found.append([c.co_qualname, c.co_firstlineno, list(c.co_lines()), list(c.co_positions())])
        todo.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    print(json.dumps(found))


main()
'''


@pytest.mark.skipif(sys.version_info < (3, 11), reason="co_qualname and co_positions")
def test_a_built_tree_imports_a_large_module_with_the_same_line_table(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    source = make_module(60)
    (src / "big.py").write_text(source)
    (src / "main.py").write_text(MAIN)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1", SCALEPROBE_OUT=str(tmp_path / "runs"))
    run = subprocess.run([sys.executable, str(out / "main.py")], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert not list(out.rglob("*.opt-scaleprobe*.pyc"))  # compiled at the import, not read back
    text = (out / "big.py").read_text()
    linemap = json.loads((out / ".scaleprobe" / "linemap.json").read_text())["big.py"]
    columns = json.loads((out / ".scaleprobe" / "columns.json").read_text()).get("big.py")
    expected = compile(reference_remap_tree(ast.parse(text), linemap, original_lines.indent_shifts(source, text, linemap),
                                            columns, original_lines.statement_ends(ast.parse(source))),
                       str(out / "big.py"), "exec", dont_inherit=True)
    as_json = json.loads(json.dumps([list(p) for p in positions(expected)]))
    assert json.loads(run.stdout) == as_json
