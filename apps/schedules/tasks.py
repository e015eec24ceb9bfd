"""Beat-driven task of recurring jobs. Thin: it calls the service."""

from jobweaver.celery import app
from jobweaver.schedules.services import schedules_fire


@app.task(name="jobweaver.schedules.tasks.fire_schedules")
def fire_schedules() -> int:
    """Every JOBWEAVER_SCHEDULES_INTERVAL_SECONDS: submit the jobs of the due slots. Two beats,
    or a redelivered tick, submit each slot once (apps/schedules/services.py)."""
    return sum(len(firing.submitted) for firing in schedules_fire())
