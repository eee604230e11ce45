"""Review 67, F4: the step loop is the loop of the optimizer step, not a loop of micro-batches inside
it, a loop over the optimizers, or the `for` around a `while` step loop."""
import sys

from instr_helpers import loop_records, project_tree, rewrite, run, run_env


def kinds(source: str) -> dict[str, str]:
    """Loop name -> kind, for the loops that are not plain loops."""
    return {r.name: r.kind for r in rewrite(source).regions if r.kind in ("loop", "epoch", "step")}


# -- a) gradient accumulation over micro-batches in an inner loop ------------------------------------

ACCUMULATE = '''
    def train_epoch(model, opt, loader):
        for x, y in loader:
            opt.zero_grad()
            for xm, ym in zip(x.chunk(4), y.chunk(4)):
                model.loss(xm, ym).div(4).backward()
            opt.step()

    def main(model, opt, loader):
        for epoch in range(3):
            train_epoch(model, opt, loader)
'''


def test_the_micro_batch_loop_is_not_the_step_loop():
    assert kinds(ACCUMULATE) == {
        "train_epoch:for@3": "step", "train_epoch:for@5": "loop", "main:for@10": "epoch",
    }


def test_micro_batches_in_a_function_that_the_stepping_loop_calls():
    assert kinds('''
        def accumulate(model, x):
            for xm in x.chunk(4):
                model(xm).backward()

        def train(model, opt, loader):
            for epoch in range(3):
                for x in loader:
                    accumulate(model, x)
                    scaler.step(opt)
    ''') == {"accumulate:for@3": "loop", "train:for@7": "epoch", "train:for@8": "step"}


def test_a_batch_loop_without_the_optimizer_step_is_not_the_step_loop_of_the_loop_that_steps():
    # the optimizer steps once per pass over the loader (full-batch gradient descent): that pass is the step
    assert kinds('''
        def train(model, optimizer, loader):
            for it in range(100):
                optimizer.zero_grad()
                for x in loader:
                    model(x).backward()
                optimizer.step()
    ''') == {"train:for@3": "step", "train:for@5": "loop"}


def test_a_sibling_loop_that_steps_takes_in_no_backward_only_loop():
    # the optimizer step is in the second inner loop, not in the outer loop's own body
    assert kinds('''
        def f(model, opt, cases):
            for case in cases:
                for _ in range(3):
                    model(case).backward()
                for _ in range(3):
                    model(case).backward()
                    opt.step()
    ''') == {"f:for@3": "epoch", "f:for@4": "step", "f:for@6": "step"}


def test_an_inner_loop_inside_a_loop_that_trains_itself_is_part_of_its_step():
    # a critic trained n_critic times per generator step (WGAN): the generator step is the step
    assert kinds('''
        def train(gen, critic, opt_g, opt_c, loader):
            for epoch in range(2):
                for x in loader:
                    for _ in range(5):
                        critic.loss(x).backward()
                        opt_c.step()
                    gen.loss(x).backward()
                    opt_g.step()
    ''') == {"train:for@3": "epoch", "train:for@4": "step", "train:for@5": "loop"}


def test_a_step_marker_demotes_the_training_loops_nested_in_it():
    # the heuristic alone takes the inner loop, which steps too
    assert kinds('''
        def train(model, opt, loader):
            for epoch in range(2):
                for x in loader:  # scaleprobe: step
                    for xm in x.chunk(4):
                        model(xm).backward()
                        opt.step()
    ''') == {"train:for@3": "epoch", "train:for@4": "step", "train:for@5": "loop"}


def test_the_loop_around_a_marked_step_loop_is_the_epoch_loop():
    assert kinds('''
        def run(batches):
            for epoch in range(2):
                for b in batches:  # scaleprobe: step
                    process(b)
    ''') == {"run:for@3": "epoch", "run:for@4": "step"}


def test_a_step_marker_on_the_outer_loop_of_an_accumulation_makes_one_step_loop():
    source = ACCUMULATE.replace("for x, y in loader:", "for x, y in loader:  # scaleprobe: step")
    assert kinds(source) == {"train_epoch:for@3": "step", "train_epoch:for@5": "loop", "main:for@10": "epoch"}


def test_a_step_marker_on_the_micro_batch_loop_is_obeyed():
    source = ACCUMULATE.replace("zip(x.chunk(4), y.chunk(4)):", "zip(x.chunk(4), y.chunk(4)):  # scaleprobe: step")
    assert kinds(source) == {"train_epoch:for@3": "epoch", "train_epoch:for@5": "step", "main:for@10": "epoch"}


def test_an_epoch_marker_on_a_loop_that_steps_keeps_the_loop_inside_it_the_step_loop():
    assert kinds('''
        def train(model, opt, loader):
            for epoch in range(3):  # scaleprobe: epoch
                for x in loader:
                    model(x).backward()
                opt.step()
    ''') == {"train:for@3": "epoch", "train:for@4": "step"}


# -- b) several optimizers -----------------------------------------------------------------------------

def test_a_loop_over_the_optimizers_is_not_the_step_loop():
    assert kinds('''
        def main(g_net, d_net, optimizers, data):
            for epoch in range(2):
                for x in data:
                    for opt in optimizers:
                        opt.zero_grad()
                    loss = d_net(g_net(x)).mean()
                    loss.backward()
                    for opt in optimizers:
                        opt.step()
    ''') == {"main:for@3": "epoch", "main:for@4": "step", "main:for@5": "loop", "main:for@9": "loop"}


def test_loops_over_optimizers_by_name_or_by_what_they_do():
    assert kinds('''
        class Module:
            def fit(self, loader):
                for batch in loader:
                    self.loss(batch).backward()
                    for i, (opt, sched) in enumerate(zip(self.optimizers(), self.lr_schedulers)):
                        self.scaler.step(opt)
                        sched.step()
                    for optimizer in self.everything():
                        optimizer.step()
    ''') == {"Module.fit:for@4": "step", "Module.fit:for@6": "loop", "Module.fit:for@9": "loop"}


def test_a_loop_whose_iterable_names_options_is_still_a_step_loop():
    # `opt` of argparse: the loop variable is not what steps
    assert kinds('''
        def train(opt, model, optimizer):
            for i in range(opt.n_iters):
                model(i).backward()
                optimizer.step()
    ''') == {"train:for@3": "step"}


def test_a_schedulers_step_is_no_optimizer_step():
    assert kinds('''
        def f(opt_scheduler):
            for i in range(3):
                opt_scheduler.step()
    ''') == {"f:for@3": "loop"}


# -- c) a `while` (or `async for`) step loop ---------------------------------------------------------------

WHILE_STEPS = '''
    def main(model, opt, batches):
        for epoch in range(3):
            it = iter(batches)
            while True:
                try:
                    x = next(it)
                except StopIteration:
                    break
                model(x).backward()
                opt.step()
'''


def test_a_while_step_loop_makes_the_for_around_it_the_epoch_loop():
    assert kinds(WHILE_STEPS) == {"main:for@3": "epoch", "main:while@5": "step"}
    assert kinds(WHILE_STEPS.replace("while True:", "while True:  # scaleprobe: step")) == {
        "main:for@3": "epoch", "main:while@5": "step",
    }


def test_an_async_for_step_loop_makes_the_for_around_it_the_epoch_loop():
    result = rewrite('''
        async def main(model, opt, stream):
            for epoch in range(3):
                async for x in stream:
                    model(x).backward()
                    opt.step()
    ''')
    assert {r.name: r.kind for r in result.regions if r.kind != "coroutine"} == {
        "main:for@3": "epoch", "main:for@4": "step",
    }


ASYNC_STEPS = """
    async def main(model, opt, stream):
        for epoch in range(3):
            async for x in stream:
                model(x).backward()
                opt.step()
"""


def test_an_async_for_step_loop_is_warned_of_with_its_file_and_line_and_a_while_one_is_not():
    import ast
    import textwrap

    from instrumentor.facts import collect, loop_warnings

    def warnings_of(source: str) -> list[str]:
        source = textwrap.dedent(source)
        return loop_warnings(collect(ast.parse(source), source), "pkg/train.py")

    marked = warnings_of(ASYNC_STEPS.replace("async for x in stream:", "async for x in stream:  # scaleprobe: step"))
    assert len(marked) == 1 and marked[0].startswith("pkg/train.py:4: `async for` loop marked `# scaleprobe: step`")
    assert "no step records" in marked[0]
    found = warnings_of(ASYNC_STEPS)
    assert len(found) == 1 and found[0].startswith("pkg/train.py:4: `async for` loop found as the step loop")
    # a `while` step loop is ticked and recorded (tests/instrumentor/test_while_steps.py)
    assert warnings_of(WHILE_STEPS) == [] and warnings_of(ACCUMULATE) == []


def test_instrument_says_the_warning_on_every_build_and_in_the_diff(tmp_path):
    from instr_helpers import instrument_cli

    src = project_tree(tmp_path, {"main.py": "import train\n", "train.py": ASYNC_STEPS})
    want = "instrument: warning: train.py:4: `async for` loop found as the step loop"
    for attempt in ("first", "reused"):  # an unchanged file's warning comes from the state on a re-run
        built = instrument_cli(str(src), "-o", str(tmp_path / "out"), "-q")
        assert built.returncode == 0 and any(line.startswith(want) for line in built.stderr.splitlines()), (
            attempt, built.stderr)
    diff = instrument_cli(str(src), "--diff")
    assert any(line.startswith(want) for line in diff.stderr.splitlines()), diff.stderr


# -- end to end: the records of a built program ----------------------------------------------------------

PROGRAM = '''
class Tensor:
    def __init__(self, v):
        self.v = v

    def chunk(self, n):
        return [Tensor(self.v / n) for _ in range(n)]

    def backward(self):
        GRADS.append(self.v)


class Opt:
    def __init__(self):
        self.steps = 0

    def zero_grad(self):
        GRADS.clear()

    def step(self):
        self.steps += 1


GRADS = []


def loader(n):
    for i in range(n):
        yield Tensor(float(i))


def train_epoch(opt, n):
    for x in loader(n):
        opt.zero_grad()
        for xm in x.chunk(4):
            xm.backward()
        opt.step()


def main():
    opt = Opt()
    for epoch in range(3):
        train_epoch(opt, 5)
    print(opt.steps)


main()
'''


def line_of(text: str) -> int:
    (line,) = [n for n, line in enumerate(PROGRAM.splitlines(), 1) if line.strip() == text]
    return line


def test_a_built_accumulating_program_records_optimizer_steps_and_epochs(tmp_path):
    from instrumentor.cli import main as cli_main
    from runtime.runfile import find_run_files

    src = project_tree(tmp_path, {"main.py": PROGRAM})
    cli_main([str(src), "-o", str(tmp_path / "out"), "-q"])
    env, runs = run_env(tmp_path), tmp_path / "runs"
    built = run([sys.executable, "main.py"], cwd=tmp_path / "out", env=env)
    assert (built.returncode, built.stdout) == (0, "15\n"), built.stderr
    hooked = run([sys.executable, "-m", "runtime.launch", "--out", str(runs / "hook"), "--instrument", "main.py"],
                 cwd=src, env=env)
    assert (hooked.returncode, hooked.stdout) == (0, "15\n"), hooked.stderr
    paths = find_run_files(runs)
    assert len(paths) == 2
    for path in paths:
        steps, epochs = loop_records(path)
        assert {name: len(recs) for name, recs in steps.items()} == {f"train_epoch:for@{line_of('for x in loader(n):')}": 15}
        assert {name: len(recs) for name, recs in epochs.items()} == {f"main:for@{line_of('for epoch in range(3):')}": 3}
