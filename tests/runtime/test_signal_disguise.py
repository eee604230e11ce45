"""Review 64 F2: the program sees the signal handlers it would see without scaleprobe.

The recorder's (and the launcher's) SIGTERM handler stands in for the default action. A program
that asked `signal.getsignal` got ours and chained to it instead of exiting with its own status: it
died by the signal, without its `finally` blocks or atexit handlers. `runtime.signal_disguise`
shows ours as SIG_DFL (or as the program's handler that ours calls), and a program that puts back
what it was shown gets ours back, so a later signal still ends its run file properly."""
from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None,
                                reason="runtime._sigwatch is not built (no C compiler): our handlers are not disguised")

# chains to the handler before its own, as graceful-shutdown code does
CHAIN = '''\
import atexit, os, signal, sys, time
def main():
    atexit.register(lambda: print("atexit ran", flush=True))
    prev = signal.getsignal(signal.SIGTERM)
    print("before:", repr(prev), prev == signal.SIG_DFL, flush=True)
    def graceful(signum, frame):
        print("graceful", flush=True)
        if callable(prev):
            prev(signum, frame)
        else:
            sys.exit(3)
    old = signal.signal(signal.SIGTERM, graceful)
    print("returned:", repr(old), flush=True)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)
    finally:
        print("finally ran", flush=True)
main()
'''

# puts back what it was shown (SIG_DFL, given as `prev` or as 0), then gets SIGTERM: the default action
RESTORE = '''\
import os, signal, sys, time
def main():
    prev = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda s, f: None)
    back = signal.signal(signal.SIGTERM, prev if sys.argv[1] == "prev" else 0)
    print("back:", back is not prev, repr(signal.getsignal(signal.SIGTERM)), flush=True)
    for i in range(3):
        work(i)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(2)
    print("not reached", flush=True)
def work(i):
    return sum(range(1000 * i))
main()
'''

# errors of the calls are the interpreter's, with no frame of scaleprobe's
ERRORS = '''\
import signal, traceback
def main():
    for call in (lambda: signal.getsignal(999), lambda: signal.signal(999, signal.SIG_DFL),
                 lambda: signal.signal(signal.SIGTERM, "nope"), lambda: signal.getsignal("x")):
        try:
            call()
        except Exception:
            print(traceback.format_exc().replace(__file__, "PROG"))
main()
'''


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", SCALEPROBE_OUT=str(tmp_path / "direct"))


def _run(tmp_path: Path, source: str, how: str, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the program run as `how`: plain Python, built by `instrument`
    and run directly, or under the launcher with --instrument."""
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    # in a module of its own, imported by an entry script with a function: the entry script of a
    # built tree, and the first module a script with no probe imports, keep the built line numbers
    # in a caught traceback (docs/instrument.md, Known limits)
    (src / "prog.py").write_text(source)
    (src / "main.py").write_text("def main():\n    import prog\n\n\nmain()\n")
    env = _env(tmp_path)
    if how == "plain":
        cmd, cwd = [sys.executable, "main.py", *args], src
    elif how == "built":
        subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "build"), "-q"],
                       env=env, check=True, timeout=120)
        cmd, cwd = [sys.executable, "main.py", *args], tmp_path / "build"
    else:
        cmd = [sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument", "main.py", *args]
        cwd = src
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def _end_record(root: Path) -> dict:
    [path] = list(root.rglob("*.jsonl"))
    ends = [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "end"]
    assert len(ends) == 1, path.read_text()
    return ends[0]


@pytest.mark.parametrize("how", ["built", "launch"])
def test_a_program_that_chains_to_the_previous_handler_exits_as_without_probes(tmp_path, how):
    code, out, err = _run(tmp_path / "a", CHAIN, "plain")
    assert code == 3 and "finally ran" in out and "atexit ran" in out, (code, out, err)
    assert "before: <Handlers.SIG_DFL: 0> True" in out and "returned: <Handlers.SIG_DFL: 0>" in out, out
    assert _run(tmp_path / "b", CHAIN, how) == (code, out, err)


@pytest.mark.parametrize("how", ["built", "launch"])
@pytest.mark.parametrize("given", ["prev", "zero"])
def test_putting_back_what_was_shown_keeps_the_run_file_whole_on_a_later_signal(tmp_path, how, given):
    code, out, _ = _run(tmp_path / "a", RESTORE, "plain", given)
    assert code == -signal.SIGTERM and out == "back: True <Handlers.SIG_DFL: 0>\n", (code, out)
    code_b, out_b, err_b = _run(tmp_path / "b", RESTORE, how, given)
    # dies of SIGTERM as the original does (the launcher reports a signal's death as 128+N) ...
    assert code_b == (code if how == "built" else 128 + signal.SIGTERM) and out_b == out, (code_b, out_b, err_b)
    # ... after our handler, back in place, wrote the end record with the work done before
    end = _end_record(tmp_path / "b" / ("direct" if how == "built" else "runs"))
    assert (end["status"], end["signal"]) == ("signal", signal.SIGTERM), end


@pytest.mark.parametrize("how", ["built", "launch"])
def test_errors_of_signal_calls_show_no_frame_of_ours(tmp_path, how):
    expected = _run(tmp_path / "a", ERRORS, "plain")
    assert expected[0] == 0 and expected[1].count("Traceback") == 4, expected
    assert _run(tmp_path / "b", ERRORS, how) == expected


def test_the_disguise_maps_only_the_handler_registered_and_ends_with_forget():
    code = '''
import signal
from runtime import signal_disguise
def ours(s, f): pass
def theirs(s, f): pass
signal_disguise.real_signal(signal.SIGUSR1, ours)
signal_disguise.show_as(signal.SIGUSR1, ours, signal.SIG_DFL)
assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL  # never ours: as it is
assert signal.signal(signal.SIGUSR1, theirs) is signal.SIG_DFL
assert signal.getsignal(signal.SIGUSR1) is theirs
assert signal.signal(signal.SIGUSR1, signal.SIG_DFL) is theirs  # SIG_DFL put back: ours, shown as SIG_DFL
assert signal_disguise.real_getsignal(signal.SIGUSR1) is ours
assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
signal_disguise.forget(signal.SIGUSR1)
signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # the default action itself now
assert signal_disguise.real_getsignal(signal.SIGUSR1) is signal.SIG_DFL
signal_disguise.show_as(signal.SIGUSR2, ours, theirs)  # ours calls theirs: shown as theirs
signal_disguise.real_signal(signal.SIGUSR2, ours)
assert signal.getsignal(signal.SIGUSR2) is theirs
signal.signal(signal.SIGUSR2, theirs)
assert signal_disguise.real_getsignal(signal.SIGUSR2) is ours
print("OK")
'''
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean_env(PYTHONPATH=str(REPO)),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "OK\n", p.stderr
