"""Review 58 (the sweep launcher's edge cases): os._exit ranks, runs that recorded nothing, the
order of --sweep options, os.chdir in a run in the launcher's process, `{{name}}`, integers beyond
64 bits, a closed sys.stderr, `~` in --out, sweep-file values alike, and huge sweeps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.launch_args import MAX_RUNS, parse
from runtime.launch_errors import LaunchError
from runtime.sweep_design import Design, legacy_directories, legacy_names, load_toml, run_name
from runtime.sweep_state import RunRecord, completion, place, recorded_nothing, write_record
from runtime.sweep_values import substitute
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

# instrumented on the fly (--instrument): `work` is a region
PROGRAM = """\
import os, sys


def work(n):
    return sum(range(int(n) * 100))


work(sys.argv[1] if len(sys.argv) > 1 else 1)
print("ARGS", sys.argv[1:], flush=True)
if os.environ.get("MOVE_TO"):
    os.chdir(os.environ["MOVE_TO"])
if os.environ.get("CLOSE_STDERR"):
    sys.stderr.close()
if os.environ.get("OX"):
    os._exit(0)
sys.exit(int(os.environ.get("CODE", "0")))
"""


def launch(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", OMP_NUM_THREADS="1")
    full.update(env)
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)


def records(root: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("launch.json"))}


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    (tmp_path / "prog.py").write_text(PROGRAM)
    return tmp_path


# ----- F1: a rank that ends with os._exit(0) ---------------------------------------------------------

def test_a_sweep_whose_ranks_end_with_os_exit_fails_and_a_resume_makes_it_again(prog):
    done = launch(prog, "--instrument", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}", OX="1")
    assert done.returncode == 1, done.stderr
    assert "0 runs completed, 2 failed" in done.stderr, done.stderr
    assert "rank 0: exited with code 0, but its run file rank0." in done.stderr
    assert "has no end record: most likely it ended with os._exit" in done.stderr
    recs = records(prog / "runs")
    assert [r["status"] for r in recs.values()] == ["failed", "failed"], recs
    assert all(r["failed_rank"] == 0 and r["files"] == [] for r in recs.values())
    again = launch(prog, "--instrument", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}")
    assert again.returncode == 0 and "2 runs completed, 0 failed, 0 skipped" in again.stderr, again.stderr
    assert [r["status"] for r in records(prog / "runs").values()] == ["ok", "ok"]


def test_a_single_run_on_ranks_that_end_with_os_exit_says_so_and_keeps_the_status(prog):
    done = launch(prog, "--instrument", "--nproc", "2", "--out", "runs", "prog.py", OX="1")
    assert done.returncode == 0, done.stderr
    assert "scaleprobe launch: rank 0 failed: exited with code 0, but its run file rank0." in done.stderr
    assert "(and 1 more)" in done.stderr
    [rec] = records(prog / "runs").values()
    assert rec["status"] == "failed" and rec["exit_code"] == 0


def _write_run_file(directory: Path, name: str, header: dict, end: bool) -> None:
    lines = [{"type": "header", **header}, {"type": "region", "id": 1, "name": "main"}]
    if end:
        lines.append({"type": "end", "status": "ok"})
    (directory / name).write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_an_ok_record_of_an_older_launcher_with_a_rank_file_without_end_is_not_done(tmp_path):
    # what the launcher wrote before: `ok`, `files: []`, the rank's file without its end record
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_record(run_dir, RunRecord(experiment="e", run_id="r", params={"ranks": 1}, repetition=0,
                                    command=[], status="ok", files=[]))
    _write_run_file(run_dir, "rank0.11.jsonl", {"rank": 0}, end=False)
    # a helper process's file may end without an end record: not the rank's own
    _write_run_file(run_dir, "rank0.12.jsonl", {"rank": 0, "forked_from": 11}, end=False)
    done, problems = completion(run_dir, {"ranks": 1})
    assert not done
    assert problems == ["its run file rank0.11.jsonl has no end record (the rank ended with os._exit?)"]


# ----- F3: a run that recorded nothing: made again with --instrument, else said on resume ---------------

def test_a_resume_with_instrument_records_the_runs_an_uninstrumented_sweep_made(prog):
    first = launch(prog, "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}")
    assert first.returncode == 0 and "no run file was written" in first.stderr, first.stderr
    assert all(r["instrument"] is False for r in records(prog / "runs").values())
    again = launch(prog, "--instrument", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}")
    assert again.returncode == 0, again.stderr
    assert "2 runs completed, 0 failed, 0 skipped" in again.stderr, again.stderr
    assert again.stderr.count("recorded as completed, but it wrote no run file, and this launch instruments "
                              "the program (--instrument): making it again") == 2
    assert len(list((prog / "runs").rglob("rank*.jsonl"))) == 2
    assert all(len(r["files"]) == 1 and r["instrument"] for r in records(prog / "runs").values())


def test_a_resume_that_skips_runs_that_recorded_nothing_says_so_and_how_to_make_them_again(prog):
    # SCALEPROBE_RANKS that selects no rank, then a resume without it
    first = launch(prog, "--instrument", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}", SCALEPROBE_RANKS="5")
    assert first.returncode == 0 and "select none of the ranks" in first.stderr, first.stderr
    again = launch(prog, "--instrument", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}")
    assert again.returncode == 0 and "2 skipped as done before" in again.stderr, again.stderr
    assert ("scaleprobe launch: warning: 2 of the runs skipped as done before wrote no run file when they were "
            "made; to make them again, delete their launch.json") in again.stderr
    plain = launch(prog, "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}")
    assert "to make them again, resume with --instrument or with the instrumented copy" in plain.stderr, plain.stderr
    off = launch(prog, "--sweep", "n=1,2", "--out", "runs", "prog.py", "{n}", SCALEPROBE_DISABLE="1")
    assert "skipped as done before wrote no run file" not in off.stderr


def _ok_record(directory: Path, files: list[str] | None, instrument: bool | None = None) -> None:
    write_record(directory, RunRecord(experiment="e", run_id="r", params={"ranks": 1}, repetition=0, command=[],
                                      status="ok", files=files, instrument=instrument))


def test_a_run_that_wrote_nothing_is_made_again_only_by_a_launch_that_instruments(tmp_path):
    run_dir = tmp_path / "run"
    _ok_record(run_dir, [], instrument=False)
    assert completion(run_dir, {"ranks": 1}) == (True, [])
    done, problems = completion(run_dir, {"ranks": 1}, instrument=True)
    assert not done and problems == ["it wrote no run file, and this launch instruments the program (--instrument)"]
    assert recorded_nothing(run_dir)
    (run_dir / "rank0.nsys-rep").write_bytes(b"x")  # an NVTX build's data
    assert completion(run_dir, {"ranks": 1}, instrument=True) == (True, []) and not recorded_nothing(run_dir)
    made_so = tmp_path / "made_so"  # made with --instrument already: nothing to gain
    _ok_record(made_so, [], instrument=True)
    assert completion(made_so, {"ranks": 1}, instrument=True) == (True, [])
    older = tmp_path / "older"  # a record of an older launcher (no `files`): done, as before
    _ok_record(older, None)
    assert completion(older, {"ranks": 1}, instrument=True) == (True, []) and not recorded_nothing(older)


# ----- F4: the order of the --sweep options -----------------------------------------------------------

def test_a_directory_name_does_not_depend_on_the_order_of_the_parameters():
    assert run_name({"ranks": 1, "b": 1, "a": 2}) == run_name({"ranks": 1, "a": 2, "b": 1}) == "ranks-1_a-2_b-1"
    assert run_name({"b": "x y", "ranks": 2, "a": 1}) == run_name({"ranks": 2, "a": 1, "b": "x y"})
    assert run_name({"b": "x y", "ranks": 2, "a": 1}).startswith("ranks-2_a-1_b-x_y_")


def test_a_resume_with_the_sweep_options_swapped_finds_every_run(prog):
    first = launch(prog, "--sweep", "b=1,2", "--sweep", "a=3", "--out", "runs", "prog.py", "{b}",
                   SCALEPROBE_DISABLE="1")
    assert first.returncode == 0 and "2 runs completed" in first.stderr, first.stderr
    again = launch(prog, "--sweep", "a=3", "--sweep", "b=1,2", "--out", "runs", "prog.py", "{b}",
                   SCALEPROBE_DISABLE="1")
    assert again.returncode == 0 and "0 runs completed, 0 failed, 2 skipped as done before" in again.stderr, \
        again.stderr
    assert sorted(p.name for p in (prog / "runs" / "prog").iterdir()) == ["ranks-1_a-3_b-1_rep-0",
                                                                        "ranks-1_a-3_b-2_rep-0"]


def test_runs_of_older_launchers_are_found_under_the_names_in_the_order_given(tmp_path):
    for point in ({"ranks": 1, "b": 1, "a": 3}, {"ranks": 1, "b": "x y", "a": 3}):
        design = Design()
        run = design.run(point, 0, tmp_path / f"{run_name(point)}_rep-0", [])
        names = legacy_names(point)
        assert names[0].startswith("ranks-1_b-") and names[0] != run_name(point)
        for name in names:  # with the hash (the last launcher) and without it (older ones)
            old = tmp_path / f"{name}_rep-0"
            write_record(old, RunRecord(experiment="e", run_id="r", params=point, repetition=0, command=[],
                                        status="ok"))
            assert place(run.directory, point, legacy_directories(run, True)) == old
            (old / "launch.json").unlink()
            old.rmdir()
        assert place(run.directory, point, legacy_directories(run, True)) == run.directory


# ----- F5: a program that changes its working directory, in the launcher's process ---------------------

def test_a_program_that_changes_its_directory_ends_its_record_where_the_run_is(prog, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = launch(prog, "--instrument", "--out", "runs", "prog.py", MOVE_TO=str(elsewhere), SCALEPROBE_QUIET="0")
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"scaleprobe launch: run data in {Path('runs', 'prog', 'ranks-1_rep-0')}\n"
    [(name, rec)] = records(prog / "runs").items()
    assert (name, rec["status"]) == ("ranks-1_rep-0", "ok"), rec
    assert rec["cwd"] == str(prog)
    assert list(elsewhere.iterdir()) == []  # no stray `runs/` tree where the program went


# ----- F6: `{{name}}` ---------------------------------------------------------------------------------

def test_doubled_braces_around_a_name_reach_the_program_as_the_literal_name(prog):
    done = launch(prog, "--param", "n=4", "--out", "runs", "prog.py", "{n}", "{{epoch}}-{{step}}", "{{n}}",
                  '{"a":{"b":1}}', SCALEPROBE_DISABLE="1")
    assert done.returncode == 0, done.stderr
    assert "ARGS ['4', '{epoch}-{step}', '{n}', '{\"a\":{\"b\":1}}']" in done.stdout, done.stdout


def test_an_escaped_name_is_no_placeholder():
    assert substitute(["{{x}}", "a{{n}}b{n}", "{{ranks}}"], {"n": "7", "ranks": "2"}, 0) == \
        ["{x}", "a{n}b7", "{ranks}"]
    with pytest.raises(LaunchError, match="names {epoch}, which is no parameter"):
        substitute(["{epoch}"], {}, 0)


def test_a_sweep_whose_name_is_only_escaped_is_warned_about(prog):
    done = launch(prog, "--dry-run", "--sweep", "n=1,2", "--out", "runs", "prog.py", "{{n}}")
    assert "no {n} in the program's arguments" in done.stderr, done.stderr


# ----- F7: integers beyond 64 bits --------------------------------------------------------------------

HUGE = "99999999999999999999"


@pytest.mark.parametrize("args, said", [
    (["--repetition", HUGE], f"--repetition {HUGE}: too large an integer"),
    (["--sweep", f"n=1,{HUGE}"], f"--sweep 'n=1,{HUGE}': '{HUGE}': too large an integer"),
    (["--param", f"n=-{HUGE}"], f"--param 'n=-{HUGE}': '-{HUGE}': too large an integer"),
    (["--nproc", HUGE], f"--nproc {HUGE}: too large an integer"),
    (["--sweep-file", "s.toml"], f"sweep file s.toml: sweep.n: '{HUGE}': too large an integer"),
])
def test_an_integer_beyond_64_bits_is_refused_at_its_option(prog, args, said):
    (prog / "s.toml").write_text(f"[sweep]\nn = [1, {HUGE}]\n")
    done = launch(prog, "--instrument", "--out", "runs", *args, "prog.py", "1")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "ARGS" not in done.stdout
    assert not (prog / "runs").exists()


def test_the_largest_integers_are_taken():
    opts = parse(["--repetition", str(2**63 - 1), "--param", f"n={-2**63}", "t.py"])
    assert opts.repetition == 2**63 - 1 and opts.design.fixed["n"] == -2**63


def test_a_directory_with_a_repetition_beyond_64_bits_is_not_counted(prog):
    (prog / "runs" / "prog" / f"ranks-1_rep-{HUGE}").mkdir(parents=True)
    done = launch(prog, "--instrument", "--out", "runs", "prog.py")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (prog / "runs" / "prog" / "ranks-1_rep-0" / "launch.json").is_file()


# ----- F8: a program that closes sys.stderr ------------------------------------------------------------

@pytest.mark.parametrize("code", ["0", "3"])
def test_a_program_that_closes_stderr_keeps_its_exit_status(prog, code):
    done = launch(prog, "--instrument", "--out", "runs", "prog.py", CLOSE_STDERR="1", CODE=code,
                  SCALEPROBE_QUIET="0")
    assert done.returncode == int(code), done.stderr
    assert "lost sys.stderr" not in done.stderr and "Exception ignored" not in done.stderr
    [rec] = records(prog / "runs").values()
    assert rec["status"] == ("ok" if code == "0" else "failed")


# ----- F10: `~` in --out ------------------------------------------------------------------------------

def test_a_quoted_tilde_in_out_is_the_home_directory(prog, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = launch(prog, "--out", "~/runs", "prog.py", HOME=str(home), SCALEPROBE_DISABLE="1")
    assert done.returncode == 0, done.stderr
    assert (home / "runs" / "prog" / "ranks-1_rep-0" / "launch.json").is_file()
    assert not (prog / "~").exists()
    done = launch(prog, "--out=~/runs", "prog.py", HOME=str(home), SCALEPROBE_DISABLE="1")
    assert (home / "runs" / "prog" / "ranks-1_rep-1" / "launch.json").is_file() and not (prog / "~").exists()


# ----- F11: sweep-file values that reach the program alike ----------------------------------------------

@pytest.mark.parametrize("toml, said", [
    ('[sweep]\ns = ["1", 1]\n', "sweep file s.toml: sweep.s: '1' and 1 both reach the program as '1'"),
    ('[sweep]\ns = [1.0, "1.0"]\n', "sweep file s.toml: sweep.s: 1.0 and '1.0' both reach the program as '1.0'"),
    ('[sweep]\ns = [1, ""]\n', "sweep file s.toml: sweep.s: empty value ''"),
    ('[params]\nm = " "\n', "sweep file s.toml: params.m: empty value ' '"),
])
def test_sweep_file_values_that_reach_the_program_alike_or_empty_are_refused(tmp_path, toml, said):
    (tmp_path / "s.toml").write_text(toml)
    with pytest.raises(LaunchError) as err:
        load_toml(tmp_path / "s.toml")
    assert str(err.value).replace(str(tmp_path / "s.toml"), "s.toml").startswith(said), str(err.value)


def test_sweep_file_values_that_differ_are_still_taken(tmp_path):
    (tmp_path / "s.toml").write_text('[sweep]\ns = [1, "a", 2.5]\n')
    assert load_toml(tmp_path / "s.toml").sweep == {"s": [1, "a", 2.5]}


# ----- F12: a bound on the runs of a sweep --------------------------------------------------------------

def test_a_sweep_of_too_many_runs_is_refused_before_its_run_list_is_made(tmp_path):
    with pytest.raises(LaunchError, match=r"^100000000000000000000 runs \(1 point x --repeat 1000"):
        parse(["--repeat", "100000000000000000000", "t.py"])
    with pytest.raises(LaunchError, match=rf"^{MAX_RUNS + 1} runs \(1 point x --repeat {MAX_RUNS + 1}\): a sweep may "
                                          rf"have at most {MAX_RUNS} runs"):
        parse(["--repeat", str(MAX_RUNS + 1), "t.py"])
    many = ",".join(str(i) for i in range(1, 401))
    with pytest.raises(LaunchError, match=r"^160000 runs \(160000 points x 1 repetition\)"):
        parse(["--sweep", f"a={many}", "--sweep", f"b={many}", "t.py"])
    (tmp_path / "s.toml").write_text("repeat = 200000\n[sweep]\nn = [1, 2]\n")
    with pytest.raises(LaunchError, match=r"^400000 runs \(2 points x sweep file .*s.toml: repeat = 200000\)"):
        parse(["--sweep-file", str(tmp_path / "s.toml"), "t.py"])
    assert parse(["--repeat", str(MAX_RUNS), "t.py"]).design.repeat == MAX_RUNS
    assert parse(["--repeat", "2", "--sweep", f"a={many}", "t.py"]).design.repeat == 2


def test_a_huge_repeat_is_an_error_of_the_launcher(prog):
    done = launch(prog, "--dry-run", "--repeat", "10000000", "prog.py")
    assert done.returncode == 2 and "a sweep may have at most 100000 runs" in done.stderr, done.stderr
    assert done.stdout == ""


def test_runs_of_older_launchers_are_found_in_any_order_of_their_parameters(tmp_path):
    # review 59 F4: a resume with the --sweep options in another order than the older launcher's
    # made every run again, and the modeler read both copies as repetitions
    point = {"ranks": 1, "b": 1, "a": 3}
    run = Design().run(point, 0, tmp_path / f"{run_name(point)}_rep-0", [])
    for name in ("a-3_ranks-1_b-1", "b-1_a-3_ranks-1", "a-3_b-1_ranks-1"):
        assert name in legacy_names(point)
        old = tmp_path / f"{name}_rep-0"
        write_record(old, RunRecord(experiment="e", run_id="r", params=point, repetition=0, command=[], status="ok"))
        assert place(run.directory, point, legacy_directories(run, True)) == old
        (old / "launch.json").unlink()
        old.rmdir()
    assert run_name(point) not in legacy_names(point)
    # six parameters: the order given only (with and without the hash, which is one name here)
    assert legacy_names({f"p{i}": i for i in reversed(range(6))}) == ["p5-5_p4-4_p3-3_p2-2_p1-1_p0-0"]


def test_a_resume_finds_runs_an_older_launcher_named_in_another_order(prog):
    first = launch(prog, "--sweep", "b=1,2", "--sweep", "a=3", "--out", "runs", "prog.py", "{b}",
                   SCALEPROBE_DISABLE="1")
    assert first.returncode == 0, first.stderr
    root = prog / "runs" / "prog"
    for d in list(root.iterdir()):  # as a launcher before review 58 F4 named them: in the order given
        b = d.name.split("_b-")[1].split("_")[0]
        d.rename(root / f"ranks-1_b-{b}_a-3_rep-0")
    again = launch(prog, "--sweep", "a=3", "--sweep", "b=1,2", "--out", "runs", "prog.py", "{b}",
                   SCALEPROBE_DISABLE="1")
    assert again.returncode == 0 and "2 skipped as done before" in again.stderr, again.stderr
    assert sorted(p.name for p in root.iterdir()) == ["ranks-1_b-1_a-3_rep-0", "ranks-1_b-2_a-3_rep-0"]
