"""A dispatch of the line costs a fixed, small number of statements (issue "Fast"): it runs
several hundred times a second under load, and each statement is a round trip that both the
scheduler and PostgreSQL pay for and that the next credit waits behind."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobweaver.scheduler.dispatch import dispatch_due_jobs
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
            cursor.execute(f"EXPLAIN {claim_rows._credits_sql(prefetch=2, ttl_seconds=15.0)}")
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
