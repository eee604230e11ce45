"""Shared helpers for the instrumentor tests (imported as a plain module: tests/ has no packages)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from instrumentor.cli import main as cli_main
from instrumentor.regions import IdAllocator
from instrumentor.results import FileResult
from instrumentor.transform import instrument_source
from tests.envclean import clean_env

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


def strict_replay(log: list) -> list[int]:
    """Replay ("enter", rid)/("exit", rid) entries of `log` as a stack that must match exactly; the
    regions left open at the end."""
    stack: list[int] = []
    for entry in log:
        if isinstance(entry, tuple) and entry[0] == "enter":
            stack.append(entry[1])
        elif isinstance(entry, tuple):
            assert stack and stack[-1] == entry[1], f"exit {entry[1]} with {stack} open"
            stack.pop()
    return stack


def load_both(source: str, left, back, on: bool = True) -> tuple[dict, dict, list]:
    """`source` run as is, and instrumented with probes that log ("enter"/"exit", rid) to `log`
    (`left`/`back` from the backend under test): (plain namespace, probed namespace, log)."""
    from runtime import probe

    source = textwrap.dedent(source)
    plain: dict = {"__name__": "case", "log": []}
    exec(compile(source, "case.py", "exec"), plain)
    log: list = []
    probed = {
        "__name__": "case", "log": log, "__sp_on__": on,
        "__sp_enter__": lambda rid: log.append(("enter", rid)),
        "__sp_exit__": lambda rid: log.append(("exit", rid)),
        "__sp_mark__": lambda rid: None,
        "__sp_left__": left, "__sp_back__": back,
        "__sp_aiter__": probe.async_iter, "__sp_actx__": probe.async_ctx,
    }
    exec(compile(body_after_header(code_of(source)), "case.py", "exec"), probed)
    return plain, probed, log


def run(args: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = clean_env()
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


def loop_records(path) -> tuple[dict[str, list], dict[str, list]]:
    """A run file's (step records, epoch records), each by loop name; asserts it read cleanly."""
    from runtime.runfile import read_run

    recorded = read_run(path)
    assert not recorded.problems, recorded.problems
    found: tuple[dict[str, list], dict[str, list]] = ({}, {})
    for records, by_name in zip((recorded.steps, recorded.epochs), found):
        for rec in records:
            by_name.setdefault(recorded.regions[rec["region"]].name, []).append(rec)
    return found


def assert_same(plain, *others):
    for other in others:
        assert (other.returncode, other.stdout, other.stderr) == (plain.returncode, plain.stdout, plain.stderr)
