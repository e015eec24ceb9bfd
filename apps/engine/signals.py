"""What the engine tells the processes around it, without importing them."""

from django.dispatch import Signal

# Sent after a transaction that wrote domain events commits: the outbox's relay listens
# (apps/outbox/apps.py) and publishes them at once rather than at its next beat.
events_committed = Signal()
