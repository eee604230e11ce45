"""Review fixes, seventh round: self-documenting f-string expressions (`f"{(yield v)=}"`) around a
suspension, file names that are not valid UTF-8, and suspensions in a nested def's decorators and
defaults, a class's bases and an `except` clause's type."""

import sys

from instr_helpers import assert_same, code_of, three_ways

# -- finding 5: `{expr=}` shows the user's text, not the rewritten expression ------------------------

SELF_DOCUMENTING = '''\
import asyncio

def g(v):
    print(f"{(yield v)=}")
    print(f"{ (yield v) = }|{(yield 2)=:>6}|{(yield 3)=!s:>6}|{(yield 'a')=:}|{(yield {'k': 1})=}")
    print(f"{(yield v)}{str((yield [1]))[0:1]=}|{(yield 'b') = !a}")

async def c():
    print(f"{await asyncio.sleep(0, 5)=}")
    print(f"{  await asyncio.sleep(0, 'x')  =  :>{await asyncio.sleep(0, 4)}}")
    print(f'{await asyncio.sleep(0, {"d": 2}) =}')

gen = g(7)
print(next(gen))
try:
    for i in range(20):
        print(gen.send(i * 10))
except StopIteration:
    pass
asyncio.run(c())
'''


def test_self_documenting_fstring_shows_the_original_text(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": SELF_DOCUMENTING})
    assert plain.returncode == 0, plain.stderr
    assert "(yield v)=0" in plain.stdout and "await asyncio.sleep(0, 5)=5" in plain.stdout
    assert_same(plain, built, hooked)


def test_self_documenting_fstring_still_brackets_the_suspension():
    code = code_of('''\
        async def c(x):
            return f"{await x=}"
        ''')
    assert 'f"await x={(await (x, (__sp_out__ := __sp_on__) and __sp_exit__(0))[0]' in code
    assert code.count("__sp_enter__(0)") >= 2
