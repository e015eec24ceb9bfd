"""Write-behind (apps/core/writebehind.py) with real threads: a caller never waits for the write,
every item is written once and its own result reaches its callback, batches grow with the load
and never pass their bound, a write's error reaches each of its items, and closing writes what
was queued first."""

from __future__ import annotations

import threading

from jobweaver.core.writebehind import WriteBehind

DEADLINE = 10.0


class Answers:
    """Each item's (result, error), as its callback received them."""

    def __init__(self, expected: int):
        self.got: dict = {}
        self._lock = threading.Lock()
        self._all = threading.Event()
        self._expected = expected

    def done_for(self, item):
        def done(result, error) -> None:
            with self._lock:
                assert item not in self.got, f"{item} answered twice"
                self.got[item] = (result, error)
                if len(self.got) == self._expected:
                    self._all.set()

        return done

    def wait(self) -> dict:
        assert self._all.wait(DEADLINE), f"only {len(self.got)} of {self._expected} answered"
        return self.got


def test_a_lone_item_is_written_at_once_and_its_result_reaches_its_callback():
    batches = []
    writer = WriteBehind(lambda items: batches.append(list(items)) or items, max_batch=10, name="w")
    answers = Answers(1)
    writer.submit("a", answers.done_for("a"))
    assert answers.wait() == {"a": ("a", None)}
    assert batches == [["a"]]
    writer.close()


def test_callers_go_on_while_a_write_runs_and_what_they_queued_shares_the_next_writes():
    """The first write is held until the other 39 items are queued: submit never waits for it,
    and the items that arrived meanwhile go in the following writes, at most `max_batch` each."""
    batches: list[list[int]] = []
    writing, release = threading.Event(), threading.Event()

    def write(items: list[int]) -> list[int]:
        if not batches:
            writing.set()
            assert release.wait(DEADLINE)
        batches.append(list(items))
        return [item * 10 for item in items]

    writer = WriteBehind(write, max_batch=16, name="w")
    answers = Answers(40)
    writer.submit(0, answers.done_for(0))
    assert writing.wait(DEADLINE)
    for item in range(1, 40):
        writer.submit(item, answers.done_for(item))  # returns though the first write is held
    release.set()
    assert answers.wait() == {item: (item * 10, None) for item in range(40)}
    assert sorted(i for batch in batches for i in batch) == list(range(40))
    assert batches[0] == [0]
    assert [len(batch) for batch in batches[1:]] == [16, 16, 7]
    assert (writer.writes, writer.items) == (4, 40)
    writer.close()


def test_a_writes_error_reaches_each_of_its_items_and_the_next_write_goes_on():
    calls = []

    def write(items):
        calls.append(list(items))
        if len(calls) == 1:
            raise ConnectionError("database went away")
        return items

    writer = WriteBehind(write, max_batch=10, name="w")
    first = Answers(1)
    writer.submit("a", first.done_for("a"))
    result, error = first.wait()["a"]
    assert result is None and isinstance(error, ConnectionError)
    second = Answers(1)
    writer.submit("b", second.done_for("b"))
    assert second.wait() == {"b": ("b", None)}
    writer.close()


def test_a_write_that_answers_the_wrong_number_of_results_is_an_error():
    writer = WriteBehind(lambda items: [], max_batch=10, name="w")
    answers = Answers(1)
    writer.submit("a", answers.done_for("a"))
    result, error = answers.wait()["a"]
    assert result is None and isinstance(error, RuntimeError)
    writer.close()


def test_a_failing_callback_does_not_cost_the_others_theirs():
    release = threading.Event()
    writer = WriteBehind(lambda items: release.wait(DEADLINE) and items, max_batch=10, name="w")
    answers = Answers(2)

    def broken(result, error) -> None:
        raise ValueError("a caller's bug")

    writer.submit("first", answers.done_for("first"))
    writer.submit("broken", broken)
    writer.submit("second", answers.done_for("second"))
    release.set()
    assert answers.wait() == {"first": ("first", None), "second": ("second", None)}
    writer.close()


def test_closing_writes_what_was_queued_then_lets_go_of_the_writers_resources():
    release = threading.Event()
    idle = []
    writer = WriteBehind(
        lambda items: release.wait(DEADLINE) and items,
        max_batch=2,
        name="w",
        on_idle=lambda: idle.append(threading.current_thread().name),
    )
    answers = Answers(5)
    for item in range(5):
        writer.submit(item, answers.done_for(item))
    closer = threading.Thread(target=writer.close)
    closer.start()
    release.set()
    closer.join(DEADLINE)
    assert not closer.is_alive()
    assert answers.wait() == {item: (item, None) for item in range(5)}
    assert idle == ["w"]  # on the writer's own thread, once, after the last write
    try:
        writer.submit(9, answers.done_for(9))
    except RuntimeError:
        pass
    else:
        raise AssertionError("a closed writer took an item")


def test_an_idle_writer_lets_go_of_its_resources_and_writes_again_when_an_item_comes():
    idle = threading.Event()
    writer = WriteBehind(
        lambda items: items, max_batch=10, name="w", idle_seconds=0.05, on_idle=idle.set
    )
    first = Answers(1)
    writer.submit("a", first.done_for("a"))
    first.wait()
    assert idle.wait(DEADLINE)
    second = Answers(1)
    writer.submit("b", second.done_for("b"))
    assert second.wait() == {"b": ("b", None)}
    writer.close()
