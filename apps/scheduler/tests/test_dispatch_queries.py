"""A dispatch of the line costs a fixed, small number of statements (issue "Fast"): it runs
several hundred times a second under load, and each statement is a round trip that both the
scheduler and PostgreSQL pay for and that the next credit waits behind."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobweaver.jobs.models import Job
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import execution_of, live_executor, submitted_job

# The dispatch lock with the planner settings of the transaction; the credits with the rules
# (pauses, limits, anything set aside); the claim.
STATEMENTS_PER_DISPATCH = 3

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("waiting", [1, 3])
def test_a_dispatch_of_the_line_costs_a_fixed_number_of_statements(waiting):
    jobs = [submitted_job() for _ in range(waiting)]  # no executor yet: no fast path
    live_executor(slots=4)
    sent: list = []

    with CaptureQueriesContext(connection) as queries:
        dispatched = dispatch_due_jobs(publish=sent.extend)

    assert sorted(dispatched) == sorted(job.id for job in jobs)
    assert {execution_of(job.id).status for job in jobs} == {"DISPATCHED"}
    statements = [q["sql"] for q in queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(statements) == STATEMENTS_PER_DISPATCH, [q[:80] for q in statements]


def test_the_credits_read_uses_the_index_of_the_work_in_flight_on_a_nearly_empty_table():
    """A plan lives as long as its connection. The credits' count of the work in flight,
    planned while the executions table was nearly empty (a new deployment, a new database),
    was a sequential scan, and stayed one on every dispatch after the table had grown, until
    the next ANALYZE. The dispatch transaction plans its statements with index scans only."""
    from django.db import transaction

    from jobweaver.engine.store import claim as claim_rows

    live_executor(slots=4)
    submitted_job()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobweaver_scheduler_jobexecution")  # the statistics: one row

    with transaction.atomic():
        claim_rows.lock_dispatch(planned=True)
        with connection.cursor() as cursor:
            cursor.execute(
                f"EXPLAIN {claim_rows._credits_sql(prefetch=2, prefetch_max=8, ttl_seconds=15.0)}"
            )
            plan = "\n".join(line for (line,) in cursor.fetchall())

    assert "Seq Scan on jobweaver_scheduler_jobexecution" not in plan, plan
    assert "jw_execution_live_leases" in plan, plan


def test_the_executions_table_is_analyzed_after_a_hundredth_of_it_changed():
    """The claim's plan follows the statistics of the last ANALYZE: one that saw no waiting
    work lets a plan through another partial index of PENDING rows read and sort a later
    backlog whole. Autoanalyze then has to come soon after a burst, not after a tenth of a
    table with history has changed (migration 0008)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'jobweaver_scheduler_jobexecution'"
        )
        (options,) = cursor.fetchone()

    assert "autovacuum_analyze_scale_factor=0.01" in options


def test_the_claim_reads_the_line_under_statistics_that_saw_no_waiting_work():
    """A burst after a quiet spell: the last ANALYZE saw only finished work. A plan may read
    any index whose predicate the claim's conditions imply, and the claim then read another
    partial index of PENDING rows whole and sorted it: the whole backlog on every dispatch.
    Only the line (jw_execution_due_work) is an index the claim can read; it reads the line in
    its order, with no sort before the lock."""
    owner = get_user_model().objects.create_user("alice")
    for _ in range(10):
        submitted_job()
    JobExecution.objects.update(status="COMPLETED")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobweaver_scheduler_jobexecution")  # no PENDING row
    for _ in range(20):
        Job.objects.filter(pk=submitted_job().pk).update(submitted_by=owner)
    JobExecution.objects.filter(status="PENDING").update(submitted_by=owner)
    live_executor(slots=2, queues=["default"])  # one queue: one claim of the one line

    plans: list[str] = []

    def explained(execute, sql, params, many, context):
        if "SKIP LOCKED" in sql:
            raw = context["cursor"].cursor  # the driver's: not through this wrapper again
            raw.execute(f"EXPLAIN {sql}", params)
            plans.append("\n".join(line for (line,) in raw.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explained):
        assert len(dispatch_due_jobs(publish=[].extend)) == 4

    (plan,) = plans
    line = plan.split("LockRows")[1]
    assert "jw_execution_due_work" in line, plan
    assert "Sort" not in line.split("Index Scan")[0], plan
    assert "pending_by_user" not in plan and "pending_due" not in plan, plan


@pytest.mark.parametrize("executor", [False, True])
def test_the_submit_paths_warm_up_changes_nothing(executor):
    """A web worker runs the fast path's statements on each new connection before its first
    request (jobweaver.core.db.warm_connection), with or without a live executor: it claims
    nothing, spends no credit and writes no event, and it commits (a rollback would make
    psycopg forget what it prepared)."""
    from jobweaver.engine.claim import credits as claim_credits
    from jobweaver.outbox.models import OutboxEvent
    from jobweaver.scheduler.dispatch import warm_up_dispatch

    job = submitted_job()  # no executor yet: it waits PENDING
    if executor:
        live_executor(slots=4)
    events = OutboxEvent.objects.count()
    free_before = _free_credits(claim_credits)

    with CaptureQueriesContext(connection) as queries:
        warm_up_dispatch()

    assert execution_of(job.id).status == "PENDING"
    assert _free_credits(claim_credits) == free_before
    assert OutboxEvent.objects.count() == events
    statements = [q["sql"] for q in queries]
    assert statements[-1] == "COMMIT" and not any("ROLLBACK" in s for s in statements)
    assert any("WITH due AS" in s for s in statements)  # the claim ran, on a placeholder


def _free_credits(claim_credits) -> int:
    from django.db import transaction

    with transaction.atomic():
        return sum(credit.free for credit in claim_credits.credits())
