"""Shared helpers for the instrumentor tests (imported as a plain module: tests/ has no packages)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
