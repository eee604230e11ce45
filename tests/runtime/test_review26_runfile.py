"""Review 26 (bad input, runtime side): a program that closes descriptors it does not own must not
get run records in its own files, and a run file deleted while written is said, not reported as
written; run files with a byte-order mark, a header that does not parse, or gzip are named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import RunFileError, RunWriter, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
# the start of the programs below: a function to time, and main's first line
WORKER = "import os\n\n\ndef work(n):\n    return sum(range(n))\n\n\ndef main():\n"


def _header(**extra) -> dict:
    return {"run_id": "r", "rank": 0, "world_size": 1, "pid": 1, **extra}


def test_a_closed_descriptor_reused_by_the_program_never_gets_records(tmp_path):
    w = RunWriter(tmp_path / "rank0.1.jsonl")
    w.write_header(_header())
    os.close(w._fd)  # the program closes every descriptor above 2 ...
    theirs = os.open(tmp_path / "user.txt", os.O_WRONLY | os.O_CREAT, 0o644)  # ... and opens its own
    try:
        w.write_records([{"type": "end", "status": "ok", "exit_code": 0}])
        w.close()
        os.write(theirs, b"still mine\n")  # the program's descriptor is left open for it
    finally:
        os.close(theirs)
    assert (tmp_path / "user.txt").read_bytes() == b"still mine\n"
    run = read_run(tmp_path / "rank0.1.jsonl")
    assert run.end == {"status": "ok", "exit_code": 0} and run.header["run_id"] == "r"


def test_a_closed_descriptor_is_opened_again(tmp_path):
    w = RunWriter(tmp_path / "rank0.1.jsonl")
    w.write_header(_header())
    os.close(w._fd)
    w.write_records([{"type": "end", "status": "ok", "exit_code": 0}])
    w.close()
    run = read_run(tmp_path / "rank0.1.jsonl")
    assert run.end == {"status": "ok", "exit_code": 0} and run.problems == [], run.problems


def test_removed_says_that_the_file_was_deleted(tmp_path):
    w = RunWriter(tmp_path / "d" / "rank0.1.jsonl")
    w.write_header(_header())
    assert not w.removed
    (tmp_path / "d" / "rank0.1.jsonl").unlink()
    assert w.removed
    w.close()


def _program(tmp_path: Path, body: str) -> Path:
    from instrumentor.cli import main as instrument

    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text(body)
    assert instrument([str(src), "-o", str(tmp_path / "out"), "-q"]) == 0
    return tmp_path / "out" / "main.py"


def _env() -> dict[str, str]:
    env = clean_env()
    env["PYTHONPATH"] = str(REPO)
    return env


def test_a_program_closing_every_descriptor_keeps_its_output_and_its_run_file(tmp_path):
    main = _program(tmp_path, WORKER + f'''\
    work(1000)
    os.closerange(3, 256)
    with open({str(tmp_path / "user.txt")!r}, "w") as f:
        f.write("user data\\n")
        f.flush()
        work(10)
        os.fsync(f.fileno())


main()
''')
    env = {**_env(), "SCALEPROBE_OUT": str(tmp_path / "runs"), "SCALEPROBE_FLUSH_INTERVAL": "0.05"}
    p = subprocess.run([sys.executable, str(main)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "user.txt").read_text() == "user data\n"
    (run_file,) = (tmp_path / "runs").glob("rank0.*.jsonl")
    run = read_run(run_file)
    assert run.end is not None and run.end["status"] == "ok"
    assert any(run.callpath_name(p) == "main->work" for p in run.profile)


def test_a_run_file_deleted_while_the_program_runs_is_said(tmp_path):
    main = _program(tmp_path, '''\
import pathlib
import shutil


def main():
    for d in pathlib.Path("scaleprobe-runs").iterdir():
        shutil.rmtree(d)


main()
''')
    p = subprocess.run([sys.executable, str(main)], env=_env(), capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "was deleted while the program ran: its measurements are lost" in p.stderr
    assert "run data written to" not in p.stderr


def test_a_byte_order_mark_is_not_content(tmp_path):
    path = tmp_path / "rank0.1.jsonl"
    with RunWriter(path) as w:
        w.write_header(_header())
        w.write_records([{"type": "end", "status": "ok", "exit_code": 0}])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    run = read_run(path)
    assert run.header["run_id"] == "r"  # the header is the line the mark is stuck to
    assert run.end == {"status": "ok", "exit_code": 0} and run.problems == [], run.problems


def test_a_header_that_does_not_parse_is_named_at_its_own_line(tmp_path):
    path = tmp_path / "rank0.1.jsonl"
    path.write_text('{"type":"header","format":"scaleprobe-run","version":1,"params":{"n":NaN}}\n'
                    '{"type":"end","status":"ok"}\n')
    with pytest.raises(RunFileError, match=r"rank0\.1\.jsonl:1: not valid JSON.*no complete header"):
        read_run(path)


def test_a_compressed_file_says_so(tmp_path):
    import gzip

    path = tmp_path / "rank0.1.jsonl"
    path.write_bytes(gzip.compress(b'{"type":"header"}\n'))
    with pytest.raises(RunFileError, match="compressed with gzip"):
        read_run(path)


def test_a_tilde_in_scaleprobe_out_is_the_home_directory(tmp_path):
    main = _program(tmp_path, "def main():\n    return 1\n\n\nmain()\n")
    env = {**_env(), "HOME": str(tmp_path / "home"), "SCALEPROBE_OUT": "~/runs"}
    p = subprocess.run([sys.executable, str(main)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert list((tmp_path / "home" / "runs").glob("rank0.*.jsonl"))
    assert not (tmp_path / "~").exists()


def test_an_output_folder_that_is_a_file_is_said(tmp_path):
    main = _program(tmp_path, "def main():\n    return 1\n\n\nmain()\n")
    (tmp_path / "afile").write_text("x")
    for out in (tmp_path / "afile", tmp_path / "afile" / "runs"):
        env = {**_env(), "SCALEPROBE_OUT": str(out)}
        p = subprocess.run([sys.executable, str(main)], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and f"{tmp_path / 'afile'} is a file, not a folder" in p.stderr, p.stderr


def test_a_forked_child_leaves_the_programs_descriptor_alone(tmp_path):
    """Review 28: the program closed every descriptor, opened its own file on our number and forked:
    the child closed the program's file (taking it for the parent's run file), and its writes went
    to the child's run file."""
    main = _program(tmp_path, WORKER + f'''\
    work(100)
    os.closerange(3, 256)
    fd = os.open({str(tmp_path / "user.txt")!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.fork()
    if pid == 0:
        work(10)
        os.write(fd, b"child\\n")
        os._exit(0)
    os.waitpid(pid, 0)
    os.write(fd, b"parent\\n")


main()
''')
    env = {**_env(), "SCALEPROBE_OUT": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, str(main)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sorted((tmp_path / "user.txt").read_text().splitlines()) == ["child", "parent"]
    files = sorted((tmp_path / "runs").glob("*.jsonl"))
    assert len(files) == 2, files  # the program's and its child's
    parent, child = sorted((read_run(f) for f in files), key=lambda r: "forked_from" in r.header)
    assert parent.end is not None and parent.end["status"] == "ok" and parent.problems == [], parent.problems
    assert child.header.get("forked_from") == parent.header["pid"], child.header
    # the child leaves by os._exit: only its file may lack an end record
    assert all("no end record" in x for x in child.problems), child.problems
