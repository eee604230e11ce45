"""benchmarks/gpu_check.py keeps what it found when one check crashes, and always writes its JSON
(review 75 F4). The checks are replaced by stubs here: this is the script's bookkeeping, not the
GPU checks themselves (tests/runtime/test_gpu.py runs those with --fake)."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture
def gpu_check(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "environment", lambda fake: ({"torch": "stub", "python": "3", "fake": fake}, 0))
    build = tmp_path / "build"
    monkeypatch.setattr(mod, "instrument", lambda tmp: build)

    def ok(name):
        def check(ctx):
            ctx.num(f"{name}.value", 1.5, "us")
            ctx.line("ok", name, "stub passed")
        return check

    def crash(ctx):
        ctx.num("sync.before_crash", 2, "")
        return {}["a run-file field fake events never produce"]

    funcs = {name: ok(name) for name in mod.CHECKS}
    funcs["sync"] = crash
    monkeypatch.setattr(mod, "CHECK_FUNCS", funcs)
    return mod


def test_a_crashing_check_is_a_failure_and_the_others_still_run(gpu_check, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    work = tmp_path / "work"
    rc = gpu_check.main(["--fake", "--checks", "accuracy,sync,spans,nvtx", "--json", str(out), "--keep", str(work)])
    text = capsys.readouterr().out
    assert rc == 1, text
    assert "[FAILED] sync: crashed: KeyError" in text, text
    for check in ("accuracy", "spans", "nvtx"):
        assert f"[ok] {check}: stub passed" in text, text
    assert "checks:" in text and "1 check(s) FAILED" in text, text  # the summary came
    data = json.loads(out.read_text())
    assert data["exit_status"] == 1
    by_check = {c["check"]: c for c in data["checks"]}
    assert by_check["sync"]["status"] == "FAILED" and "KeyError" in by_check["sync"]["traceback"], by_check
    assert [by_check[c]["status"] for c in ("accuracy", "spans", "nvtx")] == ["ok"] * 3
    assert data["numbers"]["nvtx.value"]["value"] == 1.5 and "sync.before_crash" in data["numbers"]
    # the parameters the run used are in the JSON
    assert data["parameters"]["options"]["reps"] == 7 and data["parameters"]["options"]["fake"] is True
    assert data["parameters"]["checks"] == ["accuracy", "sync", "spans", "nvtx"]
    assert "source_revision" in data


def test_logs_are_kept_when_a_check_failed(gpu_check, tmp_path, capsys, monkeypatch):
    made = tmp_path / "made"
    monkeypatch.setattr(gpu_check.tempfile, "mkdtemp", lambda prefix="": str(made))
    rc = gpu_check.main(["--fake", "--checks", "accuracy,sync"])
    text = capsys.readouterr().out
    assert rc == 1 and made.is_dir() and f"kept in {made}" in text, text


def test_the_temporary_directory_goes_when_all_passed(gpu_check, tmp_path, capsys, monkeypatch):
    made = tmp_path / "made"
    monkeypatch.setattr(gpu_check.tempfile, "mkdtemp", lambda prefix="": str(made))
    out = tmp_path / "gpu.json"
    rc = gpu_check.main(["--fake", "--checks", "accuracy,spans", "--json", str(out)])
    assert rc == 0 and not made.exists(), capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["exit_status"] == 0 and {c["status"] for c in data["checks"]} == {"ok"}
    assert "kept" not in data


@pytest.mark.parametrize("where", ["environment", "instrument"])
def test_exit_2_still_writes_the_json_with_the_reason(gpu_check, tmp_path, capsys, monkeypatch, where):
    out = tmp_path / "gpu.json"
    if where == "environment":
        monkeypatch.setattr(gpu_check, "environment", lambda fake: "no CUDA: stub")
    else:
        monkeypatch.setattr(gpu_check, "instrument", lambda tmp: "instrumenting stub failed (exit 1)")
    rc = gpu_check.main(["--json", str(out), "--reps", "9"] + (["--fake"] if where == "instrument" else []))
    assert rc == 2, capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["exit_status"] == 2 and "stub" in data["reason"], data
    assert data["parameters"]["options"]["reps"] == 9 and data["checks"] == []
