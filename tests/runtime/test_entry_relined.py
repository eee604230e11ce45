"""Review 100 HIGH-1: `python OUT/main.py` ran the entry script at OUT's lines (Python compiles it
before the runtime is imported), so `torch.jit.script` of one of its functions read the probes'
`try:` from `inspect.getsource` and raised `UnsupportedNodeError: try blocks aren't supported`
where the original ran; `inspect`, `logging` and `traceback.extract_stack()` saw OUT's lines.
The header now runs the script again compiled with its original lines (`probe._run_entry_relined`),
and the script ends where that run ends, with its own exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''"""doc"""
import atexit
import inspect
import logging
import sys
import threading
import traceback

logging.basicConfig(format="%(funcName)s:%(lineno)d %(message)s", level=logging.INFO, stream=sys.stdout)


def train(n):
    total = 0
    for i in range(n):
        total += i
        logging.info("step %d", i)
    return total


def where():
    return [(f.name, f.lineno) for f in traceback.extract_stack()[-2:]]


def late():
    print("thread done", flush=True)


atexit.register(lambda: print("atexit ran", flush=True))
print(inspect.getsource(train), end="")
print(train.__code__.co_firstlineno, sys._getframe().f_lineno)
print(train(2), where(), __doc__, __name__)
t = threading.Thread(target=late)
t.start()
if len(sys.argv) > 1 and sys.argv[1] == "exit":
    sys.exit(3)
if len(sys.argv) > 1 and sys.argv[1] == "raise":
    raise ValueError("boom")
'''


def build(tmp_path: Path, program: str = PROGRAM) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text(program)
    p = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "out"), "-q"],
                       capture_output=True, text=True, timeout=120, env=clean_env(PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr
    return src


def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(cwd.parent / "runs"),
                                        SCALEPROBE_QUIET="1", **env))


def _end_record(tmp_path: Path) -> dict:
    from runtime.runfile import find_run_files

    [f] = find_run_files(tmp_path / "runs")
    return json.loads(Path(f).read_text().splitlines()[-1])


@pytest.mark.parametrize("args, code", [((), 0), (("exit",), 3), (("raise",), 1)])
def test_the_entry_script_runs_at_its_own_lines_with_its_own_exit(tmp_path, args, code):
    src = build(tmp_path)
    original = run(src, *args)
    built = run(tmp_path / "out", *args)
    assert original.returncode == code, original.stderr
    assert (built.returncode, built.stdout) == (original.returncode, original.stdout), built.stderr
    assert "try:" not in built.stdout and "train:16 step 1" in built.stdout and "thread done" in built.stdout
    assert built.stdout.rstrip().endswith("atexit ran")
    end = _end_record(tmp_path)
    assert end["exit_code"] == code and end["status"] == ("ok" if code == 0 else "exit" if code == 3 else "exception")


def test_a_traceback_through_it_has_no_frame_of_the_header(tmp_path):
    src = build(tmp_path)
    original = run(src, "raise")
    built = run(tmp_path / "out", "raise")
    frames = [line for line in built.stderr.splitlines() if line.startswith("  File ")]
    assert frames == [line for line in original.stderr.splitlines() if line.startswith("  File ")], built.stderr
    assert "probe.py" not in built.stderr and "ValueError: boom" in built.stderr


def test_out_lines_and_an_edited_source_keep_outs_numbering(tmp_path):
    src = build(tmp_path)
    out = tmp_path / "out"
    own = run(out, SCALEPROBE_OUT_LINES="1")
    assert own.returncode == 0 and "try:" in own.stdout, own.stderr  # the instrumented text, as documented
    (src / "main.py").write_text(PROGRAM + "\n# edited\n")
    edited = run(out)
    assert edited.returncode == 0 and "try:" in edited.stdout, edited.stderr


def test_torchscript_of_an_entry_function(tmp_path):
    pytest.importorskip("torch")
    program = ("import torch\n\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n    for _ in range(2):\n"
               "        x = x + 1\n    return x\n\n\nif __name__ == '__main__':\n"
               "    print(torch.jit.script(f)(torch.zeros(1)))\n")
    src = build(tmp_path, program)
    original = run(src)
    built = run(tmp_path / "out")
    assert original.returncode == 0, original.stderr
    assert (built.returncode, built.stdout) == (0, original.stdout), built.stderr


def test_a_compile_warning_of_the_entry_is_said_once(tmp_path):
    """Python said it compiling OUT's file: the second compile, at SRC's lines, says nothing (it
    said it again, at SRC's line number with OUT's header as its text)."""
    build(tmp_path, "def f(x):\n    return x is 1\n\nprint(f(1))\n")
    built = run(tmp_path / "out")
    assert (built.returncode, built.stdout) == (0, "True\n"), built.stderr
    assert built.stderr.count("SyntaxWarning") == 1 and "__sp_define__" not in built.stderr, built.stderr


def test_the_modules_a_thin_entry_imports_run_at_their_own_lines(tmp_path):
    """Review 100 HIGH-1's second case: an entry script with nothing to instrument (`from
    pkg.model import train; train()`) was copied as it was, so the runtime started at the first
    instrumented module's import, too late for that module: it ran at OUT's lines (its source
    with the probes for `inspect.getsource` and TorchScript). The entry now gets the header alone."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "model.py").write_text(
        "import inspect\nimport sys\n\n\ndef train(n):\n    total = 0\n    for i in range(n):\n        total += i\n"
        "    return total, sys._getframe().f_lineno\n\n\nprint(inspect.getsource(train), end='')\n")
    (src / "main.py").write_text("from pkg.model import train\nprint(train(3))\n")
    p = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "out"), "-q"],
                       capture_output=True, text=True, timeout=120, env=clean_env(PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr
    assert "__sp_define__" in (tmp_path / "out" / "main.py").read_text()
    original, built = run(src), run(tmp_path / "out")
    assert original.returncode == 0, original.stderr
    assert (built.returncode, built.stdout) == (0, original.stdout), built.stderr
    assert "try:" not in built.stdout


HOOKED = '''import sys


def hook(t, v, tb):
    n = 0
    first = tb
    while tb:
        n += 1
        tb = tb.tb_next
    print("hook", t.__name__, first.tb_lineno, first.tb_frame.f_code.co_name, n, flush=True)


def f(kind):
    for _ in range(1):
        if kind == "ki":
            raise KeyboardInterrupt
        raise KeyError("k")


sys.excepthook = hook
f(sys.argv[1])
'''


@pytest.mark.parametrize("kind, code, status", [("ke", 1, "exception"), ("ki", -2, "signal")])
def test_a_programs_own_excepthook_gets_the_scripts_traceback(tmp_path, kind, code, status):
    """Review 102 HIGH-1: a program's own hook (rich, sentry) got a traceback that began at the
    header's line, then `runtime.probe.define`; LOW-4: with such a hook the end record said `ok`,
    exit code 0, of a process that exited 1."""
    src = build(tmp_path, HOOKED)
    original, built = run(src, kind), run(tmp_path / "out", kind)
    assert original.returncode == code and original.stdout == f"hook {'KeyError' if kind == 'ke' else 'KeyboardInterrupt'} 21 <module> 2\n"
    assert (built.returncode, built.stdout, built.stderr) == (original.returncode, original.stdout, original.stderr)
    end = _end_record(tmp_path)
    assert end["status"] == status and end["exit_code"] == (1 if kind == "ke" else 130)


def test_the_entry_leaves_no_compiled_file(tmp_path):
    """Review 102 LOW-2: `python OUT/main.py` wrote OUT/__pycache__/main.<tag>.opt-scaleprobe.pyc,
    where Python keeps no compiled file of a script."""
    build(tmp_path)
    built = subprocess.run([sys.executable, "main.py"], cwd=tmp_path / "out", capture_output=True, text=True,
                           timeout=120, env={k: v for k, v in clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1",
                                                                       SCALEPROBE_OUT=str(tmp_path / "runs")).items()
                                             if k != "PYTHONDONTWRITEBYTECODE"})
    assert built.returncode == 0, built.stderr
    assert not list((tmp_path / "out").rglob("*.pyc")), list((tmp_path / "out").rglob("*.pyc"))


def test_two_frames_and_no_more_are_above_the_script(tmp_path):
    """Documented (docs/runtime.md): the header's line and `runtime.probe.define` are above the
    script's own frame; a helper between them would be one more frame for the program to see."""
    build(tmp_path, "import inspect\n\n\ndef f():\n    return 1\n\n\nprint([fi.function for fi in inspect.stack()], f())\n")
    built = run(tmp_path / "out")
    assert (built.returncode, built.stdout) == (0, "['<module>', 'define', '<module>'] 1\n"), built.stderr
