"""The outbox relay thread outlives any one failed run: an error in a run, or in checking its
connection afterwards, is logged and the next wake-up relays again (apps/outbox/services.py)."""

from __future__ import annotations

import threading

from django.db import connections

from jobweaver.outbox import services
from tests.stack import wait_for


def test_the_relay_thread_survives_errors_and_relays_on_the_next_wake(monkeypatch):
    runs: list[int] = []
    ran = threading.Event()

    def relay_pending() -> int:
        runs.append(1)
        ran.set()
        if len(runs) == 1:
            raise RuntimeError("database access not allowed")  # what a test's blocker raises
        return 0

    def check_connection(self) -> None:
        raise RuntimeError("database access not allowed")

    monkeypatch.setattr(services, "outbox_relay_pending", relay_pending)
    # On the class: each thread has its own connection object.
    wrapper = type(connections["default"])
    monkeypatch.setattr(wrapper, "close_if_unusable_or_obsolete", check_connection)
    relay = services._RelayThread()
    relay.start()

    relay.wake.set()
    wait_for(lambda: len(runs) == 1, timeout=5, message="the first run")
    wait_for(lambda: not relay.wake.is_set(), timeout=5, message="the wake-up to be taken")
    relay.wake.set()
    wait_for(lambda: len(runs) == 2, timeout=5, message="a run after the failed one")

    assert relay.is_alive()
