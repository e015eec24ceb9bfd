"""Schedules declared in code (`@periodic`, ARCHITECTURE §13a): synced into the database
(created, updated, disabled when removed; idempotent, one at a time), read-only in the API, the
CLI and the admin, and fired like any schedule: once per slot with two beats."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.python_tasks.compat import task as dep14_task
from jobweaver.schedules import periodic as periodic_module
from jobweaver.schedules.models import Schedule, ScheduleSource
from jobweaver.schedules.periodic import Periodic, declarations, periodic
from jobweaver.schedules.services import schedule_create, schedules_sync_code
from jobweaver.schedules.tests.helpers import TEMPLATE, jobs_of, submitted_slots
from jobweaver.schedules.tests.test_api import client_for, send
from jobweaver.schedules.tests.test_concurrent_firing import two_beats
from jobweaver_site.examples.tasks import add, nightly_digest

DIGEST = "nightly_digest"
NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def declared(monkeypatch):
    """The code's declarations, replaceable by a test (what another release would declare)."""
    current = dict(declarations())
    monkeypatch.setattr(periodic_module, "_declared", current)
    return current


def synced_digest() -> Schedule:
    Schedule.objects.filter(name=DIGEST).delete()
    schedules_sync_code(now=NOW)
    return Schedule.objects.get(name=DIGEST)


@pytest.mark.django_db
def test_the_examples_declare_a_nightly_digest():
    assert declarations()[DIGEST] == Periodic(
        name=DIGEST,
        task_path=nightly_digest.module_path,
        cron_expression="0 3 * * *",
        time_zone="UTC",
        interval_seconds=None,
        misfire_policy="SKIP",
        template_fields={"queueName": "default", "priority": 5},
    )


@pytest.mark.django_db
def test_a_sync_creates_the_declared_schedule_as_a_code_schedule():
    schedule = synced_digest()

    assert (schedule.source, schedule.enabled, schedule.owner) == ("code", True, None)
    assert schedule.cron_expression == "0 3 * * *"
    assert schedule.next_run_at == datetime(2027, 3, 2, 3, 0, tzinfo=UTC)
    assert schedule.job_template["payload"]["task"] == nightly_digest.module_path


@pytest.mark.django_db
def test_a_second_sync_changes_nothing():
    before = synced_digest()
    again = schedules_sync_code(now=NOW + timedelta(hours=20))

    assert (again.created, again.updated, again.disabled) == ([], [], [])
    assert Schedule.objects.get(name=DIGEST).next_run_at == before.next_run_at


@pytest.mark.django_db
def test_a_changed_declaration_updates_it_and_a_removed_one_disables_it(declared):
    synced_digest()
    declared[DIGEST] = Periodic(
        **{**vars(declared[DIGEST]), "cron_expression": "30 4 * * *", "time_zone": "Europe/Berlin"}
    )

    assert schedules_sync_code(now=NOW).updated == [DIGEST]
    schedule = Schedule.objects.get(name=DIGEST)
    assert (schedule.cron_expression, schedule.time_zone) == ("30 4 * * *", "Europe/Berlin")
    assert schedule.next_run_at == datetime(2027, 3, 2, 3, 30, tzinfo=UTC)

    del declared[DIGEST]
    assert schedules_sync_code(now=NOW).disabled == [DIGEST]
    schedule.refresh_from_db()
    assert (schedule.enabled, schedule.next_run_at) == (False, None)


@pytest.mark.django_db
def test_an_api_schedule_of_the_same_name_is_left_alone():
    Schedule.objects.filter(name=DIGEST).delete()
    schedule_create(name=DIGEST, job_template=TEMPLATE, interval_seconds=600)

    assert schedules_sync_code(now=NOW).skipped == [DIGEST]
    assert Schedule.objects.get(name=DIGEST).source == ScheduleSource.API


@pytest.mark.django_db
def test_a_users_schedule_of_the_same_name_does_not_stop_the_sync():
    """Users' schedules have names of their own: only an ownerless one shares the code's."""
    Schedule.objects.filter(name=DIGEST).delete()
    schedule_create(
        name=DIGEST,
        job_template=TEMPLATE,
        interval_seconds=600,
        owner=make_user("someone", "jobweaver_jobs.add_job"),
    )

    assert schedules_sync_code(now=NOW).created == [DIGEST]
    assert Schedule.objects.filter(name=DIGEST, source=ScheduleSource.CODE).count() == 1


@pytest.mark.django_db
def test_an_operator_addresses_a_code_schedule_by_name():
    synced_digest()
    operator = client_for(
        "operator", "jobweaver_schedules.view_schedule", "jobweaver_jobs.view_all_jobs"
    )
    user = client_for("user", "jobweaver_schedules.view_schedule")

    assert operator.get(f"/api/schedules/{DIGEST}").json()["source"] == "code"
    assert user.get(f"/api/schedules/{DIGEST}").status_code == 404  # not theirs to see


@pytest.mark.django_db
def test_a_code_schedule_is_read_only_in_the_api():
    synced_digest()
    api = client_for(
        "operator",
        "jobweaver_schedules.view_schedule",
        "jobweaver_schedules.change_schedule",
        "jobweaver_schedules.delete_schedule",
        "jobweaver_jobs.view_all_jobs",
        "jobweaver_jobs.operate_all_jobs",
    )

    shown = api.get(f"/api/schedules/{DIGEST}")
    patched = send(api, "patch", f"/api/schedules/{DIGEST}", {"intervalSeconds": 60})
    deleted = api.delete(f"/api/schedules/{DIGEST}")

    assert shown.status_code == 200 and shown.json()["source"] == "code"
    for response in (patched, deleted):
        assert response.status_code == 409, response.content
        assert response.json()["errorCode"] == "API.INVALID_STATE_TRANSITION"
        assert "declared in code" in response.json()["message"]
    assert Schedule.objects.get(name=DIGEST).cron_expression == "0 3 * * *"


@pytest.mark.django_db
def test_a_code_schedule_is_read_only_in_the_cli_and_the_admin(admin_client):
    schedule = synced_digest()

    with pytest.raises(CommandError) as refused:
        call_command("schedules", "disable", DIGEST)
    assert refused.value.returncode == 1
    change = reverse("admin:jobweaver_schedules_schedule_change", args=[schedule.pk])
    assert admin_client.post(change, {"name": DIGEST}).status_code == 403
    assert Schedule.objects.get(name=DIGEST).enabled


@pytest.mark.django_db(transaction=True)
def test_several_processes_syncing_at_once_make_one_schedule():
    Schedule.objects.filter(name=DIGEST).delete()
    ready = threading.Barrier(3)
    errors: list[BaseException] = []

    def sync() -> None:
        try:
            ready.wait()
            schedules_sync_code(now=NOW)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sync) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert Schedule.objects.filter(name=DIGEST).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_beats_fire_a_code_schedule_once_per_slot():
    schedule = synced_digest()

    two_beats(NOW, NOW + timedelta(days=3), step=timedelta(hours=1))

    assert submitted_slots(schedule) == [
        datetime(2027, 3, day, 3, 0, tzinfo=UTC) for day in (2, 3, 4)
    ]
    assert {job.instruction["task"] for job in jobs_of(schedule)} == {nightly_digest.module_path}


@dep14_task
def other_digest() -> None: ...


@pytest.mark.django_db
def test_a_bad_declaration_fails_where_it_is_written():
    with pytest.raises(TypeError, match="above @task"):
        periodic(cron="* * * * *")(lambda: None)
    with pytest.raises(InvalidRequest):
        periodic(cron="not a cron")(add)
    with pytest.raises(InvalidRequest):
        periodic(cron="* * * * *", interval_seconds=60)(add)

    with pytest.raises(ValueError, match="declared for both"):
        periodic(interval_seconds=60, name=DIGEST)(other_digest)
