"""Review 40 (the launcher's command line): an empty path is never the current directory."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def launch(tmp_path, *args):
    env = clean_env()
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


@pytest.mark.parametrize("args, said", [
    (["--nsys-args=--trace=cuda", "t.py"], "--nsys-args needs --nsys"),
    (["--project-root", ".", "t.py"], "--project-root needs --instrument"),
    (["--cache-dir", "cache", "t.py"], "--cache-dir needs --instrument"),
    (["--sweep", "ranks=0,1", "t.py"], "--sweep 'ranks=0,1': ranks=0: the number of ranks must be a positive integer"),
    (["--param", "ranks=1.5", "t.py"], "--param 'ranks=1.5': ranks=1.5: the number of ranks"),
    (["--sweep-file", "s.toml", "t.py"], "sweep file s.toml: sweep.ranks: ranks=0: the number of ranks"),
    (["--experiment", "a\nb", "t.py"], "must be a plain directory name"),
])
def test_options_that_did_nothing_or_named_nothing(tmp_path, args, said):
    """An option without the one it belongs to was silently ignored (`--nsys-ranks` alone was already an
    error); `parameter ranks=0` named no option; an experiment name with a newline was taken."""
    (tmp_path / "t.py").write_text("print('ran')\n")
    (tmp_path / "s.toml").write_text("[sweep]\nranks = [1, 0]\n")
    p = launch(tmp_path, "--dry-run", *args)
    assert p.returncode == 2 and said in p.stderr and p.stdout == "", (p.stdout, p.stderr)


def test_help_keeps_an_option_in_a_default_whole():
    # argparse broke `'--trace=cuda,...'` after its `--` at 80 columns
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    p = subprocess.run([sys.executable, "-m", "runtime.launch", "--help"], cwd=REPO, env=dict(env, COLUMNS="80"),
                       capture_output=True, text=True, timeout=60)
    assert "'--trace=cuda,nvtx,osrt" in p.stdout and "'--\n" not in p.stdout, p.stdout


def test_a_cache_dir_that_cannot_be_used_is_an_error(tmp_path):
    # it was silently no cache at all
    (tmp_path / "t.py").write_text("print('ran')\n")
    (tmp_path / "afile").write_text("")
    p = launch(tmp_path, "--instrument", "--cache-dir", "afile/cache", "t.py")
    assert p.returncode == 2 and "--cache-dir afile/cache: cannot create the directory" in p.stderr, p.stderr
    assert "ran" not in p.stdout
    fine = launch(tmp_path, "--instrument", "--cache-dir", "cache", "t.py")
    assert fine.returncode == 0 and "ran" in fine.stdout, fine.stderr
