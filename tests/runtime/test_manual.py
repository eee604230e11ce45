"""The manual API (region, mark, epoch, step) and the Timer."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.errors import ScaleprobeRuntimeError
from runtime.manual import Timer
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "manual_app.py"


def test_manual_regions_and_boundaries_in_run_file(tmp_path):
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"))
    p = subprocess.run([sys.executable, str(APP), str(tmp_path / "t.json")], env=env, capture_output=True,
                       text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    assert run.problems == []
    paths = {run.callpath_name(k): v for k, v in run.profile.items()}
    assert paths["compute->load"].visits == 6
    assert paths["load"].visits == 1  # inside the extra step
    assert {r.kind for r in run.regions.values()} >= {"manual", "function", "epoch", "step", "loop"}
    assert len(run.epochs) == 2
    assert [s["index"] for s in run.steps] == [0, 1, 2, 0, 1, 2, 0]
    assert run.regions[run.steps[-1]["region"]].name == "extra_step"
    assert sum(run.iterations.values()) == 6
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["summary"]["FORWARD"]["count"] == 6
    assert "FORWARD" in p.stdout


def test_timer_statistics_and_errors():
    t = Timer()
    t.samples["BATCH"] = [1_000_000, 3_000_000, 2_000_000]
    s = t.summary()["BATCH"]
    assert (s["count"], s["min"], s["median"], s["max"]) == (3, 0.001, 0.002, 0.003)
    assert s["mean"] == pytest.approx(0.002) and s["stdev"] == pytest.approx(0.001)
    with pytest.raises(ScaleprobeRuntimeError, match="unknown key 'FWD'"):
        t.start("FWD")
    with pytest.raises(ScaleprobeRuntimeError, match="without start"):
        t.stop("IO")
    t.start("IO")
    with pytest.raises(ScaleprobeRuntimeError, match="started twice"):
        t.start("IO")
    assert t.stop("IO") >= 0
    free = Timer(keys=None)
    with free("anything"):
        pass
    assert free.summary()["anything"]["stdev"] == 0.0
