"""Beat-driven tasks of the scheduler worker. Thin: they call services."""

import os
import threading

from celery.signals import worker_ready

from jobweaver.celery import app
from jobweaver.scheduler import wakeup
from jobweaver.scheduler.dispatch import dispatch_due_jobs, warm_up_publisher
from jobweaver.scheduler.rescue import rescue_expired_leases
from jobweaver.scheduler.retention import retention_prune


@app.task(name="jobweaver.scheduler.tasks.dispatch_due_jobs")
def dispatch_due_jobs_task() -> int:
    """Every JOBWEAVER_DISPATCH_INTERVAL_SECONDS: send what is due."""
    return len(dispatch_due_jobs())


@app.task(name="jobweaver.scheduler.tasks.rescue_expired_leases")
def rescue_expired_leases_task() -> int:
    """Every JOBWEAVER_RESCUE_INTERVAL_SECONDS: move on executions whose worker was lost."""
    return len(rescue_expired_leases())


@app.task(name="jobweaver.scheduler.tasks.prune_finished_work")
def prune_finished_work_task() -> dict[str, int]:
    """Every JOBWEAVER_PRUNE_INTERVAL_SECONDS: delete finished work past its retention."""
    return retention_prune()


@worker_ready.connect
def listen_for_free_credits(sender, **kwargs) -> None:
    """The scheduler worker dispatches as soon as a credit frees up (apps/scheduler/wakeup.py),
    with its Kafka producer warmed meanwhile."""
    if os.environ.get("JOBWEAVER_WORKER_ROLE") == "scheduler":
        threading.Thread(target=warm_up_publisher, name="warm-up", daemon=True).start()
        wakeup.start()
