#!/usr/bin/env bash
# `make test`: the same infrastructure as `make run`, then lint and the whole pytest suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
infra/stack.sh test-tools
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports
# test-tools installed every external tool: a test may not skip for want of one.
export JOBWEAVER_REQUIRE_TEST_TOOLS=1
# The slowest tests are listed at the end: where to look when the suite's time grows.
exec infra/with-stack.sh .venv/bin/pytest --durations=25 "$@"
