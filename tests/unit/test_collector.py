"""A started process freezes what it loaded and collects less often (core/collector.py)."""

from __future__ import annotations

import gc

from jobweaver.core import collector


def test_what_a_started_process_loaded_is_frozen_and_collections_are_rarer():
    before = gc.get_threshold()
    loaded = [object() for _ in range(10)]  # stands for what start-up loaded
    try:
        collector.settle_after_start()

        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == collector.THRESHOLDS
        assert collector.THRESHOLDS[0] > before[0]
        del loaded
        cycle = []
        cycle.append(cycle)  # garbage in a cycle made after the start is still collected
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
