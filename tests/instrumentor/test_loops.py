"""Loops, epoch and step loops: before/after snippets."""
import textwrap

from instr_helpers import body_after_header, code_of, rewrite


def test_loop_statement_is_a_region_with_a_mark_per_iteration():
    code = code_of('''
        def f(xs):
            # the loop
            for x in xs:
                # first
                print(x)
            else:
                print("done")
    ''')
    assert body_after_header(code) == textwrap.dedent('''
        def f(xs):
            if __sp_on__: __sp_enter__(0)
            try:
                # the loop
                if __sp_on__: __sp_enter__(1)
                try:
                    for x in xs:
                        if __sp_on__: __sp_mark__(1)
                        # first
                        print(x)
                    else:
                        print("done")
                finally:
                    if __sp_on__: __sp_exit__(1)
            finally:
                if __sp_on__: __sp_exit__(0)
    ''')


def test_one_line_loop_gets_an_inline_mark():
    code = code_of("while n: n -= 1\n")
    assert "while n: __sp_on__ and __sp_mark__(0); n -= 1\n" in code


def test_module_level_loop_is_named_after_the_module():
    result = rewrite("for i in range(2):\n    pass\n")
    assert [(r.kind, r.name) for r in result.regions] == [("loop", "<module>:for@1")]


TRAIN = '''
    def train(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
            for batch in []:
                pass
'''


def test_epoch_and_step_loops_are_recognised_and_iterated():
    result = rewrite(TRAIN)
    assert [(r.kind, r.name) for r in result.regions] == [
        ("function", "train"), ("epoch", "train:for@3"), ("step", "train:for@4"), ("loop", "train:for@8"),
    ]
    assert "for epoch in __sp_iterate__(1, range(epochs)):" in result.code
    assert "for batch in __sp_iterate__(2, loader):" in result.code
    assert "__sp_mark__(2)" not in result.code and "__sp_mark__(3)" in result.code
    assert "iterate as __sp_iterate__" in result.code


def test_step_found_through_the_modules_own_methods():
    result = rewrite('''
        class Trainer:
            def train_step(self, batch):
                self.loss(batch).backward()
                self.opt.step()

            def train_epoch(self):
                for batch in self.loader:
                    self.train_step(batch)

            def fit(self):
                for epoch in range(3):
                    self.train_epoch()
                for i in range(2):
                    print(i)
    ''')
    kinds = {r.name: r.kind for r in result.regions}
    assert kinds["Trainer.train_epoch:for@8"] == "step"
    assert kinds["Trainer.fit:for@12"] == "epoch"
    assert kinds["Trainer.fit:for@14"] == "loop"


def test_scheduler_step_alone_is_not_a_training_step():
    result = rewrite("def f(scheduler):\n    for i in range(3):\n        scheduler.step()\n")
    assert [r.kind for r in result.regions] == ["function", "loop"]


def test_marker_comments_override_the_heuristic():
    result = rewrite('''
        def f(it):
            # scaleprobe: epoch
            while True:
                for b in it:  # scaleprobe: step
                    pass
                for c in it:  # scaleprobe: off
                    pass
                break
    ''')
    assert [(r.kind, r.line) for r in result.regions] == [("function", 2), ("epoch", 4), ("step", 5)]
    assert "for b in __sp_iterate__(2, it):" in result.code
    assert "for c in it:" in result.code


def test_a_marker_on_the_line_above_counts_only_on_a_line_of_its_own():
    # the epoch loop's own marker sits on the line above the step loop: it is not the step loop's
    result = rewrite('''
        def f(data):
            for epoch in range(2):  # scaleprobe: epoch
                for x in data:
                    x.backward()
                    opt.step()
    ''')
    assert [(r.kind, r.line) for r in result.regions] == [("function", 2), ("epoch", 3), ("step", 4)]


def test_async_for_step_is_marked_not_iterated():
    result = rewrite("async def f(it):\n    async for b in it:  # scaleprobe: step\n        pass\n")
    # the loop is wrapped only to leave its regions while awaiting __anext__, never iterated
    assert "async for b in __sp_aiter__((1, 0), it):" in result.code and "__sp_mark__(1)" in result.code
    assert "__sp_iterate__(" not in result.code
