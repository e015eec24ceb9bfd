# JobWeaver: `make run` starts the dev stack, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.requirements-installed

.PHONY: run test lint format bench-latency bench-transport clean-data

run: $(STAMP)
	infra/run.sh

test: $(STAMP)
	infra/test.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench-latency: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/submit_latency.py

# The venv is (re)built whenever requirements.txt changes.
$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $(STAMP)

clean-data:
	infra/stack.sh down
	rm -rf .devdata

bench-transport: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/transport_bench.py
