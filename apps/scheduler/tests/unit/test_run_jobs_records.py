"""How dispatch packs deliveries into run-job records (issue 34): one record per executor
partition with that partition's deliveries in their claim order; a delivery without a partition
alone; a lone delivery's record carries its job, event and trace as before."""

from __future__ import annotations

import kombu_kafka
from jobweaver.scheduler.dispatch import TRACE_HEADER, Delivery, _by_partition, _record


def delivery(n: int, partition: int | None, trace: str | None = None) -> Delivery:
    return Delivery.traced(f"job-{n}", f"event-{n}", partition, trace, 0.0)


def test_one_record_per_partition_in_claim_order():
    claimed = [delivery(1, 3), delivery(2, 5), delivery(3, 3), delivery(4, None), delivery(5, 5)]

    groups = _by_partition(claimed)

    assert [(partition, [d.job_id for d in ds]) for partition, ds in groups] == [
        (3, ["job-1", "job-3"]),
        (5, ["job-2", "job-5"]),
        (None, ["job-4"]),
    ]


def test_a_record_of_several_jobs_names_them_and_goes_to_its_partition():
    args, headers = _record(3, [delivery(1, 3, "t1"), delivery(3, 3, "t3")])

    assert args == [["job-1", "event-1", "t1"], ["job-3", "event-3", "t3"]]
    assert headers[kombu_kafka.PARTITION_HEADER] == 3
    assert headers[kombu_kafka.KEY_HEADER] == "job-1"
    assert headers[kombu_kafka.RECORD_HEADERS_HEADER] == {
        "jobIds": "job-1,job-3",
        "eventIds": "event-1,event-3",
    }
    assert TRACE_HEADER not in headers  # each job's trace is in its delivery


def test_a_lone_delivery_reads_as_before():
    args, headers = _record(None, [delivery(4, None, "t4")])

    assert args == [["job-4", "event-4", "t4"]]
    assert kombu_kafka.PARTITION_HEADER not in headers
    assert headers[kombu_kafka.KEY_HEADER] == "job-4"
    assert headers[TRACE_HEADER] == "t4"
    assert headers[kombu_kafka.RECORD_HEADERS_HEADER] == {
        "jobId": "job-4",
        "eventId": "event-4",
        "traceId": "t4",
    }
