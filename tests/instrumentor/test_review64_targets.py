"""Review 64, F5: a `yield`/`await` in the target of a `for` statement (`for b[(yield)] in it:`) or of
`with ... as` (`with cm as b.__dict__[(yield)]:`, also `async with`) was not bracketed by the
suspension probes: the generator's regions stayed open while it was suspended, so its consumer's
time was recorded inside it (wrong call paths, `dropped` visits in the end record, and a generator
whose only yield is there got the kind `function`)."""

from __future__ import annotations

import sys

import pytest

from instr_helpers import body_after_header, code_of, project_tree, run, run_env
from instrumentor.cli import main as cli_main
from runtime.runfile import find_run_files, read_run

PROGRAM = '''\
import asyncio
import time


class Box:
    def __setitem__(self, k, v):
        pass

    def __getitem__(self, k):
        return Zero()


class Zero:
    def __add__(self, other):
        return other


class Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def gen():
    b = Box()
    for b[(yield)] in range(3):
        pass


def gen2():
    b = Box()
    with Ctx() as b.__dict__[(yield)]:
        pass


class Opt:
    def step(self):
        pass


def steps(opt):
    b = Box()
    for b[(yield)] in range(2):
        opt.step()


def assign():
    b = Box()
    b[(yield)] = yield 1  # the target after the value
    b[(yield)] += yield 2  # the target before the value


def work():
    time.sleep(0.01)


def drive(g):
    next(g)
    try:
        while True:
            work()
            g.send(1)
    except StopIteration:
        pass


async def tick():
    await asyncio.sleep(0)
    return "k"


async def items():
    for i in range(2):
        yield i


async def coro():
    b = Box()
    for b[await tick()] in range(2):
        pass
    async for b[await tick()] in items():
        pass
    with Ctx() as b.__dict__[await tick()]:
        pass
    async with Ctx() as b.__dict__[await tick()]:
        pass
    b[await tick()] = await tick()
    b[await tick()] += await tick()
    return sorted(vars(b))


def main():
    for g in (gen(), gen2(), steps(Opt()), assign()):
        drive(g)
    print(asyncio.run(coro()))


main()
'''


def test_suspensions_in_for_and_with_targets_are_bracketed():
    code = body_after_header(code_of('''
        def g(b):
            for b[(yield)] in range(3):
                pass
            with open(f) as b.__dict__[(yield 1)]:
                pass
    '''))
    # the loop's target is assigned inside the loop: both regions are left and re-entered in place
    assert ("for b[(__sp_on__ and (__sp_exit__(1), __sp_exit__(0), __sp_left__()), (yield), "
            "__sp_back__() and __sp_on__ and (__sp_enter__(0), __sp_enter__(1)))[1]] in range(3):") in code
    assert "except BaseException: __sp_back__() and __sp_on__ and (__sp_enter__(0), __sp_enter__(1)); raise" in code
    assert ("with open(f) as b.__dict__[((yield (1, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]), "
            "__sp_back__() and __sp_on__ and __sp_enter__(0))[0]]:") in code
    assert "finally: __sp_back__() and __sp_on__ and __sp_enter__(0)" in code
    # an assignment whose target suspends too: each suspension re-enters in place (the value's
    # would re-enter only at the statement's end, after the target's had left the regions again)
    code = body_after_header(code_of("def g(b):\n    b[(yield)] += yield 1\n"))
    assert ("b[(__sp_on__ and (__sp_exit__(0), __sp_left__()), (yield), __sp_back__() and __sp_on__ and "
            "__sp_enter__(0))[1]] += ((yield (1, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]), "
            "__sp_back__() and __sp_on__ and __sp_enter__(0))[0]") in code
    assert "except BaseException: __sp_back__() and __sp_on__ and __sp_enter__(0); raise" in code
    # a function whose only yield is in a `with` target is a generator
    result = code_of("def g(b):\n    with open(f) as b[(yield)]:\n        pass\n")
    assert '(0, "generator", "g", 1)' in result


def test_a_step_loop_that_suspends_in_its_target_is_not_iterated():
    # a step record runs from one next() to the next: it would take in the time suspended there
    code = code_of('''
        def steps(opt, b):
            for b[(yield)] in range(2):
                opt.step()
    ''')
    assert "__sp_iterate__(" not in code and "__sp_mark__(1)" in code


@pytest.mark.parametrize("pure", ["0", "1"])
def test_time_suspended_in_a_target_is_the_consumers(tmp_path, pure):
    src, out = project_tree(tmp_path, {"main.py": PROGRAM}), tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    env = {**run_env(tmp_path), "SCALEPROBE_PURE": pure}
    plain = run([sys.executable, "main.py"], cwd=src, env={**env, "SCALEPROBE_DISABLE": "1"})
    built = run([sys.executable, "main.py"], cwd=out, env=env)
    assert (built.returncode, built.stdout, built.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.stdout == "['k']\n" and plain.returncode == 0
    (path,) = find_run_files(tmp_path / "runs")
    recorded = read_run(path)
    assert not recorded.problems
    assert recorded.end["dropped"] == 0
    kinds = {r.name: r.kind for r in recorded.regions.values()}
    assert (kinds["gen"], kinds["gen2"], kinds["steps"], kinds["coro"]) == ("generator", "generator", "generator",
                                                                               "coroutine")
    visits = {recorded.callpath_name(p): st.visits for p, st in recorded.profile.items()}
    # the consumer's loop and work are the consumer's: never inside a generator's regions
    loop = "main->main:for@101->drive->drive:while@68"
    assert {n: v for n, v in visits.items() if n.endswith("->work")} == {f"{loop}->work": 10}, visits
    for path in recorded.profile:
        names = [recorded.regions[rid].name for rid in path]
        inner = [i for i, n in enumerate(names) if n in ("gen", "gen2", "steps", "assign")]
        assert not inner or not {"drive:while@68", "work"} & set(names[inner[0]:]), names
    # each resumption is a visit of the generator and of its loop: gen 1 (next) + 3 (send), gen2
    # 1 + 1, steps 1 + 2, assign 1 + 4
    assert visits["main->main:for@101->drive->gen->gen:for@34"] == 1
    assert visits[f"{loop}->gen->gen:for@34"] == 3
    assert visits["main->main:for@101->drive->gen2"] == 1 and visits[f"{loop}->gen2"] == 1
    assert visits["main->main:for@101->drive->steps->steps:for@51"] == 1
    assert visits[f"{loop}->steps->steps:for@51"] == 2 and not recorded.steps
    assert visits["main->main:for@101->drive->assign"] == 1 and visits[f"{loop}->assign"] == 4
    # an awaited coroutine runs while its caller's regions are left: `tick` (10 calls, 2 visits
    # each) beside `coro`, never inside it or its loops
    ticks = {n: v for n, v in visits.items() if n.endswith("->tick")}
    assert ticks == {"main->tick": 20}, ticks
