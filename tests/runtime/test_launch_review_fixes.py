"""Launcher bugs a user review found: `{name}` placeholders in every mode and in --spawn, values passed
as typed, one modeling point per value, bad --out/--spawn as clear errors, attempts that never mix,
and resume that knows the script however its path is spelled."""

from __future__ import annotations

import json

import pytest

from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.sweep_state import RunRecord, clear_attempt, is_complete, write_record

from .test_launch_e2e import SHOW, launch, record, script, seen

ONE_RANK = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
            "TORCHELASTIC_RUN_ID": "job7"}  # as torchrun --nproc-per-node 1 sets them


def test_plain_run_replaces_placeholders_and_records_the_program(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["--param", "y=5", "--param", "tag=007", "show.py", "{y}", "--tag={tag}", "r{repetition}"],
                  tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "show" / "ranks-1_tag-7_y-5_rep-0"
    assert seen(run_dir, 0)["argv"] == ["show.py", "5", "--tag=007", "r0"]
    assert record(run_dir)["program"] == ["show.py", "5", "--tag=007", "r0"]
    assert record(run_dir)["params"] == {"ranks": 1, "y": 5, "tag": 7}


def test_scheduled_rank_replaces_placeholders_and_refuses_unknown_ones(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["--param", "batch=08", "show.py", "--batch-size", "{batch}", "{ranks}"], tmp_path, ONE_RANK)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs" / "show").iterdir()
    assert seen(run_dir, 0)["argv"] == ["show.py", "--batch-size", "08", "1"]
    assert json.loads(seen(run_dir, 0)["env"]["SCALEPROBE_PARAMS"]) == {"ranks": 1, "batch": 8}
    assert record(run_dir)["program"] == ["show.py", "--batch-size", "08", "1"]
    refused = launch(["--param", "batch=8", "show.py", "{batch}", "{nope}"], tmp_path, ONE_RANK)
    assert refused.returncode == 2
    assert "'{nope}' names {nope}, which is no parameter" in refused.stderr


def test_sweep_values_reach_the_program_as_typed_and_the_header_as_numbers(tmp_path):
    opts = parse(["--sweep", "ckpt=007,1_000,1.10,2e3,v1", "t.py", "--ckpt", "{ckpt}"])
    runs = opts.design.runs(tmp_path, "t", opts.args, nproc=1)
    assert [r.args[1] for r in runs] == ["007", "1_000", "1.10", "2e3", "v1"]
    assert [r.params["ckpt"] for r in runs] == [7, 1000, 1.1, 2000.0, "v1"]


def test_sweep_values_as_typed_end_to_end(tmp_path):
    script(tmp_path, "show.py", SHOW)
    done = launch(["--sweep", "v=007,1.10", "show.py", "{v}"], tmp_path)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "runs" / "show"
    assert seen(root / "ranks-1_v-7_rep-0", 0)["argv"] == ["show.py", "007"]
    assert seen(root / "ranks-1_v-1.1_rep-0", 0)["argv"] == ["show.py", "1.10"]
    assert record(root / "ranks-1_v-1.1_rep-0")["params"]["v"] == 1.1


@pytest.mark.parametrize("argv, message", [
    (["--sweep", "x=1.1,1.10", "t.py"], "--sweep 'x=1.1,1.10': '1.1' and '1.10' are the same number"),
    (["--sweep", "x=1000,1e3", "t.py"], "'1000' and '1e3' are the same number"),
    (["--sweep", "x=4, 4", "t.py"], "--sweep 'x=4, 4': '4' is given twice"),
    (["--sweep", "x=a,b,a", "t.py"], "'a' is given twice"),
    (["--sweep", "x=nan,1", "t.py"], "--sweep 'x=nan,1': 'nan' is not a finite number"),
    (["--sweep", "x=1,inf", "t.py"], "'inf' is not a finite number"),
    (["--param", "x=-inf", "t.py"], "--param 'x=-inf': '-inf' is not a finite number"),
    (["--param", "x=1e400", "t.py"], "'1e400' is not a finite number"),
])
def test_one_modeling_point_per_value_and_only_finite_numbers(argv, message):
    with pytest.raises(LaunchError, match=message.replace("{", r"\{").replace("(", r"\(")):
        parse(argv)


@pytest.mark.parametrize("extra", [[], ["--nproc", "1"], ["--sweep", "x=1,2"]])
def test_out_that_is_no_directory_is_a_clear_error(tmp_path, extra):
    script(tmp_path, "s.py", "pass\n")
    (tmp_path / "afile").write_text("")
    for out in ("afile", "afile/below"):
        done = launch(["--out", out, *extra, "s.py"], tmp_path)
        assert done.returncode == 2, done.stderr
        assert f"--out {out}: cannot create the directory" in done.stderr
        assert "Traceback" not in done.stderr


def test_out_that_is_no_directory_is_a_clear_error_on_a_scheduler_rank(tmp_path):
    script(tmp_path, "s.py", "pass\n")
    (tmp_path / "afile").write_text("")
    done = launch(["--out", "afile", "s.py"], tmp_path, ONE_RANK)
    assert done.returncode == 2, done.stderr
    assert "--out afile: cannot create the directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_record_that_cannot_be_written_is_a_launch_error(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(LaunchError, match="cannot write the launch record"):
        write_record(tmp_path / "afile" / "run", RunRecord(experiment="e", run_id="r", params={}, repetition=0,
                                                           command=[]))


@pytest.mark.parametrize("option, text", [("--spawn", 'env X="unbalanced'), ("--nsys-args", "-t 'nvtx")])
def test_unbalanced_quotes_are_a_clear_error(tmp_path, option, text):
    script(tmp_path, "s.py", "pass\n")
    extra = ["--nsys"] if option == "--nsys-args" else []
    done = launch([*extra, option, text, "s.py"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{option} {text!r}: No closing quotation" in done.stderr
    assert "Traceback" not in done.stderr


def test_spawn_replaces_every_placeholder_and_refuses_unknown_ones(tmp_path):
    script(tmp_path, "show.py", SHOW + "open(os.path.join(out, 'x.txt'), 'w').write(os.environ['X'])\n")
    refused = launch(["--sweep", "b=1,2", "--spawn", "env X={bogus}", "show.py"], tmp_path)
    assert refused.returncode == 2
    assert "--spawn argument 'X={bogus}' names {bogus}, which is no parameter" in refused.stderr
    assert not (tmp_path / "runs").exists()
    done = launch(["--sweep", "b=01,2", "--spawn", "env X={b}:{ranks}:{repetition}", "show.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "runs" / "show"
    assert (root / "ranks-1_b-1_rep-0" / "x.txt").read_text() == "01:1:0"
    assert (root / "ranks-1_b-2_rep-0" / "x.txt").read_text() == "2:1:0"


def test_plain_run_with_an_explicit_repetition_replaces_the_earlier_attempt(tmp_path):
    script(tmp_path, "show.py", SHOW)
    run_dir = tmp_path / "runs" / "show" / "ranks-1_rep-0"
    assert launch(["--repetition", "0", "show.py"], tmp_path).returncode == 0
    (run_dir / "rank0.error.txt").write_text("ValueError: from the first attempt\n")
    done = launch(["--repetition", "0", "show.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(list(run_dir.glob("rank0.*.jsonl"))) == 1
    assert not (run_dir / "rank0.error.txt").exists()


def test_scheduled_rank_into_an_earlier_attempt_replaces_its_own_files(tmp_path):
    script(tmp_path, "show.py", SHOW)
    args = ["--run-id", "try1", "--repetition", "2", "show.py"]
    assert launch(args, tmp_path, ONE_RANK).returncode == 0
    run_dir = tmp_path / "runs" / "show" / "ranks-1_rep-2_try1"
    (run_dir / "rank0.error.txt").write_text("ValueError: from the first attempt\n")
    done = launch(args, tmp_path, ONE_RANK)
    assert done.returncode == 0, done.stderr
    assert len(list(run_dir.glob("rank0.*.jsonl"))) == 1
    assert not (run_dir / "rank0.error.txt").exists()


def test_clear_attempt_of_one_rank_leaves_the_other_ranks_files(tmp_path):
    # a pid above Linux's largest pid_max (2**22), never alive (pid 12 was, on a fresh machine: the file was kept)
    names = (f"rank1.{2**22 + 1}.jsonl", "rank1.error.txt", "rank1.nsys-rep", "rank10.3.jsonl", "rank0.4.jsonl", "launch.json")
    for name in names:
        (tmp_path / name).write_text("x")
    clear_attempt(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch.json", "rank0.4.jsonl", "rank10.3.jsonl"]


def test_resume_finds_finished_runs_whatever_the_script_path_is_spelled_as(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    script(project, "main.py", "import sys\nprint(sys.argv)\n")
    args = ["--out", str(tmp_path / "runs"), "--sweep", "v=1,2", "--"]
    done = launch([*args, "proj/main.py", "{v}"], tmp_path)
    assert done.returncode == 0, done.stderr
    for cwd, path in ((tmp_path, str(project / "main.py")), (project, "main.py"), (project, "./main.py")):
        dry = launch(["--dry-run", *args, path, "{v}"], cwd)
        assert "0 of 2 runs would run" in dry.stdout, (cwd, path, dry.stdout)
    # another script of the same name is another program
    other = tmp_path / "other"
    other.mkdir()
    script(other, "main.py", "pass\n")
    dry = launch(["--dry-run", *args, "main.py", "{v}"], other)
    assert "2 of 2 runs would run" in dry.stdout


def test_older_records_without_a_working_directory_resolve_from_here(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "run"
    write_record(run_dir, RunRecord(experiment="e", run_id="a", params={"v": 1}, repetition=0, command=[],
                                    status="ok", program=["proj/main.py", "1"], files=[]))
    old = json.loads((run_dir / "launch.json").read_text())
    del old["cwd"]
    (run_dir / "launch.json").write_text(json.dumps(old))
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path)
    assert is_complete(run_dir, {"v": 1}, [str(tmp_path / "proj" / "main.py"), "1"])
    assert is_complete(run_dir, {"v": 1}, ["./proj/main.py", "1"])
    assert not is_complete(run_dir, {"v": 1}, ["proj/main.py", "2"])


def test_a_record_names_the_directory_its_script_path_is_relative_to(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rec = RunRecord(experiment="e", run_id="a", params={}, repetition=0, command=[], status="ok",
                    program=["main.py"], files=[])
    assert rec.cwd == str(tmp_path)
    write_record(tmp_path / "run", rec)
    monkeypatch.chdir(tmp_path / "run")
    assert is_complete(tmp_path / "run", {}, [str(tmp_path / "main.py")])
    assert not is_complete(tmp_path / "run", {}, ["main.py"])  # here, main.py is another file

