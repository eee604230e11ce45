"""Review 84 L2: the methods of a numba `@jitclass` got probes, which numba's nopython mode rejects
when it compiles them."""
import pytest

from instr_helpers import rewrite

SPEC = "spec = [('v', float64)]\n"


@pytest.mark.parametrize("imports, decorator", [
    ("from numba.experimental import jitclass", "@jitclass(spec)"),
    ("from numba.experimental import jitclass as jc", "@jc(spec)"),
    ("import numba", "@numba.experimental.jitclass(spec)"),
    ("import numba as nb", "@nb.experimental.jitclass"),
    ("from numba import experimental", "@experimental.jitclass(spec)"),
])
def test_a_jitclass_is_left_alone_whole(imports, decorator):
    source = (f"{imports}\nfrom numba import float64\n{SPEC}\n\n{decorator}\nclass K:\n"
              "    def __init__(self, v):\n        self.v = v\n\n    def m(self):\n        for i in range(3):\n"
              "            self.v += i\n        return self.v\n\n\ndef plain(x):\n    return x\n")
    result = rewrite(source)
    assert [r.name for r in result.regions] == ["plain"]  # before: K.__init__, K.m and its loop too
    assert [(s.name, s.reason) for s in result.skipped] == [("K", f"JIT-compiled class ({decorator.split('(')[0]})")]


def test_a_class_of_another_jitclass_decorator_is_instrumented():
    result = rewrite("from mylib import compiled\n\n\n@compiled\nclass K:\n    def m(self):\n        return 1\n")
    assert [r.name for r in result.regions] == ["K.m"] and not result.skipped
