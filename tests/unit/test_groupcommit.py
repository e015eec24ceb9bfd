"""Group commit (apps/core/groupcommit.py) with real threads: one write at a time, every item
written once and answered with its own result, batches that grow with the load and never pass
their bound, an alone item written at once, and a write's error raised in each of its threads."""

from __future__ import annotations

import threading

import pytest

from jobweaver.core.groupcommit import GroupCommit

DEADLINE = 10.0


def run_threads(count: int, target) -> list:
    results: list = [None] * count
    errors: list = []

    def one(index: int) -> None:
        try:
            results[index] = target(index)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive(), "a thread waited forever"
    return results if not errors else [*results, *errors]


def test_an_item_alone_is_written_at_once_in_a_batch_of_its_own():
    batches = []
    writer = GroupCommit(lambda items: batches.append(list(items)) or items, max_batch=10)
    assert writer.submit("a") == "a"
    assert writer.submit("b") == "b"
    assert batches == [["a"], ["b"]]


def test_under_load_items_share_writes_each_answered_once_never_over_the_bound():
    """The first write is held until every thread has queued its item: the items that arrived
    meanwhile go in the following writes, at most `max_batch` each."""
    batches: list[list[int]] = []
    in_write = threading.Lock()  # fails the test if two writes ever overlap
    queued = threading.Semaphore(0)
    first = threading.Event()

    def write(items: list[int]) -> list[int]:
        assert in_write.acquire(blocking=False), "two writes at once"
        try:
            if not first.is_set():
                first.set()
                for _ in range(39):  # everyone else has submitted
                    assert queued.acquire(timeout=DEADLINE)
            batches.append(list(items))
            return [item * 10 for item in items]
        finally:
            in_write.release()

    writer = GroupCommit(write, max_batch=16)

    def submit(index: int) -> int:
        if index:
            first.wait(DEADLINE)
            queued.release()
        return writer.submit(index)

    results = run_threads(40, submit)

    assert results == [index * 10 for index in range(40)]
    assert sorted(item for batch in batches for item in batch) == list(range(40))
    assert max(len(batch) for batch in batches) <= 16
    assert len(batches) <= 1 + -(-39 // 16)  # the first alone, then full batches
    assert writer.items == 40 and writer.writes == len(batches)


def test_a_writes_error_is_raised_in_each_thread_whose_item_it_held_and_the_next_write_goes_on():
    def write(items: list[str]) -> list[str]:
        if "bad" in items:
            raise ConnectionError("database went away")
        return items

    writer = GroupCommit(write, max_batch=5)
    with pytest.raises(ConnectionError):
        writer.submit("bad")
    assert writer.submit("good") == "good"


def test_a_write_that_answers_the_wrong_number_of_results_is_an_error():
    writer = GroupCommit(lambda items: [], max_batch=5)
    with pytest.raises(RuntimeError, match="0 results for 1"):
        writer.submit("x")
