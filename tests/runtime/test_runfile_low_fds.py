"""A program started with stderr (or stdin, stdout) closed: the run file is never given descriptor
0, 1 or 2, where the program's own writes to stderr would land in it (review 58 F9: `2>&-`, as cron
and daemons start programs; the modeler then left the damaged run out)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# which of 0-2 are closed (after the code under test ran): they must stay so
_STILL_CLOSED = r"""
closed = []
for low in (0, 1, 2):
    try:
        os.fstat(low)
    except OSError as e:
        closed.append(low if e.errno == errno.EBADF else None)
"""

_CHILD = r"""
import errno, json, os, sys
for fd in map(int, sys.argv[2].split(",")):
    os.close(fd)
from runtime.runfile import RunWriter, claim_run_file
path, fd = claim_run_file(sys.argv[1], 0, os.getpid())
w = RunWriter(os.path.join(sys.argv[1], "other.jsonl"))
w_fd = w._fd
""" + _STILL_CLOSED + r"""
os.write(fd, b"x\n")
w.close()
os.close(fd)
out = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT)
os.write(out, json.dumps({"claimed": fd, "writer": w_fd, "closed": closed}).encode())
"""


def test_the_run_file_never_takes_a_standard_descriptor(tmp_path):
    for closed in ("2", "0,1,2", "1"):
        report = tmp_path / f"report-{closed}.json"
        subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), closed, str(report)], check=True, cwd=REPO,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        got = json.loads(report.read_text())
        assert got["claimed"] > 2 and got["writer"] > 2, got
        # the descriptors the program had closed are closed again
        assert got["closed"] == [int(fd) for fd in closed.split(",")], got


_LOCK_CHILD = r"""
import errno, json, os, sys
from pathlib import Path
for fd in (0, 1, 2):
    os.close(fd)
from runtime.sweep_state import claim
held = claim(Path(sys.argv[1]) / "run")
""" + _STILL_CLOSED + r"""
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
os.write(out, json.dumps({"lock": held._fd, "closed": closed}).encode())
"""


def test_the_launchers_lock_file_never_takes_a_standard_descriptor(tmp_path):
    # A launcher started with 0-2 closed handed its lock file on to the program as its stderr.
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-c", _LOCK_CHILD, str(tmp_path), str(report)], check=True, cwd=REPO,
                   env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    got = json.loads(report.read_text())
    assert got["lock"] > 2 and got["closed"] == [0, 1, 2], got
    assert (tmp_path / "run" / ".launch.lock").is_file()
