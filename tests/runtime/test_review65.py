"""Review 65 (launcher and runtime): F1 the ranks the launcher starts lost the interpreter's options
(-O, -X dev, -W ...); F2 a full disk was blamed on os._exit; F4 SCALEPROBE_QUIET=0 hid the
OMP_NUM_THREADS line; F5 GROUP_RANK was not documented; F6 SCALEPROBE_OUT naming a device or a FIFO
said `File exists`; F7 a swept value that underflows was recorded as 0."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import sweep_files, sweep_run
from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.launch_ranks import Outcome
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# the Python settings a test must not inherit: each would stand in for the option under test
_PYTHON_SETTINGS = ("PYTHONOPTIMIZE", "PYTHONDEVMODE", "PYTHONWARNINGS", "PYTHONINTMAXSTRDIGITS")


def _env(**extra: str) -> dict[str, str]:
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    for var in (*_PYTHON_SETTINGS, "OMP_NUM_THREADS"):
        env.pop(var, None)
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
         ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout)


# ----- F1: the interpreter's options reach every rank ---------------------------------------------------

FLAGS = '''\
import json, sys
print("FLAGS " + json.dumps({"optimize": sys.flags.optimize, "dev_mode": sys.flags.dev_mode,
                             "warnoptions": sys.warnoptions, "debug": __debug__, "xoptions": sys._xoptions,
                             "int_max_str_digits": getattr(sys.flags, "int_max_str_digits", None)}), flush=True)
'''
OPTIONS = ["-O", "-X", "dev", "-W", "ignore::UserWarning", "-X", "int_max_str_digits=1234"]


def _flags(stdout: str) -> list[dict]:
    """Each rank's report. Ranks share the stdout pipe, and one's line may run into another's (seen
    once in a suite run: `FLAGS {...}FLAGS {...}` on a line): every `FLAGS ` object is taken wherever it is."""
    decoder, found = json.JSONDecoder(), []
    for piece in stdout.split("FLAGS ")[1:]:
        found.append(decoder.raw_decode(piece)[0])
    return found


@pytest.mark.parametrize("how", [[], ["--nproc", "1"], ["--nproc", "2"], ["--sweep", "x=1,2"], ["--timeout", "60"]],
                         ids=["in-process", "nproc1", "nproc2", "sweep", "timeout"])
def test_f1_every_rank_runs_with_the_launchers_interpreter_options(tmp_path, how):
    (tmp_path / "prog.py").write_text(FLAGS)
    plain = _run([*OPTIONS, "prog.py"], tmp_path)
    (expected,) = _flags(plain.stdout)
    assert expected["optimize"] == 1 and expected["dev_mode"] and not expected["debug"], expected
    done = _run([*OPTIONS, "-m", "runtime.launch", "--out", "runs", *how, "prog.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    seen = _flags(done.stdout)
    assert len(seen) == (2 if how in (["--nproc", "2"], ["--sweep", "x=1,2"]) else 1), done.stdout
    # review 65 F1: optimize=0, dev_mode=0, warnoptions=[], __debug__ True in the ranks the launcher started
    assert all(s == expected for s in seen), (seen, expected)


def test_f1_the_dry_run_and_launch_json_show_the_options(tmp_path):
    (tmp_path / "prog.py").write_text(FLAGS)
    sweep = _run(["-O", "-m", "runtime.launch", "--dry-run", "--out", "runs", "--sweep", "x=1,2", "prog.py"],
                 tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    assert f"{sys.executable} -O -m runtime.launch --child -- prog.py" in sweep.stdout, sweep.stdout
    here = _run(["-O", "-m", "runtime.launch", "--dry-run", "--out", "runs", "prog.py"], tmp_path)
    assert f"{sys.executable} -O -m runtime.launch --out runs prog.py" in here.stdout, here.stdout
    done = _run(["-O", "-m", "runtime.launch", "--out", "runs", "--nproc", "1", "prog.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    assert record["command"][:4] == [sys.executable, "-O", "-m", "runtime.launch"], record["command"]


FAKE_NSYS = '''
import os, sys
args = sys.argv[1:]
first = args.index({python!r})  # the profiled command, after nsys's own arguments
os.execv(args[first], args[first:])
'''


def test_f1_a_rank_under_nsys_keeps_the_options(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nsys = bindir / "nsys"
    nsys.write_text(f"#!{sys.executable}\n" + FAKE_NSYS.format(python=sys.executable))
    nsys.chmod(0o755)
    (tmp_path / "prog.py").write_text(FLAGS)
    env = _env(PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    done = _run(["-O", "-m", "runtime.launch", "--out", "runs", "--nsys", "--nproc", "1", "prog.py"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    (seen,) = _flags(done.stdout)
    assert seen["optimize"] == 1 and not seen["debug"], seen


def test_f1_spawn_and_the_interpreter_options_helper(tmp_path, monkeypatch):
    from runtime.launch_args import interpreter_options, launcher_command

    (tmp_path / "main.py").write_text("")
    opts = parse(["--out", str(tmp_path / "runs"), "--param", "ranks=2", "--spawn", "srun -n {ranks}", "main.py"])
    (run,) = opts.design.runs(opts.out, opts.experiment, opts.args, 2)
    monkeypatch.setattr(subprocess, "_args_from_interpreter_flags", lambda: ["-OO", "-Wonce", "-X", "dev"],
                        raising=False)
    for var in _PYTHON_SETTINGS:
        monkeypatch.delenv(var, raising=False)
    command = sweep_run.rank_command(opts, run)
    assert command[:8] == ["srun", "-n", "2", sys.executable, "-OO", "-Wonce", "-X", "dev"], command
    assert command[8:11] == ["-m", "runtime.launch", "--child"], command
    # what the environment the ranks inherit gives already is not given again
    monkeypatch.setenv("PYTHONOPTIMIZE", "2")
    monkeypatch.setenv("PYTHONWARNINGS", "once")
    monkeypatch.setenv("PYTHONDEVMODE", "1")
    assert interpreter_options()[:1] != ["-OO"] and "-Wonce" not in interpreter_options()
    assert "dev" not in interpreter_options()
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")  # less than -OO: the option stays
    assert interpreter_options()[:1] == ["-OO"]
    # a Python without the private helper: no options, as before
    monkeypatch.delattr(subprocess, "_args_from_interpreter_flags")
    assert launcher_command() == [sys.executable, "-m", "runtime.launch"]


# ----- F2: a full disk is not blamed on os._exit --------------------------------------------------------

class _Full:
    f_frsize, f_blocks, f_bfree, f_bavail = 4096, 16, 0, 0


def test_f2_a_run_file_without_end_on_a_full_disk_says_it_could_not_be_written(tmp_path, monkeypatch):
    ok = Outcome("ok", 0, None, None, 1.0)
    unended = [(0, "rank0.42.jsonl")]
    monkeypatch.setattr(sweep_files.os, "statvfs", lambda path: _Full())
    full = sweep_files.without_end_record(ok, unended, tmp_path)
    assert full.status == "failed" and full.failed_rank == 0 and full.exit_code == 0
    assert full.error.startswith(f"cannot write run file {tmp_path / 'rank0.42.jsonl'}: its end record is missing "
                                 "(the rank's stderr says why): the file system of the run directory is full"), \
        full.error
    assert "os._exit" not in full.error
    monkeypatch.undo()
    # with room (or a quota, which the free space does not show): both causes are named
    room = sweep_files.without_end_record(ok, unended, tmp_path)
    assert room.status == "failed" and "os._exit" in room.error, room.error
    assert "unless its last writes failed (a full disk, a disk quota" in room.error, room.error


FILLS_THE_DISK = '''\
import os, sys
from runtime.probe import define, enter, exit
# many regions: the run file's last flush needs more than the page its file has left
define(__name__, globals(), "prog.py", tuple((i, "function", "work_%d_%s" % (i, "x" * 60), i + 1) for i in range(400)))
for i in range(400):
    enter(i); exit(i)
with open(sys.argv[1], "wb", buffering=0) as f:  # the disk fills up while the program runs
    try:
        while True:
            f.write(b"x" * 4096)
    except OSError:
        pass
'''


def _mount_tmpfs(where: Path) -> bool:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    try:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def test_f2_a_sweep_on_a_full_disk_says_the_run_file_could_not_be_written(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    if not _mount_tmpfs(small):
        pytest.skip("needs root and tmpfs to fill a disk")
    try:
        (tmp_path / "prog.py").write_text(FILLS_THE_DISK)
        done = _run(["-m", "runtime.launch", "--out", str(small / "runs"), "--sweep", "n=1",
                     "prog.py", str(small / "filler")], tmp_path)
        # the rank says why on its stderr; the launcher can write neither the rank's error file nor the
        # run's record, and says the disk is full rather than blame os._exit (review 65 F2)
        assert "No space left on device" in done.stderr, done.stderr
        assert done.returncode == 1, done.stderr
        assert "rank 0: cannot write run file" in done.stderr, done.stderr
        assert "the file system of the run directory is full" in done.stderr, done.stderr
        assert "os._exit" not in done.stderr, done.stderr
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True, timeout=30)


# ----- F4: SCALEPROBE_QUIET=0 is not quiet --------------------------------------------------------------

@pytest.mark.parametrize("value, said", [("0", True), ("false", True), ("no", True), ("", True), ("1", False)])
def test_f4_scaleprobe_quiet_is_read_as_the_runtime_reads_it(tmp_path, value, said):
    (tmp_path / "prog.py").write_text("pass\n")
    done = _run(["-m", "runtime.launch", "--out", "runs", "--nproc", "2", "prog.py"], tmp_path,
                _env(SCALEPROBE_QUIET=value))
    assert done.returncode == 0, done.stderr
    assert ("OMP_NUM_THREADS=1 in each of the 2 ranks" in done.stderr) == said, done.stderr


# ----- F5: every variable the launcher gives its ranks is documented ------------------------------------

def _documented_environment() -> str:
    text = (REPO / "docs" / "launch.md").read_text()
    start = text.index("## Environment given to each rank")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_f5_the_environment_table_names_every_variable_given_to_the_ranks(tmp_path):
    (tmp_path / "main.py").write_text("")
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", _documented_environment()))
    given: set[str] = set()
    for args in (["--nproc", "2"], ["--sweep", "ranks=1,2"], ["--ranks-by-program", "--param", "ranks=2"],
                 ["--param", "ranks=2", "--spawn", "srun -n {ranks}"]):
        opts = parse(["--out", str(tmp_path / "runs"), *args, "main.py"])
        for run in opts.design.runs(opts.out, opts.experiment, opts.args, opts.nproc or 1):
            for member in sweep_run.members_for(opts, run, "id"):
                given |= {k for k, v in member.env.items() if os.environ.get(k) != v}
    assert "GROUP_RANK" in given
    assert given - documented == set(), sorted(given - documented)


# ----- F6: SCALEPROBE_OUT naming a device or a FIFO -----------------------------------------------------

RECORDS = '''\
from runtime.probe import define, enter, exit
define(__name__, globals(), "prog.py", ((0, "function", "work", 1),))
enter(0); exit(0)
'''


def test_f6_an_output_folder_that_is_a_device_or_a_fifo_is_said(tmp_path):
    (tmp_path / "prog.py").write_text(RECORDS)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [(fifo, f"{fifo} is a FIFO, not a folder"), (fifo / "runs", f"{fifo} is a FIFO, not a folder")]
    if os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode):
        cases.append((Path("/dev/full"), "/dev/full is a character device, not a folder"))
    for out, said in cases:
        done = _run(["prog.py"], tmp_path, _env(SCALEPROBE_OUT=str(out)))
        assert done.returncode == 2 and said in done.stderr, (out, done.stderr)
        assert "File exists" not in done.stderr and "Not a directory" not in done.stderr, done.stderr


# ----- F7: a swept value that underflows ----------------------------------------------------------------

@pytest.mark.parametrize("value, why", [("1e-400", "it would be recorded as 0.0"),
                                        ("-1E-400", "it would be recorded as 0.0"),
                                        ("1e-310", "a float holds it only with fewer digits")])
def test_f7_a_value_too_small_for_a_float_is_refused(tmp_path, value, why):
    (tmp_path / "main.py").write_text("")
    for option in ("--sweep", "--param"):
        text = f"x={value},2" if option == "--sweep" else f"x={value}"
        with pytest.raises(LaunchError) as err:
            parse(["--out", str(tmp_path / "runs"), option, text, "main.py", "{x}"])
        assert str(err.value).startswith(f"{option} {text!r}: {value!r} is too small a number: {why}"), err.value
    # 0 itself, spelled as such, is a value like any other
    opts = parse(["--out", str(tmp_path / "runs"), "--sweep", "x=0e-400,0.5", "main.py", "{x}"])
    assert [r.params["x"] for r in opts.design.runs(opts.out, opts.experiment, opts.args, 1)] == [0.0, 0.5]


def test_f7_the_launcher_exits_2_naming_the_option(tmp_path):
    (tmp_path / "main.py").write_text("")
    done = _run(["-m", "runtime.launch", "--dry-run", "--sweep", "x=1e-400,2", "--", "main.py", "{x}"], tmp_path)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "--sweep 'x=1e-400,2': '1e-400' is too small a number" in done.stderr, done.stderr
