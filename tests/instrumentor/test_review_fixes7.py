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


# -- finding 2: a file name that is not valid UTF-8 --------------------------------------------------

BAD_NAME = '''\
import sys

def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

print(work(10), sys.argv[1:])
if sys.argv[1:] == ["raise"]:
    print(1 /
          0)
'''


def test_file_name_not_valid_utf8_runs_as_the_original(tmp_path):
    import os

    from instrumentor.cli import main as cli_main
    from instr_helpers import run, run_env
    from runtime.runfile import find_run_files, read_run

    name = os.fsdecode(b"run_\xff.py")  # run_\udcff.py
    src, out, runs = tmp_path / "src", tmp_path / "out", tmp_path / "runs"
    src.mkdir()
    (src / name).write_text(BAD_NAME)
    cli_main([str(src), "-o", str(out), "-q", "--main", name])
    env = run_env(tmp_path)
    for args in ([], ["raise"]):
        plain = run([sys.executable, name, *args], cwd=src, env=env)
        built = run([sys.executable, name, *args], cwd=out, env=env)
        built.stdout, built.stderr = (t.replace(str(out), str(src)) for t in (built.stdout, built.stderr))
        assert plain.stdout.startswith("45 ")
        assert_same(plain, built)  # the traceback too: the line map is found under the file's real name
    assert "ZeroDivisionError" in plain.stderr and "print(1 /" in plain.stderr
    # (the launcher itself cannot yet save the traceback of an uncaught exception from such a file)
    hooked = run([sys.executable, "-m", "runtime.launch", "--out", str(runs), "--instrument", name], cwd=src, env=env)
    plain = run([sys.executable, name], cwd=src, env=env)
    assert_same(plain, hooked)
    paths = find_run_files(runs)
    assert len(paths) == 3
    for path in paths:
        recorded = read_run(path)
        assert not recorded.problems, recorded.problems
        assert "work > work:for@5" in {recorded.callpath_name(p, " > ") for p in recorded.profile}
        assert "run_\\\\xff.py" in path.read_text()  # the region table's file name, escaped
