"""Review 15's launcher findings: `-m MODULE` (4), a failed run's own stderr message kept (5), a
swept parameter no `{name}` uses (6), and the sweep's interrupted count and a failed single run's
line (12)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from runtime.runfile import read_run
from runtime.sweep_progress import Progress
from tests.runtime.test_launch_e2e import REPO, clean_env, launch

TRAIN = '''\
import argparse
import sys
from .util import f
from . import INIT_ARGV0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=10)
    a = p.parse_args()
    # one write: two ranks share the pipe, and with PYTHONUNBUFFERED print's pieces interleave
    fields = ["RESULT", f(a.n), __name__, __package__, __spec__.name, sys.argv[0], INIT_ARGV0, sys.path[0],
              sys.argv[1:]]
    sys.stdout.write(" ".join(map(str, fields)) + "\\n")
    sys.stdout.flush()
    if a.n < 0:
        raise ValueError("negative n")


if __name__ == "__main__":
    main()
'''
RAISE_LINE = 17  # the `raise ValueError` above, in the original file


def package(src: Path) -> Path:
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("import sys\nINIT_ARGV0 = sys.argv[0]\n")
    (src / "pkg" / "util.py").write_text("def f(x):\n    s = 0\n    for i in range(x):\n        s += i\n    return s\n")
    (src / "pkg" / "train.py").write_text(TRAIN)
    return src


def build(tmp_path: Path) -> tuple[Path, Path]:
    src, out = package(tmp_path / "src"), tmp_path / "build"
    done = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(out), "--main", "pkg/train.py"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return src, out


def results(stdout: str) -> list[list[str]]:
    return [line.split(" ", 7) for line in stdout.splitlines() if line.startswith("RESULT ")]


def regions(run_dir: Path) -> set[tuple[str, str]]:
    found = set()
    for path in run_dir.glob("rank*.jsonl"):
        run = read_run(path)
        assert run.end is not None
        found |= {(r.name, r.file) for r in run.regions.values()}
    return found


def test_module_of_a_built_tree_runs_as_python_m_with_relative_imports(tmp_path):
    src, out = build(tmp_path)
    done = launch(["--out", str(tmp_path / "runs"), "-m", "pkg.train", "--n", "5"], out)
    assert done.returncode == 0, done.stderr
    (res,) = results(done.stdout)
    module_file = str(out / "pkg" / "train.py")
    # f(5), __name__, __package__, __spec__.name, argv[0], argv[0] while pkg/__init__ ran, sys.path[0]
    assert res[1:7] == ["10", "__main__", "pkg", "pkg.train", module_file, "-m"]
    assert res[7].startswith(str(out) + " ")
    (run_dir,) = (tmp_path / "runs" / "pkg.train").iterdir()
    assert {("main", "pkg/train.py"), ("f", "pkg/util.py"), ("f:for@3", "pkg/util.py")} <= regions(run_dir)
    record = json.loads((run_dir / "launch.json").read_text())
    assert record["program"] == ["-m", "pkg.train", "--n", "5"] and record["status"] == "ok"
    # The module's file runs with the original file and lines, as a built tree's entry script does.
    failed = launch(["--out", str(tmp_path / "runs"), "-m", "pkg.train", "--n", "-1"], out)
    assert failed.returncode == 1
    assert f'File "{src / "pkg" / "train.py"}", line {RAISE_LINE}, in main' in failed.stderr
    assert "ValueError: negative n" in (run_dir.parent / "ranks-1_rep-1" / "rank0.error.txt").read_text()


def test_module_in_a_sweep_on_rank_processes_and_resume(tmp_path):
    _, out = build(tmp_path)
    args = ["--out", str(tmp_path / "runs"), "--sweep", "ranks=1,2", "--sweep", "n=3,4", "-m", "pkg.train",
            "--n", "{n}"]
    done = launch(args, out)
    assert done.returncode == 0, done.stderr
    assert sorted(r[1] for r in results(done.stdout)) == ["3"] * 3 + ["6"] * 3  # 1 + 2 ranks per value
    assert all(r[2:4] == ["__main__", "pkg"] for r in results(done.stdout))
    run_dir = tmp_path / "runs" / "pkg.train" / "ranks-2_n-4_rep-0"
    record = json.loads((run_dir / "launch.json").read_text())
    assert record["command"][-5:] == ["--child", "-m", "pkg.train", "--n", "4"]
    assert len(list(run_dir.glob("rank*.jsonl"))) == 2 and ("f", "pkg/util.py") in regions(run_dir)
    again = launch(args, out)
    assert again.returncode == 0 and "4 skipped as done before" in again.stderr and not results(again.stdout)
    dry = launch(["--dry-run", *args], out)
    assert dry.stdout.count("-m pkg.train --n ") == 4 and "0 of 4 runs would run" in dry.stdout


def test_module_with_instrument_on_the_fly(tmp_path):
    src = package(tmp_path / "src")
    done = launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "runs"),
                   "--nproc", "2", "-m", "pkg.train", "--n", "4"], src)
    assert done.returncode == 0, done.stderr
    assert [r[1:4] for r in results(done.stdout)] == [["6", "__main__", "pkg"]] * 2
    (run_dir,) = (tmp_path / "runs" / "pkg.train").iterdir()
    assert {("main", "pkg/train.py"), ("f:for@3", "pkg/util.py")} <= regions(run_dir)


def test_module_package_main_and_argv(tmp_path):
    src = package(tmp_path / "src")
    (src / "pkg" / "__main__.py").write_text("import sys\nfrom .util import f\nprint('MAIN', f(3), sys.argv[1:], __spec__.name)\n")
    done = launch(["--out", str(tmp_path / "runs"), "-m", "pkg", "a", "--", "-m", "x"], src)
    assert done.returncode == 0, done.stderr
    assert "MAIN 3 ['a', '--', '-m', 'x'] pkg.__main__" in done.stdout
    assert (tmp_path / "runs" / "pkg").is_dir()  # the experiment is named for the module as given


def test_module_main_has_the_names_python_m_gives_it(tmp_path):
    """Review 17 F4: `__annotations__` was missing from a module's `__main__`."""
    src = package(tmp_path / "src")
    (src / "pkg" / "names.py").write_text("print('NAMES', sorted(globals()))\n")
    plain = subprocess.run([sys.executable, "-m", "pkg.names"], cwd=src, env=clean_env(), capture_output=True,
                           text=True, timeout=60)
    launched = launch(["--out", str(tmp_path / "runs"), "-m", "pkg.names"], src)
    assert launched.returncode == 0, launched.stderr
    names = [ln for ln in plain.stdout.splitlines() if ln.startswith("NAMES")]
    assert names and names == [ln for ln in launched.stdout.splitlines() if ln.startswith("NAMES")]
    assert "'__annotations__'" in names[0]


def test_the_hint_for_a_package_run_without_probes_names_its_main_file(tmp_path):
    """Review 17 F5: for `-m pkg` the hint said `--main pkg.py`."""
    src = package(tmp_path / "src")
    (src / "pkg" / "__main__.py").write_text("print('MAIN')\n")
    done = launch(["--out", str(tmp_path / "runs"), "-m", "pkg"], src)
    assert done.returncode == 0, done.stderr
    assert "--main pkg/__main__.py, then run -m pkg in build/" in done.stderr, done.stderr


def test_module_errors_name_the_option(tmp_path):
    src = package(tmp_path / "src")
    cases = {
        ("-m", "nosuch"): "-m nosuch: no module named 'nosuch'",
        ("-m", "pkg.nosuch"): "-m pkg.nosuch: no module named 'pkg.nosuch'",
        ("-m", "pkg"): "-m pkg: pkg is a package without a __main__ module",
        ("-m", "pkg.util.x"): "-m pkg.util.x: pkg.util",
        ("-m", "pkg/train.py"): "-m 'pkg/train.py': not a module name",
        ("--", "-m", "pkg.train"): "to run a module, give -m MODULE before any --",
    }
    for args, message in cases.items():
        done = launch(["--out", str(tmp_path / "runs"), *args], src)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    assert not (tmp_path / "runs").exists()


def test_module_not_found_in_a_rank_is_its_error(tmp_path):
    # Under srun/mpiexec the rank finds out itself (no check before): as python -m says it, exit 1.
    src = package(tmp_path / "src")
    done = launch(["--out", str(tmp_path / "runs"), "-m", "pkg.nosuch"], src,
                  env={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "t1"})
    assert done.returncode == 1
    assert "-m: No module named pkg.nosuch" in done.stderr
    (run_dir,) = (tmp_path / "runs" / "pkg.nosuch").iterdir()
    assert (run_dir / "rank0.error.txt").read_text().startswith("-m: No module named pkg.nosuch")


def test_failed_runs_keep_their_own_stderr_message(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent('''
        import argparse, os, sys
        for i in range(30):
            print(f"log line {i}", file=sys.stderr)
        if os.environ.get("RANK") == "1":
            print("rank one says why", file=sys.stderr)
            sys.exit(3)
        if len(sys.argv) > 1:
            argparse.ArgumentParser().parse_args()
    '''))
    done = launch(["--out", "runs", "--sweep", "batch=16,32", "prog.py", "--batch-sz", "{batch}"], tmp_path)
    assert done.returncode == 1
    # live on the launcher's stderr as before, once per run
    assert done.stderr.count("error: unrecognized arguments: --batch-sz 16") == 2  # live + summary
    assert "FAILED" in done.stderr and ("its stderr ended with: prog.py: error: unrecognized arguments: "
                                        "--batch-sz 32") in done.stderr
    text = (tmp_path / "runs" / "prog" / "ranks-1_batch-16_rep-0" / "rank0.error.txt").read_text()
    first, _, rest = text.partition("\n")
    assert first == ("SystemExit: exited with status 2; its stderr ended with: prog.py: error: unrecognized "
                     "arguments: --batch-sz 16")
    assert text.count(first) == 1  # a SystemExit has no traceback to follow its line (review 46)
    tail = rest.split("--- the last lines the rank wrote to its stderr before it ended ---\n")[1].splitlines()
    assert len(tail) == 20 and tail[-1].endswith("unrecognized arguments: --batch-sz 16")
    assert "log line 29" in tail and "log line 0" not in tail
    # a rank of --nproc: the launcher's line names it with its own last words
    done = launch(["--out", "runs", "--nproc", "2", "prog.py"], tmp_path)
    assert done.returncode == 3
    assert "rank 1 failed: SystemExit: exited with status 3; its stderr ended with: rank one says why" in done.stderr


def test_stderr_tail_limits():
    from runtime import stderr_tail

    stream = io.StringIO()
    old = list(stderr_tail._chunks), stderr_tail._installed
    stderr_tail._chunks.clear()
    stderr_tail._installed = False
    try:
        assert stderr_tail.install(stream)
        for i in range(2000):
            print(f"line {i}", file=stream)
        stream.write("x" * 10000 + "\nthe end\n")
        assert stream.getvalue().endswith("x" * 10000 + "\nthe end\n")  # passed through whole
        assert stderr_tail.tail() == "..." + "x" * (4096 - len("\nthe end\n")) + "\nthe end"
        assert stderr_tail.last_line() == "the end"
        for i in range(30):
            print(f"line {i}", file=stream)
        assert stderr_tail.tail().splitlines() == [f"line {i}" for i in range(10, 30)]
    finally:
        stderr_tail._chunks.clear()
        stderr_tail._chunks.extend(old[0])
        stderr_tail._installed = old[1]


def test_swept_parameter_no_argument_uses_is_warned(tmp_path):
    (tmp_path / "prog.py").write_text("print('hi')\n")
    dry = launch(["--dry-run", "--sweep", "rank=1,2", "--", "prog.py"], tmp_path)
    assert dry.returncode == 0
    assert ("warning: --sweep rank=1,2: no {rank} in the program's arguments, so every value of 'rank' runs "
            "the same command") in dry.stderr and "did you mean ranks" in dry.stderr
    dry = launch(["--dry-run", "--sweep", "batch=1,2", "--sweep", "lr=1,2", "--spawn", "echo {lr}", "prog.py",
                  "--batch", "{batch}"], tmp_path)
    # review 128 MED-3: the uninstrumented prog.py gets its own warning, which is not the one looked for
    assert dry.returncode == 0 and "warning" not in dry.stderr.replace("warning: prog.py has no probes", "")
    dry = launch(["--dry-run", "--sweep", "batch=1,2", "--sweep", "ranks=1,2", "prog.py"], tmp_path)
    assert "no {batch}" in dry.stderr and "no {ranks}" not in dry.stderr and "did you mean ranks" not in dry.stderr
    done = launch(["--sweep", "batch=1,2", "prog.py"], tmp_path)  # a warning only: the runs run
    assert done.returncode == 0 and "no {batch}" in done.stderr and done.stdout.count("hi") == 2


def test_interrupted_run_is_counted_and_single_failure_said(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent('''
        import os, signal, sys, time
        if sys.argv[1] == "2":
            os.kill(os.getppid(), signal.SIGTERM)  # the launcher: as a Ctrl-C or scheduler would
            time.sleep(60)
    '''))
    done = launch(["--out", "runs", "--sweep", "k=1,2,3,4", "prog.py", "{k}"], tmp_path)
    assert done.returncode == 143
    assert "1 runs completed, 0 failed, 1 interrupted, 0 skipped as done before, 2 not run" in done.stderr
    (tmp_path / "bad.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(5)\n")
    done = launch(["--out", "runs", "bad.py"], tmp_path, env={"SCALEPROBE_QUIET": "0"})
    assert done.returncode == 5
    assert ("scaleprobe launch: run failed (exit status 5): SystemExit: exited with status 5; its stderr "
            "ended with: boom") in done.stderr


def test_progress_counts_interrupted_runs():
    progress = Progress(total=25, stream=io.StringIO())
    for _ in range(8):
        progress.record("r", "ok", None, 1.0)
    progress.record("r9", "interrupted", "interrupted by SIGINT", 0.5)
    summary = progress.summary("interrupted by SIGINT")
    assert "8 runs completed, 0 failed, 1 interrupted, 0 skipped as done before, 16 not run" in summary
    assert "1 interrupted" in progress.line()


def test_an_error_whose_message_starts_on_its_next_line_is_summed_up_by_its_last():
    """Review 23: torch's ProcessRaisedException starts its message with a blank line, and the
    launcher said 'rank 0 failed: torch.multiprocessing.spawn.ProcessRaisedException:' and no more."""
    from runtime.launch_script import error_summary

    class ProcessRaisedException(Exception):
        pass

    exc = ProcessRaisedException("\n\n-- Process 1 terminated with the following error:\nTraceback (most recent "
                                 "call last):\n  File \"x.py\", line 3, in work\nRuntimeError: rank 1 failed\n")
    assert error_summary(exc).endswith("ProcessRaisedException: RuntimeError: rank 1 failed")
    assert error_summary(ValueError("plain")) == "ValueError: plain"
