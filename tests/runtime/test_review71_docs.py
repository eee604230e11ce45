"""Review 71: the README's quick start says what its ranks need (F2) and the demo's time as measured
(F6); docs/runtime.md's run ids and docs/internals.md's launchers as runtime/environment.py has them
(after cf5cfb4); the new header fields and the time left documented."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.environment import job_run_id

REPO = Path(__file__).resolve().parents[2]


def _text(name: str) -> str:
    return re.sub(r"\s+", " ", (REPO / name).read_text())


def test_the_readme_quick_start_names_the_cores_it_needs_and_a_small_machine_list():
    readme = _text("README.md")
    assert "as many free cores as its largest `ranks`: 16" in readme
    assert "`--sweep ranks=1,2,4` on 4" in readme
    # review 87: two values of ranks are modeled as a constant, which the advice must say
    assert "A parameter needs at least 3 measured values to be modeled: with `--sweep ranks=1,2` (2 cores)" in readme
    assert "`--sweep ranks=1,2` on 2 cores" not in readme
    assert "make demo" in readme and "make test" in readme


def test_the_readme_gives_the_demo_time_as_measured():
    readme = _text("README.md")
    assert "About 3.5 to 4.5 minutes on an idle 2-core machine (4m14s in review 71" in readme
    assert "About 3.5 minutes on an idle" not in readme


def test_runtime_md_lists_the_run_ids_in_the_order_job_run_id_takes_them():
    text = _text("docs/runtime.md")
    start = text.index("share the id their launcher or scheduler gives the launch")
    listed = re.findall(r"`(torchrun|pmix|flux|slurm|pbs|lsf)-<", text[start:start + 1200])
    assert listed == ["torchrun", "torchrun", "pmix", "flux", "slurm", "slurm", "pbs", "lsf"], listed
    # as the code: the launch's own id before its batch job's
    env = {"SLURM_JOB_ID": "7", "PMIX_NAMESPACE": "ns", "FLUX_JOB_ID": "f"}
    assert job_run_id(env) == "pmix-ns"
    assert job_run_id({"SLURM_JOB_ID": "7", "FLUX_JOB_ID": "f"}) == "flux-f"


def test_internals_md_names_every_launcher_recognised():
    text = _text("docs/internals.md")
    sentence = text[text.index("Rank, local rank and world size come from"):][:400]
    for name in ("SLURM", "Open MPI", "MPICH/PMI", "PMIx", "PALS", "MVAPICH2", "Flux"):
        assert name in sentence, name


def test_the_header_fields_and_the_time_left_are_documented():
    assert "`cpus_usable`, `cpu_affinity`" in _text("docs/format.md")
    launch_md = _text("docs/launch.md")
    assert "weighs each run left by its expected cost" in launch_md
    assert "usable CPUs" in launch_md and "`--version`" in launch_md
    assert "usable CPUs" in _text("docs/modeler.md")
