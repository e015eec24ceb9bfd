from jobweaver.celery import app
from jobweaver.outbox.services import outbox_relay_pending


@app.task(name="jobweaver.outbox.tasks.relay_outbox")
def relay_outbox() -> int:
    """Beat: publish domain events that were not relayed right after their commit."""
    return outbox_relay_pending()
