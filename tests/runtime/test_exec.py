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


TRY_EXEC = ("import os, sys\n\ndef main():\n    try:\n        os.execv(sys.argv[1], [sys.argv[1], 'x' * int(sys.argv[2])])\n"
            "    except OSError as e:\n        print(type(e).__name__, e.errno, flush=True)\n    return 3\n\n"
            "sys.exit(main())\n")


def _try_exec(tmp_path, target, arg_size=1):
    """The program tries to exec `target` and goes on where that fails: (plain run, built run, run file)."""
    out = _build(tmp_path, TRY_EXEC)
    runs = tmp_path / "runs"
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(runs))
    args = [sys.executable, "main.py", str(target), str(arg_size)]
    plain = subprocess.run(args, cwd=tmp_path / "src", env=e, capture_output=True, text=True, timeout=60)
    done = subprocess.run(args, cwd=out, env=e, capture_output=True, text=True, timeout=60)
    [f] = runs.glob("*.jsonl")
    return plain, done, read_run(f)


@pytest.mark.parametrize("case", ["bad #! line", "no #! line", "too long"])
def test_an_exec_that_cannot_succeed_leaves_the_run_going(tmp_path, case):
    """Review 52 F7: these failed after the run had ended for them: the program went on unrecorded
    and its run file said `exec`, which readers take for a whole run."""
    target = tmp_path / "target"
    target.write_text({"bad #! line": "#!/no/such/interpreter\n", "no #! line": "echo hi\n"}.get(case, "#!/bin/sh\n"))
    target.chmod(0o755)
    plain, done, run = _try_exec(tmp_path, target, os.sysconf("SC_ARG_MAX") if case == "too long" else 1)
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout) == (3, plain.stdout)
    assert plain.stdout.split()[0] in ("FileNotFoundError", "OSError"), plain.stdout
    assert not done.stderr.strip(), done.stderr
    assert (run.end["status"], run.end["exit_code"]) == ("exit", 3)


def test_an_exec_that_fails_after_the_run_ended_raises_as_before_and_says_so(tmp_path):
    target = tmp_path / "damaged"
    target.write_bytes(b"\x7fELF" + bytes(60))  # looks like an executable, is none
    target.chmod(0o755)
    plain, done, run = _try_exec(tmp_path, target)
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout) == (3, "OSError 8\n")  # ENOEXEC
    assert "os.execv failed after the run file was ended for it" in done.stderr
    assert run.end["status"] == "exec"


def test_execvp_past_a_broken_program_earlier_in_path_keeps_the_chain(tmp_path):
    """Review 52 F3: a script earlier in PATH whose `#!` interpreter is gone (a stale virtual
    environment's) ended the run, failed, said so falsely, and the next image, told nothing, was
    read as a copy of the first."""
    stale = tmp_path / "stale"
    stale.mkdir()
    name = Path(sys.executable).name
    (stale / name).write_text("#!/no/such/venv/bin/python\n")
    (stale / name).chmod(0o755)
    out = _build(tmp_path, RESTART)
    path = os.pathsep.join([str(stale), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done, runs = _run(tmp_path, out, HOW="execvp", PATH=path)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    assert [r.end["status"] for r in runs] == ["exec", "exec", "ok"]
    assert [r.header.get("exec_of") for r in runs] == [None, runs[0].path.name, runs[1].path.name]


def test_an_exec_with_an_environment_of_its_own_starts_a_run_of_its_own(tmp_path):
    """Review 52 F8: an environment without scaleprobe's folder sends the new image's file elsewhere:
    it continues nothing here (its `exec_of` named a file of another folder)."""
    program = ("import os, sys\n\ndef main():\n    if len(sys.argv) == 1:\n"
               "        env = {k: v for k, v in os.environ.items() if k != 'SCALEPROBE_OUT'}\n"
               "        env['SCALEPROBE_OUT'] = sys.argv[0] + '.elsewhere'\n"
               "        os.execve(sys.executable, [sys.executable, sys.argv[0], 'again'], env)\n"
               "    print('again', flush=True)\n\nmain()\n")
    out = _build(tmp_path, program)
    done, [first] = _run(tmp_path, out)
    assert (done.returncode, done.stdout) == (0, "again\n"), done.stderr
    assert first.end["status"] == "exec"
    [other] = map(read_run, (out / "main.py.elsewhere").glob("*.jsonl"))
    assert other.header.get("exec_of") is None and other.end["status"] == "ok"


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


def test_a_single_rank_launch_whose_program_replaces_itself_ends_its_record(tmp_path):
    """Review 52 F6: `python -m runtime.launch prog.py` runs the program in the launcher's own
    process: an exec replaced the launcher too, and the run's launch.json said `running` for ever."""
    out = _build(tmp_path, "import os, shutil\n\ndef main():\n    print('before', flush=True)\n"
                           "    os.execv(shutil.which('echo'), ['echo', 'after'])\n\nmain()\n")
    e = clean_env(PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "main.py"],
                          cwd=out, env=e, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "before\nafter\n"), done.stderr
    assert "the program replaced itself with os.exec*" in done.stderr
    [record] = (tmp_path / "runs").glob("**/launch.json")
    launch = json.loads(record.read_text())
    # the new program's exit status is not the launcher's to see (review 91 F4: it said 0)
    assert (launch["status"], launch["exit_code"]) == ("ok", None)
    assert "not known to the launcher" in launch["error"]
    assert "run data in" in done.stderr  # the instrumented program wrote its run file before the exec
    [f] = record.parent.glob("rank*.jsonl")
    assert read_run(f).end["status"] == "exec"
