PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py $(shell find csrc -name '*.cpp' -o -name '*.h')
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 numpy ninja setuptools wheel
	$(PY) -m pip install -q pytest expecttest safetensors transformers hypothesis
	MAX_JOBS=2 $(PY) -m pip install -q --no-build-isolation -e .
	touch $(STAMP)

demo: install
	$(PY) examples/demo.py

test: install
	$(PY) -m pytest -q tests

bench: install
	$(PY) benchmarks/eager.py

clean:
	rm -rf build $(VENV) torch_neuronx/*.so
