"""Functions and methods: before/after snippets of the rewrite."""
import textwrap

import pytest

from instr_helpers import body_after_header, code_of, rewrite


def test_function_body_is_wrapped_in_try_finally_after_the_docstring():
    code = code_of('''
        def f(x):
            """Doc."""
            # why
            return x
    ''')
    assert body_after_header(code) == textwrap.dedent('''
        def f(x):
            """Doc."""
            if __sp_on__: __sp_enter__(0)
            try:
                # why
                return x
            finally:
                if __sp_on__: __sp_exit__(0)
    ''')


def test_one_line_function_becomes_a_block():
    code = code_of("def f(x): return x  # note\n")
    assert body_after_header(code) == textwrap.dedent('''\
        def f(x):  # note
            if __sp_on__: __sp_enter__(0)
            try:
                return x
            finally:
                if __sp_on__: __sp_exit__(0)
    ''')


def test_kinds_and_qualified_names():
    result = rewrite('''
        class C:
            def m(self):
                def inner():
                    return 1
                return inner()

            class D:
                def n(self):
                    return 2

        def g():
            yield 1

        async def co():
            return 1

        async def ag():
            yield 1
    ''')
    got = [(r.kind, r.name) for r in result.regions]
    assert got == [
        ("method", "C.m"), ("function", "C.m.<locals>.inner"), ("method", "C.D.n"),
        ("generator", "g"), ("coroutine", "co"), ("async_generator", "ag"),
    ]
    assert [r.line for r in result.regions] == [3, 4, 9, 12, 15, 18]


def test_ids_are_unique_and_keys_distinguish_redefinitions():
    result = rewrite('''
        class C:
            @property
            def x(self):
                return 1

            @x.setter
            def x(self, v):
                self.v = v
    ''')
    assert [r.key for r in result.regions] == ["C.x", "C.x#2"]
    assert len({r.id for r in result.regions}) == 2


@pytest.mark.parametrize("source, reason", [
    ("from typing import overload\n@overload\ndef f(x: int) -> int: ...\n", "overload stub"),
    ("import torch\n@torch.jit.script\ndef f(x):\n    return x\n", "TorchScript (@torch.jit.script)"),
    ("import torch\nclass M:\n    @torch.jit.script_method\n    def f(self, x):\n        return x\n", "TorchScript (@torch.jit.script_method)"),
    ("import torch\n@torch.jit.interface\nclass I:\n    def f(self, x):\n        return x\n", "TorchScript class"),
    # kernels and functions that a JIT compiles from their source or bytecode (review 12)
    ("import triton\n@triton.jit\ndef k(x_ptr, n):\n    for i in range(n):\n        pass\n", "JIT-compiled (@triton.jit)"),
    ("import triton\n@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef k(x_ptr, n):\n    return n\n",
     "JIT-compiled (@triton.autotune)"),
    ("from numba import njit\n@njit(cache=True)\ndef f(a):\n    s = 0\n    for x in a:\n        s += x\n    return s\n",
     "JIT-compiled (@njit)"),
    ("import numba\n@numba.cuda.jit\ndef f(a):\n    a[0] = 1\n", "JIT-compiled (@numba.cuda.jit)"),
    ("import jax\n@jax.jit\ndef f(x):\n    return x * 2\n", "JIT-compiled (@jax.jit)"),
    ("import functools, jax\n@functools.partial(jax.jit, static_argnums=0)\ndef f(n, x):\n    return x * n\n",
     "JIT-compiled (@jax.jit)"),
    ("def f():\n    pass\n", "empty body"),
    ("def f():\n    '''Only a docstring.'''\n", "empty body"),
    ("def f(): ...\n", "empty body"),
    ("def f():  # scaleprobe: off\n    return 1\n", "# scaleprobe: off"),
    ("# scaleprobe: off\n@staticmethod\ndef f():\n    return 1\n", "# scaleprobe: off"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    def f():\n        return 1\n", "TYPE_CHECKING block"),
])
def test_constructs_that_are_not_rewritten(source, reason):
    result = rewrite(source)
    assert result.status == "unchanged"
    assert [s.reason for s in result.skipped] == [reason]


def test_type_checking_else_branch_is_rewritten():
    result = rewrite('''
        import typing
        if typing.TYPE_CHECKING:
            def f():
                return 1
        else:
            def g():
                return 2
    ''')
    assert [r.name for r in result.regions] == ["g"]


def test_lambdas_comprehensions_and_class_bodies_are_left_alone():
    source = '''
        class C:
            items = [i for i in range(3)]
            key = lambda self: 1
            for name in ("a", "b"):
                locals()[name] = 1

        def f():
            return [x for x in range(2)]
    '''
    code = code_of(source)
    body = body_after_header(code)
    assert textwrap.dedent(source).split("def f")[0] == body.split("def f")[0]


def test_module_that_defines_reserved_names_is_refused():
    result = rewrite("__sp_enter__ = print\ndef f():\n    return 1\n")
    assert result.status == "failed"
    assert "mod.py:1" in result.error and "__sp_enter__" in result.error


def test_already_instrumented_module_is_reported_as_such():
    code = code_of("def f():\n    return 1\n")
    again = rewrite(code)
    assert again.status == "already"
    assert again.code is None


@pytest.mark.parametrize("source", ["x = 1\n\n__sp_on__ = 3\ndef f():\n    return 1\n",
                                    "import os\n__sp_on__ = os.environ.get('X')\n"])
def test_a_module_binding_sp_on_itself_is_refused_not_passed_as_instrumented(source):
    """Review 30: `__sp_on__ = 3` in a user's module made it "already instrumented": copied without
    probes, files failed 0 (and under nvtx "already instrumented with --backend runtime")."""
    result = rewrite(source)
    assert result.status == "failed"
    assert "__sp_on__" in result.error and "reserved" in result.error


def test_syntax_error_names_file_and_line():
    result = rewrite("def f():\n    return 1\n\ndef g(:\n    pass\n", relpath="pkg/bad.py")
    assert result.status == "failed"
    assert result.error.startswith("pkg/bad.py:4:")
