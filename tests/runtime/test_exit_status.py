"""The end record tells how the program ended: status "ok" only for exit status 0, "exit" for a
SystemExit with another status however it was raised, "exception" for an uncaught exception.
Each case runs a small hand-instrumented program (probe ABI) in a subprocess."""
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import atexit, sys, threading
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((1, "function", "main", 6), (2, "function", "helper", 20)))


def main(mode):
    if __sp_on__: __sp_enter__(1)
    try:
        helper()
        if mode == "sys_exit_2":
            sys.exit(2)
        if mode == "raise_3":
            raise SystemExit(3)
        if mode == "raise_message":
            raise SystemExit("bye")
        if mode == "sys_exit_256":
            sys.exit(256)
        if mode == "sys_exit_0":
            sys.exit(0)
        if mode == "builtin_exit_4":
            exit(4)
        if mode == "caught":
            try:
                sys.exit(5)
            except SystemExit:
                pass
        if mode == "thread_exit":
            t = threading.Thread(target=sys.exit, args=(6,))
            t.start()
            t.join()
        if mode == "error":
            raise ValueError("boom")
        if mode == "sigint":
            import os, signal
            os.kill(os.getpid(), signal.SIGINT)
        if mode == "raise_kbi":
            raise KeyboardInterrupt
        return 0
    finally:
        if __sp_on__: __sp_exit__(1)


def helper():
    if __sp_on__: __sp_enter__(2)
    try:
        return 0
    finally:
        if __sp_on__: __sp_exit__(2)


mode = sys.argv[1]
if mode == "atexit_region":
    atexit.register(helper)  # instrumented code running after the exit code was decided
    main("sys_exit_2")
elif mode == "caught_then_more":
    try:
        main("raise_3")
    except SystemExit:
        pass
    main("ok")
elif mode == "module_raise_7":
    main("ok")
    raise SystemExit(7)
else:
    main(mode)
'''


def run(tmp_path, mode, pure="0"):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_PURE=pure)
    p = subprocess.run([sys.executable, str(prog), mode], env=env, capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    files = find_run_files(tmp_path / "out")
    assert len(files) == 1, (files, p.stderr)
    end = read_run(files[0]).end
    assert end is not None, p.stderr
    return p.returncode, end


@pytest.mark.parametrize("mode, code, status", [
    ("ok", 0, "ok"),
    ("sys_exit_2", 2, "exit"),
    ("raise_3", 3, "exit"),
    ("raise_message", 1, "exit"),
    ("sys_exit_256", 0, "ok"),  # the process status is the code modulo 256
    ("sys_exit_0", 0, "ok"),
    ("builtin_exit_4", 4, "exit"),
    ("caught", 0, "ok"),  # a SystemExit the program caught is not how it ended
    ("thread_exit", 0, "ok"),  # sys.exit in a thread ends the thread only
    ("caught_then_more", 0, "ok"),
    ("atexit_region", 2, "exit"),
])
def test_end_record_matches_the_process_exit_status(tmp_path, mode, code, status):
    rc, end = run(tmp_path, mode)
    assert rc == code
    assert (end["status"], end["exit_code"], end["exception"]) == (status, code, None)


@pytest.mark.parametrize("mode, code", [("raise_3", 3), ("caught_then_more", 0), ("sys_exit_2", 2)])
def test_pure_python_backend_sees_the_same_exit(tmp_path, mode, code):
    rc, end = run(tmp_path, mode, pure="1")
    assert rc == code
    assert (end["status"], end["exit_code"]) == ("ok" if code == 0 else "exit", code)


def test_uncaught_exception_is_status_exception(tmp_path):
    rc, end = run(tmp_path, "error")
    assert rc == 1
    assert (end["status"], end["exit_code"], end["exception"]) == ("exception", 1, "builtins.ValueError")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="needs sys.monitoring (Python 3.12+) to see a SystemExit "
                    "raised outside every instrumented region")
def test_module_level_raise_outside_regions(tmp_path):
    rc, end = run(tmp_path, "module_raise_7")
    assert rc == 7
    assert (end["status"], end["exit_code"]) == ("exit", 7)


def _default_sigint():
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal, whatever pytest's parent did


@pytest.mark.parametrize("disable", ["0", "1"])
@pytest.mark.parametrize("mode", ["sigint", "raise_kbi"])
def test_uncaught_keyboard_interrupt_dies_by_sigint_as_uninstrumented(tmp_path, mode, disable):
    """CPython ends a program killed by an uncaught KeyboardInterrupt with SIGINT itself (a shell
    shows 130). The runtime's exit hooks used to import traceback at that moment, whose string
    `exec` made CPython forget it and exit 1, even with probes off; and our SIGINT handler added a
    frame of its own to the traceback."""
    import signal

    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_DISABLE=disable)
    # the same program uninstrumented: Python's own behaviour, which the instrumented run must match
    plain = tmp_path / "plain.py"
    plain.write_text("import os, signal, sys\nif sys.argv[1] == 'sigint':\n    os.kill(os.getpid(), signal.SIGINT)\n"
                     "raise KeyboardInterrupt\n")
    base = subprocess.run([sys.executable, str(plain), mode], env=env, capture_output=True, text=True,
                          timeout=60, preexec_fn=_default_sigint)
    assert base.returncode == -signal.SIGINT
    p = subprocess.run([sys.executable, str(prog), mode], env=env, capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, preexec_fn=_default_sigint)
    assert p.returncode == -signal.SIGINT, p.stderr
    assert p.stderr.rstrip().endswith("KeyboardInterrupt")
    assert "runtime" not in p.stderr.replace(str(tmp_path), ""), p.stderr  # no frame of ours
    if disable == "0":
        (f,) = find_run_files(tmp_path / "out")
        end = read_run(f).end
        assert (end["status"], end["exit_code"], end["exception"]) == ("signal", 130, "builtins.KeyboardInterrupt")
