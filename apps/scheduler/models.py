"""The lifecycle of a job: one JobExecution per job (ARCHITECTURE §3, §4)."""

import uuid

from django.db import models

from jobweaver.conf import settings


class ExecutionStatus(models.TextChoices):
    WAITING = "WAITING"  # a workflow's job whose dependencies are not done (§16): never claimed
    PENDING = "PENDING"
    DISPATCHED = "DISPATCHED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_STATUSES = (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)


def status_literal(status: str) -> str:
    """An execution status as an SQL literal: only the enum's own values, never input."""
    return f"'{ExecutionStatus(status).value}'"


# The rows of jw_execution_pending_due, as its readers (the wake-up, the gauges) must say
# them. `priority >= 0` holds for every row (a CHECK constraint): it is in the predicate only so
# that a statement must name it to read the index. The claim never does, so it cannot plan
# through this index: with statistics that saw no waiting work, a claim read it whole and
# sorted it, the whole backlog on every dispatch (bench/NOTES.md).
PENDING_DUE_ROWS = f"status = {status_literal(ExecutionStatus.PENDING)} AND priority >= 0"


class JobExecution(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.OneToOneField(
        "jobweaver_jobs.Job", on_delete=models.CASCADE, related_name="execution"
    )
    status = models.CharField(
        max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING
    )
    # Copied from the job so the due-work index covers the dispatch query on its own.
    priority = models.PositiveSmallIntegerField(default=5)
    retry_count = models.PositiveIntegerField(default=0)
    max_retries = models.PositiveIntegerField()
    next_run_at = models.DateTimeField()
    attempt_count = models.PositiveIntegerField(default=0)
    # Fencing token of the live delivery: only the worker holding it may move the execution on.
    current_event_id = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, default="")
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    # The executor process (ExecutorRegistration.worker_id) the live delivery was sent to, then
    # the one that runs it: flow control counts each executor's work in flight by this.
    worker_id = models.CharField(max_length=200, blank=True, default="")
    # Deliveries whose dispatch lease expired before any worker started them: sent again with a
    # fresh token, no attempt recorded, no retry used (ARCHITECTURE §4).
    redelivery_count = models.PositiveIntegerField(default=0)
    # While DISPATCHED: the executor of worker_id has taken the delivery into its hands (its
    # line, or its work before the start is written, apps/executor/runner.py), so no other
    # executor may start it. Every dispatch clears it.
    accepted = models.BooleanField(default=False, db_default=False)
    # Attempts that ended SNOOZED (ARCHITECTURE §13a): capped by JOBWEAVER_MAX_SNOOZES.
    snooze_count = models.PositiveIntegerField(default=0, db_default=0)
    # Copied from the job, so the dispatch claim applies pauses and per-key limits to the rows
    # it reads without a join (apps/engine/claim/rules.py).
    queue_name = models.CharField(max_length=100, default="default")
    job_type = models.CharField(max_length=32, default="SIMULATION")
    # Scoped to the job's owner, or shared by every owner under a global limit (§17): the
    # form is apps/engine/keys.py's; the job's `concurrency_key` is the user's text.
    concurrency_key = models.CharField(max_length=300, null=True, blank=True)  # noqa: DJ001
    # A waiting execution whose key is at its limit, taken out of the dispatch claim's line
    # until the key has room again (apps/engine/claim/rules.py): its status stays PENDING, its
    # place in line is kept. Meaningful only while PENDING.
    set_aside = models.BooleanField(default=False, db_default=False)
    # Copied from the job, so the per-user cap on waiting and running jobs counts the user's own
    # executions from an index (jw_execution_pending_by_user, jw_execution_live_leases) and
    # never reads another user's backlog (apps/jobs/selectors.active_job_count).
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    class Meta:
        indexes = [
            # The line the dispatch claim reads: waiting work, best first.
            models.Index(
                models.F("priority").desc(),
                "next_run_at",
                name="jw_execution_due_work",
                condition=models.Q(status="PENDING", set_aside=False),
            ),
            # The same line per queue and job type: the claim reads it so while a queue or a
            # job type is paused (_due_per_open_line, apps/engine/store/claim.py), and skips
            # through it for the (queue, job type) pairs that have work waiting.
            models.Index(
                "queue_name",
                "job_type",
                models.F("priority").desc(),
                "next_run_at",
                name="jw_execution_queue_line",
                condition=models.Q(status="PENDING", set_aside=False),
            ),
            # Per-key limits: a blocked key's waiting work in line (to set it aside), and what
            # is set aside, in line order (to put it back); both key by key, per queue and job
            # type, so that neither reads a paused one (the claim's executions_set_aside,
            # executions_put_back).
            models.Index(
                "concurrency_key",
                "queue_name",
                "job_type",
                name="jw_execution_key_line",
                condition=models.Q(
                    status="PENDING", set_aside=False, concurrency_key__isnull=False
                ),
            ),
            models.Index(
                "concurrency_key",
                "queue_name",
                "job_type",
                models.F("priority").desc(),
                "next_run_at",
                name="jw_execution_set_aside",
                condition=models.Q(status="PENDING", set_aside=True),
            ),
            # Fenced set-based transitions (hold, unsend) find deliveries by their token. Only
            # work in flight: a finished job's token is never looked up, and with it in here
            # every completion wrote one more index entry and the index grew with the history
            # (bench/per_job_costs.py).
            models.Index(
                "current_event_id",
                name="jw_execution_live_token",
                condition=models.Q(
                    current_event_id__isnull=False, status__in=["DISPATCHED", "RUNNING"]
                ),
            ),
            # The earliest waiting due time: the dispatcher's wake-up sleeps until then. Read
            # only by statements that say PENDING_DUE_ROWS, never by the claim.
            models.Index(
                "next_run_at",
                name="jw_execution_pending_due",
                condition=models.Q(status="PENDING", priority__gte=0),
            ),
            models.Index(
                "lease_expires_at",
                name="jw_execution_live_leases",
                condition=models.Q(status__in=["DISPATCHED", "RUNNING"]),
            ),
            # Per-key limits: a workflow's keyed jobs waiting for their dependencies, which a
            # change of a limit's scope re-keys with the rest of the unfinished work (the
            # engine's executions_rekey reads each of these partial indexes, never the history).
            models.Index(
                "concurrency_key",
                name="jw_execution_key_waiting",
                condition=models.Q(status="WAITING", concurrency_key__isnull=False),
            ),
            # Per-key limits: the work in flight of a key, and its recent dispatches.
            models.Index(
                "concurrency_key",
                name="jw_execution_key_in_flight",
                condition=models.Q(
                    status__in=["DISPATCHED", "RUNNING"], concurrency_key__isnull=False
                ),
            ),
            # Only rows ever dispatched: the rate's window implies that, and a re-key's read of
            # the keyed work that waits (which does not) cannot plan through the keyed history.
            models.Index(
                "dispatched_at",
                "concurrency_key",
                name="jw_execution_key_dispatched",
                condition=models.Q(concurrency_key__isnull=False, dispatched_at__isnull=False),
            ),
            # The per-user cap: one user's waiting executions (their in-flight ones are few and
            # come from jw_execution_live_leases). Only owned rows: a user's count implies
            # that, and the claim, which does not, cannot plan through this index (as for
            # jw_execution_pending_due).
            models.Index(
                "submitted_by",
                name="jw_execution_pending_by_user",
                condition=models.Q(status="PENDING", submitted_by__isnull=False),
            ),
            # Retention prunes finished executions oldest first (apps/scheduler/retention.py).
            models.Index(
                "status",
                "finished_at",
                name="jw_execution_finished",
                condition=models.Q(status__in=["COMPLETED", "FAILED", "CANCELLED"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.status}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def live_registration(ttl_seconds: float | None = None) -> str:
    """What "live" means for an executor's registration, on the database clock: a heartbeat
    within JOBWEAVER_WORKER_TTL_SECONDS, given as a parameter (None) or written in (a value
    from the settings, never input). The dispatcher's credits and the queues' views share it."""
    ttl = "%s" if ttl_seconds is None else repr(float(ttl_seconds))
    return f"heartbeat_at > clock_timestamp() - make_interval(secs => {ttl})"


class ExecutorRegistration(models.Model):
    """A live executor process and its capacity (ARCHITECTURE §4a).

    Written by the executor itself: inserted when it is ready, renewed with every heartbeat
    (database clock), deleted when it shuts down. An executor whose heartbeat is older than
    JOBWEAVER_WORKER_TTL_SECONDS is not live: the dispatcher gives it no credits.
    """

    worker_id = models.CharField(max_length=200, primary_key=True)  # "<host>:<pid>"
    queues = models.JSONField(default=list)
    slots = models.PositiveIntegerField()
    # run-job partitions this executor's consumer owns now: where its deliveries are produced.
    partitions = models.JSONField(default=list)
    # The deliveries a slot it asks for (executor/window.py); NULL: JOBWEAVER_DISPATCH_PREFETCH.
    prefetch = models.PositiveSmallIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        ordering = ["worker_id"]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.slots} slots)"


class PauseScope(models.TextChoices):
    QUEUE = "QUEUE"
    JOB_TYPE = "JOB_TYPE"


class Pause(models.Model):
    """A paused queue or job type: the dispatcher starts none of its work until the row is
    deleted (resume). Running work finishes; waiting work stays PENDING."""

    scope = models.CharField(max_length=16, choices=PauseScope.choices)
    name = models.CharField(max_length=100)
    reason = models.CharField(max_length=200, blank=True, default="")
    paused_by = models.CharField(max_length=150, blank=True, default="")
    paused_at = models.DateTimeField()

    class Meta:
        ordering = ["scope", "name"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "name"], name="jw_pause_scope_name")
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.name}"


class ConcurrencyLimit(models.Model):
    """A limit for every concurrency key matching `pattern` (`*` matches any run of
    characters): at most `max_running` of a key's jobs dispatched or running at once, at most
    `max_per_second` of them sent in any one second. Enforced by the dispatcher across all
    executors; over-limit work waits in PostgreSQL. The most specific (longest) matching
    pattern wins; of two as long, the global one.

    Keys are per owner (§17): each owner's key is counted on its own (alice's "customer-42"
    and bob's each get the limit), jobs enqueued from code count as one more owner. A global
    limit (`is_global`, an operator's choice) counts every owner's jobs of a key as one."""

    pattern = models.CharField(max_length=255, unique=True)
    max_running = models.PositiveIntegerField(null=True, blank=True)
    max_per_second = models.PositiveIntegerField(null=True, blank=True)
    is_global = models.BooleanField(
        "global",
        default=False,
        db_default=False,
        help_text="every owner's jobs of a key count as one key (otherwise each owner's alone)",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pattern"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_running__isnull=False)
                | models.Q(max_per_second__isnull=False),
                name="jw_limit_sets_something",
            )
        ]

    def __str__(self) -> str:
        return self.pattern


# ARCHITECTURE §15: a queue's settings and their ranges (0 is no cap: pause the queue instead).
QUEUE_MAX_RUNNING_RANGE = (1, 10_000)
QUEUE_WEIGHT_RANGE = (1, 100)
DEFAULT_QUEUE_WEIGHT = 1


class Queue(models.Model):
    """A queue's settings (ARCHITECTURE §15), set by operators: at most `max_running` of its
    jobs dispatched or running at once across all executors (None: no cap), and its `weight`
    in the share of credits of executors that serve it among other queues with waiting work.
    A queue without a row has no cap and weight 1; its permission `change_queue` guards
    changes."""

    name = models.CharField(max_length=64, unique=True)
    max_running = models.PositiveIntegerField(null=True, blank=True)
    weight = models.PositiveSmallIntegerField(default=DEFAULT_QUEUE_WEIGHT)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_running__isnull=True)
                | models.Q(max_running__range=QUEUE_MAX_RUNNING_RANGE),
                name="jw_queue_max_running_range",
            ),
            models.CheckConstraint(
                condition=models.Q(weight__range=QUEUE_WEIGHT_RANGE),
                name="jw_queue_weight_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name
