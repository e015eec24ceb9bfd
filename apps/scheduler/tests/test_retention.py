"""Retention (apps/scheduler/retention.py): finished work past its retention is deleted in
bounded batches with everything hanging off it; everything else stays, and the invariant
checker and the API stay correct afterwards.

Real commits (transaction=True): each prune batch is its own durable transaction, and the lock
test needs a second connection to see committed rows.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.executor.services import attempt_finish
from jobweaver.jobs.models import DeadLetterDiscard, Job
from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.tests.api_helpers import api_client
from jobweaver.jobs.validation import parse_job_request
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.beat import beat_schedule_setup
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.management.commands.prune import Command
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.retention import retention_preview, retention_prune
from jobweaver.scheduler.services import execution_cancel
from jobweaver.scheduler.tests.factories import finished, started, submitted_job
from jobweaver.workflows.models import Dependency, Node, Workflow
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

pytestmark = pytest.mark.django_db(transaction=True)

BULK_JOBS = 2000
BATCH = 500


@pytest.fixture
def run_command(capsys):
    """`run_command(Command, "prune", *args)` through `run_from_argv`, as manage.py runs it:
    (exit code, stdout, stderr)."""

    def run(command_class, name: str, *args: str):
        try:
            command_class().run_from_argv(["manage.py", name, *args])
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return SimpleNamespace(code=code, out=captured.out, err=captured.err)

    return run


@pytest.fixture(autouse=True)
def no_fast_paths(monkeypatch):
    """Committed submissions would dispatch at once and wake the outbox relay; with no worker
    here those would only race the states this test builds (factories dispatch by hand)."""
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)
    monkeypatch.setattr("jobweaver.jobs.services._dispatch_now", lambda job_ids: None)
    monkeypatch.setattr("jobweaver.outbox.services.relay_soon", lambda: None)


@pytest.fixture(autouse=True)
def retention(settings):
    settings.JOBWEAVER_RETAIN_COMPLETED_DAYS = 7
    settings.JOBWEAVER_RETAIN_FAILED_DAYS = 30
    settings.JOBWEAVER_RETAIN_CANCELLED_DAYS = 30
    settings.JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS = 1


def finished_days_ago(job_id: uuid.UUID, days: float) -> None:
    """Age a finished job: its finish and its events (published then) move `days` back."""
    then = timezone.now() - timedelta(days=days)
    JobExecution.objects.filter(job_id=job_id).update(finished_at=then)
    OutboxEvent.objects.filter(key=str(job_id)).update(created_at=then, published_at=then)


def bulk_completed_jobs(count: int, *, days: float) -> list[uuid.UUID]:
    """`count` COMPLETED jobs with one SUCCESS attempt each, finished `days` ago: submitted
    through the batch service, then moved to COMPLETED in bulk (test set-up, not a transition:
    going through a worker 2,000 times would make this test slow)."""
    spec = parse_job_request(
        {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    )
    ids = []
    for start in range(0, count, 1000):
        ids += [job.id for job in job_submit_batch(specs=[spec] * min(1000, count - start))]
    then = timezone.now() - timedelta(days=days)
    JobExecution.objects.filter(job_id__in=ids).update(
        status="COMPLETED", attempt_count=1, dispatched_at=then, started_at=then, finished_at=then
    )
    ExecutionAttempt.objects.bulk_create(
        ExecutionAttempt(
            event_id=uuid.uuid4(),
            job_id=job_id,
            attempt=1,
            trace_id="bulk",
            worker_id="bulk:1",
            started_at=then,
            finished_at=then,
            outcome=AttemptOutcome.SUCCESS,
        )
        for job_id in ids
    )
    OutboxEvent.objects.filter(key__in=[str(i) for i in ids]).update(
        created_at=then, published_at=then
    )
    return ids


def gone(job_id: uuid.UUID) -> bool:
    key = str(job_id)
    return not (
        Job.objects.filter(id=job_id).exists()
        or JobExecution.objects.filter(job_id=job_id).exists()
        or ExecutionAttempt.objects.filter(job_id=job_id).exists()
        or OutboxEvent.objects.filter(key=key).exists()
    )


def test_prune_deletes_finished_work_past_retention_in_batches_and_keeps_the_rest(run_command):
    old_completed = bulk_completed_jobs(BULK_JOBS, days=8)
    dead = submitted_job(maxRetryCount=0)
    finished(dead.id, outcome="FAILURE", error="boom")
    DeadLetterDiscard.objects.create(job=dead, final_error="boom")
    finished_days_ago(dead.id, 31)
    cancelled = submitted_job()
    execution_cancel(job_id=cancelled.id)
    finished_days_ago(cancelled.id, 31)
    # Kept: younger than their retention, not finished, or an event not yet relayed.
    recent_failure = submitted_job(maxRetryCount=0)
    finished(recent_failure.id, outcome="FAILURE", error="still on the desk")
    finished_days_ago(recent_failure.id, 10)  # its events (2 days+) go, the job stays
    recent_success = submitted_job()
    finished(recent_success.id)
    finished_days_ago(recent_success.id, 2)
    pending = submitted_job(runAt=(timezone.now() + timedelta(days=1)).isoformat())
    unrelayed = submitted_job()
    finished(unrelayed.id)
    finished_days_ago(unrelayed.id, 8)
    OutboxEvent.objects.filter(key=str(unrelayed.id), topic="job-completed").update(
        published_at=None
    )
    kept = [recent_failure.id, recent_success.id, pending.id, unrelayed.id]
    events_of_kept = OutboxEvent.objects.filter(key__in=[str(i) for i in kept])
    young_events = events_of_kept.filter(published_at__gte=timezone.now() - timedelta(days=1))
    young_or_unpublished = young_events.count() + events_of_kept.filter(published_at=None).count()

    dry = run_command(Command, "prune", "--dry-run")
    assert dry.code == 0
    assert f"completed jobs: {BULK_JOBS} would be pruned" in dry.out
    assert "failed jobs: 1 would be pruned" in dry.out
    assert "cancelled jobs: 1 would be pruned" in dry.out
    assert Job.objects.count() == BULK_JOBS + 6  # a dry run deletes nothing

    with CaptureQueriesContext(connection) as queries:
        pruned = retention_prune(batch_size=BATCH)
    assert pruned["completed jobs"] == BULK_JOBS
    assert (pruned["failed jobs"], pruned["cancelled jobs"]) == (1, 1)
    assert pruned["published outbox events"] > 0
    # Bounded: no statement deleted more than one batch of jobs.
    job_deletes = [q for q in queries if "DELETE FROM jobweaver_jobs_job" in q["sql"]]
    assert len(job_deletes) >= BULK_JOBS // BATCH

    for job_id in [*old_completed[:50], dead.id, cancelled.id]:
        assert gone(job_id), job_id
    assert not DeadLetterDiscard.objects.exists()
    assert set(Job.objects.values_list("id", flat=True)) == set(kept)
    assert (
        OutboxEvent.objects.filter(published_at__lt=timezone.now() - timedelta(days=1)).count() == 0
    )
    assert OutboxEvent.objects.count() == young_or_unpublished
    assert retention_preview() == dict.fromkeys(pruned, 0)

    # The auditor and the API after pruning: nothing dangles, pruned jobs are simply gone.
    assert check_invariants() == []
    client = api_client("auditor", "jobweaver_jobs.view_job", "jobweaver_jobs.view_all_jobs")
    assert client.get(f"/api/jobs/{dead.id}").status_code == 404
    assert client.get(f"/api/jobs/{recent_failure.id}").json()["status"] == "FAILED"
    listing = client.get("/api/jobs?size=100").json()
    assert listing["totalElements"] == len(kept)
    assert client.get("/api/stats").status_code == 200

    again = run_command(Command, "prune")
    assert again.code == 0
    assert "completed jobs: 0 pruned" in again.out


def test_a_row_someone_holds_is_skipped_not_waited_for():
    ids = bulk_completed_jobs(3, days=8)
    locked, released = threading.Event(), threading.Event()

    def operator_holds_the_row():
        try:
            with transaction.atomic():
                JobExecution.objects.select_for_update().get(job_id=ids[0])
                locked.set()
                released.wait(timeout=30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=operator_holds_the_row)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        assert retention_prune()["completed jobs"] == 2  # returns while the lock is held
        assert not gone(ids[0])
    finally:
        released.set()
        holder.join()
    assert retention_prune()["completed jobs"] == 1
    assert gone(ids[0])


def test_zero_days_keeps_that_kind_forever(settings):
    settings.JOBWEAVER_RETAIN_COMPLETED_DAYS = 0
    bulk_completed_jobs(3, days=365)
    assert retention_prune()["completed jobs"] == 0
    assert Job.objects.count() == 3


def test_prune_runs_on_the_beat_schedule(settings):
    from django_celery_beat.models import PeriodicTask

    assert "jobweaver: prune finished work" in beat_schedule_setup()
    entry = PeriodicTask.objects.get(name="jobweaver: prune finished work")
    assert entry.task == "jobweaver.scheduler.tasks.prune_finished_work"


def test_prune_help_and_bad_input(run_command):
    assert run_command(Command, "prune", "--help").code == 0
    bad = run_command(Command, "prune", "--batch-size", "0")
    assert bad.code == 2
    assert bad.err.startswith("prune: error: --batch-size")


@pytest.mark.parametrize("kind", ["outbox", "jobs"])
def test_a_batch_finds_its_old_rows_through_the_index_not_by_reading_the_retained_ones(kind):
    """The cutoff is a value in each batch's plan (an index condition), so a prune with
    nothing old enough reads nothing: compared row by row, it read every event published in
    the retained day, every five minutes, to delete none. Index scans are forced (the test's
    table is small); what the test reads is whether the cutoff bounds the scan or filters it."""
    from jobweaver.scheduler import retention

    if kind == "outbox":
        sql, params = retention._outbox_batch_sql(), [86400.0, 1000]
        column = "published_at"
    else:
        sql = retention._doomed_jobs_sql(limit=True)
        params = {"status": "COMPLETED", "age": 86400.0, "limit": 1000}
        column = "finished_at"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(line for (line,) in cursor.fetchall())

    bounded = [line for line in plan.splitlines() if "Index Cond" in line and column in line]
    assert bounded, plan
    assert not any("Filter" in line and column in line for line in plan.splitlines()), plan


def test_a_workflow_is_pruned_whole_once_it_finished_past_retention():
    """A failed workflow (one job FAILED, one cancelled because of it, one completed): none of
    its jobs goes alone, however old; the workflow goes with all of them once it is old."""
    log = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    spec = parse_workflow_request(
        {
            "name": "old",
            "jobs": [
                {"ref": "a", "job": log},
                {"ref": "b", "job": log, "dependsOn": ["a"]},
                {"ref": "ok", "job": log},
            ],
        }
    )
    workflow = workflow_submit(spec=spec)
    jobs = [job.id for job in workflow.jobs_by_ref.values()]
    claimed = started(workflow.jobs_by_ref["a"].id)
    attempt_finish(
        claimed=claimed,
        outcome="FAILURE",
        error="x",
        retryable=False,
        steps_completed=0,
        log_lines=[],
    )
    finished(workflow.jobs_by_ref["ok"].id)
    for job_id in jobs:
        finished_days_ago(job_id, 40)  # past every job retention

    assert retention_prune()["failed workflows"] == 0  # the workflow itself is recent
    assert Job.objects.filter(id__in=jobs).count() == 3

    then = timezone.now() - timedelta(days=40)
    Workflow.objects.filter(id=workflow.id).update(finished_at=then)
    OutboxEvent.objects.filter(key=str(workflow.id)).update(created_at=then, published_at=then)
    assert retention_preview()["failed workflows"] == 1
    assert retention_prune()["failed workflows"] == 1

    assert all(gone(job_id) for job_id in jobs)
    assert not Workflow.objects.filter(id=workflow.id).exists()
    assert not Node.objects.filter(job_id__in=jobs).exists()
    assert not Dependency.objects.filter(job_id__in=jobs).exists()
    assert not OutboxEvent.objects.filter(key=str(workflow.id)).exists()
