"""What compiling one built module with its original lines costs, per 1000 lines, by module size.

    .venv/bin/python benchmarks/original_lines_compile.py [--lines 1000,5000,25000] [--rounds 3] [--gc-off]

A built tree's module imported without its `opt-scaleprobe` cache (a read-only tree, every spawned
rank's first run) is compiled by `runtime.original_lines._compile`: it parses SRC and OUT, sets
OUT's tree back to SRC's lines (`remap_tree`) and compiles the tree. This generates modules of
functions with a loop each (the shape of review 44's 25,000-line module), instruments them in this
process, and prints, per 1000 lines of the original module, the median over --rounds of:
- `plain compile`: Python's own `compile` of the same instrumented text (the baseline: what the
  module costs Python's loader without original lines);
- `_compile`: the whole compile with original lines, and its ratio to the baseline;
- `remap_tree`: its part of that, on a fresh parse, also as a multiple of the plain compile.
A cost per line that grows with the module's size is superlinear. --gc-off measures with the cyclic
garbage collector off (its passes over the parser's hundreds of thousands of new nodes are most of
what grows). Absolute times are noisy on a shared machine; compare the ratios and the trend.
"""

from __future__ import annotations

import argparse
import ast
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (benchmarks/_args.py)

from _args import int_list, positive_int  # noqa: E402
from instrumentor.regions import IdAllocator  # noqa: E402
from instrumentor.transform import instrument_source  # noqa: E402
from runtime import original_lines  # noqa: E402

FUNCTION = "def f{i}(x):\n    for i in range(2):\n        x += i\n    return x + {i}\n\n"


def make_module(lines: int) -> str:
    return "".join(FUNCTION.format(i=i) for i in range(max(1, lines // 5)))


def timed(fn, gc_off: bool) -> float:
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def measure(lines: int, rounds: int, gc_off: bool) -> None:
    source = make_module(lines)
    result = instrument_source(source, "big.py", ids=IdAllocator(range(10 ** 7)))
    assert result.status == "instrumented", result.error
    code, linemap, columns = result.code, result.linemap, result.columns
    data, src_data = code.encode(), source.encode()
    shifts = original_lines.indent_shifts(source, code, linemap)
    ends = original_lines.statement_ends(ast.parse(source))
    plain, whole, remap = [], [], []
    for _ in range(rounds):  # interleaved, so that a busy moment of the machine hits all three
        plain.append(timed(lambda: compile(code, "/out/big.py", "exec", dont_inherit=True), gc_off))
        whole.append(timed(lambda: original_lines._compile(data, src_data, "/out/big.py", linemap, columns,
                                                           "/src/big.py"), gc_off))
        tree = ast.parse(code)
        remap.append(timed(lambda: original_lines.remap_tree(tree, linemap, shifts, columns, ends), gc_off))
        del tree
    src_lines = source.count("\n")
    per = 1000 / src_lines * 1e3  # seconds for the module -> ms per 1000 original lines
    base, total, part = (statistics.median(v) for v in (plain, whole, remap))
    print(f"{src_lines:7d} lines ({len(linemap):7d} instrumented) | ms per 1000 lines: plain compile "
          f"{base * per:6.1f}, _compile {total * per:6.1f} (ratio {total / base:5.2f}), "
          f"of which remap_tree {part * per:6.1f} ({part / base:4.2f} x the plain compile)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int_list(1), default=[1000, 5000, 25000], help="sizes of the original modules")
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--gc-off", action="store_true", help="measure with the cyclic garbage collector off")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, median of {args.rounds} rounds"
          + (", garbage collector off" if args.gc_off else ""))
    for lines in args.lines:
        measure(lines, args.rounds, args.gc_off)
    return 0


if __name__ == "__main__":
    sys.exit(main())
