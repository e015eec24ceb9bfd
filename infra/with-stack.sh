#!/usr/bin/env bash
# Run a command with the project-local PostgreSQL and Kafka up; afterwards stop whatever this
# script had to start (a stack that was already running is left running).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(infra/stack.sh up)
cleanup() {
  if [ -n "$started" ]; then
    # shellcheck disable=SC2086
    infra/stack.sh stop $started
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$@"
