"""Review 26, bad input to the launcher: sweep files that are not UTF-8 or start with a BOM, a
non-finite --timeout, hidden experiments, `{name:spec}` placeholders, values the modeler cannot fit
over, resumes that check the run files, and damaged launch records named all at once."""

from __future__ import annotations

import json
import shutil

import pytest

from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.sweep_design import load_toml
from runtime.sweep_state import read_record

from .test_launch_e2e import launch, record, script

# One region recorded through the real probe ABI, so the run writes a real run file (with its end
# record); with a file `remove-<x>` in the working directory, the run removes its own directory.
WORK = '''
import os, shutil, sys
from runtime.probe import define, enter, exit
define(__name__, globals(), "work.py", ((0, "function", "work", 1),))
enter(0); sum(range(1000)); exit(0)
if os.path.exists("remove-" + sys.argv[1]):
    shutil.rmtree(os.environ["SCALEPROBE_OUT"])
'''


# --- #7, #25: the sweep file ------------------------------------------------------------------------

def test_sweep_file_not_utf8_names_the_file_byte_and_line(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"[sweep]\n# Gr\xf6\xdfe der Batches\nn = [1, 2]\n")
    with pytest.raises(LaunchError) as info:
        load_toml(path)
    assert str(info.value).startswith(f"sweep file {path}: not UTF-8 (byte 0xf6 at line 2)")
    script(tmp_path, "t.py", "pass\n")
    done = launch(["--dry-run", "--sweep-file", str(path), "t.py", "{n}"], tmp_path)
    assert done.returncode == 2
    assert f"error: sweep file {path}: not UTF-8 (byte 0xf6 at line 2)" in done.stderr
    assert "Traceback" not in done.stderr


def test_sweep_file_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + b'experiment = "e"\n[sweep]\nn = [1, 2]\n')
    design = load_toml(path)
    assert (design.experiment, design.sweep) == ("e", {"n": [1, 2]})


def test_sweep_file_parameter_swept_and_fixed_names_the_file_not_param(tmp_path):
    path = tmp_path / "dup.toml"
    path.write_text("[sweep]\nn = [1, 2]\n[params]\nn = 3\n")
    with pytest.raises(LaunchError) as info:
        parse(["--sweep-file", str(path), "t.py"]).design.points(1)
    message = str(info.value)
    assert f"sweep file {path}" in message and "[sweep] and [params]" in message
    assert "--param" not in message


@pytest.mark.parametrize("argv, message", [
    (["--timeout", "nan"], "--timeout nan: must be a positive finite number"),
    (["--timeout", "inf"], "--timeout inf: must be a positive finite number"),
    (["--grace", "nan"], "--grace nan: must be a finite number"),
])
def test_timeout_and_grace_must_be_finite(argv, message):
    with pytest.raises(LaunchError, match=message):
        parse([*argv, "t.py"])


# --- #17: hidden experiments ------------------------------------------------------------------------

def test_experiment_with_a_leading_dot_is_refused_naming_where_it_came_from(tmp_path):
    with pytest.raises(LaunchError, match=r"--experiment '\.v2': must not start with '\.'"):
        parse(["--experiment", ".v2", "t.py"])
    path = tmp_path / "s.toml"
    path.write_text('experiment = ".v2"\n[sweep]\nn = [1, 2]\n')
    with pytest.raises(LaunchError, match=r"sweep file .*s\.toml: experiment '\.v2': must not start with"):
        parse(["--sweep-file", str(path), "t.py"])
    with pytest.raises(LaunchError, match=r"experiment '\.hidden' \(the script's name; give --experiment\)"):
        parse([".hidden.py"])
    assert parse(["--experiment", "v.2", "t.py"]).experiment == "v.2"


# --- #19: `{name:spec}` and `{ name }` --------------------------------------------------------------

@pytest.mark.parametrize("arg, message", [
    ("{batch:03d}", "program argument '{batch:03d}': format specs are not supported; write {batch}"),
    ("--b={batch:03d}", "program argument '--b={batch:03d}': '{batch:03d}': format specs are not supported"),
    ("{batch!r}", "program argument '{batch!r}': conversions are not supported; write {batch}"),
    ("{ batch }", "program argument '{ batch }': write {batch}, without spaces"),
    ("{repetition:02d}", "format specs are not supported; write {repetition}"),
])
def test_placeholder_with_a_format_spec_is_an_error_naming_the_argument(tmp_path, arg, message):
    opts = parse(["--sweep", "batch=1,2", "t.py", arg])
    with pytest.raises(LaunchError) as info:
        opts.design.runs(tmp_path, "t", opts.args, nproc=1)
    assert message in str(info.value)


def test_braces_around_no_parameter_stay_as_they_are(tmp_path):
    opts = parse(["--sweep", "batch=1,2", "t.py", '{"k": 1}', "{step:05d}", "{batch}"])
    runs = opts.design.runs(tmp_path, "t", opts.args, nproc=1)
    assert [r.args for r in runs] == [['{"k": 1}', "{step:05d}", "1"], ['{"k": 1}', "{step:05d}", "2"]]


def test_format_spec_error_comes_before_any_run_or_misleading_warning(tmp_path):
    script(tmp_path, "t.py", "pass\n")
    done = launch(["--sweep", "batch=1,2", "t.py", "{batch:03d}"], tmp_path)
    assert done.returncode == 2
    assert "'{batch:03d}': format specs are not supported; write {batch}" in done.stderr
    assert "add {batch}" not in done.stderr and "did you mean" not in done.stderr
    assert not (tmp_path / "runs").exists()
    spawn = launch(["--dry-run", "--sweep", "n=1,2", "--spawn", "echo {n:2}", "t.py", "{n}"], tmp_path)
    assert spawn.returncode == 2 and "--spawn argument '{n:2}': format specs are not supported" in spawn.stderr


# --- #13: values the modeler cannot fit over ---------------------------------------------------------

def test_sweep_over_values_that_are_not_numbers_warns_before_any_run(tmp_path):
    script(tmp_path, "t.py", "pass\n")
    done = launch(["--dry-run", "--sweep", "size=1K,2K,4K", "t.py", "{size}"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("warning: --sweep size=1K,2K,4K: values '1K', '2K', '4K' of 'size' are not numbers, so modeler fit "
            "cannot fit a model over 'size'") in done.stderr
    hexa = launch(["--dry-run", "--sweep", "n=1,0x10", "t.py", "{n}"], tmp_path)
    assert "warning: --sweep n=1,0x10: value '0x10' of 'n' is not a number" in hexa.stderr
    (tmp_path / "m.toml").write_text('[sweep]\nn = [1, "a"]\n')
    mixed = launch(["--dry-run", "--sweep-file", "m.toml", "t.py", "{n}"], tmp_path)
    assert "warning: --sweep-file m.toml: value 'a' of 'n' is not a number" in mixed.stderr
    fine = launch(["--dry-run", "--sweep", "n=1,2.5,1e3", "--param", "model=resnet", "t.py", "{n}"], tmp_path)
    assert fine.returncode == 0 and "not a number" not in fine.stderr


# --- #11: resume checks the run files -----------------------------------------------------------------

def _sweep(tmp_path, *extra):
    return launch(["--sweep", "x=1,2,3", *extra, "work.py", "{x}"], tmp_path)


def _run_file(run_dir):
    (path,) = run_dir.glob("rank0.*.jsonl")
    return path


def test_resume_makes_again_a_done_run_whose_run_file_was_deleted_or_cut_off(tmp_path):
    script(tmp_path, "work.py", WORK)
    assert _sweep(tmp_path).returncode == 0
    root = tmp_path / "runs" / "work"
    gone, cut, kept = (root / f"ranks-1_x-{x}_rep-0" for x in (1, 2, 3))
    gone_name = _run_file(gone).name
    _run_file(gone).unlink()
    path = _run_file(cut)
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["type"] == "end"
    path.write_bytes(b"".join(lines[:-1]))  # the end record gone: cut off after a complete line
    kept_file = _run_file(kept)
    dry = _sweep(tmp_path, "--dry-run")
    assert "2 of 3 runs would run" in dry.stdout
    resumed = _sweep(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (f"{gone.relative_to(tmp_path)}: recorded as completed, but its run file {gone_name} is missing: "
            "making it again") in resumed.stderr
    assert (f"{cut.relative_to(tmp_path)}: recorded as completed, but its run file {path.name} has no end "
            "record") in resumed.stderr
    assert "2 runs completed, 0 failed, 1 skipped as done before" in resumed.stderr
    for run_dir in (gone, cut):
        assert json.loads(_run_file(run_dir).read_bytes().splitlines()[-1])["type"] == "end"
    assert _run_file(kept) == kept_file
    assert record(kept)["files"] == [kept_file.name]
    again = _sweep(tmp_path)
    assert "0 runs completed, 0 failed, 3 skipped as done before" in again.stderr


def test_resume_of_an_older_record_checks_the_run_files_present(tmp_path):
    script(tmp_path, "work.py", WORK)
    assert _sweep(tmp_path).returncode == 0
    cut, gone = (tmp_path / "runs" / "work" / f"ranks-1_x-{x}_rep-0" for x in (1, 2))
    for run_dir in (cut, gone):
        old = record(run_dir)
        old.pop("files", None)  # as an older launcher wrote it
        (run_dir / "launch.json").write_text(json.dumps(old))
    path = _run_file(cut)
    path.write_bytes(path.read_bytes()[:-20])  # cut off in the middle of its end record
    _run_file(gone).unlink()  # its only run file: an older record cannot tell it from a run that wrote none
    (gone / "rank0.nsys-rep").write_bytes(b"an Nsight report")
    resumed = _sweep(tmp_path)
    assert (f"{cut.relative_to(tmp_path)}: recorded as completed, but its run file {path.name} has no end "
            "record") in resumed.stderr
    assert "1 runs completed, 0 failed, 2 skipped as done before" in resumed.stderr
    # review 28: a run of an older record without run files may hold --nsys reports: kept, as before
    assert (gone / "rank0.nsys-rep").read_bytes() == b"an Nsight report"


def test_run_whose_directory_was_removed_while_running_is_failed_and_made_again(tmp_path):
    script(tmp_path, "work.py", WORK)
    (tmp_path / "remove-2").touch()
    done = _sweep(tmp_path)
    assert done.returncode == 1
    run_dir = tmp_path / "runs" / "work" / "ranks-1_x-2_rep-0"
    rec = record(run_dir)
    assert rec["status"] == "failed"
    assert "run directory removed while the run was running" in rec["error"]
    assert "run directory removed while the run was running" in done.stderr
    assert "no run file was written" not in done.stderr and "instrumented" not in done.stderr
    (tmp_path / "remove-2").unlink()
    resumed = _sweep(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 runs completed, 0 failed, 2 skipped as done before" in resumed.stderr
    assert record(run_dir)["status"] == "ok"


# --- #12: damaged launch records --------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "unreadable launch record (a JSON list, not an object)"),
    ('"ok"', "unreadable launch record (a JSON string, not an object)"),
    ("{not json", "unreadable launch record (not valid JSON: "),
    ('{"version": 1}', "malformed launch record (no 'experiment', 'run_id', 'params', 'repetition', 'command' fields)"),
    ('{"status": "ok"}', "malformed launch record (no 'version' field)"),
])
def test_damaged_record_says_what_is_wrong(tmp_path, content, message):
    (tmp_path / "launch.json").write_text(content)
    with pytest.raises(LaunchError) as info:
        read_record(tmp_path)
    assert f"{tmp_path / 'launch.json'}: {message}" in str(info.value)
    assert "version ?" not in str(info.value) and "delete it" in str(info.value)


def test_record_that_is_a_directory_says_so_once(tmp_path):
    (tmp_path / "launch.json").mkdir()
    with pytest.raises(LaunchError) as info:
        read_record(tmp_path)
    assert str(info.value) == (f"{tmp_path / 'launch.json'}: unreadable launch record (a directory, not a file); "
                               "delete it to re-run this run")


def test_resume_names_every_damaged_record_before_running_anything(tmp_path):
    script(tmp_path, "work.py", WORK)
    assert _sweep(tmp_path, "--repeat", "2").returncode == 0
    root = tmp_path / "runs" / "work"
    as_dir, as_list, not_done = (root / name for name in ("ranks-1_x-1_rep-1", "ranks-1_x-2_rep-0", "ranks-1_x-3_rep-1"))
    (as_dir / "launch.json").unlink()
    (as_dir / "launch.json").mkdir()
    (as_list / "launch.json").write_text("[1, 2]\n")
    shutil.rmtree(not_done)  # a run a resume would make
    for extra in (["--dry-run"], []):
        resumed = _sweep(tmp_path, "--repeat", "2", *extra)
        assert resumed.returncode == 2
        assert "2 launch records are damaged" in resumed.stderr and "nothing was run" in resumed.stderr
        for run_dir, what in ((as_dir, "a directory, not a file"), (as_list, "a JSON list, not an object")):
            named = f"{(run_dir / 'launch.json').relative_to(tmp_path)}: unreadable launch record ({what})"
            assert named in resumed.stderr
        assert "Delete each such launch.json" in resumed.stderr
        assert "version ?" not in resumed.stderr and "Traceback" not in resumed.stderr
        assert not not_done.exists()
    (as_list / "launch.json").unlink()
    as_dir.joinpath("launch.json").rmdir()
    resumed = _sweep(tmp_path, "--repeat", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert "3 runs completed, 0 failed, 3 skipped as done before" in resumed.stderr


def test_a_newer_record_with_keys_this_launcher_does_not_know_is_read(tmp_path):
    (tmp_path / "launch.json").write_text(json.dumps({
        "version": 1, "experiment": "e", "run_id": "r", "params": {"ranks": 1}, "repetition": 0,
        "command": ["python"], "status": "ok", "added_later": True}))
    assert read_record(tmp_path).status == "ok"
