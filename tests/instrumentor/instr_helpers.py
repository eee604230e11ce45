"""Shared helpers for the instrumentor tests (imported as a plain module: tests/ has no packages)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from instrumentor.cli import main as cli_main
from instrumentor.regions import IdAllocator
from instrumentor.results import FileResult
from instrumentor.transform import instrument_source

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TESTDATA = HERE / "testdata"


def rewrite(source: str, relpath: str = "mod.py", backend: str = "runtime") -> FileResult:
    return instrument_source(textwrap.dedent(source), relpath, ids=IdAllocator(range(100)), backend=backend)


def code_of(source: str, **kwargs) -> str:
    result = rewrite(source, **kwargs)
    assert result.status == "instrumented", result.error
    return result.code


def body_after_header(code: str) -> str:
    """The rewritten module without the two header lines (import and define)."""
    return "".join(
        line for line in code.splitlines(keepends=True)
        if not line.startswith(("from runtime.probe import", "__sp_on__ = __sp_define__("))
    )


def run(args: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env or {})
    return subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def instrument_cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "instrumentor.cli", *args], timeout=timeout)


def project_tree(tmp_path, files: dict[str, str]):
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(textwrap.dedent(text))
    return src


def run_env(tmp_path) -> dict:
    return {"SCALEPROBE_QUIET": "1", "SCALEPROBE_OUT": str(tmp_path / "runs"), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def three_ways(tmp_path, files: dict[str, str], *instrument_args: str):
    """(original, built tree, --instrument) runs of main.py; the built tree's paths read as SRC's."""
    src, out = project_tree(tmp_path, files), tmp_path / "out"
    cli_main([str(src), "-o", str(out), "-q", *instrument_args])
    env = run_env(tmp_path)
    plain = run([sys.executable, "main.py"], cwd=src, env=env)
    built = run([sys.executable, "main.py"], cwd=out, env=env)
    built.stdout, built.stderr = (t.replace(str(out), str(src)) for t in (built.stdout, built.stderr))
    hooked = run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument", "main.py"],
                 cwd=src, env=env)
    return plain, built, hooked


def assert_same(plain, *others):
    for other in others:
        assert (other.returncode, other.stdout, other.stderr) == (plain.returncode, plain.stdout, plain.stderr)
