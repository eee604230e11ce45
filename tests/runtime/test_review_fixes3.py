"""Third round of review fixes (docs audit): options forwarded to the ranks keep values that start
with '-', the launcher checks SCALEPROBE_* before it starts anything, a parameter defined twice is
an error, rank-environment errors name their variables, a run that recorded nothing says so, a
plain run says where its data went, and `--dry-run` shows the command that really runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.environment import RankEnvironmentError, detect
from runtime.launch_args import build_parser, child_flags, parse
from runtime.launch_errors import LaunchError
from runtime.runfile import find_run_files, read_run

from .test_launch_cluster import nsys_on_path, write  # noqa: F401 - nsys_on_path is a fixture
from .test_launch_e2e import SHOW, clean_env, launch
from .test_review_fixes2 import HAVE_C, _build

PLAIN = "import sys\nprint('ran', sys.argv[1:])\n"
INSTRUMENTED = "def work(n):\n    return sum(range(n))\n\n\nprint('ran', work(10))\n"
WARNING = "scaleprobe launch: warning:"


# ----- 1: values that start with '-' reach the ranks ------------------------------------------------

def test_child_flags_read_back_as_the_same_options(tmp_path):
    opts = parse(["--instrument", "--project-root", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                  "--nsys", "--nsys-ranks", "0-1", "--nsys-args=--trace=cuda", "t.py"])
    again = parse([*child_flags(opts), "--", "t.py"])  # the old flags made the rank's argparse exit 2
    assert (again.child, again.instrument, again.nsys) == (True, True, True)
    assert again.project_root == tmp_path.resolve() and again.cache_dir == (tmp_path / "c").resolve()
    assert (again.nsys_ranks, again.nsys_args) == ("0-1", "--trace=cuda")


@pytest.mark.parametrize("nproc", [[], ["--nproc", "2"]])
def test_a_single_nsys_option_written_with_equals_reaches_nsys(tmp_path, nsys_on_path, nproc):
    write(tmp_path / "show.py", SHOW)
    done = launch(["--nsys", "--nsys-args=--trace=cuda", *nproc, "show.py"], tmp_path, nsys_on_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs" / "show").iterdir()
    reports = sorted(run_dir.glob("*.nsys-rep"))
    assert len(reports) == (2 if nproc else 1)
    assert json.loads(reports[0].read_text())["nsys_args"][-1] == "--trace=cuda"


# ----- 2: a bad SCALEPROBE_* variable ----------------------------------------------------------------

@pytest.mark.parametrize("design", [[], ["--sweep", "n=1,2,3"], ["--nproc", "2"]])
def test_the_launcher_refuses_a_bad_runtime_variable_before_any_run(tmp_path, design):
    write(tmp_path / "main.py", "open('started', 'w').close()\n")
    done = launch([*design, "main.py", "{n}" if design[:1] == ["--sweep"] else "1"], tmp_path,
                  {"SCALEPROBE_FLUSH_INTERVAL": "abc"})
    assert done.returncode == 2
    assert done.stderr == "scaleprobe launch: error: SCALEPROBE_FLUSH_INTERVAL='abc': not a number\n"
    assert not (tmp_path / "started").exists() and not (tmp_path / "runs").exists()


def test_variables_the_launcher_sets_itself_are_not_checked_from_the_caller(tmp_path):
    write(tmp_path / "show.py", SHOW)
    done = launch(["show.py"], tmp_path, {"SCALEPROBE_PARAMS": "not json", "SCALEPROBE_REPETITION": "x"})
    assert done.returncode == 0, done.stderr
    # and the program runs with the launcher's values, not the caller's
    (run_dir,) = (tmp_path / "runs" / "show").iterdir()
    (path,) = find_run_files(run_dir)
    header = read_run(path).header
    assert (header["params"], header["repetition"]) == ({"ranks": 1}, 0)
    seen = json.loads((run_dir / "show0.json").read_text())["env"]
    assert (seen["SCALEPROBE_PARAMS"], seen["SCALEPROBE_REPETITION"]) == ('{"ranks": 1}', "0")


@pytest.mark.parametrize("env, message", [
    ({"SCALEPROBE_RANKS": "x"}, "SCALEPROBE_RANKS='x': cannot read 'x' (use e.g. 0,1 or 0-3 or ::8)"),
    ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK=3 is not below WORLD_SIZE=2"),
    ({"PMI_RANK": "3", "PMI_SIZE": "2"}, "PMI_RANK=3 is not below PMI_SIZE=2"),
])
def test_a_built_program_with_a_bad_environment_stops_with_one_line(tmp_path, env, message):
    _, out = _build(tmp_path, INSTRUMENTED)
    done = subprocess.run([sys.executable, str(out / "main.py")], cwd=tmp_path, env=clean_env(env),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"scaleprobe: error: {message}\n")


# ----- 3: a parameter defined twice ---------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--sweep", "a=2,3", "--sweep", "a=4,5"], "'a' is defined twice: --sweep a=2,3 and --sweep a=4,5"),
    (["--param", "a=1", "--sweep", "a=2,3"], "'a' is defined twice: --sweep a=2,3 and --param a=1"),
    (["--param", "a=1", "--param", "a=2"], "'a' is defined twice: --param a=1 and --param a=2"),
    (["--repetition", "4", "--sweep", "a=1,2"], "--repetition 4 and --sweep a=1,2 exclude each other"),
    (["--repetition", "4", "--repeat", "2"], "--repetition 4 and --repeat 2 exclude each other"),
    (["--repetition", "-1"], "--repetition -1: must not be negative"),
])
def test_a_parameter_defined_twice_names_both_options(argv, message):
    with pytest.raises(LaunchError) as err:
        parse([*argv, "t.py"])
    assert message in str(err.value)


def test_the_command_line_still_overrides_the_sweep_file(tmp_path):
    (tmp_path / "d.toml").write_text("repeat = 2\n[sweep]\na = [1, 2]\nb = [3, 4]\n[params]\nc = 5\n")
    opts = parse(["--sweep-file", str(tmp_path / "d.toml"), "--sweep", "a=7", "--param", "b=8",
                  "--sweep", "c=1,2", "t.py"])
    assert (opts.design.sweep, opts.design.fixed, opts.design.repeat) == ({"a": [7], "c": [1, 2]}, {"b": 8}, 2)


# ----- 4: rank-environment errors name their variables --------------------------------------------------

@pytest.mark.parametrize("env, message", [
    ({"PMI_RANK": "3", "PMI_SIZE": "2"}, "PMI_RANK=3 is not below PMI_SIZE=2"),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "0"}, "OMPI_COMM_WORLD_SIZE=0 is not a positive"),
    ({"PMIX_RANK": "5", "SLURM_STEP_NUM_TASKS": "4"}, "PMIX_RANK=5 is not below SLURM_STEP_NUM_TASKS=4"),
    ({"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "3"}, "MPI_LOCALRANKID=3 is above PMI_RANK=1"),
    ({"SLURM_PROCID": "4", "SLURM_STEP_NUM_TASKS": "2"}, "SLURM_PROCID=4 is not below SLURM_STEP_NUM_TASKS=2"),
    ({"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "2"},
     "SLURM_LOCALID=2 is above SLURM_PROCID=1"),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "2"}, "LOCAL_RANK=2 is above RANK=1"),
])
def test_rank_environment_errors_name_the_variables_read(env, message):
    with pytest.raises(RankEnvironmentError) as err:
        detect(env)
    assert message in str(err.value)


def test_the_launcher_names_the_mpi_variables(tmp_path):
    write(tmp_path / "main.py", PLAIN)
    done = launch(["--run-id", "x", "main.py"], tmp_path, {"PMI_RANK": "3", "PMI_SIZE": "2"})
    assert (done.returncode, done.stderr) == (2, "scaleprobe launch: error: PMI_RANK=3 is not below PMI_SIZE=2\n")


# ----- 6: a run that recorded nothing; where a plain run's data went ------------------------------------

@pytest.mark.parametrize("design, runs", [([], "the run"), (["--nproc", "2"], "the run"),
                                          (["--sweep", "x=1,2"], "2 of 2 runs")])
def test_a_run_of_an_uninstrumented_script_warns_that_nothing_was_recorded(tmp_path, design, runs):
    write(tmp_path / "main.py", PLAIN)
    # the swept value reaches the program (a sweep no {name} uses is warned about, review 15)
    done = launch([*design, "main.py", *(["{x}"] if "--sweep" in design else [])], tmp_path)
    assert done.returncode == 0, done.stderr
    # review 128 MED-3: runs on rank processes are also warned of before the first run, and a sweep's
    # after its first run too; the warning at the end is this one
    warnings = [line for line in done.stderr.splitlines() if line.startswith(WARNING)
                and "has no probes" not in line and "the runs after it" not in line]
    assert warnings == [f"{WARNING} {runs} completed but no run file was written: is main.py instrumented? "
                        "Run the instrumented copy (instrument SRC -o build/, then build/main.py) or add --instrument"]


def test_no_warning_when_recording_was_switched_off(tmp_path):
    write(tmp_path / "main.py", PLAIN)
    done = launch(["main.py"], tmp_path, {"SCALEPROBE_DISABLE": "1"})
    assert (done.returncode, done.stderr) == (0, "")


def test_the_warning_names_a_rank_selection_that_selects_nobody(tmp_path):
    _, out = _build(tmp_path, INSTRUMENTED)
    done = launch(["--nproc", "2", str(out / "main.py")], tmp_path, {"SCALEPROBE_RANKS": "5"})
    assert "does SCALEPROBE_RANKS='5' select none of the ranks?" in done.stderr


@pytest.mark.parametrize("design", [[], ["--nproc", "2"]])
def test_a_plain_run_says_where_its_data_went_unless_quiet(tmp_path, design):
    _, out = _build(tmp_path, INSTRUMENTED)
    done = launch([*design, str(out / "main.py")], tmp_path, {"SCALEPROBE_QUIET": "0"})
    assert done.returncode == 0, done.stderr
    ranks = 2 if design else 1
    # with more than one rank the threads per rank are said first (review 65 F4: QUIET=0 hid that line)
    omp = ("scaleprobe launch: OMP_NUM_THREADS=1 in each of the 2 ranks, as torchrun sets it for more than one "
           "rank per node; set OMP_NUM_THREADS to choose the threads per rank\n") if design else ""
    assert done.stderr == omp + f"scaleprobe launch: run data in {Path('runs', 'main', f'ranks-{ranks}_rep-0')}\n"
    assert launch([*design, str(out / "main.py")], tmp_path).stderr == ""  # SCALEPROBE_QUIET=1


# ----- 14, 16: help, --dry-run, the console script ------------------------------------------------------

def test_repetition_help_gives_both_defaults():
    text = " ".join(build_parser().format_help().split())
    assert "(default: the next free index for a plain local run, 0 under srun, mpiexec or torchrun)" in text


def test_dry_run_shows_the_command_that_really_runs(tmp_path, nsys_on_path):
    (tmp_path / "main.py").write_text("print('run')\n")
    sweep = launch(["--dry-run", "--sweep", "a=1,2", "--nsys-args=-t nvtx", "--nsys", "main.py", "{a}"], tmp_path,
                   nsys_on_path)
    assert sweep.returncode == 0, sweep.stderr
    lines = sweep.stdout.splitlines()
    assert lines[0].endswith(f"{sys.executable} -m runtime.launch --child --nsys '--nsys-args=-t nvtx' -- main.py 1")
    spawned = launch(["--dry-run", "--spawn", "srun -n {ranks}", "main.py"], tmp_path)
    assert spawned.stdout.splitlines()[0].endswith(f"srun -n 1 {sys.executable} -m runtime.launch --child -- main.py")
    here = launch(["--dry-run", "--experiment", "e", "main.py", "--dry-run"], tmp_path)
    assert here.stdout.splitlines()[0].endswith(f"{sys.executable} -m runtime.launch --experiment e main.py --dry-run")


def test_dry_run_of_a_script_or_module_that_is_not_there_is_an_error(tmp_path):
    """Review 39: a misspelled script got a whole plan and exit 0; the run itself stops with exit 2."""
    typo = launch(["--dry-run", "--sweep", "a=1,2", "mian.py", "{a}"], tmp_path)
    assert typo.returncode == 2 and typo.stdout == "", (typo.stdout, typo.stderr)
    assert "script mian.py does not exist or is not a file" in typo.stderr
    module = launch(["--dry-run", "-m", "no_such_pkg.train"], tmp_path)
    assert module.returncode == 2 and "-m no_such_pkg.train: no module named 'no_such_pkg'" in module.stderr, module.stderr
    # review 40: nor an --out that cannot be made, nor --nsys without nsys (nothing is created)
    (tmp_path / "main.py").write_text("print('run')\n")
    (tmp_path / "afile").write_text("")
    out = launch(["--dry-run", "--out", "afile/runs", "main.py"], tmp_path)
    assert out.returncode == 2 and "--out afile/runs: cannot create the directory" in out.stderr, out.stderr
    assert "afile is a file, not a folder" in out.stderr and out.stdout == ""
    nsys = launch(["--dry-run", "--nsys", "main.py"], tmp_path, {"PATH": str(tmp_path / "nowhere")})
    assert nsys.returncode == 2 and "nsys` is not on PATH" in nsys.stderr, nsys.stderr
    fine = launch(["--dry-run", "--out", "new/deeper", "main.py"], tmp_path)
    assert fine.returncode == 0 and not (tmp_path / "new").exists(), fine.stderr


CONSOLE = Path(sys.executable).with_name("scaleprobe-launch")


@pytest.mark.skipif(not (HAVE_C and CONSOLE.exists()), reason="needs the C probes and the installed console script")
def test_the_console_script_gives_back_a_low_recursion_limit(tmp_path):
    write(tmp_path / "low.py", "import atexit, sys\n"
                               "atexit.register(lambda: print('at exit', sys.getrecursionlimit()))\n"
                               "sys.setrecursionlimit(4)\n")
    done = subprocess.run([str(CONSOLE), "low.py"], cwd=tmp_path, env=clean_env({"SCALEPROBE_DISABLE": "1"}),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "at exit 4\n"), done.stderr
