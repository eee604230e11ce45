"""yield and await: every resumption is a visit; suspended time is outside the region."""
import textwrap

from instr_helpers import body_after_header, code_of, rewrite


def test_statement_level_yield_exits_loop_and_function_and_reenters():
    code = code_of('''
        def g(n):
            for i in range(n):
                x = yield i
    ''')
    assert body_after_header(code) == textwrap.dedent('''
        def g(n):
            if __sp_on__: __sp_enter__(0)
            try:
                if __sp_on__: __sp_enter__(1)
                try:
                    for i in range(n):
                        if __sp_on__: __sp_mark__(1)
                        __sp_on__ and __sp_exit__(1); __sp_on__ and __sp_exit__(0)
                        x = yield i
                        __sp_on__ and __sp_enter__(0); __sp_on__ and __sp_enter__(1)
                finally:
                    if __sp_on__: __sp_exit__(1)
            finally:
                if __sp_on__: __sp_exit__(0)
    ''')


def test_yield_inside_an_expression_is_bracketed_in_place():
    code = code_of("def g():\n    print((yield 1), 2)\n")
    assert "print((__sp_on__ and __sp_exit__(0), (yield 1), __sp_on__ and __sp_enter__(0))[1], 2)" in code


def test_return_await_only_exits():
    code = code_of("async def f(x):\n    return await x\n")
    assert body_after_header(code).count("__sp_exit__(0)") == 2
    assert "__sp_on__ and __sp_exit__(0)\n        return await x\n    finally:" in code


def test_awaits_in_headers_and_comprehensions_are_bracketed():
    code = code_of('''
        async def f(q, xs):
            if await q.ready():
                return [await q.get(x) for x in xs]
            while await q.more():
                pass
    ''')
    assert "if (__sp_on__ and __sp_exit__(0), await q.ready(), __sp_on__ and __sp_enter__(0))[1]:" in code
    assert "[(__sp_on__ and __sp_exit__(0), await q.get(x), __sp_on__ and __sp_enter__(0))[1] for x in xs]" in code
    # the while test runs inside the loop region: both are left and re-entered
    assert "while (__sp_on__ and (__sp_exit__(1), __sp_exit__(0)), await q.more(), __sp_on__ and (__sp_enter__(0), __sp_enter__(1)))[1]:" in code


def test_generator_expressions_and_lambdas_are_not_entered():
    code = code_of("async def f(xs):\n    g = (await x for x in xs)\n    return g\n")
    assert "(await x for x in xs)" in code


def test_nested_function_yield_does_not_make_the_outer_a_generator():
    result = rewrite("def outer():\n    def inner():\n        yield 1\n    return inner\n")
    assert [(r.name, r.kind) for r in result.regions] == [("outer", "function"), ("outer.<locals>.inner", "generator")]


def test_word_yield_in_a_name_is_not_a_generator():
    result = rewrite("def f(yield_value):\n    return yield_value\n")
    assert result.regions[0].kind == "function"
