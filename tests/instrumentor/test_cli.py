"""`instrument SRC -o OUT`: output tree, summary, exit codes, re-runs, refusals."""
import json
import os
import sys
from pathlib import Path

import pytest

from instr_helpers import instrument_cli, rewrite
from instrumentor import __version__
from instrumentor.cli import main
from instrumentor.project import run_jobs
from instrumentor.regions import read_manifest
from instrumentor.results import FileResult

MAIN = '"""Entry."""\nimport helper\n\n\ndef main():\n    for i in range(2):\n        helper.work(i)\n\n\nmain()\n'
HELPER = "def work(i):\n    return i * 2\n"


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "main.py").write_text(MAIN)
    (root / "helper.py").write_text(HELPER)
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    (root / "crlf.py").write_bytes(b"x = 1\r\n\r\n\r\n")  # not reached: copied as is
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts and p.name != "state.json"
    }


def test_build_writes_instrumented_modules_copies_the_rest_and_summarises(src, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "modules instrumented: 2" in printed
    assert "regions: 3 (function 2, loop 1)" in printed
    assert "files failed: 0" in printed
    assert (out / "data.bin").read_bytes() == (src / "data.bin").read_bytes()
    assert (out / "crlf.py").read_bytes() == (src / "crlf.py").read_bytes()
    assert "__sp_enter__" in (out / "helper.py").read_text()
    regions = read_manifest(out / ".scaleprobe/manifest.json")
    assert sorted((r.file, r.kind, r.name) for r in regions) == [
        ("helper.py", "function", "work"), ("main.py", "function", "main"), ("main.py", "loop", "main:for@6"),
    ]
    assert len({r.id for r in regions}) == 3
    linemap = json.loads((out / ".scaleprobe/linemap.json").read_text())
    assert set(linemap) == {"main.py", "helper.py"}
    assert len(linemap["helper.py"]) == len((out / "helper.py").read_text().splitlines())


def test_instrumented_tree_runs_and_records(src, tmp_path):
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    from instr_helpers import run
    result = run([sys.executable, "main.py"], cwd=out, env={"SCALEPROBE_OUT": str(tmp_path / "runs")})
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "runs").glob("*.jsonl"))


def test_rerun_redoes_only_changed_files_and_keeps_ids(src, tmp_path, capsys):
    out = tmp_path / "out"
    main([str(src), "-o", str(out)])
    before = {r.key: r.id for r in read_manifest(out / ".scaleprobe/manifest.json")}
    first = tree(out)
    capsys.readouterr()
    assert main([str(src), "-o", str(out)]) == 0
    assert "(2 unchanged since the last run)" in capsys.readouterr().out
    assert tree(out) == first
    (src / "helper.py").write_text("def extra():\n    return 0\n\n\n" + HELPER)
    assert main([str(src), "-o", str(out)]) == 0
    assert "(1 unchanged since the last run)" in capsys.readouterr().out
    after = {r.key: r.id for r in read_manifest(out / ".scaleprobe/manifest.json")}
    assert {k: after[k] for k in before} == before
    assert after["extra"] not in before.values()
    (src / "helper.py").unlink()
    (src / "main.py").write_text("def main():\n    return 1\n")
    main([str(src), "-o", str(out)])
    assert not (out / "helper.py").exists()


def test_instrumenting_an_instrumented_tree_changes_nothing(src, tmp_path):
    out, again = tmp_path / "out", tmp_path / "again"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert main([str(out), "-o", str(again), "-q"]) == 0
    assert tree(again) == tree(out)


def test_unparsable_file_is_reported_copied_and_fails_the_exit_code(src, tmp_path, capsys):
    (src / "helper.py").write_text("def work(i):\n    return i *\n")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "files failed: 1\n  helper.py:2: syntax error" in printed
    assert (out / "helper.py").read_text() == "def work(i):\n    return i *\n"
    assert main([str(src), "-o", str(out), "--keep-going"]) == 0


def test_quiet_still_names_the_files_that_failed(src, tmp_path, capsys):
    (src / "helper.py").write_text("def work(i):\n    return i *\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "-q"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == "instrument: failed: helper.py:2: syntax error: invalid syntax\n"
    (src / "helper.py").write_text("def work(i):\n    return i\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("where", ["same", "inside"])
def test_output_equal_to_or_inside_the_source_is_refused(src, where, capsys):
    out = src if where == "same" else src / "build"
    assert main([str(src), "-o", str(out)]) == 2
    assert "must not be the source directory or inside it" in capsys.readouterr().err
    assert not (src / "build").exists()


def test_diff_shows_the_rewrite_and_writes_nothing(src, tmp_path):
    result = instrument_cli(str(src), "--diff")
    assert result.returncode == 0, result.stderr
    assert "--- a/helper.py\n+++ b/helper.py" in result.stdout
    assert "+    if __sp_on__: __sp_enter__(" in result.stdout
    assert "modules instrumented: 2" in result.stderr
    assert sorted(p.name for p in src.iterdir()) == ["crlf.py", "data.bin", "helper.py", "main.py"]


def test_jobs_give_the_same_output(src, tmp_path):
    for i in range(6):
        (src / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    (src / "main.py").write_text(MAIN.replace("import helper", "import helper, m0, m1, m2, m3, m4, m5"))
    assert main([str(src), "-o", str(tmp_path / "one"), "-q"]) == 0
    assert main([str(src), "-o", str(tmp_path / "two"), "-q", "--jobs", "2"]) == 0
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


def _die_on_bad(job):
    if job[0] == "bad.py":
        os._exit(3)
    return FileResult(job[0], "unchanged")


def test_a_file_that_kills_its_worker_fails_alone():
    jobs = [(name, "", (0, 1), {}, "runtime", 0) for name in ("a.py", "bad.py", "b.py")]
    results = run_jobs(jobs, 2, work=_die_on_bad)
    assert {k: v.status for k, v in results.items()} == {"a.py": "unchanged", "bad.py": "failed", "b.py": "unchanged"}
    assert "worker process died" in results["bad.py"].error


def test_never_more_workers_than_files(monkeypatch):
    """Review 39: a fork pool starts all its workers at once; `-j 40` on 2 files started 40."""
    import instrumentor.project as project_module

    sizes = []
    real = project_module.ProcessPoolExecutor

    def counting(max_workers, **kwargs):
        sizes.append(max_workers)
        return real(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(project_module, "ProcessPoolExecutor", counting)
    jobs = [(name, "", (0, 1), {}, "runtime", 0) for name in ("a.py", "b.py")]
    results = run_jobs(jobs, 40, work=_die_on_bad)
    assert {k: v.status for k, v in results.items()} == {"a.py": "unchanged", "b.py": "unchanged"}
    assert sizes == [2]


def test_a_file_past_the_timeout_fails_and_the_rest_is_instrumented(src, tmp_path, capsys):
    # libcst's native parser needs far more than a second for a chain of 2500 `+` (one per line;
    # Python 3.12's own parser gives up at about 3000, so 6000 would fail before libcst runs)
    (src / "helper.py").write_text("def work(i):\n    return (i\n" + "".join(["    + i\n"] * 2500) + ")\n")
    (src / "main.py").write_text(MAIN.replace("import helper", "import helper, other"))
    (src / "other.py").write_text("def g():\n    return 1\n")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--file-timeout", "1", "--jobs", "2"]) == 1
    printed = capsys.readouterr().out
    assert "helper.py:1: the parser's worker process died or ran past --file-timeout" in printed
    assert (out / "helper.py").read_bytes() == (src / "helper.py").read_bytes()
    assert "__sp_on__" in (out / "other.py").read_text() and "__sp_on__" in (out / "main.py").read_text()


@pytest.mark.parametrize("terms, message", [
    # deeper than MAX_DEPTH (1000) but below about 3000, where Python 3.11's compile and 3.12's
    # ast.parse give up (RecursionError, the case below)
    (2500, "helper.py:2: expression nested 2500 deep: libcst would take minutes"),
    pytest.param(200000, "helper.py:1: cannot parse: RecursionError", marks=pytest.mark.skipif(
        sys.version_info < (3, 11), reason="Python 3.10's ast.parse crashes on this input (as its compile does)")),
])
def test_deeply_nested_expression_fails_quickly(src, tmp_path, capsys, terms, message):
    (src / "helper.py").write_text("def work(i):\n    return " + "+".join(["i"] * terms) + "\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "--file-timeout", "60"]) == 1
    assert message in capsys.readouterr().out


def test_version_and_usage_errors(src, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out
    assert main([str(src)]) == 2
    assert "-o OUT is required" in capsys.readouterr().err
    assert main([str(src / "nope"), "-o", "x"]) == 2
    assert main([str(src), "--diff", "--jobs", "0"]) == 2


def test_encodings_and_newlines_survive(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_bytes(
        b"# -*- coding: latin-1 -*-\r\ndef f():\r\n    return '\xe9t\xe9'\r\nprint(len(f()))\r\n"
    )
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    data = (out / "main.py").read_bytes()
    assert b"\xe9t\xe9" in data and b"\r\n    if __sp_on__: __sp_enter__(" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_a_project_module_named_runtime_is_refused_for_the_runtime_backend(src, tmp_path, capsys):
    (src / "runtime.py").write_text("X = 1\n")
    assert main([str(src), "-o", str(tmp_path / "out")]) == 2
    assert "its own top-level module 'runtime'" in capsys.readouterr().err
    assert main([str(src), "-o", str(tmp_path / "out"), "--backend", "nvtx", "-q"]) == 0


def test_a_loop_calling_another_modules_epoch_function_is_an_epoch_loop(tmp_path, capsys):
    """Review 12 F5: the usual layout, main.py's loop calling trainer.py's function that holds the
    step loop, was a plain loop (the epoch rule followed calls within a module only)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import trainer\n\n\ndef main():\n    for epoch in range(2):\n"
                                 "        trainer.Trainer().train_epoch(epoch)\n\n\nmain()\n")
    (src / "trainer.py").write_text("class Trainer:\n    def train_epoch(self, epoch, model=None, opt=None):\n"
                                    "        for batch in range(3):\n            model(batch).backward()\n"
                                    "            opt.step()\n")
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out)]) == 0
    assert "regions: 4 (epoch 1, function 1, method 1, step 1)" in capsys.readouterr().out
    kinds = {r.name: r.kind for r in read_manifest(out / ".scaleprobe" / "manifest.json")}
    assert kinds["main:for@5"] == "epoch" and kinds["Trainer.train_epoch:for@3"] == "step"
    # the trainer's own change reaches main.py, which is rewritten again though it did not change
    (src / "trainer.py").write_text((src / "trainer.py").read_text().replace(".backward()", ".detach()")
                                    .replace("opt.step()", "pass"))
    assert main([str(src), "-o", str(out)]) == 0
    kinds = {r.name: r.kind for r in read_manifest(out / ".scaleprobe" / "manifest.json")}
    assert kinds["main:for@5"] == "loop" and kinds["Trainer.train_epoch:for@3"] == "loop"


def test_a_step_loop_without_an_epoch_loop_gets_a_hint(tmp_path, capsys):
    """A call the rule cannot follow (through another name): say so, and how to mark the loop."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("from trainer import train_epoch as run\n\n\ndef main():\n    for epoch in range(2):\n"
                                 "        run(epoch)\n\n\nmain()\n")
    (src / "trainer.py").write_text("def train_epoch(epoch, model=None, opt=None):\n    for batch in range(3):\n"
                                    "        model(batch).backward()\n        opt.step()\n")
    assert main([str(src), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "no epoch loop found around the step loop(s) trainer.py:2 (train_epoch:for@2)" in printed
    assert "# scaleprobe: epoch" in printed
    (src / "main.py").write_text((src / "main.py").read_text().replace("range(2):", "range(2):  # scaleprobe: epoch"))
    assert main([str(src), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "epoch 1" in printed and "no epoch loop" not in printed


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


def _kinds(out: Path) -> dict[str, str]:
    return {r.name: r.kind for r in read_manifest(out / ".scaleprobe" / "manifest.json")}


STEP_FUNCTIONS = '''\
class Trainer:
    def run(self, loader, model=None, opt=None):
        for batch in loader:
            model(batch).backward()
            opt.step()

    def train_epoch(self, loader, model=None, opt=None):
        for batch in loader:
            model(batch).backward()
            opt.step()

    def batches(self, loader, model=None, opt=None):
        for batch in loader:
            model(batch).backward()
            opt.step()
            yield batch
'''


def test_the_cross_module_epoch_rule_leaves_common_names_generators_and_outer_loops_alone(tmp_path):
    """Review 14 F4, F5: `subprocess.run()` in a loop is no epoch because a Trainer.run holds a step
    loop; a generator that trains per item is iterated per step; of nested loops around the epoch
    function's call, the innermost is the epoch loop."""
    src = _project(tmp_path, {
        "trainer.py": STEP_FUNCTIONS,
        "main.py": "import subprocess\nimport trainer\n\n\ndef main(cmds, t):\n"
                   "    for cmd in cmds:\n        subprocess.run(cmd)\n"
                   "    for item in t.batches([1]):\n        print(item)\n"
                   "    for rep in range(2):\n        for epoch in range(3):\n            t.train_epoch([1])\n\n\n"
                   "main([], trainer.Trainer())\n",
    })
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    kinds = _kinds(out)
    assert kinds["main:for@6"] == "loop" and kinds["main:for@8"] == "loop"
    assert kinds["main:for@10"] == "loop" and kinds["main:for@11"] == "epoch"


def test_a_bare_partial_decorator_is_an_ordinary_decorator(tmp_path):
    """Review 14 F3: `@partial` without a call crashed the rewriter (it looked for the call's arguments)."""
    result = rewrite("from functools import partial\n\n\n@partial\ndef f(x):\n    return x\n")
    assert result.status == "instrumented", result.error


def test_diff_prints_no_empty_epoch_hint(src, tmp_path, capsys):
    """Review 14 F7: --diff fills no results, and printed the hint with an empty list."""
    project = _project(tmp_path, {"main.py": "def main(loader, model=None, opt=None):\n    for b in loader:\n"
                                             "        model(b).backward()\n        opt.step()\n\n\nmain([])\n"})
    assert main([str(project), "--diff"]) == 0
    assert "step loop(s) :" not in capsys.readouterr().err  # the summary goes to stderr under --diff


def test_the_epoch_functions_cache_is_redone_by_another_version(tmp_path):
    """Review 14 F9: the per-file cache of epoch functions was keyed by the file's content only."""
    src = _project(tmp_path, {"trainer.py": STEP_FUNCTIONS, "main.py": "import trainer\n\n\ndef main(t):\n"
                              "    for epoch in range(3):\n        t.train_epoch([1])\n\n\nmain(trainer.Trainer())\n"})
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "-q"]) == 0
    state_file = out / ".scaleprobe" / "state.json"
    state = json.loads(state_file.read_text())
    assert state["epoch_bodies"]["trainer.py"][1] == ["train_epoch"]
    state["epoch_bodies"]["trainer.py"][1:] = [["bogus"], "an older version"]
    state_file.write_text(json.dumps(state))
    assert main([str(src), "-o", str(out), "-q"]) == 0
    assert json.loads(state_file.read_text())["epoch_bodies"]["trainer.py"][1] == ["train_epoch"]
    assert _kinds(out)["main:for@5"] == "epoch"


@pytest.mark.parametrize("args", [["SRC", "-o", ""], ["", "-o", "OUT"], ["SRC", "-o", "OUT", "--main", ""]])
def test_an_empty_path_is_an_error_that_names_it(src, tmp_path, capsys, monkeypatch, args):
    """Review 40: `-o "$OUT"` with OUT unset built into the working directory, and `instrument "" -o bx`
    said the output was inside the source."""
    monkeypatch.chdir(tmp_path)
    args = [str(src) if a == "SRC" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert "an empty path (an unset shell variable?)" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_an_entry_without_py_is_instrumented(src, tmp_path):
    """Review 40: `--main trainer` (python runs a script of any name) was copied uninstrumented: 0
    regions, exit 0, no word; the launcher's --instrument instruments it."""
    (src / "trainer").write_text(MAIN)
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--main", "trainer", "-q"]) == 0
    built = (out / "trainer").read_text()
    assert "__sp_define__" in built and '"function", "main"' in built
    assert "__sp_define__" in (out / "helper.py").read_text()  # its imports are followed as a .py entry's
    (src / "notes.md").write_text("Not *Python* at all.\n")
    assert main([str(src), "-o", str(tmp_path / "out2"), "--main", "notes.md", "-q"]) == 1  # a parse failure, said


def test_a_re_run_counts_the_files_copied_as_the_first_build(src, tmp_path, capsys):
    """Review 40: a module with nothing to instrument counted as copied in the first build, not in an
    unchanged re-run."""
    (src / "consts.py").write_text("X = 1\n")
    (src / "main.py").write_text(MAIN.replace("import helper", "import helper, consts"))
    out = tmp_path / "out"
    lines = []
    for _ in range(2):
        assert main([str(src), "-o", str(out)]) == 0
        lines.append([ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("files copied unchanged")])
    assert lines[0] == lines[1] and lines[0], lines
