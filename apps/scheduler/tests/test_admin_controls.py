"""The Pause, ConcurrencyLimit and Queue admins: pages render, adding pauses through queue_pause
(unstarted deliveries are taken back), deleting resumes, limits save through
concurrency_limit_set, and bad input is a form error that changes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import (
    ConcurrencyLimit,
    ExecutionStatus,
    JobExecution,
    Pause,
    Queue,
)
from jobweaver.scheduler.services import concurrency_limit_set, queue_pause
from jobweaver.scheduler.tests.factories import (
    dispatched,
    execution_of,
    live_executor,
    submitted_job,
)

pytestmark = pytest.mark.django_db

PAUSES = reverse("admin:jobweaver_scheduler_pause_changelist")
ADD_PAUSE = reverse("admin:jobweaver_scheduler_pause_add")
LIMITS = reverse("admin:jobweaver_scheduler_concurrencylimit_changelist")
ADD_LIMIT = reverse("admin:jobweaver_scheduler_concurrencylimit_add")


def staff_client(client, *permissions: str):
    client.force_login(make_user(None, *permissions, is_staff=True))
    return client


def test_the_lists_and_add_forms_render(admin_client):
    queue_pause(scope="QUEUE", name="emails", reason="smtp down", paused_by="anna")
    concurrency_limit_set(pattern="customer-*", max_running=2, max_per_second=None)

    for url in (PAUSES, ADD_PAUSE, LIMITS, ADD_LIMIT):
        response = admin_client.get(url)
        assert response.status_code == 200, url
    assert "smtp down" in admin_client.get(PAUSES).content.decode()
    assert "customer-*" in admin_client.get(LIMITS).content.decode()
    pause = Pause.objects.get()
    assert (
        admin_client.get(
            reverse("admin:jobweaver_scheduler_pause_change", args=[pause.pk])
        ).status_code
        == 200
    )


def test_adding_a_pause_pauses_through_the_service(admin_client):
    job = submitted_job(queueName="imports")
    dispatched(job.id)

    response = admin_client.post(
        ADD_PAUSE, {"scope": "QUEUE", "name": "imports", "reason": "vendor outage"}
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    pause = Pause.objects.get()
    assert (pause.name, pause.reason, pause.paused_by) == ("imports", "vendor outage", "admin")
    assert execution_of(job.id).status == ExecutionStatus.PENDING  # the delivery is taken back


def test_deleting_a_pause_resumes(admin_client):
    pause = queue_pause(scope="JOB_TYPE", name="SIMULATION")

    response = admin_client.post(
        reverse("admin:jobweaver_scheduler_pause_delete", args=[pause.pk]), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not Pause.objects.exists()


def test_the_delete_action_resumes_each_selected_pause(admin_client):
    pauses = [queue_pause(scope="QUEUE", name=name) for name in ("a", "b")]
    admin_client.post(
        PAUSES,
        {
            "action": "delete_selected",
            "_selected_action": [p.pk for p in pauses],
            "post": "yes",
        },
    )
    assert not Pause.objects.exists()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope": "QUEUE", "name": "has space"}, "letters, digits"),
        ({"scope": "JOB_TYPE", "name": "simulation"}, "must be a job type"),
        ({"scope": "TOPIC", "name": "q"}, "valid choice"),
        ({"scope": "QUEUE", "name": ""}, "required"),
    ],
)
def test_a_bad_pause_is_a_form_error(admin_client, fields, message):
    response = admin_client.post(ADD_PAUSE, {"reason": "", **fields})

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Pause.objects.exists()


def test_pausing_what_is_paused_is_a_form_error(admin_client):
    queue_pause(scope="QUEUE", name="emails")
    response = admin_client.post(ADD_PAUSE, {"scope": "QUEUE", "name": "emails", "reason": ""})
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert Pause.objects.count() == 1


def test_adding_and_changing_a_limit_goes_through_the_service(admin_client):
    added = admin_client.post(
        ADD_LIMIT, {"pattern": "tenant-*", "max_running": "3", "max_per_second": ""}
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    limit = ConcurrencyLimit.objects.get()
    assert (limit.pattern, limit.max_running, limit.max_per_second) == ("tenant-*", 3, None)

    changed = admin_client.post(
        reverse("admin:jobweaver_scheduler_concurrencylimit_change", args=[limit.pk]),
        {"pattern": "ignored", "max_running": "", "max_per_second": "7"},
    )

    assert changed.status_code == 302
    limit = ConcurrencyLimit.objects.get()  # the pattern is the limit's name: kept
    assert (limit.pattern, limit.max_running, limit.max_per_second) == ("tenant-*", None, 7)


def test_a_limit_is_made_global_and_per_owner_again_through_the_service(admin_client):
    alice, bob = (make_user(name) for name in ("alice", "bob"))
    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    spec = parse_job_request({**body, "concurrencyKey": "tenant-1"})
    jobs = [job_submit(spec=spec, submitted_by=user).job.id for user in (alice, bob)]

    def keys() -> set[str]:
        executions = JobExecution.objects.filter(job_id__in=jobs)
        return set(executions.values_list("concurrency_key", flat=True))

    added = admin_client.post(
        ADD_LIMIT,
        {"pattern": "tenant-*", "max_running": "1", "max_per_second": "", "is_global": "on"},
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    limit = ConcurrencyLimit.objects.get()
    assert limit.is_global
    assert keys() == {"\x1ftenant-1"}  # the waiting work now shares one key

    changed = admin_client.post(
        reverse("admin:jobweaver_scheduler_concurrencylimit_change", args=[limit.pk]),
        {"max_running": "1", "max_per_second": ""},  # the box unticked: per owner
    )
    assert changed.status_code == 302
    assert not ConcurrencyLimit.objects.get().is_global
    assert keys() == {f"{alice.pk}\x1ftenant-1", f"{bob.pk}\x1ftenant-1"}


def test_deleting_a_limit_removes_it(admin_client):
    limit, _ = concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    admin_client.post(
        reverse("admin:jobweaver_scheduler_concurrencylimit_delete", args=[limit.pk]),
        {"post": "yes"},
    )
    assert not ConcurrencyLimit.objects.exists()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pattern": "k", "max_running": "", "max_per_second": ""}, "needs maxRunning"),
        ({"pattern": "k", "max_running": "0", "max_per_second": ""}, "from 1 to"),
        ({"pattern": "k", "max_running": "", "max_per_second": "10000001"}, "from 1 to"),
        ({"pattern": "k", "max_running": "-1", "max_per_second": ""}, "greater than or equal"),
        ({"pattern": "tab\there", "max_running": "1", "max_per_second": ""}, "printable"),
        ({"pattern": "x" * 256, "max_running": "1", "max_per_second": ""}, "at most 255"),
    ],
)
def test_a_bad_limit_is_a_form_error(admin_client, fields, message):
    response = admin_client.post(ADD_LIMIT, fields)

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not ConcurrencyLimit.objects.exists()


def test_staff_without_the_permissions_may_look_but_not_act(client):
    pause = queue_pause(scope="QUEUE", name="emails")
    limit, _ = concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    viewer = staff_client(
        client, "jobweaver_scheduler.view_pause", "jobweaver_scheduler.view_concurrencylimit"
    )

    assert viewer.get(PAUSES).status_code == 200
    assert viewer.get(LIMITS).status_code == 200
    assert viewer.post(ADD_PAUSE, {"scope": "QUEUE", "name": "x"}).status_code == 403
    assert viewer.post(ADD_LIMIT, {"pattern": "x", "max_running": "1"}).status_code == 403
    delete_pause = reverse("admin:jobweaver_scheduler_pause_delete", args=[pause.pk])
    assert viewer.post(delete_pause, {"post": "yes"}).status_code == 403
    delete_limit = reverse("admin:jobweaver_scheduler_concurrencylimit_delete", args=[limit.pk])
    assert viewer.post(delete_limit, {"post": "yes"}).status_code == 403
    assert Pause.objects.count() == 1 and ConcurrencyLimit.objects.get().pattern == "k"


def test_the_change_permissions_are_enough_to_act(client):
    user = make_user(
        None,
        "jobweaver_scheduler.change_pause",
        "jobweaver_scheduler.change_concurrencylimit",
        is_staff=True,
    )
    client.force_login(user)

    paused = client.post(ADD_PAUSE, {"scope": "QUEUE", "name": "x", "reason": ""})
    limited = client.post(ADD_LIMIT, {"pattern": "k", "max_running": "1", "max_per_second": ""})

    assert (paused.status_code, limited.status_code) == (302, 302)
    assert Pause.objects.get().paused_by == user.username
    assert ConcurrencyLimit.objects.get().max_running == 1


# --- queues --------------------------------------------------------------------------------------

QUEUES = reverse("admin:jobweaver_scheduler_queue_changelist")
ADD_QUEUE = reverse("admin:jobweaver_scheduler_queue_add")


def test_the_queue_list_shows_each_queues_settings_work_and_executors(admin_client):
    live_executor("host-a:1", slots=1, queues=["reports", "default"])
    live_executor("host-b:2", slots=1, queues=["gpu"])
    Queue.objects.create(name="reports", max_running=3, weight=4)
    for _ in range(3):
        submitted_job(queueName="reports")
    dispatched(submitted_job(queueName="reports").id)  # to the test stack's executor, too

    page = admin_client.get(QUEUES)

    assert page.status_code == 200
    [row] = [r for r in page.context["cl"].result_list]
    assert (row.name, row.max_running, row.weight) == ("reports", 3, 4)
    assert (row.waiting_now, row.running_now, row.executors_now, row.paused_now) == (
        3,
        1,
        2,
        False,
    )
    assert admin_client.get(ADD_QUEUE).status_code == 200


def test_adding_changing_and_deleting_a_queue_goes_through_the_services(admin_client):
    response = admin_client.post(ADD_QUEUE, {"name": "reports", "max_running": "2", "weight": "3"})
    assert response.status_code == 302, response.content
    queue = Queue.objects.get()
    assert (queue.max_running, queue.weight) == (2, 3)

    change = reverse("admin:jobweaver_scheduler_queue_change", args=[queue.pk])
    response = admin_client.post(change, {"max_running": "", "weight": "5"})
    assert response.status_code == 302, response.content
    queue.refresh_from_db()
    assert (queue.max_running, queue.weight) == (None, 5)

    delete = reverse("admin:jobweaver_scheduler_queue_delete", args=[queue.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Queue.objects.exists()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Reports", "weight": "1"}, "lowercase"),
        ({"name": "reports", "max_running": "0", "weight": "1"}, "from 1 to 10000"),
        ({"name": "reports", "max_running": "10001", "weight": "1"}, "from 1 to 10000"),
        ({"name": "reports", "weight": "101"}, "from 1 to 100"),
    ],
)
def test_a_bad_queue_is_a_form_error(admin_client, fields, message):
    response = admin_client.post(ADD_QUEUE, fields)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Queue.objects.exists()


def test_changing_a_queue_needs_change_queue(client):
    Queue.objects.create(name="reports", weight=2)
    staff = staff_client(client, "jobweaver_scheduler.view_queue")
    assert staff.get(QUEUES).status_code == 200
    assert staff.post(ADD_QUEUE, {"name": "other", "weight": "1"}).status_code == 403
    assert list(Queue.objects.values_list("name", "weight")) == [("reports", 2)]
