"""A program that replaces itself with os.exec* (runtime/exec_hook.py).

Before, the process image ended without atexit: what was measured since the last flush was lost,
the file had no end record (a crashed rank, to readers), and a new image that recorded too appended
a second header to the same file (the pid stays), which readers refuse."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import exec_hook
from runtime.runfile import claim_run_file, read_run, rename_run_file

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

RESTART = """\
import os, sys

def work(n):
    return sum(i * i for i in range(n))

def main():
    gen = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    print("gen", gen, work(30000), flush=True)
    if gen == 0 and os.environ.get("HOW") == "execv":
        import time
        time.sleep(1.1)  # the next image starts in another second: a run id of its own, unless told
    if gen < 2:
        how = os.environ.get("HOW", "execv")
        args = [sys.executable, sys.argv[0], str(gen + 1)]
        if how == "execv":
            os.execv(sys.executable, args)
        elif how == "execl":
            os.execl(sys.executable, *args)
        elif how == "execve":
            os.execve(sys.executable, args, dict(os.environ, GEN=str(gen + 1)))
        else:  # execvp through PATH, whose first folders do not have it
            os.execvp(os.path.basename(sys.executable), args)

main()
"""


def _build(tmp_path: Path, source: str) -> Path:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(source)
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path,
                   env=clean_env(PYTHONPATH=str(REPO)), check=True, timeout=120)
    return out


def _run(tmp_path: Path, out: Path, **env: str) -> tuple[subprocess.CompletedProcess, list]:
    runs = tmp_path / "runs"
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(runs), **env)
    done = subprocess.run([sys.executable, "main.py"], cwd=out, env=e, capture_output=True, text=True, timeout=120)
    files = sorted(runs.glob("*.jsonl"), key=lambda p: (len(p.name), p.name))
    return done, [read_run(p) for p in files]


@pytest.mark.parametrize("how", ["execv", "execl", "execve", "execvp"])
def test_each_image_of_a_program_that_restarts_itself_writes_a_whole_file(tmp_path, how):
    out = _build(tmp_path, RESTART)
    env = {"HOW": how}
    if how == "execvp":
        env["PATH"] = os.pathsep.join([str(tmp_path / "nowhere"), str(tmp_path), str(Path(sys.executable).parent),
                                       os.environ.get("PATH", "")])
    done, runs = _run(tmp_path, out, **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [f"gen {g} {sum(i * i for i in range(30000))}" for g in range(3)]
    assert "scaleprobe:" not in done.stderr, done.stderr
    assert [r.path.name for r in runs] == [f"rank0.{runs[0].header['pid']}{s}.jsonl" for s in ("", ".1", ".2")]
    assert [r.problems for r in runs] == [[], [], []]  # one header each
    assert [r.end["status"] for r in runs] == ["exec", "exec", "ok"]
    # main was open when the image was replaced: it ends there, as at a signal's default action
    assert [r.end["closed_at_end"] for r in runs] == [1, 1, 0] and {r.end["dropped"] for r in runs} == {0}
    assert [r.header.get("exec_of") for r in runs] == [None, runs[0].path.name, runs[1].path.name]
    assert len({r.header["run_id"] for r in runs}) == 1 and len({r.header["pid"] for r in runs}) == 1
    for r in runs:  # each image's measurements, flushed before it was replaced
        names = {rid: reg.name for rid, reg in r.regions.items()}
        visits = {tuple(names[i] for i in p): st.visits for p, st in r.profile.items()}
        assert visits[("main", "work")] == 1 and visits[("main",)] == 1
    assert exec_hook.EXEC_OF not in done.stdout


def test_an_exec_into_a_program_that_records_nothing_ends_the_run(tmp_path):
    out = _build(tmp_path, "import os, shutil\n\ndef main():\n    print('before', flush=True)\n"
                           "    os.execv(shutil.which('echo'), ['echo', 'after'])\n\nmain()\n")
    done, [run] = _run(tmp_path, out)
    assert (done.returncode, done.stdout) == (0, "before\nafter\n"), done.stderr
    assert run.end["status"] == "exec" and run.end["exit_code"] is None
    [main] = [st for p, st in run.profile.items() if len(p) == 1]
    assert main.visits == 1 and main.incl_ns > 0


def test_an_exec_that_fails_after_the_run_ended_raises_as_before_and_says_so(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/no/such/interpreter\n")
    bad.chmod(0o755)
    program = ("import os, sys\n\ndef main():\n    try:\n        os.execv(sys.argv[1], [sys.argv[1]])\n"
               "    except OSError as e:\n        print(type(e).__name__, flush=True)\n    return 3\n\n"
               "sys.exit(main())\n")
    out = _build(tmp_path, program)
    runs = tmp_path / "runs"
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(runs))
    plain = subprocess.run([sys.executable, "main.py", str(bad)], cwd=tmp_path / "src", env=e, capture_output=True,
                           text=True, timeout=60)
    done = subprocess.run([sys.executable, "main.py", str(bad)], cwd=out, env=e, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout) == (3, "FileNotFoundError\n")
    assert "os.execv failed after the run file was ended for it" in done.stderr
    [f] = runs.glob("*.jsonl")
    assert read_run(f).end["status"] == "exec"


def test_the_tries_of_execvp_that_cannot_succeed_leave_the_run_alone(tmp_path):
    program = ("import os\n\ndef main():\n    try:\n        os.execvp('no-such-program-here', ['x'])\n"
               "    except FileNotFoundError:\n        print('not found', flush=True)\n\nmain()\n")
    out = _build(tmp_path, program)
    done, [run] = _run(tmp_path, out)
    assert (done.returncode, done.stdout) == (0, "not found\n"), done.stderr
    assert run.end["status"] == "ok" and not done.stderr.strip()


def test_the_variable_is_only_the_replaced_image_s(monkeypatch):
    told = json.dumps({"pid": os.getpid() + 1, "file": "rank0.1.jsonl"})
    monkeypatch.setenv(exec_hook.EXEC_OF, told)
    assert exec_hook.continued(os.getpid()) is None  # a program the image started: no continuation
    assert exec_hook.EXEC_OF not in os.environ  # nor are its own children
    monkeypatch.setenv(exec_hook.EXEC_OF, json.dumps({"pid": os.getpid(), "file": "rank0.1.jsonl"}))
    assert exec_hook.continued(os.getpid())["file"] == "rank0.1.jsonl"


def test_a_run_file_is_never_appended_to_another_or_renamed_over_it(tmp_path):
    stale = tmp_path / "rank0.77.jsonl"
    stale.write_text("theirs\n")  # a pid the system reused, or this process's image before an exec
    path, fd = claim_run_file(str(tmp_path), 0, 77)
    os.close(fd)
    assert Path(path).name == "rank0.77.1.jsonl" and stale.read_text() == "theirs\n"
    (tmp_path / "rank1.77.jsonl").write_text("rank 1's\n")
    named = rename_run_file(path, 1, 77)  # torch.distributed made it rank 1
    assert Path(named).name == "rank1.77.1.jsonl" and not Path(path).exists()
    assert (tmp_path / "rank1.77.jsonl").read_text() == "rank 1's\n"
