PYTHON ?= python3
# The one place torch is pinned; pyproject.toml states the supported range. Each supported
# version has its own venv: 2.14.1 (the default, as TorchNeuron's public beta) in .venv, 2.13.0
# in .venv-2.13 (`make test TORCH_VERSION=2.13.0`).
TORCH_VERSION ?= 2.14.1
ifeq ($(TORCH_VERSION),2.14.1)
VENV := .venv
# torchvision's wheels are built for one torch; PyPI's 0.28 does not import beside 2.13.0+cpu.
# TorchTitan 0.3.0 needs torch 2.14 (torch.distributed.set_timeout).
EXTRA_PACKAGES := torchvision==0.29.1 torchtitan==0.3.0
else
VENV := .venv-$(basename $(TORCH_VERSION))
EXTRA_PACKAGES :=
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Every package a lane installs, at the version CI tests: pip takes the lane's file as
# constraints (-c), so a new release of transformers, hypothesis, ... changes nothing until
# the pins move. To move them: `$(PY) -m pip install -U -c /dev/null NAME` (or delete the
# line and `make install`), run the tests, then `make constraints` rewrites the file from the
# venv; commit it.
CONSTRAINTS := constraints/torch-$(TORCH_VERSION).txt
JOBS := $(shell nproc)
# Building imports torch, which would load the half-built backend of an earlier install.
BUILD_ENV := TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=$(JOBS)
CSRC := $(shell find csrc -name '*.cpp' -o -name '*.h')
# Each torch has its own build of the extension (setup.py's build directory); a torch_neuronx.pkg
# file in the venv's site-packages names it, and torch_neuronx adds it to its __path__
# (pkgutil.extend_path). So both venvs work from one checkout at the same time.
LANE_BUILD := build/torch-$(TORCH_VERSION)
EXTENSION := $(LANE_BUILD)/.built
WHEEL_CHECK := build/wheel-check

.PHONY: install demo test fuzz bench lint wheel-check nkilib-check constraints clean \
	install-vllm test-vllm

install: $(EXTENSION)

# The distribution was called torchneuron before it took TorchNeuron's name (torch-neuronx,
# docs/package.md): an old install of it is removed first, with the metadata an in-tree build
# left in the checkout (on sys.path when tests run from the checkout).
$(STAMP): pyproject.toml setup.py $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) torch==$(TORCH_VERSION) $(EXTRA_PACKAGES) ninja setuptools wheel
	$(PY) -m pip uninstall -q -y torchneuron
	rm -rf torchneuron.egg-info
	$(BUILD_ENV) TORCH_NEURONX_BUILD_EXTENSION=0 $(PY) -m pip install -q -c $(CONSTRAINTS) --no-build-isolation -e '.[test,lint]'
	touch $(STAMP)

# Compiles what changed (ninja) and relinks.
$(EXTENSION): $(STAMP) $(CSRC)
	$(BUILD_ENV) $(PY) setup.py -q build_ext --force
	echo $(CURDIR)/$(LANE_BUILD)/lib/torch_neuronx > $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/torch_neuronx.pkg
	touch $@

# The demo through `torchneuron parity`: its loss curves on both devices, compared step by step,
# with a plot (build/demo-parity.png) and a Markdown report.
demo: install
	$(VENV)/bin/torchneuron parity -v --plot build/demo-parity.png --report build/demo-parity.md examples/demo.py

# A worker per core (pytest-xdist), each with its share of the cores' threads (tests/conftest.py);
# a test module stays on one worker, so its module-scoped fixtures are built once.
test: install
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile tests

# Differential fuzzing on fresh random op chains; `make test` runs a bounded derandomized sample.
FUZZ_EXAMPLES ?= 10000
fuzz: install
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/test_fuzz.py

# Every benchmark, then one table of their numbers against their targets (docs/performance.md);
# the other torch lane, if it is installed, measures its per-op overhead too.
OTHER_LANE_PY := $(if $(filter 2.14.1,$(TORCH_VERSION)),.venv-2.13/bin/python,.venv/bin/python)
bench: install
	$(PY) benchmarks/summary.py $(if $(wildcard $(OTHER_LANE_PY)),--lane $(OTHER_LANE_PY))

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/clang-format --dry-run --Werror $$(git ls-files 'csrc/*.cpp' 'csrc/*.h')

# A wheel built from the checkout installs into a fresh venv and runs an op on the device. The
# wheel's files are staged in a build_lib of their own (beside the extension, they would shadow
# this checkout's Python files); the lane's compiled objects are reused, so nothing recompiles.
wheel-check: install
	rm -rf $(WHEEL_CHECK)
	$(BUILD_ENV) TORCH_NEURONX_BUILD_LIB=$(WHEEL_CHECK)/lib $(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_CHECK)/dist .
	$(PYTHON) -m venv $(WHEEL_CHECK)/venv
	$(WHEEL_CHECK)/venv/bin/python -m pip install -q -c $(CONSTRAINTS) torch==$(TORCH_VERSION) $(WHEEL_CHECK)/dist/*.whl
	cd $(WHEEL_CHECK) && venv/bin/python -c "import torch, torch_neuronx; \
		assert torch_neuronx.__file__.startswith('$(CURDIR)/$(WHEEL_CHECK)/venv/'), torch_neuronx.__file__; \
		print(torch.linalg.inv(2 * torch.eye(2, device='neuron')).cpu().tolist(), torch_neuronx.__version__)"

# nki-library's own simulation tests (a checkout you supply, NKILIB=path) against our nki, with
# the stand-ins of tools/nkilib_check for AWS's internal packages; prints the per-module table
# (nki/README.md).  NKILIB_ARGS passes e.g. --modules core/attention --platforms trn2.
NKILIB_STAMP := $(VENV)/.nkilib-check-installed
$(NKILIB_STAMP): $(STAMP)
	$(BUILD_ENV) TORCH_NEURONX_BUILD_EXTENSION=0 $(PY) -m pip install -q --no-build-isolation -e '.[test,lint,nkilib-check]'
	touch $@

nkilib-check: install $(NKILIB_STAMP)
	@test -n "$(NKILIB)" || { echo "usage: make nkilib-check NKILIB=/path/to/nki-library [NKILIB_ARGS=...]"; exit 2; }
	nice -n 10 $(PY) tools/nkilib_check/run.py $(NKILIB) --out build/nkilib-check $(NKILIB_ARGS)

# Serving (docs/serving.md): vLLM's CPU build pins torch 2.13.0, so vLLM has a venv of its own,
# every package pinned in requirements/vllm.txt and installed without a resolver (--no-deps). It
# uses the 2.13 lane's build of the extension (the same torch wheel, so the same ABI): built by
# that lane, once, and never again here (a build from this venv would change ninja's commands,
# its include paths, and rebuild every object).
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_BUILD := build/torch-2.13.0

$(VLLM_STAMP): pyproject.toml setup.py requirements/vllm.txt
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --no-deps -r requirements/vllm.txt
	$(BUILD_ENV) TORCH_NEURONX_BUILD_EXTENSION=0 $(VLLM_PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(VLLM_STAMP)

$(VLLM_VENV)/.built: $(VLLM_STAMP) $(CSRC)
	$(MAKE) install TORCH_VERSION=2.13.0
	echo $(CURDIR)/$(VLLM_BUILD)/lib/torch_neuronx > $$($(VLLM_PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/torch_neuronx.pkg
	touch $@

install-vllm: $(VLLM_VENV)/.built

test-vllm: install-vllm
	$(VLLM_PY) -m pytest -q tests/vllm

# The lane's installed versions (less this project) as its constraints file.
constraints:
	(sed -n '/^#/p' $(CONSTRAINTS); $(PY) -m pip freeze --exclude-editable) > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

clean:
	rm -rf build .venv .venv-2.13 .venv-vllm torch_neuronx/*.so
