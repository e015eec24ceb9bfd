"""The job kinds registry: one class per kind of job (SIMULATION, TASK), owning its payload's
validation, its OpenAPI description, its part of the job detail and its admin rendering. The rest
of the code asks the registry (`kind_named`, `kind_of`, `all_kinds`) instead of testing a job's
type by name; tests/unit/test_job_kinds_only_here.py holds it to that.

A new kind touches: its choice in `JobType` (apps/jobs/models.py, with the migration that makes),
one `JobKind` subclass in apps/jobs/kinds/<kind>.py listed in `KINDS` below, its runner in
apps/executor/runners.py, and the tests of both.
"""

from __future__ import annotations

from jobweaver.jobs.kinds.base import JobKind
from jobweaver.jobs.kinds.simulation import SIMULATION
from jobweaver.jobs.kinds.task import TASK
from jobweaver.jobs.models import Job

# In the order the API's messages and the admin's choices list them.
KINDS: dict[str, JobKind] = {kind.name: kind for kind in (SIMULATION, TASK)}

__all__ = ["KINDS", "SIMULATION", "TASK", "JobKind", "all_kinds", "kind_named", "kind_of"]


def all_kinds() -> list[JobKind]:
    return list(KINDS.values())


def kind_named(name: str) -> JobKind:
    """The kind called `name` (a JobType value); LookupError for an unknown name."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):  # TypeError: an unhashable value from a request body
        raise LookupError(f"no job kind named {name!r}") from None


def kind_of(job: Job) -> JobKind:
    return kind_named(job.job_type)
