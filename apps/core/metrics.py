"""Prometheus metrics: what happened, counted in the process where it happened.

Counters and histograms live in each process's default registry and move when the event's
transaction commits (`count_on_commit`), so a rolled-back transition is never counted. The web
serves them at /metrics with the cluster-wide gauges computed at scrape time
(apps/scheduler/metrics.py); each worker process serves its own on JOBWEAVER_METRICS_PORT
(`serve`). Prometheus sums the counters over its targets.

Why a port per worker process and not prometheus-client's multiprocess mode: a worker is one
process (the threads and solo pools never fork: librdkafka is not fork-safe), so each container
or pod is one scrape target, exactly what Prometheus' service discovery expects, with live
values and no shared directory. Multiprocess mode exists for servers that fork workers behind
one port; gunicorn is one, so the web (and only the web) uses it (jobweaver_site/gunicorn.conf.py).

A worker's listener is not public (ARCHITECTURE §17): it binds JOBWEAVER_METRICS_BIND
(127.0.0.1 unless a deployment's scraper needs another address) and, like the web's /metrics,
answers only `Authorization: Bearer <JOBWEAVER_METRICS_TOKEN>` (401 otherwise, 404 for every
request while no token is set).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import transaction
from django.utils.crypto import constant_time_compare
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    make_wsgi_app,
    multiprocess,
)
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

# From sub-second dispatch to the seed's 10 s tick and minutes of backlog.
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400)

JOBS_SUBMITTED = Counter(
    "jobweaver_jobs_submitted", "Jobs accepted (API, admin, CLI, Tasks API)", ["job_type"]
)
JOBS_DISPATCHED = Counter("jobweaver_jobs_dispatched", "Deliveries sent to run-job and confirmed")
JOBS_REDELIVERED = Counter(
    "jobweaver_jobs_redelivered",
    "Deliveries sent back to PENDING unstarted (dispatch lease expired or publish failed)",
)
ATTEMPTS = Counter("jobweaver_attempts", "Attempts ended, by outcome", ["outcome"])
JOBS_DEAD_LETTERED = Counter(
    "jobweaver_jobs_dead_lettered", "Jobs FAILED for good (a DeadLetterEvent each)"
)
LEASES_RESCUED = Counter(
    "jobweaver_leases_rescued",
    "Executions moved on by the lease rescue, by the status their lease expired in",
    ["status"],
)
TRANSITIONS = Counter(
    "jobweaver_transitions",
    "State-machine transitions made (apps/engine/transitions.py)",
    ["name"],
)
WORKFLOW_TRANSITIONS = Counter(
    "jobweaver_workflow_transitions",
    "Workflow status moves (§16), as transition:status, e.g. finish:COMPLETED",
    ["name"],
)
DISPATCH_WAIT = Histogram(
    "jobweaver_dispatch_wait_seconds", "From due (next_run_at) to dispatched", buckets=WAIT_BUCKETS
)
START_WAIT = Histogram(
    "jobweaver_start_wait_seconds",
    "From dispatched to running on an executor",
    buckets=WAIT_BUCKETS,
)
WRITE_BATCH = Histogram(
    "jobweaver_executor_write_batch_size",
    "Claims (start), successes (complete), or successes with their start (start_and_complete) "
    "an executor wrote in one statement (group commit)",
    ["kind"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
ATTEMPT_DURATION = Histogram(
    "jobweaver_attempt_duration_seconds",
    "Execution time of attempts ended by their executor, by outcome",
    ["outcome"],
    buckets=DURATION_BUCKETS,
)


def count_on_commit(action: Callable[[], object]) -> None:
    """Run a metric update when the current transaction commits (at once outside one)."""
    transaction.on_commit(action)


def multiprocess_mode() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def exposition(extra: Collector | None = None) -> tuple[bytes, str]:
    """This process's metrics (or all gunicorn workers' in multiprocess mode) plus `extra`, in
    Prometheus' text format, with its content type."""
    if multiprocess_mode():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        if extra is not None:
            registry.register(extra)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    body = generate_latest(REGISTRY)
    if extra is not None:
        registry = CollectorRegistry()
        registry.register(extra)
        body += generate_latest(registry)
    return body, CONTENT_TYPE_LATEST


def bearer_token_app(app, token: str):
    """`app` (WSGI) behind `Authorization: Bearer <token>`, compared in constant time; with no
    token, every request is 404."""

    def guarded(environ, start_response):
        if not token:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"metrics are off: JOBWEAVER_METRICS_TOKEN is not set\n"]
        if not constant_time_compare(environ.get("HTTP_AUTHORIZATION", ""), f"Bearer {token}"):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="metrics"')],
            )
            return [b"metrics need a bearer token\n"]
        return app(environ, start_response)

    return guarded


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # one line per scrape on stderr says nothing
        pass


def serve(port: int, *, bind: str = "127.0.0.1", token: str = "") -> WSGIServer | None:
    """Serve this process's metrics on `bind`:`port` behind the bearer token, from a daemon
    thread; 0 = off. Returns the server (tests shut it down)."""
    if not port:
        return None
    family = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM)[0][0]

    class Server(ThreadingMixIn, WSGIServer):
        address_family = family
        daemon_threads = True

    server = make_server(
        bind, port, bearer_token_app(make_wsgi_app(), token), Server, handler_class=_QuietHandler
    )
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    if token:
        logger.info("metrics on %s:%d/metrics (bearer token)", bind, port)
    else:
        logger.warning(
            "metrics on %s:%d answer 404: set JOBWEAVER_METRICS_TOKEN to scrape them", bind, port
        )
    return server
