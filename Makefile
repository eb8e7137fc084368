# Two commands for a new user: `make demo` and `make test`. Everything else is set up here.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
EXTRAS ?= dev,progress,ray,io
# TorchRL, the main client of tensordict.nn, tested in tests/clients/. It declares tensordict<0.15,
# so it is installed without its dependencies (they would replace this package and torch); its
# pure-python requirements are pinned next to it, the others (numpy, packaging, cloudpickle) come
# with the test extra.
TORCHRL ?= torchrl==0.14.1 pyvers==0.2.3 hoptorch==0.1.4
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# where `make demo` keeps its dataset (python -m tensordict.demo --dir; about 2x --size)
DEMO_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tensordict-demo

.PHONY: setup demo test lint format docs dist bench stress torchrl-parity bytecode clean

setup: $(STAMP)

# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]" "$(TORCH)"
	$(PY) -m pip install -q --no-deps $(TORCHRL)
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tensordict.demo $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks examples docs
	$(PY) -m ruff format --check src tests benchmarks examples docs
	$(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff check --fix src tests benchmarks examples docs
	$(PY) -m ruff format src tests benchmarks examples docs

# the suite builds the docs too (tests/docs: warnings as errors, internal links, the guides'
# code) and checks the typing samples with mypy and basedpyright (tests/typing)
test: lint bytecode
	$(PY) -m pytest -q

# the package's bytecode, compiled once as a wheel install does: the suite, the benchmarks and
# TorchRL's collectors start many fresh interpreters, and where PYTHONDONTWRITEBYTECODE is set
# each one would otherwise compile every module from source (~0.25 s of CPU a process)
bytecode: $(STAMP)
	$(PY) -m compileall -q src

# the docs site, warnings as errors (open docs/_build/html/index.html)
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -n -q -j auto -b html docs docs/_build/html

# a wheel and an sdist in dist/, checked as the package index would
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

# fault-injection loops with the full counts quoted in the issues (slow)
stress: bytecode
	TENSORDICT_STRESS=1 $(PY) -m pytest -q -m stress tests

bench: bytecode
	$(PY) -m benchmarks.run $(ARGS)

# TorchRL's own tests side by side with upstream tensordict (a second venv, created once under
# ~/.cache/td-upstream-torchrl-venv): make torchrl-parity ARGS="test_collectors.py -k Sync".
# Its test files import scipy and pytest-mock at module level: installed here, not by setup.
TORCHRL_TESTS_DEPS ?= scipy==1.17.1 pytest-mock==3.17.0 pyyaml
torchrl-parity: bytecode
	$(PY) -m pip install -q $(TORCHRL_TESTS_DEPS)
	$(PY) -m benchmarks.torchrl_parity $(ARGS)

# the virtual environment, build outputs and the demo's dataset
clean:
	rm -rf $(VENV) build dist src/*.egg-info docs/_build "$(DEMO_DIR)"
