"""left()/back(): which frames left their regions at a suspension and have not come back yet
(both backends; what instrumented generators and coroutines make of it is tested in
tests/instrumentor/test_suspension_state.py)."""
import gc
import importlib
import threading

import pytest

from test_backend import BACKENDS


@pytest.mark.parametrize("module", BACKENDS)
def test_left_and_back_pair_up_per_frame(module):
    mod = importlib.import_module(module)
    start = mod._left_count()
    assert mod.back() is False
    assert mod.left() is True and mod.left() is True  # noted once
    assert mod._left_count() == start + 1
    assert (mod.back(), mod.back()) == (True, False)
    # from a comprehension (`inner`): its frame (before 3.12) counts as its function's
    assert [mod.left(1) for _ in range(3)] == [True] * 3 and mod._left_count() == start + 1
    assert [mod.back(1) for _ in range(1)] == [True] and mod._left_count() == start
    assert [mod.left(1) for _ in range(1)] == [True] and mod.back() is True
    with pytest.raises(TypeError):
        mod.left(1, 2)
    # many frames at once: the C set grows and shrinks back
    gens = []
    for _ in range(300):
        def one():
            mod.left()
            yield
            yield mod.back()
        gens.append(one())
        next(gens[-1])
    assert mod._left_count() == start + 300
    assert all(next(g) is True for g in gens[::-1] if g.gi_frame) and mod._left_count() == start


@pytest.mark.parametrize("module", BACKENDS)
def test_the_set_is_one_for_the_process(module):
    mod = importlib.import_module(module)
    start = mod._left_count()

    def gen():
        mod.left()
        yield
        yield mod.back()

    g = gen()
    next(g)  # noted on this thread
    got = []
    worker = threading.Thread(target=lambda: got.append(next(g)))
    worker.start()
    worker.join()
    assert got == [True] and mod._left_count() == start
    # not forgotten after fork: a suspended generator goes on in the child
    g = gen()
    next(g)
    mod.reset_after_fork()
    assert next(g) is True and mod._left_count() == start
    del g
    gc.collect()
