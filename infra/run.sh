#!/usr/bin/env bash
# `make run`: the whole dev stack in the foreground. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

if (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null; then
  echo "[run] something already listens on 127.0.0.1:8000 (another 'make run'?); stop it first." >&2
  exit 1
fi

# The dev stack runs with DEBUG on and a dev-only secret key; real deployments set env vars.
# Settings read only the environment, never a file: this script exports the dev stack's .env
# (and honcho passes it to the Procfile's processes). It holds the dev metrics token too.
infra/dev-env.sh
set -a
# shellcheck disable=SC1091
. ./.env
set +a

started=$(infra/stack.sh up)
cleanup() {
  if [ -n "$started" ]; then
    # shellcheck disable=SC2086
    infra/stack.sh stop $started
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PY=.venv/bin/python
$PY manage.py migrate --noinput -v 0
$PY manage.py setup_kafka
$PY manage.py setup_beat_schedule
$PY manage.py ensure_demo_admin

cat <<MSG

  JobWeaver is starting:
    admin  http://127.0.0.1:8000/admin/   login: admin / admin
    API    http://127.0.0.1:8000/api/jobs (token: printed above; more: manage.py create_api_token admin --name N)
    metrics curl -H "Authorization: Bearer \$JOBWEAVER_METRICS_TOKEN" http://127.0.0.1:8000/metrics (token in .env)
  Ctrl-C stops everything.

MSG
.venv/bin/honcho start -f Procfile || true
