"""The dispatcher's wake-up sleeps until the earliest waiting due time (database clock)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import submitted_job
from jobweaver.scheduler.wakeup import seconds_until_due

pytestmark = pytest.mark.django_db


def test_seconds_until_the_earliest_pending_job_falls_due():
    JobExecution.objects.filter(status="PENDING").update(status="CANCELLED")  # only ours count
    connection.ensure_connection()
    assert seconds_until_due(connection.connection) is None

    later = submitted_job(runAt=(timezone.now() + timedelta(seconds=60)).isoformat())
    sooner = submitted_job(runAt=(timezone.now() + timedelta(seconds=20)).isoformat())
    assert 15 < seconds_until_due(connection.connection) <= 20

    JobExecution.objects.filter(job_id=sooner.id).update(status="CANCELLED")
    assert 55 < seconds_until_due(connection.connection) <= 60
    JobExecution.objects.filter(job_id=later.id).update(next_run_at=timezone.now())
    assert seconds_until_due(connection.connection) <= 0  # overdue: dispatch now


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_successes_tells_the_dispatcher_how_many_credits_it_freed(monkeypatch):
    """One notification per statement (PostgreSQL folds equal ones), whose payload is the count
    the wake-up adds up to decide when to dispatch (fold_credits)."""
    # Committed submits would be dispatched by their fast path: the test dispatches each itself.
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)
    from jobweaver.core.db import listen_connection
    from jobweaver.engine import executions
    from jobweaver.engine.claim import DISPATCH_CHANNEL
    from jobweaver.engine.ledger import AttemptReport
    from jobweaver.scheduler.tests.factories import started
    from jobweaver.scheduler.wakeup import _credits

    claims = [started(submitted_job([{"action": "LOG", "message": "x"}]).id) for _ in range(3)]
    with listen_connection() as listener:
        listener.execute(f"LISTEN {DISPATCH_CHANNEL}")
        report = AttemptReport(steps_completed=1, log_lines=[])
        executions.executions_complete([(c.job_id, c.event_id, report) for c in claims])
        notes = list(listener.notifies(timeout=2, stop_after=2))

    assert [note.payload for note in notes] == ["3"]
    assert sum(_credits(note) for note in notes) == 3


def test_the_window_is_the_live_executors_slots_times_their_prefetch(settings):
    """Slots x the prefetch each executor reported, within the settings' bounds (an executor
    of an earlier version reports none: the minimum)."""
    from jobweaver.scheduler.flow import live_window
    from jobweaver.scheduler.models import ExecutorRegistration

    settings.JOBWEAVER_DISPATCH_PREFETCH = 2
    settings.JOBWEAVER_DISPATCH_PREFETCH_MAX = 8
    ExecutorRegistration.objects.all().delete()
    now = timezone.now()
    for worker_id, slots, prefetch, partitions, heartbeat in [
        ("a:1", 4, None, [0, 1], now),  # 4 x 2
        ("b:2", 3, 5, [2], now),  # 3 x 5
        ("e:5", 2, 50, [4], now),  # asks for more than the maximum: 2 x 8
        ("f:6", 1, 1, [5], now),  # less than the minimum: 1 x 2
        ("c:3", 8, 8, [], now),  # owns no partition yet: nothing is sent to it
        ("d:4", 16, 8, [3], now - timedelta(hours=1)),  # not live
    ]:
        ExecutorRegistration.objects.create(
            worker_id=worker_id,
            slots=slots,
            prefetch=prefetch,
            partitions=partitions,
            started_at=heartbeat,
            heartbeat_at=heartbeat,
        )
    connection.ensure_connection()
    assert live_window(connection.connection) == 8 + 15 + 16 + 2
    settings.JOBWEAVER_DISPATCH_PREFETCH_MAX = 1  # below the minimum: a fixed prefetch of 2
    assert live_window(connection.connection) == 2 * (4 + 3 + 2 + 1)
