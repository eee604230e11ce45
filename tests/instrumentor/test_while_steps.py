"""A `while` step or epoch loop gets its records (review 67: it was counted per iteration only, with
a warning): `__sp_tick__(N)` opens each iteration at the top of the body, `__sp_untick__(N)` in the
loop's `finally:` closes the last. The program behaves as before: `break`, `else:`, exceptions, a
one-line body (its traceback's columns), threads."""
import sys

from instr_helpers import assert_same, code_of, loop_records, rewrite, three_ways

PROGRAM = '''
import threading


class Opt:
    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1


class Loss:
    def backward(self):
        pass


def get_batch(i):
    return i * 2


def train(opt, max_iters):
    iter_num = 0
    while True:
        x = get_batch(iter_num)
        Loss().backward()
        opt.step()
        iter_num += 1
        if iter_num >= max_iters:
            break
    return iter_num


def epochs(opt):
    epoch = 0
    while epoch < 2:
        for i in range(3):
            Loss().backward()
            opt.step()
        epoch += 1
    else:
        print("else ran", epoch)


def failing(opt):
    n = 0
    while n < 10:
        Loss().backward()
        opt.step()
        n += 1
        if n == 2:
            raise ValueError("boom at", n)


def one_line(opt, n):
    while (n := n - 1) >= 0: opt.step(); Loss().backward()
    return n


def main():
    opt = Opt()
    print(train(opt, 4))
    epochs(opt)
    try:
        failing(opt)
    except ValueError as e:
        print("caught", e.args)
    print(one_line(opt, 3))
    threads = [threading.Thread(target=train, args=(opt, 3)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(opt.steps)
    one_line(None, 2)


main()
'''


def line_of(text: str) -> int:
    (line,) = [n for n, line in enumerate(PROGRAM.splitlines(), 1) if line.strip().startswith(text)]
    return line


def test_a_while_step_loop_ticks_and_closes_in_its_finally():
    code = code_of('''
        def train(opt, n):
            while n > 0:
                opt.step()
                n -= 1
            while n < 3: opt.step(); n += 1
    ''')
    lines = [line.strip() for line in code.splitlines()]
    assert "__sp_tick__(1)" in lines and "while n < 3: __sp_tick__(2); opt.step(); n += 1" in lines
    assert lines.count("__sp_untick__(1)") == 1 and lines.count("__sp_untick__(2)") == 1
    exit_line = lines.index("if __sp_on__: __sp_exit__(1)")
    assert lines[exit_line - 1] == "finally:" and lines[exit_line + 1] == "__sp_untick__(1)"
    assert "__sp_mark__(1)" not in code and "tick as __sp_tick__, untick as __sp_untick__" in code


def test_a_while_loop_that_suspends_or_is_no_step_loop_keeps_its_mark():
    code = code_of('''
        def gen(opt, n):
            while n > 0:
                opt.step()
                yield n
                n -= 1

        async def waits(opt, n):
            while await n.more():
                opt.step()

        def plain(n):
            while n > 0:
                n -= 1
    ''')
    assert "__sp_tick__" not in code and "__sp_untick__" not in code and code.count("__sp_mark__(") >= 3


def test_the_nvtx_backend_has_no_ticks():
    result = rewrite("def train(opt, n):\n    while n > 0:\n        opt.step()\n        n -= 1\n", backend="nvtx")
    assert "__sp_tick__" not in result.code and "__sp_untick__" not in result.code


def test_a_built_program_with_while_loops_behaves_as_before_and_records_their_steps_and_epochs(tmp_path):
    from runtime.runfile import find_run_files

    plain, built, hooked = three_ways(tmp_path, {"main.py": PROGRAM})
    assert plain.stdout == "4\nelse ran 2\ncaught ('boom at', 2)\n-1\n21\n", plain.stderr
    assert plain.returncode == 1 and "AttributeError" in plain.stderr
    assert_same(plain, built, hooked)
    paths = find_run_files(tmp_path / "runs")
    assert len(paths) == 2
    wanted_steps = {f"train:while@{line_of('while True:')}": 10, f"epochs:for@{line_of('for i in range(3):')}": 6,
                    f"failing:while@{line_of('while n < 10:')}": 2, f"one_line:while@{line_of('while (n := n - 1)')}": 4}  # (3, and the one that raised)
    for path in paths:
        steps, epochs = loop_records(path)
        assert {name: len(recs) for name, recs in steps.items()} == wanted_steps, path
        assert {name: len(recs) for name, recs in epochs.items()} == {f"epochs:while@{line_of('while epoch < 2:')}": 2}
        for name, recs in [*steps.items(), *epochs.items()]:
            assert all(r["duration_ns"] > 0 for r in recs), name
            waits = {r["data_wait_ns"] is None for r in recs}
            assert waits == ({False} if ":for@" in name else {True}), name
        # every run of a loop counts its iterations from 0: train's three runs (the main thread's, two threads')
        train = steps[f"train:while@{line_of('while True:')}"]
        assert sorted(r["index"] for r in train) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
        assert sorted(r["step"] for recs in steps.values() for r in recs) == list(range(22))


def test_a_step_schedule_switches_probes_at_the_steps_of_a_while_loop(tmp_path):
    from instr_helpers import project_tree, run, run_env
    from instrumentor.cli import main as cli_main
    from runtime.runfile import find_run_files, read_run

    program = '''
    class Opt:
        def step(self):
            pass


    def inner():
        return 1


    def train(opt, n):
        i = 0
        while i < n:
            inner()
            opt.step()
            i += 1


    train(Opt(), 6)
    '''
    src = project_tree(tmp_path, {"main.py": program})
    cli_main([str(src), "-o", str(tmp_path / "out"), "-q"])
    env = {**run_env(tmp_path), "SCALEPROBE_SCHEDULE": "wait=2,active=2,repeat=1"}
    done = run([sys.executable, "main.py"], cwd=tmp_path / "out", env=env)
    assert done.returncode == 0, done.stderr
    (path,) = find_run_files(tmp_path / "runs")
    recorded = read_run(path)
    assert [r.get("active") for r in recorded.steps] == [False, False, True, True, False, False]
    inner = next(i for i, r in recorded.regions.items() if r.name == "inner")
    # the region probes were on for the two active steps only
    assert sum(stats.visits for path, stats in recorded.profile.items() if path[-1] == inner) == 2


def test_closing_the_last_iteration_never_raises_in_place_of_the_programs_exception():
    import pytest

    from runtime import series

    class Broken:
        _t0 = 1

        def _close(self, t):
            raise RuntimeError("the recorder's")

    def loop():
        series._ticking[(5, id(sys._getframe()))] = Broken()
        try:
            raise ValueError("the program's")
        finally:
            series.untick(5)

    with pytest.raises(ValueError, match="the program's"):
        loop()
    assert not any(key[0] == 5 for key in series._ticking)
