"""A build of more than 65536 region ids gave modules ids in the runtime's own range (65536 up,
the manual API's, communication's, `--instrument`'s): a program that made a manual region before
importing such a module was refused at run time ("region id 65537 of zhelper.py:1 h is in the
runtime's own range ..."), and blamed on a carried-over module it did not have. A project of
about 1500 files reaches that many (torch's 2285 files: 97,123). Builds now go on above the
runtime's ids (`regions.RUNTIME_IDS`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from instrumentor.regions import RUNTIME_IDS, in_runtime_ids, past_runtime_ids
from runtime import recorder
from runtime.config import ConfigError

REPO = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}


def instrument(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(out)], capture_output=True,
                          text=True, timeout=300, env=ENV)


def _ids(out: Path) -> dict[str, list[int]]:
    manifest = json.loads((out / ".scaleprobe" / "manifest.json").read_text())
    ids: dict[str, list[int]] = {}
    for r in manifest["regions"]:
        ids.setdefault(r["file"], []).append(r["id"])
    return ids


def _big_project(src: Path) -> None:
    """`big.py` takes the first 65536 ids (its bound counts every `for` of a comment); `main.py` makes
    two manual regions, then imports `zhelper.py`, whose ids come after big.py's."""
    src.mkdir(parents=True)
    (src / "big.py").write_text("# " + " ".join(["for"] * (RUNTIME_IDS[0] - 2))
                                + "\n\ndef work(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n")
    (src / "zhelper.py").write_text("def h():\n    return 2\n")
    (src / "main.py").write_text(
        "from runtime.manual import region\n\ndef main():\n    with region('setup'):\n        pass\n"
        "    with region('setup2'):\n        pass\n    import big, zhelper\n    print(big.work(3), zhelper.h())\n\n"
        "main()\n")


def test_the_constants_agree_with_the_runtimes():
    assert RUNTIME_IDS == (recorder.RESERVED_BASE, recorder.RESERVED_END)


def test_a_block_that_would_take_runtime_ids_goes_past_them():
    low, high = RUNTIME_IDS
    assert past_runtime_ids(0, low) == 0  # ends just below them
    assert past_runtime_ids(low - 1, 2) == high and past_runtime_ids(low + 5, 1) == high
    assert past_runtime_ids(high, 10) == high and past_runtime_ids(high + 7, 3) == high + 7
    assert in_runtime_ids(low) and in_runtime_ids(high - 1) and not in_runtime_ids(low - 1) and not in_runtime_ids(high)


def test_a_build_of_more_ids_runs_beside_the_runtimes_own_regions(tmp_path):
    _big_project(tmp_path / "src")
    p = instrument(tmp_path / "src", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    ids = _ids(tmp_path / "out")
    assert not [i for v in ids.values() for i in v if in_runtime_ids(i)], ids
    assert min(ids["zhelper.py"] + ids["main.py"]) >= RUNTIME_IDS[1]
    run = subprocess.run([sys.executable, "main.py"], cwd=tmp_path / "out", capture_output=True, text=True, timeout=120,
                         env={**ENV, "SCALEPROBE_OUT": str(tmp_path / "runs"), "SCALEPROBE_QUIET": "1"})
    assert (run.returncode, run.stdout) == (0, "3 2\n"), run.stderr
    from runtime.runfile import find_run_files, read_run

    [f] = find_run_files(tmp_path / "runs")
    names = {reg.name: rid for rid, reg in read_run(f).regions.items()}
    assert {"setup", "setup2", "main", "h", "work"} <= set(names)
    assert len(set(names.values())) == len(names)


def test_a_rebuild_moves_the_ids_an_earlier_build_gave_in_the_runtimes_range(tmp_path):
    """A state from a build before: `main.py` had ids of the runtime's, and `next_id` among them."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    out = tmp_path / "out"
    assert instrument(src, out).returncode == 0
    state_path = out / ".scaleprobe" / "state.json"
    state = json.loads(state_path.read_text())
    old = RUNTIME_IDS[0] + 4
    entry = state["files"]["main.py"]
    entry["block"] = [old, old + 8]
    for i, r in enumerate(entry["regions"]):
        r["id"] = old + i
    state["next_id"] = old + 8
    state_path.write_text(json.dumps(state))
    p = instrument(src, out)
    assert p.returncode == 0, p.stderr
    ids = _ids(out)["main.py"]
    assert ids and not any(in_runtime_ids(i) for i in ids), ids
    assert str(ids[0]) in (out / "main.py").read_text()


def test_a_carried_module_with_runtime_ids_is_warned_of(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rid = RUNTIME_IDS[0] + 1
    (src / "old.py").write_text(
        "from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__\n"
        f"__sp_on__ = __sp_define__(__name__, globals(), 'old.py', (({rid}, 'function', 'g', 3),))\n"
        f"def g():\n    return 1\n")
    (src / "main.py").write_text("import old\n\nprint(old.g())\n")
    p = instrument(src, tmp_path / "out")
    assert p.returncode == 0, p.stderr
    assert f"old.py: already instrumented with region ids the runtime hands out itself ({rid}," in p.stderr
    assert "main.py" not in [line.split(":")[0] for line in p.stderr.splitlines() if "hands out itself" in line]


def test_the_runtime_keeps_its_own_ids_below_a_large_builds():
    """A module's id past RESERVED_END does not move where the runtime hands out its own; and they
    do not run past RESERVED_END."""
    rec = recorder.Recorder.__new__(recorder.Recorder)  # its region table only: no run file, no thread
    rec.lock = threading.RLock()
    rec.regions, rec.step_rids = {}, set()
    rec._include, rec._exclude = [], []
    rec.next_reserved = recorder.RESERVED_BASE
    rec.add_regions("m", "m.py", [(recorder.RESERVED_END + 3, "function", "f", 1)])
    assert rec.reserve(1) == recorder.RESERVED_BASE
    rec.add_regions("n", "n.py", [(recorder.RESERVED_BASE + 10, "function", "g", 1)])  # `--instrument`'s, carried
    assert rec.reserve(1) == recorder.RESERVED_BASE + 11
    rec.next_reserved = recorder.RESERVED_END - 1
    with pytest.raises(ConfigError, match=r"region ids \(65536 to 262143\) are used up"):
        rec.reserve(2)
    assert rec.reserve(1) == recorder.RESERVED_END - 1  # a refused reserve gave nothing away

