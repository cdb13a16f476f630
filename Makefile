PYTHON ?= python3
# The one place the torch version is pinned; pyproject.toml states the supported range.
TORCH_VERSION ?= 2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS := $(shell nproc)
# Building imports torch, which would load the half-built backend of an earlier install.
BUILD_ENV := TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=$(JOBS)
WHEEL_CHECK := build/wheel-check

.PHONY: install demo test fuzz bench lint wheel-check clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py $(shell find csrc -name '*.cpp' -o -name '*.h')
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==$(TORCH_VERSION) ninja setuptools wheel
	$(BUILD_ENV) $(PY) -m pip install -q --no-build-isolation -e '.[test,lint]'
	touch $(STAMP)

demo: install
	$(PY) examples/demo.py

test: install
	$(PY) -m pytest -q tests

# Differential fuzzing on fresh random op chains; `make test` runs a bounded derandomized sample.
FUZZ_EXAMPLES ?= 10000
fuzz: install
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/test_fuzz.py

bench: install
	$(PY) benchmarks/eager.py

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/clang-format --dry-run --Werror $$(git ls-files 'csrc/*.cpp' 'csrc/*.h')

# A wheel built from this tree installs into a fresh venv and runs an op on the device.
wheel-check: install
	rm -rf $(WHEEL_CHECK)
	$(BUILD_ENV) $(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_CHECK)/dist .
	$(PYTHON) -m venv $(WHEEL_CHECK)/venv
	$(WHEEL_CHECK)/venv/bin/python -m pip install -q torch==$(TORCH_VERSION) $(WHEEL_CHECK)/dist/*.whl
	cd $(WHEEL_CHECK) && venv/bin/python -c "import torch, torch_neuronx; \
		assert torch_neuronx.__file__.startswith('$(CURDIR)/$(WHEEL_CHECK)/venv/'), torch_neuronx.__file__; \
		print(torch.linalg.inv(2 * torch.eye(2, device='neuron')).cpu().tolist(), torch_neuronx.__version__)"

clean:
	rm -rf build $(VENV) torch_neuronx/*.so
