"""`manage.py jobs … --as USERNAME` (§17): the command line run as a user sees and acts on what
that user may in the API; without --as it stays the trusted operator's tool."""

from __future__ import annotations

import json

import pytest

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.dashboard.tests.helpers import execution_of, fail_attempt
from jobweaver.jobs.management.commands.jobs import Command
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request

pytestmark = pytest.mark.django_db

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


@pytest.fixture
def jobs(run_command):
    return lambda *args: run_command(Command, "jobs", *args)


def failed_job_of(user):
    spec = parse_job_request({**LOG, "maxRetryCount": 0})
    job = job_submit(spec=spec, submitted_by=user).job
    fail_attempt(job, "kaput", [])
    return job


@pytest.fixture
def tenants():
    alice, bob = make_user("alice", *SUBMITTER), make_user("bob", *SUBMITTER)
    return alice, bob, failed_job_of(alice), failed_job_of(bob)


def test_a_user_lists_and_shows_only_their_own_jobs(jobs, tenants):
    _, _, hers, his = tenants
    listed = {row["jobId"] for row in json.loads(jobs("list", "--as", "alice", "--json").out)}
    assert listed == {str(hers.id)}
    assert jobs("show", str(hers.id), "--as", "alice").code == 0
    refused = jobs("show", str(his.id), "--as", "alice")
    assert refused.code == 2 and "not found" in refused.err
    # Trusted without --as: everyone's.
    everyone = {row["jobId"] for row in json.loads(jobs("list", "--json").out)}
    assert {str(hers.id), str(his.id)} <= everyone


def test_a_user_acts_on_their_own_jobs_only_and_anothers_changes_nothing(jobs, tenants):
    _, _, hers, his = tenants
    refused = jobs("retry", str(hers.id), str(his.id), "--as", "alice")
    assert refused.code == 2 and str(his.id) in refused.err
    assert execution_of(hers.id).status == execution_of(his.id).status == "FAILED"

    assert jobs("retry", "--all-failed", "--as", "alice").code == 0
    assert execution_of(hers.id).status == "PENDING"
    assert execution_of(his.id).status == "FAILED"


def test_seeing_all_is_not_acting_on_all(jobs, tenants):
    make_user("watcher", *SUBMITTER, "jobweaver_jobs.view_all_jobs")
    _, _, _, his = tenants
    assert jobs("show", str(his.id), "--as", "watcher").code == 0
    skipped = jobs("retry", str(his.id), "--as", "watcher")
    assert skipped.code == 1 and "operate_all_jobs" in skipped.out
    assert execution_of(his.id).status == "FAILED"


def test_an_unknown_or_inactive_user_is_bad_input(jobs, tenants):
    make_user("gone", *SUBMITTER, is_active=False)
    for name in ("nobody", "gone"):
        result = jobs("list", "--as", name)
        assert result.code == 2 and name in result.err
