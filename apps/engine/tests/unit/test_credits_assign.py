"""Flow control's pure assignment of deliveries to executors (apps/engine/claim/credits.py)."""

from collections import Counter

from jobweaver.engine.claim.credits import Credit, assign, pools


def test_deliveries_fill_executors_in_proportion_to_their_free_credits():
    credits = [Credit("small", 2, [0, 1]), Credit("large", 8, [2, 3, 4])]

    chosen = assign(10, credits)

    assert Counter(worker for worker, _ in chosen) == {"large": 8, "small": 2}


def test_one_dispatchs_deliveries_to_an_executor_share_one_of_its_partitions():
    # librdkafka sends one produce request per partition: a batch on one partition is one
    # request to the broker and one fetch for the executor, not one per delivery.
    credits = [Credit("small", 2, [0, 1]), Credit("large", 8, [2, 3, 4])]

    chosen = assign(10, credits)

    assert len({p for w, p in chosen if w == "large"}) == 1
    assert {p for w, p in chosen if w == "large"} <= {2, 3, 4}
    assert len({p for w, p in chosen if w == "small"}) == 1
    assert {p for w, p in chosen if w == "small"} <= {0, 1}


def test_no_more_than_the_free_credits_are_assigned():
    credits = [Credit("a", 1, [0]), Credit("b", 0, [1]), Credit("c", -3, [2])]

    assert assign(5, credits) == [("a", 0)]


def test_the_most_free_executor_goes_first_so_an_idle_one_takes_new_work():
    busy, idle = Credit("busy", 1, [0]), Credit("idle", 8, [1])

    assert assign(1, [busy, idle]) == [("idle", 1)]


def test_nothing_to_assign_without_executors():
    assert assign(3, []) == []


def test_successive_single_dispatches_spread_over_the_executors_partitions():
    partitions = [0, 1, 2, 3]
    chosen = [
        assign(1, [Credit("one", free, partitions)])[0][1]  # one more in flight each time
        for free in range(16, 12, -1)
    ]
    assert sorted(chosen) == partitions


def test_pools_group_executors_by_the_queues_they_serve_and_skip_full_ones():
    credits = [
        Credit("a", 2, [0], ("default",)),
        Credit("b", 3, [1], ("gpu",)),
        Credit("c", 0, [2], ("gpu",)),  # no credit left
        Credit("d", 1, [], ("gpu",)),  # no partition: nothing reaches it
        Credit("e", 4, [3], ("default",)),
    ]

    assert [(queues, [c.worker_id for c in pool]) for queues, pool in pools(credits)] == [
        (("default",), ["a", "e"]),
        (("gpu",), ["b"]),
    ]
