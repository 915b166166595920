# Every target creates .venv on first use and installs the project into it.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export DPNET_DATA ?= $(abspath ../shared/data)

.PHONY: setup demo test bench lint docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dpnet demo --out demo-output

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m pip install -q -r benchmarks/requirements.txt
	$(BIN)/python benchmarks/run_all.py

docs: $(STAMP)
	$(BIN)/mkdocs build --strict -d site

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) demo-output .pytest_cache site
