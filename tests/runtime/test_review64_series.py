"""Review 64, F1: an epoch or step loop over an iterator that has `__next__` but no `__iter__` (which a
`for` statement accepts) crashed the built program (`TypeError: 'Cursor' object is not iterable`
from runtime/series.py: map() asked the iterator for its iterator again), with recording on and
off, and through the manual API. A `for` statement never calls its iterator's `__iter__`, so one
whose `__iter__` is Python code is not called either (it could return something else)."""

from __future__ import annotations

import gc
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import series
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

TRAIN = '''\
import traceback

from runtime.manual import epoch as manual_epoch, step as manual_step


class Opt:
    def step(self):
        pass


class Cursor:
    """An iterator with __next__ only, which `for` accepts."""

    def __init__(self, n, tag, fail_at=None):
        self.i, self.n, self.tag, self.fail_at = 0, n, tag, fail_at

    def __next__(self):
        self.i += 1
        if self.i == self.fail_at:
            raise ValueError(f"bad batch {self.i} of {self.tag}")
        if self.i > self.n:
            raise StopIteration
        return self.i

    def __del__(self):
        print("released", self.tag)


class Other(Cursor):
    """Its own __iter__, which `for` never calls, would iterate something else."""

    def __iter__(self):
        print("Other.__iter__ called", self.tag)
        return iter(["not", "these"])


class Batches:
    def __init__(self, n, tag, fail_at=None, kind=Cursor):
        self.args, self.kind = (n, tag, fail_at), kind

    def __iter__(self):
        return self.kind(*self.args)


def train_epoch(opt, data):
    seen = []
    for batch in data:
        opt.step()
        seen.append(batch)
        if batch == 9:
            break
    print("steps", seen)


def train(opt, epochs):
    for e in Batches(epochs, "epochs"):
        train_epoch(opt, Batches(3, f"epoch {e}"))
        train_epoch(opt, Batches(2, f"other {e}", kind=Other))
    print("trained")


def early(opt):
    for batch in Batches(20, "early"):
        opt.step()
        if batch == 2:
            break
    print("after break")


def caught(opt):
    try:
        for batch in Batches(5, "caught", fail_at=2):
            opt.step()
            print("caught step", batch)
    except ValueError as exc:
        print("caught", exc, [f.name for f in traceback.extract_tb(exc.__traceback__)])
        traceback.print_exc()


def manual():
    for e in manual_epoch(Batches(2, "manual epochs")):
        for b in manual_step(Batches(2, f"manual {e}", kind=Other)):
            print("manual", e, b)


def fail(opt):
    for batch in Batches(5, "uncaught", fail_at=3):
        opt.step()
        print("step", batch)
'''

MAIN = '''\
import train


def main():
    opt = train.Opt()
    train.train(opt, 2)
    train.early(opt)
    train.caught(opt)
    train.manual()
    train.fail(opt)


main()
'''


def _env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = clean_env()
    env.update({"PYTHONPATH": str(REPO), "SCALEPROBE_QUIET": "1", "SCALEPROBE_OUT": str(tmp_path / "runs"),
                "XDG_CACHE_HOME": str(tmp_path / "cache")})
    env.update(extra or {})
    return env


def _run(tmp_path: Path, cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py"], cwd=cwd, env=_env(tmp_path, extra), capture_output=True,
                          text=True, timeout=120)


@pytest.fixture()
def built(tmp_path):
    from instrumentor.cli import main as instrument

    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    (src / "main.py").write_text(MAIN)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    code = (out / "train.py").read_text()
    assert code.count("__sp_iterate__(") == 5  # train, train_epoch, early, caught, fail
    return src, out


def _same_as_original(tmp_path, src, out, extra=None):
    plain = _run(tmp_path, src, {"SCALEPROBE_DISABLE": "1"})
    assert plain.returncode == 1 and plain.stderr.endswith("ValueError: bad batch 3 of uncaught\n"), plain.stderr
    assert "Other.__iter__ called" not in plain.stdout and "steps [1, 2, 3]" in plain.stdout
    assert "manual 2 2" in plain.stdout
    got = _run(tmp_path, out, extra)
    got.stdout, got.stderr = (t.replace(str(out), str(src)) for t in (got.stdout, got.stderr))
    assert (got.returncode, got.stdout, got.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    return plain


def test_step_and_epoch_loops_over_next_only_iterators_run_as_the_original_recording_on(built, tmp_path):
    src, out = built
    plain = _same_as_original(tmp_path, src, out)
    # the traceback of the error raised in the user's __next__: the loop's line, then __next__,
    # nothing of the runtime's in between (caught and uncaught alike)
    assert "caught bad batch 2 of caught ['caught', '__next__']" in plain.stdout
    assert "/runtime/" not in plain.stderr
    (path,) = find_run_files(tmp_path / "runs")
    run = read_run(path)
    kinds = {r.name: r.kind for r in run.regions.values()}
    assert kinds["train:for@56"] == "epoch" and kinds["train_epoch:for@47"] == "step"
    counts: dict[str, int] = {}
    for s in [*run.epochs, *run.steps]:
        name = run.regions[s["region"]].name
        counts[name] = counts.get(name, 0) + 1
    # 2 epochs of 3 + 2 steps; 2 steps before the break; the loops that fail: the steps before the
    # failing next(); the manual API's 2 epochs of 2 steps each
    assert counts["train:for@56"] == 2 and counts["train_epoch:for@47"] == 10, counts
    assert counts["early:for@63"] == 2 and counts["caught:for@72"] == 1 and counts["fail:for@87"] == 2, counts
    assert counts["epoch"] == 2 and counts["step"] == 4, counts


def test_the_same_with_recording_off(built, tmp_path):
    src, out = built
    _same_as_original(tmp_path, src, out, {"SCALEPROBE_DISABLE": "1"})
    assert not list((tmp_path / "runs").glob("*.jsonl"))


class _Log(list):
    pass


class _NextOnly:
    def __init__(self, log, n=3, fail_at=None):
        self.log, self.i, self.n, self.fail_at = log, 0, n, fail_at

    def __next__(self):
        self.i += 1
        if self.i == self.fail_at:
            raise KeyError("from __next__")
        if self.i > self.n:
            raise StopIteration
        return self.i

    def __del__(self):
        self.log.append("iterator released")


class _PyIter(_NextOnly):
    def __iter__(self):  # what a DataLoader's iterator has; `for` never calls it
        self.log.append("__iter__ called")
        return iter("xyz")


def _source(log, kind, **kw):
    return type("Source", (), {"__iter__": lambda self: kind(log, **kw)})()


class _Records(list):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def append(self, r):
        self.log.append(f"step {r['index']} closed")
        super().append(r)


def _recorder(log):
    return SimpleNamespace(cfg=SimpleNamespace(schedule=None, comm=False, gpu="0"), comm_ns=[0], gpu=None,
                           gpu_rotation=None, finished=False, steps_seen=0, series=_Records(log),
                           request_flush=lambda: None, enabled=True, regions={3: ("step", "s")})


@pytest.mark.parametrize("kind", [_NextOnly, _PyIter])
@pytest.mark.parametrize("recording", [True, False])
def test_loop_and_iterate_call_only_next_and_release_the_iterator_at_the_loop_end(monkeypatch, kind, recording):
    from runtime import recorder

    log: list = []
    monkeypatch.setattr(recorder, "_rec", _recorder(log) if recording else None)
    for api in (series.loop, series.iterate):
        del log[:]
        for b in api(3, _source(log, kind)):
            log.append(f"body {b}")
            if b == 2:
                break
        log.append("after the loop")
        closed = ["step 0 closed", "step 1 closed"] if recording else []
        # the loop's iterator is released when the loop lets go of it, then the last step closes
        assert log == ["body 1", *closed[:1], "body 2", "iterator released", *closed[1:], "after the loop"], log
        del log[:]
        assert [b for b in api(3, _source(log, kind))] == [1, 2, 3]
        gc.collect()
        # (exhausted: the last step closed when the next() that ended the loop began)
        assert log == [*([f"step {i} closed" for i in range(3)] if recording else []), "iterator released"]


@pytest.mark.parametrize("kind", [_NextOnly, _PyIter])
@pytest.mark.parametrize("recording", [True, False])
def test_an_error_of_next_shows_the_frames_it_shows_uninstrumented(monkeypatch, kind, recording):
    from runtime import recorder

    monkeypatch.setattr(recorder, "_rec", _recorder([]) if recording else None)

    def frames(wrapped: bool) -> list[tuple[str, str | None]]:
        data = _source([], kind, fail_at=2)
        try:
            for _ in (series.loop(3, data) if wrapped else data):
                pass
        except KeyError as exc:
            return [(f.name, f.line) for f in traceback.extract_tb(exc.__traceback__)]
        raise AssertionError("no KeyError")

    original = frames(False)
    assert [name for name, _ in original] == ["frames", "__next__"]
    assert [name for name, _ in frames(True)] == ["frames", "__next__"]
    assert frames(True)[1] == original[1]


def test_c_iterators_and_generators_are_handed_on_as_they_are():
    gen = (i for i in range(2))
    it = iter([1])
    assert series.as_for_sees(gen) is gen and series.as_for_sees(it) is it
    assert list(series.as_for_sees(_NextOnly([], n=2))) == [1, 2]


@pytest.mark.parametrize("recording", [True, False])
def test_a_torch_dataloader_iterator_is_iterated_as_for_does(monkeypatch, recording):
    """Its iterator's `__iter__` (Python code, `return self`) was called once more by the runtime;
    it is released at the loop's end, before the last step closes, as before."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data import dataloader as dlmod

    from runtime import recorder

    log: list = []
    cls = dlmod._SingleProcessDataLoaderIter
    monkeypatch.setattr(cls, "__iter__", lambda self: log.append("__iter__ called") or self)
    monkeypatch.setattr(cls, "__del__", lambda self: log.append("iterator released"), raising=False)
    monkeypatch.setattr(recorder, "_rec", _recorder(log) if recording else None)
    loader = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=2)
    for (batch,) in series.loop(3, loader):
        log.append(f"body {batch.tolist()}")
        if batch[0] == 2:
            break
    log.append("after the loop")
    closed = ["step 0 closed", "step 1 closed"] if recording else []
    assert log == ["body [0.0, 1.0]", *closed[:1], "body [2.0, 3.0]", "iterator released", *closed[1:],
                   "after the loop"], log
