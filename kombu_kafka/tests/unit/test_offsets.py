"""The contiguous commit watermark: never past an unfinished message."""

from kombu_kafka.offsets import CommitPolicy, OffsetTracker, PartitionState

TP = ("run-job", 0)


def test_watermark_advances_only_over_a_contiguous_run():
    state = PartitionState()
    for offset in (10, 11, 12):
        state.delivered(offset)
    assert state.done(12) is False
    assert state.watermark is None
    assert state.done(10) is True
    assert state.watermark == 11  # 11 is still in flight: 12 stays uncommitted
    assert state.done(11) is True
    assert state.watermark == 13
    assert state.in_flight == 0


def test_gaps_in_offsets_do_not_block_the_watermark():
    # Offsets need not be consecutive (compaction, transaction markers): only delivered ones count.
    state = PartitionState()
    for offset in (3, 7, 9):
        state.delivered(offset)
    state.done(3)
    state.done(7)
    assert state.watermark == 8


def test_done_twice_or_unknown_offsets_change_nothing():
    state = PartitionState()
    state.delivered(5)
    assert state.done(4) is False
    assert state.done(5) is True
    assert state.done(5) is False
    assert state.watermark == 6


def test_redelivery_from_an_earlier_offset_restarts_tracking():
    state = PartitionState()
    for offset in (5, 6, 7):
        state.delivered(offset)
    state.delivered(6)  # the broker went back
    assert state.in_flight == 1
    state.done(6)
    assert state.watermark == 7


def test_tracker_commits_per_partition_and_forgets_what_it_committed():
    tracker = OffsetTracker()
    tracker.assign([TP, ("run-job", 1)])
    tracker.delivered("run-job", 0, 0)
    tracker.delivered("run-job", 0, 1)
    tracker.delivered("run-job", 1, 40)
    tracker.done("run-job", 0, 1)
    tracker.done("run-job", 1, 40)
    assert tracker.committable() == {("run-job", 1): 41}
    tracker.mark_committed({("run-job", 1): 41})
    assert tracker.committable() == {}
    tracker.done("run-job", 0, 0)
    assert tracker.committable() == {TP: 2}


def test_revoke_returns_the_final_offsets_and_drops_the_state():
    tracker = OffsetTracker()
    tracker.assign([TP])
    for offset in (0, 1, 2):
        tracker.delivered("run-job", 0, offset)
    tracker.done("run-job", 0, 0)
    tracker.done("run-job", 0, 2)
    assert tracker.revoke([TP]) == {TP: 1}
    # A late ack of a revoked partition is ignored: the new owner re-reads from offset 1.
    tracker.done("run-job", 0, 1)
    assert tracker.committable() == {}
    assert tracker.in_flight() == 0


def test_commit_policy_by_count_and_by_time():
    tracker = OffsetTracker(CommitPolicy(max_messages=3, max_interval_seconds=60))
    tracker.assign([TP])
    for offset in range(3):
        tracker.delivered("run-job", 0, offset)
    tracker.done("run-job", 0, 0)
    tracker.done("run-job", 0, 1)
    assert not tracker.should_commit()
    tracker.done("run-job", 0, 2)
    assert tracker.should_commit()
    tracker.mark_committed(tracker.committable())
    assert not tracker.should_commit()
    tracker.delivered("run-job", 0, 3)
    tracker.done("run-job", 0, 3)
    assert not tracker.should_commit()
    assert tracker.should_commit(now=10**9)  # long after the last commit
