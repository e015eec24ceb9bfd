#!/usr/bin/env bash
# `make test`: the same infrastructure as `make run`, then lint and the whole pytest suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
infra/stack.sh test-tools
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports
exec infra/with-stack.sh .venv/bin/pytest "$@"
