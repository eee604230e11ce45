"""Run files of a process that replaced itself with os.exec* (runtime/exec_hook.py): each image
writes a file of its own (`rank<R>.<pid>.<n>.jsonl`, header `exec_of`), the ones replaced end
with status `exec`. Readers add them up into the rank; before, the same pid made them copies of
each other (one read, the rest dropped) and `exec` a failure."""
from __future__ import annotations

from pathlib import Path

from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import MS, write_rank_file
from test_readers_runs import series, simple_run

EXEC_END = {"status": "exec", "exit_code": None, "closed_at_end": 1}


def _restarted_run(d: Path, p: int, last_end: dict | None = None) -> list[Path]:
    """One run of rank 0 in three images: the first two replaced by the next."""
    files = []
    for image in range(3):
        header = {"exec_of": files[-1].name} if files else None
        end = EXEC_END if image < 2 else (last_end or {"status": "ok", "exit_code": 0})
        files.append(write_rank_file(d / "x", run_id="x", params={"p": p}, pid=4242, image=image, header=header,
                                     profile={(0,): (1, 10 * p * MS, MS), (0, 3): (2, 9 * p * MS, 9 * p * MS)},
                                     end=end))
    return files


def _sweep_with_restarts(root: Path) -> None:
    for p in (2, 4, 8, 16):
        simple_run(root, f"r{p}", p, t_ms=30 * p)
    _restarted_run(root, 32)


def test_the_images_of_a_restarted_process_add_up_into_its_rank(tmp_path):
    _sweep_with_restarts(tmp_path)
    rs = load_runs([tmp_path])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    assert run.status == "ok", run.reason
    assert len(run.files) == 3
    assert not any(f.status == "duplicate" for f in rs.files)
    ds = read_runs([tmp_path])
    s = series(ds, "main->Model.forward", "visits")
    assert dict(zip(s.points[:, 0].tolist(), s.values().tolist()))[32.0] == 6  # 2 visits in each image
    t = series(ds, "main", "time")
    assert dict(zip(t.points[:, 0].tolist(), t.values().tolist()))[32.0] == 3 * 0.32


def test_the_last_image_says_whether_the_run_failed(tmp_path):
    _sweep_with_restarts(tmp_path / "ok")
    _restarted_run(tmp_path / "bad", 64, {"status": "exception", "exit_code": 1, "exception": "builtins.ValueError"})
    rs = load_runs([tmp_path / "bad"])
    (run,) = rs.runs
    assert run.status == "failed" and "rank0.4242.2.jsonl" in run.reason and "ValueError" in run.reason


def test_a_copy_of_an_image_s_file_is_still_read_once(tmp_path):
    files = _restarted_run(tmp_path / "runs", 32)
    for p in (2, 4, 8, 16):
        simple_run(tmp_path / "runs", f"r{p}", p, t_ms=30 * p)
    backup = tmp_path / "runs" / "backup"
    backup.mkdir()
    (backup / files[1].name).write_bytes(files[1].read_bytes())
    rs = load_runs([tmp_path / "runs"])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    assert run.status == "ok" and len(run.files) == 3
    assert [Path(f.path).name for f in rs.files if f.status == "duplicate"] == [files[1].name]


def test_a_restarted_rank_s_run_time_is_its_images_added_up(tmp_path):
    """Each image ran after the other: the rank's run time, against which call paths' shares of
    the run are taken (`--min-share`), is their sum; the longest alone made `main` 3x the run."""
    from modeler.aggregate import RegionNames, run_metrics

    _sweep_with_restarts(tmp_path)
    rs = load_runs([tmp_path])
    (run,) = [r for r in rs.runs if r.run_id == "x"]
    rm = run_metrics(run, RegionNames(rs.runs))
    assert rm.shares["main"] == 1.0


# ----- review 52 F1: `modeler report` took one image of the process (and its `exec` end for a failure)

#: the regions of the last image, numbered otherwise: each image numbers its regions itself
RENUMBERED = tuple((9 - rid, kind, name, file, line) for rid, kind, name, file, line in
                   __import__("modeler_synthetic_runs").REGIONS)


def _chain(d: Path, run_id: str, p: int, rank: int = 0, world_size: int = 1, images: int = 3,
           step_ms: int = 2) -> list[Path]:
    """One rank's process in `images` images, each with 5 steps of `step_ms` * (1 + rank) and a
    `main` of 10 * p + 40 ms; the last image numbers its regions otherwise (`RENUMBERED`)."""
    files: list[Path] = []
    step = step_ms * (1 + rank) * MS
    t = (10 * p + 40) * MS
    for image in range(images):
        last = image == images - 1
        ids = {rid: 9 - rid for rid in range(5)} if last else {rid: rid for rid in range(5)}
        profile = {(ids[0],): (1, t, MS), (ids[0], ids[1]): (1, t - MS, t - MS - 5 * step),
                   (ids[0], ids[1], ids[2]): (5, 5 * step, 5 * step - 5 * MS),
                   (ids[0], ids[1], ids[2], ids[3]): (5, 5 * MS, 5 * MS)}
        files.append(write_rank_file(
            d / run_id, run_id=run_id, params={"p": p, "ranks": world_size}, rank=rank, world_size=world_size,
            pid=4000 + rank, image=image, header={"exec_of": files[-1].name} if files else None,
            regions=RENUMBERED if last else __import__("modeler_synthetic_runs").REGIONS, profile=profile,
            steps=[{"region": ids[2], "duration_ns": step, "data_wait_ns": MS // 10, "comm_ns": 0}] * 5,
            end={"status": "ok", "exit_code": 0} if last else EXEC_END))
    return files


def test_the_report_takes_a_restarted_rank_as_one_process(tmp_path):
    from modeler.report.runs import groups_from_runset

    for p in (2, 4, 8, 16, 32):
        for rank in (0, 1):
            _chain(tmp_path, f"x{p}", p, rank=rank, world_size=2)
    rs = load_runs([tmp_path])
    groups = groups_from_runset(rs)
    assert [g.ok for g in groups] == [True] * 5, [g.failure() for g in groups]
    g = next(g for g in groups if g.params["p"] == 32)
    r0 = next(r for r in g.ranks if r.rank == 0)
    incl = r0.incl_by_callpath()
    # the three images added up, whatever ids each gave its regions
    assert incl["main"] == 3 * 360 * MS and incl["main->train->train_epoch"] == 3 * 5 * 2 * MS
    assert r0.profile[next(p for p in r0.profile if len(p) == 1)].visits == 3
    assert r0.longest_root_ns() == 3 * 360 * MS and g.time_ns() == 3 * 360 * MS
    assert r0.status == "ok" and "exec_of" not in r0.header  # the process's header: its first image's
    assert r0.loops["steps"]["main->train->train_epoch"]["count"] == 15


def test_an_image_without_an_end_leaves_its_rank_unfinished_in_the_report(tmp_path):
    from modeler.report.runs import groups_from_runset

    files = _chain(tmp_path, "x", 4)
    lines = files[0].read_bytes().splitlines(keepends=True)
    files[0].write_bytes(b"".join(lines[:-1]))  # the first image's end record lost (killed at its exec?)
    (g,) = groups_from_runset(load_runs([tmp_path]))
    assert not g.ok and g.ranks[0].status == "no end record"


def test_report_of_restarted_ranks_keeps_their_runs_steps_and_whole_time(tmp_path):
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    for p in (2, 4, 8, 16, 32):
        for rank in (0, 1):
            _chain(tmp_path / "runs", f"x{p}", p, rank=rank, world_size=2)
    out = subprocess.run([sys.executable, "-m", "modeler", "report", str(tmp_path / "runs"), "--format", "markdown"],
                         cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    md = out.stdout
    assert "| runs completed | 5 of 5 |" in md and "Runs left out" not in md and ": exec" not in md
    assert "No step or epoch records" not in md and "| 32 | `train_epoch` |" in md
    assert "exec_of" not in md  # no environment setting
    assert "Predicted run time (mean over ranks) at p=32: **1.08 s**" in md  # 3 images of 360 ms
    tree = md.split("## Call tree")[1]
    assert "main  1.08 s / 3 ms  x3  (100.0%)" in tree, tree


# ----- review 52 F2: a rank that torch.multiprocessing.spawn started, and that then exec'd

def _spawned_ranks_that_exec(d: Path, run_id: str, n: int, rank_known_in: int = 0) -> None:
    """A starter (pid 100) and `n` ranks (pid 200 + r), each in two images: the first exec'd. The
    rank record (torch.distributed's rank) is in image `rank_known_in`: 0, as when the rank execs
    after `init_process_group` (the next image's header has the rank, no record); 1 when before."""
    params = {"ranks": 1}
    write_rank_file(d, run_id=run_id, params=params, pid=100, profile={(0,): (1, 900 * MS, MS)})
    for r in range(n):
        first = Path(d) / f"rank{r if rank_known_in == 0 else 0}.{200 + r}.jsonl"
        rank_record = [{"type": "rank", "rank": r, "world_size": n, "started_by": 100}]
        for image in (0, 1):
            if image == 0:  # as spawned: rank 0 of 1, its parent's child
                header = {"rank": 0, "world_size": 1, "child_of": 100, "ppid": 100, "rank_source": "parent"}
            elif rank_known_in == 0:  # the rank its first image knew, told through the exec
                header = {"exec_of": first.name, "ppid": 100, "rank_source": "torch.distributed"}
            else:  # nothing known yet: its parent's child again, made a rank by its own record
                header = {"rank": 0, "world_size": 1, "exec_of": first.name, "ppid": 100, "child_of": 100,
                          "rank_source": "parent"}
            write_rank_file(d, run_id=run_id, params=params, rank=r if (rank_known_in == 0 or image) else 0,
                            world_size=n, pid=200 + r, image=image, header=header,
                            records=rank_record if image == rank_known_in else (),
                            profile={(0,): (1, 100 * MS, MS), (0, 3): (10, 99 * MS, 60 * MS)},
                            comms=[{"op": "all_reduce", "bytes": 4096, "group_size": n, "calls": 10,
                                    "time_ns": 39 * MS, "gpu_ns": None, "callpath": [0, 3]}],
                            steps=[{"region": 2, "start_ns": i * 10 * MS, "duration_ns": 10 * MS} for i in range(10)],
                            end=EXEC_END if image == 0 else {"status": "ok", "exit_code": 0})


def test_the_images_after_a_spawned_rank_s_exec_are_that_rank_s(tmp_path):
    for n in (1, 2, 4):
        _spawned_ranks_that_exec(tmp_path / f"n{n}", f"s{n}", n)
    rs = load_runs([tmp_path])
    assert [r.status for r in rs.runs] == ["ok"] * 3, [r.reason for r in rs.runs]
    run = next(r for r in rs.runs if r.run_id == "s2")
    assert [f.header["pid"] for f in run.starters] == [100]
    assert {rank: sorted(f.path.name for f in fs) for rank, fs in run.ranks.items()} == {
        0: ["rank0.200.1.jsonl", "rank0.200.jsonl"], 1: ["rank1.201.1.jsonl", "rank1.201.jsonl"]}
    ds = read_runs([tmp_path])
    calls = series(ds, "main->Model.forward->all_reduce", "comm_calls")
    assert calls.values().tolist() == [20.0, 20.0, 20.0]  # 10 in each image, not the first's alone
    assert series(ds, "main", "visits").values().tolist() == [2.0, 2.0, 2.0]
    assert series(ds, "main", "time").values().tolist() == [0.2, 0.2, 0.2]


def test_a_spawned_rank_that_execs_before_torch_distributed_names_it_is_that_rank_throughout(tmp_path):
    """The first image never learnt its rank (it exec'd before `init_process_group`): it said it was
    its parent's child, and the starter's helper it would have been; the next image's `rank` record
    names the process's rank."""
    for n in (1, 2, 4):
        _spawned_ranks_that_exec(tmp_path / f"n{n}", f"s{n}", n, rank_known_in=1)
    rs = load_runs([tmp_path])
    assert [r.status for r in rs.runs] == ["ok"] * 3, [r.reason for r in rs.runs]
    run = next(r for r in rs.runs if r.run_id == "s4")
    assert [f.header["pid"] for f in run.starters] == [100]
    assert {rank: len(fs) for rank, fs in run.ranks.items()} == {0: 2, 1: 2, 2: 2, 3: 2}
    assert not any(f.is_child for f in run.files)
    calls = series(read_runs([tmp_path]), "main->Model.forward->all_reduce", "comm_calls")
    assert calls.values().tolist() == [20.0, 20.0, 20.0]


def test_process_images_follow_exec_of_not_the_file_names(tmp_path):
    """rank0.P.10.jsonl sorts before rank0.P.2.jsonl; and an image that wrote into another folder
    (an exec with an environment of its own) keeps the name its predecessor had, never itself."""
    from modeler.readers.runs import process_images

    files = []
    for image in range(12):
        files.append(write_rank_file(tmp_path / "a", run_id="x", params={"p": 1}, pid=7, image=image,
                                     header={"exec_of": files[-1].name} if files else None,
                                     end=EXEC_END if image < 11 else {"status": "ok", "exit_code": 0}))
    elsewhere = write_rank_file(tmp_path / "b", run_id="y", params={"p": 1}, pid=9, header={"exec_of": "rank0.9.jsonl"})
    first = write_rank_file(tmp_path / "c", run_id="y", params={"p": 1}, pid=9, end=EXEC_END)
    rs = load_runs([tmp_path])
    x = next(r for r in rs.runs if r.run_id == "x")
    (chain,) = process_images(x.files)
    assert [f.path for f in chain] == files
    y = next(r for r in rs.runs if r.run_id == "y")
    assert y.status == "ok", y.reason
    assert [[f.path for f in c] for c in process_images(y.files)] == [[first, elsewhere]]


# ----- `modeler timeline`: one process per rank

def test_the_timeline_draws_a_restarted_process_once_with_all_its_images(tmp_path):
    from modeler.timeline import build_trace
    from runtime.runfile import read_run

    files = []
    for image in range(3):
        files.append(write_rank_file(
            tmp_path, run_id="x", params={"p": 1}, pid=4242, image=image,
            header={"start_unix": 1000.0 + image, "start_ns": image * 10**9, "host": "h",
                    **({"exec_of": files[-1].name} if files else {})},
            steps=[{"region": 2, "start_ns": image * 10**9 + i * 10 * MS, "duration_ns": 10 * MS} for i in range(2)],
            end=EXEC_END if image < 2 else {"status": "ok", "exit_code": 0}))
    trace = build_trace([read_run(f) for f in sorted(files)])
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert names == ["rank 0 (h, pid 4242)"]
    steps = sorted(e["ts"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "step")
    assert steps == [0.0, 10_000.0, 1e6, 1e6 + 10_000.0, 2e6, 2e6 + 10_000.0]
    assert sum(1 for e in trace["traceEvents"] if e["name"] == "thread_name") == 1


def test_the_timeline_of_spawned_ranks_that_exec_draws_the_starter_apart(tmp_path):
    from modeler.timeline import build_trace
    from runtime.runfile import read_run

    _spawned_ranks_that_exec(tmp_path, "s", 2)
    trace = build_trace([read_run(f) for f in sorted(tmp_path.glob("*.jsonl"))])
    names = [e["args"]["name"].split(" (")[0] for e in sorted(trace["traceEvents"], key=lambda e: e["pid"])
             if e["name"] == "process_name"]
    assert names == ["the ranks' starter", "rank 0", "rank 1"]


# ----- review 52 F1 rest: images with different top-level regions ran one after the other

#: the first image's program: a `prepare` script that replaces itself with the training program
PREPARE = ((0, "function", "prepare", "prepare.py", 1), (1, "function", "download", "prepare.py", 9))


def _prepare_then_train(d: Path, run_id: str, p: int) -> None:
    """Rank 0 runs `prepare` (40 ms, and a thread's `download`, 20 ms, beside it) and execs into the
    training program, whose `main` takes 10 * p ms: its run is both images."""
    first = write_rank_file(d / run_id, run_id=run_id, params={"p": p}, pid=77, image=0, regions=PREPARE,
                            profile={(0,): (1, 40 * MS, 20 * MS), (0, 1): (1, 20 * MS, 20 * MS),
                                     (1,): (1, 20 * MS, 20 * MS)},
                            end=EXEC_END)
    write_rank_file(d / run_id, run_id=run_id, params={"p": p}, pid=77, image=1, header={"exec_of": first.name},
                    profile={(0,): (1, 10 * p * MS, MS), (0, 3): (2, 10 * p * MS - MS, 10 * p * MS - MS)})


def test_images_with_other_top_level_regions_add_up_into_the_predicted_run_time(tmp_path):
    """Review 52 F1: the report's run time at the target was its longest top-level region alone,
    `main` (320 ms at p=32), where the process ran `prepare` (40 ms) before it; `download`, which
    ran in `prepare`'s image beside it, is not added."""
    from modeler import cli

    for p in (2, 4, 8, 16, 32):
        _prepare_then_train(tmp_path / "runs", f"x{p}", p)
    out = tmp_path / "r.md"
    assert cli.main(["report", str(tmp_path / "runs"), "--at", "p=64", "--format", "markdown", "-q",
                     "-o", str(out)]) == 0
    line = next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))
    total = float(line.split("**")[1].split()[0])
    assert 670 < total < 690, line  # 640 ms + 40 ms (ms: the unit of the figure)
    assert "`main`" in line and "plus" in line and "prepare (40 ms)" in line and "Caveat" not in line, line
