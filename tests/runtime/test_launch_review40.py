"""Review 40 (the launcher's command line): an empty path is never the current directory."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def launch(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    env.update(PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, said", [
    (["--out", "", "t.py"], "argument --out: an empty path"),
    (["--instrument", "--cache-dir", "", "t.py"], "argument --cache-dir: an empty path"),
    (["--instrument", "--project-root", "", "t.py"], "argument --project-root: an empty path"),
    (["--sweep-file", "", "t.py"], "argument --sweep-file: an empty path"),
    (["--", ""], "the script is an empty path"),
])
def test_an_empty_path_is_an_error_that_names_it(tmp_path, args, said):
    # `--out "$OUT"` with OUT unset wrote the runs into the working directory; `--sweep-file ""` said
    # "sweep file .: Is a directory"
    (tmp_path / "t.py").write_text("print('ran')\n")
    p = launch(tmp_path, *args)
    assert p.returncode == 2 and said in p.stderr and "ran" not in p.stdout, (p.stdout, p.stderr)
    assert sorted(os.listdir(tmp_path)) == ["t.py"]
