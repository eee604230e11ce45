# Two set-up commands for a fresh machine with only Python and pip:
#   make demo   instrument the sample application, run it, and (as the project grows) model it
#   make test   run the whole test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test install clean extrap-venv bench-modeler bench-read bench-derived bench-shapes bench-comm bench-passes bench-instrument bench-probes bench-suspend peer-suites

install: $(STAMP)

$(STAMP): pyproject.toml $(wildcard setup.py) $(wildcard runtime/*.c)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[torch,dev]'
	touch $@

demo: $(STAMP)
	bash scripts/demo.sh $(PY) $(DEMO_ARGS)

test: $(STAMP)
	bash scripts/ensure_chromium.sh
	$(PY) -m pytest -q

# Extra-P 4.2.5 for the side-by-side benchmark: its own venv, never the project's (it needs numpy < 2).
extrap-venv: .venv-extrap/bin/extrap
.venv-extrap/bin/extrap:
	$(PYTHON) -m venv .venv-extrap
	.venv-extrap/bin/pip install -q 'extrap==4.2.5' 'numpy<2'

# Side-by-side accuracy and speed of our modeler against Extra-P (several minutes).
bench-modeler: $(STAMP) extrap-venv
	$(PY) benchmarks/modeler_vs_extrap.py --seeds 1,11

# Run-file reading against a bare JSON parse of the same lines.
bench-read: $(STAMP)
	$(PY) benchmarks/read_speed.py

# Speedup and efficiency at 4x the ranks: their own PMNF models against the figure from the per-rank time.
bench-derived: $(STAMP)
	$(PY) benchmarks/derived_speedup.py

# Strong-scaling shapes (U shapes, Amdahl, floors, flat series with a slow first run or stragglers)
# at 4x and 16x the measured ranks: the default modeler against plain PMNF.
bench-shapes: $(STAMP)
	$(PY) benchmarks/strong_shapes.py

# Collective communication and data-parallel steps (ring and tree all-reduce, all-gather, weak- and
# strong-scaling steps) at 4x and 16x the measured ranks: default, plain PMNF and --compat extrap.
bench-comm: $(STAMP)
	$(PY) benchmarks/comm_shapes.py

# The 80% range with and without the refits that leave out each repetition pass: coverage, width, fit time.
bench-passes: $(STAMP)
	$(PY) benchmarks/pass_range.py

# Instrumentor speed against a bare libcst round trip, --jobs scaling, no-change re-run.
bench-instrument: $(STAMP)
	$(PY) benchmarks/instrument_speed.py --limit 120 --jobs 1,2

# Probe overhead per region and loop iteration, against nvtx and torch.profiler.record_function.
bench-probes: $(STAMP)
	$(PY) benchmarks/probe_overhead.py

# Added cost per yield/await of an instrumented generator or coroutine, C and pure-Python backends.
bench-suspend: $(STAMP)
	$(PY) benchmarks/suspend_overhead.py --backend both

# Twelve packages' own test suites (benchmarks/peer_suites.py's PEERS), original vs instrumented (downloads sdists).
peer-suites: $(STAMP)
	$(PY) benchmarks/peer_suites.py

clean:
	rm -rf $(VENV) .venv-extrap demo build *.egg-info
