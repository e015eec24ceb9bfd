"""The process pool's mechanics with real child processes and no broker
(apps/executor/process_pool.py): a child runs work sent over its pipe and reports progress and
its ending, stops when asked, is replaced when killed, dead or worn out. With real executors:
tests/integration/test_process_pool.py."""

from __future__ import annotations

import uuid

import pytest

from jobweaver.executor.pool_child import Finished, Progress, Work
from jobweaver.executor.process_pool import ChildDied, ProcessPool
from jobweaver.jobs.kinds import SIMULATION

LOGS = {"steps": [{"action": "LOG", "message": "one"}, {"action": "LOG", "message": "two"}]}
LONG_SLEEP = {"steps": [{"action": "SLEEP", "durationMs": 60_000}]}


def work(instruction: dict) -> Work:
    return Work(SIMULATION.name, uuid.uuid4(), 1, "trace", instruction)


def run(child, instruction: dict, timeout: float = 30) -> list:
    child.begin(work(instruction))
    messages: list = []
    for _ in range(int(timeout / 0.1)):
        messages += child.receive(0.1)
        if messages and isinstance(messages[-1], Finished):
            return messages
    raise AssertionError(f"no ending within {timeout} s: {messages}")


@pytest.fixture
def pool():
    made: list[ProcessPool] = []

    def make(**limits) -> ProcessPool:
        made.append(ProcessPool(1, **limits))
        made[-1].start()
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_child_runs_the_steps_and_reports_progress_and_log_lines(pool):
    child = pool().acquire()

    messages = run(child, LOGS)

    assert messages[:-1] == [Progress(1, 2, ("one",)), Progress(2, 2, ("two",))]
    assert (messages[-1].how, messages[-1].log_lines) == ("returned", ())
    assert messages[-1].max_rss_kb > 0


def test_a_child_asked_to_stop_stops_and_is_used_again(pool):
    processes = pool()
    child = processes.acquire()
    child.begin(work(LONG_SLEEP))
    assert child.receive(0.3) == []  # sleeping

    child.ask_to_stop()

    [stopped] = child.receive(5)
    assert stopped.how == "stopped"
    processes.release(child)
    again = processes.acquire()
    assert again is child
    assert run(again, LOGS)[-1].how == "returned"  # the stop request was cleared


def test_a_killed_child_is_replaced_and_a_dead_one_reports_its_exit_code(pool):
    processes = pool()
    child = processes.acquire()
    child.begin(work(LONG_SLEEP))
    child.process.kill()

    with pytest.raises(ChildDied, match=r"worker process died \(exit code -9\)"):
        child.receive(5)
    processes.release(child)

    replacement = processes.acquire()
    assert replacement is not child
    assert run(replacement, LOGS)[-1].how == "returned"


@pytest.mark.parametrize(
    ("limits", "replaced_after"),
    [({"max_tasks": 2}, 2), ({"max_memory_mb": 1}, 1)],  # any child is past 1 MB at once
)
def test_a_worn_child_is_retired_after_its_attempt(pool, limits, replaced_after):
    processes = pool(**limits)
    first = processes.acquire()
    seen = []
    for _ in range(replaced_after + 1):
        child = processes.acquire() if seen else first
        run(child, LOGS)
        seen.append(child)
        processes.release(child)

    assert seen[:replaced_after] == [first] * replaced_after
    assert seen[replaced_after] is not first
    assert first.exit_code(5) == 0  # retired: it exited on its own
