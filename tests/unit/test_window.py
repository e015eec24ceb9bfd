"""The deliveries a slot an executor asks for, by how long its jobs hold a slot (pure)."""

from jobweaver.executor.window import LINE_SECONDS, Window, prefetch_for


def test_nothing_ran_yet_asks_for_the_minimum():
    assert prefetch_for(None, 2, 8) == 2


def test_the_line_holds_about_line_seconds_of_work_within_the_bounds():
    assert prefetch_for(LINE_SECONDS / 4, 2, 8) == 1 + 4
    assert prefetch_for(LINE_SECONDS / 3.5, 2, 8) == 1 + 4  # a part of a job counts whole
    assert prefetch_for(0.0, 2, 8) == 8  # no-op jobs: the maximum
    assert prefetch_for(LINE_SECONDS * 10, 2, 8) == 2  # long jobs: the minimum
    assert prefetch_for(LINE_SECONDS / 4, 3, 3) == 3  # equal bounds: a fixed prefetch


def test_the_mean_follows_the_recent_jobs():
    window = Window()
    window.ran(1.0)
    assert window.mean_seconds == 1.0
    for _ in range(200):
        window.ran(0.002)
    assert 0.002 <= window.mean_seconds < 0.003
