"""Review 89: `define` refuses code of another probe ABI, and a header that imports a probe this
runtime lacks, in one line with exit 2 (M1); a build emitted before the ABI had a number still runs;
a region id defined by two modules of separate builds is one line and exit 2 with advice that fits
(L1); SCALEPROBE_LAUNCHER is checked (L5)."""
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.config import ConfigError, from_env
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

BODY = '''
def f():
    if __sp_on__: __sp_enter__({rid})
    try:
        return {value}
    finally:
        if __sp_on__: __sp_exit__({rid})
'''


def module(relpath: str, rid: int, define_args: str = "", value: int = 1, imports: str = "") -> str:
    return (f"from runtime.probe import enter as __sp_enter__, exit as __sp_exit__{imports}, define as __sp_define__\n"
            f'__sp_on__ = __sp_define__(__name__, globals(), "{relpath}", (({rid}, "function", "f", 3),){define_args})\n'
            + BODY.format(rid=rid, value=value))


def run(tmp_path, files: dict[str, str], **env) -> subprocess.CompletedProcess:
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    full = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_QUIET="1", **env)
    return subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=60)


def test_code_of_another_abi_is_refused_in_one_line_before_anything_is_recorded(tmp_path):
    done = run(tmp_path, {"main.py": module("main.py", 0, ', abi=2, build="0.1.0.99"') + "print(f())\n"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("scaleprobe: error: main.py (built by scaleprobe 0.1.0.99) was instrumented for probe "
                           "ABI 2, this runtime has ABI 1: instrument it again with this scaleprobe\n")
    assert not (tmp_path / "out").exists()  # refused before the recorder started


def test_a_build_from_before_the_abi_had_a_number_still_runs(tmp_path):
    done = run(tmp_path, {"main.py": module("main.py", 0) + "print(f())\n"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n", "")
    [path] = find_run_files(tmp_path / "out")
    assert [r.name for r in read_run(path).regions.values()] == ["f"]


def test_a_build_of_this_abi_runs_and_its_build_is_kept(tmp_path):
    text = module("main.py", 0, ', abi=1, build="0.1.0.15"') + (
        "import runtime.probe\nprint(f(), runtime.probe.builds)\n")
    done = run(tmp_path, {"main.py": text})
    assert (done.returncode, done.stdout, done.stderr) == (0, "1 {'main.py': '0.1.0.15'}\n", "")


def test_a_header_importing_a_probe_this_runtime_lacks_says_so_in_one_line(tmp_path):
    # a later ABI's probe: before, a bare ImportError at the module's line 1, exit 1
    done = run(tmp_path, {"main.py": module("main.py", 0, ", abi=2", imports=", newprobe as __sp_newprobe__")
                          + "print(f())\n"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"scaleprobe: error: {tmp_path / 'main.py'} imports the probe 'newprobe', which this runtime (probe ABI 1) "
        "does not have: it was instrumented by another scaleprobe; instrument it again with this scaleprobe"]


def test_other_missing_names_stay_attribute_and_import_errors():
    import runtime.probe

    assert not hasattr(runtime.probe, "newprobe") and getattr(runtime.probe, "_nope", 5) == 5
    with pytest.raises(ImportError, match="cannot import name 'newprobe'"):
        from runtime.probe import newprobe  # noqa: F401


def test_a_region_id_of_two_modules_is_one_line_with_exit_2(tmp_path):
    main = module("main.py", 0, ', abi=1, build="0.1.0.14"') + "import helper\nprint(f(), helper.f())\n"
    helper = module("helper.py", 0, ', abi=1, build="0.1.0.15"', value=2)
    done = run(tmp_path, {"main.py": main, "helper.py": helper})
    # before: a traceback ending in ConfigError, exit 1, advising to "instrument the whole project in one run"
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "scaleprobe: error: region id 0 defined twice: main.py:3 f and helper.py:3 f: the program mixes modules "
        "instrumented by builds 0.1.0.14 and 0.1.0.15 (a module instrumented elsewhere, or an older build's file "
        "left on sys.path); instrument the project's original sources in one build and run that"]


def test_one_module_imported_under_two_names_defines_its_ids_once(tmp_path):
    main = module("main.py", 0) + "if __name__ == '__main__':\n    import main\n    print(f(), main.f())\n"
    done = run(tmp_path, {"main.py": main})
    assert (done.returncode, done.stdout, done.stderr) == (0, "1 1\n", "")


@pytest.mark.parametrize("value", ["bogus", "MPI", " launch"])
def test_scaleprobe_launcher_is_checked(value):
    with pytest.raises(ConfigError, match=r"SCALEPROBE_LAUNCHER=.*: use one of launch, torchrun, slurm, mpi, none"):
        from_env({"SCALEPROBE_LAUNCHER": value})


@pytest.mark.parametrize("value", ["launch", "torchrun", "slurm", "mpi", "none", ""])
def test_the_launchers_values_pass(value):
    assert from_env({"SCALEPROBE_LAUNCHER": value}).launcher == (value or None)


def test_a_bad_launcher_stops_a_built_program_in_one_line(tmp_path):
    done = run(tmp_path, {"main.py": module("main.py", 0) + "print(f())\n"}, SCALEPROBE_LAUNCHER="bogus")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "scaleprobe: error: SCALEPROBE_LAUNCHER='bogus': use one of launch, torchrun, slurm, mpi, none "
        "(the launchers set it; leave it unset)"]


def test_the_run_files_header_names_the_build_that_started_it(tmp_path):
    # review 89 M1: runs of different builds could not be told apart
    done = run(tmp_path, {"main.py": module("main.py", 0, ', abi=1, build="0.1.0.15"') + "print(f())\n"})
    assert done.returncode == 0, done.stderr
    [path] = find_run_files(tmp_path / "out")
    assert read_run(path).header["build"] == "0.1.0.15"


def test_a_build_from_before_builds_were_named_has_none_in_the_header(tmp_path):
    done = run(tmp_path, {"main.py": module("main.py", 0) + "print(f())\n"})
    assert done.returncode == 0, done.stderr
    [path] = find_run_files(tmp_path / "out")
    assert read_run(path).header["build"] is None
