"""Review 79, the launcher's side of `--instrument`: a program module the launcher's own imports
hide (F2), spawned children of an entry without .py (F3), an entry outside --project-root (F6), a
--cache-dir that cannot be made (F9)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime import sweep_state
from runtime.launch_args import parse
from runtime.launch_errors import LaunchError
from runtime.runfile import read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "runtime.launch", "--out", "runs", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# -- F2 --------------------------------------------------------------------------------------------

def test_f2_a_program_module_named_like_one_the_launcher_imported_is_warned_about(tmp_path):
    import platform  # noqa: F401 - imported here, as in the launcher

    from runtime.launch_script import shadowed_warnings

    write(tmp_path / "platform.py", "MINE = 1\n")
    write(tmp_path / "sys.py", "")  # builtin: found before the program's folder, with or without us
    write(tmp_path / "encodings.py", "")  # imported by every interpreter before the program's folder is on the path
    (tmp_path / "json").mkdir()  # a namespace folder: a module of that name wins over it anyway
    write(tmp_path / "r79_not_imported.py", "")
    warnings = shadowed_warnings(str(tmp_path))
    assert len(warnings) == 1, warnings
    assert "platform.py is named like the module 'platform'" in warnings[0]
    assert "rename the file" in warnings[0]


def test_f2_the_launcher_warns_before_the_program_runs(tmp_path):
    # `signal`: the launcher imports it itself (runtime.launch_script), whatever else changes
    write(tmp_path / "p7" / "main.py", """
        import signal
        print(getattr(signal, "MINE", None))
    """)
    write(tmp_path / "p7" / "signal.py", "MINE = 1\n")
    done = launch(tmp_path, "p7/main.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None"], "the launcher's signal module, as the warning says"
    assert (f"scaleprobe launch: warning: {os.path.join('p7', 'signal.py')} is named like the module 'signal' ("
            in done.stderr), done.stderr


# -- F3 --------------------------------------------------------------------------------------------

def test_f3_spawned_children_of_an_entry_without_py_are_instrumented(tmp_path):
    write(tmp_path / "proj" / "trainer", """
        import multiprocessing as mp


        def task(n):
            total = 0
            for i in range(n):
                total += i
            return total


        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            process = ctx.Process(target=task, args=(5,))
            process.start()
            process.join()
            print(process.exitcode)
    """)
    done = launch(tmp_path, "--instrument", "--cache-dir", "cache", "proj/trainer")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]
    assert "is named like the module" not in done.stderr
    runs = [read_run(p) for p in (tmp_path / "runs" / "trainer" / "ranks-1_rep-0").glob("rank0.*.jsonl")]
    children = [r for r in runs if "child_of" in r.header]
    assert len(runs) == 2 and len(children) == 1, done.stderr
    names = {(region.name, region.file) for region in children[0].regions.values()}
    assert ("task", "trainer") in names, names


# -- F6 --------------------------------------------------------------------------------------------

def test_f6_a_script_outside_the_project_root_is_refused(tmp_path):
    main = write(tmp_path / "p1" / "main.py", "import pkg.a\n")
    write(tmp_path / "p1" / "pkg" / "__init__.py", "")
    with pytest.raises(LaunchError) as info:
        parse(["--instrument", "--project-root", str(tmp_path / "p1" / "pkg"), str(main)])
    message = str(info.value)
    assert message.startswith(f"--project-root {tmp_path / 'p1' / 'pkg'}: the script {main} is not inside it")
    # inside it: as given, through a link to the root, the default
    (tmp_path / "via").symlink_to("p1", target_is_directory=True)
    parse(["--instrument", "--project-root", str(tmp_path / "p1"), str(main)])
    parse(["--instrument", "--project-root", str(tmp_path / "via"), str(main)])
    parse(["--instrument", "--project-root", str(tmp_path / "p1"), str(tmp_path / "via" / "main.py")])
    parse(["--instrument", str(main)])


def test_f6_a_module_outside_the_project_root_is_refused(tmp_path, monkeypatch):
    write(tmp_path / "app" / "__init__.py", "")
    write(tmp_path / "app" / "train.py", "")
    write(tmp_path / "lib" / "util.py", "")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LaunchError, match=r"--project-root lib: the module app\.train \(.*app/train\.py\) is not inside it"):
        parse(["--instrument", "--project-root", "lib", "-m", "app.train"])
    parse(["--instrument", "--project-root", ".", "-m", "app.train"])
    parse(["--instrument", "--project-root", "app", "-m", "app.train"])


def test_f6_the_launcher_stops_with_exit_status_2(tmp_path):
    write(tmp_path / "p1" / "main.py", "print('ran')\n")
    write(tmp_path / "p1" / "pkg" / "a.py", "")
    done = launch(tmp_path, "--instrument", "--project-root", "p1/pkg", "p1/main.py")
    assert done.returncode == 2
    assert "error: --project-root p1/pkg: the script p1/main.py is not inside it" in done.stderr
    assert "ran" not in done.stdout and "Traceback" not in done.stderr


# -- F9 --------------------------------------------------------------------------------------------

def _cannot_make(tmp_path: Path) -> Path:
    """A folder that cannot be made, where `os.access` (made to say yes, as it does to root) would
    let it pass."""
    if os.geteuid() == 0:
        if not os.path.isdir("/proc/self"):
            pytest.skip("root without /proc: no folder that root cannot write in")
        return Path("/proc/scaleprobe-review79")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked / "cache"


def test_f9_check_folder_tries_to_make_the_folder(tmp_path, monkeypatch):
    (tmp_path / "t").mkdir()
    folder = _cannot_make(tmp_path / "t")
    monkeypatch.setattr(sweep_state.os, "access", lambda *a, **k: True)  # as for root, everywhere
    with pytest.raises(LaunchError, match=rf"--cache-dir x: cannot create the directory {folder} in {folder.parent}: "):
        sweep_state.check_folder(folder, "--cache-dir x")
    (tmp_path / "ok").mkdir()
    sweep_state.check_folder(tmp_path / "ok" / "new" / "cache", "--cache-dir y")
    sweep_state.check_folder(tmp_path / "ok", "--cache-dir z")
    assert list((tmp_path / "ok").iterdir()) == [], "nothing is left behind"


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/proc/self"),
                    reason="only root passes os.access where nothing can be made")
def test_f9_an_unusable_cache_dir_is_exit_status_2(tmp_path):
    folder = _cannot_make(tmp_path)
    write(tmp_path / "main.py", "print('ran')\n")
    done = launch(tmp_path, "--instrument", "--cache-dir", str(folder), "main.py")
    assert done.returncode == 2, done.stderr
    assert f"error: --cache-dir {folder}: cannot create the directory {folder} in /proc" in done.stderr
    assert "ran" not in done.stdout
