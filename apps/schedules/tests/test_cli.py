"""`manage.py schedules …` in-process, as a shell runs it: output, --json, and exit codes 0
(done) and 2 (bad input, nothing changed)."""

from __future__ import annotations

import json

import pytest

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.schedules.management.commands.schedules import SUBCOMMANDS, Command
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create
from jobweaver.schedules.tests.helpers import TEMPLATE, jobs_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def schedules(run_command):
    return lambda *args: run_command(Command, "schedules", *args)


def test_help_runs(schedules):
    for args in [("--help",), *((name, "--help") for name in SUBCOMMANDS)]:
        assert schedules(*args).code == 0, args


def test_create_show_list_disable_enable_fire_delete(schedules, tmp_path):
    template_file = tmp_path / "template.json"
    template_file.write_text(json.dumps(TEMPLATE))

    created = schedules(
        "create", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
        "--template-file", str(template_file), "--json",
    )  # fmt: skip
    assert created.code == 0, created.err
    assert json.loads(created.out)["timeZone"] == "Europe/Berlin"
    quick = schedules("create", "quick", "--interval", "1", "--template", json.dumps(TEMPLATE))
    assert quick.code == 0 and "schedule quick created" in quick.out

    shown = schedules("show", "nightly")
    assert shown.code == 0 and "cron 30 2 * * * (Europe/Berlin)" in shown.out
    listed = json.loads(schedules("list", "--json").out)
    assert [row["name"] for row in listed] == ["nightly", "quick"]

    assert schedules("disable", "nightly").code == 0
    assert Schedule.objects.get(name="nightly").enabled is False
    enabled = schedules("enable", "nightly", "--json")
    assert enabled.code == 0 and json.loads(enabled.out)["nextRunAt"]

    next_run = Schedule.objects.get(name="quick").next_run_at
    fired = schedules("fire", "--now", next_run.isoformat(), "--json")
    assert fired.code == 0, fired.err
    [firing] = json.loads(fired.out)
    assert firing["schedule"] == "quick" and len(firing["submitted"]) == 1
    assert len(jobs_of(Schedule.objects.get(name="quick"))) == 1

    assert schedules("delete", "quick").code == 0
    assert not Schedule.objects.filter(name="quick").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("create", "x", "--cron", "bad cron", "--template", json.dumps(TEMPLATE)),
        ("create", "x", "--interval", "0", "--template", json.dumps(TEMPLATE)),
        ("create", "x", "--interval", "60", "--template", "{not json"),
        ("create", "x", "--interval", "60", "--template", '{"jobType": "SIMULATION"}'),
        ("create", "x", "--interval", "60", "--tz", "UTC", "--template", json.dumps(TEMPLATE)),
        ("create", "x", "--interval", "60", "--template-file", "/nonexistent/template.json"),
        ("create", "x", "--cron", "0 0 * * *", "--interval", "5", "--template", "{}"),
        ("create", "x", "--template", json.dumps(TEMPLATE)),
        ("show", "missing"),
        ("enable", "missing"),
        ("delete", "missing"),
        ("fire", "--now", "yesterday"),
        ("fire", "--now", "2026-01-01T00:00:00"),
        ("nonsense",),
    ],
)
def test_bad_input_exits_2_with_one_line_and_changes_nothing(schedules, args):
    result = schedules(*args)

    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith("schedules: error: ") and result.err.count("\n") == 1
    assert not Schedule.objects.exists()


def test_owner_addresses_a_users_schedule(schedules):
    alice = make_user("alice", *SUBMITTER)
    schedule_create(name="same", interval_seconds=60, job_template=TEMPLATE, owner=alice)
    schedule_create(name="same", interval_seconds=120, job_template=TEMPLATE)

    listed = schedules("list")
    assert "OWNER" in listed.out and "alice" in listed.out
    assert [row["owner"] for row in json.loads(schedules("list", "--json").out)] == ["alice", None]
    assert json.loads(schedules("list", "--owner", "alice", "--json").out)[0]["owner"] == "alice"
    assert json.loads(schedules("show", "same", "--json").out)["intervalSeconds"] == 120
    shown = schedules("show", "same", "--owner", "alice")
    assert shown.code == 0 and "every 60 s" in shown.out and "owner        alice" in shown.out

    assert schedules("disable", "same", "--owner", "alice").code == 0
    assert Schedule.objects.get(owner=alice).enabled is False  # still alice's
    assert Schedule.objects.get(owner=None).enabled is True
    missing = schedules("delete", "same", "--owner", "bob")
    assert missing.code == 2 and "no such schedule of bob" in missing.err
