"""The jobs app's `run_command` fixture: management commands run as a shell would; and every
schedule test starts from the schedules it makes."""

import pytest

from jobweaver.jobs.tests.conftest import run_command  # noqa: F401


@pytest.fixture(autouse=True)
def _no_code_schedules(request):
    """The test database is migrated, so it holds the code schedules of the reference site's
    examples (post_migrate syncs @periodic, test_periodic.py): set aside here, so what a test
    lists and counts is what it made."""
    if request.node.get_closest_marker("django_db") is None:
        return
    request.getfixturevalue("_django_db_helper")
    from jobweaver.schedules.models import Schedule, ScheduleSource

    Schedule.objects.filter(source=ScheduleSource.CODE).delete()
