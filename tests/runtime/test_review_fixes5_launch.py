"""Fifth review, launcher: directory names that depend on the point alone and never take another
point's run, a lock per run directory between launchers on one --out, blame under --spawn for a
rank that died without a word, ranks that die with their launcher, the error file of a rank that was
stopped, a full disk that keeps the sweep's records consistent, the probes of SCALEPROBE_TRACE and
SCALEPROBE_NVTX hidden from dynamo, and the script's `__main__` as Python builds it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime import sweep_run
from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.sweep_design import Design, point_name, run_name
from runtime.sweep_state import RECORD, RunRecord, claim, place, read_record, write_record

from .test_launch_cluster import write
from .test_launch_e2e import clean_env, launch, start, wait_for
from .test_review_fixes2 import _build

# Writes a marker naming the value it ran with, as a run file would be written.
MARKER = '''
import os, sys
open(os.path.join(os.environ["SCALEPROBE_OUT"], "rank0.999.jsonl"), "w").write("marker " + sys.argv[1] + "\\n")
'''

# Records one region through the real probe ABI (so the rank has a real run file), then waits for
# `go` (or for ever), and notes that it unwound.
HOLD = '''
import os, sys, time
from runtime.probe import define, enter, exit
define(__name__, globals(), "hold.py", ((0, "function", "work", 1),))
enter(0); sum(range(1000)); exit(0)
out = os.environ["SCALEPROBE_OUT"]
rank = os.environ.get("RANK", "0")
go = os.path.join(os.path.dirname(os.path.dirname(out)), "..", "go")
try:
    with open(os.path.join(out, "started" + rank), "w") as f:
        f.write(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)
except BaseException as exc:
    with open(os.path.join(out, "unwound" + rank), "w") as f:
        f.write(type(exc).__name__ + " " + str(getattr(exc, "code", "")))
    raise
'''


def _record(directory: Path, params: dict, status: str = "ok") -> None:
    write_record(directory, RunRecord(experiment="e", run_id="x", params=params, repetition=0,
                                      command=["c"], status=status))


# ----- 6: a point's directory name is its own; another point's run is never cleared -----------------

def test_a_name_depends_on_the_point_alone():
    one = Design(sweep={"x": ["a/b", "a_b"]}).runs(Path("o"), "e", [], nproc=1)
    other = Design(sweep={"x": ["a_b", "a/b"]}).runs(Path("o"), "e", [], nproc=1)
    assert {r.params["x"]: r.directory for r in one} == {r.params["x"]: r.directory for r in other}
    assert len({r.directory for r in one}) == 2
    # only values a name cannot hold as they are get the hash; plain ones keep the readable name
    assert run_name({"ranks": 2, "lr": 0.1, "m": "res50"}) == "ranks-2_lr-0.1_m-res50"
    assert run_name({"ranks": 1, "m": "a_b"}).startswith("ranks-1_m-a_b_")


def test_a_later_sweep_of_one_value_keeps_the_other_values_run(tmp_path):
    write(tmp_path / "rec.py", MARKER)
    assert launch(["--sweep", "x=a/b,a_b", "--", "rec.py", "{x}"], tmp_path).returncode == 0
    again = launch(["--sweep", "x=a_b", "--", "rec.py", "{x}"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 skipped as done before" in again.stderr
    runs = {json.loads((d / RECORD).read_text())["params"]["x"]: (d / "rank0.999.jsonl").read_text()
            for d in (tmp_path / "runs" / "rec").iterdir()}
    assert runs == {"a/b": "marker a/b\n", "a_b": "marker a_b\n"}


def test_a_directory_holding_another_points_run_is_never_taken(tmp_path):
    mine, theirs = {"ranks": 1, "x": "a/b"}, {"ranks": 1, "x": "a_b"}
    directory = tmp_path / "run_rep-0"
    _record(directory, theirs)
    (directory / "rank0.1.jsonl").write_text("theirs\n")
    chosen = place(directory, mine)
    assert chosen != directory and chosen.name == "run_rep-0_alt-2"
    _record(chosen, mine)
    assert place(directory, mine) == chosen  # found again on resume
    assert (directory / "rank0.1.jsonl").read_text() == "theirs\n"


def test_a_run_an_older_launcher_named_without_the_hash_is_resumed_where_it_is(tmp_path):
    point = {"ranks": 1, "x": "a/b"}
    legacy = tmp_path / f"{point_name(point)}_rep-0"
    _record(legacy, point)
    assert place(tmp_path / f"{run_name(point)}_rep-0", point, [legacy]) == legacy


# ----- 7: launchers on one --out ----------------------------------------------------------------------

def test_a_run_directory_is_held_by_one_launcher_at_a_time(tmp_path):
    first = claim(tmp_path / "run")
    assert not isinstance(first, str)
    held = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from runtime.sweep_state import claim; print(claim(Path(sys.argv[1])))",
                           str(tmp_path / "run")], env=clean_env(), capture_output=True, text=True)
    assert held.stdout.strip() == f"pid {os.getpid()} on {os.uname().nodename}", held.stderr
    first.release()
    again = claim(tmp_path / "run")
    assert not isinstance(again, str)
    again.release()


@pytest.mark.slow
def test_a_second_launcher_leaves_the_first_ones_run_alone(tmp_path):
    write(tmp_path / "hold.py", HOLD)
    args = ["--sweep", "n=1", "hold.py"]
    first = start(args, tmp_path)
    run_dir = tmp_path / "runs" / "hold" / "ranks-1_n-1_rep-0"
    wait_for([run_dir / "started0"], first)
    (run_file,) = run_dir.glob("rank0.*.jsonl")
    second = start(args, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while "being run by another launcher" not in (line := second.stderr.readline()):
            assert line and time.monotonic() < deadline, "the second launcher never saw the first one"
        assert run_file.exists() and (run_dir / "started0").exists()  # nothing of the first run cleared
    finally:
        (tmp_path / "go").touch()
        out1, err1 = first.communicate(timeout=60)
        out2, err2 = second.communicate(timeout=60)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert "0 runs completed, 0 failed, 1 skipped as done before" in err2
    assert run_file.exists()


def test_launchers_started_at_once_take_a_repetition_each(tmp_path):
    from runtime import launch as launcher

    write(tmp_path / "main.py", "")
    opts = parse(["--out", str(tmp_path / "runs"), "main.py", "--rep={repetition}"])
    runs = launcher._runs(opts, 1)
    assert runs[0].repetition == 0
    runs[0].directory.mkdir(parents=True)  # another launcher made repetition 0 meanwhile
    (run,) = launcher._claim_repetition(opts, runs)
    assert (run.repetition, run.directory.name, run.args) == (1, "ranks-1_rep-1", ["--rep=1"])
    assert run.directory.is_dir()


# ----- 8 and 12: who failed under --spawn; the error file of a stopped rank ---------------------------

# A minimal srun: starts N tasks with SLURM's variables and SIGTERMs the others when one fails.
FAKESRUN = '''
import os, signal, subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
procs = [subprocess.Popen(cmd, env=dict(os.environ, SLURM_PROCID=str(r), SLURM_LOCALID=str(r),
                                        SLURM_STEP_NUM_TASKS=str(n), SLURM_JOB_ID="4242", SLURM_STEP_ID="0"))
         for r in range(n)]
failed = False
while any(p.poll() is None for p in procs):
    if not failed and any(p.poll() not in (None, 0) for p in procs):
        failed = True
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    time.sleep(0.02)
sys.exit(1 if failed or any(p.returncode for p in procs) else 0)
'''

# Rank 1 dies by SIGKILL (as by the OOM killer: no error file) once rank 0 waits in its `try`.
DIES = HOLD.replace("try:\n", '''if rank == "1":
    while not os.path.exists(os.path.join(out, "started0")):
        time.sleep(0.02)
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
try:
''', 1).replace('rank = os.environ.get("RANK", "0")', 'rank = os.environ["SLURM_PROCID"]')


@pytest.mark.slow
def test_under_spawn_the_rank_that_died_silently_is_blamed_not_the_one_srun_stopped(tmp_path):
    write(tmp_path / "fakesrun.py", FAKESRUN)
    write(tmp_path / "dies.py", DIES)
    done = launch(["--param", "ranks=2", "--spawn", f"{sys.executable} {tmp_path / 'fakesrun.py'} {{ranks}}",
                   "dies.py"], tmp_path)
    assert done.returncode == 1, done.stderr
    (run_dir,) = (tmp_path / "runs" / "dies").iterdir()
    record = json.loads((run_dir / RECORD).read_text())
    assert record["failed_rank"] == 1, record
    assert "rank 1 failed: died without an error message (its run file has no end record" in done.stderr
    assert (run_dir / "rank0.error.txt").read_text().startswith("stopped by SIGTERM")


@pytest.mark.slow
def test_a_timed_out_ranks_error_file_says_it_was_stopped(tmp_path):
    write(tmp_path / "hold.py", HOLD)
    done = launch(["--timeout", "1", "hold.py"], tmp_path)
    assert done.returncode == 124, done.stderr
    (run_dir,) = (tmp_path / "runs" / "hold").iterdir()
    first = (run_dir / "rank0.error.txt").read_text().splitlines()[0]
    assert first.startswith("stopped by SIGTERM (the launcher stops every rank at --timeout"), first  # review 77 L2
    assert "SystemExit" not in first
    assert json.loads((run_dir / RECORD).read_text())["status"] == "timeout"


# ----- 11: ranks die with their launcher ----------------------------------------------------------------

def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] in ("Z", "X")  # a zombie nobody reaped yet
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_stop_when_their_launcher_is_killed(tmp_path):
    write(tmp_path / "hold.py", HOLD)
    launcher = start(["--nproc", "2", "hold.py"], tmp_path)
    run_dir = tmp_path / "runs" / "hold" / "ranks-2_rep-0"
    wait_for([run_dir / "started0", run_dir / "started1"], launcher)
    pids = [int((run_dir / f"started{r}").read_text()) for r in (0, 1)]
    launcher.kill()
    launcher.wait()
    deadline = time.monotonic() + 60
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in pids if not _gone(p)]
    for p in alive:
        os.kill(p, signal.SIGKILL)
    assert not alive, "ranks outlived their launcher"
    # they were stopped by SIGTERM, so the program unwound and the runtime flushed
    assert (run_dir / "unwound0").read_text() == "SystemExit 143"


# ----- 5: a full disk ------------------------------------------------------------------------------------

def test_a_failed_record_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / RECORD).mkdir()  # the rename onto it fails, as a full disk fails the write
    with pytest.raises(LaunchError, match=f"cannot write the launch record {tmp_path / RECORD}"):
        _record(tmp_path, {"ranks": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORD]


def test_a_sweep_whose_records_cannot_be_written_stops_cleanly(tmp_path, monkeypatch, capsys):
    from runtime.config import from_env
    from runtime.launch_ranks import Outcome, SignalInbox

    write(tmp_path / "main.py", "")
    opts = parse(["--out", str(tmp_path / "runs"), "--sweep", "n=1,2,3", "main.py"])
    runs = opts.design.runs(opts.out, opts.experiment, opts.args, 1)
    calls = []
    real = sweep_run.write_record

    def write_fails_at_the_end_of_the_second_run(directory, record):
        calls.append(record.status)
        if len(calls) == 4:
            raise LaunchError(f"cannot write the launch record {directory / RECORD}: No space left on device")
        real(directory, record)

    monkeypatch.setattr(sweep_run, "write_record", write_fails_at_the_end_of_the_second_run)
    monkeypatch.setattr(sweep_run, "run_members", lambda *a, **k: Outcome("ok", 0, None, None, 0.1))
    with SignalInbox() as between:
        code = sweep_run._execute(opts, runs, from_env({}), between)
    err = capsys.readouterr().err
    assert code == 1
    assert calls == ["running", "ok", "running", "ok"]  # the third run never started
    assert f"sweep stopped: cannot write the launch record {runs[1].directory / RECORD}" in err
    assert "1 runs completed, 1 failed, 0 skipped as done before, 1 not run" in err
    assert read_record(runs[0].directory).status == "ok"
    assert read_record(runs[1].directory).status == "running"  # not complete: a resume makes it again


@pytest.mark.slow
def test_a_run_file_that_cannot_be_finished_fails_the_run_not_the_program(tmp_path):
    src = "import time\ndef f(i):\n    return i + 1\nfor i in range(20000):\n    f(i)\nprint('program done')\n"
    _, out = _build(tmp_path, src)
    limit = "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000)); "
    done = subprocess.run(
        [sys.executable, "-c", limit + "import runpy; sys.argv = ['runtime.launch', '--nproc', '1', "
         f"{str(out / 'main.py')!r}]; runpy.run_module('runtime.launch', run_name='__main__')"],
        cwd=tmp_path, env=clean_env({"SCALEPROBE_THROTTLE_CALLS": "0"}), capture_output=True, text=True,
        timeout=120)
    assert done.stdout == "program done\n"
    (run_dir,) = (tmp_path / "runs" / "main").iterdir()
    record = json.loads((run_dir / RECORD).read_text())
    assert (done.returncode, record["exit_code"], record["status"]) == (0, 0, "failed"), done.stderr
    assert record["error"].startswith(f"cannot write run file {run_dir}"), record
    assert "scaleprobe launch: rank 0 failed: cannot write run file" in done.stderr


# ----- instrumentor 6: the trace and NVTX probes are hidden from dynamo ----------------------------------

COMPILED = '''
import torch

def block(x):
    for i in range(3):
        x = torch.sin(x) + i
    return x

print(torch.compile(block, fullgraph=True, backend="eager")(torch.ones(2)).tolist())
'''


@pytest.mark.slow
@pytest.mark.parametrize("variable", ["SCALEPROBE_TRACE", "SCALEPROBE_NVTX"])
def test_fullgraph_compile_with_trace_or_nvtx_probes(tmp_path, variable):
    pytest.importorskip("torch")
    if variable == "SCALEPROBE_NVTX":
        pytest.importorskip("nvtx")
    _, out = _build(tmp_path, COMPILED)
    done = subprocess.run([sys.executable, str(out / "main.py")], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env({variable: "1", "SCALEPROBE_OUT": str(tmp_path / "o")}), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("[2.98")


def test_a_probe_hidden_before_dynamo_is_loaded_is_hidden_once_it_is(monkeypatch):
    import types

    from runtime import dynamo

    substituted = []
    torch = types.SimpleNamespace(compiler=types.SimpleNamespace(
        substitute_in_graph=lambda fn, skip_signature_check: (lambda noop: substituted.append(fn))))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    monkeypatch.setattr(dynamo, "_hidden", set())
    monkeypatch.setattr(dynamo, "_pending", [], raising=False)

    def wrapper(rid):
        return None

    dynamo.hide(wrapper)  # SCALEPROBE_TRACE's wrapper, made at the module's import
    assert substituted == []
    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    dynamo.hide_probes()  # the program imported torch._dynamo
    assert wrapper in substituted


# ----- instrumentor 7: `__main__` as `python script.py` builds it --------------------------------------

NAMESPACE = '''
__builtins__.answer = 42
print(answer, type(__builtins__).__name__)
print(sorted(globals()))
print(__loader__.get_source(__name__).splitlines()[1])
'''


@pytest.mark.parametrize("ranks", [[], ["--nproc", "1"]])
def test_the_scripts_main_module_is_the_one_python_builds(tmp_path, ranks):
    write(tmp_path / "b.py", NAMESPACE)
    plain = subprocess.run([sys.executable, "b.py"], cwd=tmp_path, capture_output=True, text=True,
                           env=clean_env())
    launched = launch([*ranks, "b.py"], tmp_path, {"SCALEPROBE_DISABLE": "1"})
    assert plain.returncode == 0, plain.stderr
    assert (launched.returncode, launched.stdout) == (0, plain.stdout), launched.stderr
    assert plain.stdout.startswith("42 module\n")
