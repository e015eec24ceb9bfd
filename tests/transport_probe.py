"""A consumer on JobWeaver's kombu transport, run as a separate process by the transport tests.

python -m tests.transport_probe BOOTSTRAP QUEUE GROUP ack-third-then-first
    receive 3 messages, ack the third then the first, commit, print the committed offsets
    as JSON, then wait to be killed
python -m tests.transport_probe BOOTSTRAP QUEUE GROUP collect N
    receive N messages, acking each, print their bodies as JSON, then exit cleanly
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

from kombu import Connection, Queue

from kombu_kafka import Transport


def connect(bootstrap: str, group: str) -> Connection:
    host, port = bootstrap.rsplit(":", 1)
    return Connection(
        hostname=host,
        port=int(port),
        transport=Transport,
        transport_options={
            "group_id": group,
            "kafka_consumer_config": {"session.timeout.ms": 6000},
        },
    )


def receive(conn: Connection, queue_name: str, count: int, *, prefetch: int, ack: bool) -> tuple:
    received = []

    def on_message(body, message):
        received.append((body, message))
        if ack:
            message.ack()

    consumer = conn.Consumer(
        Queue(queue_name, routing_key=queue_name), callbacks=[on_message], accept=["json"]
    )
    consumer.qos(prefetch_count=prefetch)
    consumer.consume()
    deadline = time.monotonic() + 60
    while len(received) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"received only {len(received)} of {count}")
        with contextlib.suppress(TimeoutError):
            conn.drain_events(timeout=0.5)
    return consumer, received


def main(bootstrap: str, queue_name: str, group: str, mode: str, *args: str) -> None:
    conn = connect(bootstrap, group)
    if mode == "ack-third-then-first":
        consumer, received = receive(conn, queue_name, 3, prefetch=3, ack=False)
        received[2][1].ack()
        received[0][1].ack()
        channel = consumer.channel
        channel.commit_now()
        print(
            json.dumps(
                {
                    "bodies": [body for body, _ in received],
                    "offsets": [message.kafka_offset for _, message in received],
                }
            ),
            flush=True,
        )
        time.sleep(3600)  # hold the unacked second message until killed
    elif mode == "collect":
        count = int(args[0])
        consumer, received = receive(conn, queue_name, count, prefetch=1, ack=True)
        print(json.dumps({"bodies": [body for body, _ in received]}), flush=True)
        conn.release()
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(*sys.argv[1:])
