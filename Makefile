# JobWeaver: `make run` starts the dev stack, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.requirements-installed

.PHONY: run test test-unit fuzz lint format docs bench bench-soak bench-latency bench-backlog bench-queues bench-workflows bench-transport bench-hot-paths clean-data

run: $(STAMP)
	infra/run.sh

test: $(STAMP)
	infra/test.sh

# Pure unit tests: no database, no broker, no stack; seconds. A unit test lives in a `unit`
# directory (tests/unit, apps/<app>/tests/unit, kombu_kafka/tests/unit): this path list, not a
# marker, selects them, so a new one is picked up by where it is put. pytest-django refuses any
# database access in them (no django_db marker).
UNIT_TEST_DIRS = $(wildcard tests/unit apps/*/tests/unit kombu_kafka/tests/unit)

test-unit: $(STAMP)
	$(VENV)/bin/pytest -q $(UNIT_TEST_DIRS)

# The schemathesis runs over the API with fresh random examples, 400 per operation by default
# (JOBWEAVER_FUZZ_EXAMPLES); `make test` draws the same 40 each time (conftest.py).
fuzz: $(STAMP)
	JOBWEAVER_HYPOTHESIS_PROFILE=fuzz infra/with-stack.sh $(VENV)/bin/pytest -q \
		apps/jobs/tests/test_schemathesis.py apps/schedules/tests/test_api_schema.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench-latency: $(STAMP)
	$(VENV)/bin/pip install --quiet -r bench/requirements.txt
	infra/with-stack.sh $(VENV)/bin/python bench/submit_latency.py $(ARGS)

# A due backlog draining (bench/backlog.py --help), e.g. make bench-backlog ARGS="--jobs 2000".
# Its progress bar (rich) is a bench-only dependency: bench/requirements.txt, not the product's.
bench-backlog: $(STAMP)
	$(VENV)/bin/pip install --quiet -r bench/requirements.txt
	infra/with-stack.sh $(VENV)/bin/python bench/backlog.py $(ARGS)

# Queues at full size: unserved work, a cap, a flood, weights, a rebalance (bench/queues.py --help).
bench-queues: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/queues.py $(ARGS)

# Workflows at full size: a 1,000-job workflow's acceptance, and fan-ins against the same
# jobs without edges (bench/workflows.py --help).
bench-workflows: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/workflows.py $(ARGS)

# End-to-end throughput against stock Celery (on Kafka, and on Redis), procrastinate and
# pgqueuer, same N, same run, with every system's CPU per job by process and the ratios
# (bench/throughput.py --help), e.g. make bench ARGS="--jobs 5000 --executors 1 --threads 4".
# procrastinate, pgqueuer, Celery's redis client and py-spy live in a bench-only venv
# (.cache/bench-venv, bench/requirements-bench-venv.txt), never in .venv; Debian's redis-server
# is installed if missing (infra/stack.sh bench-tools) and started by the bench on a free port.
BENCH_VENV := .cache/bench-venv
BENCH_STAMP := $(BENCH_VENV)/.requirements-installed

$(BENCH_STAMP): bench/requirements-bench-venv.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet -r bench/requirements-bench-venv.txt
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(VENV)/bin/pip install --quiet -r bench/requirements.txt
	infra/stack.sh bench-tools
	infra/with-stack.sh $(VENV)/bin/python bench/throughput.py $(ARGS)

# Ten minutes at half of peak throughput: RSS of executor and web and p99 per minute
# (bench/soak.py --help).
bench-soak: $(STAMP) $(BENCH_STAMP)
	$(VENV)/bin/pip install --quiet -r bench/requirements.txt
	infra/with-stack.sh $(VENV)/bin/python bench/soak.py $(ARGS)

# The venv is (re)built whenever the lock or the packaging changes: the pinned lock first, then
# JobWeaver itself in editable mode (`import jobweaver` is apps/, ARCHITECTURE §14). kombu_kafka
# is importable from the checkout as it is.
$(STAMP): requirements.txt pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r requirements.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $(STAMP)

clean-data:
	infra/stack.sh down
	rm -rf .devdata

bench-transport: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/transport_bench.py

# CPU per job of the web's batch submit, the executor's and the dispatcher's own code, one
# thread, no Celery loop or gunicorn (bench/hot_paths.py --help): steadier than make bench for
# comparing two commits.
bench-hot-paths: $(STAMP)
	infra/with-stack.sh $(VENV)/bin/python bench/hot_paths.py $(ARGS)

# The documentation site (mkdocs.yml, docs/): the OpenAPI schema generated from the code (no
# database, no broker), then a strict offline build into site/ (open site/index.html). The docs
# tools live in a docs-only venv (.cache/docs-venv, pinned by docs/requirements.txt), never .venv.
DOCS_VENV := .cache/docs-venv
DOCS_STAMP := $(DOCS_VENV)/.requirements-installed

$(DOCS_STAMP): docs/requirements.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet -r docs/requirements.txt
	touch $(DOCS_STAMP)

docs: $(STAMP) $(DOCS_STAMP)
	mkdir -p docs/api
	DJANGO_DEBUG=1 DJANGO_SECRET_KEY=docs-only $(VENV)/bin/python manage.py spectacular \
		--fail-on-warn --file docs/api/openapi.yaml
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict
