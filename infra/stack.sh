#!/usr/bin/env bash
# The project-local infrastructure: a PostgreSQL cluster and a single-node Kafka broker (KRaft).
#
#   infra/stack.sh up          install what is missing, start what is not running (idempotent);
#                              prints the names of the parts it started (postgres, kafka)
#   infra/stack.sh stop NAME…  stop the named parts (what `up` printed: make run/test use this)
#   infra/stack.sh down        stop both
#   infra/stack.sh status      print what runs
#   infra/stack.sh bench-tools install what `make bench` compares with and does not start
#                              here (Debian's redis-server, for stock Celery on Redis)
#
# Everything lives under .devdata/ (git-ignored) and survives restarts. Ports are chosen so the
# stack never clashes with a system PostgreSQL or Kafka.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${JOBWEAVER_DATA_DIR:-$ROOT/.devdata}
CACHE=$ROOT/.cache
PG_PORT=${JOBWEAVER_PG_PORT:-54329}
KAFKA_PORT=${JOBWEAVER_KAFKA_PORT:-19092}
CONTROLLER_PORT=${JOBWEAVER_KAFKA_CONTROLLER_PORT:-19093}
PG_DATA=$DATA/postgres
PG_RUN=$DATA/postgres-run
KAFKA_DIR=$DATA/kafka
KAFKA_LIBS=$CACHE/kafka-libs
# Pinned helm for the chart's lint/template tests (infra/stack.sh test-tools).
HELM_VERSION=v3.22.0

log() { printf '[stack] %s\n' "$*" >&2; }

# --- PostgreSQL --------------------------------------------------------------------------------

pg_bindir() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  done
  command -v pg_ctl >/dev/null 2>&1 && { dirname "$(command -v pg_ctl)"; return 0; }
  return 1
}

APT_UPDATED=
apt_install() {
  # Debian packages, as root only; `apt-get update` once per run.
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing Debian package(s) $*; install them (needs root)"
    return 1
  fi
  log "installing Debian package(s): $*"
  [ -n "$APT_UPDATED" ] || { apt-get update -qq >&2; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

ensure_postgres_installed() {
  pg_bindir >/dev/null && return 0
  apt_install postgresql || exit 1
}

# initdb and postgres refuse to run as root: as root we run them as the 'postgres' user.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_running() {
  [ -f "$PG_DATA/postmaster.pid" ] && as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

start_postgres() {
  ensure_postgres_installed
  local bin
  bin=$(pg_bindir)
  mkdir -p "$DATA"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    log "creating PostgreSQL cluster in $PG_DATA"
    mkdir -p "$PG_DATA" "$PG_RUN"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_DATA" "$PG_RUN"
    chmod 700 "$PG_DATA"
    # trust on loopback only: a project-local development cluster, never exposed.
    as_pg "$bin/initdb" -D "$PG_DATA" -U jobweaver --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  mkdir -p "$PG_RUN"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_RUN"
  if pg_running; then
    log "PostgreSQL already running on 127.0.0.1:$PG_PORT"
    return 1
  fi
  log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  # autovacuum_naptime: the queue tables churn (every transition is a new row version); with
  # the default minute between autovacuum rounds, dead index entries piled up and each scan of
  # a status index read hundreds of them (README, "PostgreSQL for a queue").
  # JOBWEAVER_PG_OPTIONS adds server options, e.g. for profiling:
  # "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on".
  as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w -t 60 \
    -o "-p $PG_PORT -k $PG_RUN -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c autovacuum_naptime=5s ${JOBWEAVER_PG_OPTIONS:-}" \
    start >/dev/null
  as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U jobweaver -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='jobweaver'" | grep -q 1 ||
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U jobweaver jobweaver
  return 0
}

stop_postgres() {
  pg_running || return 0
  log "stopping PostgreSQL"
  as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null
}

# --- Kafka -------------------------------------------------------------------------------------

kafka_pid() {
  [ -f "$KAFKA_DIR/kafka.pid" ] || return 1
  local pid
  pid=$(cat "$KAFKA_DIR/kafka.pid")
  kill -0 "$pid" 2>/dev/null && { echo "$pid"; return 0; }
  return 1
}

ensure_kafka_jars() {
  if [ -f "$KAFKA_LIBS/.resolved" ] && [ "$KAFKA_LIBS/.resolved" -nt "$ROOT/infra/kafka/pom.xml" ]; then
    return 0
  fi
  log "resolving Apache Kafka jars with Maven (infra/kafka/pom.xml)"
  rm -rf "$KAFKA_LIBS"
  mvn -q -B -Dstyle.color=never -f "$ROOT/infra/kafka/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$KAFKA_LIBS" -DincludeScope=runtime >&2
  touch "$KAFKA_LIBS/.resolved"
}

kafka_java() {
  # Heap kept small: this is a single-node dev/test broker on a 2-core machine.
  java -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dkafka.logs.dir="$KAFKA_DIR/logs" \
    -Dlog4j2.configurationFile="$ROOT/infra/kafka/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" "$@"
}

kafka_ready() {
  (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null
}

start_kafka() {
  ensure_kafka_jars
  mkdir -p "$KAFKA_DIR/logs"
  if kafka_pid >/dev/null; then
    log "Kafka already running on 127.0.0.1:$KAFKA_PORT"
    return 1
  fi
  sed -e "s#@KAFKA_PORT@#$KAFKA_PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
    -e "s#@DATA_DIR@#$KAFKA_DIR#g" "$ROOT/infra/kafka/server.properties.in" >"$KAFKA_DIR/server.properties"
  if [ ! -f "$KAFKA_DIR/data/meta.properties" ]; then
    log "formatting Kafka storage in $KAFKA_DIR/data"
    local cluster_id
    cluster_id=$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_DIR/server.properties" \
      --standalone --ignore-formatted >/dev/null
  fi
  log "starting Kafka (KRaft) on 127.0.0.1:$KAFKA_PORT"
  nohup bash -c "$(declare -f kafka_java); KAFKA_DIR='$KAFKA_DIR' ROOT='$ROOT' KAFKA_LIBS='$KAFKA_LIBS' \
    kafka_java -Xlog:gc:file='$KAFKA_DIR/logs/gc.log':time,uptime:filecount=2,filesize=10m \
    kafka.Kafka '$KAFKA_DIR/server.properties'" >"$KAFKA_DIR/logs/stdout.log" 2>&1 &
  echo $! >"$KAFKA_DIR/kafka.pid"
  local deadline=$((SECONDS + 90))
  until kafka_ready; do
    if ! kafka_pid >/dev/null; then
      log "Kafka exited; last lines of its log:"
      tail -n 20 "$KAFKA_DIR/logs/stdout.log" >&2
      exit 1
    fi
    [ $SECONDS -lt $deadline ] || { log "Kafka did not open its port within 90 s"; exit 1; }
    sleep 0.2
  done
  return 0
}

stop_kafka() {
  local pid
  pid=$(kafka_pid) || return 0
  log "stopping Kafka"
  # The pid is that of the bash wrapper's java child or the wrapper itself; stop the java.
  pkill -TERM -P "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$KAFKA_DIR/kafka.pid"
}

# --- commands ----------------------------------------------------------------------------------

case "${1:-}" in
  up)
    mkdir -p "$DATA"
    if start_postgres; then echo postgres; fi
    if start_kafka; then echo kafka; fi
    ;;
  down)
    stop_kafka
    stop_postgres
    ;;
  stop)
    shift
    for part in "$@"; do
      case "$part" in
        kafka) stop_kafka ;;
        postgres) stop_postgres ;;
      esac
    done
    ;;
  restart-kafka)
    stop_kafka
    start_kafka || true
    ;;
  restart-postgres)
    stop_postgres
    start_postgres || true
    ;;
  test-tools)
    # Debian's docker-compose validates compose.yaml without a Docker engine (tests/test_compose.py).
    command -v docker-compose >/dev/null || apt_install docker-compose || true
    # Headless Chromium and its driver for the admin cockpit's browser tests (selenium).
    [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] \
      || apt_install chromium chromium-driver || true
    # helm for `helm lint`/`helm template` of deploy/helm/jobweaver (tests/test_helm.py): built
    # once from the Go module proxy into .cache/bin (about 80 s on a fresh machine).
    # (A stamp file, since a `go install`ed helm does not report its full version.)
    if [ ! -x "$CACHE/bin/helm" ] || [ "$(cat "$CACHE/bin/helm.version" 2>/dev/null)" != "$HELM_VERSION" ]; then
      if command -v go >/dev/null; then
        log "building helm $HELM_VERSION into $CACHE/bin"
        GOBIN=$CACHE/bin GOPATH=$CACHE/go GOFLAGS=-modcacherw go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
        echo "$HELM_VERSION" > "$CACHE/bin/helm.version"
      else
        log "go is missing: tests/test_helm.py will be skipped (install Go 1.24+)"
      fi
    fi
    # kombu's Kafka integration suite, from the pinned sdist into .cache/ (test_kombu_suite.py).
    (cd "$ROOT" && .venv/bin/python -m tests.kombu_suite >/dev/null)
    ;;
  bench-tools)
    # The bench starts its own redis-server on a free port (bench/throughput.py); only the
    # package is needed here.
    command -v redis-server >/dev/null || apt_install redis-server
    ;;
  status)
    pg_running && echo "postgres: running on 127.0.0.1:$PG_PORT" || echo "postgres: stopped"
    kafka_pid >/dev/null && echo "kafka: running on 127.0.0.1:$KAFKA_PORT" || echo "kafka: stopped"
    ;;
  *)
    echo "usage: $0 up|down|status|stop NAME...|restart-kafka|restart-postgres|test-tools|bench-tools" >&2
    exit 2
    ;;
esac
