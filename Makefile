# e2egen: the commands users and CI type. `make setup pr` and `make setup test` work on a fresh machine.
VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
E2EGEN  ?= $(VENV)/bin/e2egen
CATALOGUE ?= configs.toml
OUT     ?= build/e2e
# Parallel workers for the generated suite (pytest-xdist); 0 runs in-process.
WORKERS ?= auto
PYTEST_ARGS ?=

.PHONY: setup warm gen pr test pr-avx2 test-avx2 nightly device-check docs clean

# torch goes in first, on its own: installing the project first would let pip
# resolve torch from the registry and pull the multi-GB CUDA build.
setup: $(VENV)/.installed warm
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install "torch==2.13.0"
	$(VENV)/bin/pip install -e ".[dev]"
	touch $@

# numba compiles its kernels into an on-disk cache; compiled here once, no test process (nor each xdist
# worker) pays the ~2 s of a cold cache. The cache's own stamp (runner/numba_cache.py) says whether it is
# current: redone when a kernel's source, numba or the cache directory changed, a few ms when nothing did.
warm: | $(VENV)/.installed
	$(E2EGEN) warm

# Always asks e2egen, which rewrites only the files whose content changed (under a second for configs.toml):
# file times cannot tell that CATALOGUE= names another catalogue than the suite's, older than its manifest.
gen: | $(VENV)/.installed
	$(E2EGEN) gen $(CATALOGUE) --out $(OUT)

pr: gen warm
	$(PYTHON) -m pytest $(OUT) -m pr -n $(WORKERS) -q --e2e-kernel-time first $(PYTEST_ARGS)

test: $(VENV)/.installed
	$(PYTHON) -m pytest tests -n $(WORKERS) -q $(PYTEST_ARGS)

# torch's AVX2 code paths on an AVX-512 machine (runner/kernel_paths.py: ATen's AVX2 kernels, oneDNN off):
# the PR subset, and the tests whose expectations depend on the CPU path (marker cpu_paths).
AVX2 = E2EGEN_EMULATE_CPU=avx2 ATEN_CPU_CAPABILITY=avx2
pr-avx2: gen warm
	$(AVX2) $(PYTHON) -m pytest $(OUT) -m pr -n $(WORKERS) -q --e2e-kernel-time first $(PYTEST_ARGS)

test-avx2: $(VENV)/.installed
	$(AVX2) $(PYTHON) -m pytest tests -m cpu_paths -n $(WORKERS) -q $(PYTEST_ARGS)

nightly: gen
	$(E2EGEN) nightly --catalogue $(CATALOGUE) --out $(OUT) $(NIGHTLY_ARGS)

# On a lent GPU machine: the CUDA-dependent tests, the probes, the PR subset and bench_metrics.py on CUDA,
# each within its time budget, in one command under 10 minutes (benchmarks/device_check.py; --dry-run
# prints the plan anywhere). --suite: gen writes to $(OUT), which a harness's $OUT in the environment sets.
device-check: gen warm
	$(PYTHON) benchmarks/device_check.py --suite $(OUT) --catalogue $(CATALOGUE) $(DEVICE_CHECK_ARGS)

# The documentation site (mkdocs.yml, docs/): the ops table regenerated from the op registry, then a strict build
# (any broken link or missing page fails) into build/site.
docs: | $(VENV)/.installed
	$(PYTHON) -m e2egen.reference_tables --write
	$(VENV)/bin/mkdocs build --strict --site-dir build/site

clean:
	rm -rf build
