"""The cockpit in a real browser (headless Chromium driven by selenium) against a live server
and real workers: an operator logs in, filters FAILED jobs, retries all matching and sees them
move on; the dashboard updates a count without reloading. Screenshots go to artifacts/. The
pages run under the site's Content-Security-Policy: the browser reports no violation.

One browser for the whole session (starting Chromium is the slow part); the server is Django's
live-server thread on this test database, in autocommit (`live_db`), so the workers see what
the test writes and the browser sees what the workers do.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.test import override_settings
from django.test.testcases import LiveServerThread
from django.utils import timezone

from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from jobweaver.workflows.models import Workflow
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request
from tests.stack import skip_or_fail_without, wait_for

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
PASSWORD = "operator-password-for-tests"
WAIT_SECONDS = 60


@pytest.fixture(scope="session")
def browser():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        skip_or_fail_without(
            "chromium", "Debian's chromium and chromium-driver are not installed (infra/stack.sh)"
        )
    profile = tempfile.mkdtemp(prefix="jobweaver-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    # The console, where Chromium reports what the Content-Security-Policy blocked.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(autouse=True)
def leave_the_page(browser):
    """The dashboard polls its JSON; leave it after each test, or its requests reach the live
    server after the test's database access has ended."""
    yield
    browser.delete_all_cookies()  # while still on the site: cookies are per domain
    browser.get("about:blank")


@pytest.fixture(scope="session")
def web(django_db_setup):
    """Django's live-server thread on the test database; plain HTTP, so cookies not Secure."""
    with override_settings(SESSION_COOKIE_SECURE=False, CSRF_COOKIE_SECURE=False):
        server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        try:
            yield f"http://127.0.0.1:{server.port}"
        finally:
            server.terminate()


@pytest.fixture
def operator(live_db):
    username = f"operator-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_superuser(username=username, email="", password=PASSWORD)
    return username


def log_in(browser, web: str, username: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{web}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(
        lambda: "jw-open-dashboard" in browser.page_source,
        timeout=WAIT_SECONDS,
        message="the admin index after login",
    )


def csp_violations(browser) -> list[str]:
    """What the browser refused under the Content-Security-Policy since the last call."""
    return [
        entry["message"]
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"]
    ]


def screenshot(browser, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def count_shown(browser, selector: str) -> int | None:
    """The number in a dashboard tile; None while the refresh swaps the panels under us."""
    try:
        elements = browser.find_elements(By.CSS_SELECTOR, selector)
        return int(elements[0].text) if elements else None
    except StaleElementReferenceException:
        return None


def status_of(job_id) -> str:
    return JobExecution.objects.get(job_id=job_id).status


def test_operator_filters_failed_jobs_and_retries_all_matching(
    stack, live_db, browser, web, operator
):
    trace = f"browser-{uuid.uuid4().hex[:12]}"
    request = {
        "jobType": "SIMULATION",
        "maxRetryCount": 0,
        "payload": {"steps": [{"action": "FLAKY", "failTimes": 1, "message": "flaky upstream"}]},
    }
    jobs = [job_submit(spec=parse_job_request(request), trace_id=trace).job for _ in range(3)]
    for job in jobs:
        wait_for(
            lambda job=job: status_of(job.id) == "FAILED",
            timeout=WAIT_SECONDS,
            message=f"job {job.id} to dead-letter",
        )
    log_in(browser, web, operator)

    # The job list, filtered: FAILED (from the filter sidebar) and this trace (the search box).
    browser.get(f"{web}/admin/jobweaver_jobs/job/?q={trace}")
    browser.find_element(
        By.CSS_SELECTOR, "#changelist-filter a[href*='execution__status=FAILED']"
    ).click()
    wait_for(
        lambda: "execution__status=FAILED" in browser.current_url,
        timeout=WAIT_SECONDS,
        message="the FAILED filter",
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 3
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list .jw-badge.jw-FAILED")) == 3
    screenshot(browser, "job-list-failed")

    browser.find_element(By.CSS_SELECTOR, "#jw-all-matching a[data-bulk='retry']").click()
    count = wait_for(
        lambda: browser.find_elements(By.ID, "jw-confirm-count"),
        timeout=WAIT_SECONDS,
        message="the confirmation page",
    )
    assert count[0].text == "3"
    screenshot(browser, "retry-all-matching-confirm")
    browser.find_element(By.ID, "jw-confirm").click()

    # Back on the filtered list: the report, and no FAILED job of this trace left.
    wait_for(
        lambda: "Retried 3 jobs." in browser.page_source,
        timeout=WAIT_SECONDS,
        message="the report of the bulk retry",
    )
    assert not browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    screenshot(browser, "retry-all-matching-done")
    # The workers run them again: FLAKY fails once only, so each now completes.
    for job in jobs:
        wait_for(
            lambda job=job: status_of(job.id) == "COMPLETED",
            timeout=WAIT_SECONDS,
            message=f"job {job.id} to complete after the retry",
        )
    browser.get(f"{web}/admin/jobweaver_jobs/job/?q={trace}&execution__status=COMPLETED")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list .jw-badge.jw-COMPLETED")) == 3
    screenshot(browser, "job-list-completed")


def test_dashboard_counts_change_without_a_reload(live_db, browser, web, operator):
    log_in(browser, web, operator)
    browser.find_element(By.ID, "jw-open-dashboard").click()
    pending = "#jw-panels a[data-count='pending'] .jw-tile-count"
    (before,) = wait_for(
        lambda: [shown] if (shown := count_shown(browser, pending)) is not None else None,
        timeout=WAIT_SECONDS,
        message="the dashboard",
    )
    # A marker on the page's window: a reload would wipe it.
    browser.execute_script("window.jwNoReload = true;")
    screenshot(browser, "dashboard-before")

    run_at = (timezone.now() + timedelta(days=1)).isoformat()  # stays PENDING, workers or not
    job_submit(
        spec=parse_job_request(
            {
                "jobType": "SIMULATION",
                "runAt": run_at,
                "payload": {"steps": [{"action": "LOG", "message": "for the dashboard"}]},
            }
        )
    )

    wait_for(
        lambda: (count_shown(browser, pending) or 0) > before,
        timeout=WAIT_SECONDS,
        message="the pending count to go up on the open page",
    )
    assert browser.execute_script("return window.jwNoReload === true;")
    assert "<svg" in browser.page_source and "Kafka topics" in browser.page_source
    screenshot(browser, "dashboard")
    # Its script ran (the count moved) under the policy, which the browser saw and kept.
    assert csp_violations(browser) == []
    assert browser.execute_script(
        "return document.querySelector('script[src*=\"dashboard/dashboard.js\"]').nonce"
    )


def test_a_workflow_page_draws_fifty_jobs_by_status_with_links(browser, web, operator, stack):
    """A 50-job workflow with a failure: its page shows every job as a node coloured by its
    status, and a node leads to its job's page."""
    log = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    fail = {
        "jobType": "SIMULATION",
        "maxRetryCount": 0,
        "payload": {"steps": [{"action": "FAIL", "message": "no", "retryable": False}]},
    }
    jobs = [{"ref": "extract", "job": log}]
    jobs += [{"ref": f"part-{n:02}", "dependsOn": ["extract"], "job": log} for n in range(40)]
    jobs += [{"ref": "broken", "dependsOn": ["extract"], "job": fail}]
    jobs += [
        {"ref": f"merge-{n}", "dependsOn": [f"part-{m:02}" for m in range(n, 40, 4)], "job": log}
        for n in range(4)
    ]
    jobs += [{"ref": "after-broken", "dependsOn": ["broken"], "job": log}]
    jobs += [
        {"ref": "report", "dependsOn": [f"merge-{n}" for n in range(4)], "job": log},
        {"ref": "publish", "dependsOn": ["report", "after-broken"], "job": log},
        {"ref": "notify", "dependsOn": ["report"], "job": log},
    ]
    assert len(jobs) == 50
    workflow = workflow_submit(spec=parse_workflow_request({"name": "fifty", "jobs": jobs}))
    wait_for(
        lambda: Workflow.objects.get(id=workflow.id).status == "FAILED",
        timeout=WAIT_SECONDS,
        message="the workflow to finish",
    )
    log_in(browser, web, operator)

    browser.get(f"{web}/admin/jobweaver_workflows/workflow/{workflow.id}/change/")

    nodes = browser.find_elements(By.CSS_SELECTOR, "svg.jw-workflow-graph g.jw-node")
    statuses = {node.get_attribute("data-status") for node in nodes}
    assert len(nodes) == 50
    assert statuses == {"COMPLETED", "FAILED", "CANCELLED"}
    browser.execute_script("document.querySelector('svg.jw-workflow-graph').scrollIntoView()")
    screenshot(browser, "workflow-page")
    assert csp_violations(browser) == []
    link = browser.find_element(By.CSS_SELECTOR, "svg.jw-workflow-graph a")
    browser.execute_script(
        "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", link
    )
    wait_for(
        lambda: "/admin/jobweaver_jobs/job/" in browser.current_url,
        timeout=WAIT_SECONDS,
        message="a node to lead to its job",
    )
