"""Option parsing, sweep designs, TOML sweep files, launch records and the progress line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from runtime.launch_args import build_parser, child_flags, parse, split_argv
from runtime.launch_errors import LaunchError
from runtime.launch_nsys import parse_rank_filter
from runtime.launch_ranks import describe_exit, status_code
from runtime.sweep_design import Design, load_toml, point_name
from runtime.sweep_progress import Progress, clock
from runtime.sweep_state import RunRecord, clear_attempt, is_complete, read_record, write_record
from runtime.sweep_values import parse_value, substitute


@pytest.mark.parametrize("argv, ours, program", [
    (["--nproc", "2", "main.py", "--nproc", "3"], ["--nproc", "2"], ["main.py", "--nproc", "3"]),
    (["--out", "r", "--", "main.py", "-x"], ["--out", "r"], ["main.py", "-x"]),
    (["main.py", "--", "a"], [], ["main.py", "--", "a"]),
    (["--dry-run", "--sweep=a=1,2", "m.py"], ["--dry-run", "--sweep=a=1,2"], ["m.py"]),
    (["--nproc", "2"], ["--nproc", "2"], []),
])
def test_split_argv_keeps_the_programs_arguments_verbatim(argv, ours, program):
    assert split_argv(build_parser(), argv) == (ours, program)


def test_parse_builds_the_design():
    opts = parse(["--sweep", "ranks=1,2", "--sweep", "batch=16,32", "--param", "lr=0.1", "--repeat", "3",
                  "--out", "o", "train.py", "--bs", "{batch}"])
    assert opts.sweeping and opts.experiment == "train" and opts.out == Path("o")
    assert opts.design.sweep == {"ranks": [1, 2], "batch": [16, 32]}
    assert opts.design.fixed == {"lr": 0.1}
    assert opts.design.repeat == 3
    assert opts.args == ["--bs", "{batch}"]
    assert not parse(["--param", "a=1", "t.py"]).sweeping


def test_command_line_wins_over_sweep_file(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('repeat = 4\n[sweep]\nbatch = [1, 2]\nn = [5]\n[params]\nmodel = "m"\n')
    opts = parse(["--sweep-file", str(toml), "--sweep", "n=7,8", "--param", "batch=3", "t.py"])
    assert opts.design.sweep == {"n": [7, 8]}
    assert opts.design.fixed == {"model": "m", "batch": 3}
    assert opts.design.repeat == 4


@pytest.mark.parametrize("argv, message", [
    (["--repeat", "0", "t.py"], "--repeat 0"),
    (["--nsys-ranks", "0", "t.py"], "--nsys-ranks needs --nsys"),
    (["--nsys", "--nsys-ranks", "a-b", "t.py"], "--nsys-ranks='a-b'"),
    (["--spawn", "srun", "--nproc", "2", "t.py"], "exclude each other"),
    (["--sweep", "repetition=1,2", "t.py"], "'repetition' is reserved"),
    (["--sweep", "2x=1", "t.py"], "must be an identifier"),
    (["--experiment", "a/b", "t.py"], "plain directory name"),
    (["--timeout", "0", "t.py"], "--timeout 0"),
    (["--nproc", "2", "--sweep", "ranks=1,2", "t.py"], "both set the number of ranks"),
])
def test_bad_options(argv, message):
    with pytest.raises(LaunchError, match=message):
        parse(argv)


def test_child_flags_carry_instrumentation_and_nsys(tmp_path):
    opts = parse(["--instrument", "--project-root", str(tmp_path), "--nsys", "--nsys-ranks", "0-1",
                  "--nsys-args", "-t nvtx", "t.py"])
    assert child_flags(opts) == ["--child", "--instrument", f"--project-root={tmp_path.resolve()}",
                                 "--nsys", "--nsys-ranks=0-1", "--nsys-args=-t nvtx"]
    assert child_flags(parse(["t.py"])) == ["--child"]


def test_values_are_numbers_when_they_look_like_numbers():
    assert [parse_value(v) for v in ("16", "0.5", "1e3", "resnet", " 7 ")] == [16, 0.5, 1000.0, "resnet", 7]


def test_cross_product_with_ranks_first_and_repetitions(tmp_path):
    design = Design(sweep={"batch": [16, 32], "ranks": [1, 2]}, fixed={"model": "cnn"}, repeat=2)
    runs = design.runs(tmp_path, "exp", ["--b", "{batch}", "--r{repetition}"], nproc=1)
    assert len(runs) == 8
    assert runs[0].params == {"ranks": 1, "batch": 16, "model": "cnn"}
    # every point once, then every point again (review 25: back to back, a burst of load on a shared
    # machine hit all repetitions of one point)
    assert [r.directory.name for r in runs[:5]] == ["ranks-1_batch-16_model-cnn_rep-0",
                                                     "ranks-2_batch-16_model-cnn_rep-0",
                                                     "ranks-1_batch-32_model-cnn_rep-0",
                                                     "ranks-2_batch-32_model-cnn_rep-0",
                                                     "ranks-1_batch-16_model-cnn_rep-1"]
    assert runs[4].args == ["--b", "16", "--r1"]
    assert all(r.directory.parent == tmp_path / "exp" for r in runs)
    assert {r.ranks for r in runs} == {1, 2}


def test_ranks_come_from_nproc_when_not_swept(tmp_path):
    (run,) = Design().runs(tmp_path, "e", [], nproc=4)
    assert run.params == {"ranks": 4} and run.repetition == 0


def test_points_with_colliding_names_get_distinct_directories(tmp_path):
    runs = Design(sweep={"m": ["a/b", "a_b"]}).runs(tmp_path, "e", [], nproc=1)
    assert len({r.directory for r in runs}) == 2


def test_swept_and_fixed_at_once_is_refused():
    with pytest.raises(LaunchError, match="both swept and fixed"):
        Design(sweep={"a": [1]}, fixed={"a": 2}).points(1)


def test_substitute_refuses_unknown_names_and_leaves_other_braces():
    assert substitute(['{"k": 1}', "{n}"], {"n": 3}, 0) == ['{"k": 1}', "3"]
    with pytest.raises(LaunchError, match=r"names \{m\}, which is no parameter \(known: n, repetition\)$"):
        substitute(["{m}"], {"n": 3}, 0)
    # a near miss is named (review 123 LOW-8: `{batc}` listed the names but did not point at batch)
    with pytest.raises(LaunchError, match=r"names \{batc\}, .*\(known: batch, repetition\); did you mean \{batch\}\?$"):
        substitute(["--batch-size={batc}"], {"batch": 3}, 0)


def test_point_name_is_safe_for_file_systems():
    assert point_name({"ranks": 2, "model": "res net/50", "lr": 0.1}) == "ranks-2_model-res_net_50_lr-0.1"


@pytest.mark.parametrize("text, message", [
    ("[sweep\n", "sweep file"),
    ("colour = 1\n", "unknown key 'colour'"),
    ("repeat = 0\n", "repeat must be a positive integer"),
    ("[sweep]\nx = [true]\n", "numbers or strings"),
    ("sweep = 3\n", "sweep must be a table"),
    ("[sweep]\nx = [1, 1.0]\n", "sweep.x: '1' and '1.0' are the same number"),
    ("[sweep]\nx = [nan]\n", "sweep.x: 'nan' is not a finite number"),
    ("[params]\nx = inf\n", "params.x: 'inf' is not a finite number"),
    ("[sweep]\nbatch = []\n", r"sweep.batch = \[\]: give at least one value"),  # review 39
])
def test_bad_sweep_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(LaunchError, match=message) as info:
        load_toml(path)
    assert str(path) in str(info.value)


def test_sweep_file_single_value_becomes_a_list(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('experiment = "x"\n[sweep]\nn = 4\nm = ["a", "b"]\n')
    design = load_toml(path)
    assert (design.experiment, design.sweep) == ("x", {"n": [4], "m": ["a", "b"]})


def test_launch_record_round_trip_and_resume_decision(tmp_path):
    run_dir = tmp_path / "run"
    # files=[]: a run that wrote no run file, recorded by this launcher (see sweep_files)
    rec = RunRecord(experiment="e", run_id="abc", params={"ranks": 2}, repetition=0, command=["python"], files=[])
    write_record(run_dir, rec)
    assert read_record(run_dir) == rec
    assert not is_complete(run_dir, {"ranks": 2})  # still running (or killed while it was)
    rec.status = "ok"
    write_record(run_dir, rec)
    assert is_complete(run_dir, {"ranks": 2})
    assert not is_complete(run_dir, {"ranks": 4})  # the same directory reused for another point
    assert not is_complete(tmp_path / "never", {"ranks": 2})
    assert [p.name for p in run_dir.iterdir()] == ["launch.json"]


def test_resume_does_not_take_a_run_of_other_program_arguments_for_done(tmp_path):
    run_dir = tmp_path / "run"
    program = ["main.py", "--batch-size", "16", "--epochs", "2"]
    write_record(run_dir, RunRecord(experiment="e", run_id="a", params={"batch": 16}, repetition=0,
                                    command=["python", "-m", "runtime.launch", "--", *program], status="ok",
                                    program=program, files=[]))
    assert is_complete(run_dir, {"batch": 16}, program)
    assert not is_complete(run_dir, {"batch": 16}, ["main.py", "--batch-size", "16", "--epochs", "5"])
    # a record written before programs were recorded still counts as done for its parameters
    old = json.loads((run_dir / "launch.json").read_text())
    del old["program"]
    (run_dir / "launch.json").write_text(json.dumps(old))
    assert is_complete(run_dir, {"batch": 16}, ["main.py", "--epochs", "5"])


def test_broken_or_foreign_record_is_an_error_naming_it(tmp_path):
    (tmp_path / "launch.json").write_text("{not json")
    with pytest.raises(LaunchError, match="launch.json: unreadable launch record"):
        read_record(tmp_path)
    (tmp_path / "launch.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(LaunchError, match="version 99, expected 1"):
        read_record(tmp_path)


# above Linux's largest pid_max (2**22): no live process has it (pid 12 was alive on a fresh machine, and its
# file was kept as a live writer's)
NO_SUCH_PID = 2**22 + 1


def test_clear_attempt_removes_only_rank_outputs(tmp_path):
    for name in (f"rank0.{NO_SUCH_PID}.jsonl", "rank1.error.txt", "rank0.nsys-rep", "launch.json", "notes.txt"):
        (tmp_path / name).write_text("x")
    clear_attempt(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch.json", "notes.txt"]


def test_rank_filter():
    selected = parse_rank_filter("0,4-5,::8")
    assert [r for r in range(20) if r in selected] == [0, 4, 5, 8, 16]


def test_exit_descriptions():
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(-9).startswith("killed by SIGKILL (the kernel's out-of-memory killer")  # review 39
    assert describe_exit(3) == "exited with code 3"
    assert (status_code(-9), status_code(2)) == (137, 2)


def test_progress_counts_and_estimates():
    stream = io.StringIO()
    progress = Progress(total=4, stream=stream)
    progress.skip()
    progress.record("r1", "ok", None, 10.0)
    progress.record("r2", "failed", "rank 1: ValueError: x", 20.0)
    assert "3/4 runs, 1 ok, 1 failed, 1 skipped" in stream.getvalue().splitlines()[-1]
    assert progress.left_s() == 15.0
    summary = progress.summary()
    assert "1 runs completed, 1 failed, 1 skipped as done before, 1 not run" in summary
    assert "FAILED r2: failed: rank 1: ValueError: x" in summary
    assert (clock(75), clock(3725)) == ("1:15", "1:02:05")
