#!/usr/bin/env bash
# The dev stack's git-ignored .env (in the current directory): made once, then kept as it is
# but for what it lacks. DEBUG on, and a metrics token of its own: /metrics always needs one
# (ARCHITECTURE §17), random per checkout rather than a well-known string.
set -euo pipefail

[ -f .env ] || printf 'DJANGO_DEBUG=1\n' >.env
if ! grep -q '^JOBWEAVER_METRICS_TOKEN=' .env; then
  # A hand-edited .env may end without a newline.
  [ -z "$(tail -c 1 .env)" ] || printf '\n' >>.env
  printf 'JOBWEAVER_METRICS_TOKEN=%s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >>.env
fi
