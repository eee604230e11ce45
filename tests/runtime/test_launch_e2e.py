"""`python -m runtime.launch` end to end, in subprocesses, on tiny scripts written per test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runtime.runfile import read_run
from tests import envclean

REPO = Path(__file__).resolve().parents[2]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return envclean.clean_env(**{"PYTHONPATH": str(REPO), "SCALEPROBE_QUIET": "1", **(extra or {})})


def launch(args: list[str], cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=clean_env(env),
                          capture_output=True, text=True, timeout=timeout)


def start(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=clean_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(paths: list[Path], proc: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not all(p.exists() for p in paths):
        if proc.poll() is not None:
            raise AssertionError(f"launcher ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never appeared: {[str(p) for p in paths if not p.exists()]}")
        time.sleep(0.05)


# Records one region through the real probe ABI, so every rank writes a real run file, and dumps
# what it saw of its own start-up for the test to check.
SHOW = '''
import json, os, sys
from runtime.probe import define, enter, exit
define(__name__, globals(), "show.py", ((0, "function", "work", 1),))
enter(0); sum(range(1000)); exit(0)
out = os.environ["SCALEPROBE_OUT"]
os.makedirs(out, exist_ok=True)
seen = {"argv": sys.argv, "file": __file__, "path0": sys.path[0], "name": __name__,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith("SCALEPROBE_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}}
with open(os.path.join(out, "show%s.json" % os.environ.get("RANK", "0")), "w") as f:
    json.dump(seen, f)
'''

# Both ranks say they started, then wait to be stopped; their `finally` proves they unwound.
SLEEPER = '''
import os, sys, time
out = os.environ["SCALEPROBE_OUT"]
rank = os.environ["RANK"]
try:
    open(os.path.join(out, "started" + rank), "w").close()
    if os.environ.get("SLEEP", "1") == "1":
        time.sleep(120)
except BaseException as exc:
    with open(os.path.join(out, "flushed" + rank), "w") as f:
        f.write(type(exc).__name__ + " " + str(getattr(exc, "code", "")))
    raise
'''

# Rank 1 fails once rank 0 is inside its `try`, so that the SIGTERM rank 0 then gets must unwind it.
CRASH = '''
import os, time
out = os.environ["SCALEPROBE_OUT"]
ready = os.path.join(out, "ready0")
if os.environ["RANK"] == "1":
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.02)
    raise ValueError("rank one is broken")
try:
    open(ready, "w").close()
    time.sleep(120)
except SystemExit as exc:
    with open(os.path.join(out, "stopped0"), "w") as f:
        f.write(str(exc.code))
    raise
'''


def script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def seen(run_dir: Path, rank: int) -> dict:
    return json.loads((run_dir / f"show{rank}.json").read_text())


def record(run_dir: Path) -> dict:
    return json.loads((run_dir / "launch.json").read_text())


def test_plain_run_is_like_python(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["show.py", "a", "--", "b"], tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "show" / "ranks-1_rep-0"
    got = seen(run_dir, 0)
    assert got["argv"] == ["show.py", "a", "--", "b"]
    assert got["file"] == str(tmp_path / "show.py")
    assert got["path0"] == str(tmp_path)
    assert got["name"] == "__main__"
    assert got["env"]["WORLD_SIZE"] == "1"
    assert json.loads(got["env"]["SCALEPROBE_PARAMS"]) == {"ranks": 1}
    assert record(run_dir)["status"] == "ok"
    (run_file,) = run_dir.glob("rank0.*.jsonl")
    run = read_run(run_file)
    assert run.header["run_id"] == record(run_dir)["run_id"]
    assert run.end["status"] == "ok"
    # Run by hand again: a new repetition, the first one kept.
    assert launch(["show.py"], tmp_path).returncode == 0
    assert record(tmp_path / "runs" / "show" / "ranks-1_rep-1")["repetition"] == 1
    assert (run_dir / "launch.json").exists()


def test_exit_codes_and_traceback_pass_through(tmp_path):
    script(tmp_path, "three.py", "import sys\nsys.exit(3)\n")
    script(tmp_path, "msg.py", "import sys\nsys.exit('goodbye')\n")
    script(tmp_path, "bad.py", "def f():\n    raise KeyError('nope')\n\nf()\n")
    script(tmp_path, "pick.py", "import pickle\nclass A:\n    pass\n"
                                "assert type(pickle.loads(pickle.dumps(A()))) is A\n")
    assert launch(["three.py"], tmp_path).returncode == 3
    msg = launch(["msg.py"], tmp_path)
    assert (msg.returncode, msg.stderr.strip()) == (1, "goodbye")
    bad = launch(["bad.py"], tmp_path)
    assert bad.returncode == 1
    frames = [line for line in bad.stderr.splitlines() if line.strip().startswith("File ")]
    assert frames == [f'  File "{tmp_path / "bad.py"}", line 4, in <module>',
                      f'  File "{tmp_path / "bad.py"}", line 2, in f'], bad.stderr
    assert "KeyError: 'nope'" in bad.stderr
    failed = record(tmp_path / "runs" / "bad" / "ranks-1_rep-0")
    assert (failed["status"], failed["error"]) == ("failed", "KeyError: 'nope'")
    assert launch(["pick.py"], tmp_path).returncode == 0
    script(tmp_path, "syntax.py", "x = 1\ndef (:\n")
    syntax = launch(["syntax.py"], tmp_path)
    assert syntax.returncode == 1
    assert syntax.stderr.startswith(f'  File "{tmp_path / "syntax.py"}", line 2')
    assert "SyntaxError" in syntax.stderr and "Traceback" not in syntax.stderr


def test_nproc_two_ranks_get_torch_environment(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["--nproc", "2", "--param", "batch=8", "show.py", "--x"], tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "show" / "ranks-2_batch-8_rep-0"
    envs = [seen(run_dir, r)["env"] for r in (0, 1)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in envs] == [("0", "0", "2"), ("1", "1", "2")]
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"] and int(envs[0]["MASTER_PORT"]) > 0
    assert envs[0]["SCALEPROBE_LAUNCHER"] == "launch"
    runs = sorted((read_run(p) for p in run_dir.glob("rank*.jsonl")), key=lambda r: r.header["rank"])
    assert [r.header["rank"] for r in runs] == [0, 1]
    assert {r.header["run_id"] for r in runs} == {record(run_dir)["run_id"]}
    assert all(r.header["params"] == {"ranks": 2, "batch": 8} for r in runs)
    assert seen(run_dir, 1)["argv"] == ["show.py", "--x"]


def test_crashing_rank_stops_the_others(tmp_path):
    script(tmp_path, "crash.py", CRASH)
    done = launch(["--nproc", "2", "--grace", "30", "crash.py"], tmp_path)
    assert done.returncode == 1
    assert "rank 1 failed: ValueError: rank one is broken" in done.stderr
    run_dir = tmp_path / "runs" / "crash" / "ranks-2_rep-0"
    # Rank 0 was asked to stop with SIGTERM and unwound (so its data was flushed), not killed.
    assert (run_dir / "stopped0").read_text() == "143"
    rec = record(run_dir)
    assert (rec["status"], rec["failed_rank"], rec["error"]) == ("failed", 1, "ValueError: rank one is broken")


@pytest.mark.parametrize("sig, code, exc", [(signal.SIGTERM, 143, "SystemExit 143"),
                                             (signal.SIGINT, 130, "KeyboardInterrupt ")])
def test_signal_reaches_every_rank(tmp_path, sig, code, exc):
    script(tmp_path, "sleeper.py", SLEEPER)
    run_dir = tmp_path / "runs" / "sleeper" / "ranks-2_rep-0"
    proc = start(["--nproc", "2", "sleeper.py"], tmp_path)
    wait_for([run_dir / "started0", run_dir / "started1"], proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert [(run_dir / f"flushed{r}").read_text() for r in (0, 1)] == [exc, exc]
    assert record(run_dir)["status"] == "interrupted"
    assert f"scaleprobe launch: interrupted by {sig.name}" in err  # review 20: nothing was said


def test_sweep_runs_every_point_and_repetition(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["--sweep", "ranks=1,2", "--sweep", "batch=16,32", "--repeat", "2", "--out", "out",
                   "--experiment", "exp", "--", "show.py", "--batch-size", "{batch}", "--rep={repetition}"],
                  tmp_path)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "out" / "exp"
    expected = {f"ranks-{r}_batch-{b}_rep-{k}" for r in (1, 2) for b in (16, 32) for k in (0, 1)}
    assert {p.name for p in root.iterdir()} == expected
    run_ids = set()
    for r in (1, 2):
        for b in (16, 32):
            for k in (0, 1):
                run_dir = root / f"ranks-{r}_batch-{b}_rep-{k}"
                assert record(run_dir)["status"] == "ok"
                files = sorted(run_dir.glob("rank*.jsonl"))
                assert len(files) == r
                headers = [read_run(f).header for f in files]
                assert sorted(h["rank"] for h in headers) == list(range(r))
                assert all(h["params"] == {"ranks": r, "batch": b} and h["experiment"] == "exp" for h in headers)
                assert len({h["run_id"] for h in headers}) == 1
                run_ids.add(headers[0]["run_id"])
                got = seen(run_dir, 0)
                assert got["argv"] == ["show.py", "--batch-size", str(b), f"--rep={k}"]
                assert got["env"]["SCALEPROBE_REPETITION"] == str(k)
    assert len(run_ids) == 8
    assert "8 runs completed, 0 failed" in done.stderr
    assert "8/8 runs" in done.stderr


def test_sweep_goes_on_after_failure_and_timeout(tmp_path):
    script(tmp_path, "mixed.py", '''
        import sys, time
        x = int(sys.argv[1])
        if x == 2:
            raise RuntimeError("two is bad")
        if x == 3:
            time.sleep(120)
    ''')
    done = launch(["--sweep", "x=1,2,3,4", "--timeout", "5", "--grace", "1", "mixed.py", "{x}"], tmp_path)
    assert done.returncode == 1
    root = tmp_path / "runs" / "mixed"
    statuses = {x: record(root / f"ranks-1_x-{x}_rep-0")["status"] for x in (1, 2, 3, 4)}
    assert statuses == {1: "ok", 2: "failed", 3: "timeout", 4: "ok"}
    assert "2 runs completed, 2 failed" in done.stderr
    assert "rank 0: RuntimeError: two is bad" in done.stderr
    assert "timeout" in done.stderr


def test_a_run_that_exits_with_an_error_status_says_so(tmp_path):
    script(tmp_path, "exits.py", '''
        import argparse, sys
        if sys.argv[1] == "msg":
            sys.exit("bad config: lr must be positive")
        argparse.ArgumentParser().parse_args(["--no-such-option"])
    ''')
    done = launch(["--sweep", "how=msg,usage", "exits.py", "{how}"], tmp_path)
    assert done.returncode == 1
    root = tmp_path / "runs" / "exits"
    msg, usage = record(root / "ranks-1_how-msg_rep-0"), record(root / "ranks-1_how-usage_rep-0")
    assert msg["status"] == usage["status"] == "failed"
    assert "bad config: lr must be positive" in msg["error"]
    assert "exited with status 2" in usage["error"]
    assert "unrecognized arguments: --no-such-option" in done.stderr  # argparse's own message, passed through


def test_sigterm_during_sweep_then_resume(tmp_path):
    script(tmp_path, "step.py", '''
        import os, sys, time
        out = os.environ["SCALEPROBE_OUT"]
        try:
            with open(os.path.join(out, "starts.log"), "a") as f:
                f.write("x")
            if sys.argv[1] == "2" and os.environ.get("SLEEP") == "1":
                time.sleep(120)
        finally:
            if sys.argv[1] == "2" and os.environ.get("SLEEP") == "1":
                open(os.path.join(out, "flushed"), "w").close()
    ''')
    args = ["--sweep", "x=1,2,3", "step.py", "{x}"]
    root = tmp_path / "runs" / "step"
    proc = start(args, tmp_path, {"SLEEP": "1"})
    wait_for([root / "ranks-1_x-2_rep-0" / "starts.log"], proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert record(root / "ranks-1_x-1_rep-0")["status"] == "ok"
    assert record(root / "ranks-1_x-2_rep-0")["status"] == "interrupted"
    assert (root / "ranks-1_x-2_rep-0" / "flushed").exists()
    assert not (root / "ranks-1_x-3_rep-0").exists()
    assert "run the same command again to resume" in err

    dry = launch(["--dry-run", *args], tmp_path)
    assert dry.returncode == 0
    assert [line.split()[0] for line in dry.stdout.splitlines()[:3]] == ["done", "run", "run"]
    assert "2 of 3 runs would run" in dry.stdout

    again = launch(args, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 skipped" in again.stderr
    starts = {x: (root / f"ranks-1_x-{x}_rep-0" / "starts.log").read_text() for x in (1, 2, 3)}
    assert starts == {1: "x", 2: "xx", 3: "x"}
    assert all(record(root / f"ranks-1_x-{x}_rep-0")["status"] == "ok" for x in (1, 2, 3))


def test_sweep_from_toml(tmp_path):
    script(tmp_path, "show.py", SHOW)
    (tmp_path / "design.toml").write_text(
        'experiment = "fromfile"\nrepeat = 2\n[sweep]\nn = [10, 20]\n[params]\nmodel = "cnn"\n')
    done = launch(["--sweep-file", "design.toml", "show.py", "-n", "{n}"], tmp_path)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "runs" / "fromfile"
    assert {p.name for p in root.iterdir()} == {f"ranks-1_model-cnn_n-{n}_rep-{k}" for n in (10, 20) for k in (0, 1)}
    assert seen(root / "ranks-1_model-cnn_n-20_rep-1", 0)["argv"] == ["show.py", "-n", "20"]


@pytest.mark.parametrize("args, message", [
    (["--sweep", "ranks=1,x", "s.py"], "number of ranks must be a positive integer"),
    (["--sweep", "batch", "s.py"], "--sweep 'batch': expected name=value"),
    (["--param", "a=1,2", "s.py"], "one value only"),
    (["--sweep", "a=1", "s.py", "{b}"], "names {b}, which is no parameter"),
    (["--nproc", "0", "s.py"], "--nproc 0: must be at least 1"),
    (["--nproc", "2", "missing.py"], "script missing.py does not exist"),
    (["--sweep-file", "nope.toml", "s.py"], "sweep file nope.toml"),
])
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    script(tmp_path, "s.py", "pass\n")
    done = launch(args, tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def fake_instrumentor(tmp_path: Path, importhook: str | None) -> dict[str, str]:
    """An `instrumentor` package ahead of the real one on the path (the editable install's finder
    comes after PYTHONPATH)."""
    package = tmp_path / "fake" / "instrumentor"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if importhook is not None:
        (package / "importhook.py").write_text(textwrap.dedent(importhook))
    return {"PYTHONPATH": f"{package.parent}{os.pathsep}{REPO}"}


def test_instrument_without_importhook_is_a_clear_error(tmp_path):
    script(tmp_path, "s.py", "pass\n")
    done = launch(["--instrument", "s.py"], tmp_path, fake_instrumentor(tmp_path, None))
    assert done.returncode == 2
    assert "--instrument needs instrumentor.importhook" in done.stderr
    assert "Traceback" not in done.stderr


def test_instrument_installs_hook_and_runs_instrumented_entry(tmp_path):
    # Stands in for the instrumentor: records how it was installed, marks the entry's code.
    hook = '''
        import json, os
        def install(project_root, cache_dir=None, backend="runtime"):
            os.environ["HOOK"] = json.dumps([str(project_root), str(cache_dir), backend])
        def instrument_entry(path):
            source = "INSTRUMENTED = True\\n" + open(path).read()
            return compile(source, str(path), "exec")
    '''
    env = fake_instrumentor(tmp_path, hook)
    project = tmp_path / "proj"
    project.mkdir()
    script(project, "main.py", '''
        import json, os, sys
        with open(os.path.join(os.environ["SCALEPROBE_OUT"], "got.json"), "w") as f:
            json.dump([INSTRUMENTED, json.loads(os.environ["HOOK"]), sys.argv], f)
    ''')
    done = launch(["--instrument", "--cache-dir", "cache", "--nproc", "2", "proj/main.py", "z"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "runs" / "main" / "ranks-2_rep-0" / "got.json").read_text())
    assert got == [True, [str(project), str(tmp_path / "cache"), "runtime"], ["proj/main.py", "z"]]
