"""Review 94 (an adversarial review of the latest changes), the runtime's and instrumentor's side.

MED-1: under `launch --instrument` the header's `build` was null: the import hook's reserve()
       started the recorder before any build was known.
LOW-1: a run directory name made too long by the run id blamed the parameter `ranks`.
LOW-2: a program's own `try: from runtime.probe import x / except ImportError` in an instrumented
       module exited 2 instead of taking its fallback.
LOW-3: a carried-over module's id in the runtime's own range was blamed on separate builds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runtime import launch
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env
from tests.runtime.test_review71_launch import here  # noqa: F401 (the fixture: a clean launcher environment)

REPO = Path(__file__).resolve().parents[2]


def test_the_header_names_the_build_under_launch_instrument(tmp_path):
    from instrumentor.revision import BUILD

    (tmp_path / "main.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    p = subprocess.run([sys.executable, "-m", "runtime.launch", "--instrument", "--out", "runs", "main.py"],
                       cwd=tmp_path, env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1"),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "runs")
    assert read_run(f).header["build"] == BUILD


def test_a_run_id_that_makes_the_name_too_long_is_named(here, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    code = launch.main(["--out", "runs", "--run-id", "x" * 300, "main.py"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "bytes of it are not a parameter's but the run's id (--run-id" in err and "'ranks'" not in err, err


HEADER = ('from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__\n'
          '__sp_on__ = __sp_define__(__name__, globals(), "main.py", ((0, "function", "f", 3),))\n')


def run_main(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    (tmp_path / "main.py").write_text(text)
    return subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"),
                                        SCALEPROBE_QUIET="1"))


def test_a_programs_own_optional_import_of_the_runtime_takes_its_fallback(tmp_path):
    p = run_main(tmp_path, HEADER + "try:\n    from runtime.probe import no_such_thing\nexcept ImportError:\n"
                           "    print('fallback')\n")
    assert (p.returncode, p.stdout) == (0, "fallback\n"), p.stderr


def test_a_header_import_of_a_missing_probe_is_still_one_line(tmp_path):
    p = run_main(tmp_path, "from runtime.probe import enter as __sp_enter__, no_such_probe as __sp_new__, "
                           "define as __sp_define__\n" + HEADER.splitlines()[1] + "\n")
    assert p.returncode == 2 and "imports the probe 'no_such_probe'" in p.stderr and "Traceback" not in p.stderr


def test_an_id_in_the_runtimes_own_range_is_said_as_such(tmp_path):
    p = run_main(tmp_path, "from runtime.manual import region\nwith region('first'):\n    pass\n"
                           "from runtime.probe import define as __sp_define__\n"
                           "__sp_define__(__name__, globals(), 'old.py', ((65536, 'function', 'g', 1),))\n")
    assert p.returncode == 2
    assert "is in the runtime's own range (65536 to 262143" in p.stderr and "separate builds" not in p.stderr
