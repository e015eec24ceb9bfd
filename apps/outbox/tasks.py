from celery import shared_task

from apps.outbox.services import outbox_relay_pending


@shared_task(name="apps.outbox.tasks.relay_outbox")
def relay_outbox() -> int:
    """Beat: publish domain events that were not relayed right after their commit."""
    return outbox_relay_pending()
