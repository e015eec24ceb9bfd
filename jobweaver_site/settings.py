"""JobWeaver settings: every knob is an environment variable (ARCHITECTURE §10).

Defaults serve the dev stack started by `make run` (PostgreSQL on 127.0.0.1:54329, Kafka on
127.0.0.1:19092). Production must set DJANGO_SECRET_KEY; without it and without DJANGO_DEBUG the
process refuses to start.
"""

from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

import jobweaver

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# Only the real environment counts. The dev stack's scripts (infra/run.sh, infra/with-stack.sh)
# export their git-ignored .env themselves: a stray .env in a working directory must never
# switch DEBUG on in a real deployment.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me"
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=_DEV_SECRET if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off (the dev stack's are in .env: "
        "set -a && . ./.env && set +a)"
    )
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # JobWeaver's apps and what they need (DRF, the schema's sidecar files, django-celery-beat,
    # the Tasks API backport on Django 5.2), as a host project lists them (ARCHITECTURE §14).
    *jobweaver.INSTALLED_APPS,
    # The example tasks of the quick start and the tests (not part of the library).
    "jobweaver_site.examples",
    # Admin login throttling and the Content-Security-Policy (below): the site's choices, not
    # the library's (§14, §17).
    "axes",
    "csp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response, with a per-request nonce (below).
    "csp.middleware.CSPMiddleware",
    # The request's X-Trace-Id in the context of its log lines (apps/core/logcontext.py).
    "jobweaver.core.logcontext.TraceContextMiddleware",
    # Static files (the admin's) from the web process itself, in the dev stack and in compose.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Refuses oversized API bodies (413) before the session, CSRF or any parser reads them.
    "jobweaver.jobs.api.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # An admin page whose statement met the lock or statement timeout: a page saying nothing
    # was changed, not a 500 (apps/dashboard/middleware.py).
    "jobweaver.dashboard.middleware.DatabaseGaveUpMiddleware",
    # Turns a locked-out login into its 429 page; last, as django-axes asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "jobweaver_site.urls"
WSGI_APPLICATION = "jobweaver_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default="postgres://jobweaver@127.0.0.1:54329/jobweaver"),
}
# Connections are kept per thread (gunicorn's threads, Celery's threads) and checked before use,
# for an hour (PgBouncer's server_lifetime): a connection reopened loses what the warm-up and
# its earlier runs prepared and planned, and a stack left idle for longer than this met its
# next jobs as it met its first after a start (bench/NOTES.md).
DATABASES["default"]["CONN_MAX_AGE"] = env.float("JOBWEAVER_DB_CONN_MAX_AGE_SECONDS", default=3600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Bounded waits (ARCHITECTURE §4a): no session waits on a lock, runs a statement or sits idle
# inside a transaction for longer than these, so a frozen process cannot pin a row.
JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS = env.float("JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS", default=10)
JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS = env.float(
    "JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS", default=60
)
JOBWEAVER_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS = env.float(
    "JOBWEAVER_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", default=60
)
DATABASES["default"].setdefault("OPTIONS", {})["options"] = " ".join(
    f"-c {name}={round(seconds * 1000)}"
    for name, seconds in (
        ("lock_timeout", JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS),
        ("statement_timeout", JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS),
        ("idle_in_transaction_session_timeout", JOBWEAVER_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS),
    )
)
# No JIT compilation: every statement here is short, and PostgreSQL compiles a plan whose
# estimated cost passes jit_above_cost on every execution (it caches no machine code). The
# dispatch claim's estimate passed it once statistics saw a set-aside flood (a recursive CTE is
# guessed at a hundred rows), and compiling then took far longer than the claim, every
# dispatch (bench/NOTES.md).
DATABASES["default"]["OPTIONS"]["options"] += " -c jit=off"
# A server that does not answer is an error after this long, not a hang (libpq waits forever).
DATABASES["default"]["OPTIONS"].setdefault(
    "connect_timeout", env.int("JOBWEAVER_DB_CONNECT_TIMEOUT_SECONDS", default=5)
)
# Server-side parameter binding with prepared statements: a statement run a second time on a
# connection is prepared, and PostgreSQL stops parsing it anew (and planning it, once its plan
# is generic): our statements are short, and planning them cost as much as running them. At
# psycopg's default of 5 runs, a web process's threads each planned an idle stack's first few
# dozen submits in full (bench/NOTES.md). Turn it off behind a pooler in transaction mode that
# does not track prepared statements (PgBouncer before 1.21).
JOBWEAVER_DB_PREPARED_STATEMENTS = env.bool("JOBWEAVER_DB_PREPARED_STATEMENTS", default=True)
if JOBWEAVER_DB_PREPARED_STATEMENTS:
    DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
    # Not 0 (prepare at the first run): a text of several statements (a migration's) cannot be
    # prepared, and one run of it is fine.
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 1
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env.int("JOBWEAVER_PASSWORD_MIN_LENGTH", default=12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Admin logins: throttled per (username, IP) with a cool-off (ARCHITECTURE §17) --------------
# django-axes counts failed logins; after JOBWEAVER_LOGIN_FAILURE_LIMIT of them the same
# username from the same address is refused (429, even with the right password) until
# JOBWEAVER_LOGIN_COOLOFF_SECONDS passed since the last failure; another address, or another
# username, still logs in. A success clears the count. The address is REMOTE_ADDR: behind a
# proxy that is the proxy's, so the lockout becomes per username (docs/operations/security.md).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login before checking
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env.bool("JOBWEAVER_LOGIN_THROTTLE", default=True)
AXES_FAILURE_LIMIT = env.int("JOBWEAVER_LOGIN_FAILURE_LIMIT", default=5)
_login_cooloff_seconds = env.float("JOBWEAVER_LOGIN_COOLOFF_SECONDS", default=900)
AXES_COOLOFF_TIME = timedelta(seconds=_login_cooloff_seconds)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no "AXES: BEGIN" line at every process start; lockouts still log
if AXES_FAILURE_LIMIT < 1 or _login_cooloff_seconds <= 0:
    raise ImproperlyConfigured(
        "JOBWEAVER_LOGIN_FAILURE_LIMIT must be at least 1 and JOBWEAVER_LOGIN_COOLOFF_SECONDS "
        "more than 0"
    )

# --- Content-Security-Policy (ARCHITECTURE §17), by django-csp ---------------------------------
# Scripts only from this origin, or inline with this response's nonce (`nonce="{{
# request.csp_nonce }}"`): never an injected <script> or an inline event handler. Styles also
# inline: the admin's own JavaScript and Swagger UI set style attributes, and a style cannot run
# code. No plugins, no framing (X-Frame-Options says DENY too), forms post to this origin only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # `Authorization: Token <key>` against hashed, named, revocable tokens (apps/accounts).
        "jobweaver.accounts.authentication.ApiTokenAuthentication",
        # The admin's session; DRF enforces CSRF on it for unsafe methods.
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "jobweaver.jobs.api.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "JobWeaver API",
    "DESCRIPTION": "Submit, follow, retry and cancel jobs (ARCHITECTURE §8). Every failure "
    'answers {"timestamp", "status", "errorCode", "message", "jobId"}.',
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The value lists the schemas' status fields use (labels are the values).
    "ENUM_NAME_OVERRIDES": {
        "JobStatus": "jobweaver.jobs.api.schema.STATUSES",
        "WorkflowStatus": "jobweaver.workflows.api.schema.STATUSES",
    },
}

# --- Kafka ------------------------------------------------------------------------------------
JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = env.str("KAFKA_BOOTSTRAP_SERVERS", default="127.0.0.1:19092")
JOBWEAVER_KAFKA_TOPIC_PREFIX = env.str("JOBWEAVER_KAFKA_TOPIC_PREFIX", default="")
JOBWEAVER_RUN_JOB_PARTITIONS = env.int("JOBWEAVER_RUN_JOB_PARTITIONS", default=12)
# Replicas of each topic the project creates (setup_kafka, the transport): 3 on a real cluster
# (with the broker's min.insync.replicas=2), 1 on a single broker.
JOBWEAVER_KAFKA_REPLICATION_FACTOR = env.int("JOBWEAVER_KAFKA_REPLICATION_FACTOR", default=1)
# TLS and SASL for every Kafka client (transport, events, probes, metrics): librdkafka settings,
# set only when given. E.g. Strimzi's TLS listener with SCRAM: SASL_SSL, SCRAM-SHA-512, a user
# and password, and the cluster CA file mounted from its Secret.
JOBWEAVER_KAFKA_CLIENT_CONFIG = {
    name: value
    for name, value in (
        ("security.protocol", env.str("JOBWEAVER_KAFKA_SECURITY_PROTOCOL", default="")),
        ("sasl.mechanism", env.str("JOBWEAVER_KAFKA_SASL_MECHANISM", default="")),
        ("sasl.username", env.str("JOBWEAVER_KAFKA_SASL_USERNAME", default="")),
        ("sasl.password", env.str("JOBWEAVER_KAFKA_SASL_PASSWORD", default="")),
        ("ssl.ca.location", env.str("JOBWEAVER_KAFKA_SSL_CA_LOCATION", default="")),
    )
    if value
}

# --- Scheduling, retries, leases (seconds may be fractional so tests can shrink time) ----------
JOBWEAVER_DISPATCH_INTERVAL_SECONDS = env.float("JOBWEAVER_DISPATCH_INTERVAL_SECONDS", default=10)
JOBWEAVER_DISPATCH_BATCH_SIZE = env.int("JOBWEAVER_DISPATCH_BATCH_SIZE", default=50)
# Flow control (ARCHITECTURE §4a): at most live slots x this many deliveries in flight; an
# executor whose jobs are short asks for up to the _MAX a slot (apps/executor/window.py).
JOBWEAVER_DISPATCH_PREFETCH = env.int("JOBWEAVER_DISPATCH_PREFETCH", default=2)
JOBWEAVER_DISPATCH_PREFETCH_MAX = env.int("JOBWEAVER_DISPATCH_PREFETCH_MAX", default=16)
# Executors renew their registration this often; one silent for the TTL is not live.
JOBWEAVER_WORKER_HEARTBEAT_SECONDS = env.float("JOBWEAVER_WORKER_HEARTBEAT_SECONDS", default=5)
JOBWEAVER_WORKER_TTL_SECONDS = env.float("JOBWEAVER_WORKER_TTL_SECONDS", default=15)
JOBWEAVER_BACKOFF_BASE_SECONDS = env.float("JOBWEAVER_BACKOFF_BASE_SECONDS", default=5)
JOBWEAVER_BACKOFF_CAP_SECONDS = env.float("JOBWEAVER_BACKOFF_CAP_SECONDS", default=300)
JOBWEAVER_BACKOFF_JITTER = env.float("JOBWEAVER_BACKOFF_JITTER", default=0.1)
JOBWEAVER_BACKOFF_SCALE = env.float("JOBWEAVER_BACKOFF_SCALE", default=1.0)
JOBWEAVER_MAX_SNOOZES = env.int("JOBWEAVER_MAX_SNOOZES", default=100)
JOBWEAVER_LEASE_SECONDS = env.float("JOBWEAVER_LEASE_SECONDS", default=30)
JOBWEAVER_DISPATCH_TIMEOUT_SECONDS = env.float("JOBWEAVER_DISPATCH_TIMEOUT_SECONDS", default=300)
# How often beat looks for DISPATCHED/RUNNING executions whose lease expired (lost workers).
JOBWEAVER_RESCUE_INTERVAL_SECONDS = env.float("JOBWEAVER_RESCUE_INTERVAL_SECONDS", default=10)
JOBWEAVER_OUTBOX_RELAY_INTERVAL_SECONDS = env.float(
    "JOBWEAVER_OUTBOX_RELAY_INTERVAL_SECONDS", default=5
)
# Retention (apps/scheduler/retention.py): finished jobs (with their execution, attempts and
# events) and published outbox rows older than this many days are pruned; 0 keeps them forever.
JOBWEAVER_RETAIN_COMPLETED_DAYS = env.float("JOBWEAVER_RETAIN_COMPLETED_DAYS", default=7)
JOBWEAVER_RETAIN_FAILED_DAYS = env.float("JOBWEAVER_RETAIN_FAILED_DAYS", default=30)
JOBWEAVER_RETAIN_CANCELLED_DAYS = env.float("JOBWEAVER_RETAIN_CANCELLED_DAYS", default=30)
JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS = env.float(
    "JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS", default=1
)
# The relay deletes an event's outbox row once Kafka confirmed it; on: kept, marked published.
JOBWEAVER_OUTBOX_KEEP_PUBLISHED = env.bool("JOBWEAVER_OUTBOX_KEEP_PUBLISHED", default=False)
JOBWEAVER_PRUNE_INTERVAL_SECONDS = env.float("JOBWEAVER_PRUNE_INTERVAL_SECONDS", default=300)
JOBWEAVER_PRUNE_BATCH_SIZE = env.int("JOBWEAVER_PRUNE_BATCH_SIZE", default=1000)
# Recurring jobs (apps/schedules): beat fires due schedules this often; a slot more than the
# grace late is missed and follows its schedule's misfire policy (SKIP or CATCH_UP_ONCE).
JOBWEAVER_SCHEDULES_INTERVAL_SECONDS = env.float("JOBWEAVER_SCHEDULES_INTERVAL_SECONDS", default=1)
JOBWEAVER_SCHEDULES_MISFIRE_GRACE_SECONDS = env.float(
    "JOBWEAVER_SCHEDULES_MISFIRE_GRACE_SECONDS", default=60
)
# A schedule (API, admin, CLI) fires at most this often: an interval at least this long, a
# cron's closest slots at least this far apart (§17).
JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS = env.float(
    "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS", default=60
)
# Schedules a user may own (operators, holders of jobs.operate_all_jobs, are exempt); 0: no limit.
JOBWEAVER_MAX_SCHEDULES_PER_USER = env.int("JOBWEAVER_MAX_SCHEDULES_PER_USER", default=100)

# --- Submission limits (ARCHITECTURE §7) ------------------------------------------------------
JOBWEAVER_MAX_STEPS = env.int("JOBWEAVER_MAX_STEPS", default=100)
JOBWEAVER_MAX_REQUEST_BYTES = env.int("JOBWEAVER_MAX_REQUEST_BYTES", default=64 * 1024)
JOBWEAVER_MAX_RETRY_COUNT = env.int("JOBWEAVER_MAX_RETRY_COUNT", default=25)
JOBWEAVER_MAX_TIMEOUT_SECONDS = env.int("JOBWEAVER_MAX_TIMEOUT_SECONDS", default=86400)
JOBWEAVER_DEFAULT_MAX_RETRY_COUNT = env.int("JOBWEAVER_DEFAULT_MAX_RETRY_COUNT", default=3)
JOBWEAVER_DEFAULT_TIMEOUT_SECONDS = env.int("JOBWEAVER_DEFAULT_TIMEOUT_SECONDS", default=300)
JOBWEAVER_API_MAX_PAGE_SIZE = env.int("JOBWEAVER_API_MAX_PAGE_SIZE", default=100)
# POST /api/jobs/batch: at most this many jobs, in a body of at most this many bytes.
JOBWEAVER_MAX_BATCH_JOBS = env.int("JOBWEAVER_MAX_BATCH_JOBS", default=1000)
JOBWEAVER_MAX_BATCH_REQUEST_BYTES = env.int(
    "JOBWEAVER_MAX_BATCH_REQUEST_BYTES", default=2 * 1024 * 1024
)
# Django refuses bodies larger than this before our own check; keep it above the API limits.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(
    JOBWEAVER_MAX_REQUEST_BYTES * 2, JOBWEAVER_MAX_BATCH_REQUEST_BYTES * 2, 2_621_440
)
# Strings may not hold control characters or lone surrogates; JSON may nest this deep at most.
JOBWEAVER_MAX_JSON_DEPTH = env.int("JOBWEAVER_MAX_JSON_DEPTH", default=32)
# runAt at most this far ahead; SLEEP + HTTP_CALL time of one job's steps at most this long.
JOBWEAVER_MAX_RUN_AT_DAYS = env.float("JOBWEAVER_MAX_RUN_AT_DAYS", default=3650)
JOBWEAVER_MAX_COMPUTE_ITERATIONS_PER_JOB = env.int(
    "JOBWEAVER_MAX_COMPUTE_ITERATIONS_PER_JOB", default=100_000_000
)
JOBWEAVER_MAX_TASK_TIMEOUT_SECONDS = env.int("JOBWEAVER_MAX_TASK_TIMEOUT_SECONDS", default=3600)
JOBWEAVER_MAX_SIMULATED_SECONDS_PER_JOB = env.float(
    "JOBWEAVER_MAX_SIMULATED_SECONDS_PER_JOB", default=3600
)
JOBWEAVER_MAX_IDEMPOTENCY_KEY_CHARS = env.int("JOBWEAVER_MAX_IDEMPOTENCY_KEY_CHARS", default=255)
# Fairness (OWASP API4): per user, a token bucket of BURST requests that change work, refilled
# at RATE per WINDOW seconds (429 with Retry-After; operators exempt), at most this many jobs
# waiting or running, and priorities above the threshold only with the
# jobs.submit_high_priority permission.
JOBWEAVER_SUBMIT_THROTTLE_RATE = env.int("JOBWEAVER_SUBMIT_THROTTLE_RATE", default=1200)
JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = env.float(
    "JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS", default=60
)
JOBWEAVER_SUBMIT_THROTTLE_BURST = env.int("JOBWEAVER_SUBMIT_THROTTLE_BURST", default=500)
JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = env.int("JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER", default=10000)
JOBWEAVER_MAX_RUNNING_JOBS_PER_USER = env.int("JOBWEAVER_MAX_RUNNING_JOBS_PER_USER", default=0)
JOBWEAVER_PRIORITY_PERMISSION_ABOVE = env.int("JOBWEAVER_PRIORITY_PERMISSION_ABOVE", default=6)
# A new API token expires after this many days unless created otherwise (0: never).
JOBWEAVER_API_TOKEN_DEFAULT_DAYS = env.float("JOBWEAVER_API_TOKEN_DEFAULT_DAYS", default=90)

# --- HTTPS and cookies: on unless DEBUG (`manage.py check --deploy` is clean) -----------------
# Behind a TLS-terminating proxy, trust its X-Forwarded-Proto (only if it always sets it).
JOBWEAVER_SECURE_PROXY_SSL_HEADER = env.bool("JOBWEAVER_SECURE_PROXY_SSL_HEADER", default=False)
if JOBWEAVER_SECURE_PROXY_SSL_HEADER:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("JOBWEAVER_SECURE_SSL_REDIRECT", default=not DEBUG)
# The probes and /metrics answer plain HTTP: load balancers, orchestrators and Prometheus call
# them from inside (the Host check still applies).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("JOBWEAVER_SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("JOBWEAVER_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("JOBWEAVER_SECURE_HSTS_PRELOAD", default=True)
SESSION_COOKIE_SECURE = env.bool("JOBWEAVER_SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- /readyz: cheap for anonymous callers -----------------------------------------------------
JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS = env.float(
    "JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS", default=1.0
)
JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS = env.float("JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS", default=5)
# /readyz's PostgreSQL probe (SELECT 1) gives up after this long.
JOBWEAVER_READYZ_DB_TIMEOUT_SECONDS = env.float("JOBWEAVER_READYZ_DB_TIMEOUT_SECONDS", default=1.0)
# Worker liveness (`python -m jobweaver_site.workers probe ROLE`, apps/core/liveness.py) reads
# JOBWEAVER_LIVENESS_FILE and JOBWEAVER_LIVENESS_MAX_AGE_SECONDS (120) from the environment
# itself: the probe starts no Django.

# --- Python tasks through Django's Tasks API (ARCHITECTURE §13) -------------------------------
# `@task` functions in installed apps' tasks modules run as TASK jobs. No QUEUES: a task may
# name any valid queue (ARCHITECTURE §13a, §15), served by the executors of that queue.
TASKS = {"default": {"BACKEND": "jobweaver.tasks.JobWeaverBackend"}}
# A TASK payload {"task", "args", "kwargs"} as JSON, and a task's return value as JSON, at most.
JOBWEAVER_TASK_MAX_PAYLOAD_BYTES = env.int("JOBWEAVER_TASK_MAX_PAYLOAD_BYTES", default=32 * 1024)
JOBWEAVER_TASK_MAX_RESULT_BYTES = env.int("JOBWEAVER_TASK_MAX_RESULT_BYTES", default=256 * 1024)

# Workflows (ARCHITECTURE §16): jobs per workflow, and dependencies per job (a chord's callback
# depends on every job of its group).
JOBWEAVER_MAX_WORKFLOW_JOBS = env.int("JOBWEAVER_MAX_WORKFLOW_JOBS", default=1000)
JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB = env.int("JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB", default=1000)

# --- Workers: JobWeaver's own Celery app over Kafka (jobweaver/celery.py) ---------------------
# SIGTERM: how long running attempts may still finish before they are released (run again).
JOBWEAVER_SHUTDOWN_GRACE_SECONDS = env.float("JOBWEAVER_SHUTDOWN_GRACE_SECONDS", default=30)
# Threads per executor process (the `threads` pool); prefetch equals this number.
JOBWEAVER_EXECUTOR_CONCURRENCY = env.int("JOBWEAVER_EXECUTOR_CONCURRENCY", default=4)
# The job queues an executor serves (ARCHITECTURE §15), comma-separated; `--queues` overrides.
JOBWEAVER_EXECUTOR_QUEUES = env.list("JOBWEAVER_EXECUTOR_QUEUES", default=["default"])
# `threads` (the default) or `processes`: each attempt in a child process that can be killed
# (ARCHITECTURE §13a); `--pool` overrides. A child is replaced after this many attempts, or
# once its memory passed this many MB (0: never).
JOBWEAVER_EXECUTOR_POOL = env.str("JOBWEAVER_EXECUTOR_POOL", default="threads")
JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD = env.int(
    "JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD", default=0
)
JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB = env.int(
    "JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB", default=0
)
# The process pool kills a child this long after its attempt's timeout asked it to stop,
# unless the job sets its own hard_timeout_seconds.
JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS = env.float("JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS", default=10)
JOBWEAVER_EXECUTOR_WRITE_BATCH = env.int("JOBWEAVER_EXECUTOR_WRITE_BATCH", default=100)
JOBWEAVER_EXECUTOR_START_DELAY_MS = env.int("JOBWEAVER_EXECUTOR_START_DELAY_MS", default=50)

# Every line carries service, trace id, job id and attempt (apps/core/logcontext.py);
# JOBWEAVER_LOG_FORMAT=json writes one JSON object per line instead of plain text.
JOBWEAVER_LOG_FORMAT = env.str("JOBWEAVER_LOG_FORMAT", default="plain")
if JOBWEAVER_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured("JOBWEAVER_LOG_FORMAT must be plain or json")
# Workers serve their Prometheus metrics on this port, one per process (0 = off), on this
# address (127.0.0.1: this host only; compose and Helm say 0.0.0.0 for their scraper); the web
# serves them at /metrics (apps/core/metrics.py).
JOBWEAVER_METRICS_PORT = env.int("JOBWEAVER_METRICS_PORT", default=0)
JOBWEAVER_METRICS_BIND = env.str("JOBWEAVER_METRICS_BIND", default="127.0.0.1")
# Every metrics endpoint (the web's /metrics, the workers' ports) needs `Authorization: Bearer
# <token>`; without a token they answer 404. `make run` writes a dev token into its .env.
JOBWEAVER_METRICS_TOKEN = env.str("JOBWEAVER_METRICS_TOKEN", default="")
# The web's /metrics reads Kafka's consumer lag at most this often per process (one scrape
# opens a few short-lived Kafka clients); 0 reads it on every scrape.
JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS = env.float(
    "JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS", default=5
)
# The root log level of every process. The worker entry point hands it to Celery as its
# --loglevel (jobweaver_site/workers.py), which sets the root logger's level in workers.
JOBWEAVER_LOG_LEVEL = (env.str("JOBWEAVER_LOG_LEVEL", default="") or "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "jobweaver.core.logcontext.ContextFilter"}},
    "formatters": {
        "plain": {"()": "jobweaver.core.logcontext.PlainFormatter"},
        "json": {"()": "jobweaver.core.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": JOBWEAVER_LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": JOBWEAVER_LOG_LEVEL},
    "loggers": {
        "kafka": {"level": "WARNING"},
        # A worker's "<name> ready." line, whatever the root level: one line a start, which
        # operators and the test harness (tests/stack.py) wait for.
        "celery.apps.worker": {"level": "INFO"},
        "django.db.backends": {"level": "INFO"},
        # In an executor, Celery's "Task … received" and "… succeeded in …" lines, two per job,
        # say less than the executor's own (job, attempt, outcome, with the trace id) and cost
        # it CPU on every job (bench/NOTES.md); failures still log at ERROR. The scheduler keeps
        # them: one pair per beat tick.
        **(
            {
                "celery.worker.strategy": {"level": "WARNING"},
                "celery.app.trace": {"level": "WARNING"},
            }
            if env.str("JOBWEAVER_WORKER_ROLE", default="") == "executor"
            else {}
        ),
    },
}
