"""The per-user running cap (ARCHITECTURE §17) as the dispatcher's claim applies it, on the real
PostgreSQL: one user's flood cannot take every slot, the others' work goes past it, operators
and ownerless jobs are exempt. Off by default.

No worker runs here: `dispatch_due_jobs` claims with a publish function that only records, and
the tests play the worker's part through the executor's services.
"""

from __future__ import annotations

import uuid

import pytest

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.scheduler.services import queue_pause
from jobweaver.scheduler.tests.factories import execution_of, live_executor
from jobweaver.scheduler.tests.test_pauses_and_limits import finish

pytestmark = pytest.mark.django_db

OPERATOR = "jobweaver_jobs.operate_all_jobs"


def submit(user, count: int, **fields) -> list[uuid.UUID]:
    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    spec = parse_job_request({**body, **fields})
    return [job_submit(spec=spec, submitted_by=user).job.id for _ in range(count)]


def dispatch(job_ids: list[uuid.UUID] | None = None) -> set[uuid.UUID]:
    live_executor()
    return set(dispatch_due_jobs(job_ids=job_ids, publish=lambda messages: None))


def in_flight(job_ids) -> int:
    in_flight = {ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING}
    return sum(execution_of(job_id).status in in_flight for job_id in job_ids)


@pytest.fixture
def no_fast_path(monkeypatch):
    # Each test dispatches when it says so: no dispatch right after each submit.
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)


# Each of the claim's ways of reading the line: the one line; several queues sharing a pool's
# credits (claim.queues); a paused queue (the line read per open queue and job type).
WAYS = pytest.mark.parametrize("way", ["one-line", "shared-queues", "a-queue-paused"])


def place(way: str, index: int) -> dict:
    if way == "shared-queues":
        return {"queueName": "a" if index % 2 else "b"}
    return {}


@WAYS
def test_a_users_flood_takes_at_most_the_cap_and_the_others_go_past_it(settings, no_fast_path, way):
    settings.JOBWEAVER_MAX_RUNNING_JOBS_PER_USER = 2
    alice, bob = make_user("alice", *SUBMITTER), make_user("bob", *SUBMITTER)
    if way == "a-queue-paused":
        queue_pause(scope="QUEUE", name="bulk")
        submit(alice, 3, queueName="bulk")
    flood = [job for i in range(8) for job in submit(alice, 1, priority=5, **place(way, i))]
    others = [job for i in range(2) for job in submit(bob, 1, priority=1, **place(way, i))]

    sent = dispatch()

    assert in_flight(flood) == 2  # her best two, the rest wait in line
    assert set(others) <= sent  # bob's lower-priority work went past her flood
    assert dispatch() == set()  # she is at the cap: nothing more of hers leaves
    # One of hers finishes: exactly one more of hers may go.
    finish(next(job for job in flood if job in sent))
    assert len(dispatch()) == 1
    assert in_flight(flood) == 2
    assert check_invariants() == []


def test_the_fast_path_after_a_submit_keeps_the_cap(settings, no_fast_path):
    settings.JOBWEAVER_MAX_RUNNING_JOBS_PER_USER = 3
    carol = make_user("carol", *SUBMITTER)
    first = submit(carol, 2)
    assert dispatch(first) == set(first)

    more = submit(carol, 4)
    assert len(dispatch(more)) == 1  # 2 in flight + 1 = the cap
    assert in_flight(first + more) == 3


def test_operators_and_ownerless_jobs_are_exempt(settings, no_fast_path):
    settings.JOBWEAVER_MAX_RUNNING_JOBS_PER_USER = 1
    operator = make_user("olga", *SUBMITTER, OPERATOR)
    root = make_user("root", is_superuser=True)
    theirs = submit(operator, 5) + submit(root, 4)
    ownerless = submit(None, 4)  # enqueued from code or the CLI: the server's authority
    capped = submit(make_user("dave", *SUBMITTER), 3)

    dispatch()

    assert in_flight(theirs) == 9
    assert in_flight(ownerless) == 4
    assert in_flight(capped) == 1


def test_no_cap_by_default(no_fast_path):
    erin = make_user("erin", *SUBMITTER)
    flood = submit(erin, 30)
    assert dispatch() == set(flood)
