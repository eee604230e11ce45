"""A manual region's visit that probes were switched off during (`set_enabled(False)` on another
thread) ends at its exit as one left open: no visit counted, no own time (docs/format.md). Before
(review 52), a `with region(...)` block's visit stayed on its thread's stack: the thread's later
visits of the region were counted as recursion inside it (no visits, no time) and those of other
regions as its children; a `@region` function's was counted whole, with the time the probes were
off. Both backends, in a subprocess each (the recorder is one per process)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import read_run

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import threading
from runtime.manual import region
from runtime.probe import set_enabled

inside, go, left, on_again = (threading.Event() for _ in range(4))
tick, other = region("tick"), region("other")

@region("deco")
def deco(first):
    if first:
        inside.set()
        go.wait(10)  # the probes go off here

def helper(decorated):
    if decorated:
        deco(True)
    else:
        with tick:
            inside.set()
            go.wait(10)  # the probes go off here
    left.set()
    on_again.wait(10)
    for _ in range(3):
        if decorated:
            deco(False)
        else:
            with tick:
                pass
    with other:
        pass

t = threading.Thread(target=helper, args=(DECORATED,))
t.start()
inside.wait(10)
set_enabled(False)
go.set()
left.wait(10)
set_enabled(True)
on_again.set()
t.join()
"""


@pytest.mark.parametrize("backend", ["c", "python"])
@pytest.mark.parametrize("decorated", [False, True], ids=["with", "decorator"])
def test_a_visit_the_probes_went_off_during_ends_at_its_exit(tmp_path: Path, backend: str, decorated: bool):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.replace("DECORATED", str(decorated)))
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"),
                    **({"SCALEPROBE_PURE": "1"} if backend == "python" else {}))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [f] = (tmp_path / "runs").glob("*.jsonl")
    run = read_run(f)
    assert run.header["backend"] == backend
    names = {rid: reg.name for rid, reg in run.regions.items()}
    profile = {tuple(names[i] for i in p): st for p, st in run.profile.items()}
    region = "deco" if decorated else "tick"
    # the three visits made with probes on, each counted; the first, cut by the switch, none
    assert profile[(region,)].visits == 3 and profile[(region,)].recursive == 0, profile
    # a later region of the thread is no child of the visit the probes went off during
    assert ("other",) in profile and (region, "other") not in profile, sorted(profile)
    assert run.end["dropped"] == 1
