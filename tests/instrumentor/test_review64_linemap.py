"""Review 64 F3, F4: original lines that read like probe lines (a backslash-continued header's body,
which gets the loop's inline mark at its start; a string's lines quoting probe code) are original
lines of the line map, so f_lineno, tracebacks and inspect see the user's lines in a built tree and
under --instrument alike."""

from collections import Counter

from instr_helpers import assert_same, rewrite, three_ways

# main.py has probes of its own: the modules it imports get their lines (docs/instrument.md)
MAIN = '''\
def main():
    import lay
    lay.run()
main()
'''

# -- F3: a backslash-continued header ---------------------------------------------------------------

CONTINUED = '''\
import sys, asyncio, inspect, contextlib
out = []
def L(tag):
    out.append((tag, sys._getframe(1).f_lineno))
    return tag
def f1(): \\
    L("f1")
def f2():
    while L("w") == "x": \\
        L("never")
    for i in range(1): \\
        L("for1"); L("for1b")
    else: \\
        L("else")
    with contextlib.nullcontext(): \\
        L("with")
    try: \\
        L("try")
    finally: \\
        L("fin")
def g1(): yield L("g1a"); yield L("g1b")
def g2():
    try: \\
        x = yield L("g2")
    finally: \\
        L("g2fin")
    for i in range(1): \\
        y = yield L("g2loop")
async def a1():
    async def it():
        yield 1
    async for i in it(): \\
        L("afor")
    await asyncio.sleep(0); L("a1")
def h():
    for i in range(1): \\
        x = [1][0] + 1 / 0
class C:
    for i in range(1): \\
        L("classloop")
def run():
    f1(); f2(); list(g1()); list(g2()); asyncio.run(a1())
    for tag, line in out:
        print(tag, line)
    print(inspect.getsourcelines(run)[1], inspect.getsourcelines(C)[1], inspect.getsourcelines(h)[1])
    h()
'''


def test_backslash_continued_headers_keep_the_original_lines(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN, "lay.py": CONTINUED})
    assert plain.returncode == 1 and "classloop 40\n" in plain.stdout and "for1b 12\n" in plain.stdout
    assert "g1b 21\n" in plain.stdout and "g2loop 28\n" in plain.stdout and "41 38 35\n" in plain.stdout
    assert 'lay.py", line 37, in h\n    x = [1][0] + 1 / 0\n                 ~~^~~' in plain.stderr
    assert_same(plain, built, hooked)


def test_a_continuation_line_that_starts_with_the_inline_mark_is_an_original_line():
    source = 'def f():\n    for i in range(1): \\\n        print(i)\n    return 1\n'
    result = rewrite(source)
    out = result.code.splitlines()
    body = next(n for n, line in enumerate(out) if line.lstrip().startswith("__sp_on__ and __sp_mark__("))
    assert out[body].endswith("; print(i)")
    assert result.linemap[body] == 3
    assert result.linemap[next(n for n, line in enumerate(out) if line.strip() == "return 1")] == 4
    assert result.columns  # the line changed in place: its columns are mapped (linemap.changed_lines)


# -- F4: a string's lines that read as probe code ---------------------------------------------------

STRINGS = '''\
import sys, traceback, inspect
HELP = """
How probes look:
    if __sp_on__: __sp_enter__(0)
    try:
        body
    finally:
        if __sp_on__: __sp_exit__(0)
__sp_on__ = define(...)
"""
NOTE = \'\'\'
__sp_ is the prefix of scaleprobe names\'\'\'
LONG = "\\
__sp_on__ and __sp_mark__(1)"
def boom():
    x = 1
    return x / 0
def run():
    print("line", sys._getframe().f_lineno)
    for i in range(1):
        print("loop line", sys._getframe().f_lineno)
    try:
        boom()
    except ZeroDivisionError:
        traceback.print_exc(file=sys.stdout)
    print(inspect.getsourcelines(boom)[1])
    boom()
'''


def test_string_lines_that_read_as_probe_code_keep_the_original_lines(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN, "lay.py": STRINGS})
    assert plain.returncode == 1 and "line 19\nloop line 21\n" in plain.stdout and "\n15\n" in plain.stdout
    assert 'lay.py", line 17, in boom\n    return x / 0\n' in plain.stderr
    assert_same(plain, built, hooked)


# -- a guard's `try:` is not a line of a string in the guarded statement ----------------------------

GUARDED_STRING = '''\
import sys, inspect
def where():
    return sys._getframe(1).f_lineno
def gen():
    x = yield where(), """
        try:
"""
    print("after yield at", where())
    yield where()
def run():
    g = gen()
    print(next(g)[0])
    print(g.send(1))
    print(inspect.getsourcelines(run)[1])
    1 / 0
'''


def test_a_strings_try_line_is_not_taken_for_the_guards(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN, "lay.py": GUARDED_STRING})
    assert plain.returncode == 1 and plain.stdout == "5\nafter yield at 8\n9\n10\n"
    assert_same(plain, built, hooked)


# -- where the code does not tokenize: the text decides, and the alignment follows the splits --------

def test_untokenizable_code_falls_back_to_the_text_and_an_alignment_that_follows_splits():
    from instrumentor import linemap

    source = ('import sys\ndef g(): yield 1; yield (yield 2)\ndef f():\n    for i in range(1): \\\n'
              '        print(i)\n    print("after")\n')
    splits = {2: 2}  # the one-line def became three lines (its yields bracketed)
    result = rewrite(source)
    out = linemap.split_lines(result.code)
    assert linemap.compute_linemap(source, result.code, splits) == result.linemap
    lines_of = {text: sorted({m for line, m in zip(out, result.linemap) if text in line})
                for text in ("yield", "def f", "print(i)", 'print("after")')}
    assert lines_of == {"yield": [2], "def f": [3], "print(i)": [5], 'print("after")': [6]}
    # an unterminated string at the end: tokenize fails, the inline mark's line is taken for a probe
    # line by its text (the counts disagree) and the lines are aligned, a one-line def's lines on its line
    broken = result.code + 'X = """\n'
    mapped = linemap.compute_linemap(source + 'X = """\n', broken, splits)
    text_flags = linemap.inserted_lines(out)
    assert [m for m, f in zip(mapped, text_flags) if not f] == [m for m, f in zip(result.linemap, text_flags) if not f]
    assert mapped[-1] == 7
    assert linemap.logical_starts(linemap.split_lines(broken)) is None
    flags = linemap.inserted_lines(out, linemap.logical_starts(out))
    assert sum(text_flags) == sum(flags) + 1
    assert {n: k - 1 for n, k in Counter(n for n, f in zip(result.linemap, flags) if not f).items() if k > 1} == splits
